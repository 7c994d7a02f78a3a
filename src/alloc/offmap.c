/* Growing the offset map's leaf array (see offmap.h). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "offmap.h"

uint64_t mta_dir_len(const mt_alloc *a, uint64_t region_size)
{
    uint64_t granules = region_size >> a->gshift;
    return (granules + LEAF_N - 1) >> LEAF_SHIFT;
}

int mta_leaves_grow(mt_alloc *a)
{
    uint64_t cap = a->leaf_cap ? (uint64_t)a->leaf_cap * 2 : 8;
    if (cap > UINT32_MAX / LEAF_N)
        return -ENOMEM;
    uint32_t *nl = realloc(a->leaf, (size_t)cap * LEAF_N * sizeof *nl);
    if (!nl)
        return -ENOMEM;
    a->leaf = nl;
    uint32_t *nlive = realloc(a->leaf_live, (size_t)cap * sizeof *nlive);
    if (!nlive)
        return -ENOMEM; /* the bigger leaf array is kept; harmless */
    a->leaf_live = nlive;
    /* Leaf 0 means "none" in the directory: never hand it out. */
    uint32_t from = a->leaf_cap ? a->leaf_cap : 1;
    memset(nl + (uint64_t)from * LEAF_N, 0, (size_t)(cap - from) * LEAF_N * sizeof *nl);
    for (uint32_t i = from; i < cap; i++)
        nlive[i] = i + 1 < cap ? i + 1 : a->leaf_unused;
    a->leaf_unused = from;
    a->leaf_cap = (uint32_t)cap;
    return 0;
}
