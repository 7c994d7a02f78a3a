/* Regions: adding, removing, releasing fully free ones, and their info.
 *
 * A region is a sentinel node and the chain of blocks through it
 * (internal.h). A region with no allocation is a single free block
 * (coalescing guarantees it); removing it is taking that block off its
 * class list. Slots of removed regions are reused, so ids stay small and
 * dense. */
#include <errno.h>
#include <stdlib.h>

#include "offmap.h"
#include "tlsf.h"

static int slot_take(mt_alloc *a, uint32_t *id)
{
    if (a->reg_unused != 0) {
        *id = a->reg_unused - 1;
        a->reg_unused = a->reg[*id].next_unused;
        return 0;
    }
    uint32_t cap = a->reg_cap ? a->reg_cap * 2 : 4;
    if (cap <= a->reg_cap)
        return -ENOMEM;
    region *nr = realloc(a->reg, (size_t)cap * sizeof *nr);
    if (!nr)
        return -ENOMEM;
    for (uint32_t i = a->reg_cap; i < cap; i++) {
        nr[i] = (region){0};
        /* Chain the new slots, lowest id first, after the one returned now. */
        nr[i].next_unused = i + 1 < cap ? i + 2 : 0;
    }
    a->reg = nr;
    *id = a->reg_cap;
    a->reg_unused = a->reg_cap + 1 < cap ? a->reg_cap + 2 : 0;
    a->reg_cap = cap;
    return 0;
}

int mt_alloc_add_region(mt_alloc *a, uint64_t size, void *user, uint32_t *id)
{
    if (!a || !id)
        return -EINVAL;
    size &= ~((1ull << a->gshift) - 1);
    if (size == 0 || size > MT_ALLOC_MAX_SIZE)
        return -EINVAL;
    if (mti_alloc_node_reserve(a, 2) != 0)
        return -ENOMEM;
    uint32_t rid;
    if (slot_take(a, &rid) != 0)
        return -ENOMEM;
    uint32_t sid = node_take(a), bid = node_take(a);
    /* The credit counted these nodes (alloc.c, reserve_slow). Settled by
     * mti_alloc_node_reserve above: b_unused_n is exact. */
    a->credit = a->credit_base = 0;
    blk *b = a->b;
    /* The sentinel reads as a used neighbour that is no block (SZ_SENT), and
     * carries the region id for the free blocks beside it. */
    *NODE(b, sid) = (blk){.off = OFF_MASK, .size = SZ_USED | SZ_SENT};
    NODE(b, sid)->region = rid;
    *NODE(b, bid) = (blk){.off = 0, .size = size >> a->gshift};
    chain_link(b, sid, bid);
    chain_link(b, bid, sid);
    tlsf_insert(a, bid);
    a->reg[rid] = (region){.size = size, .user = user, .sentinel = sid};
    a->total += size;
    mti_alloc_set_tight(a);
    a->reg_live++;
    a->reg_empty++;
    a->reg_added = rid;
    *id = rid;
    return 0;
}

void mti_alloc_region_drop(mt_alloc *a, uint32_t rid, int call_release)
{
    region r = a->reg[rid];
    uint32_t first = NODE(a->b, r.sentinel)->next_phys;
    tlsf_unlink(a, first, NODE(a->b, first)->size);
    node_put(a, first);
    node_put_used(a, r.sentinel);
    a->reg[rid] = (region){.next_unused = a->reg_unused};
    a->reg_unused = rid + 1;
    a->total -= r.size;
    mti_alloc_set_tight(a);
    a->reg_live--;
    a->reg_empty--;
    /* Last, with the allocator consistent: the callback may inspect it. */
    if (call_release && a->release)
        a->release(a->user, rid, r.size, r.user);
}

int mti_alloc_region_emptied(mt_alloc *a, uint32_t rid)
{
    a->reg_empty++;
    /* Keep one empty region so that a workload hovering at a region boundary
     * does not release and grow on every allocation. */
    if ((a->flags & MT_ALLOC_RELEASE_EMPTY) && a->reg_empty > 1)
        mti_alloc_region_drop(a, rid, 1);
    return 0;
}

/* A live region without allocations is one free block (coalescing). */
static int region_is_empty(const mt_alloc *a, uint32_t rid)
{
    const blk *x = NODE(a->b, region_first(a, rid));
    return blk_is_free(x) && blk_spans_region(x);
}

int mt_alloc_remove_region(mt_alloc *a, uint32_t rid)
{
    if (!a)
        return -EINVAL;
    if (rid >= a->reg_cap || a->reg[rid].size == 0)
        return -ENOENT;
    if (!region_is_empty(a, rid))
        return -EBUSY;
    mti_alloc_region_drop(a, rid, 0);
    return 0;
}

int mt_alloc_trim(mt_alloc *a)
{
    if (!a)
        return -EINVAL;
    int n = 0;
    for (uint32_t i = 0; i < a->reg_cap; i++)
        if (a->reg[i].size != 0 && region_is_empty(a, i)) {
            mti_alloc_region_drop(a, i, 1);
            n++;
        }
    return n;
}

int mt_alloc_region_info(const mt_alloc *a, uint32_t rid, mt_alloc_region *out)
{
    if (!a || !out)
        return -EINVAL;
    if (rid >= a->reg_cap || a->reg[rid].size == 0)
        return -ENOENT;
    const region *r = &a->reg[rid];
    *out = (mt_alloc_region){.size = r->size, .user = r->user};
    /* Not kept up to date by allocate and free, which is where the time
     * goes: counted here instead. */
    for (uint32_t id = NODE(a->b, r->sentinel)->next_phys; id != r->sentinel;
         id = NODE(a->b, id)->next_phys)
        if (!blk_is_free(NODE(a->b, id))) {
            out->used_bytes += blk_size(NODE(a->b, id)) << a->gshift;
            out->allocations++;
        }
    return 0;
}
