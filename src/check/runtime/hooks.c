/* Interposition plumbing (see hooks.h): the exported wrappers, the table,
 * dlsym and cuGetProcAddress. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <pthread.h>
#include <string.h>

#include "driver.h"
#include "hooks.h"

#define MT_EXPORT __attribute__((visibility("default")))

uint64_t _mt_hook_calls[MT_H_COUNT][2];

/* The wrappers carry the driver's own names; each counts its calls (for
 * MEMTRACK_CHECK_VERBOSE's summary: which entry points a program really uses). */
#define COUNT(id, slot) __atomic_fetch_add(&_mt_hook_calls[MT_H_##id][slot], 1, __ATOMIC_RELAXED)
#define MT_W1(id, base, sym, params, args)                                                 \
    MT_EXPORT CUresult sym params;                                                        \
    MT_EXPORT CUresult sym params { COUNT(id, 0); return _mt_impl_##id(0, MT_UNPACK args); }
#define MT_W2(id, base, sym, psym, params, args)                                           \
    MT_EXPORT CUresult sym params;                                                        \
    MT_EXPORT CUresult psym params;                                                       \
    MT_EXPORT CUresult sym params { COUNT(id, 0); return _mt_impl_##id(0, MT_UNPACK args); } \
    MT_EXPORT CUresult psym params { COUNT(id, 1); return _mt_impl_##id(1, MT_UNPACK args); }
MT_HOOK_LIST(MT_W1, MT_W2)
#undef MT_W1
#undef MT_W2

MT_EXPORT CUresult cuCtxSynchronize(void);
MT_EXPORT CUresult cuCtxSynchronize(void)
{
    COUNT(CtxSynchronize, 0);
    return _mt_impl_CtxSynchronize();
}

mt_hook _mt_hooks[MT_H_COUNT] = {
#define MT_R1(id, base, sym, params, args) [MT_H_##id] = {base, {#sym, NULL}, {(void *)sym, NULL}, {NULL, NULL}},
#define MT_R2(id, base, sym, psym, params, args) \
    [MT_H_##id] = {base, {#sym, #psym}, {(void *)sym, (void *)psym}, {NULL, NULL}},
    MT_HOOK_LIST(MT_R1, MT_R2)
#undef MT_R1
#undef MT_R2
    [MT_H_CtxSynchronize] = {"cuCtxSynchronize", {"cuCtxSynchronize", NULL}, {(void *)cuCtxSynchronize, NULL},
                             {NULL, NULL}},
};

typedef CUresult (*gpa1_fn)(const char *, void **, int, uint64_t);
typedef CUresult (*gpa2_fn)(const char *, void **, int, uint64_t, CUdriverProcAddressQueryResult *);
static gpa1_fn real_gpa1;
static gpa2_fn real_gpa2;

/* Resolution happens at most once; a thread that re-enters (the driver's own
 * initialisation calling dlsym) sees no hooks rather than deadlocking. */
static pthread_once_t resolve_once = PTHREAD_ONCE_INIT;
_Thread_local int _mt_hooks_resolving;
#define resolving _mt_hooks_resolving
static int resolved;

static void resolve(void)
{
    resolving = 1;
    if (_mt_cu()) {
        for (int i = 0; i < MT_H_COUNT; i++)
            for (int s = 0; s < 2; s++)
                if (_mt_hooks[i].sym[s])
                    _mt_hooks[i].real[s] = _mt_cu_sym(_mt_hooks[i].sym[s]);
        real_gpa1 = (gpa1_fn)_mt_cu_sym("cuGetProcAddress");
        real_gpa2 = (gpa2_fn)_mt_cu_sym("cuGetProcAddress_v2");
        resolved = 1;
    }
    resolving = 0;
}

void _mt_hooks_resolve(void)
{
    if (resolving)
        return;
    pthread_once(&resolve_once, resolve);
}

MT_EXPORT CUresult cuGetProcAddress(const char *symbol, void **pfn, int version, uint64_t flags);
MT_EXPORT CUresult cuGetProcAddress_v2(const char *symbol, void **pfn, int version, uint64_t flags,
                                       CUdriverProcAddressQueryResult *status);

void *_mt_hook_for(const char *name, void *got, int base_name)
{
    if (!resolved || !got)
        return NULL;
    if (got == (void *)real_gpa1 && real_gpa1 && strcmp(name, "cuGetProcAddress") == 0)
        return (void *)cuGetProcAddress;
    if (got == (void *)real_gpa2 && real_gpa2 &&
        (strcmp(name, "cuGetProcAddress") == 0 || strcmp(name, "cuGetProcAddress_v2") == 0))
        return (void *)cuGetProcAddress_v2;
    for (int i = 0; i < MT_H_COUNT; i++) {
        const mt_hook *h = &_mt_hooks[i];
        if (base_name ? strcmp(h->base, name) != 0
                      : !((h->sym[0] && strcmp(h->sym[0], name) == 0) || (h->sym[1] && strcmp(h->sym[1], name) == 0)))
            continue;
        for (int s = 0; s < 2; s++)
            if (h->real[s] && got == h->real[s])
                return h->hook[s];
    }
    return NULL;
}

MT_EXPORT CUresult cuGetProcAddress(const char *symbol, void **pfn, int version, uint64_t flags)
{
    _mt_hooks_resolve();
    if (!real_gpa1)
        return CUDA_ERROR_NOT_FOUND;
    CUresult r = real_gpa1(symbol, pfn, version, flags);
    if (r == CUDA_SUCCESS && pfn && symbol) {
        void *h = _mt_hook_for(symbol, *pfn, 1);
        if (h)
            *pfn = h;
    }
    return r;
}

MT_EXPORT CUresult cuGetProcAddress_v2(const char *symbol, void **pfn, int version, uint64_t flags,
                                       CUdriverProcAddressQueryResult *status)
{
    _mt_hooks_resolve();
    if (!real_gpa2)
        return CUDA_ERROR_NOT_FOUND;
    CUresult r = real_gpa2(symbol, pfn, version, flags, status);
    if (r == CUDA_SUCCESS && pfn && symbol) {
        void *h = _mt_hook_for(symbol, *pfn, 1);
        if (h)
            *pfn = h;
    }
    return r;
}

