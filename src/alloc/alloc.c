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

#if MTI_BMI2_COPY
#include <cpuid.h>
#endif

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
    if ((unsigned)opts->strategy > MT_ALLOC_FIRST_FIT ||
        (opts->flags & ~(MT_ALLOC_RELEASE_EMPTY | MT_ALLOC_NO_OFFSET_MAP)))
        return -EINVAL;
    if ((opts->flags & MT_ALLOC_RELEASE_EMPTY) && !opts->release)
        return -EINVAL;
    mt_alloc *a = calloc(1, sizeof *a);
    if (!a)
        return -ENOMEM;
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
    /* Without the map, its room never runs out (reserve). The node array
     * always exists, so hint checks need no NULL test. */
    a->ht_room = UINT32_MAX;
    if (mti_alloc_node_reserve(a, 2) != 0 ||
        (!(a->flags & MT_ALLOC_NO_OFFSET_MAP) && mti_alloc_map_reserve(a) != 0)) {
        free(a->b);
        free(a);
        return -ENOMEM;
    }
    int bmi = mti_cpu_has_bmi2();
    mti_alloc_pick_alloc(a, bmi);
    mti_alloc_pick_free(a, bmi);
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

/* A leading pad of `pad` granules (what aligning the request in its block
 * skips) that stays part of the allocation instead of becoming a free
 * block of its own: at most 1/PAD_ABSORB_RATIO of the request, and it must
 * fit the node's 8 bits. Small pads are nearly useless as free blocks, and
 * making one costs a node and a list insertion at allocation and a merge
 * at free. Returns the pad kept: `pad` or 0. Not with granularity pages,
 * whose checks need the data's start as the block's (callers test). */
#define PAD_ABSORB_RATIO 16
static inline uint64_t kept_pad(uint64_t pad, const mta_req *r)
{
    return pad <= BLK_PAD_MAX && pad * PAD_ABSORB_RATIO <= r->size ? pad : 0;
}

/* Makes node u the used block [bstart, start + r->size) whose data starts
 * `pad` granules in (start = bstart + pad); used_owner names its region. */
static inline void used_extent(blk *u, uint64_t bstart, uint64_t pad, const mta_req *r)
{
    u->off = bstart | pad << OFF_PAD_SHIFT;
    u->size = (r->size + pad) | SZ_USED | (r->kind == MT_ALLOC_NONLINEAR ? SZ_NONLINEAR : 0);
}

static inline void used_owner(blk *u, uint32_t rid)
{
    u->region = rid;
    u->note = NOTE_USED; /* with the map, map_insert notes the entry after this */
}

/* used_extent and used_owner at once (commit_head splits them: its
 * values die sooner). */
static inline void used_fill(blk *u, uint64_t bstart, uint64_t pad, const mta_req *r,
                             uint32_t rid)
{
    used_extent(u, bstart, pad, r);
    used_owner(u, rid);
}

/* A free block whose neighbours prev and next are the same node (its
 * region's sentinel) spans its region: allocating in it ends the region's
 * emptiness, which only an allocator counting empty regions notes
 * (`empty`: MT_ALLOC_RELEASE_EMPTY, the count's one reader). */
static inline void note_first_allocation(mt_alloc *a, int empty, uint32_t prev, uint32_t next)
{
    if (empty && __builtin_expect(prev == next, 0))
        a->reg_empty--;
}

/* Whether a hot path's copy has the offset map: MAP_ASK tests. */
enum { MAP_NONE, MAP_YES, MAP_ASK };

/* Counts an allocation of `size` granules after a kept pad of `pad`. */
static inline void count_used(mt_alloc *a, uint64_t size, uint64_t pad)
{
    a->live++;
    a->used += size + pad;
    a->pad += pad;
}

/* Enters allocation uid, whose data starts at `start` of region rid, in
 * the map if this copy has one. */
static inline __attribute__((always_inline)) void map_enter(mt_alloc *a, uint32_t rid,
                                                            uint64_t start, uint32_t uid, int map)
{
    if (map == MAP_ASK ? a->ht != NULL : map == MAP_YES)
        map_insert(a, rid, start, uid);
}

/* Enters and counts allocation uid, and fills *out. */
static inline void record(mt_alloc *a, uint32_t rid, uint64_t start, uint64_t pad, uint32_t uid,
                          const mta_req *r, mt_alloc_block *restrict out)
{
    map_enter(a, rid, start, uid, MAP_ASK);
    count_used(a, r->size, pad);
    out->offset = start << a->gshift;
    out->size = r->size << a->gshift;
    out->region = rid;
    out->hint = uid;
}

/* Carves [start - pad, start + r->size) out of free block id, still on its
 * class list, for an allocation that keeps `pad` granules in front of its
 * data, and records it. The block keeps the tail if there is one, else the
 * leading part the allocation does not keep, else it becomes the
 * allocation; the other pieces get new nodes (reserved: cannot fail). The
 * general case, out of line: commit_head is the common one. */
static __attribute__((noinline)) void commit(mt_alloc *a, uint32_t id, uint64_t start,
                                             uint64_t pad, const mta_req *r, mt_alloc_block *out)
{
    blk *b = a->b, *x = NODE(b, id);
    uint64_t xoff = x->off, end = xoff + x->size, bstart = start - pad, aend = start + r->size;
    uint32_t prev = x->prev_phys, next = x->next_phys, rid = NODE(b, prev)->region;
    note_first_allocation(a, (a->flags & MT_ALLOC_RELEASE_EMPTY) != 0, prev, next);
    tlsf_unlink(a, id, x->size);
    uint32_t lead = NIL, tail = aend < end ? id : NIL;
    if (bstart > xoff)
        lead = tail ? node_take(a) : id;
    uint32_t uid = tail == id || lead == id ? node_take(a) : id;
    uint32_t p = prev;
    if (lead) {
        NODE(b, lead)->off = xoff;
        NODE(b, lead)->size = bstart - xoff;
        chain_link(b, p, lead);
        p = lead;
    }
    used_fill(NODE(b, uid), bstart, pad, r, rid);
    chain_link(b, p, uid);
    p = uid;
    if (tail) {
        NODE(b, tail)->off = aend;
        NODE(b, tail)->size = end - aend;
        chain_link(b, p, tail);
        p = tail;
    }
    chain_link(b, p, next);
    if (lead)
        tlsf_insert(a, lead);
    if (tail)
        tlsf_insert(a, tail);
    record(a, rid, start, pad, uid, r, out);
}

/* commit_head for a head block that the request fills to its end (no
 * tail; one allocation in twenty on gpu-typical sizes, where the smallest
 * classes are exact): the block takes no new node and its neighbours keep
 * their links, unless a leading part the allocation does not keep stays
 * free in front of it. Out of line, with scalars, so that the fast path
 * keeps no request in memory for it. */
static __attribute__((noinline)) int commit_no_tail(mt_alloc *a, unsigned c, uint64_t start,
                                                    uint64_t pad, uint64_t size_kind,
                                                    mt_alloc_block *out)
{
    uint64_t size = size_kind & SZ_MASK;
    unsigned kind = (unsigned)(size_kind >> 63);
    blk *b = a->b;
    uint32_t id = a->ix.head[c];
    blk *x = NODE(b, id);
    uint64_t xoff = x->off, bstart = start - pad;
    uint32_t prev = x->prev_phys, next = x->next_phys, rid = NODE(b, prev)->region, uid = id;
    mta_req r = {size, 1, kind};
    /* The unit of credit the inline path spent stands for a node taken
     * (internal.h, b_unused_n): none is for the allocation here. */
    a->b_unused_n++;
    note_first_allocation(a, (a->flags & MT_ALLOC_RELEASE_EMPTY) != 0, prev, next);
    tlsf_unlink_head(a, id, c);
    if (bstart != xoff) { /* the leading part stays free in node id (pad is 0) */
        uid = node_take(a);
        x->size = bstart - xoff;
        tlsf_insert(a, id);
        chain_link(b, id, uid);
        chain_link(b, uid, next);
    }
    used_fill(NODE(b, uid), bstart, pad, &r, rid);
    record(a, rid, start, pad, uid, &r, out);
    return 0;
}

/* commit for the fast path, where the block is the head of class c, whose
 * node the search has just read. When the request leaves a tail (nearly
 * always), the block keeps the tail: it stays where it is in the index if
 * the tail is still of class c, else it moves to the tail's class. The used block is a new node in front of it; a leading pad the
 * allocation does not keep (kept_pad) becomes a new free block in front of
 * that. */
static inline __attribute__((always_inline)) int commit_head(mt_alloc *a, unsigned c, uint64_t amask, uint64_t size,
                               unsigned kind, mt_alloc_block *restrict out, int map,
                               int empty)
{
    /* The allocation's node first (filled, counted, linked to its previous
     * neighbour), then the block's tail refiled, then the leading part:
     * the allocation's values are dead while the tail is refiled (-5
     * instructions a pair against the tail first, docs/alloc.md). */
    tlsf_idx *ix = &a->ix;
    blk *b = a->b;
    uint32_t id = ix->head[c];
    blk *x = NODE(b, id);
    /* What aligning skips, -xoff & amask, then the start: one operation
     * fewer than rounding the offset up and subtracting it again. */
    uint64_t xoff = x->off, skip = -xoff & amask, start = xoff + skip, aend = start + size;
    uint64_t tail = xoff + x->size - aend;
    mta_req r = {size, 1, kind};
    uint64_t pad = kept_pad(skip, &r); /* the fast path has no granularity pages */
    /* The caller's block as soon as each part is known: fewer values live
     * (-5 instructions a pair against writing it all at the end). */
    out->offset = start << a->gshift;
    out->size = size << a->gshift;
    /* No tail: rare, out of line (six arguments: a tail call). */
    if (__builtin_expect(tail == 0, 0))
        return commit_no_tail(a, c, start, pad, size | (uint64_t)kind << 63, out);
    /* The used block's node is counted by the unit of credit the caller
     * spent (internal.h, b_unused_n); a leading block's below. */
    uint32_t prev = x->prev_phys, uid = node_take_uncounted(a);
    note_first_allocation(a, empty, prev, x->next_phys);
    blk *u = NODE(b, uid);
    used_extent(u, start - pad, pad, &r);
    u->next_phys = id;
    count_used(a, size, pad);
    uint32_t rid = NODE(b, prev)->region;
    used_owner(u, rid);
    chain_link(b, prev, uid);
    out->region = rid;
    out->hint = uid;
    x->off = aend;
    x->size = tail;
    x->prev_phys = uid;
    unsigned ct = class_index(tail);
    if (ct != c) { /* else it stays where it is, the head of class c */
        tlsf_unlink_head(a, id, c);
        tlsf_link(a, id, ct);
    }
    map_enter(a, rid, start, uid, map);
    if (skip != pad) { /* the pad is not kept (pad is 0): a leading free block */
        uint32_t lead = node_take(a);
        NODE(b, lead)->off = xoff;
        NODE(b, lead)->size = skip;
        chain_link(b, u->prev_phys, lead);
        chain_link(b, lead, uid);
        tlsf_insert(a, lead);
    }
    return 0;
}

/* Makes sure a split can take two nodes (leading pad, allocation) and the
 * offset map has room for one more entry, and renews the inline path's
 * credit: the allocations certain to find both without looking, at most
 * CREDIT_MAX. Only grows something when the allocator holds more blocks
 * than ever before; when the credit would be small, it grows a little
 * early, so that the inline path does not come here every few calls. */
#define CREDIT_MAX 1024u

#define CREDIT_MIN 16u
static __attribute__((noinline)) int reserve_slow(mt_alloc *a)
{
    mti_alloc_settle(a);
    if (a->b_unused_n < 2 * CREDIT_MIN && mti_alloc_node_reserve(a, 2 * CREDIT_MIN) != 0 &&
        a->b_unused_n < 2)
        return -ENOMEM;
    if (a->ht && a->live + CREDIT_MIN > a->ht_room && mti_alloc_map_reserve(a) != 0 &&
        a->live >= a->ht_room)
        return -ENOMEM;
    uint32_t c = a->b_unused_n / 2, room = a->ht_room - a->live;
    c = c < room ? c : room;
    a->credit = a->credit_base = a->fast ? (c < CREDIT_MAX ? c : CREDIT_MAX) : 0;
    return 0;
}

static inline int reserve(mt_alloc *a)
{
    if (__builtin_expect(mti_alloc_unused(a) >= 2 && a->live < a->ht_room, 1))
        return 0;
    return reserve_slow(a);
}

/* Places the request in free block id (found by a search, or a fresh
 * region's only block) at `start`. */
static void commit_found(mt_alloc *a, uint32_t id, uint64_t start, const mta_req *r,
                         mt_alloc_block *out)
{
    uint64_t pad = a->pshift ? 0 : kept_pad(start - NODE(a->b, id)->off, r);
    commit(a, id, start, pad, r, out);
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
    uint32_t id = region_first(a, a->reg_added);
    uint64_t start = blk_is_free(NODE(a->b, id)) ? mti_alloc_fit(a, NODE(a->b, id), r) : NO_FIT;
    if (start == NO_FIT)
        return -ENOSPC;
    commit_found(a, id, start, r, out);
    return 0;
}

/* Everything but the common case: metadata to grow, granularity
 * separation, the scans, the grow callback. */
static __attribute__((noinline)) int allocate_slow(mt_alloc *a, uint64_t size, uint64_t align,
                                                   unsigned kind, mt_alloc_block *out)
{
    mta_req r = {size, align, kind};
    mti_alloc_settle(a); /* reserve reads the count; commit counts its nodes */
    int rc = a->credit ? 0 : reserve_slow(a);
    if (rc == 0)
        rc = reserve(a);
    if (rc)
        return rc;
    uint64_t start;
    uint32_t id = mti_alloc_search(a, &r, &start);
    if (id == NIL)
        return a->grow ? allocate_grown(a, &r, out) : -ENOSPC;
    commit_found(a, id, start, &r, out);
    /* It took what one unit of credit stands for, and counted its nodes:
     * base and credit move together (the count stays settled). */
    if (a->credit) {
        a->credit--;
        a->credit_base--;
    }
    return 0;
}

/* Bad arguments told apart, alignment 0 and alignments beyond
 * MT_ALLOC_MAX_SIZE, off the fast path. Offsets are below
 * MT_ALLOC_MAX_SIZE: a larger alignment means offset 0, exactly as
 * MT_ALLOC_MAX_SIZE does. */
static __attribute__((noinline)) int allocate_unusual(mt_alloc *a, uint64_t size_m1,
                                                      uint64_t align_m1, mt_alloc_kind kind,
                                                      mt_alloc_block *out)
{
    /* The fast path's size - 1 and align - 1 (it keeps no other copy). */
    uint64_t size = size_m1 + 1, align = align_m1 + 1;
    if (!out || size == 0 || (align & (align - 1)) != 0 ||
        (unsigned)kind > MT_ALLOC_NONLINEAR)
        return -EINVAL;
    if (size > MT_ALLOC_MAX_SIZE)
        return -ENOSPC;
    unsigned gs = a->gshift;
    /* 0 means the granule. */
    align = align > MT_ALLOC_MAX_SIZE ? MT_ALLOC_MAX_SIZE >> gs : align >> gs;
    return allocate_slow(a, ((size - 1) >> gs) + 1, align ? align : 1, (unsigned)kind, out);
}

/* The hot path, one copy per strategy (fast: FAST_*, or 0 for the
 * general path alone) and map (MAP_*), picked by mti_alloc_pick_alloc. */
static inline __attribute__((always_inline)) int allocate(mt_alloc *a, uint64_t size,
                                                          uint64_t align, mt_alloc_kind kind,
                                                          mt_alloc_block *restrict out, int fast,
                                                          int map, int empty)
{
    /* The unusual values OR'ed into one word (size - 1 and align - 1 wrap
     * for 0, and are below 2^56 = MT_ALLOC_MAX_SIZE for a good size and a
     * power-of-two alignment up to it), then the pointer (a is not NULL:
     * mt_alloc_allocate). Alignment 0 (the granule) goes the unusual way
     * too, so that here align - 1 shifted to granules is the alignment's
     * mask, whatever the granule: no test. */
    _Static_assert(MT_ALLOC_MAX_SIZE == 1ull << 56 && MT_ALLOC_NONLINEAR == 1, "checks below");
    uint64_t size_m1 = size - 1, align_m1 = align - 1;
    if (__builtin_expect(((align & align_m1) | ((size_m1 | align_m1) >> 56) |
                          ((unsigned)kind >> 1)) != 0 || !out, 0))
        return allocate_unusual(a, size_m1, align_m1, kind, out);
    unsigned gs = a->gshift;
    /* The alignment in granules as its mask: align_up and the worst case
     * need nothing else. */
    uint64_t amask = align_m1 >> gs;
    mta_req r = {(size_m1 >> gs) + 1, amask + 1, (unsigned)kind};
    /* The common case inline: no granularity pages, credit for spare nodes
     * and map room, a block found among the class heads. */
    int c;
    if (!fast || __builtin_expect(a->credit == 0, 0))
        goto slow;
    if (fast == FAST_FIRST_FIT) {
        if ((c = mti_alloc_first_fit_fast(a, &r)) < 0)
            goto slow;
    } else {
        /* mti_alloc_best_fit_fast, written out here so that only its rare
         * way (no two guaranteed heads in one bitmap word) tests for "none"
         * (search.h). */
        const tlsf_idx *ix = &a->ix;
        unsigned cu = class_index(r.size);
        if (head_fits_mask(NODE(a->b, ix->head[cu]), r.size, amask)) {
            c = (int)cu;
            goto found;
        }
        unsigned cw = class_index_up(r.size + amask);
        if (a->used >= a->tight && cu + 1 < cw) {
            int k = tlsf_class_from(ix, cu + 1);
            if (k >= 0 && (unsigned)k < cw &&
                head_fits_mask(NODE(a->b, ix->head[k]), r.size, amask)) {
                c = k;
                goto found;
            }
        }
        unsigned w = cw / 64;
        uint64_t m = ix->cls_map[w] & (~0ull << (cw % 64)), m2 = m & (m - 1);
        if (__builtin_expect(m2 == 0, 0)) {
            if ((c = mti_alloc_lowest_head(a, cw, 2)) < 0)
                goto slow;
            goto found;
        }
        c = mti_alloc_lower_of_two(a, w, m, m2,
                                   a->used >= a->tight ? TIGHT_SPAN : GUARANTEED_SPAN);
    }
found:
    a->credit--;
    return commit_head(a, (unsigned)c, amask, r.size, r.kind, out, map, empty);
slow:
    /* Scalars: a request passed by address or by value would have to be
     * kept in memory on the fast path too. */
    return allocate_slow(a, r.size, r.align, r.kind, out);
}

/* The copies: strategy, map, and whether the allocator counts its empty
 * regions (MT_ALLOC_RELEASE_EMPTY, the only reader of that count: the
 * others skip the test for a region's first allocation). */
#define ALLOC_COPY(name, attr, fast, map, empty)                                            \
    static attr int name(mt_alloc *a, uint64_t size, uint64_t align, mt_alloc_kind kind,   \
                         mt_alloc_block *restrict out)                                     \
    {                                                                                      \
        return allocate(a, size, align, kind, out, fast, map, empty);                      \
    }
#define ALLOC_COPIES(sfx, attr)                                                             \
    ALLOC_COPY(alloc_best_map##sfx, attr, FAST_BEST_FIT, MAP_YES, 0)                       \
    ALLOC_COPY(alloc_best_nomap##sfx, attr, FAST_BEST_FIT, MAP_NONE, 0)                    \
    ALLOC_COPY(alloc_first##sfx, attr, FAST_FIRST_FIT, MAP_ASK, 0)                         \
    ALLOC_COPY(alloc_best_map_empty##sfx, attr, FAST_BEST_FIT, MAP_YES, 1)                 \
    ALLOC_COPY(alloc_best_nomap_empty##sfx, attr, FAST_BEST_FIT, MAP_NONE, 1)              \
    ALLOC_COPY(alloc_first_empty##sfx, attr, FAST_FIRST_FIT, MAP_ASK, 1)                   \
    static mti_alloc_fn *const alloc_copies##sfx[2][3] = {                                 \
        {alloc_best_map##sfx, alloc_best_nomap##sfx, alloc_first##sfx},                    \
        {alloc_best_map_empty##sfx, alloc_best_nomap_empty##sfx, alloc_first_empty##sfx}};
ALLOC_COPIES(, )
ALLOC_COPY(alloc_general, , 0, MAP_ASK, 1)
#if MTI_BMI2_COPY
ALLOC_COPIES(_bmi2, MTI_TARGET_BMI2)
#endif

void mti_alloc_pick_alloc(mt_alloc *a, int bmi)
{
    int empty = (a->flags & MT_ALLOC_RELEASE_EMPTY) != 0;
    int which = a->fast == FAST_BEST_FIT ? a->ht != NULL ? 0 : 1 : 2;
    (void)bmi; /* without BMI copies */
    if (!a->fast) {
        a->alloc_fn = alloc_general;
        return;
    }
#if MTI_BMI2_COPY
    if (bmi) {
        a->alloc_fn = alloc_copies_bmi2[empty][which];
        return;
    }
#endif
    a->alloc_fn = alloc_copies[empty][which];
}

#if MTI_BMI2_COPY
/* Whether the CPU has BMI1 and BMI2, which the BMI copies use (internal.h). */
int mti_cpu_has_bmi2(void)
{
    unsigned eax, ebx, ecx, edx;
    return __get_cpuid_count(7, 0, &eax, &ebx, &ecx, &edx) && (ebx & bit_BMI) && (ebx & bit_BMI2);
}
#endif

/* The public entry point. */
int mt_alloc_allocate(mt_alloc *a, uint64_t size, uint64_t align, mt_alloc_kind kind,
                      mt_alloc_block *restrict out)
{
    if (__builtin_expect(!a, 0))
        return -EINVAL;
    return a->alloc_fn(a, size, align, kind, out);
}
