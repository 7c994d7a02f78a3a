/* Introspection: totals, the fragmentation figure and the layout dump. */
#include <errno.h>
#include <inttypes.h>

#include "tlsf.h"

/* The largest free block is in the highest non-empty class: walk that one. */
static uint64_t largest_free(const mt_alloc *a)
{
    uint64_t best = 0;
    for (uint32_t id = tlsf_top(&a->ix); id != NIL; id = NODE(a->b, id)->next_free)
        if (NODE(a->b, id)->size > best)
            best = NODE(a->b, id)->size;
    return best << a->gshift;
}

int mt_alloc_get_stats(const mt_alloc *a, mt_alloc_stats *out)
{
    if (!a || !out)
        return -EINVAL;
    uint64_t used = a->used << a->gshift;
    uint64_t free_bytes = a->total - used, largest = largest_free(a);
    *out = (mt_alloc_stats){
        .total_bytes = a->total,
        .free_bytes = free_bytes,
        .used_bytes = used,
        .pad_bytes = a->pad << a->gshift,
        .largest_free = largest,
        .allocations = a->live,
        .free_blocks = mti_alloc_free_blocks(a),
        .regions = a->reg_live,
        .fragmentation = free_bytes ? 1.0 - (double)largest / (double)free_bytes : 0.0,
        .metadata_bytes = sizeof *a + (uint64_t)a->b_cap * sizeof(blk) +
                          (a->ht ? ((uint64_t)a->ht_mask + 1) * sizeof(mbucket) : 0) +
                          (uint64_t)a->reg_cap * sizeof(region),
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
        mt_alloc_region info;
        if (mt_alloc_region_info(a, rid, &info) != 0)
            continue;
        fprintf(f, "region %" PRIu32 ": size %" PRIu64 ", used %" PRIu64 ", %" PRIu64
                   " allocations\n", rid, info.size, info.used_bytes, info.allocations);
        for (uint32_t id = NODE(a->b, r->sentinel)->next_phys; id != r->sentinel;
             id = NODE(a->b, id)->next_phys) {
            const blk *x = NODE(a->b, id);
            uint64_t off = blk_off(x) << a->gshift, size = blk_size(x) << a->gshift;
            fprintf(f, "  [0x%" PRIx64 ", 0x%" PRIx64 ") %12" PRIu64 " %s", off, off + size,
                    size, blk_is_free(x) ? "free" : kinds[blk_kind(x)]);
            if (!blk_is_free(x) && blk_pad(x)) /* a kept pad: the data starts after it */
                fprintf(f, ", data at 0x%" PRIx64, blk_data_off(x) << a->gshift);
            fputc('\n', f);
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
