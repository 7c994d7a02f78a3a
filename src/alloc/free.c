/* The region allocator's free path: find the block (its hint, or its
 * offset in the map), coalesce it with its free neighbours at once, file
 * the result.
 *
 * A free block's neighbours are used blocks or the sentinel (coalescing is
 * immediate), so at most two merges happen and the result is one free
 * block: O(1). Every check comes before the first change, so an error
 * changes nothing. */
#include <errno.h>

#include "offmap.h"
#include "tlsf.h"

/* The previous block p is free: it grows over used block x = id
 * ([off, off + size)), and over the next block n too when that one is free
 * (nf). Returns p. */
static inline uint32_t merge_into_prev(mt_alloc *a, uint32_t p, uint32_t id, uint32_t n, int nf,
                                       uint64_t size)
{
    blk *b = a->b;
    uint64_t old = b[p].size;
    if (nf) {
        uint64_t nsize = b[n].size;
        tlsf_unlink(a, n, nsize);
        size += nsize;
        uint32_t after = b[n].next_phys;
        node_put(a, n);
        n = after;
    }
    node_put(a, id);
    b[p].size = old + size;
    chain_link(b, p, n);
    tlsf_refile(a, p, old);
    return p;
}

/* Only the next block n is free: it grows backwards over used block id,
 * which starts at `off` and has `size` granules. Returns n. */
static inline uint32_t merge_into_next(mt_alloc *a, uint32_t id, uint32_t n, uint64_t off,
                                       uint64_t size)
{
    blk *b = a->b, *nx = &b[n];
    uint64_t old = nx->size;
    nx->off = off;
    nx->size = old + size;
    chain_link(b, b[id].prev_phys, n);
    node_put(a, id);
    tlsf_refile(a, n, old);
    return n;
}

/* Frees used block `id`: its map entry goes (the node says where), then it
 * merges with whichever neighbours are free. */
static inline int free_node(mt_alloc *a, uint32_t id)
{
    blk *b = a->b, *x = &b[id];
    uint32_t p = x->prev_phys, n = x->next_phys;
    uint64_t off = blk_off(x), size = blk_size(x);
    if (a->ht)
        map_remove_noted(a, x);
    a->live--;
    a->used -= size;
    a->pad -= blk_pad(x);
    /* A sentinel reads as used. */
    int pf = blk_is_free(&b[p]), nf = blk_is_free(&b[n]);
    uint32_t f = id;
    if (pf) {
        f = merge_into_prev(a, p, id, n, nf, size);
    } else if (nf) {
        f = merge_into_next(a, id, n, off, size);
    } else {
        x->off = off;
        x->size = size;
        tlsf_insert(a, id);
    }
    if (__builtin_expect(blk_spans_region(&b[f]), 0))
        mta_region_emptied(a, free_blk_region(b, &b[f]));
    return 0;
}

int mt_alloc_free(mt_alloc *a, uint32_t rid, uint64_t offset)
{
    if (!a)
        return -EINVAL;
    if (!a->ht)
        return -ENOTSUP;
    if (rid >= a->reg_cap || a->reg[rid].size == 0)
        return -ENOENT;
    if (offset >= a->reg[rid].size || (offset & ((1ull << a->gshift) - 1)) != 0)
        return -EINVAL;
    mloc l = map_find(a, rid, offset >> a->gshift);
    if (l.bucket == UINT32_MAX)
        return -ENOENT;
    return free_node(a, map_id(a, l));
}

/* Without the map, a block whose hint does not hold names no allocation
 * this allocator can find; the same checks as mt_alloc_free come first, so
 * that both give the same error for a bad region or offset. */
static __attribute__((noinline)) int free_unhinted(mt_alloc *a, uint32_t rid, uint64_t offset)
{
    if (a->ht)
        return mt_alloc_free(a, rid, offset);
    if (rid >= a->reg_cap || a->reg[rid].size == 0)
        return -ENOENT;
    if (offset >= a->reg[rid].size || (offset & ((1ull << a->gshift) - 1)) != 0)
        return -EINVAL;
    return -ENOENT;
}

int mt_alloc_free_block(mt_alloc *a, const mt_alloc_block *blk_in)
{
    if (!a || !blk_in)
        return -EINVAL;
    uint32_t id = blk_in->hint, rid = blk_in->region;
    uint64_t offset = blk_in->offset;
    /* The hint is trusted only when it names a used block (not a free
     * block, an unused node or a sentinel) of that region whose data
     * starts exactly there: then it is the block mt_alloc_free would find.
     * The node array always exists (mt_alloc_create), so b_cap > FIRST_NODE
     * and one unsigned comparison checks the range. */
    if (__builtin_expect(id - FIRST_NODE < a->b_cap - FIRST_NODE, 1)) {
        const blk *x = &a->b[id];
        /* The three conditions OR'ed into one word: one test. */
        if (__builtin_expect(((x->size & (SZ_USED | SZ_SENT)) ^ SZ_USED) | (x->region ^ rid) |
                                 ((blk_data_off(x) << a->gshift) ^ offset),
                             0) == 0)
            return free_node(a, id);
    }
    return free_unhinted(a, rid, offset);
}
