/* alloc internals shared by the region allocator's files.
 *
 * Everything is indexed by 32-bit ids into growable arrays (never pointers),
 * so the arrays can be realloc'ed; id 0 is "none" in every array.
 *
 * Blocks: a block is a run of granules of one region, free or used. Blocks of
 * a region form a doubly linked chain in address order (prev_phys/next_phys)
 * that covers the region exactly. Invariant (immediate coalescing): two free
 * blocks are never neighbours, so a free block's neighbours are used blocks
 * or the region's ends.
 *
 * Free blocks sit on one of FL_N x SL_N size-class lists (TLSF): the first
 * level is the power of two of the size in granules, the second splits it
 * into SL_N equal classes. A bitmap with a summary word says which lists
 * are non-empty, so the smallest non-empty class at or above any size is
 * two bit scans away.
 *
 * Used blocks are found by (region, offset) through the offset map, a hash
 * table with bounded probes (offmap.h), or through the hint of the block
 * the caller got (mt_alloc_free_block). */
#ifndef MT_ALLOC_INTERNAL_H
#define MT_ALLOC_INTERNAL_H

#include <stdint.h>

#include "memtrack/alloc.h"

/* 8 classes per power of two. With 32, the ~800 free blocks of an aged
 * heap spread so thin that a quarter of all list insertions and removals
 * emptied or filled a class; with 8 one in twenty does, fragmentation is
 * the same on GPU-sized requests, and a request is rounded up by at most
 * 1/8 for the guaranteed classes (docs/alloc.md). */
#define SL_LOG2 3
#define SL_N (1u << SL_LOG2)
/* Block sizes in granules are at most 2^56 (MT_ALLOC_MAX_SIZE with a granule
 * of 1); searches round up to below 2^57. Top bit at most 56, so the first
 * level is at most 56 - SL_LOG2 + 1. */
#define FL_N (57 - SL_LOG2 + 1)
#define U_LIMIT ((1ull << 57) - 1) /* largest size in granules with a class */

/* Farthest bucket from its home that an offset-map entry may live in
 * (offmap.h): lookups read at most PROBE_LIMIT + 1 buckets. */
#define PROBE_LIMIT 3u

/* The last-resort scans (search.h): how many blocks of one class are
 * looked at. A constant, so the worst case stays O(1). */
#define BEST_FIT_SCAN 8


#define NIL 0u
#define N_CLASSES (FL_N * SL_N)
/* Words of the class bitmap: one bit per class, and room for bit
 * N_CLASSES ("no class is certain to fit"), which is never set. */
#define CLS_WORDS ((N_CLASSES + 64) / 64)
#define NO_FIT UINT64_MAX

/* A block. Offsets and sizes are counted in granules, so that class and
 * alignment arithmetic needs no shifting; bytes appear only at the API. */
typedef struct blk {
    uint64_t off;  /* offset in the region, granules */
    uint64_t size; /* granules, > 0 */
    uint32_t prev_phys, next_phys;
    /* Class-list links of a free block; next_free also links unused nodes.
     * A used block keeps where its offset-map entry is there (offmap.h). */
    uint32_t prev_free, next_free;
    uint32_t region;
    /* Free block: its class list, fl * SL_N + sl. Used block: the granules
     * of leading pad it kept (alloc.c, kept_pad); its data starts at
     * off + cls (blk_data_off), which is the offset the caller knows. */
    uint16_t cls;
    uint8_t free; /* BLK_USED, BLK_FREE, or BLK_UNUSED: not a block */
    uint8_t kind;
} blk;

enum { BLK_USED = 0, BLK_FREE = 1, BLK_UNUSED = 2 };

/* mt_alloc.fast: which inline allocation path, 0 for none (granularity
 * pages: everything goes through mta_search). */
enum { FAST_BEST_FIT = 1, FAST_FIRST_FIT = 2 };

#define BLK_PAD_MAX UINT16_MAX

/* Where a used block's data starts: after the pad it kept. */
static inline uint64_t blk_data_off(const blk *x) { return x->off + x->cls; }

/* Node ids: NIL (0) is "none" and the sink node (tlsf.h); blocks start at
 * FIRST_NODE. */
#define FIRST_NODE 1u

/* Offset and size of a class's first block, kept beside the index so that
 * a search compares and checks heads without touching their nodes: the
 * node of the block finally chosen is the only one it reads. An empty
 * class reads {UINT64_MAX, 0}, what the sink node NIL holds (tlsf.h). */
typedef struct tlsf_head {
    uint64_t off, size;
} tlsf_head;

/* A TLSF index: class lists and their bitmap. With SL_N classes per power
 * of two, the classes of 64 / SL_N powers of two share one bitmap word, so
 * that finding the next few non-empty classes rarely leaves a word; the
 * summary word says which words are not zero. */
typedef struct tlsf_idx {
    uint64_t summary;              /* bit w: cls_map[w] != 0 */
    uint64_t cls_map[CLS_WORDS];   /* bit c: class c has blocks */
    uint32_t head[N_CLASSES + 1];  /* by class index fl * SL_N + sl */
    tlsf_head hd[N_CLASSES + 1];   /* hd[N_CLASSES]: always empty (search.h) */
} tlsf_idx;

/* A bucket of the offset map (offmap.h): one cache line, MAP_LANES entries.
 * tag[i] is 0 for an empty lane, else 0x80 | 7 bits of the key's hash;
 * spill counts the entries whose home is this bucket but which live in a
 * later one. */
#define MAP_LANES 12
typedef struct mbucket {
    uint8_t tag[MAP_LANES];
    uint32_t spill;
    uint32_t id[MAP_LANES];
} mbucket;

typedef struct region {
    uint64_t size;     /* bytes; 0: the slot is unused */
    void *user;
    uint32_t first;    /* block at offset 0 */
    uint32_t next_unused; /* free-slot list link */
} region;

/* Hot fields first: the allocate and free paths read the first cache line
 * and the class index, nothing else of the allocator. Counters that can be
 * derived are not kept: live allocations are the offset map's entries,
 * free blocks the nodes in use minus those, a region's use is a walk of its
 * chain (mt_alloc_region_info). */
struct mt_alloc {
    blk *b;            /* nodes; b[NIL] is the sink node (tlsf.h) */
    mbucket *ht;       /* offset map: ht_mask + 1 buckets */
    uint64_t ht_seed;  /* odd multiplier of the hash */
    uint32_t ht_mask, ht_shift, ht_limit;
    uint32_t ht_used;  /* entries: the live allocations */
    uint32_t ht_room;  /* entries allowed before the map grows: half its lanes */
    uint32_t b_unused; /* list of unused nodes (via next_free) */
    uint32_t b_unused_n;
    unsigned gshift;   /* log2(granule) */
    unsigned pshift;   /* log2(granularity page in granules); 0: no separation */
    mt_alloc_strategy strategy;
    uint32_t fast;     /* FAST_*: the inline path and its strategy, or 0 */
    uint32_t reg_cap;
    region *reg;
    uint64_t used;       /* granules in used blocks */
    uint64_t pad;        /* of which leading pads kept (blk.cls) */

    uint64_t total;      /* bytes */
    uint32_t b_cap;
    uint32_t reg_empty;  /* live regions with no allocation */
    uint32_t flags;
    uint32_t reg_unused; /* list of unused slots (ids + 1; 0 = none) */
    uint32_t reg_live;
    uint32_t reg_added;  /* id of the region added last */
    int (*grow)(void *user, mt_alloc *a, uint64_t min_size);
    void (*release)(void *user, uint32_t region, uint64_t size, void *region_user);
    void *user;

    tlsf_idx ix;    /* the free blocks */
};

/* ---- size classes ---------------------------------------------------------- */

/* 63 - clz, written as an exclusive or so that compilers see it is the bit
 * scan itself (bsr) and not a scan, a flip and a subtraction. */
static inline unsigned msb64(uint64_t x) { return 63u ^ (unsigned)__builtin_clzll(x); }

/* Shift that brings u granules down to its second-level index: 0 below
 * 2 * SL_N (classes are exact there), else msb(u) - SL_LOG2. Or-ing in SL_N
 * makes the formula hold for small u too, without a branch. */
static inline unsigned class_shift(uint64_t u) { return msb64(u | SL_N) - SL_LOG2; }

/* Class index (fl * SL_N + sl) of a free block of u > 0 granules: exact
 * below 2 * SL_N, then SL_N classes per power of two. With s = class_shift,
 * u >> s lies in [SL_N, 2 * SL_N) and each shift step adds SL_N classes. */
static inline unsigned class_index(uint64_t u)
{
    unsigned s = class_shift(u);
    return (s << SL_LOG2) + (unsigned)(u >> s);
}

static inline void class_of(uint64_t u, unsigned *fl, unsigned *sl)
{
    unsigned c = class_index(u);
    *fl = c / SL_N;
    *sl = c % SL_N;
}

/* u rounded up to the next class boundary, so that every block of its class
 * holds u granules. */
static inline uint64_t class_round_up(uint64_t u) { return u + (1ull << class_shift(u)) - 1; }

/* class_index(class_round_up(u)) for u <= U_LIMIT, with one bit scan: the
 * next class up unless u is the smallest size of its own class. N_CLASSES
 * when no class is certain to hold u. */
static inline unsigned class_index_up(uint64_t u)
{
    unsigned s = class_shift(u);
    return (s << SL_LOG2) + (unsigned)(u >> s) + ((u & ((1ull << s) - 1)) != 0);
}

static inline uint64_t align_up(uint64_t x, uint64_t a) { return (x + a - 1) & ~(a - 1); }

/* ---- functions shared between files (hidden in the shared library) -------- */

/* nodes.c: makes sure at least n unused nodes exist (grows the array). */
int mta_node_reserve(mt_alloc *a, uint32_t n);

/* A request, normalised, in granules: see search.h. */
typedef struct mta_req {
    uint64_t size;  /* > 0 */
    uint64_t align; /* a power of two >= 1 */
    unsigned kind;
} mta_req;

/* offmap.c: makes room for one more entry (at most half full); rebuilds
 * the table when an entry landed farther than PROBE_LIMIT from home. */
int mta_map_reserve(mt_alloc *a);
int mta_map_rebuild(mt_alloc *a);

/* region.c: a region lost its last allocation / is being removed. */
void mta_region_emptied(mt_alloc *a, uint32_t id);
void mta_region_drop(mt_alloc *a, uint32_t id, int call_release);

/* Makes `id` the block after `prev` in region rid's chain: prev's link,
 * or the region's first block when prev is NIL. */
static inline void chain_after(mt_alloc *a, uint32_t rid, uint32_t prev, uint32_t id)
{
    *(prev != NIL ? &a->b[prev].next_phys : &a->reg[rid].first) = id;
}

/* A free block covering its whole region: the region has no allocation. */
static inline int blk_spans_region(const blk *x) { return (x->prev_phys | x->next_phys) == NIL; }

/* Free blocks: every node in use that is not a live allocation. */
static inline uint64_t mta_free_blocks(const mt_alloc *a)
{
    return a->b_cap ? (uint64_t)(a->b_cap - FIRST_NODE - a->b_unused_n) - a->ht_used : 0;
}

#endif
