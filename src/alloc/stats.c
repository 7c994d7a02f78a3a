/* Introspection: totals, the fragmentation figure and the layout dump. */
#include <errno.h>
#include <inttypes.h>

#include "tlsf.h"

/* The largest free block is in the highest non-empty class: walk that one. */
static uint64_t largest_free(const mt_alloc *a)
{
    uint64_t best = 0;
    for (uint32_t id = tlsf_top(&a->ix); id != NIL; id = a->b[id].next_free)
        if (a->b[id].size > best)
            best = a->b[id].size;
    return best;
}

int mt_alloc_get_stats(const mt_alloc *a, mt_alloc_stats *out)
{
    if (!a || !out)
        return -EINVAL;
    uint64_t free_bytes = a->total - a->used, largest = largest_free(a);
    *out = (mt_alloc_stats){
        .total_bytes = a->total,
        .free_bytes = free_bytes,
        .used_bytes = a->used,
        .largest_free = largest,
        .allocations = a->allocs,
        .free_blocks = a->free_blocks,
        .regions = a->reg_live,
        .fragmentation = free_bytes ? 1.0 - (double)largest / (double)free_bytes : 0.0,
    };
    return 0;
}

int mt_alloc_dump(const mt_alloc *a, FILE *f)
{
    if (!a || !f)
        return -EINVAL;
    static const char *const kinds[] = {"linear", "nonlinear"};
    for (uint32_t rid = 0; rid < a->reg_cap; rid++) {
        const region *r = &a->reg[rid];
        if (r->size == 0)
            continue;
        fprintf(f, "region %" PRIu32 ": size %" PRIu64 ", used %" PRIu64 ", %" PRIu64
                   " allocations\n", rid, r->size, r->used, r->allocs);
        for (uint32_t id = r->first; id != NIL; id = a->b[id].next_phys) {
            const blk *x = &a->b[id];
            fprintf(f, "  [0x%" PRIx64 ", 0x%" PRIx64 ") %12" PRIu64 " %s\n", x->off,
                    x->off + x->size, x->size, x->free ? "free" : kinds[x->kind & 1]);
        }
    }
    mt_alloc_stats s;
    mt_alloc_get_stats(a, &s);
    fprintf(f, "total %" PRIu64 ", free %" PRIu64 " in %" PRIu64 " blocks, largest %" PRIu64
               ", %" PRIu64 " allocations, fragmentation %.4f\n",
            s.total_bytes, s.free_bytes, s.free_blocks, s.largest_free, s.allocations,
            s.fragmentation);
    return ferror(f) ? -EIO : 0;
}
