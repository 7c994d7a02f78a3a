/* memtrack alloc: O(1) suballocator for address ranges that are not host
 * memory, and per-thread pools on top of it.
 *
 * An mt_alloc manages one or more *regions*: ranges [0, size) of offsets into
 * something the host cannot (or must not) touch: a VkDeviceMemory, a device
 * heap, a GPU virtual-address range. All bookkeeping lives in host memory
 * beside the region, never inside it. Allocation and free are O(1) in the
 * worst case: a two-level segregated fit (TLSF) index finds a free block with
 * two bit scans, free blocks coalesce with their neighbours at once, and the
 * block's hint (mt_alloc_free_block) or a hash table with bounded probes
 * finds the block being freed; MT_ALLOC_NO_OFFSET_MAP leaves the table out
 * for callers that keep their blocks. Allocations are named by (region id,
 * offset); offsets are aligned relative to the region's start.
 *
 * An mt_alloc is not thread-safe: one thread at a time. For several threads,
 * use an mt_pools set: each thread attaches its own mt_pool, which holds one
 * allocator per memory type, so allocating takes no lock. A thread may free
 * any thread's allocation: a free of another pool's allocation goes onto the
 * owner's lock-free deferred list and is carried out at the owner's next
 * allocation (or mt_pool_collect). A free can also be fenced: carried out only
 * once a timeline (a callback returning the last completed value) has reached
 * a given value, e.g. when the GPU work that uses the memory has finished.
 *
 * docs/alloc.md describes the data structures, the strategies and the
 * deferred-free protocol. */
#ifndef MEMTRACK_ALLOC_H
#define MEMTRACK_ALLOC_H

#include <stdint.h>
#include <stdio.h>

#include "memtrack/base.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct mt_alloc mt_alloc;

typedef enum mt_alloc_strategy {
    /* Bounded best fit: looks at a few blocks of the request's own size class,
     * else takes the lowest-addressed of the first few classes certain to fit.
     * Fragments less than address-ordered first fit; the default. */
    MT_ALLOC_BEST_FIT = 0,
    /* Takes the first block of the smallest size class that is certain to fit
     * (classic TLSF "good fit"): fewest memory touches, more fragmentation. */
    MT_ALLOC_FIRST_FIT = 1,
} mt_alloc_strategy;

/* Resource kinds for granularity separation (Vulkan's bufferImageGranularity):
 * with a granularity set, allocations of different kinds never share a
 * granularity page. */
typedef enum mt_alloc_kind {
    MT_ALLOC_LINEAR = 0,    /* buffers, linear-tiling images; the default */
    MT_ALLOC_NONLINEAR = 1, /* optimal-tiling images */
} mt_alloc_kind;

enum {
    /* A region that becomes fully free is released (the release callback is
     * called) unless it is the only fully free region left: one empty region
     * is kept, so alloc/free at a boundary does not thrash. */
    MT_ALLOC_RELEASE_EMPTY = 1u << 0,
    /* No offset map: allocations are freed only through the block that
     * mt_alloc_allocate filled in (mt_alloc_free_block); mt_alloc_free
     * returns -ENOTSUP. Saves the map's upkeep on every allocate and free
     * and its memory (docs/alloc.md). Not for mt_pools, which free by
     * offset. */
    MT_ALLOC_NO_OFFSET_MAP = 1u << 1,
};

/* Largest region, size and alignment: offsets fit in 56 bits. */
#define MT_ALLOC_MAX_SIZE (1ull << 56)

typedef struct mt_alloc_opts {
    mt_alloc_strategy strategy; /* 0 = best fit */
    uint32_t flags;             /* MT_ALLOC_* */
    /* Granule: every offset and size is a multiple of it. Power of two;
     * 0 = 16. Sizes are rounded up to it. */
    uint64_t min_align;
    /* Linear/non-linear separation page: power of two >= min_align, or 0/1
     * for none. */
    uint64_t granularity;
    /* Called when no region has room for a request of `min_size` bytes (its
     * size rounded to the granule): add a region of at least min_size with
     * mt_alloc_add_region and return 0 (the request goes into it), or return
     * a negative code (the allocation fails with -ENOSPC). Must not allocate
     * or free on `a`. */
    int (*grow)(void *user, mt_alloc *a, uint64_t min_size);
    /* Called when a region is removed by MT_ALLOC_RELEASE_EMPTY, mt_alloc_trim
     * or mt_alloc_destroy, after the allocator stopped using it: free the
     * memory behind it. Must not call into `a`. May be NULL (but not with
     * MT_ALLOC_RELEASE_EMPTY). */
    void (*release)(void *user, uint32_t region, uint64_t size, void *region_user);
    void *user; /* passed to grow and release */
    uint64_t reserved[4]; /* zero: room to grow (docs/design.md, "Options") */
} mt_alloc_opts;

/* One allocation: bytes [offset, offset + size) of region `region`. `size` is
 * the request rounded up to the granule. `hint` lets mt_alloc_free_block find
 * the allocation without looking its offset up; it is only a hint (checked,
 * never trusted), and means nothing to anyone else. 24 bytes: callers keep
 * one per allocation. */
typedef struct mt_alloc_block {
    uint64_t offset;
    uint64_t size;
    uint32_t region;
    uint32_t hint;
} mt_alloc_block;

typedef struct mt_alloc_stats {
    uint64_t total_bytes;   /* sum of region sizes */
    uint64_t free_bytes;
    uint64_t used_bytes;    /* total - free: includes granule rounding and kept pads */
    uint64_t largest_free;  /* largest free block (before alignment) */
    uint64_t allocations;   /* live allocations */
    uint64_t free_blocks;
    uint32_t regions;
    double fragmentation;   /* 1 - largest_free / free_bytes; 0 when nothing is free */
    /* Of used_bytes, the alignment padding that allocations keep in front
     * of their data: a pad of at most 1/16 of the request is not worth a
     * free block of its own (docs/alloc.md). */
    uint64_t pad_bytes;
    /* Host memory the allocator holds for its bookkeeping: the allocator
     * itself, its node array, offset map and region table. */
    uint64_t metadata_bytes;
} mt_alloc_stats;

typedef struct mt_alloc_region {
    uint64_t size;
    uint64_t used_bytes;
    uint64_t allocations;
    void *user; /* as given to mt_alloc_add_region */
} mt_alloc_region;

/* Creates an allocator with no regions. `opts` may be NULL (all defaults).
 * Returns 0 and sets *out, -EINVAL for bad options (alignment or granularity
 * not a power of two, RELEASE_EMPTY without release), or -ENOMEM. Any thread. */
MT_API int mt_alloc_create(const mt_alloc_opts *opts, mt_alloc **out);

/* Calls release for every region still held, then frees the allocator; live
 * allocations are forgotten. NULL is a no-op. Not concurrently with other
 * calls on `a`. */
MT_API void mt_alloc_destroy(mt_alloc *a);

/* Adds the region [0, size) with caller data `user` (returned by
 * mt_alloc_region_info and passed to release). size is rounded down to the
 * granule. Returns 0 and sets *id (ids of removed regions are reused), -EINVAL
 * for a size below one granule or above MT_ALLOC_MAX_SIZE, or -ENOMEM. O(1). */
MT_API int mt_alloc_add_region(mt_alloc *a, uint64_t size, void *user, uint32_t *id);

/* Removes a region with no live allocation (release is not called: the caller
 * asked). Returns 0, -ENOENT for an unknown id, or -EBUSY while allocations
 * remain (nothing changes). O(1). */
MT_API int mt_alloc_remove_region(mt_alloc *a, uint32_t id);

/* Releases every fully free region through the release callback. Returns the
 * number released. O(regions). */
MT_API int mt_alloc_trim(mt_alloc *a);

/* Allocates `size` bytes at an offset that is a multiple of `align` (a power
 * of two; 0 = the granule) for a resource of `kind`. O(1) worst case, plus a
 * grow callback when no region has room. Returns 0 and fills *out, -EINVAL
 * (size 0, align not a power of two, kind unknown), -ENOSPC (no room, grow
 * absent or failed), or -ENOMEM (host metadata); on error nothing changes. */
MT_API int mt_alloc_allocate(mt_alloc *a, uint64_t size, uint64_t align, mt_alloc_kind kind,
                             mt_alloc_block *out);

/* Frees the allocation that starts at `offset` of `region`, coalescing it with
 * free neighbours. O(1) worst case. Returns 0; -ENOENT when no live allocation
 * starts there (never allocated, already freed, unknown region); -EINVAL for
 * an offset outside the region or off the granule; -ENOTSUP with
 * MT_ALLOC_NO_OFFSET_MAP. Errors change nothing. */
MT_API int mt_alloc_free(mt_alloc *a, uint32_t region, uint64_t offset);

/* mt_alloc_free(a, b->region, b->offset) for a block as mt_alloc_allocate
 * filled it in: its hint names the allocation's metadata, which saves the
 * offset lookup. A hint that does not name a live allocation at that region
 * and offset (a copy edited, a block already freed, a block of another
 * allocator) is ignored and the offset is looked up: same results and
 * errors as mt_alloc_free, O(1) either way. With MT_ALLOC_NO_OFFSET_MAP
 * there is nothing to look up: such a block gets -ENOENT, and changes
 * nothing. */
MT_API int mt_alloc_free_block(mt_alloc *a, const mt_alloc_block *b);

/* Fills *out with totals over all regions. O(blocks of the largest size
 * class). Returns 0. Same thread rules as allocate. */
MT_API int mt_alloc_get_stats(const mt_alloc *a, mt_alloc_stats *out);

/* Fills *out for one region. used_bytes and allocations are counted on the
 * spot (allocate and free do not keep per-region counts): O(blocks in the
 * region). Returns 0 or -ENOENT. */
MT_API int mt_alloc_region_info(const mt_alloc *a, uint32_t region, mt_alloc_region *out);

/* Walks every piece of metadata (block chains, size-class lists and bitmaps,
 * offset map, counters) and verifies they agree. Returns 0, or MT_ECORRUPT
 * with the first inconsistency written to msg (msg_len bytes; msg may be
 * NULL). O(blocks + map size): for tests and debugging. */
MT_API int mt_alloc_check(const mt_alloc *a, char *msg, size_t msg_len);

/* Writes the layout, one line per block in address order for each region,
 * followed by the stats. Returns 0 or -EIO. */
MT_API int mt_alloc_dump(const mt_alloc *a, FILE *f);

/* ---- pools: one allocator per (thread, memory type) ----------------------- */

typedef struct mt_pools mt_pools;
typedef struct mt_pool mt_pool;

typedef struct mt_pools_opts {
    uint32_t memory_types;      /* memory types 0..n-1; 0 = 1, at most 64 */
    mt_alloc_strategy strategy; /* for every pool allocator */
    uint32_t flags;             /* MT_ALLOC_*, for every pool allocator */
    uint64_t min_align;         /* as in mt_alloc_opts */
    uint64_t granularity;       /* as in mt_alloc_opts */
    /* A pool needs a region of at least min_size for `memtype`: set *size and
     * *region_user and return 0, or return a negative code. Called from the
     * pool's owner thread, concurrently for different pools. May be NULL
     * (regions are then added with mt_pool_add_region only). */
    int (*grow)(void *user, uint32_t memtype, uint64_t min_size, uint64_t *size,
                void **region_user);
    /* A region was released (MT_ALLOC_RELEASE_EMPTY, trim, destroy). Called
     * from the owner thread, or from mt_pools_destroy. May be NULL. */
    void (*release)(void *user, uint32_t memtype, uint64_t size, void *region_user);
    /* The timeline behind fenced frees: returns the last completed value
     * (monotonic). Called from owner threads, concurrently. May be NULL
     * (fenced frees are then refused). */
    uint64_t (*completed)(void *user);
    void *user;
    uint64_t reserved[4]; /* zero: room to grow (docs/design.md, "Options") */
} mt_pools_opts;

typedef struct mt_pool_stats {
    mt_alloc_stats alloc;       /* of this pool's allocator for the memory type */
    /* The counters below are the pool's, over all its memory types. */
    uint64_t deferred_done;     /* frees from other threads carried out */
    uint64_t deferred_errors;   /* deferred or fenced frees that named no live allocation */
    uint64_t fenced_pending;    /* fenced frees waiting for their value */
    uint64_t fenced_done;       /* fenced frees carried out */
} mt_pool_stats;

/* Creates a pool set. `opts` may be NULL. Returns 0 and sets *out, -EINVAL, or
 * -ENOMEM. Any thread. */
MT_API int mt_pools_create(const mt_pools_opts *opts, mt_pools **out);

/* Frees every pool and calls release for every region. No thread may use the
 * set or its pools any more. NULL is a no-op. */
MT_API void mt_pools_destroy(mt_pools *s);

/* Gives the calling thread a pool of its own: a detached one when there is
 * one (its allocations and pending frees come with it), else a new one.
 * Returns 0 and sets *out, or -ENOMEM. Any thread; takes the set's lock. */
MT_API int mt_pool_attach(mt_pools *s, mt_pool **out);

/* The owner thread is done with the pool: pending frees are carried out and
 * the pool is kept, with its allocations, for the next mt_pool_attach. Other
 * threads may go on freeing its allocations. Owner thread only. */
MT_API void mt_pool_detach(mt_pool *p);

/* Allocates from the pool's allocator for `memtype`, growing through the
 * set's grow callback when needed. First carries out frees other threads
 * queued and fenced frees that completed. No lock on the fast path. Owner
 * thread only. Returns as mt_alloc_allocate (region ids are set-wide), or
 * -EINVAL for an unknown memtype. */
MT_API int mt_pool_allocate(mt_pool *p, uint32_t memtype, uint64_t size, uint64_t align,
                            mt_alloc_kind kind, mt_alloc_block *out);

/* Frees allocation (region, offset) of any pool of the set. `p` is the
 * calling thread's own pool. The pool's own allocations are freed at once
 * (errors as mt_alloc_free); others are queued lock-free for their owner
 * (returns 0; a bad offset is found by the owner and counted in
 * deferred_errors). -ENOENT for an unknown or released region. */
MT_API int mt_pool_free(mt_pool *p, uint32_t region, uint64_t offset);

/* As mt_pool_free, carried out once the set's completed() returns >= value.
 * -EINVAL when the set has no completed callback. */
MT_API int mt_pool_free_fenced(mt_pool *p, uint32_t region, uint64_t offset, uint64_t value);

/* mt_pool_free / mt_pool_free_fenced for a thread without a pool (costs a
 * malloc per call). Any thread. */
MT_API int mt_pools_free(mt_pools *s, uint32_t region, uint64_t offset);
MT_API int mt_pools_free_fenced(mt_pools *s, uint32_t region, uint64_t offset, uint64_t value);

/* Carries out queued frees and completed fenced frees now. Returns how many
 * were carried out. Owner thread only. */
MT_API long mt_pool_collect(mt_pool *p);

/* Carries out the queued and completed fenced frees of detached pools.
 * Returns how many. Any thread; takes the set's lock. */
MT_API long mt_pools_collect_detached(mt_pools *s);

/* Adds a region of `size` bytes for `memtype` to the pool by hand. Returns 0
 * and sets *region (set-wide id), or as mt_alloc_add_region. Owner only. */
MT_API int mt_pool_add_region(mt_pool *p, uint32_t memtype, uint64_t size, void *user,
                              uint32_t *region);

/* Fills *out for the pool's allocator of `memtype`. Returns 0 or -EINVAL.
 * Owner thread only. */
MT_API int mt_pool_get_stats(mt_pool *p, uint32_t memtype, mt_pool_stats *out);

/* Runs mt_alloc_check on each of the pool's allocators. Owner thread only. */
MT_API int mt_pool_check(mt_pool *p, char *msg, size_t msg_len);

/* Memory type, size and caller data (as returned by grow or given to
 * mt_pool_add_region) of set-wide region id `region`; any pointer may be NULL.
 * Returns 0 or -ENOENT (unknown or released). Any thread. */
MT_API int mt_pools_region_info(mt_pools *s, uint32_t region, uint32_t *memtype,
                                uint64_t *size, void **user);

#ifdef __cplusplus
}
#endif
#endif
