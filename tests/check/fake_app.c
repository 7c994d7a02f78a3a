/* A driver-API program that finds the driver the way the CUDA runtime does
 * (dlopen libcuda.so.1, dlsym cuGetProcAddress_v2, everything else through
 * it), for preload_test.sh: under `memtrack check` with the fake driver
 * (fake_cuda.c) every step must see the interposer at work. Exits 0 when
 * each expectation holds, 1 with a message otherwise.
 * Built with FAKE_APP_LINKED, the hooks are linked into the program and it
 * takes cuGetProcAddress_v2 from them directly (no preload: what sanitizer
 * builds can run). */
#include <dlfcn.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

typedef int CUresult;
typedef unsigned long long CUdeviceptr;
typedef CUresult (*gpa_fn)(const char *, void **, int, uint64_t, int *);

#define FAIL(...)                                  \
    do {                                           \
        fprintf(stderr, "fake_app: " __VA_ARGS__); \
        fprintf(stderr, "\n");                     \
        return 1;                                  \
    } while (0)

static const char kernel[] =
    ".version 7.8\n.target sm_90\n.address_size 64\n"
    ".visible .entry k(.param .u64 p)\n{\n\t.reg .b64 %rd<2>;\n\t.reg .b32 %r<2>;\n"
    "\tld.param.u64 %rd1, [p];\n\tmov.u32 %r1, 7;\n\tst.global.u32 [%rd1+4096], %r1;\n\tret;\n}\n";
static const char kernel_jit_fail[] =
    "// FAKE_JIT_FAIL\n.version 7.8\n.target sm_90\n.address_size 64\n"
    ".visible .entry k(.param .u64 p)\n{\n\tret;\n}\n";

/* The stress part: threads allocating, copying, freeing and loading modules
 * at once (the runtime serialises them with one lock; TSan builds watch). */
typedef struct stress {
    CUresult (*alloc)(CUdeviceptr *, size_t);
    CUresult (*free_)(CUdeviceptr);
    CUresult (*htod)(CUdeviceptr, const void *, size_t);
    CUresult (*load)(void **, const void *);
    CUresult (*push)(void *);
    uint64_t (*alloc_size)(uint64_t);
    void *ctx;
    int seed, failed;
} stress;

static void *stress_thread(void *arg)
{
    stress *s = arg;
    unsigned x = (unsigned)s->seed * 2654435761u + 1;
    static const char data[8192];
    s->push(s->ctx);
    for (int i = 0; i < 200 && !s->failed; i++) {
        x = x * 1103515245u + 12345u;
        size_t n = 1 + (x >> 8) % 8000;
        CUdeviceptr p;
        if (s->alloc(&p, n) || s->alloc_size(p - 512) != 512 + ((n + 255) & ~(size_t)255) + 512 ||
            s->htod(p, data, n) || s->free_(p))
            s->failed = 1;
        if (i % 50 == 0) {
            void *mod;
            if (s->load(&mod, kernel))
                s->failed = 1;
        }
    }
    return NULL;
}

int main(int argc, char **argv)
{
    void *h = dlopen("libcuda.so.1", RTLD_NOW);
    if (!h)
        FAIL("no libcuda.so.1");
#ifdef FAKE_APP_LINKED
    extern CUresult cuGetProcAddress_v2(const char *, void **, int, uint64_t, int *);
    gpa_fn gpa = cuGetProcAddress_v2;
#else
    gpa_fn gpa = (gpa_fn)dlsym(h, "cuGetProcAddress_v2");
#endif
    uint64_t (*alloc_size)(uint64_t) = (uint64_t(*)(uint64_t))dlsym(h, "fake_alloc_size");
    uint64_t (*last_free)(void) = (uint64_t(*)(void))dlsym(h, "fake_last_free");
    const char *(*last_module)(void) = (const char *(*)(void))dlsym(h, "fake_last_module");
    if (!gpa || !alloc_size || !last_free || !last_module)
        FAIL("not the fake driver");
#define GET(var, name, flags)                                  \
    if (gpa(name, (void **)&var, 13000, flags, NULL) || !var) \
        FAIL("no %s", name);
    CUresult (*cuInit)(unsigned);
    CUresult (*cuDeviceGet)(int *, int);
    CUresult (*cuDevicePrimaryCtxRetain)(void **, int);
    CUresult (*cuCtxPushCurrent)(void *);
    CUresult (*cuMemAlloc)(CUdeviceptr *, size_t);
    CUresult (*cuMemFree)(CUdeviceptr);
    CUresult (*cuMemGetAddressRange)(CUdeviceptr *, size_t *, CUdeviceptr);
    CUresult (*cuMemcpyHtoD)(CUdeviceptr, const void *, size_t);
    CUresult (*cuModuleLoadData)(void **, const void *);
    CUresult (*cuModuleGetFunction)(void **, void *, const char *);
    CUresult (*cuLaunchKernel)(void *, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
                               void *, void **, void **);
    CUresult (*cuCtxSynchronize)(void);
    CUresult (*cuLibraryLoadData)(void **, const void *, int *, void **, unsigned, int *, void **, unsigned);
    GET(cuInit, "cuInit", 0);
    GET(cuDeviceGet, "cuDeviceGet", 0);
    GET(cuDevicePrimaryCtxRetain, "cuDevicePrimaryCtxRetain", 0);
    GET(cuCtxPushCurrent, "cuCtxPushCurrent", 0);
    GET(cuMemAlloc, "cuMemAlloc", 0);
    GET(cuMemFree, "cuMemFree", 0);
    GET(cuMemGetAddressRange, "cuMemGetAddressRange", 0);
    GET(cuMemcpyHtoD, "cuMemcpyHtoD", 0);
    GET(cuModuleLoadData, "cuModuleLoadData", 0);
    GET(cuModuleGetFunction, "cuModuleGetFunction", 0);
    GET(cuLaunchKernel, "cuLaunchKernel", 2); /* the per-thread-stream entry point */
    GET(cuCtxSynchronize, "cuCtxSynchronize", 0);
    GET(cuLibraryLoadData, "cuLibraryLoadData", 0);

    int dev;
    void *ctx;
    if (cuInit(0) || cuDeviceGet(&dev, 0) || cuDevicePrimaryCtxRetain(&ctx, dev) || cuCtxPushCurrent(ctx))
        FAIL("no context");
    CUdeviceptr p;
    if (cuMemAlloc(&p, 4096))
        FAIL("cuMemAlloc");
    /* 512 bytes of red zone on each side */
    if (alloc_size(p - 512) != 512 + 4096 + 512)
        FAIL("allocation without its red zones: %#llx", p);
    CUdeviceptr base;
    size_t size;
    if (cuMemGetAddressRange(&base, &size, p + 10) || base != p || size != 4096)
        FAIL("cuMemGetAddressRange shows the red zones: %#llx + %zu", base, size);
    int data[1024] = {0};
    if (cuMemcpyHtoD(p, data, sizeof data))
        FAIL("cuMemcpyHtoD");
    void *mod, *fn;
    if (cuModuleLoadData(&mod, kernel) || cuModuleGetFunction(&fn, mod, "k"))
        FAIL("module");
    if (!strstr(last_module(), "memtrack check 0: store of 4 bytes, global space"))
        FAIL("the driver got PTX that was not instrumented");
    void *params[] = {&p};
    if (cuLaunchKernel(fn, 1, 1, 1, 32, 1, 1, 0, NULL, params, NULL))
        FAIL("launch");
    CUresult r = cuCtxSynchronize();
    if (r != 700)
        FAIL("the synchronisation after a failed check returned %d, not 700", r);
    if ((r = cuCtxSynchronize()) != 0)
        FAIL("the context stayed poisoned: %d", r);
    if (cuMemFree(p) || last_free() != p - 512)
        FAIL("cuMemFree did not free the padded allocation");
    r = cuModuleLoadData(&mod, kernel_jit_fail);
    if (r != 218)
        FAIL("a module the JIT rejects loaded: %d", r);
    /* A fatbinary as the CUDA runtime hands it over: its wrapper, pointing at
     * a container with the kernel's ELF and zstd-compressed PTX. */
    if (argc > 1) {
        static unsigned char fat[65536];
        FILE *f = fopen(argv[1], "rb");
        size_t n = f ? fread(fat, 1, sizeof fat, f) : 0;
        if (f)
            fclose(f);
        if (n < 64)
            FAIL("cannot read %s", argv[1]);
        size_t first = 16 + (size_t)(fat[8] | fat[9] << 8 | fat[10] << 16);
        struct { uint32_t magic, version; const void *data; void *unused; } wrap = {
            0x466243B1u, 1, fat + ((first + 7) & ~(size_t)7), NULL};
        void *lib;
        if (cuLibraryLoadData(&lib, &wrap, NULL, NULL, 0, NULL, NULL, 0))
            FAIL("cuLibraryLoadData");
        if (!strstr(last_module(), ".entry _Z5saxpyifPKfPf") || !strstr(last_module(), "memtrack check 3: store"))
            FAIL("the library's PTX was not instrumented:\n%s", last_module());
    }
    stress st[4];
    pthread_t tid[4];
    for (int i = 0; i < 4; i++) {
        st[i] = (stress){cuMemAlloc, cuMemFree, cuMemcpyHtoD, cuModuleLoadData, cuCtxPushCurrent, alloc_size,
                         ctx, i, 0};
        if (pthread_create(&tid[i], NULL, stress_thread, &st[i]))
            FAIL("pthread_create");
    }
    for (int i = 0; i < 4; i++) {
        pthread_join(tid[i], NULL);
        if (st[i].failed)
            FAIL("stress thread %d: an allocation, copy, free or load went wrong", i);
    }
    printf("fake_app: ok\n");
    return 0;
}
