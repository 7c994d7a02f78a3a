/* A fake libcuda.so.1 for testing libmemtrack_check.so without a GPU.
 *
 * "Device" memory is host memory, so device addresses are host addresses and
 * the runtime's validity map can be walked here. Kernels do not run, except:
 *  - _mt_shadow_op (the runtime's helper) is applied on the host with the
 *    map's reference semantics (mt_vmap_apply_word), as the GPU would;
 *  - _mt_local_probe writes the local-window top the H100 reports;
 *  - any other kernel of an instrumented module plays a failing check: it
 *    writes one record into the error buffer named in the module's text
 *    (kind "not addressable", at its first pointer argument + 4096, site of
 *    the module's first check), exactly where instrumented code would.
 * Entry points are those the runtime and the test program use; the rest
 * does not exist, as on an old driver. Entry points never call each other
 * (through the PLT the interposer would see those calls too). Test hooks: fake_last_raw(),
 * fake_alloc_size(), fake_last_free(), fake_last_module(). */
#define _GNU_SOURCE
#include <inttypes.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "memtrack/check.h"

typedef int CUresult;
typedef unsigned long long CUdeviceptr;
#define API __attribute__((visibility("default")))

static uint64_t last_raw, last_free;
static char *last_module;
static _Thread_local int ctx_current; /* a context is current per thread */
static int ctx_obj;

typedef struct alloc { uint64_t p, n; struct alloc *next; } alloc;
static alloc *allocs;

/* Every object handed out stays reachable until exit, as a real driver's do
 * (leak checkers then see no leak). */
static void **kept;
static size_t nkept, capkept;
static pthread_mutex_t keep_lock = PTHREAD_MUTEX_INITIALIZER;
/* One lock for the fake's own tables: the runtime is driven from several
 * threads at once by the stress part of fake_app. */
static pthread_mutex_t fake_lock = PTHREAD_MUTEX_INITIALIZER;
static void *keep(void *p)
{
    pthread_mutex_lock(&keep_lock);
    if (nkept == capkept) {
        capkept = capkept ? 2 * capkept : 64;
        kept = realloc(kept, capkept * sizeof *kept);
    }
    kept[nkept++] = p;
    pthread_mutex_unlock(&keep_lock);
    return p;
}

typedef struct fmod { char *text; } fmod;
typedef struct ffunc { fmod *m; char name[128]; } ffunc;

API uint64_t fake_last_raw(void) { return last_raw; }
/* Size of the allocation that starts at p, 0 if none does. */
API uint64_t fake_alloc_size(uint64_t p)
{
    uint64_t n = 0;
    pthread_mutex_lock(&fake_lock);
    for (alloc *a = allocs; a; a = a->next)
        if (a->p == p)
            n = a->n;
    pthread_mutex_unlock(&fake_lock);
    return n;
}
API uint64_t fake_last_free(void) { return last_free; } /* single-threaded callers only */
API const char *fake_last_module(void) { return last_module ? last_module : ""; }

API CUresult cuInit(unsigned f) { (void)f; return 0; }
API CUresult cuDeviceGet(int *d, int o) { *d = o; return o == 0 ? 0 : 101; }
API CUresult cuDeviceGetAttribute(int *v, int a, int d)
{
    (void)d;
    *v = a == 75 ? 9 : a == 76 ? 0 : 0; /* compute capability 9.0 */
    return 0;
}
API CUresult cuDevicePrimaryCtxRetain(void **c, int d) { (void)d; *c = &ctx_obj; return 0; }
API CUresult cuCtxGetCurrent(void **c) { *c = ctx_current ? &ctx_obj : NULL; return 0; }
API CUresult cuCtxPushCurrent_v2(void *c) { (void)c; ctx_current++; return 0; }
API CUresult cuCtxPopCurrent_v2(void **c) { if (c) *c = &ctx_obj; ctx_current--; return 0; }
API CUresult cuCtxGetDevice(int *d) { *d = 0; return 0; }
API CUresult cuCtxSynchronize(void) { return 0; }
API CUresult cuStreamCreate(void **s, unsigned f) { (void)f; *s = keep(malloc(1)); return 0; }
API CUresult cuStreamSynchronize(void *s) { (void)s; return 0; }
API CUresult cuStreamSynchronize_ptsz(void *s) { (void)s; return 0; }
API CUresult cuEventSynchronize(void *e) { (void)e; return 0; }
API CUresult cuGetErrorString(CUresult r, const char **s) { (void)r; *s = "fake"; return 0; }

API CUresult cuMemAlloc_v2(CUdeviceptr *p, size_t n)
{
    void *m = aligned_alloc(512, (n + 511) & ~(size_t)511);
    if (!m)
        return 2;
    memset(m, 0xcd, n); /* never zero unless asked: the map relies on memsets */
    alloc *a = malloc(sizeof *a);
    pthread_mutex_lock(&fake_lock);
    *a = (alloc){(uint64_t)(uintptr_t)m, n, allocs};
    allocs = a;
    *p = last_raw = (uint64_t)(uintptr_t)m;
    pthread_mutex_unlock(&fake_lock);
    return 0;
}
API CUresult cuMemFree_v2(CUdeviceptr p)
{
    pthread_mutex_lock(&fake_lock);
    for (alloc **a = &allocs; *a; a = &(*a)->next)
        if ((*a)->p == p) {
            alloc *d = *a;
            *a = d->next;
            last_free = p;
            pthread_mutex_unlock(&fake_lock);
            free((void *)(uintptr_t)d->p);
            free(d);
            return 0;
        }
    pthread_mutex_unlock(&fake_lock);
    return 1;
}
API CUresult cuMemGetAddressRange_v2(CUdeviceptr *base, size_t *size, CUdeviceptr p)
{
    CUresult r = 1;
    pthread_mutex_lock(&fake_lock);
    for (alloc *a = allocs; a; a = a->next)
        if (p >= a->p && p < a->p + a->n) {
            *base = a->p;
            *size = a->n;
            r = 0;
            break;
        }
    pthread_mutex_unlock(&fake_lock);
    return r;
}
API CUresult cuPointerGetAttribute(void *v, int attr, CUdeviceptr p)
{
    (void)attr;
    unsigned type = 1;
    pthread_mutex_lock(&fake_lock);
    for (alloc *a = allocs; a; a = a->next)
        if (p >= a->p && p < a->p + a->n)
            type = 2;
    pthread_mutex_unlock(&fake_lock);
    *(unsigned *)v = type;
    return 0;
}
API CUresult cuMemsetD8Async(CUdeviceptr d, unsigned char v, size_t n, void *s)
{
    (void)s;
    memset((void *)(uintptr_t)d, v, n);
    return 0;
}
API CUresult cuMemsetD8_v2(CUdeviceptr d, unsigned char v, size_t n)
{
    memset((void *)(uintptr_t)d, v, n);
    return 0;
}
API CUresult cuMemcpyHtoDAsync_v2(CUdeviceptr d, const void *s, size_t n, void *st)
{
    (void)st;
    memcpy((void *)(uintptr_t)d, s, n);
    return 0;
}
API CUresult cuMemcpyHtoD_v2(CUdeviceptr d, const void *s, size_t n)
{
    memcpy((void *)(uintptr_t)d, s, n);
    return 0;
}
API CUresult cuMemcpyDtoHAsync_v2(void *d, CUdeviceptr s, size_t n, void *st)
{
    (void)st;
    memcpy(d, (void *)(uintptr_t)s, n);
    return 0;
}
API CUresult cuMemcpyDtoH_v2(void *d, CUdeviceptr s, size_t n)
{
    memcpy(d, (void *)(uintptr_t)s, n);
    return 0;
}

static CUresult load_text(void **m, const void *image, unsigned n, int *o, void **v)
{
    const char *text = image;
    if (strstr(text, "FAKE_JIT_FAIL")) {
        for (unsigned i = 0; i < n; i++)
            if (o[i] == 5)
                strcpy((char *)v[i], "fake ptxas: rejected");
        return 218;
    }
    fmod *f = keep(malloc(sizeof *f));
    f->text = keep(strdup(text));
    pthread_mutex_lock(&fake_lock);
    free(last_module);
    last_module = strdup(text);
    pthread_mutex_unlock(&fake_lock);
    *m = f;
    return 0;
}
API CUresult cuModuleLoadDataEx(void **m, const void *image, unsigned n, int *o, void **v)
{
    return load_text(m, image, n, o, v);
}
API CUresult cuModuleLoadData(void **m, const void *image)
{
    fmod *f = keep(malloc(sizeof *f));
    f->text = keep(strdup(image));
    pthread_mutex_lock(&fake_lock);
    free(last_module);
    last_module = strdup(image);
    pthread_mutex_unlock(&fake_lock);
    *m = f;
    return strstr(image, "FAKE_JIT_FAIL") ? 218 : 0;
}
/* Libraries: a module under another name; the runtime forces the JIT with
 * cuLibraryGetModule. */
API CUresult cuLibraryLoadData(void **lib, const void *code, int *jo, void **jv, unsigned nj, int *lo, void **lv,
                               unsigned nl)
{
    (void)lo, (void)lv, (void)nl;
    return load_text(lib, code, nj, jo, jv);
}
API CUresult cuLibraryGetModule(void **m, void *lib)
{
    *m = lib;
    return 0;
}
API CUresult cuModuleGetFunction(void **f, void *m, const char *name)
{
    ffunc *fn = keep(calloc(1, sizeof *fn));
    fn->m = m;
    snprintf(fn->name, sizeof fn->name, "%s", name);
    *f = fn;
    return 0;
}
API CUresult cuModuleGetGlobal_v2(CUdeviceptr *p, size_t *n, void *m, const char *name)
{
    (void)p, (void)n, (void)m, (void)name;
    return 500;
}

static void shadow_op(void **params)
{
    uint64_t root = *(uint64_t *)params[0], lo = *(uint64_t *)params[1], last = *(uint64_t *)params[2];
    mt_vmap_op op = (mt_vmap_op) * (uint32_t *)params[3];
    for (uint64_t g = lo & ~31ull;; g += 32) {
        uint64_t a = g < lo ? lo : g, b = g + 31 > last ? last : g + 31;
        uint32_t mask = (0xffffffffu >> (31 - (unsigned)(b - g))) & (0xffffffffu << (unsigned)(a - g));
        uint64_t *w = (uint64_t *)mt_vmap_shadow_word(root, g);
        uint64_t nw = mt_vmap_apply_word(*w, mask, op);
        if (nw != *w)
            *w = nw;
        if (g + 31 >= last)
            break;
    }
}

/* An instrumented kernel that "fails" one check. */
static void failing_kernel(const ffunc *f, void **params)
{
    const char *t = f->m->text, *rec = strstr(t, "atom.global.add.u32 %_mt_x, [%_mt_t], 1;");
    const char *site = strstr(t, "// memtrack check ");
    if (!rec || !site)
        return; /* not instrumented: nothing to play */
    const char *mov = NULL;
    for (const char *q = t; (q = strstr(q, "mov.u64 %_mt_t, 0x")) && q < rec; q++)
        mov = q;
    if (!mov)
        return;
    uint64_t errbuf = strtoull(mov + strlen("mov.u64 %_mt_t, "), NULL, 16);
    uint32_t id = (uint32_t)strtoul(site + strlen("// memtrack check "), NULL, 10);
    uint32_t *count = (uint32_t *)(uintptr_t)errbuf;
    mt_check_record *r = (mt_check_record *)(uintptr_t)(errbuf + 64 + (uint64_t)*count * sizeof *r);
    memset(r, 0, sizeof *r);
    r->addr = *(uint64_t *)params[0] + 4096;
    r->site = id;
    r->kind = MT_CHECK_NOACCESS;
    r->thread[0] = 7;
    ++*count;
}

static CUresult launch(void *fn, void **params)
{
    ffunc *f = fn;
    if (strcmp(f->name, "_mt_shadow_op") == 0)
        shadow_op(params);
    else if (strcmp(f->name, "_mt_local_probe") == 0)
        **(uint64_t **)params[0] = 0xfffdc0;
    else
        failing_kernel(f, params);
    return 0;
}

API CUresult cuLaunchKernel(void *f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz,
                            unsigned sh, void *s, void **params, void **extra)
{
    (void)gx, (void)gy, (void)gz, (void)bx, (void)by, (void)bz, (void)sh, (void)s, (void)extra;
    return launch(f, params);
}
API CUresult cuLaunchKernel_ptsz(void *f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by,
                                 unsigned bz, unsigned sh, void *s, void **params, void **extra)
{
    (void)gx, (void)gy, (void)gz, (void)bx, (void)by, (void)bz, (void)sh, (void)s, (void)extra;
    return launch(f, params);
}

/* As the real one: the symbol for a base name, versioned by ABI; looked up
 * in a table, not with dlsym (which the interposer under test replaces). */
static const struct { const char *name; void *fn; } syms[] = {
#define S(f) {#f, (void *)f}
    S(cuInit), S(cuDeviceGet), S(cuDeviceGetAttribute), S(cuDevicePrimaryCtxRetain), S(cuCtxGetCurrent),
    S(cuCtxPushCurrent_v2), S(cuCtxPopCurrent_v2), S(cuCtxGetDevice), S(cuCtxSynchronize), S(cuStreamCreate),
    S(cuStreamSynchronize), S(cuStreamSynchronize_ptsz), S(cuEventSynchronize), S(cuMemAlloc_v2),
    S(cuMemFree_v2), S(cuMemGetAddressRange_v2), S(cuPointerGetAttribute), S(cuMemsetD8Async), S(cuMemsetD8_v2),
    S(cuMemcpyHtoDAsync_v2), S(cuMemcpyHtoD_v2), S(cuMemcpyDtoHAsync_v2), S(cuMemcpyDtoH_v2),
    S(cuModuleLoadDataEx), S(cuModuleLoadData), S(cuModuleGetFunction), S(cuModuleGetGlobal_v2),
    S(cuLaunchKernel), S(cuLaunchKernel_ptsz), S(cuGetErrorString), S(cuLibraryLoadData), S(cuLibraryGetModule),
#undef S
    {NULL, NULL},
};

static void *lookup(const char *name)
{
    for (int i = 0; syms[i].name; i++)
        if (strcmp(syms[i].name, name) == 0)
            return syms[i].fn;
    return NULL;
}

API CUresult cuGetProcAddress_v2(const char *sym, void **pfn, int version, uint64_t flags, int *status)
{
    (void)version;
    static const char *const v2[] = {"cuMemAlloc", "cuMemFree", "cuMemcpyHtoD", "cuMemcpyDtoH",
                                     "cuMemGetAddressRange", "cuCtxPushCurrent", "cuCtxPopCurrent", NULL};
    char name[128], pt[160];
    snprintf(name, sizeof name, "%s", sym);
    for (int i = 0; v2[i]; i++)
        if (strcmp(sym, v2[i]) == 0)
            snprintf(name, sizeof name, "%s_v2", sym);
    snprintf(pt, sizeof pt, "%s_ptsz", name);
    void *p = (flags & 2) ? lookup(pt) : NULL;
    if (!p)
        p = strcmp(sym, "cuGetProcAddress") == 0 ? (void *)cuGetProcAddress_v2 : lookup(name);
    *pfn = p;
    if (status)
        *status = p ? 0 : 1;
    return p ? 0 : 500;
}
