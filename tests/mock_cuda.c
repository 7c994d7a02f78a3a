/* A mock CUDA driver (libcuda.so.1) for running the CUDA backend's code on
 * machines without a GPU: test_coherence_cuda_mock loads it through
 * LD_LIBRARY_PATH. Device memory is host memory (malloc), one device,
 * streams run their work at once (in call order, which is stream order),
 * events are complete when recorded, pinned memory maps to itself (unified
 * addressing), and a launch of mt_coh_copy_tiles performs the copies the
 * real kernel does, from its tile table. It checks what the real driver
 * would refuse: double registration (712), unregistering unknown memory,
 * freeing unknown device memory, copies outside allocations. It does not
 * check timing: the GPU run does. */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef int CUresult;
typedef unsigned long long CUdeviceptr;

#define EXPORT __attribute__((visibility("default")))

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static int ctx_token; /* the one context: its address */
static __thread void *current;

typedef struct region {
    uintptr_t a, b;
    int kind; /* 1 device allocation, 2 registered host memory, 3 host allocation */
} region;
static region regions[4096];
static int nregions;

static int add_region(uintptr_t a, size_t n, int kind)
{
    pthread_mutex_lock(&lock);
    for (int i = 0; i < nregions; i++)
        if (regions[i].kind == kind && a < regions[i].b && regions[i].a < a + n) {
            pthread_mutex_unlock(&lock);
            return 712; /* overlaps: already registered */
        }
    int rc = nregions < 4096 ? 0 : 2;
    if (!rc)
        regions[nregions++] = (region){a, a + n, kind};
    pthread_mutex_unlock(&lock);
    return rc;
}

static int del_region(uintptr_t a, int kind)
{
    pthread_mutex_lock(&lock);
    for (int i = 0; i < nregions; i++)
        if (regions[i].kind == kind && regions[i].a == a) {
            regions[i] = regions[--nregions];
            pthread_mutex_unlock(&lock);
            return 0;
        }
    pthread_mutex_unlock(&lock);
    return 1; /* CUDA_ERROR_INVALID_VALUE */
}

/* Device-side access must fall inside device memory or mapped host memory. */
static void check(uintptr_t a, size_t n, const char *what)
{
    if (!n)
        return;
    pthread_mutex_lock(&lock);
    for (int i = 0; i < nregions; i++)
        if (a >= regions[i].a && a + n <= regions[i].b) {
            pthread_mutex_unlock(&lock);
            return;
        }
    pthread_mutex_unlock(&lock);
    fprintf(stderr, "mock cuda: %s outside any allocation: %#lx + %zu\n", what, (unsigned long)a, n);
    abort();
}

EXPORT CUresult cuInit(unsigned f) { (void)f; return 0; }
EXPORT CUresult cuDeviceGetCount(int *n) { *n = 1; return 0; }
EXPORT CUresult cuDeviceGet(int *d, int o) { *d = o; return o == 0 ? 0 : 101; }
EXPORT CUresult cuDeviceGetName(char *s, int n, int d) { (void)d; snprintf(s, (size_t)n, "mock GPU"); return 0; }
EXPORT CUresult cuDeviceGetAttribute(int *v, int a, int d) { (void)a; (void)d; *v = 4; return 0; }
EXPORT CUresult cuDeviceCanAccessPeer(int *v, int a, int b) { (void)a; (void)b; *v = 0; return 0; }
EXPORT CUresult cuDevicePrimaryCtxRetain(void **c, int d) { (void)d; *c = &ctx_token; return 0; }
EXPORT CUresult cuDevicePrimaryCtxRelease_v2(int d) { (void)d; return 0; }
EXPORT CUresult cuCtxSetCurrent(void *c) { current = c; return 0; }
EXPORT CUresult cuCtxGetCurrent(void **c) { *c = current; return 0; }
EXPORT CUresult cuCtxEnablePeerAccess(void *c, unsigned f) { (void)c; (void)f; return 0; }
EXPORT CUresult cuMemGetInfo_v2(size_t *f, size_t *t) { *f = 4ull << 30; *t = 8ull << 30; return 0; }

static int need_ctx(void)
{
    if (current != &ctx_token) {
        fprintf(stderr, "mock cuda: call without a current context\n");
        abort();
    }
    return 0;
}

EXPORT CUresult cuMemAlloc_v2(CUdeviceptr *p, size_t n)
{
    need_ctx();
    void *m = malloc(n);
    if (!m)
        return 2;
    *p = (CUdeviceptr)(uintptr_t)m;
    return add_region((uintptr_t)m, n, 1);
}

EXPORT CUresult cuMemFree_v2(CUdeviceptr p)
{
    need_ctx();
    if (del_region((uintptr_t)p, 1)) {
        fprintf(stderr, "mock cuda: cuMemFree of unknown memory\n");
        abort();
    }
    free((void *)(uintptr_t)p);
    return 0;
}

EXPORT CUresult cuMemHostAlloc(void **p, size_t n, unsigned f)
{
    (void)f;
    need_ctx();
    *p = malloc(n);
    return *p ? add_region((uintptr_t)*p, n, 3) : 2;
}

EXPORT CUresult cuMemFreeHost(void *p)
{
    if (del_region((uintptr_t)p, 3)) {
        fprintf(stderr, "mock cuda: cuMemFreeHost of unknown memory\n");
        abort();
    }
    free(p);
    return 0;
}

/* Registrations refused: each is an API error compute-sanitizer reports in
 * the application's run (the test expects none from memtrack). */
static int refusals;
EXPORT int mock_cuda_register_refusals(void)
{
    pthread_mutex_lock(&lock);
    int n = refusals;
    pthread_mutex_unlock(&lock);
    return n;
}

EXPORT CUresult cuMemHostRegister_v2(void *p, size_t n, unsigned f)
{
    (void)f;
    need_ctx();
    int rc = (uintptr_t)p % 4096 || n % 4096 ? 1 : add_region((uintptr_t)p, n, 2);
    if (rc) {
        pthread_mutex_lock(&lock);
        refusals++;
        pthread_mutex_unlock(&lock);
    }
    return rc;
}

EXPORT CUresult cuMemHostUnregister(void *p)
{
    need_ctx();
    if (del_region((uintptr_t)p, 2)) {
        fprintf(stderr, "mock cuda: unregistering memory never registered\n");
        abort();
    }
    return 0;
}

EXPORT CUresult cuMemHostGetDevicePointer_v2(CUdeviceptr *d, void *p, unsigned f)
{
    (void)f;
    check((uintptr_t)p, 1, "cuMemHostGetDevicePointer");
    *d = (CUdeviceptr)(uintptr_t)p;
    return 0;
}

EXPORT CUresult cuStreamCreate(void **s, unsigned f) { (void)f; need_ctx(); *s = malloc(1); return 0; }
EXPORT CUresult cuStreamDestroy_v2(void *s) { free(s); return 0; }
EXPORT CUresult cuStreamSynchronize(void *s) { (void)s; return 0; }
EXPORT CUresult cuEventCreate(void **e, unsigned f) { (void)f; need_ctx(); *e = malloc(1); return 0; }
EXPORT CUresult cuEventRecord(void *e, void *s) { (void)e; (void)s; return 0; }
EXPORT CUresult cuEventSynchronize(void *e) { (void)e; return 0; }
EXPORT CUresult cuEventDestroy_v2(void *e) { free(e); return 0; }

EXPORT CUresult cuMemcpyHtoDAsync_v2(CUdeviceptr d, const void *h, size_t n, void *s)
{
    (void)s;
    need_ctx();
    check((uintptr_t)d, n, "cuMemcpyHtoDAsync destination");
    memcpy((void *)(uintptr_t)d, h, n);
    return 0;
}

EXPORT CUresult cuMemcpyDtoHAsync_v2(void *h, CUdeviceptr d, size_t n, void *s)
{
    (void)s;
    need_ctx();
    check((uintptr_t)d, n, "cuMemcpyDtoHAsync source");
    memcpy(h, (void *)(uintptr_t)d, n);
    return 0;
}

EXPORT CUresult cuMemcpyDtoDAsync_v2(CUdeviceptr d, CUdeviceptr s, size_t n, void *st)
{
    (void)st;
    need_ctx();
    check((uintptr_t)d, n, "cuMemcpyDtoDAsync destination");
    check((uintptr_t)s, n, "cuMemcpyDtoDAsync source");
    memmove((void *)(uintptr_t)d, (void *)(uintptr_t)s, n);
    return 0;
}

EXPORT CUresult cuMemcpyPeerAsync(CUdeviceptr d, void *dc, CUdeviceptr s, void *sc, size_t n, void *st)
{
    (void)dc;
    (void)sc;
    return cuMemcpyDtoDAsync_v2(d, s, n, st);
}

/* Synchronous ones (used by the tests' hooks). */
EXPORT CUresult cuMemcpyHtoD_v2(CUdeviceptr d, const void *h, size_t n) { return cuMemcpyHtoDAsync_v2(d, h, n, NULL); }
EXPORT CUresult cuMemcpyDtoH_v2(void *h, CUdeviceptr d, size_t n) { return cuMemcpyDtoHAsync_v2(h, d, n, NULL); }

static int module_token, function_token;

EXPORT CUresult cuModuleLoadData(void **m, const void *image)
{
    need_ctx();
    if (!strstr(image, ".entry mt_coh_copy_tiles"))
        return 218; /* CUDA_ERROR_INVALID_PTX */
    *m = &module_token;
    return 0;
}

EXPORT CUresult cuModuleUnload(void *m) { (void)m; return 0; }

EXPORT CUresult cuModuleGetFunction(void **f, void *m, const char *name)
{
    (void)m;
    if (strcmp(name, "mt_coh_copy_tiles"))
        return 500;
    *f = &function_token;
    return 0;
}

/* mt_coh_copy_tiles(tiles, n, src, dst), as cuda_copy.cu does it. */
EXPORT CUresult cuLaunchKernel(void *f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by,
                               unsigned bz, unsigned sh, void *s, void **params, void **extra)
{
    (void)gy; (void)gz; (void)bx; (void)by; (void)bz; (void)sh; (void)s; (void)extra;
    need_ctx();
    if (f != &function_token)
        return 400;
    const uint64_t *tiles = (const uint64_t *)(uintptr_t)*(CUdeviceptr *)params[0];
    unsigned long long n = *(unsigned long long *)params[1];
    uintptr_t src = (uintptr_t)*(CUdeviceptr *)params[2], dst = (uintptr_t)*(CUdeviceptr *)params[3];
    if (gx < n)
        return 1;
    check((uintptr_t)tiles, n * 24, "tile table");
    for (unsigned long long i = 0; i < n; i++) {
        uint64_t so = tiles[3 * i], d = tiles[3 * i + 1], len = tiles[3 * i + 2];
        if (!len || len > (64u << 10)) {
            fprintf(stderr, "mock cuda: bad tile length %llu\n", (unsigned long long)len);
            abort();
        }
        check(src + so, len, "kernel read");
        check(dst + d, len, "kernel write");
        memmove((void *)(dst + d), (void *)(src + so), len);
    }
    return 0;
}

EXPORT CUresult cuGetErrorString(CUresult r, const char **s) { (void)r; *s = "mock error"; return 0; }
