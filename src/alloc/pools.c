/* The pool set: options, attach/detach, and the set-wide region registry that
 * tells any thread which pool owns a region.
 *
 * The registry is an array of chunks of entries, chunks allocated on first
 * use and never moved or freed before the set, so a reader needs no lock:
 * ids come from an atomic counter, are never reused, and an entry's fields
 * are published by a release store of its owner. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "pool_internal.h"

int mt_pools_create(const mt_pools_opts *opts, mt_pools **out)
{
    static const mt_pools_opts defaults = {0};
    if (!out)
        return -EINVAL;
    *out = NULL;
    if (!opts)
        opts = &defaults;
    if (opts->memory_types > MAX_MEMTYPES)
        return -EINVAL;
    /* An emptied region must reach the caller, or its memory leaks. */
    if ((opts->flags & MT_ALLOC_RELEASE_EMPTY) && !opts->release)
        return -EINVAL;
    if (opts->flags & ~MT_ALLOC_RELEASE_EMPTY)
        return -EINVAL;
    /* The allocator options are checked by building one allocator. */
    mt_alloc_opts ao = {.strategy = opts->strategy, .min_align = opts->min_align,
                        .granularity = opts->granularity};
    mt_alloc *probe;
    int rc = mt_alloc_create(&ao, &probe);
    if (rc)
        return rc;
    mt_alloc_destroy(probe);

    mt_pools *s = calloc(1, sizeof *s);
    if (!s)
        return -ENOMEM;
    s->o = *opts;
    if (s->o.memory_types == 0)
        s->o.memory_types = 1;
    if (pthread_mutex_init(&s->lock, NULL) != 0) {
        free(s);
        return -ENOMEM;
    }
    *out = s;
    return 0;
}

void mt_pools_destroy(mt_pools *s)
{
    if (!s)
        return;
    for (mt_pool *p = s->all; p; p = p->next_all)
        mtp_pool_teardown(p);
    for (mt_pool *p = s->all, *next; p; p = next) {
        next = p->next_all;
        mtp_pool_free(p);
    }
    for (uint32_t c = 0; c < REG_CHUNKS; c++)
        free(atomic_load_explicit(&s->chunk[c], memory_order_relaxed));
    pthread_mutex_destroy(&s->lock);
    free(s);
}

static mt_pool *pool_new(mt_pools *s)
{
    /* The list heads sit on their own cache lines: needs 64-byte alignment. */
    size_t size = (sizeof(mt_pool) + 63) & ~(size_t)63;
    mt_pool *p = aligned_alloc(64, size);
    if (!p)
        return NULL;
    memset(p, 0, size);
    p->types = calloc(s->o.memory_types, sizeof *p->types);
    if (!p->types) {
        free(p);
        return NULL;
    }
    for (uint32_t t = 0; t < s->o.memory_types; t++)
        p->types[t] = (ptype){.memtype = t, .pool = p};
    atomic_init(&p->deferred, NULL);
    atomic_init(&p->returned, NULL);
    p->set = s;
    return p;
}

int mt_pool_attach(mt_pools *s, mt_pool **out)
{
    if (!s || !out)
        return -EINVAL;
    pthread_mutex_lock(&s->lock);
    mt_pool *p = s->detached;
    if (p) {
        s->detached = p->next_detached;
    } else if ((p = pool_new(s)) != NULL) {
        p->next_all = s->all;
        s->all = p;
    }
    pthread_mutex_unlock(&s->lock);
    if (!p)
        return -ENOMEM;
    *out = p;
    return 0;
}

void mt_pool_detach(mt_pool *p)
{
    if (!p)
        return;
    mtp_drain(p);
    mt_pools *s = p->set;
    /* The lock hands the pool, and everything its owner did, to whoever
     * attaches or collects it next. */
    pthread_mutex_lock(&s->lock);
    p->next_detached = s->detached;
    s->detached = p;
    pthread_mutex_unlock(&s->lock);
}

long mt_pools_collect_detached(mt_pools *s)
{
    if (!s)
        return -EINVAL;
    long n = 0;
    pthread_mutex_lock(&s->lock);
    for (mt_pool *p = s->detached; p; p = p->next_detached)
        n += mtp_drain(p);
    pthread_mutex_unlock(&s->lock);
    return n;
}

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

int mtp_region_register(mt_pools *s, mt_pool *p, uint32_t memtype, uint32_t local, uint64_t size,
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

pregion *mtp_region_lookup(mt_pools *s, uint32_t gid, mt_pool **owner)
{
    if (gid >= REG_CHUNKS * REG_CHUNK)
        return NULL;
    /* acquire: pairs with the CAS in chunk_get that published the chunk. */
    pregion *ch = atomic_load_explicit(&s->chunk[gid >> REG_CHUNK_SHIFT], memory_order_acquire);
    if (!ch)
        return NULL;
    pregion *e = &ch[gid & (REG_CHUNK - 1)];
    /* acquire: pairs with the release in mtp_region_register (fields). */
    *owner = atomic_load_explicit(&e->owner, memory_order_acquire);
    return *owner ? e : NULL;
}

int mt_pools_region_info(mt_pools *s, uint32_t region, uint32_t *memtype, uint64_t *size,
                         void **user)
{
    if (!s)
        return -EINVAL;
    mt_pool *owner;
    const pregion *e = mtp_region_lookup(s, region, &owner);
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
