/* The TLSF index (size-class lists and their bitmaps) and the node free list:
 * the O(1) pieces every allocate and free goes through, inline. */
#ifndef MT_ALLOC_TLSF_H
#define MT_ALLOC_TLSF_H

#include "internal.h"

/* Pushes free block `id` on the head of its class list (LIFO: the block just
 * freed is the one most likely still in cache). The class is kept in the
 * node, so removal does not recompute it. */
static inline void tlsf_insert(mt_alloc *a, uint32_t id)
{
    blk *x = &a->b[id];
    unsigned c = class_index(x->size >> a->gshift);
    uint32_t h = a->head[c];
    x->cls = (uint16_t)c;
    x->prev_free = NIL;
    x->next_free = h;
    if (h != NIL)
        a->b[h].prev_free = id;
    a->head[c] = id;
    a->sl_map[c / SL_N] |= 1u << (c % SL_N);
    a->fl_map |= 1ull << (c / SL_N);
    a->free_blocks++;
}

static inline void tlsf_remove(mt_alloc *a, uint32_t id)
{
    blk *x = &a->b[id];
    if (x->next_free != NIL)
        a->b[x->next_free].prev_free = x->prev_free;
    if (x->prev_free != NIL) {
        a->b[x->prev_free].next_free = x->next_free;
    } else {
        unsigned c = x->cls;
        a->head[c] = x->next_free;
        if (x->next_free == NIL) {
            a->sl_map[c / SL_N] &= ~(1u << (c % SL_N));
            if (a->sl_map[c / SL_N] == 0)
                a->fl_map &= ~(1ull << (c / SL_N));
        }
    }
    a->free_blocks--;
}

/* Head of the smallest non-empty class at or above class index c, or NIL:
 * one scan of the second-level bitmap, else one of the first level. */
static inline uint32_t tlsf_find_from(const mt_alloc *a, unsigned c)
{
    unsigned fl = c / SL_N;
    uint32_t sm = a->sl_map[fl] & (~0u << (c % SL_N));
    if (sm == 0) {
        uint64_t fm = a->fl_map & (~0ull << (fl + 1)); /* fl + 1 < 64: FL_N <= 63 */
        if (fm == 0)
            return NIL;
        fl = (unsigned)__builtin_ctzll(fm);
        sm = a->sl_map[fl];
    }
    return a->head[fl * SL_N + (unsigned)__builtin_ctz(sm)];
}

/* Head of the largest non-empty class, or NIL. */
static inline uint32_t tlsf_top(const mt_alloc *a)
{
    if (a->fl_map == 0)
        return NIL;
    unsigned fl = msb64(a->fl_map);
    return a->head[fl * SL_N + 31u - (unsigned)__builtin_clz(a->sl_map[fl])];
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
