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
 * into SL_N equal classes. Bitmaps say which lists are non-empty, so the
 * smallest non-empty class at or above any size is two bit scans away.
 *
 * Used blocks are found by (region, offset) through the offset map, a hash
 * table with bounded probes (offmap.h). */
#ifndef MT_ALLOC_INTERNAL_H
#define MT_ALLOC_INTERNAL_H

#include <stdint.h>

#include "memtrack/alloc.h"

#define SL_LOG2 5
#define SL_N (1u << SL_LOG2)
/* Block sizes in granules are at most 2^56 (MT_ALLOC_MAX_SIZE with a granule
 * of 1); searches round up to below 2^57. Top bit at most 56, so the first
 * level is at most 56 - SL_LOG2 + 1. */
#define FL_N (57 - SL_LOG2 + 1)
#define U_LIMIT ((1ull << 57) - 1) /* largest size in granules with a class */

/* Longest probe of the offset map (offmap.h). */
#define PROBE_LIMIT 32u

/* Bounded best fit: how many blocks of one class are looked at. A constant,
 * so the worst case stays O(1). */
#define BEST_FIT_SCAN 8

#define NIL 0u
#define N_CLASSES (FL_N * SL_N)
#define NO_FIT UINT64_MAX

typedef struct blk {
    uint64_t off;  /* offset in the region */
    uint64_t size; /* bytes, a multiple of the granule, > 0 */
    uint32_t prev_phys, next_phys;
    /* Class-list links of a free block; next_free also links unused nodes. */
    uint32_t prev_free, next_free;
    uint32_t region;
    uint8_t free;
    uint8_t kind;
    uint16_t cls; /* class list of a free block: fl * SL_N + sl */
} blk;

/* A TLSF index: class lists and their bitmaps. */
typedef struct tlsf_idx {
    uint64_t fl_map;
    uint32_t sl_map[FL_N];
    uint32_t head[FL_N * SL_N]; /* by class index fl * SL_N + sl */
    /* Offset of each head, so that heads are compared without touching
     * their nodes (stale for empty classes). */
    uint64_t head_off[FL_N * SL_N];
} tlsf_idx;

typedef struct mslot {
    uint32_t id;  /* block, or NIL: empty */
    uint32_t tag; /* top 32 bits of the key's hash */
} mslot;

typedef struct region {
    uint64_t size;     /* 0: the slot is unused */
    uint64_t used;     /* bytes in used blocks */
    uint64_t allocs;   /* live allocations */
    void *user;
    uint32_t first;    /* block at offset 0 */
    uint32_t next_unused; /* free-slot list link */
} region;

struct mt_alloc {
    unsigned gshift;   /* log2(granule) */
    unsigned pshift;   /* log2(granularity page); 0: no separation */
    mt_alloc_strategy strategy;
    uint32_t flags;

    tlsf_idx ix;    /* the free blocks */

    blk *b;            /* node array; b[0] unused */
    uint32_t b_cap;
    uint32_t b_unused; /* list of unused nodes (via next_free) */
    uint32_t b_unused_n;

    mslot *ht;         /* offset map: ht_mask + 1 slots */
    uint32_t ht_mask, ht_shift, ht_used, ht_limit;
    uint64_t ht_seed;  /* odd multiplier of the hash */

    region *reg;
    uint32_t reg_cap;
    uint32_t reg_unused; /* list of unused slots (ids + 1; 0 = none) */
    uint32_t reg_live;
    uint32_t reg_empty;  /* live regions with no allocation */
    uint32_t reg_added;  /* id of the region added last */

    uint64_t total, used, allocs, free_blocks;

    int (*grow)(void *user, mt_alloc *a, uint64_t min_size);
    void (*release)(void *user, uint32_t region, uint64_t size, void *region_user);
    void *user;
};

/* ---- size classes ---------------------------------------------------------- */

static inline unsigned msb64(uint64_t x) { return 63u - (unsigned)__builtin_clzll(x); }

/* Class of a free block of u granules: exact below SL_N, then SL_N classes
 * per power of two. */
static inline void class_of(uint64_t u, unsigned *fl, unsigned *sl)
{
    if (u < SL_N) {
        *fl = 0;
        *sl = (unsigned)u;
    } else {
        unsigned m = msb64(u);
        *fl = m - SL_LOG2 + 1;
        *sl = (unsigned)(u >> (m - SL_LOG2)) - SL_N;
    }
}

static inline unsigned class_index(uint64_t u)
{
    unsigned fl, sl;
    class_of(u, &fl, &sl);
    return fl * SL_N + sl;
}

/* u rounded up to the next class boundary, so that every block of its class
 * holds u granules. */
static inline uint64_t class_round_up(uint64_t u)
{
    if (u < SL_N)
        return u;
    return u + ((1ull << (msb64(u) - SL_LOG2)) - 1);
}

static inline uint64_t align_up(uint64_t x, uint64_t a) { return (x + a - 1) & ~(a - 1); }

/* ---- functions shared between files (hidden in the shared library) -------- */

/* nodes.c: makes sure at least n unused nodes exist (grows the array). */
int mta_node_reserve(mt_alloc *a, uint32_t n);

/* A request, normalised: see search.h. */
typedef struct mta_req {
    uint64_t size;  /* rounded to the granule */
    uint64_t align; /* >= granule */
    unsigned kind;
} mta_req;

/* offmap.c: makes room for one more entry (at most half full); rebuilds
 * the table when a probe got longer than PROBE_LIMIT. */
int mta_map_reserve(mt_alloc *a);
int mta_map_rebuild(mt_alloc *a);

/* region.c: a region lost its last allocation / is being removed. */
void mta_region_emptied(mt_alloc *a, uint32_t id);
void mta_region_drop(mt_alloc *a, uint32_t id, int call_release);

#endif
