/* Choosing the free block for a request: the strategies.
 *
 * Every block of a class at or above class_round_up(w) holds w granules, so
 * taking the head of the first non-empty such class (two bit scans) always
 * works when w is the worst case of alignment and granularity padding: that
 * is FIRST_FIT, TLSF's "good fit". It skips the blocks of the request's own
 * class that are big enough, and splits a larger block instead.
 *
 * BEST_FIT first looks at up to BEST_FIT_SCAN blocks of the request's own
 * class, then of the next non-empty class below the guaranteed one, checking
 * each for real (alignment and granularity included), and takes the smallest
 * that fits; only then a guaranteed class, where it also picks the smallest
 * of BEST_FIT_SCAN. The scans are bounded, so both strategies
 * stay O(1). Both end with bounded scans of the class just below the
 * guaranteed one and of the largest class, so that a nearly full allocator
 * still finds a block that fits only because of where it starts. */
#include "tlsf.h"

/* Offset at which the request starts in free block x, or NO_FIT. The block's
 * neighbours are used blocks (or region ends): with granularity separation,
 * a neighbour of the other kind must not share a page with the request. */
static inline uint64_t fit(const mt_alloc *a, const blk *x, const mta_req *r)
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

uint64_t mta_fit(const mt_alloc *a, uint32_t id, const mta_req *r)
{
    return fit(a, &a->b[id], r);
}

uint64_t mta_worst_case(const mt_alloc *a, const mta_req *r)
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
static uint32_t scan(const mt_alloc *a, uint32_t id, const mta_req *r, uint64_t *start)
{
    uint32_t best = NIL;
    uint64_t best_size = UINT64_MAX, best_off = UINT64_MAX, best_start = 0;
    for (unsigned k = 0; id != NIL && k < BEST_FIT_SCAN; k++, id = a->b[id].next_free) {
        const blk *x = &a->b[id];
        if (x->size > best_size || (x->size == best_size && x->off > best_off))
            continue;
        uint64_t s = fit(a, x, r);
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

static inline uint32_t class_head(const mt_alloc *a, uint64_t u)
{
    unsigned fl, sl;
    class_of(u, &fl, &sl);
    return a->head[fl][sl];
}

/* Class index as one number, for comparing classes. */
static inline unsigned class_num(uint64_t u)
{
    unsigned fl, sl;
    class_of(u, &fl, &sl);
    return fl * SL_N + sl;
}

/* Best fit, below the guaranteed classes: the request's own class, then the
 * next non-empty class if it is still below `wr`. Padding (alignment,
 * granularity) makes the guaranteed class much larger than the request;
 * blocks in between often fit where they happen to start. */
static uint32_t best_below(const mt_alloc *a, const mta_req *r, uint64_t u, uint64_t wr,
                           uint64_t *start)
{
    uint32_t id = scan(a, class_head(a, u), r, start);
    if (id != NIL)
        return id;
    unsigned c = class_num(u) + 1, cw = class_num(wr);
    if (c >= cw)
        return NIL;
    id = tlsf_find_from(a, c / SL_N, c % SL_N);
    if (id == NIL || class_num(a->b[id].size >> a->gshift) >= cw)
        return NIL;
    return scan(a, id, r, start);
}

uint32_t mta_search(const mt_alloc *a, const mta_req *r, uint64_t *start)
{
    const uint64_t limit = U_LIMIT;
    uint64_t u = r->size >> a->gshift;
    uint64_t w = mta_worst_case(a, r) >> a->gshift;
    uint64_t wr = class_round_up(w);
    uint32_t id;
    if (a->strategy == MT_ALLOC_BEST_FIT &&
        (id = best_below(a, r, u, wr <= limit ? wr : limit, start)))
        return id;

    if (wr <= limit) {
        unsigned fl, sl;
        class_of(wr, &fl, &sl);
        id = tlsf_find_from(a, fl, sl);
        if (id != NIL) {
            if (a->strategy == MT_ALLOC_BEST_FIT)
                return scan(a, id, r, start);
            *start = fit(a, &a->b[id], r);
            return id;
        }
    }
    /* No class is certain to hold it: blocks in w's own class, or the
     * largest blocks (a fresh region is aligned to anything at offset 0), may
     * still, depending on where they start. */
    if ((id = scan(a, class_head(a, w <= limit ? w : limit), r, start)))
        return id;
    if (a->fl_map != 0) {
        unsigned fl = msb64(a->fl_map);
        unsigned sl = 31u - (unsigned)__builtin_clz(a->sl_map[fl]);
        if ((id = scan(a, a->head[fl][sl], r, start)))
            return id;
    }
    if (a->strategy == MT_ALLOC_FIRST_FIT && (id = scan(a, class_head(a, u), r, start)))
        return id;
    return NIL;
}
