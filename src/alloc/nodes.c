/* Growing the node array. Nodes are named by index, so realloc may move
 * them; the unused ones are chained through next_free. Node NIL is never
 * handed out: it is the sink node of tlsf.h. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

int mti_alloc_node_reserve(mt_alloc *a, uint32_t n)
{
    mti_alloc_settle(a);
    if (a->b_unused_n >= n)
        return 0;
    /* By an eighth, not double: the array is most of the allocator's
     * memory (docs/alloc.md: at most 64 bytes per live allocation), and
     * growing happens only when the allocator holds more blocks than ever
     * before; still geometric, so amortised O(1). */
    uint64_t cap = a->b_cap ? (uint64_t)a->b_cap + a->b_cap / 8 : 64;
    if (cap < (uint64_t)a->b_cap + n)
        cap = (uint64_t)a->b_cap + n;
    if (cap > NODE_MAX) /* ids are byte offsets (internal.h) */
        return -ENOMEM;
    blk *nb = realloc(a->b, (size_t)cap * sizeof *nb);
    if (!nb)
        return -ENOMEM;
    uint32_t from = a->b_cap ? a->b_cap : 1; /* index 0 is the sink */
    /* Unused nodes read size 0: no used block, so a stray hint finds none. */
    memset(nb + from, 0, (size_t)(cap - from) * sizeof *nb);
    if (!a->b_cap) /* the sink reads as an empty class's head */
        nb[0] = (blk){.off = UINT64_MAX};
    /* Chain the new nodes in ascending order in front of the old list. */
    for (uint32_t i = from; i < cap; i++)
        nb[i].next_free = i + 1 < cap ? (i + 1) << NODE_SHIFT : a->b_unused;
    a->b = nb;
    a->b_unused = from << NODE_SHIFT;
    a->b_unused_n += (uint32_t)cap - from;
    a->b_cap = (uint32_t)cap;
    return 0;
}
