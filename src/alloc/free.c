/* The region allocator's free path: find the block by its offset, coalesce
 * it with its free neighbours at once, file the result.
 *
 * A free block's neighbours are used blocks (coalescing is immediate), so at
 * most two merges happen and the result is one free block: O(1). Every
 * check comes before the first change, so an error changes nothing. */
#include <errno.h>

#include "offmap.h"
#include "tlsf.h"

/* The previous block p is free: it grows over block `id`, and over the next
 * block n too when that one is free (nf). Returns p. */
static inline uint32_t merge_into_prev(mt_alloc *a, uint32_t p, uint32_t id, uint32_t n, int nf)
{
    blk *b = a->b;
    uint64_t grow = b[id].size;
    if (nf) {
        tlsf_unlink(a, n);
        grow += b[n].size;
        uint32_t after = b[n].next_phys;
        node_put(a, n);
        n = after;
    }
    node_put(a, id);
    b[p].size += grow;
    b[p].next_phys = n;
    b[n].prev_phys = p; /* the sink when p is now last */
    tlsf_refile(a, p);
    return p;
}

/* Only the next block n is free: it grows backwards over block `id`.
 * Returns n. */
static inline uint32_t merge_into_next(mt_alloc *a, uint32_t id, uint32_t n)
{
    blk *b = a->b, *x = &b[id], *nx = &b[n];
    uint32_t p = x->prev_phys;
    nx->off = x->off;
    nx->size += x->size;
    nx->prev_phys = p;
    chain_after(a, x->region, p, n);
    node_put(a, id);
    tlsf_refile(a, n);
    return n;
}

/* Frees used block `id` of region rid: its map entry goes (the node says
 * where), then it merges with whichever neighbours are free. */
static inline int free_node(mt_alloc *a, uint32_t rid, uint32_t id)
{
    blk *b = a->b;
    uint32_t p = b[id].prev_phys, n = b[id].next_phys;
    map_remove(a, map_noted(&b[id]));
    a->used -= b[id].size;
    a->pad -= b[id].cls;
    /* A missing neighbour is the sink node, which reads as used. */
    int pf = b[p].free, nf = b[n].free;
    uint32_t f = id;
    if (pf) {
        f = merge_into_prev(a, p, id, n, nf);
    } else if (nf) {
        f = merge_into_next(a, id, n);
    } else {
        b[id].free = BLK_FREE;
        tlsf_insert(a, id);
    }
    if (__builtin_expect(blk_spans_region(&b[f]), 0))
        mta_region_emptied(a, rid);
    return 0;
}

int mt_alloc_free(mt_alloc *a, uint32_t rid, uint64_t offset)
{
    if (!a)
        return -EINVAL;
    if (rid >= a->reg_cap || a->reg[rid].size == 0)
        return -ENOENT;
    if (offset >= a->reg[rid].size || (offset & ((1ull << a->gshift) - 1)) != 0)
        return -EINVAL;
    mloc l = map_find(a, rid, offset >> a->gshift);
    if (l.bucket == UINT32_MAX)
        return -ENOENT;
    return free_node(a, rid, map_id(a, l));
}

int mt_alloc_free_block(mt_alloc *a, const mt_alloc_block *blk_in)
{
    if (!a || !blk_in)
        return -EINVAL;
    uint32_t id = blk_in->hint, rid = blk_in->region;
    uint64_t offset = blk_in->offset;
    /* The hint is trusted only when it names a used block (unused nodes
     * are marked BLK_UNUSED) that starts exactly there: then it is the
     * block mt_alloc_free would find. */
    if (__builtin_expect(id >= FIRST_NODE && id < a->b_cap, 1)) {
        const blk *x = &a->b[id];
        /* The three conditions OR'ed into one word: one test. */
        if (__builtin_expect(((uint64_t)(x->free ^ BLK_USED) | (x->region ^ rid) |
                              ((blk_data_off(x) << a->gshift) ^ offset)) == 0, 1))
            return free_node(a, rid, id);
    }
    return mt_alloc_free(a, rid, offset);
}
