/* The set-wide region registry that tells any thread which pool owns a
 * region. Below pool.c and deferred.c, which both look regions up, so that
 * neither needs the set's file (pools.c).
 *
 * The registry is an array of chunks of entries, chunks allocated on first
 * use and never moved or freed before the set, so a reader needs no lock:
 * ids come from an atomic counter, are never reused, and an entry's fields
 * are published by a release store of its owner. */
#include <errno.h>
#include <stdlib.h>

#include "pool_internal.h"

/* The chunk holding entry `gid`, allocated on first use. Two owners may race
 * to allocate the same chunk: one CAS wins, the loser frees its copy. */
static pregion *chunk_get(mt_pools *s, uint32_t c)
{
    /* acquire: pairs with the release of the CAS below (a zeroed chunk). */
    pregion *ch = atomic_load_explicit(&s->chunk[c], memory_order_acquire);
    if (ch)
        return ch;
    pregion *mine = calloc(REG_CHUNK, sizeof *mine);
    if (!mine)
        return NULL;
    for (uint32_t i = 0; i < REG_CHUNK; i++)
        atomic_init(&mine[i].owner, NULL);
    if (atomic_compare_exchange_strong_explicit(&s->chunk[c], &ch, mine, memory_order_acq_rel,
                                                memory_order_acquire))
        return mine;
    free(mine);
    return ch;
}

int mti_pool_region_register(mt_pools *s, mt_pool *p, uint32_t memtype, uint32_t local, uint64_t size,
                        void *user, uint32_t *gid)
{
    /* relaxed: the counter only hands out distinct ids; the entry is
     * published by the release store below. */
    uint32_t id = atomic_fetch_add_explicit(&s->next_region, 1, memory_order_relaxed);
    if (id >= REG_CHUNKS * REG_CHUNK) {
        atomic_store_explicit(&s->next_region, REG_CHUNKS * REG_CHUNK, memory_order_relaxed);
        return -ENOSPC;
    }
    pregion *ch = chunk_get(s, id >> REG_CHUNK_SHIFT);
    if (!ch)
        return -ENOMEM; /* the id is skipped, never used */
    pregion *e = &ch[id & (REG_CHUNK - 1)];
    e->memtype = memtype;
    e->local = local;
    e->size = size;
    e->user = user;
    /* release: publishes the fields above to any thread that loads owner. */
    atomic_store_explicit(&e->owner, p, memory_order_release);
    *gid = id;
    return 0;
}

pregion *mti_pool_region_lookup(mt_pools *s, uint32_t gid, mt_pool **owner)
{
    if (gid >= REG_CHUNKS * REG_CHUNK)
        return NULL;
    /* acquire: pairs with the CAS in chunk_get that published the chunk. */
    pregion *ch = atomic_load_explicit(&s->chunk[gid >> REG_CHUNK_SHIFT], memory_order_acquire);
    if (!ch)
        return NULL;
    pregion *e = &ch[gid & (REG_CHUNK - 1)];
    /* acquire: pairs with the release in mti_pool_region_register (fields). */
    *owner = atomic_load_explicit(&e->owner, memory_order_acquire);
    return *owner ? e : NULL;
}

int mt_pools_region_info(mt_pools *s, uint32_t region, uint32_t *memtype, uint64_t *size,
                         void **user)
{
    if (!s)
        return -EINVAL;
    mt_pool *owner;
    const pregion *e = mti_pool_region_lookup(s, region, &owner);
    if (!e)
        return -ENOENT;
    if (memtype)
        *memtype = e->memtype;
    if (size)
        *size = e->size;
    if (user)
        *user = e->user;
    return 0;
}
