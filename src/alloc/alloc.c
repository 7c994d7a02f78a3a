/* The region allocator's life cycle and its allocation path (search, split);
 * free.c has the other hot path.
 *
 * Allocation first makes sure every resource it may need exists (two spare
 * nodes, room in the offset map), then changes the structure: an error is
 * returned before anything changed, never halfway. */
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
    for (unsigned c = 0; c <= N_CLASSES; c++)
        a->ix.hd[c] = (tlsf_head){UINT64_MAX, 0}; /* empty */
    a->gshift = msb64(g);
    /* Pages no larger than a granule never hold two blocks: nothing to do. */
    a->pshift = page > g ? msb64(page) - a->gshift : 0;
    a->strategy = opts->strategy;
    a->fast = a->pshift == 0 && a->strategy == MT_ALLOC_BEST_FIT;
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

/* ---- allocate ---------------------------------------------------------------- */

/* A new used block [start, start + r->size) of region rid, from the unused
 * nodes (reserved). The caller links it into the chain. */
static inline uint32_t new_used(mt_alloc *a, uint64_t start, const mta_req *r, uint32_t rid)
{
    uint32_t uid = node_take(a);
    blk *u = &a->b[uid];
    /* Field by field: a compound literal would zero the node first. */
    u->off = start;
    u->size = r->size;
    u->region = rid;
    u->free = 0;
    u->kind = (uint8_t)r->kind;
    return uid;
}

/* The request starts where free block x starts: a new used block goes in
 * front, x keeps the rest (refiled if its class changed), or x itself is
 * the allocation when it fits exactly. */
static inline uint32_t carve_front(mt_alloc *a, uint32_t id, const mta_req *r)
{
    blk *b = a->b, *x = &b[id];
    if (x->size == r->size) {
        tlsf_unlink(a, id);
        x->free = 0;
        x->kind = (uint8_t)r->kind;
        return id;
    }
    uint32_t rid = x->region, prev = x->prev_phys;
    uint32_t uid = new_used(a, x->off, r, rid);
    b[uid].prev_phys = prev;
    b[uid].next_phys = id;
    *(prev != NIL ? &b[prev].next_phys : &a->reg[rid].first) = uid;
    x->prev_phys = uid;
    x->off += r->size;
    x->size -= r->size;
    tlsf_refile(a, id);
    return uid;
}

/* The request starts inside free block x: x keeps the leading pad (refiled),
 * the used block follows, and the tail, if any, becomes a new free block. */
static inline uint32_t carve_inside(mt_alloc *a, uint32_t id, uint64_t start, const mta_req *r)
{
    blk *b = a->b, *x = &b[id];
    uint64_t end = x->off + x->size, aend = start + r->size;
    uint32_t rid = x->region, next = x->next_phys;
    uint32_t uid = new_used(a, start, r, rid), after = next, before_next = uid;
    x->next_phys = uid;
    x->size = start - x->off;
    if (aend < end) {
        after = before_next = node_take(a);
        blk *t = &b[after];
        t->off = aend;
        t->size = end - aend;
        t->prev_phys = uid;
        t->next_phys = next;
        t->region = rid;
        t->free = 1;
        t->kind = 0;
        tlsf_insert(a, after);
    }
    b[uid].prev_phys = id;
    b[uid].next_phys = after;
    b[next].prev_phys = before_next; /* the sink when x was last */
    tlsf_refile(a, id);
    return uid;
}

/* Carves the request out of free block id at `start` and records it.
 * Resources reserved: cannot fail. */
static inline void commit(mt_alloc *a, uint32_t id, uint64_t start, const mta_req *r,
                          mt_alloc_block *out)
{
    const blk *x = &a->b[id];
    uint32_t rid = x->region;
    if (__builtin_expect(blk_spans_region(x), 0))
        a->reg_empty--; /* the region's first allocation */
    uint32_t uid = start == x->off ? carve_front(a, id, r) : carve_inside(a, id, start, r);
    map_insert(a, rid, start, uid);
    a->used += r->size;
    out->region = rid;
    out->kind = r->kind;
    out->offset = start << a->gshift;
    out->size = r->size << a->gshift;
    out->hint = uid;
    out->reserved = 0;
}

/* commit for the fast path, where the block is the head of class c and
 * its offset and size are at hand in the head record: the arithmetic and
 * the new nodes need not wait for the block's node to arrive, and taking
 * it off its list is the head case. Same result as commit. */
static inline void commit_head(mt_alloc *a, unsigned c, uint64_t start, const mta_req *r,
                               mt_alloc_block *out)
{
    blk *b = a->b;
    uint32_t id = a->ix.head[c];
    uint64_t xoff = a->ix.hd[c].off, end = xoff + a->ix.hd[c].size, aend = start + r->size;
    blk *x = &b[id];
    uint32_t rid = x->region, prev = x->prev_phys, next = x->next_phys;
    if (__builtin_expect((prev | next) == NIL, 0))
        a->reg_empty--; /* the region's first allocation */
    uint32_t uid;
    if (start == xoff && aend == end) { /* exactly: the block itself */
        uid = id;
        tlsf_unlink_head(a, id, c);
        x->free = BLK_USED;
        x->kind = (uint8_t)r->kind;
    } else {
        uid = node_take(a);
        blk *u = &b[uid];
        u->off = start;
        u->size = r->size;
        u->region = rid;
        u->free = BLK_USED;
        u->kind = (uint8_t)r->kind;
        tlsf_unlink_head(a, id, c);
        if (start == xoff) { /* in front: x keeps the rest */
            u->prev_phys = prev;
            u->next_phys = id;
            *(prev != NIL ? &b[prev].next_phys : &a->reg[rid].first) = uid;
            x->prev_phys = uid;
            x->off = aend;
            x->size = end - aend;
        } else { /* inside: x keeps the pad, the tail (if any) is new */
            uint32_t after = next, before_next = uid;
            if (aend < end) {
                after = before_next = node_take(a);
                blk *t = &b[after];
                t->off = aend;
                t->size = end - aend;
                t->prev_phys = uid;
                t->next_phys = next;
                t->region = rid;
                t->free = BLK_FREE;
                t->kind = 0;
                tlsf_insert(a, after);
            }
            u->prev_phys = id;
            u->next_phys = after;
            b[next].prev_phys = before_next; /* the sink when x was last */
            x->next_phys = uid;
            x->size = start - xoff;
        }
        tlsf_insert(a, id);
    }
    map_insert(a, rid, start, uid);
    a->used += r->size;
    out->region = rid;
    out->kind = r->kind;
    out->offset = start << a->gshift;
    out->size = r->size << a->gshift;
    out->hint = uid;
    out->reserved = 0;
}

/* Makes sure a split can take two nodes (leading pad, tail) and the offset
 * map has room for one more entry. Only does something when the allocator
 * holds more blocks than ever before. */
static __attribute__((noinline)) int reserve_slow(mt_alloc *a)
{
    if (a->b_unused_n < 2 && mta_node_reserve(a, 2) != 0)
        return -ENOMEM;
    if (a->ht_used >= a->ht_room && mta_map_reserve(a) != 0)
        return -ENOMEM;
    return 0;
}

static inline int reserve(mt_alloc *a)
{
    if (__builtin_expect(a->b_unused_n >= 2 && a->ht_used < a->ht_room, 1))
        return 0;
    return reserve_slow(a);
}

/* No block fits: ask the grow callback for a region, then place the request
 * in it. */
static int allocate_grown(mt_alloc *a, const mta_req *r, mt_alloc_block *out)
{
    uint32_t live = a->reg_live;
    /* A fresh region of the request's size holds it: offset 0 is aligned to
     * everything and has no neighbour to keep a page away from. */
    if (a->grow(a->user, a, r->size << a->gshift) != 0 || a->reg_live == live)
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

/* Everything but the common case: metadata to grow, first fit,
 * granularity separation, the last-resort scans, the grow callback. */
static __attribute__((noinline)) int allocate_slow(mt_alloc *a, uint64_t size, uint64_t align,
                                                   unsigned kind, mt_alloc_block *out)
{
    mta_req r = {size, align, kind};
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

/* Bad arguments, told apart off the fast path. */
static __attribute__((noinline)) int allocate_refused(const mt_alloc *a, uint64_t size,
                                                      uint64_t align, mt_alloc_kind kind,
                                                      const mt_alloc_block *out)
{
    if (!a || !out || size == 0 || (align & (align - 1)) != 0 ||
        (unsigned)kind > MT_ALLOC_NONLINEAR)
        return -EINVAL;
    return -ENOSPC; /* size > MT_ALLOC_MAX_SIZE */
}

int mt_alloc_allocate(mt_alloc *a, uint64_t size, uint64_t align, mt_alloc_kind kind,
                      mt_alloc_block *out)
{
    /* One test for every bad argument: size - 1 wraps for 0. */
    if (__builtin_expect(!a | !out | ((align & (align - 1)) != 0) |
                         ((unsigned)kind > MT_ALLOC_NONLINEAR) |
                         (size - 1 >= MT_ALLOC_MAX_SIZE), 0))
        return allocate_refused(a, size, align, kind, out);
    unsigned gs = a->gshift;
    /* Offsets are below MT_ALLOC_MAX_SIZE: a larger alignment means offset 0,
     * exactly as MT_ALLOC_MAX_SIZE does. */
    align = align < MT_ALLOC_MAX_SIZE ? align : MT_ALLOC_MAX_SIZE;
    mta_req r = {((size - 1) >> gs) + 1, align >> gs ? align >> gs : 1, (unsigned)kind};
    /* The common case inline: best fit without granularity pages, spare
     * nodes and map room at hand, a block found on the head records. */
    uint64_t start;
    int c;
    if (__builtin_expect(a->b_unused_n >= 2 && a->ht_used < a->ht_room && a->fast, 1) &&
        (c = mta_best_fit_fast(a, &r, &start)) >= 0) {
        commit_head(a, (unsigned)c, start, &r, out);
        return 0;
    }
    /* Scalars: a request passed by address or by value would have to be
     * kept in memory on the fast path too. */
    return allocate_slow(a, r.size, r.align, r.kind, out);
}
