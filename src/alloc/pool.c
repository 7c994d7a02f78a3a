/* Allocating and freeing through a pool: the owner's allocator per memory
 * type, created on first use, with grow/release hooks that keep the set-wide
 * region registry in step with the allocator's own region ids. */
#include <errno.h>
#include <stdlib.h>

#include "pool_internal.h"

static int l2g_set(ptype *pt, uint32_t local, uint32_t gid)
{
    if (local >= pt->l2g_cap) {
        uint32_t cap = pt->l2g_cap ? pt->l2g_cap : 4;
        while (cap <= local)
            cap *= 2;
        uint32_t *n = realloc(pt->l2g, (size_t)cap * sizeof *n);
        if (!n)
            return -ENOMEM;
        pt->l2g = n;
        pt->l2g_cap = cap;
    }
    pt->l2g[local] = gid;
    return 0;
}

static void unregister(mt_pools *s, uint32_t gid)
{
    mt_pool *owner;
    pregion *e = mti_pool_region_lookup(s, gid, &owner);
    /* relaxed: a thread that still sees the old owner queues a free that the
     * owner then finds stale (counted in deferred_errors); no data follows. */
    if (e)
        atomic_store_explicit(&e->owner, NULL, memory_order_relaxed);
}

/* Adds a region to the pool's allocator and registers it set-wide; on any
 * failure nothing is left behind. */
static int ptype_add_region(ptype *pt, uint64_t size, void *user, uint32_t *gid)
{
    mt_pools *s = pt->pool->set;
    uint32_t local, id;
    int rc = mt_alloc_add_region(pt->a, size, user, &local);
    if (rc)
        return rc;
    mt_alloc_region info;
    mt_alloc_region_info(pt->a, local, &info); /* the size after rounding */
    rc = mti_pool_region_register(s, pt->pool, pt->memtype, local, info.size, user, &id);
    if (rc == 0 && (rc = l2g_set(pt, local, id)) != 0)
        unregister(s, id);
    if (rc) {
        mt_alloc_remove_region(pt->a, local);
        return rc;
    }
    *gid = id;
    return 0;
}

static int hook_grow(void *user, mt_alloc *a, uint64_t min_size)
{
    ptype *pt = user;
    const mt_pools_opts *o = &pt->pool->set->o;
    (void)a;
    if (!o->grow)
        return -ENOSPC;
    uint64_t size = 0;
    void *ruser = NULL;
    int rc = o->grow(o->user, pt->memtype, min_size, &size, &ruser);
    if (rc)
        return rc;
    uint32_t gid;
    rc = ptype_add_region(pt, size, ruser, &gid);
    if (rc && o->release)
        o->release(o->user, pt->memtype, size, ruser); /* give it back */
    return rc;
}

static void hook_release(void *user, uint32_t local, uint64_t size, void *region_user)
{
    ptype *pt = user;
    const mt_pools_opts *o = &pt->pool->set->o;
    unregister(pt->pool->set, pt->l2g[local]);
    if (o->release)
        o->release(o->user, pt->memtype, size, region_user);
}

static int ptype_get(mt_pool *p, uint32_t memtype, ptype **out)
{
    if (!p || memtype >= p->set->o.memory_types)
        return -EINVAL;
    ptype *pt = &p->types[memtype];
    if (!pt->a) {
        const mt_pools_opts *o = &p->set->o;
        mt_alloc_opts ao = {.strategy = o->strategy, .flags = o->flags, .min_align = o->min_align,
                            .granularity = o->granularity, .grow = hook_grow,
                            .release = hook_release, .user = pt};
        int rc = mt_alloc_create(&ao, &pt->a);
        if (rc)
            return rc;
    }
    *out = pt;
    return 0;
}

int mt_pool_allocate(mt_pool *p, uint32_t memtype, uint64_t size, uint64_t align,
                     mt_alloc_kind kind, mt_alloc_block *out)
{
    ptype *pt;
    int rc = ptype_get(p, memtype, &pt);
    if (rc)
        return rc;
    /* relaxed: only a hint; mti_pool_drain's exchange is what synchronises. A
     * push it misses is carried out at the next allocation. */
    if (atomic_load_explicit(&p->deferred, memory_order_relaxed) != NULL || p->fences)
        mti_pool_drain(p);
    rc = mt_alloc_allocate(pt->a, size, align, kind, out);
    if (rc == 0)
        out->region = pt->l2g[out->region];
    return rc;
}

static int pool_free(mt_pool *p, uint32_t region, uint64_t offset, int fenced, uint64_t value)
{
    if (!p)
        return -EINVAL;
    if (fenced && !p->set->o.completed)
        return -EINVAL;
    mt_pool *owner;
    const pregion *e = mti_pool_region_lookup(p->set, region, &owner);
    if (!e)
        return -ENOENT;
    if (owner == p && !fenced)
        return mti_pool_free_local(p, e, offset);
    return mti_pool_queue(p, owner, region, offset, fenced, value);
}

int mt_pool_free(mt_pool *p, uint32_t region, uint64_t offset)
{
    return pool_free(p, region, offset, 0, 0);
}

int mt_pool_free_fenced(mt_pool *p, uint32_t region, uint64_t offset, uint64_t value)
{
    return pool_free(p, region, offset, 1, value);
}

int mt_pool_add_region(mt_pool *p, uint32_t memtype, uint64_t size, void *user, uint32_t *region)
{
    ptype *pt;
    int rc = ptype_get(p, memtype, &pt);
    if (rc)
        return rc;
    if (!region)
        return -EINVAL;
    return ptype_add_region(pt, size, user, region);
}

int mt_pool_get_stats(mt_pool *p, uint32_t memtype, mt_pool_stats *out)
{
    ptype *pt;
    int rc = ptype_get(p, memtype, &pt);
    if (rc)
        return rc;
    if (!out)
        return -EINVAL;
    *out = (mt_pool_stats){.deferred_done = p->deferred_done,
                           .deferred_errors = p->deferred_errors,
                           .fenced_pending = p->fenced_pending,
                           .fenced_done = p->fenced_done};
    return mt_alloc_get_stats(pt->a, &out->alloc);
}

int mt_pool_check(mt_pool *p, char *msg, size_t msg_len)
{
    if (!p)
        return -EINVAL;
    for (uint32_t t = 0; t < p->set->o.memory_types; t++) {
        ptype *pt = &p->types[t];
        if (!pt->a)
            continue;
        int rc = mt_alloc_check(pt->a, msg, msg_len);
        if (rc)
            return rc;
        /* Every live region is registered to this pool under its local id. */
        for (uint32_t local = 0; local < pt->l2g_cap; local++) {
            mt_alloc_region info;
            if (mt_alloc_region_info(pt->a, local, &info) != 0)
                continue;
            mt_pool *owner;
            const pregion *e = mti_pool_region_lookup(p->set, pt->l2g[local], &owner);
            if (!e || owner != p || e->memtype != t || e->local != local || e->size != info.size) {
                if (msg && msg_len)
                    snprintf(msg, msg_len, "memory type %u: region %u is not registered to "
                             "this pool", t, local);
                return MT_ECORRUPT;
            }
        }
    }
    return 0;
}

/* mt_pools_destroy, first pass: the allocators release their regions through
 * the set's callback. */
void mti_pool_teardown(mt_pool *p)
{
    for (uint32_t t = 0; t < p->set->o.memory_types; t++) {
        mt_alloc_destroy(p->types[t].a);
        p->types[t].a = NULL;
    }
    mti_pool_nodes_free(p);
}

/* Second pass, once no pool's lists lead anywhere any more. */
void mti_pool_free(mt_pool *p)
{
    for (uint32_t t = 0; t < p->set->o.memory_types; t++)
        free(p->types[t].l2g);
    mti_pool_slabs_free(p);
    free(p->types);
    free(p);
}
