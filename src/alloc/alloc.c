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
    /* The inline path: no granularity pages. */
    a->fast = a->pshift ? 0 : a->strategy == MT_ALLOC_BEST_FIT ? FAST_BEST_FIT : FAST_FIRST_FIT;
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

/* Carves [start, start + r->size) out of free block id = [xoff, end), already
 * off its class list, and returns the used block. At the front, a new used
 * block goes before x and x keeps the rest; inside, x keeps the leading pad,
 * the used block follows and the tail, if any, is a new free block; exactly,
 * x itself is the allocation. x goes back on a list unless it is used.
 * Nodes reserved: cannot fail. */
static inline __attribute__((always_inline)) uint32_t carve(mt_alloc *a, uint32_t id,
                                                            uint64_t xoff, uint64_t end,
                                                            uint64_t start, const mta_req *r)
{
    blk *b = a->b, *x = &b[id];
    uint64_t aend = start + r->size;
    uint32_t rid = x->region, prev = x->prev_phys, next = x->next_phys;
    if (start == xoff && aend == end) {
        x->free = BLK_USED;
        x->kind = (uint8_t)r->kind;
        return id;
    }
    uint32_t uid = node_take(a);
    blk *u = &b[uid];
    u->off = start;
    u->size = r->size;
    u->region = rid;
    u->free = BLK_USED;
    u->kind = (uint8_t)r->kind;
    if (start == xoff) {
        u->prev_phys = prev;
        u->next_phys = id;
        chain_after(a, rid, prev, uid);
        x->prev_phys = uid;
        x->off = aend;
        x->size = end - aend;
    } else {
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
    return uid;
}

/* A leading pad of `pad` granules (what aligning the request in its block
 * skips) that stays part of the allocation instead of becoming a free
 * block of its own: at most 1/PAD_ABSORB_RATIO of the request, and it must
 * fit the node's pad field. Small pads are nearly useless as free blocks,
 * and making one costs a node and a list insertion at allocation and a
 * merge at free (two allocations in three need a pad in the gpu-typical
 * benchmark). Returns the pad kept: `pad` or 0. Not with granularity
 * pages, whose checks need the data's start as the block's (callers test). */
#define PAD_ABSORB_RATIO 16
static inline uint64_t kept_pad(uint64_t pad, const mta_req *r)
{
    return pad <= BLK_PAD_MAX && pad * PAD_ABSORB_RATIO <= r->size ? pad : 0;
}

/* Records allocation uid, whose data starts at `start` of region rid, and
 * fills *out. */
static inline void record(mt_alloc *a, uint32_t rid, uint64_t start, uint32_t uid,
                          const mta_req *r, mt_alloc_block *out)
{
    map_insert(a, rid, start, uid);
    a->used += a->b[uid].size;
    a->pad += a->b[uid].cls;
    out->region = rid;
    out->kind = r->kind;
    out->offset = start << a->gshift;
    out->size = r->size << a->gshift;
    out->hint = uid;
    out->reserved = 0;
}

/* Carves the request, with `pad` granules kept in front, out of free block
 * id, already off its list, and records it. */
static __attribute__((noinline, cold)) void commit_carved(mt_alloc *a, uint32_t id,
                                                          uint64_t start, uint64_t pad,
                                                          const mta_req *r, mt_alloc_block *out)
{
    const blk *x = &a->b[id];
    uint32_t rid = x->region;
    mta_req br = {r->size + pad, r->align, r->kind};
    uint32_t uid = carve(a, id, x->off, x->off + x->size, start - pad, &br);
    a->b[uid].cls = (uint16_t)pad;
    record(a, rid, start, uid, r, out);
}

/* Carves the request out of free block id at `start` and records it.
 * Resources reserved: cannot fail. */
static void commit(mt_alloc *a, uint32_t id, uint64_t start, const mta_req *r,
                   mt_alloc_block *out)
{
    const blk *x = &a->b[id];
    uint64_t pad = start - x->off;
    if (blk_spans_region(x))
        a->reg_empty--; /* the region's first allocation */
    tlsf_unlink(a, id);
    commit_carved(a, id, start, a->pshift ? 0 : kept_pad(pad, r), r, out);
}

/* commit for the fast path, where the block is the head of class c and its
 * offset and size are at hand in the head record. When the request leaves
 * a tail (nearly always), the block keeps the tail: it stays where it is in
 * the index if the tail is still of class c, else (in the benchmarks
 * nearly always: best fit picks blocks little larger than the request) it
 * moves to the tail's class. The used block is a new node in front of it;
 * a leading pad the allocation does not keep (kept_pad) becomes a new free
 * block in front of that. */
static inline void commit_head(mt_alloc *a, unsigned c, uint64_t start, const mta_req *r,
                               mt_alloc_block *out)
{
    tlsf_idx *ix = &a->ix;
    uint32_t id = ix->head[c];
    uint64_t xoff = ix->hd[c].off, end = xoff + ix->hd[c].size, aend = start + r->size;
    blk *b = a->b, *x = &b[id];
    uint32_t rid = x->region;
    if (__builtin_expect(blk_spans_region(x), 0))
        a->reg_empty--; /* the region's first allocation */
    uint64_t pad = kept_pad(start - xoff, r); /* the fast path has no granularity pages */
    if (__builtin_expect(aend == end, 0)) { /* no tail: rare, out of line */
        tlsf_unlink_head(a, id, c);
        commit_carved(a, id, start, pad, r, out);
        return;
    }
    uint32_t prev = x->prev_phys, uid = node_take(a), left = prev, after_prev = uid;
    blk *u = &b[uid];
    /* The tail first: the pad below may go to class c too, in front. */
    x->off = aend;
    x->size = end - aend;
    x->prev_phys = uid;
    unsigned ct = class_index(end - aend);
    if (ct == c) {
        ix->hd[c] = (tlsf_head){aend, end - aend};
    } else {
        tlsf_unlink_head(a, id, c);
        tlsf_link(a, id, ct);
    }
    if (start - pad != xoff) {
        after_prev = left = node_take(a);
        blk *pb = &b[left];
        pb->off = xoff;
        pb->size = start - xoff;
        pb->prev_phys = prev;
        pb->next_phys = uid;
        pb->region = rid;
        pb->free = BLK_FREE;
        pb->kind = 0;
        tlsf_insert(a, left);
    }
    chain_after(a, rid, prev, after_prev);
    u->off = start - pad;
    u->size = r->size + pad;
    u->cls = (uint16_t)pad;
    u->prev_phys = left;
    u->next_phys = id;
    u->region = rid;
    u->free = BLK_USED;
    u->kind = (uint8_t)r->kind;
    record(a, rid, start, uid, r, out);
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
    /* The bad values OR'ed into one word (size - 1 wraps for 0, and is
     * below 2^56 = MT_ALLOC_MAX_SIZE for a good size), then the pointers. */
    _Static_assert(MT_ALLOC_MAX_SIZE == 1ull << 56 && MT_ALLOC_NONLINEAR == 1, "checks below");
    if (__builtin_expect(((align & (align - 1)) | ((size - 1) >> 56) | ((unsigned)kind >> 1)) != 0 ||
                         !a || !out, 0))
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
        (c = a->fast == FAST_BEST_FIT ? mta_best_fit_fast(a, &r, &start)
                                      : mta_first_fit_fast(a, &r, &start)) >= 0) {
        commit_head(a, (unsigned)c, start, &r, out);
        return 0;
    }
    /* Scalars: a request passed by address or by value would have to be
     * kept in memory on the fast path too. */
    return allocate_slow(a, r.size, r.align, r.kind, out);
}
