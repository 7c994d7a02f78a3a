/* The host backend: a CPU device whose memory is host memory. Commands run
 * on the engine thread with host pointers; copies are memcpy. Its memory is
 * one region of `mem_size` bytes, so eviction behaves as on a real device.
 * Device addresses are host pointers (MT_COH_CAP_HOST_MEMORY): other devices
 * copy to and from it in one hop, and fine-grained SVM is used in place. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "../internal.h"

typedef struct host_dev {
    uint64_t size;
    void *mem; /* NULL until the first grow */
} host_dev;

static int host_dev_create(uint64_t mem_size, void **out)
{
    host_dev *h = calloc(1, sizeof *h);
    if (!h)
        return -ENOMEM;
    h->size = (mem_size + 4095) & ~(uint64_t)4095;
    *out = h;
    return 0;
}

static int host_grow(void *dev, uint64_t min_size, uint64_t *base, uint64_t *size)
{
    host_dev *h = dev;
    if (h->mem || min_size > h->size)
        return -ENOSPC;
    h->mem = aligned_alloc(4096, h->size);
    if (!h->mem)
        return -ENOSPC;
    *base = (uint64_t)(uintptr_t)h->mem;
    *size = h->size;
    return 0;
}

static void host_release(void *dev, uint64_t base, uint64_t size)
{
    host_dev *h = dev;
    (void)size;
    if ((void *)(uintptr_t)base == h->mem) {
        free(h->mem);
        h->mem = NULL;
    }
}

static void copy_segs(char *dst, const char *src, const mt_coh_op *op)
{
    for (uint32_t i = 0; i < op->nsegs; i++)
        memcpy(dst + op->segs[i].dst, src + op->segs[i].src, op->segs[i].len);
}

static int host_submit(void *dev, int engine, mt_coh_op *op)
{
    (void)dev;
    (void)engine;
    char *d = (char *)(uintptr_t)op->dev_addr;
    switch (op->kind) {
    case MT_COH_OP_RUN:
        op->exec.native = NULL;
        op->exec.device_handle = NULL;
        return op->fn(op->user, &op->exec);
    case MT_COH_OP_UPLOAD:
        copy_segs(d, op->host, op);
        return 0;
    case MT_COH_OP_DOWNLOAD:
        copy_segs(op->host, d, op);
        return 0;
    case MT_COH_OP_PEER:
        copy_segs(d, (const char *)(uintptr_t)op->peer_addr, op);
        return 0;
    }
    return -EINVAL;
}

static int host_svm_attach(void *dev, void *ptr, uint64_t len, uint64_t *addr, void **token)
{
    (void)dev;
    (void)len;
    *addr = (uint64_t)(uintptr_t)ptr;
    *token = NULL;
    return 0;
}

static void host_destroy(void *dev)
{
    host_dev *h = dev;
    free(h->mem);
    free(h);
}

static const mt_coh_backend host_backend = {
    .name = "host",
    .caps = MT_COH_CAP_HOST_MEMORY | MT_COH_CAP_FINE_SVM,
    .mem_grow = host_grow,
    .mem_release = host_release,
    .submit = host_submit,
    .svm_attach = host_svm_attach,
    .destroy = host_destroy,
};

int mt_coh_add_host_device(mt_coh *c, uint64_t mem_size, uint32_t *id)
{
    void *h;
    int rc = host_dev_create(mem_size ? mem_size : 64u << 20, &h);
    if (rc)
        return rc;
    return mt_coh_device_add(c, &host_backend, h, NULL, id);
}
