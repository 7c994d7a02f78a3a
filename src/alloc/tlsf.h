/* The TLSF index (size-class lists and their bitmaps) and the node free list:
 * the O(1) pieces every allocate and free goes through, inline. */
#ifndef MT_ALLOC_TLSF_H
#define MT_ALLOC_TLSF_H

#include "internal.h"

static inline void tlsf_mark(tlsf_idx *ix, unsigned c)
{
    ix->sl_map[c / SL_N] |= 1u << (c % SL_N);
    ix->fl_map |= 1ull << (c / SL_N);
}

/* Files free block `id` in its class list, and keeps the lower of it and the
 * list's head in front: searches take heads, and preferring low offsets
 * packs allocations towards the start of regions, which keeps large free
 * blocks at their ends (what makes address-ordered first fit fragment so
 * little). One comparison, so still O(1). The class is kept in the node. */
static inline void tlsf_insert(mt_alloc *a, uint32_t id)
{
    blk *x = &a->b[id];
    unsigned c = class_index(x->size >> a->gshift);
    tlsf_idx *ix = &a->ix;
    uint32_t h = ix->head[c];
    x->cls = (uint16_t)c;
    a->free_blocks++;
    if (h != NIL && ix->head_off[c] < x->off) {
        blk *hx = &a->b[h];
        x->prev_free = h;
        x->next_free = hx->next_free;
        if (hx->next_free != NIL)
            a->b[hx->next_free].prev_free = id;
        hx->next_free = id;
        return;
    }
    x->prev_free = NIL;
    x->next_free = h;
    if (h != NIL)
        a->b[h].prev_free = id;
    ix->head[c] = id;
    ix->head_off[c] = x->off;
    tlsf_mark(ix, c);
}

static inline void tlsf_remove(mt_alloc *a, uint32_t id)
{
    blk *x = &a->b[id];
    if (x->next_free != NIL)
        a->b[x->next_free].prev_free = x->prev_free;
    if (x->prev_free != NIL) {
        a->b[x->prev_free].next_free = x->next_free;
    } else {
        tlsf_idx *ix = &a->ix;
        unsigned c = x->cls;
        ix->head[c] = x->next_free;
        if (x->next_free != NIL)
            ix->head_off[c] = a->b[x->next_free].off;
        else {
            ix->sl_map[c / SL_N] &= ~(1u << (c % SL_N));
            if (ix->sl_map[c / SL_N] == 0)
                ix->fl_map &= ~(1ull << (c / SL_N));
        }
    }
    a->free_blocks--;
}

/* The smallest non-empty class at or above class index c, or -1: one scan
 * of the second-level bitmap, else one of the first level. */
static inline int tlsf_class_from(const tlsf_idx *ix, unsigned c)
{
    if (c >= N_CLASSES)
        return -1;
    unsigned fl = c / SL_N;
    uint32_t sm = ix->sl_map[fl] & (~0u << (c % SL_N));
    if (sm == 0) {
        uint64_t fm = ix->fl_map & (~0ull << (fl + 1)); /* fl + 1 < 64: FL_N <= 63 */
        if (fm == 0)
            return -1;
        fl = (unsigned)__builtin_ctzll(fm);
        sm = ix->sl_map[fl];
    }
    return (int)(fl * SL_N + (unsigned)__builtin_ctz(sm));
}

/* Head of the smallest non-empty class at or above class index c, or NIL. */
static inline uint32_t tlsf_find_from(const tlsf_idx *ix, unsigned c)
{
    int k = tlsf_class_from(ix, c);
    return k < 0 ? NIL : ix->head[k];
}

/* Head of the largest non-empty class, or NIL. */
static inline uint32_t tlsf_top(const tlsf_idx *ix)
{
    if (ix->fl_map == 0)
        return NIL;
    unsigned fl = msb64(ix->fl_map);
    return ix->head[fl * SL_N + 31u - (unsigned)__builtin_clz(ix->sl_map[fl])];
}

/* ---- nodes -------------------------------------------------------------------
 * Callers reserve (mta_node_reserve) before changing anything, so that taking
 * a node never fails halfway through an operation. */

static inline uint32_t node_take(mt_alloc *a)
{
    uint32_t id = a->b_unused;
    a->b_unused = a->b[id].next_free;
    a->b_unused_n--;
    return id;
}

static inline void node_put(mt_alloc *a, uint32_t id)
{
    a->b[id].next_free = a->b_unused;
    a->b[id].size = 0; /* marks the node unused for the checker */
    a->b_unused = id;
    a->b_unused_n++;
}

#endif
