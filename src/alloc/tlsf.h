/* The TLSF index (size-class lists and their bitmaps) and the node free list:
 * the O(1) pieces every allocate and free goes through, inline. */
#ifndef MT_ALLOC_TLSF_H
#define MT_ALLOC_TLSF_H

#include "internal.h"

/* Pushes free block `id` on the head of its class list (LIFO: the block just
 * freed is the one most likely still in cache). */
static inline void tlsf_insert(mt_alloc *a, uint32_t id)
{
    blk *x = &a->b[id];
    unsigned fl, sl;
    class_of(x->size >> a->gshift, &fl, &sl);
    uint32_t h = a->head[fl][sl];
    x->prev_free = NIL;
    x->next_free = h;
    if (h != NIL)
        a->b[h].prev_free = id;
    a->head[fl][sl] = id;
    a->sl_map[fl] |= 1u << sl;
    a->fl_map |= 1ull << fl;
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
        unsigned fl, sl;
        class_of(x->size >> a->gshift, &fl, &sl);
        a->head[fl][sl] = x->next_free;
        if (x->next_free == NIL) {
            a->sl_map[fl] &= ~(1u << sl);
            if (a->sl_map[fl] == 0)
                a->fl_map &= ~(1ull << fl);
        }
    }
    a->free_blocks--;
}

/* Head of the smallest non-empty class at or above class (fl, sl), or NIL:
 * one scan of the second-level bitmap, else one of the first level. */
static inline uint32_t tlsf_find_from(const mt_alloc *a, unsigned fl, unsigned sl)
{
    uint32_t sm = sl < SL_N ? a->sl_map[fl] & (~0u << sl) : 0;
    if (sm == 0) {
        uint64_t fm = fl + 1 < 64 ? a->fl_map & (~0ull << (fl + 1)) : 0;
        if (fm == 0)
            return NIL;
        fl = (unsigned)__builtin_ctzll(fm);
        sm = a->sl_map[fl];
    }
    return a->head[fl][__builtin_ctz(sm)];
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
