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

/* A free block changed size: moves it to its new class list, or leaves it
 * where it is when the class did not change (the common case when a small
 * piece comes off a large block, or joins one). */
static inline void refile(mt_alloc *a, uint32_t id)
{
    const blk *x = &a->b[id];
    if (class_index(x->size >> a->gshift) != x->cls) {
        tlsf_remove(a, id);
        tlsf_insert(a, id);
    } else if (x->prev_free == NIL) {
        a->ix.head_off[x->cls] = x->off; /* a head that moved in place */
    }
}

/* A new used block [start, start + r->size) of region rid. */
static inline uint32_t new_used(mt_alloc *a, uint64_t start, const mta_req *r, uint32_t rid)
{
    uint32_t uid = node_take(a);
    blk *u = &a->b[uid];
    u->off = start;
    u->size = r->size;
    u->region = rid;
    u->free = 0;
    u->kind = (uint8_t)r->kind;
    return uid;
}

/* Carves [start, start + r->size) out of free block `id` and returns the
 * used block. At the front of the block, the free block keeps the rest in
 * place; otherwise it keeps the leading pad and the tail becomes a new free
 * block. Resources reserved. */
static uint32_t carve(mt_alloc *a, uint32_t id, uint64_t start, const mta_req *r)
{
    blk *x = &a->b[id];
    uint64_t end = x->off + x->size, aend = start + r->size;
    uint32_t rid = x->region;
    if (start == x->off) {
        if (aend == end) { /* exact fit: the block itself */
            tlsf_remove(a, id);
            x->free = 0;
            x->kind = (uint8_t)r->kind;
            return id;
        }
        uint32_t uid = new_used(a, start, r, rid);
        x = &a->b[id];
        blk *u = &a->b[uid];
        u->prev_phys = x->prev_phys;
        u->next_phys = id;
        if (x->prev_phys != NIL)
            a->b[x->prev_phys].next_phys = uid;
        else
            a->reg[rid].first = uid;
        x->prev_phys = uid;
        x->off = aend;
        x->size = end - aend;
        refile(a, id);
        return uid;
    }
    /* Leading pad: stays free in x; the used block and the tail follow it. */
    uint32_t uid = new_used(a, start, r, rid), next = a->b[id].next_phys;
    blk *u = &a->b[uid];
    x = &a->b[id];
    u->prev_phys = id;
    u->next_phys = next;
    x->next_phys = uid;
    x->size = start - x->off;
    if (aend < end) {
        uint32_t tid = node_take(a);
        blk *t = &a->b[tid];
        t->off = aend;
        t->size = end - aend;
        t->region = rid;
        t->free = 1;
        t->kind = 0;
        t->prev_phys = uid;
        t->next_phys = next;
        u->next_phys = tid;
        next = tid;
        if (t->next_phys != NIL)
            a->b[t->next_phys].prev_phys = tid;
        tlsf_insert(a, tid);
    } else if (next != NIL) {
        a->b[next].prev_phys = uid;
    }
    refile(a, id);
    return uid;
}

/* Makes sure a split can take two nodes (leading pad, tail) and the offset
 * map has room for one more entry. */
static inline int reserve(mt_alloc *a)
{
    if (a->b_unused_n < 2 && mta_node_reserve(a, 2) != 0)
        return -ENOMEM;
    if ((a->ht_used + 1) * 2 > a->ht_mask + 1 && mta_map_reserve(a) != 0)
        return -ENOMEM;
    return 0;
}

/* Carves the request out of free block id at `start` and records it.
 * Resources reserved: cannot fail. */
static inline void commit(mt_alloc *a, uint32_t id, uint64_t start, const mta_req *r,
                          mt_alloc_block *out)
{
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
}

/* No block fits: ask the grow callback for a region, then place the request
 * in it. Out of line: rare. */
static __attribute__((noinline)) int allocate_grown(mt_alloc *a, const mta_req *r,
                                                    mt_alloc_block *out)
{
    uint32_t live = a->reg_live;
    /* A fresh region of r->size holds the request: offset 0 is aligned to
     * everything and has no neighbour to keep a page away from. */
    if (a->grow(a->user, a, r->size) != 0 || a->reg_live == live)
        return -ENOSPC;
    /* The class search may not look at the new block (it can sit in a class
     * below the guaranteed one), so it is tried directly. */
    int rc = reserve(a);
    if (rc)
        return rc;
    uint32_t id = a->reg[a->reg_added].first;
    uint64_t start = a->b[id].free ? mta_fit(a, &a->b[id], r) : NO_FIT;
    if (start == NO_FIT)
        return -ENOSPC;
    commit(a, id, start, r, out);
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
    int rc = reserve(a);
    if (rc)
        return rc;
    uint64_t start;
    uint32_t id = mta_search(a, &r, &start);
    if (id == NIL)
        return a->grow ? allocate_grown(a, &r, out) : -ENOSPC;
    commit(a, id, start, &r, out);
    return 0;
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
    blk *x = &a->b[id];
    uint64_t size = x->size;
    uint32_t p = x->prev_phys, n = x->next_phys;
    /* Both neighbours are needed next and are likely cache misses: fetch
     * them in parallel while the map entry goes (NIL is node 0, harmless). */
    __builtin_prefetch(&a->b[p], 1);
    __builtin_prefetch(&a->b[n], 1);
    map_remove(a, slot);
    int pf = p != NIL && a->b[p].free, nf = n != NIL && a->b[n].free;
    if (pf) {
        /* Into the previous block (with the next one too when it is free). */
        blk *px = &a->b[p];
        px->size += size;
        px->next_phys = n;
        if (nf) {
            tlsf_remove(a, n);
            px->size += a->b[n].size;
            px->next_phys = a->b[n].next_phys;
            node_put(a, n);
        }
        if (px->next_phys != NIL)
            a->b[px->next_phys].prev_phys = p;
        node_put(a, id);
        refile(a, p);
    } else if (nf) {
        /* The next block grows backwards over this one. */
        blk *nx = &a->b[n];
        nx->off = x->off;
        nx->size += size;
        nx->prev_phys = p;
        if (p != NIL)
            a->b[p].next_phys = n;
        else
            rg->first = n;
        node_put(a, id);
        refile(a, n);
    } else {
        x->free = 1;
        tlsf_insert(a, id);
    }
    rg->used -= size;
    a->used -= size;
    a->allocs--;
    if (--rg->allocs == 0)
        mta_region_emptied(a, rid);
    return 0;
}
