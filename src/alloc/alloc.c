/* The region allocator's life cycle and its two hot paths: allocate (search,
 * split) and free (look up, coalesce).
 *
 * Both paths first make sure every resource they may need exists (two spare
 * nodes, room in the offset map), then change the structure: an error is returned before
 * anything changed, never halfway. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "offmap.h"
#include "search.h"

static int is_pow2(uint64_t x) { return x != 0 && (x & (x - 1)) == 0; }

int mt_alloc_create(const mt_alloc_opts *opts, mt_alloc **out)
{
    static const mt_alloc_opts defaults = {0};
    if (!out)
        return -EINVAL;
    *out = NULL;
    if (!opts)
        opts = &defaults;
    uint64_t g = opts->min_align ? opts->min_align : 16;
    uint64_t page = opts->granularity;
    if (!is_pow2(g) || g > MT_ALLOC_MAX_SIZE || (page > 1 && !is_pow2(page)) ||
        page > MT_ALLOC_MAX_SIZE)
        return -EINVAL;
    if ((unsigned)opts->strategy > MT_ALLOC_FIRST_FIT || (opts->flags & ~MT_ALLOC_RELEASE_EMPTY))
        return -EINVAL;
    if ((opts->flags & MT_ALLOC_RELEASE_EMPTY) && !opts->release)
        return -EINVAL;
    mt_alloc *a = calloc(1, sizeof *a);
    if (!a)
        return -ENOMEM;
    a->gshift = msb64(g);
    /* Pages no larger than a granule never hold two blocks: nothing to do. */
    a->pshift = page > g ? msb64(page) : 0;
    a->strategy = opts->strategy;
    a->flags = opts->flags;
    a->grow = opts->grow;
    a->release = opts->release;
    a->user = opts->user;
    /* The offset map always exists, so lookups need no NULL check. */
    if (mta_map_reserve(a) != 0) {
        free(a);
        return -ENOMEM;
    }
    *out = a;
    return 0;
}

void mt_alloc_destroy(mt_alloc *a)
{
    if (!a)
        return;
    for (uint32_t i = 0; i < a->reg_cap; i++) {
        region *r = &a->reg[i];
        if (r->size == 0)
            continue;
        if (a->release)
            a->release(a->user, i, r->size, r->user);
    }
    free(a->reg);
    free(a->b);
    free(a->ht);
    free(a);
}

/* Carves [start, start + r->size) out of free block `id`: the leading pad
 * stays free in `id`, the tail becomes a new free block. Resources reserved. */
static uint32_t carve(mt_alloc *a, uint32_t id, uint64_t start, const mta_req *r)
{
    tlsf_remove(a, id);
    uint32_t uid = id;
    if (start > a->b[id].off) {
        uid = node_take(a);
        blk *x = &a->b[id], *u = &a->b[uid];
        u->off = start;
        u->size = x->off + x->size - start;
        u->region = x->region;
        u->prev_phys = id;
        u->next_phys = x->next_phys;
        if (x->next_phys != NIL)
            a->b[x->next_phys].prev_phys = uid;
        x->next_phys = uid;
        x->size = start - x->off;
        tlsf_insert(a, id);
    }
    blk *u = &a->b[uid];
    if (u->size > r->size) {
        uint32_t tid = node_take(a);
        blk *t = &a->b[tid];
        t->off = start + r->size;
        t->size = u->size - r->size;
        t->region = u->region;
        t->free = 1;
        t->kind = 0;
        t->prev_phys = uid;
        t->next_phys = u->next_phys;
        if (u->next_phys != NIL)
            a->b[u->next_phys].prev_phys = tid;
        u->next_phys = tid;
        tlsf_insert(a, tid);
    }
    u->size = r->size;
    u->free = 0;
    u->kind = (uint8_t)r->kind;
    return uid;
}

/* Allocates in free block `in` when given (a region just grown), else
 * wherever the strategy says. */
static int try_allocate(mt_alloc *a, const mta_req *r, uint32_t in, mt_alloc_block *out)
{
    /* A split makes at most two new blocks (leading pad, tail). */
    if (a->b_unused_n < 2 && mta_node_reserve(a, 2) != 0)
        return -ENOMEM;
    if ((a->ht_used + 1) * 2 > a->ht_mask + 1 && mta_map_reserve(a) != 0)
        return -ENOMEM;
    uint64_t start = NO_FIT;
    uint32_t id = in;
    if (id != NIL)
        start = a->b[id].free ? mta_fit(a, &a->b[id], r) : NO_FIT;
    else
        id = mta_search(a, r, &start);
    if (id == NIL || start == NO_FIT)
        return -ENOSPC;
    uint32_t rid = a->b[id].region;
    region *rg = &a->reg[rid];
    map_insert(a, rid, start, carve(a, id, start, r));
    rg->used += r->size;
    if (rg->allocs++ == 0)
        a->reg_empty--;
    a->used += r->size;
    a->allocs++;
    out->region = rid;
    out->kind = r->kind;
    out->offset = start;
    out->size = r->size;
    return 0;
}

int mt_alloc_allocate(mt_alloc *a, uint64_t size, uint64_t align, mt_alloc_kind kind,
                      mt_alloc_block *out)
{
    if (!a || !out || size == 0 || (align & (align - 1)) != 0 ||
        (unsigned)kind > MT_ALLOC_NONLINEAR)
        return -EINVAL;
    if (size > MT_ALLOC_MAX_SIZE)
        return -ENOSPC;
    uint64_t g = 1ull << a->gshift;
    /* Offsets are below MT_ALLOC_MAX_SIZE: a larger alignment means offset 0,
     * exactly as MT_ALLOC_MAX_SIZE does. */
    mta_req r = {align_up(size, g), align < g ? g : align, (unsigned)kind};
    if (r.align > MT_ALLOC_MAX_SIZE)
        r.align = MT_ALLOC_MAX_SIZE;
    int rc = try_allocate(a, &r, NIL, out);
    if (rc == -ENOSPC && a->grow) {
        /* A fresh region of r.size holds the request: offset 0 is aligned to
         * everything and has no neighbour to keep a page away from. The
         * class search may not look at its block (it can sit in a class
         * below the guaranteed one), so it is tried directly. */
        uint32_t live = a->reg_live;
        if (a->grow(a->user, a, r.size) != 0 || a->reg_live == live)
            return -ENOSPC;
        rc = try_allocate(a, &r, a->reg[a->reg_added].first, out);
    }
    return rc;
}

int mt_alloc_free(mt_alloc *a, uint32_t rid, uint64_t offset)
{
    if (!a)
        return -EINVAL;
    if (rid >= a->reg_cap || a->reg[rid].size == 0)
        return -ENOENT;
    region *rg = &a->reg[rid];
    if (offset >= rg->size || (offset & ((1ull << a->gshift) - 1)) != 0)
        return -EINVAL;
    uint32_t slot = map_find(a, rid, offset);
    if (slot == UINT32_MAX)
        return -ENOENT;
    uint32_t id = a->ht[slot].id;
    map_remove(a, slot);
    blk *x = &a->b[id];
    uint64_t size = x->size;
    uint32_t p = x->prev_phys, n = x->next_phys;
    x->free = 1;
    if (p != NIL && a->b[p].free) {
        /* Merge into the previous block: it keeps its node and its offset. */
        tlsf_remove(a, p);
        a->b[p].size += size;
        a->b[p].next_phys = n;
        if (n != NIL)
            a->b[n].prev_phys = p;
        node_put(a, id);
        id = p;
        x = &a->b[p];
    }
    if (n != NIL && a->b[n].free) {
        tlsf_remove(a, n);
        x->size += a->b[n].size;
        x->next_phys = a->b[n].next_phys;
        if (x->next_phys != NIL)
            a->b[x->next_phys].prev_phys = id;
        node_put(a, n);
    }
    tlsf_insert(a, id);
    rg->used -= size;
    a->used -= size;
    a->allocs--;
    if (--rg->allocs == 0)
        mta_region_emptied(a, rid);
    return 0;
}
