/* What the application reads about devices: how many, and each one's
 * state (mt_coh_device_info_get). Apart from device.c because reading the
 * state applies pending losses first (fixup.c), and fixup.c releases
 * instances through memory.c, which allocates through device.c: in
 * device.c that would make the files call each other in a loop. */
#include <errno.h>
#include <string.h>

#include "internal.h"

uint32_t mt_coh_device_count(mt_coh *c)
{
    if (!c || mti_coh_forked(c))
        return 0;
    pthread_mutex_lock(&c->lock);
    uint32_t n = c->ndev;
    pthread_mutex_unlock(&c->lock);
    return n;
}

int mt_coh_device_info_get(mt_coh *c, uint32_t id, mt_coh_device_info *out)
{
    if (!c || !out)
        return -EINVAL;
    if (mti_coh_forked(c))
        return MT_EFORKED;
    pthread_mutex_lock(&c->lock);
    if (id == 0 || id > c->ndev) {
        pthread_mutex_unlock(&c->lock);
        return -ENOENT;
    }
    /* A loss or failure a completion reported is applied first, as every
     * other call that reads the state does: a device reported lost holds
     * no instance and no memory. */
    mti_coh_fixups_run(c);
    coh_device *d = c->dev[id];
    memset(out, 0, sizeof *out);
    out->backend = d->be->name;
    out->name = d->name;
    out->caps = d->be->caps;
    out->lost = atomic_load_explicit(&d->lost, memory_order_acquire);
    out->instances = d->ninsts;
    out->evictions = atomic_load_explicit(&d->evictions, memory_order_relaxed);
    out->bytes_in = atomic_load_explicit(&d->bytes_in, memory_order_relaxed);
    out->bytes_out = atomic_load_explicit(&d->bytes_out, memory_order_relaxed);
    pthread_mutex_lock(&d->mem_lock);
    out->mem_reserved = d->mem_reserved;
    out->mem_used = d->mem_used;
    pthread_mutex_unlock(&d->mem_lock);
    pthread_mutex_unlock(&c->lock);
    return 0;
}
