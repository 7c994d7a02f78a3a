/* alloc internals shared by the region allocator's files.
 *
 * Everything is indexed by 32-bit ids into growable arrays (never pointers),
 * so the arrays can be realloc'ed; id 0 is "none" in every array.
 *
 * Blocks: a block is a run of granules of one region, free or used. Blocks of
 * a region form a circular doubly linked chain in address order
 * (prev_phys/next_phys) through the region's *sentinel*, a node that is no
 * block: the sentinel's next is the region's first block, its prev the last
 * one. Linking a block in is therefore the same at the region's ends as in
 * its middle, and a block whose neighbours are both the sentinel spans the
 * region. Invariant (immediate coalescing): two free blocks are never
 * neighbours, so a free block's neighbours are used blocks or the sentinel,
 * which both carry the region id: a free block's region is its previous
 * neighbour's.
 *
 * Free blocks sit on one of FL_N x SL_N size-class lists (TLSF): the first
 * level is the power of two of the size in granules, the second splits it
 * into SL_N equal classes. A bitmap says which lists are non-empty, so the
 * smallest non-empty class at or above any size is a bit scan away (two
 * when it lies in a later bitmap word).
 *
 * Used blocks are found by the hint of the block the caller got
 * (mt_alloc_free_block), or by (region, offset) through the offset map, a
 * hash table with bounded probes (offmap.h), which MT_ALLOC_NO_OFFSET_MAP
 * leaves out. */
#ifndef MT_ALLOC_INTERNAL_H
#define MT_ALLOC_INTERNAL_H

#include <stdint.h>
#include <string.h>

#include "memtrack/alloc.h"

/* 16 classes per power of two: a request's guaranteed class (every block
 * of it holds the request) is at most 1/16 above it, so near full a request
 * still finds a block that is barely larger. With the "tight" search
 * (mti_alloc_set_tight) an aged heap fills to 0.99 before its first refusal;
 * 8 classes reach 0.98, and 32 cost 5 ns per alloc+free pair in class-list
 * churn (docs/alloc.md). */
#define SL_LOG2 4
#define SL_N (1u << SL_LOG2)
/* Block sizes in granules are at most 2^56 (MT_ALLOC_MAX_SIZE with a granule
 * of 1); searches round up to below 2^57. Top bit at most 56, so the first
 * level is at most 56 - SL_LOG2 + 1. */
#define FL_N (57 - SL_LOG2 + 1)
#define U_LIMIT ((1ull << 57) - 1) /* largest size in granules with a class */

/* Farthest bucket from its home that an offset-map entry may live in
 * (offmap.h): lookups read at most PROBE_LIMIT + 1 buckets. */
#define PROBE_LIMIT 3u

/* The last-resort scans (search.h): how many blocks they look at, in all.
 * A constant, so the worst case stays O(1). */
#define SCAN_LIMIT 64

#define NIL 0u
#define N_CLASSES (FL_N * SL_N)
/* Words of the class bitmap: one bit per class, and room for bit
 * N_CLASSES ("no class is certain to fit"), which is never set. */
#define CLS_WORDS ((N_CLASSES + 64) / 64)
#define NO_FIT UINT64_MAX

/* A node: a block, a region's sentinel, or unused. 32 bytes, two to a cache
 * line. Offsets and sizes are counted in granules, so that class and
 * alignment arithmetic needs no shifting; bytes appear only at the API.
 * Both are below 2^57, which leaves their top bits for the block's state:
 *
 *   off   free block: the offset. Used block: the offset of the block,
 *         and in bits 56-63 the granules of leading pad it kept (alloc.c,
 *         kept_pad): its data starts at off + pad (blk_data_off).
 *   size  free block: the size, nothing else (a free block's size and
 *         offset are read as they are on every hot path). Used block: the
 *         size with SZ_USED and SZ_NONLINEAR. Sentinel: SZ_USED | SZ_SENT.
 *         Unused node: no SZ_USED (0, or the size it had as a
 *         free block).
 *
 * A free block's class is not stored: class_index(size) gives it. */
typedef struct blk {
    uint64_t off;
    uint64_t size;
    uint32_t prev_phys, next_phys;
    union {
        struct { /* free block: its class list; unused node: next_free links them */
            uint32_t prev_free, next_free;
        };
        struct { /* used block, sentinel */
            uint32_t region;
            /* Used block, with the offset map: where its entry is
             * (offmap.h, map_note); without it, NOTE_USED. */
            uint32_t note;
        };
    };
} blk;

_Static_assert(sizeof(blk) == 32, "two nodes per cache line");
_Static_assert(sizeof(blk) == 1u << 5, "node ids are byte offsets: NODE_SHIFT");

/* A used block's note in an allocator without the offset map. No free
 * block's or unused node's next_free is 1 (node ids are multiples of 32)
 * and a sentinel's note is 0, so the word of region and note equals
 * used_key(rid) exactly for a used block of region rid: the hint check of
 * the copies without the map reads state and region in one comparison. */
#define NOTE_USED 1u
static inline uint64_t used_key(uint32_t rid)
{
    /* blk_key's word: region first in memory, then note. */
#if __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
    return (uint64_t)rid << 32 | NOTE_USED;
#else
    return (uint64_t)NOTE_USED << 32 | rid;
#endif
}
static inline uint64_t blk_key(const blk *x)
{
    uint64_t k;
    memcpy(&k, &x->region, sizeof k);
    return k;
}

#define SZ_USED (1ull << 63)
/* SZ_SENT right below SZ_USED: the hint check (free.c) reads both as the
 * size word's top two bits. */
#define SZ_SENT (1ull << 62)      /* a region's sentinel */
#define SZ_NONLINEAR (1ull << 61) /* used block of kind MT_ALLOC_NONLINEAR */
#define SZ_MASK ((1ull << 57) - 1)
#define OFF_MASK ((1ull << 56) - 1)
#define OFF_PAD_SHIFT 56
#define BLK_PAD_MAX 255u

static inline int blk_is_free(const blk *x) { return !(x->size & SZ_USED); }
static inline uint64_t blk_size(const blk *x) { return x->size & SZ_MASK; }
static inline uint64_t blk_off(const blk *x) { return x->off & OFF_MASK; }
static inline unsigned blk_pad(const blk *x) { return (unsigned)(x->off >> OFF_PAD_SHIFT); }
static inline unsigned blk_kind(const blk *x) { return (x->size & SZ_NONLINEAR) != 0; }
/* Where a used block's data starts: after the pad it kept. */
static inline uint64_t blk_data_off(const blk *x) { return blk_off(x) + blk_pad(x); }

/* mt_alloc.fast: which inline allocation path, 0 for none (granularity
 * pages: everything goes through mti_alloc_search). */
enum { FAST_BEST_FIT = 1, FAST_FIRST_FIT = 2 };

/* Node ids are byte offsets into the node array (index << NODE_SHIFT), so
 * that reaching a node is one add (or none, in an address), not a shift
 * and an add: the hot paths follow two dozen ids per alloc+free pair. NIL
 * (0) is "none" and the sink node (tlsf.h); nodes start at FIRST_NODE. Ids
 * are 32 bits: at most 2^27 nodes (NODE_MAX). */
#define NODE_SHIFT 5
#define FIRST_NODE (1u << NODE_SHIFT)
#define NODE_MAX (UINT32_MAX >> NODE_SHIFT)
#define NODE(arr, id) ((__typeof__(&(arr)[0]))(void *)((char *)(arr) + (id)))
/* Whether `id` names a node of an array of `cap` nodes other than the sink:
 * the rotation moves a misaligned id's low bits to the top, so one unsigned
 * comparison checks range and alignment. */
static inline int node_ok(uint32_t id, uint32_t cap)
{
    uint32_t d = id - FIRST_NODE;
    return ((d >> NODE_SHIFT) | (d << (32 - NODE_SHIFT))) < cap - 1;
}

/* Whether `id` names a node of an array of `cap` nodes, the sink
 * included: one rotation and one comparison. */
static inline int node_or_sink(uint32_t id, uint32_t cap)
{
    return ((id >> NODE_SHIFT) | (id << (32 - NODE_SHIFT))) < cap;
}

/* A TLSF index: class lists and their bitmap. The classes of 64 / SL_N
 * powers of two share one bitmap word (tlsf.h, tlsf_mark: no summary word
 * over them). */
typedef struct tlsf_idx {
    /* First block of each class, by class index fl * SL_N + sl; NIL when
     * the class is empty, whose node, the sink, reads as an empty block
     * (offset UINT64_MAX, size 0: tlsf.h), so that a search reads a head's
     * offset and size from its node without testing for one. 4 bytes a
     * class, reached by one scaled address. head[N_CLASSES]: always empty
     * (search.h). */
    uint32_t head[N_CLASSES + 1];
    uint64_t cls_map[CLS_WORDS];   /* bit c: class c has blocks */
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

/* The hot paths, one copy of each picked per allocator (below). */
typedef int mti_alloc_fn(mt_alloc *a, uint64_t size, uint64_t align, mt_alloc_kind kind,
                         mt_alloc_block *out);
typedef int mti_free_block_fn(mt_alloc *a, const mt_alloc_block *blk);
typedef int mti_free_fn(mt_alloc *a, uint32_t region, uint64_t offset);

typedef struct region {
    uint64_t size;     /* bytes; 0: the slot is unused */
    void *user;
    uint32_t sentinel; /* its node: next_phys is the block at offset 0 */
    uint32_t next_unused; /* free-slot list link */
} region;

/* Hot fields first: the allocate and free paths read the first cache line
 * and the class index, nothing else of the allocator. Counters that can be
 * derived are not kept: free blocks are the nodes in use minus allocations
 * and sentinels, a region's use is a walk of its chain
 * (mt_alloc_region_info). */
struct mt_alloc {
    /* The hot paths picked for this allocator (mti_alloc_pick_*). */
    mti_alloc_fn *alloc_fn;
    mti_free_block_fn *free_block_fn;
    mti_free_fn *free_fn;
    blk *b;            /* nodes; the one at id NIL is the sink node (tlsf.h) */
    mbucket *ht;       /* offset map: ht_mask + 1 buckets; NULL without one */
    uint64_t ht_seed;  /* odd multiplier of the hash */
    uint32_t ht_mask, ht_shift, ht_limit;
    uint32_t live;     /* live allocations (with the map: its entries) */
    uint32_t ht_room;  /* entries allowed before the map grows: half its lanes */
    uint32_t b_unused; /* list of unused nodes (via next_free) */
    /* Unused nodes, less the credit_base - credit that the inline path has
     * taken since the credit was renewed (mti_alloc_unused): its common
     * case takes one node per allocation, which the credit already counts,
     * so it writes no count of its own (alloc.c, commit_head). */
    uint32_t b_unused_n;
    unsigned gshift;   /* log2(granule) */
    unsigned pshift;   /* log2(granularity page in granules); 0: no separation */
    mt_alloc_strategy strategy;
    uint32_t fast;     /* FAST_*: the inline path and its strategy, or 0 */
    /* Allocations the inline path may make before it must check for spare
     * nodes and map room again (alloc.c, reserve): one counter instead of
     * three tests. Each strategy has its own copy of the path, so the
     * counter needs no test of the strategy; 0 without an inline path. */
    uint32_t credit;
    uint32_t credit_base; /* the credit when it was last renewed or settled */
    uint32_t reg_cap;
    region *reg;
    uint64_t used;       /* granules in used blocks */
    uint64_t tight;      /* used granules from which best fit looks harder (search.h) */
    uint64_t pad;        /* of which leading pads kept */

    uint64_t total;      /* bytes */
    uint32_t b_cap;
    uint32_t reg_empty;  /* live regions with no allocation; kept only with
                          * MT_ALLOC_RELEASE_EMPTY, its one reader */
    uint32_t flags;
    uint32_t reg_unused; /* list of unused slots (ids + 1; 0 = none) */
    uint32_t reg_live;
    uint32_t reg_added;  /* id of the region added last */
    int (*grow)(void *user, mt_alloc *a, uint64_t min_size);
    void (*release)(void *user, uint32_t region, uint64_t size, void *region_user);
    void *user;

    tlsf_idx ix;    /* the free blocks */
};

/* The hot paths (allocate, free) are built in several copies, and
 * mt_alloc_create picks one of each for the allocator (mti_alloc_pick_*):
 * the public functions test the allocator for NULL and jump through its
 * pointers. A copy per strategy and per "with or without the offset map"
 * tests neither on every call, and on x86-64 each is built twice, once for
 * CPUs with BMI2, whose shifts by a register (shrx, shlx) need no move
 * into cl, which the class and granule arithmetic does a dozen times a
 * pair (-12 instructions a pair, docs/alloc.md), with BMI1 beside it, which
 * every such CPU has (andn, blsr: -0.8). Same source, so the same
 * results; builds whose -march has BMI2 already need no second copy. Picked
 * at create time by cpuid, not by an ifunc: no resolver runs while the
 * loader relocates (ThreadSanitizer's runtime does not exist yet then), and
 * the jump through the allocator costs what the ifunc's jump did. */
#if defined(__x86_64__) && !defined(__BMI2__) && defined(__GNUC__)
#define MTI_BMI2_COPY 1 /* BMI1 and BMI2 */
#define MTI_TARGET_BMI2 __attribute__((target("bmi,bmi2")))
int mti_cpu_has_bmi2(void);
#else
#define MTI_BMI2_COPY 0
#define MTI_TARGET_BMI2
static inline int mti_cpu_has_bmi2(void) { return 0; }
#endif

/* alloc.c, free.c: set a's hot paths for its strategy, map and CPU (bmi:
 * mti_cpu_has_bmi2, asked once by mt_alloc_create). */
void mti_alloc_pick_alloc(mt_alloc *a, int bmi);
void mti_alloc_pick_free(mt_alloc *a, int bmi);

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
    unsigned t = msb64(u | SL_N);
    return (t << SL_LOG2) + (unsigned)(u >> (t - SL_LOG2)) - (SL_LOG2 << SL_LOG2);
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

/* class_index(class_round_up(u)) for 0 < u <= U_LIMIT: the next class up
 * unless u is the smallest size of its own class, which is what the class
 * of u - 1, plus one, is. N_CLASSES when no class is certain to hold u. */
static inline unsigned class_index_up(uint64_t u) { return class_index(u - 1) + 1; }

static inline uint64_t align_up(uint64_t x, uint64_t a) { return (x + a - 1) & ~(a - 1); }

/* ---- functions shared between files (hidden in the shared library) -------- */

/* nodes.c: makes sure at least n unused nodes exist (grows the array). */
int mti_alloc_node_reserve(mt_alloc *a, uint32_t n);

/* A request, normalised, in granules: see search.h. */
typedef struct mta_req {
    uint64_t size;  /* > 0 */
    uint64_t align; /* a power of two >= 1 */
    unsigned kind;
} mta_req;

/* offmap.c: makes room for one more entry (at most half full); rebuilds
 * the table when an entry landed farther than PROBE_LIMIT from home. */
int mti_alloc_map_reserve(mt_alloc *a);
int mti_alloc_map_rebuild(mt_alloc *a);

/* region.c: a region lost its last allocation (returns 0: the free path
 * tail-calls it) / is being removed. */
int mti_alloc_region_emptied(mt_alloc *a, uint32_t id);
void mti_alloc_region_drop(mt_alloc *a, uint32_t id, int call_release);

/* The allocator is "tight" once 9/16 of its granules are used: best fit
 * then also tries the next class below the guaranteed ones (search.h),
 * which is what lets an aged heap fill to 0.99 before its first refusal.
 * Below, the inline path skips that try, whose branch no predictor learns:
 * 9/16 and not 1/2, so that a heap churning at half full (the timed
 * benchmark) does not pay for it. */
#define TIGHT_16THS 9
static inline void mti_alloc_set_tight(mt_alloc *a)
{
    uint64_t g = a->total >> a->gshift;
    a->tight = g / 16 * TIGHT_16THS + g % 16 * TIGHT_16THS / 16;
}

/* Links node n after node p in a chain (either may be a sentinel). */
static inline void chain_link(blk *b, uint32_t p, uint32_t n)
{
    NODE(b, p)->next_phys = n;
    NODE(b, n)->prev_phys = p;
}

/* A block whose neighbours are both its region's sentinel spans the
 * region: the region has no allocation (when the block is free). */
static inline int blk_spans_region(const blk *x) { return x->prev_phys == x->next_phys; }

/* The region of a free block: its previous neighbour, a used block or the
 * sentinel, carries it. */
static inline uint32_t free_blk_region(const blk *b, const blk *x)
{
    return NODE(b, x->prev_phys)->region;
}

/* The region's first block. */
static inline uint32_t region_first(const mt_alloc *a, uint32_t rid)
{
    return NODE(a->b, a->reg[rid].sentinel)->next_phys;
}

/* Unused nodes: the recorded count less the nodes the inline path took
 * since the credit was last renewed or settled, one per unit of credit
 * spent (internal.h, b_unused_n). */
static inline uint32_t mti_alloc_unused(const mt_alloc *a)
{
    return a->b_unused_n - (a->credit_base - a->credit);
}

/* Makes b_unused_n exact again: what reads or renews the count first. */
static inline void mti_alloc_settle(mt_alloc *a)
{
    a->b_unused_n = mti_alloc_unused(a);
    a->credit_base = a->credit;
}

/* Free blocks: every node in use that is neither a live allocation nor a
 * sentinel. */
static inline uint64_t mti_alloc_free_blocks(const mt_alloc *a)
{
    return a->b_cap ? (uint64_t)(a->b_cap - 1 - mti_alloc_unused(a)) - a->live - a->reg_live : 0;
}

#endif
