/* coh_cuda_hooks.h: lets the test kernel (coh_util.h) read and write CUDA
 * device memory. The tests load the driver themselves (dlopen, as the
 * library does), so nothing here needs CUDA to build. */
#ifndef MT_COH_CUDA_HOOKS_H
#define MT_COH_CUDA_HOOKS_H

#include <dlfcn.h>

#include "coh_util.h"

typedef int (*tk_cu_sync_fn)(void *stream);
typedef int (*tk_cu_dtoh_fn)(void *dst, unsigned long long src, size_t n);
typedef int (*tk_cu_htod_fn)(unsigned long long dst, const void *src, size_t n);
static tk_cu_sync_fn tk_cu_sync;
static tk_cu_dtoh_fn tk_cu_dtoh;
static tk_cu_htod_fn tk_cu_htod;

/* The command's earlier work on its stream first, then a synchronous copy
 * (the compute engine thread has the device's context current). */
static int tk_cu_read(void *stream, uint64_t src, void *dst, size_t n)
{
    if (tk_cu_sync(stream) || tk_cu_dtoh(dst, src, n))
        return -5;
    return 0;
}

static int tk_cu_fill(void *stream, uint64_t dst, size_t n, uint64_t pattern)
{
    uint8_t *buf = malloc(n);
    if (!buf)
        return -12;
    tk_fill(buf, n, pattern);
    int rc = tk_cu_sync(stream) || tk_cu_htod(dst, buf, n) ? -5 : 0;
    free(buf);
    return rc;
}

/* Returns 1 when the driver is there and the hooks are set. */
static int tk_cuda_load(void)
{
    void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!h)
        return 0;
    void *a = dlsym(h, "cuStreamSynchronize"), *b = dlsym(h, "cuMemcpyDtoH_v2"),
         *c = dlsym(h, "cuMemcpyHtoD_v2");
    if (!a || !b || !c)
        return 0;
    memcpy(&tk_cu_sync, &a, sizeof a);
    memcpy(&tk_cu_dtoh, &b, sizeof b);
    memcpy(&tk_cu_htod, &c, sizeof c);
    tk_cuda_hooks.read = tk_cu_read;
    tk_cuda_hooks.fill = tk_cu_fill;
    return 1;
}

#endif
