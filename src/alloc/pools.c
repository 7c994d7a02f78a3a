/* The pool set: options, attach/detach, destruction. The set-wide region
 * registry that tells any thread which pool owns a region is registry.c. */
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
        mti_pool_teardown(p);
    for (mt_pool *p = s->all, *next; p; p = next) {
        next = p->next_all;
        mti_pool_free(p);
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
    mti_pool_drain(p);
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
        n += mti_pool_drain(p);
    pthread_mutex_unlock(&s->lock);
    return n;
}
