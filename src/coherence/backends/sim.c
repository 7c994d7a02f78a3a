/* The sim backend: memtrack's simulated device (memtrack/device_sim.h).
 *
 * Compute: a command's function writes device commands to the device's
 * stream (mt_coh_exec.native) with device addresses; the backend follows
 * them with a fence and the completer waits for it, so the device runs
 * asynchronously and its posted writes are visible once the command is
 * complete. Copy: the simulated DMA reads and writes device memory through
 * mt_sim_read/mt_sim_write from the copy engine's thread (the device memory
 * is the simulator's; the stream has one producer, the compute engine).
 * Device memory: the whole device range, one region. Loss (injected faults,
 * device faults) surfaces as MT_EDEVLOST from the stream. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "../internal.h"
#include "memtrack/stream.h"

typedef struct sim_dev {
    mt_sim *sim;
    mt_stream *s;
    int given;
    _Atomic int shut;
} sim_dev;

static int sim_dev_create(const mt_sim_opts *o, void **out)
{
    sim_dev *h = calloc(1, sizeof *h);
    if (!h)
        return -ENOMEM;
    int rc = mt_sim_create(o, &h->sim);
    if (!rc)
        rc = mt_stream_create(NULL, &h->s);
    if (!rc)
        rc = mt_sim_attach(h->sim, h->s);
    if (rc) {
        mt_sim_destroy(h->sim);
        mt_stream_destroy(h->s);
        free(h);
        return rc;
    }
    *out = h;
    return 0;
}

static mt_sim *sim_dev_sim(void *dev)
{
    return ((sim_dev *)dev)->sim;
}

static int sim_grow(void *dev, uint64_t min_size, uint64_t *base, uint64_t *size)
{
    sim_dev *h = dev;
    uint64_t n = mt_sim_size(h->sim);
    if (h->given || min_size > n)
        return -ENOSPC;
    uint64_t addr;
    int rc = mt_sim_alloc(h->sim, n, 256, &addr);
    if (rc)
        return -ENOSPC;
    h->given = 1;
    *base = addr;
    *size = n;
    return 0;
}

static void sim_release(void *dev, uint64_t base, uint64_t size)
{
    sim_dev *h = dev;
    (void)size;
    mt_sim_free(h->sim, base);
    h->given = 0;
}

static int sim_submit(void *dev, int engine, mt_coh_op *op)
{
    sim_dev *h = dev;
    (void)engine;
    int lost = mt_stream_status(h->s);
    if (lost)
        return lost;
    int rc = 0;
    switch (op->kind) {
    case MT_COH_OP_RUN: {
        op->exec.native = h->s;
        op->exec.device_handle = h->sim;
        rc = op->fn(op->user, &op->exec);
        if (rc)
            return rc;
        uint64_t v;
        rc = mt_stream_fence(h->s, &v);
        if (rc)
            return rc;
        op->scratch[0] = v;
        return 1;
    }
    case MT_COH_OP_UPLOAD:
        for (uint32_t i = 0; i < op->nsegs && !rc; i++)
            rc = mt_sim_write(h->sim, op->dev_addr + op->segs[i].dst,
                              (const char *)op->host + op->segs[i].src, op->segs[i].len);
        break;
    case MT_COH_OP_DOWNLOAD:
        for (uint32_t i = 0; i < op->nsegs && !rc; i++)
            rc = mt_sim_read(h->sim, op->dev_addr + op->segs[i].src,
                             (char *)op->host + op->segs[i].dst, op->segs[i].len);
        break;
    default:
        return -EINVAL;
    }
    /* A device lost during the copy: its memory is no longer trustworthy. */
    return rc ? rc : mt_stream_status(h->s);
}

static int sim_wait(void *dev, int engine, mt_coh_op *op)
{
    sim_dev *h = dev;
    (void)engine;
    mt_timeline *tl = mt_stream_timeline(h->s);
    for (;;) {
        /* Bounded waits: a stalled device must not hold shutdown forever. */
        int rc = mt_timeline_wait(tl, op->scratch[0], 50 * 1000 * 1000);
        if (atomic_load_explicit(&h->shut, memory_order_acquire) && rc)
            return MT_ECANCELED;
        if (rc != MT_ETIMEDOUT && rc != MT_ECANCELED)
            return rc;
    }
}

static void sim_shutdown(void *dev)
{
    sim_dev *h = dev;
    atomic_store_explicit(&h->shut, 1, memory_order_release);
    mt_stream_cancel(h->s);
}

static void sim_destroy(void *dev)
{
    sim_dev *h = dev;
    mt_sim_destroy(h->sim); /* detaches first */
    mt_stream_destroy(h->s);
    free(h);
}

static const mt_coh_backend sim_backend = {
    .name = "sim",
    .caps = MT_COH_CAP_ASYNC,
    .mem_grow = sim_grow,
    .mem_release = sim_release,
    .submit = sim_submit,
    .wait = sim_wait,
    .shutdown = sim_shutdown,
    .destroy = sim_destroy,
};

int mt_coh_add_sim_device(mt_coh *c, const mt_sim_opts *opts, uint32_t *id)
{
    void *h;
    int rc = sim_dev_create(opts, &h);
    if (rc)
        return rc;
    return mt_coh_device_add(c, &sim_backend, h, NULL, id);
}

mt_sim *mt_coh_device_sim(mt_coh *c, uint32_t id)
{
    if (!c || mti_coh_forked(c) || id == 0 || id > c->ndev || c->dev[id]->be != &sim_backend)
        return NULL;
    return sim_dev_sim(c->dev[id]->h);
}
