/* Choosing the free block for a request: the strategies. Inline: it is the
 * better half of every allocation.
 *
 * w is the request plus its worst-case padding (alignment, granularity).
 * Every block of a class at or above class_round_up(w) holds it wherever it
 * starts: the "guaranteed" classes, two bit scans away.
 *
 * FIRST_FIT takes the head of the first non-empty guaranteed class: TLSF's
 * "good fit", the fewest memory touches. It never looks at blocks of the
 * request's own class, some of which fit, and splits larger ones instead.
 *
 * BEST_FIT (the default) first tries the head of the request's own class:
 * such a block is at most 1/SL_N larger than the request and fits often
 * enough, depending on where it starts. Once the allocator is tight
 * (internal.h, mti_alloc_set_tight), it then tries the head of the next
 * non-empty class below the guaranteed ones. Failing that it compares the
 * heads of the first GUARANTEED_HEADS non-empty guaranteed classes and
 * takes the lower (GUARANTEED_SPAN). Class heads are kept low (tlsf_link),
 * so allocations pack towards the start of regions and large free blocks
 * survive at their ends. Heads are checked on their nodes (an empty class's
 * head is the sink, which no request fits).
 *
 * When no guaranteed class has a block (a nearly full allocator), both end
 * with a bounded best-fit scan of the classes between the request's own
 * and the guaranteed ones, whose blocks may hold the request depending on
 * where they start, then of the largest class: at most SCAN_LIMIT blocks
 * in all, so both strategies stay O(1). This is what lets an aged heap fill
 * to 0.99 before it refuses a request.
 *
 * Best fit's fast path (alloc.c) and mti_alloc_first_fit_fast are the strategies without
 * granularity pages, inline on the allocation's fast path, on head blocks
 * only; mti_alloc_search is everything, out of line: for best fit it always
 * tries the next class and compares two guaranteed heads without the span
 * rule (granularity pages make it slow anyway). */
#ifndef MT_ALLOC_SEARCH_H
#define MT_ALLOC_SEARCH_H

#include "tlsf.h"

#define GUARANTEED_HEADS 2
/* Of the first two guaranteed heads, the second is taken when it is lower
 * and its class at most this many classes above the first: packing low
 * (what keeps the benchmark's fragmentation at 80% below the baseline's),
 * without splitting much larger blocks. Tight (internal.h), only nearly
 * equal classes: near full, larger blocks are worth more whole. */
#define GUARANTEED_SPAN 4
#define TIGHT_SPAN 2

/* Offset at which the request starts in free block x, or NO_FIT. The block's
 * neighbours are used blocks or the sentinel: with granularity separation,
 * a used neighbour of the other kind must not share a page with the
 * request. */
static inline uint64_t mti_alloc_fit(const mt_alloc *a, const blk *x, const mta_req *r)
{
    uint64_t start = align_up(x->off, r->align);
    if (a->pshift != 0) {
        unsigned p = a->pshift;
        const blk *pv = NODE(a->b, x->prev_phys), *nx = NODE(a->b, x->next_phys);
        if (!(pv->size & SZ_SENT) && blk_kind(pv) != r->kind &&
            ((x->off - 1) >> p) == (start >> p))
            start = align_up(align_up(x->off, 1ull << p), r->align);
        uint64_t end = start + r->size;
        if (!(nx->size & SZ_SENT) && blk_kind(nx) != r->kind &&
            ((end - 1) >> p) == (blk_off(nx) >> p))
            return NO_FIT;
    }
    return start + r->size <= x->off + x->size ? start : NO_FIT;
}

/* Size of a free block that holds the request wherever it starts. */
static inline uint64_t mti_alloc_worst_case(const mt_alloc *a, const mta_req *r)
{
    if (a->pshift == 0)
        return r->size + r->align - 1;
    uint64_t page = 1ull << a->pshift;
    uint64_t lead = r->align > page ? r->align : page;
    /* Start pushed to a page (or alignment) boundary, end pulled back off the
     * next block's page. */
    return r->size + (lead - 1) + (page - 1);
}

/* Where the request starts in a class's head block, or NO_FIT (also for an
 * empty class's, the sink): the fit test without granularity separation.
 * The subtraction is arranged so that the sink (offset UINT64_MAX, size 0)
 * fails whatever align_up made of its offset. */
static inline uint64_t head_fit(const blk *h, const mta_req *r)
{
    uint64_t start = align_up(h->off, r->align);
    return (start - h->off) + r->size <= h->size ? start : NO_FIT;
}

/* head_fit(h, r) != NO_FIT for a request of `size` granules aligned to
 * amask + 1 (the fast path keeps the mask), without comparing with
 * NO_FIT. What aligning skips is (off - 1 | amask) - (off - 1), which gcc
 * turns into -off & amask: no ~amask kept in a register for the rounding
 * (-3 instructions a pair). The sink (offset UINT64_MAX, size 0) skips 0
 * or 1 granule and fits no request of at least one. */
static inline int head_fits_mask(const blk *h, uint64_t size, uint64_t amask)
{
    return (((h->off - 1) | amask) - (h->off - 1)) + size <= h->size;
}

/* Where the request starts in the head block of class c, or NO_FIT (also
 * for an empty class). */
static inline uint64_t mti_alloc_fit_head(const mt_alloc *a, unsigned c, const mta_req *r)
{
    const blk *h = NODE(a->b, a->ix.head[c]);
    if (a->pshift != 0)
        return h->size ? mti_alloc_fit(a, h, r) : NO_FIT;
    return head_fit(h, r);
}

/* Best fit below the guaranteed class cw: the head of the request's own
 * class cu, then of the next non-empty class if it is still below cw. */
static inline uint32_t mti_alloc_best_below(const mt_alloc *a, const mta_req *r, unsigned cu,
                                      unsigned cw, uint64_t *start)
{
    uint64_t s = mti_alloc_fit_head(a, cu, r);
    if (s == NO_FIT && cu + 1 < cw) {
        int k = tlsf_class_from(&a->ix, cu + 1);
        if (k < 0 || (unsigned)k >= cw)
            return NIL;
        cu = (unsigned)k;
        s = mti_alloc_fit_head(a, cu, r);
    }
    if (s == NO_FIT)
        return NIL;
    *start = s;
    return a->ix.head[cu];
}

/* The class with the lowest head offset among the first `heads`
 * non-empty classes at or above cw (ties: the smaller class), or -1. The
 * classes come straight off the bitmaps, lowest set bit first. */
static inline int mti_alloc_lowest_head(const mt_alloc *a, unsigned cw, unsigned heads)
{
    const tlsf_idx *ix = &a->ix;
    unsigned w = cw / 64;
    uint64_t m = ix->cls_map[w] & (~0ull << (cw % 64));
    uint64_t best_off = UINT64_MAX;
    int best = -1;
    for (unsigned k = 0; k < heads; k++) {
        while (m == 0) { /* the next words: 64 classes span 64 / SL_N powers of two */
            if (++w == CLS_WORDS)
                return best;
            m = ix->cls_map[w];
        }
        unsigned c = w * 64 + (unsigned)__builtin_ctzll(m);
        m &= m - 1;
        uint64_t off = NODE(a->b, ix->head[c])->off;
        best = off < best_off ? (int)c : best;
        best_off = off < best_off ? off : best_off;
    }
    return best;
}

/* Of the first two non-empty classes at or above cw, both in bitmap word
 * w (m: the word from cw on; m2: m without its lowest bit, not 0), the
 * one whose head is lower if the second is at most `span` classes above
 * the first, else the first: mti_alloc_lowest_head(a, cw, 2) with the
 * span rule, for the fast path (alloc.c), which has tested m2. */
static inline int mti_alloc_lower_of_two(const mt_alloc *a, unsigned w, uint64_t m, uint64_t m2,
                                         unsigned span)
{
    const tlsf_idx *ix = &a->ix;
    unsigned c1 = w * 64 + (unsigned)__builtin_ctzll(m), c2 = w * 64 + (unsigned)__builtin_ctzll(m2);
    /* Which head is lower is a coin toss for the branch predictor: both
     * conditions are evaluated and the class selected without a branch. */
    unsigned take2 = (NODE(a->b, ix->head[c2])->off < NODE(a->b, ix->head[c1])->off) &
                     (c2 - c1 <= span);
    return (int)(c1 + ((c2 - c1) & -take2));
}

/* The lowest-offset head among the first `heads` non-empty classes at or
 * above cw, and where the request starts in it; each certainly fits. */
static inline uint32_t mti_alloc_guaranteed(const mt_alloc *a, unsigned cw, unsigned heads,
                                      const mta_req *r, uint64_t *start)
{
    int c = mti_alloc_lowest_head(a, cw, heads);
    if (c < 0)
        return NIL;
    uint32_t id = a->ix.head[c];
    *start = a->pshift ? mti_alloc_fit(a, NODE(a->b, id), r) : align_up(NODE(a->b, id)->off, r->align);
    return id;
}

/* The best candidate of a scan so far. */
typedef struct mta_cand {
    uint32_t id;
    uint64_t size, off, start;
} mta_cand;

/* Looks at up to *budget blocks of list `id` for one that holds the
 * request and is smaller than *best (same size: lower). Returns 1 on an
 * exact fit: nothing smaller can hold it. */
static inline int mti_alloc_scan_list(const mt_alloc *a, uint32_t id, const mta_req *r,
                                unsigned *budget, mta_cand *best)
{
    for (; id != NIL && *budget > 0; id = NODE(a->b, id)->next_free, (*budget)--) {
        const blk *x = NODE(a->b, id);
        if (x->size < r->size || x->size > best->size ||
            (x->size == best->size && x->off > best->off))
            continue;
        uint64_t s = mti_alloc_fit(a, x, r);
        if (s == NO_FIT)
            continue;
        *best = (mta_cand){id, x->size, x->off, s};
        if (x->size == r->size)
            return 1;
    }
    return 0;
}

/* A bounded best-fit scan, for when no guaranteed class has a block: the
 * non-empty classes from `from` up to (not including) `to`, smallest
 * first, until one has a block that holds the request (blocks of later
 * classes are larger), SCAN_LIMIT blocks in all; failing that, up to
 * SCAN_LIMIT blocks of the largest class (a request aligned beyond every
 * class's guarantee may still fit at a region's start). */
static inline uint32_t mti_alloc_scan(const mt_alloc *a, unsigned from, unsigned to, const mta_req *r,
                                uint64_t *start)
{
    mta_cand best = {NIL, UINT64_MAX, UINT64_MAX, 0};
    unsigned budget = SCAN_LIMIT;
    for (int c = tlsf_class_from(&a->ix, from); c >= 0 && (unsigned)c < to && budget > 0;
         c = tlsf_class_from(&a->ix, (unsigned)c + 1))
        if (mti_alloc_scan_list(a, a->ix.head[c], r, &budget, &best) || best.id != NIL)
            break;
    if (best.id == NIL) {
        budget = SCAN_LIMIT;
        mti_alloc_scan_list(a, tlsf_top(&a->ix), r, &budget, &best);
    }
    *start = best.start;
    return best.id;
}

/* BEST_FIT without granularity separation, the common case, is written
 * out in alloc.c (allocate), on head blocks only: the request's own class,
 * once tight the next non-empty class below the guaranteed ones, then the
 * lower of the first two guaranteed heads (mti_alloc_lower_of_two, or
 * mti_alloc_lowest_head when they are not in one bitmap word); when no
 * guaranteed class has a block, mti_alloc_search scans. */

/* FIRST_FIT without granularity separation: the head of the first
 * non-empty guaranteed class, or -1 (mti_alloc_search then scans). */
static inline int mti_alloc_first_fit_fast(const mt_alloc *a, const mta_req *r)
{
    return tlsf_class_from(&a->ix, class_index_up(r->size + r->align - 1));
}

/* The free block for request r and where it starts in it, or NIL. */
static inline uint32_t mti_alloc_search(const mt_alloc *a, const mta_req *r, uint64_t *start)
{
    uint64_t w = mti_alloc_worst_case(a, r);
    unsigned cu = class_index(r->size);
    unsigned cw = w <= U_LIMIT ? class_index_up(w) : N_CLASSES;
    uint32_t id;
    if (a->strategy == MT_ALLOC_FIRST_FIT) {
        if ((id = mti_alloc_guaranteed(a, cw, 1, r, start)))
            return id;
    } else if ((id = mti_alloc_best_below(a, r, cu, cw, start)) ||
               (id = mti_alloc_guaranteed(a, cw, GUARANTEED_HEADS, r, start))) {
        return id;
    }
    return mti_alloc_scan(a, cu, cw, r, start);
}

#endif
