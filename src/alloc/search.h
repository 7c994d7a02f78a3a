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
 * BEST_FIT (the default) first looks at up to BEST_FIT_SCAN blocks of the
 * request's own class, then of the next non-empty class below the
 * guaranteed ones, checking each for real, and takes the smallest that fits.
 * Failing that it compares the heads of the first GUARANTEED_HEADS
 * non-empty guaranteed classes and takes the lowest offset. Class heads are
 * kept low (tlsf_insert), so allocations pack towards the start of regions
 * and large free blocks survive at their ends: in the benchmark this
 * fragments less than address-ordered first fit, for a few more memory
 * touches than FIRST_FIT.
 *
 * All scans are bounded, so both strategies are O(1). Both end with bounded
 * scans of w's own class and of the largest class, so that a nearly full
 * allocator still finds a block that fits only because of where it starts. */
#ifndef MT_ALLOC_SEARCH_H
#define MT_ALLOC_SEARCH_H

#include "tlsf.h"

#define GUARANTEED_HEADS 4

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
    uint64_t g = 1ull << a->gshift;
    if (a->pshift == 0)
        return r->size + r->align - g;
    uint64_t page = 1ull << a->pshift;
    uint64_t lead = r->align > page ? r->align : page;
    /* Start pushed to a page (or alignment) boundary, end pulled back off the
     * next block's page. */
    return r->size + (lead - g) + (page - g);
}

/* The smallest block that fits among the first BEST_FIT_SCAN of list `id`;
 * ties go to the lower offset, which keeps the top of regions free. */
static inline uint32_t mta_scan(const mt_alloc *a, uint32_t id, const mta_req *r,
                                uint64_t *start)
{
    uint32_t best = NIL;
    uint64_t best_size = UINT64_MAX, best_off = UINT64_MAX, best_start = 0;
    for (unsigned k = 0; id != NIL && k < BEST_FIT_SCAN; k++, id = a->b[id].next_free) {
        const blk *x = &a->b[id];
        if (x->size > best_size || (x->size == best_size && x->off > best_off))
            continue;
        uint64_t s = mta_fit(a, x, r);
        if (s == NO_FIT)
            continue;
        best = id;
        best_size = x->size;
        best_off = x->off;
        best_start = s;
        if (x->size == r->size)
            break; /* exact: nothing smaller can fit */
    }
    *start = best_start;
    return best;
}

/* Best fit below the guaranteed class cw: the request's own class, then the
 * next non-empty class if it is still below cw. Padding makes the
 * guaranteed class larger than the request; blocks in between often fit
 * where they happen to start. */
static inline uint32_t mta_best_below(const mt_alloc *a, const mta_req *r, unsigned cu,
                                      unsigned cw, uint64_t *start)
{
    uint32_t id = mta_scan(a, a->ix.head[cu], r, start);
    if (id != NIL || cu + 1 >= cw)
        return id;
    id = tlsf_find_from(&a->ix, cu + 1);
    if (id == NIL || a->b[id].cls >= cw)
        return NIL;
    return mta_scan(a, id, r, start);
}

/* The lowest offset among the heads of the first `heads` non-empty classes
 * at or above cw; each certainly fits. */
static inline uint32_t mta_guaranteed(const mt_alloc *a, unsigned cw, unsigned heads,
                                      const mta_req *r, uint64_t *start)
{
    const tlsf_idx *ix = &a->ix;
    int c = tlsf_class_from(ix, cw), best = c;
    for (unsigned k = 1; k < heads && c >= 0; k++) {
        c = tlsf_class_from(ix, (unsigned)c + 1);
        if (c >= 0 && ix->head_off[c] < ix->head_off[best])
            best = c;
    }
    if (best < 0)
        return NIL;
    uint32_t id = ix->head[best];
    *start = mta_fit(a, &a->b[id], r);
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

/* The free block for request r and where it starts in it, or NIL. */
static inline uint32_t mta_search(const mt_alloc *a, const mta_req *r, uint64_t *start)
{
    uint64_t w = mta_worst_case(a, r) >> a->gshift;
    uint64_t wr = class_round_up(w);
    unsigned cu = class_index(r->size >> a->gshift);
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
