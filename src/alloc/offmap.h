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

/* The used block starting at off, or NIL (checker). */
static inline uint32_t map_get(const mt_alloc *a, const region *r, uint64_t off)
{
    uint64_t g = off >> a->gshift;
    uint32_t leaf = r->dir[g >> LEAF_SHIFT];
    return leaf == 0 ? NIL : *map_slot(a, leaf, g);
}

/* The slot for off, taking a leaf for its directory entry if it has none;
 * NULL when the leaf array cannot grow (nothing changed then). The caller
 * stores the id with map_fill; the leaf array does not move in between. */
static inline uint32_t *map_prepare(mt_alloc *a, region *r, uint64_t off, uint32_t *leaf)
{
    uint64_t g = off >> a->gshift;
    uint32_t *d = &r->dir[g >> LEAF_SHIFT];
    if (*d == 0) {
        if (a->leaf_unused == 0 && mta_leaves_grow(a) != 0)
            return NULL;
        *d = a->leaf_unused;
        a->leaf_unused = a->leaf_live[*d];
        a->leaf_live[*d] = 0;
    }
    *leaf = *d;
    return map_slot(a, *d, g);
}

static inline void map_fill(mt_alloc *a, uint32_t *slot, uint32_t leaf, uint32_t id)
{
    *slot = id;
    a->leaf_live[leaf]++;
}

/* Looks up and clears the entry for off in one pass: the block id, or NIL
 * (nothing changed then). */
static inline uint32_t map_take(mt_alloc *a, region *r, uint64_t off)
{
    uint64_t g = off >> a->gshift;
    uint32_t *d = &r->dir[g >> LEAF_SHIFT];
    if (*d == 0)
        return NIL;
    uint32_t *slot = map_slot(a, *d, g), id = *slot;
    if (id == NIL)
        return NIL;
    *slot = NIL;
    if (--a->leaf_live[*d] == 0) {
        /* Every entry of the leaf is NIL again: it can go back as is. */
        a->leaf_live[*d] = a->leaf_unused;
        a->leaf_unused = *d;
        *d = 0;
    }
    return id;
}

#endif
