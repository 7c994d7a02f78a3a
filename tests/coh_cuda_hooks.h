/* coh_cuda_hooks.h: lets the test kernel (coh_util.h) read and write CUDA
 * device memory. The tests load the driver themselves (dlopen, as the
 * library does), so nothing here needs CUDA to build. */
#ifndef MT_COH_CUDA_HOOKS_H
#define MT_COH_CUDA_HOOKS_H

#include <dlfcn.h>
#include <stdio.h>

#include "coh_util.h"
#include "mt_test.h"

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

/* MT_COH_TEST_CUDA=1 asks a test to add GPU devices: 1 when asked and a GPU
 * and the hooks are there, 0 when not asked, -1 (the skip line printed:
 * the test exits 77) when asked without a GPU. */
static inline int tk_cuda_wanted(void)
{
    const char *cu = getenv("MT_COH_TEST_CUDA");
    if (!cu || *cu != '1')
        return 0;
    mt_coh *probe;
    uint32_t first, n = 0;
    MT_CHECK_OK(mt_coh_create(NULL, &probe));
    MT_CHECK_OK(mt_coh_add_cuda_devices(probe, NULL, &first, &n));
    mt_coh_destroy(probe);
    if (!n || !tk_cuda_load()) {
        puts("MT_COH_TEST_CUDA: no CUDA driver or GPU: skipped");
        return -1;
    }
    return 1;
}

#endif
