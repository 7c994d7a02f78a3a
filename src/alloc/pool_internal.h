/* Pools: internals shared by pools.c (the set, attach/detach, the region
 * registry), pool.c (allocating and freeing through a pool) and deferred.c
 * (cross-thread and fenced frees).
 *
 * Ownership: every field of an mt_pool is touched only by the pool's owner
 * thread (or, for a detached pool, by whoever holds the set's lock), except
 * the two list heads `deferred` and `returned`, which any thread pushes onto.
 * The set-wide region registry is written once per region by its owner and
 * read by any thread. */
#ifndef MT_ALLOC_POOL_INTERNAL_H
#define MT_ALLOC_POOL_INTERNAL_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>

#include "memtrack/alloc.h"

#define REG_CHUNK_SHIFT 10
#define REG_CHUNK (1u << REG_CHUNK_SHIFT)
#define REG_CHUNKS 4096u /* at most 4M regions over a set's life */
#define MAX_MEMTYPES 64u
#define SLAB_NODES 64u

/* One queued free. Lives in a slab of its home pool (or is malloc'ed, home
 * NULL, for threads without a pool) and goes back home once carried out. */
typedef struct dnode {
    struct dnode *next;  /* deferred/returned/cache list; sibling in the fence heap */
    struct dnode *child; /* fence heap */
    struct mt_pool *home;
    uint64_t offset;
    uint64_t value;      /* fence value, if fenced */
    uint32_t region;     /* set-wide id */
    uint32_t fenced;
} dnode;

typedef struct slab {
    struct slab *next;
    dnode nodes[SLAB_NODES];
} slab;

/* Registry entry of a set-wide region id. Written by the owner before
 * `owner` is published; never reused, so a stale id finds owner == NULL. */
typedef struct pregion {
    _Atomic(struct mt_pool *) owner; /* NULL: released (or never published) */
    uint32_t memtype;
    uint32_t local; /* id in the owner's allocator */
    uint64_t size;
    void *user;
} pregion;

/* A pool's allocator for one memory type, and the map from its region ids
 * to set-wide ones. */
typedef struct ptype {
    mt_alloc *a;
    uint32_t *l2g;
    uint32_t l2g_cap;
    uint32_t memtype;
    struct mt_pool *pool;
} ptype;

struct mt_pool {
    /* Pushed onto by any thread: each on its own cache line, away from the
     * owner's fields, so that pushes do not slow the owner's fast path. */
    _Alignas(64) _Atomic(dnode *) deferred; /* frees for this pool to carry out */
    _Alignas(64) _Atomic(dnode *) returned; /* this pool's nodes coming home */

    _Alignas(64) mt_pools *set;
    ptype *types;
    dnode *cache;      /* free nodes of this pool */
    slab *slabs;
    dnode *fences;     /* pairing heap of fenced frees, smallest value on top */
    uint64_t fenced_pending, fenced_done, deferred_done, deferred_errors;
    struct mt_pool *next_all;
    struct mt_pool *next_detached;
};

struct mt_pools {
    mt_pools_opts o;
    pthread_mutex_t lock; /* attach, detach, the detached list */
    struct mt_pool *all, *detached;
    _Atomic uint32_t next_region;
    _Atomic(pregion *) chunk[REG_CHUNKS];
};

/* registry.c: the registry. */
int mti_pool_region_register(mt_pools *s, mt_pool *p, uint32_t memtype, uint32_t local, uint64_t size,
                        void *user, uint32_t *gid);
pregion *mti_pool_region_lookup(mt_pools *s, uint32_t gid, mt_pool **owner);

/* Frees in the owner's own allocator: pool.c (its own frees) and
 * deferred.c (queued ones carried out) both end here. */
static inline int mti_pool_free_local(mt_pool *p, const pregion *e, uint64_t offset)
{
    return mt_alloc_free(p->types[e->memtype].a, e->local, offset);
}

/* pool.c */
void mti_pool_teardown(mt_pool *p);
void mti_pool_free(mt_pool *p);

/* deferred.c: carries out queued and completed fenced frees (owner); queues a
 * free for `owner` with a node of `self` (NULL: malloc'ed); destroy passes. */
long mti_pool_drain(mt_pool *p);
int mti_pool_queue(mt_pool *self, mt_pool *owner, uint32_t gid, uint64_t offset, int fenced,
              uint64_t value);
void mti_pool_nodes_free(mt_pool *p);
void mti_pool_slabs_free(mt_pool *p);

#endif
