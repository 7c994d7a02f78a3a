/* Devices: adding one behind a backend and its memory (regions from the
 * backend suballocated by memtrack `alloc`). Each backend's
 * mt_coh_add_*_device(s) is in its own file (backends/), an engine records
 * a device's loss (engine.c), and what the application reads about a
 * device is in device_info.c. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

/* alloc's grow callback: ask the backend for a region (mem_lock held). */
static int dev_grow(void *user, mt_alloc *a, uint64_t min_size)
{
    coh_device *d = user;
    uint64_t base = 0, size = 0;
    int rc = d->be->mem_grow(d->h, min_size, &base, &size);
    if (rc) {
        d->alloc_exhausted = 1; /* what it has is all there is, for now */
        return rc;
    }
    uint32_t rid;
    rc = mt_alloc_add_region(a, size, (void *)(uintptr_t)base, &rid);
    if (!rc && rid >= COH_MAX_REGIONS) {
        mt_alloc_remove_region(a, rid);
        rc = -ENOSPC;
    }
    if (rc) {
        if (d->be->mem_release)
            d->be->mem_release(d->h, base, size);
        return rc;
    }
    d->region_base[rid] = base;
    d->mem_reserved += size;
    return 0;
}

static void dev_release(void *user, uint32_t region, uint64_t size, void *region_user)
{
    coh_device *d = user;
    (void)region;
    if (d->be->mem_release)
        d->be->mem_release(d->h, (uint64_t)(uintptr_t)region_user, size);
    d->mem_reserved -= size;
}

int mti_coh_dev_alloc(coh_device *d, uint64_t size, mt_alloc_block *b, uint64_t *addr)
{
    pthread_mutex_lock(&d->mem_lock);
    /* 256: CUDA's allocation alignment, and no instance shares a cache line. */
    int rc = mt_alloc_allocate(d->alloc, size, 256, MT_ALLOC_LINEAR, b);
    if (!rc) {
        *addr = d->region_base[b->region] + b->offset;
        d->mem_used += b->size;
    }
    pthread_mutex_unlock(&d->mem_lock);
    return rc;
}

void mti_coh_dev_free(coh_device *d, const mt_alloc_block *b)
{
    pthread_mutex_lock(&d->mem_lock);
    if (mt_alloc_free_block(d->alloc, b) == 0)
        d->mem_used -= b->size;
    pthread_mutex_unlock(&d->mem_lock);
}

static void dev_free(coh_device *d)
{
    mt_alloc_destroy(d->alloc); /* releases the regions */
    pthread_mutex_destroy(&d->mem_lock);
    free(d->insts);
    free(d);
}

int mt_coh_device_add(mt_coh *c, const mt_coh_backend *be, void *h, const mt_coh_device_opts *opts,
                      uint32_t *id)
{
    int bad = c && mti_coh_forked(c) ? MT_EFORKED : -EINVAL;
    if (!c || !be || !be->submit || !be->mem_grow || !id ||
        ((be->caps & MT_COH_CAP_ASYNC) && !be->wait) || bad == MT_EFORKED) {
        if (be && be->destroy && h)
            be->destroy(h);
        return bad;
    }
    coh_device *d = calloc(1, sizeof *d);
    if (!d) {
        if (be->destroy)
            be->destroy(h);
        return -ENOMEM;
    }
    d->ctx = c;
    d->be = be;
    d->h = h;
    snprintf(d->name, sizeof d->name, "%s", opts && opts->name ? opts->name : be->name);
    pthread_mutex_init(&d->mem_lock, NULL);
    atomic_init(&d->lost, 0);
    mt_alloc_opts ao = {.min_align = 256, .grow = dev_grow, .release = dev_release, .user = d};
    int rc = mt_alloc_create(&ao, &d->alloc);
    coh_loc *loc = NULL;
    pthread_mutex_lock(&c->lock);
    if (!rc && c->ndev >= MT_COH_MAX_DEVICES)
        rc = -ENOSPC;
    if (!rc && c->closing)
        rc = MT_ECANCELED;
    if (!rc)
        rc = mti_coh_loc_create(&loc);
    if (!rc) {
        d->id = c->ndev + 1;
        rc = mti_coh_engine_start(&d->eng[MT_COH_ENGINE_COMPUTE], d, MT_COH_ENGINE_COMPUTE);
        if (!rc) {
            rc = mti_coh_engine_start(&d->eng[MT_COH_ENGINE_COPY], d, MT_COH_ENGINE_COPY);
            if (rc)
                mti_coh_engine_stop(&d->eng[MT_COH_ENGINE_COMPUTE]);
        }
    }
    if (rc) {
        pthread_mutex_unlock(&c->lock);
        mti_coh_loc_destroy(loc);
        if (d->alloc)
            mt_alloc_destroy(d->alloc);
        pthread_mutex_destroy(&d->mem_lock);
        free(d);
        if (be->destroy)
            be->destroy(h);
        return rc;
    }
    c->ndev = d->id;
    c->dev[d->id] = d;
    c->loc[d->id] = loc;
    if (be->caps & MT_COH_CAP_HOST_MEMORY)
        c->hostmem_mask |= COH_BIT(d->id);
    /* Direct copies between devices of one backend, in both directions. */
    for (uint32_t i = 1; i < d->id; i++) {
        coh_device *o = c->dev[i];
        if (o->be != be || !be->can_peer)
            continue;
        if (be->can_peer(d->h, o->h))
            d->peer_mask |= COH_BIT(i);
        if (be->can_peer(o->h, d->h))
            o->peer_mask |= COH_BIT(d->id);
    }
    pthread_mutex_unlock(&c->lock);
    *id = d->id;
    return 0;
}

/* Stops the engines, releases every region and the backend (shutdown). */
void mti_coh_device_destroy(coh_device *d)
{
    if (d->be->shutdown)
        d->be->shutdown(d->h);
    mti_coh_engine_stop(&d->eng[0]);
    mti_coh_engine_stop(&d->eng[1]);
}

void mti_coh_device_free(coh_device *d)
{
    const mt_coh_backend *be = d->be;
    void *h = d->h;
    pthread_mutex_lock(&d->mem_lock);
    pthread_mutex_unlock(&d->mem_lock);
    dev_free(d);
    if (be->destroy)
        be->destroy(h);
}
