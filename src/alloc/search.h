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
 * BEST_FIT (the default) first tries the head of the request's own class,
 * then the head of the next non-empty class if it is still below the
 * guaranteed ones: such a block is at most 1/SL_N larger than the request
 * (own class) or at least smaller than any guaranteed one, and fits often
 * enough, depending on where it starts. Failing that it compares the heads
 * of the first GUARANTEED_HEADS non-empty guaranteed classes and takes the
 * lowest offset. Class heads are kept low (tlsf_link), so allocations pack
 * towards the start of regions and large free blocks survive at their
 * ends: in the benchmark this fragments less than address-ordered first
 * fit. Heads are checked on the index's side array (tlsf_head), so the
 * search reads no node but the one it picks (granularity separation, which
 * must look at the neighbours, reads the candidates' nodes).
 *
 * Looking further down the request's own class (up to 8 blocks, smallest
 * fitting one wins) was the first version: it costs a node read per block
 * and a branch mispredicted about every other step, and in the
 * gpu-typical benchmark it fragmented no less (docs/benchmarks.md). Three
 * guaranteed heads fragmented as little as four and less than two or five.
 *
 * mta_best_fit_fast is BEST_FIT without granularity pages, inline on the
 * allocation's fast path; mta_search is everything, out of line. Both
 * make the same choices.
 *
 * All scans are bounded, so both strategies are O(1). Both end with bounded
 * scans of w's own class and of the largest class, so that a nearly full
 * allocator still finds a block that fits only because of where it starts. */
#ifndef MT_ALLOC_SEARCH_H
#define MT_ALLOC_SEARCH_H

#include "tlsf.h"

#define GUARANTEED_HEADS 3

/* Offset at which the request starts in free block x, or NO_FIT. The block's
 * neighbours are used blocks (or region ends): with granularity separation,
 * a neighbour of the other kind must not share a page with the request. */
static inline uint64_t mta_fit(const mt_alloc *a, const blk *x, const mta_req *r)
{
    uint64_t start = align_up(x->off, r->align);
    if (a->pshift != 0) {
        unsigned p = a->pshift;
        if (x->prev_phys != NIL && a->b[x->prev_phys].kind != r->kind &&
            ((x->off - 1) >> p) == (start >> p))
            start = align_up(align_up(x->off, 1ull << p), r->align);
        uint64_t end = start + r->size;
        if (x->next_phys != NIL && a->b[x->next_phys].kind != r->kind &&
            ((end - 1) >> p) == (a->b[x->next_phys].off >> p))
            return NO_FIT;
    }
    return start + r->size <= x->off + x->size ? start : NO_FIT;
}

/* Size of a free block that holds the request wherever it starts. */
static inline uint64_t mta_worst_case(const mt_alloc *a, const mta_req *r)
{
    if (a->pshift == 0)
        return r->size + r->align - 1;
    uint64_t page = 1ull << a->pshift;
    uint64_t lead = r->align > page ? r->align : page;
    /* Start pushed to a page (or alignment) boundary, end pulled back off the
     * next block's page. */
    return r->size + (lead - 1) + (page - 1);
}

/* The smallest block that fits among the first BEST_FIT_SCAN of list `id`;
 * ties go to the lower offset, which keeps the top of regions free. */
static inline uint32_t mta_scan(const mt_alloc *a, uint32_t id, const mta_req *r,
                                uint64_t *start)
{
    const blk *b = a->b;
    uint32_t best = NIL;
    uint64_t best_size = UINT64_MAX, best_off = UINT64_MAX, best_start = 0;
    for (unsigned k = 0; id != NIL && k < BEST_FIT_SCAN; k++, id = a->b[id].next_free) {
        const blk *x = &b[id];
        uint64_t size = x->size;
        /* Blocks are distinct, so equal size and offset cannot both hold. */
        if (size > best_size || (size == best_size && x->off > best_off))
            continue;
        uint64_t s = mta_fit(a, x, r);
        if (s == NO_FIT)
            continue;
        best = id;
        best_size = size;
        best_off = x->off;
        best_start = s;
        if (size == r->size)
            break; /* exact: nothing smaller can fit */
    }
    *start = best_start;
    return best;
}

/* Where the request starts in the head block of class c, or NO_FIT (also
 * for an empty class). Without granularity separation the head record is
 * enough; the subtraction is arranged so that an empty class (offset
 * UINT64_MAX, size 0) fails whatever align_up made of its offset. */
static inline uint64_t mta_fit_head(const mt_alloc *a, unsigned c, const mta_req *r)
{
    const tlsf_head *h = &a->ix.hd[c];
    if (a->pshift != 0)
        return h->size ? mta_fit(a, &a->b[a->ix.head[c]], r) : NO_FIT;
    uint64_t start = align_up(h->off, r->align);
    return (start - h->off) + r->size <= h->size ? start : NO_FIT;
}

/* Best fit below the guaranteed class cw: the head of the request's own
 * class, then of the next non-empty class if it is still below cw. */
static inline uint32_t mta_best_below(const mt_alloc *a, const mta_req *r, unsigned cu,
                                      unsigned cw, uint64_t *start)
{
    uint64_t s = mta_fit_head(a, cu, r);
    if (s == NO_FIT && cu + 1 < cw) {
        int k = tlsf_class_from(&a->ix, cu + 1);
        if (k < 0 || (unsigned)k >= cw)
            return NIL;
        cu = (unsigned)k;
        s = mta_fit_head(a, cu, r);
    }
    if (s == NO_FIT)
        return NIL;
    *start = s;
    return a->ix.head[cu];
}

/* The class with the lowest head offset among the first `heads`
 * non-empty classes at or above cw (ties: the smaller class), or -1. The
 * classes come straight off the bitmaps, lowest set bit first. */
static inline int mta_lowest_head(const tlsf_idx *ix, unsigned cw, unsigned heads)
{
    unsigned w = cw / 64;
    uint64_t m = ix->cls_map[w] & (~0ull << (cw % 64));
    uint64_t s = ix->summary & (~0ull << w << 1);
    uint64_t best_off = UINT64_MAX;
    int best = -1;
    for (unsigned k = 0; k < heads; k++) {
        if (m == 0) { /* rare: 64 classes span 64 / SL_N powers of two */
            if (s == 0)
                break;
            w = (unsigned)__builtin_ctzll(s);
            s &= s - 1;
            m = ix->cls_map[w];
        }
        unsigned c = w * 64 + (unsigned)__builtin_ctzll(m);
        m &= m - 1;
        uint64_t off = ix->hd[c].off;
        best = off < best_off ? (int)c : best;
        best_off = off < best_off ? off : best_off;
    }
    return best;
}

/* The lowest-offset head among the first `heads` non-empty classes at or
 * above cw, and where the request starts in it; each certainly fits. */
static inline uint32_t mta_guaranteed(const mt_alloc *a, unsigned cw, unsigned heads,
                                      const mta_req *r, uint64_t *start)
{
    int c = mta_lowest_head(&a->ix, cw, heads);
    if (c < 0)
        return NIL;
    uint32_t id = a->ix.head[c];
    *start = a->pshift ? mta_fit(a, &a->b[id], r) : align_up(a->ix.hd[c].off, r->align);
    return id;
}

/* Bounded scans of w's own class and of the largest class: no class is
 * certain to hold the request, but blocks there may, depending on where
 * they start (a fresh region is aligned to anything at offset 0). */
static inline uint32_t mta_last_resort(const mt_alloc *a, uint64_t w, const mta_req *r,
                                       uint64_t *start)
{
    uint32_t id = mta_scan(a, a->ix.head[class_index(w <= U_LIMIT ? w : U_LIMIT)], r, start);
    return id != NIL ? id : mta_scan(a, tlsf_top(&a->ix), r, start);
}

/* Where the request starts in a head record, or NO_FIT (also for an empty
 * class's record): the fit test without granularity separation. */
static inline uint64_t head_fit(const tlsf_head *h, const mta_req *r)
{
    uint64_t start = align_up(h->off, r->align);
    return (start - h->off) + r->size <= h->size ? start : NO_FIT;
}

/* BEST_FIT without granularity separation, the common case, on head
 * records only: the request's own class, the next class below the
 * guaranteed ones, the lowest of the first guaranteed heads. Returns the
 * class whose head to take, or -1 when none of these has a block
 * (mta_search then tries the last resorts). Without padding for
 * granularity pages, w is below U_LIMIT. */
static inline int mta_best_fit_fast(const mt_alloc *a, const mta_req *r, uint64_t *start)
{
    const tlsf_idx *ix = &a->ix;
    unsigned cu = class_index(r->size), cw = class_index_up(r->size + r->align - 1);
    /* Whether the own class's head fits, whether there is a class between
     * it and the guaranteed ones and whether its head fits: data the
     * branch predictor cannot learn (a random alignment moves cw). So
     * both candidates are computed and one is selected; the next class
     * is N_CLASSES, whose record is always empty, when there is none. */
    unsigned k = tlsf_class_after(ix, cu);
    k = k < cw ? k : N_CLASSES;
    uint64_t s_own = head_fit(&ix->hd[cu], r), s_next = head_fit(&ix->hd[k], r);
    uint64_t s = s_own != NO_FIT ? s_own : s_next;
    cu = s_own != NO_FIT ? cu : k;
    if (s == NO_FIT) {
        int c = mta_lowest_head(ix, cw, GUARANTEED_HEADS);
        if (c < 0)
            return -1;
        cu = (unsigned)c;
        s = align_up(ix->hd[cu].off, r->align);
    }
    *start = s;
    return (int)cu;
}

/* FIRST_FIT without granularity separation: the head of the first
 * non-empty guaranteed class, or -1 (mta_search then tries the last
 * resorts). */
static inline int mta_first_fit_fast(const mt_alloc *a, const mta_req *r, uint64_t *start)
{
    int c = tlsf_class_from(&a->ix, class_index_up(r->size + r->align - 1));
    if (c >= 0)
        *start = align_up(a->ix.hd[c].off, r->align);
    return c;
}

/* The free block for request r and where it starts in it, or NIL. */
static inline uint32_t mta_search(const mt_alloc *a, const mta_req *r, uint64_t *start)
{
    uint64_t w = mta_worst_case(a, r);
    uint64_t wr = class_round_up(w);
    unsigned cu = class_index(r->size);
    unsigned cw = wr <= U_LIMIT ? class_index(wr) : N_CLASSES;
    uint32_t id;
    if (a->strategy == MT_ALLOC_FIRST_FIT) {
        if ((id = mta_guaranteed(a, cw, 1, r, start)) || (id = mta_last_resort(a, w, r, start)))
            return id;
        return mta_scan(a, a->ix.head[cu], r, start);
    }
    if ((id = mta_best_below(a, r, cu, cw, start)) ||
        (id = mta_guaranteed(a, cw, GUARANTEED_HEADS, r, start)))
        return id;
    return mta_last_resort(a, w, r, start);
}

#endif
