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

/* Frees used block `id`: its map entry goes (the node says where), then
 * the free neighbours come off their lists and the block grows over them
 * (the previous one's node, if free, takes its place), and the result is
 * filed. Taking neighbours off and filing the result once costs no more
 * than moving a grown neighbour between lists in place, which nearly
 * always changes class anyway with 16 classes per power of two. */
static inline __attribute__((always_inline)) int free_node(mt_alloc *a, uint32_t id, int map,
                                                           int empty)
{
    blk *b = a->b, *x = NODE(b, id);
    uint32_t lo = x->prev_phys, hi = x->next_phys, f = id;
    uint64_t off = blk_off(x), size = blk_size(x);
    if (map)
        map_remove_noted(a, x);
    a->live--;
    a->used -= size;
    a->pad -= blk_pad(x);
    /* A sentinel reads as used. */
    const blk *pb = NODE(b, lo), *nb = NODE(b, hi);
    if (blk_is_free(pb)) {
        tlsf_unlink(a, lo, pb->size);
        node_put_used(a, id);
        f = lo;
        size += pb->size;
        lo = pb->prev_phys;
    } else {
        x->off = off; /* without the pad it kept */
    }
    if (blk_is_free(nb)) {
        uint32_t n = hi;
        tlsf_unlink(a, n, nb->size);
        size += nb->size;
        hi = nb->next_phys;
        node_put(a, n);
    }
    blk *fx = NODE(b, f);
    fx->size = size;
    /* The left link never changes: f is the block itself or its previous
     * neighbour, whose own previous neighbour stays. */
    chain_link(b, f, hi);
    tlsf_insert(a, f);
    /* Both the sentinel: the region is empty. Only an allocator that
     * releases empty regions asks (the copies without `empty`). */
    if (empty && __builtin_expect(lo == hi, 0))
        return mti_alloc_region_emptied(a, NODE(b, lo)->region); /* a tail call */
    return 0;
}

/* mt_alloc_free with the map (without: free_by_offset_none). */
static inline __attribute__((always_inline)) int free_by_offset(mt_alloc *a, uint32_t rid,
                                                                uint64_t offset, int empty)
{
    if (rid >= a->reg_cap || a->reg[rid].size == 0)
        return -ENOENT;
    if (offset >= a->reg[rid].size || (offset & ((1ull << a->gshift) - 1)) != 0)
        return -EINVAL;
    mloc l = map_find(a, rid, offset >> a->gshift);
    if (l.bucket == UINT32_MAX)
        return -ENOENT;
    return free_node(a, map_id(a, l), 1, empty);
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

/* mt_alloc_free_block with the map or without (map), a not NULL. */
static inline __attribute__((always_inline)) int free_block(mt_alloc *a,
                                                            const mt_alloc_block *blk_in, int map,
                                                            int empty)
{
    if (!blk_in)
        return -EINVAL;
    uint32_t id = blk_in->hint, rid = blk_in->region;
    uint64_t offset = blk_in->offset;
    /* The hint is trusted only when it names a used block (not a free
     * block, an unused node or a sentinel) of that region whose data
     * starts exactly there: then it is the block mt_alloc_free would find.
     * The node array always exists (mt_alloc_create). The sink may pass
     * the range check: it reads as no used block (tlsf.h). */
    if (__builtin_expect(node_or_sink(id, a->b_cap), 1)) {
        const blk *x = NODE(a->b, id);
        /* The three conditions OR'ed into one word: one test. Without
         * the map, state and region are one word (internal.h, NOTE_USED). */
        _Static_assert(SZ_USED == 1ull << 63 && SZ_SENT == 1ull << 62, "state bits below");
        uint64_t who = map ? ((x->size >> 62) ^ 2) | (x->region ^ rid) : blk_key(x) ^ used_key(rid);
        if (__builtin_expect(who | ((blk_data_off(x) << a->gshift) ^ offset), 0) == 0)
            return free_node(a, id, map, empty);
    }
    return free_unhinted(a, rid, offset);
}

/* The copies of the hot paths (internal.h), picked by mti_alloc_pick_free:
 * with the map or without, and counting empty regions or not (only
 * MT_ALLOC_RELEASE_EMPTY reads the count). */
#define FREE_COPY_SET(sfx, attr, empty)                                                     \
    static attr int free_offset##sfx(mt_alloc *a, uint32_t rid, uint64_t offset)           \
    {                                                                                      \
        return free_by_offset(a, rid, offset, empty);                                      \
    }                                                                                      \
    static attr int free_block_map##sfx(mt_alloc *a, const mt_alloc_block *blk_in)         \
    {                                                                                      \
        return free_block(a, blk_in, 1, empty);                                            \
    }                                                                                      \
    static attr int free_block_nomap##sfx(mt_alloc *a, const mt_alloc_block *blk_in)       \
    {                                                                                      \
        return free_block(a, blk_in, 0, empty);                                            \
    }
#define FREE_COPIES(sfx, attr)                                                              \
    FREE_COPY_SET(sfx, attr, 0)                                                            \
    FREE_COPY_SET(_empty##sfx, attr, 1)                                                    \
    static mti_free_fn *const free_offset_copies##sfx[2] = {free_offset##sfx,              \
                                                          free_offset_empty##sfx};         \
    static mti_free_block_fn *const free_block_copies##sfx[2][2] = {                       \
        {free_block_nomap##sfx, free_block_map##sfx},                                      \
        {free_block_nomap_empty##sfx, free_block_map_empty##sfx}};
FREE_COPIES(, )
#if MTI_BMI2_COPY
FREE_COPIES(_bmi2, MTI_TARGET_BMI2)
#endif

static int free_by_offset_none(mt_alloc *a, uint32_t rid, uint64_t offset)
{
    (void)a, (void)rid, (void)offset;
    return -ENOTSUP;
}

void mti_alloc_pick_free(mt_alloc *a, int bmi)
{
    int map = a->ht != NULL, empty = (a->flags & MT_ALLOC_RELEASE_EMPTY) != 0;
    (void)bmi; /* without BMI copies */
#if MTI_BMI2_COPY
    if (bmi) {
        a->free_fn = map ? free_offset_copies_bmi2[empty] : free_by_offset_none;
        a->free_block_fn = free_block_copies_bmi2[empty][map];
        return;
    }
#endif
    a->free_fn = map ? free_offset_copies[empty] : free_by_offset_none;
    a->free_block_fn = free_block_copies[empty][map];
}

/* The public entry points. */
int mt_alloc_free(mt_alloc *a, uint32_t rid, uint64_t offset)
{
    if (__builtin_expect(!a, 0))
        return -EINVAL;
    return a->free_fn(a, rid, offset);
}

int mt_alloc_free_block(mt_alloc *a, const mt_alloc_block *blk_in)
{
    if (__builtin_expect(!a, 0))
        return -EINVAL;
    return a->free_block_fn(a, blk_in);
}
