/* The offset map: which used block starts at a given offset of a region.
 *
 * Two fixed levels, so a lookup is two dependent loads whatever the region
 * holds (a hash table would be O(1) only on average). The directory has one
 * entry per LEAF_N granules; a leaf holds the block id for each of its
 * granules. Only offsets where a live allocation starts are set, and a leaf is
 * returned to the unused list when its last entry is cleared, so the map
 * costs host memory in proportion to live allocations, not to region size
 * (the directory, 4 bytes per LEAF_N granules, is the exception). */
#ifndef MT_ALLOC_OFFMAP_H
#define MT_ALLOC_OFFMAP_H

#include "internal.h"

static inline uint32_t *map_slot(const mt_alloc *a, uint32_t leaf, uint64_t g)
{
    return &a->leaf[(uint64_t)leaf * LEAF_N + (g & (LEAF_N - 1))];
}

static inline uint32_t map_get(const mt_alloc *a, const region *r, uint64_t off)
{
    uint64_t g = off >> a->gshift;
    uint32_t leaf = r->dir[g >> LEAF_SHIFT];
    return leaf == 0 ? NIL : *map_slot(a, leaf, g);
}

/* The caller made sure a leaf exists for `off` (mta_map_reserve). */
static inline void map_set(mt_alloc *a, region *r, uint64_t off, uint32_t id)
{
    uint64_t g = off >> a->gshift;
    uint32_t *d = &r->dir[g >> LEAF_SHIFT];
    if (*d == 0) {
        *d = a->leaf_unused;
        a->leaf_unused = a->leaf_live[*d];
        a->leaf_live[*d] = 0;
    }
    *map_slot(a, *d, g) = id;
    a->leaf_live[*d]++;
}

static inline void map_clear(mt_alloc *a, region *r, uint64_t off)
{
    uint64_t g = off >> a->gshift;
    uint32_t *d = &r->dir[g >> LEAF_SHIFT];
    *map_slot(a, *d, g) = NIL;
    if (--a->leaf_live[*d] == 0) {
        /* Every entry of the leaf is NIL again: it can go back as is. */
        a->leaf_live[*d] = a->leaf_unused;
        a->leaf_unused = *d;
        *d = 0;
    }
}

#endif
