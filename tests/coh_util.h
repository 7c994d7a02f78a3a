/* coh_util.h: a test kernel that runs on every coherence backend.
 *
 * For each argument the kernel records what it saw (a hash of the bytes of
 * readable arguments) and then writes writable ones with an 8-byte pattern
 * (byte i of the argument = pattern byte i % 8, the simulated device's FILL).
 * On a host device it works on host pointers; on a simulated device it reads
 * device memory through mt_sim_read and writes with FILL commands through
 * the stream; on a CUDA device (tests that load the driver) it uses the
 * driver calls given in tk_cuda. So one reference model checks them all. */
#ifndef MT_COH_UTIL_H
#define MT_COH_UTIL_H

#include <errno.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "memtrack/coherence.h"
#include "memtrack/device_sim.h"
#include "memtrack/stream.h"

#define TK_MAX 8

/* FNV-1a over bytes: what a command saw. */
static inline uint64_t tk_hash(const uint8_t *p, size_t n)
{
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < n; i++)
        h = (h ^ p[i]) * 1099511628211ull;
    return h;
}

static inline void tk_fill(uint8_t *p, size_t n, uint64_t pattern)
{
    for (size_t i = 0; i < n; i++)
        p[i] = (uint8_t)(pattern >> (8 * (i % 8)));
}

/* Backends the tests plug in whose device memory is host memory: one region
 * of `size` bytes, allocated on first use... */
typedef struct tk_hostmem {
    uint64_t size;
    void *mem;
} tk_hostmem;

static inline int tk_hostmem_grow(tk_hostmem *h, uint64_t min_size, uint64_t *base,
                                  uint64_t *size)
{
    if (h->mem || min_size > h->size || !(h->mem = malloc(h->size)))
        return -ENOSPC;
    *base = (uint64_t)(uintptr_t)h->mem;
    *size = h->size;
    return 0;
}

static inline void tk_hostmem_release(tk_hostmem *h)
{
    free(h->mem);
    h->mem = NULL;
}

/* ...and an op done there in place: a command runs with host pointers
 * (tk_run takes them for the "host" backend), copies are memcpy. */
static inline int tk_host_op(mt_coh_op *op)
{
    char *d = (char *)(uintptr_t)op->dev_addr;
    switch (op->kind) {
    case MT_COH_OP_RUN:
        op->exec.backend = "host";
        return op->fn(op->user, &op->exec);
    case MT_COH_OP_UPLOAD:
        for (uint32_t i = 0; i < op->nsegs; i++)
            memcpy(d + op->segs[i].dst, (char *)op->host + op->segs[i].src, op->segs[i].len);
        return 0;
    case MT_COH_OP_DOWNLOAD:
        for (uint32_t i = 0; i < op->nsegs; i++)
            memcpy((char *)op->host + op->segs[i].dst, d + op->segs[i].src, op->segs[i].len);
        return 0;
    default:
        return -EINVAL;
    }
}

/* Optional CUDA hooks (set by the CUDA test). */
typedef struct tk_cuda {
    int (*read)(void *stream, uint64_t src, void *dst, size_t n);      /* synchronous */
    int (*fill)(void *stream, uint64_t dst, size_t n, uint64_t pattern); /* on the stream */
} tk_cuda;
static tk_cuda tk_cuda_hooks;

typedef struct tk_cmd {
    uint32_t nargs;
    uint32_t access[TK_MAX];
    uint64_t pattern[TK_MAX];
    uint64_t seen[TK_MAX];   /* hash of what each readable argument held */
    int fail;                /* return this instead of running (fault tests) */
    _Atomic int ran;
} tk_cmd;

static int tk_read(const mt_coh_exec *ex, uint32_t i, uint8_t *dst)
{
    if (strcmp(ex->backend, "sim") == 0)
        return mt_sim_read((mt_sim *)ex->device_handle, ex->addr[i], dst, ex->size[i]);
    return tk_cuda_hooks.read(ex->native, ex->addr[i], dst, ex->size[i]);
}

static int tk_write(const mt_coh_exec *ex, uint32_t i, uint64_t pattern)
{
    uint64_t n = ex->size[i];
    if (strcmp(ex->backend, "sim") != 0)
        return tk_cuda_hooks.fill(ex->native, ex->addr[i], n, pattern);
    mt_stream *s = ex->native;
    int rc = mt_stream_set_state(s, MT_SIM_REG_DST, ex->addr[i]);
    if (rc >= 0)
        rc = mt_stream_set_state(s, MT_SIM_REG_LEN, n);
    if (rc >= 0)
        rc = mt_stream_set_state(s, MT_SIM_REG_VALUE, pattern);
    mt_cmd fill = {.op = MT_SIM_FILL};
    if (rc >= 0)
        rc = mt_stream_emit(s, &fill, NULL);
    return rc < 0 ? rc : 0;
}

static int tk_run(void *user, const mt_coh_exec *ex)
{
    tk_cmd *k = user;
    if (k->fail)
        return k->fail;
    int host = strcmp(ex->backend, "host") == 0;
    for (uint32_t i = 0; i < k->nargs; i++) {
        if (!(k->access[i] & MT_COH_READ))
            continue;
        if (host) {
            k->seen[i] = tk_hash((const uint8_t *)(uintptr_t)ex->addr[i], ex->size[i]);
            continue;
        }
        uint8_t *tmp = malloc(ex->size[i]);
        int rc = tmp ? tk_read(ex, i, tmp) : -1;
        if (!rc)
            k->seen[i] = tk_hash(tmp, ex->size[i]);
        free(tmp);
        if (rc)
            return rc;
    }
    for (uint32_t i = 0; i < k->nargs; i++) {
        if (!(k->access[i] & MT_COH_WRITE))
            continue;
        if (host) {
            tk_fill((uint8_t *)(uintptr_t)ex->addr[i], ex->size[i], k->pattern[i]);
            continue;
        }
        int rc = tk_write(ex, i, k->pattern[i]);
        if (rc)
            return rc;
    }
    atomic_store_explicit(&k->ran, 1, memory_order_release);
    return 0;
}

#endif
