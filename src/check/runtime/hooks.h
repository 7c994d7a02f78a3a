/* The driver entry points libmemtrack_check.so interposes.
 *
 * Each is reachable three ways, and all three lead to the same hook: as an
 * exported symbol (programs linked against libcuda), through dlsym on the
 * driver (the CUDA runtime finds cuGetProcAddress that way) and through
 * cuGetProcAddress (the CUDA runtime finds everything else that way). An
 * entry point can exist twice, legacy and per-thread-default-stream
 * (_ptds/_ptsz): slot 0 and slot 1, each with its own real function; a hook
 * is only handed out for a pointer that is exactly one of the two, so the
 * ABI always matches.
 *
 * X1(id, base name, exported symbol, (params), (args)): one slot.
 * X2(id, base name, symbol, per-thread symbol, (params), (args)): two. */
#ifndef MT_CHECK_RT_HOOKS_H
#define MT_CHECK_RT_HOOKS_H

#include "cuda_types.h"

#define MT_HOOK_LIST(X1, X2)                                                                              \
    X1(MemAlloc, "cuMemAlloc", cuMemAlloc_v2, (CUdeviceptr * dptr, size_t n), (dptr, n))                  \
    X1(MemAllocPitch, "cuMemAllocPitch", cuMemAllocPitch_v2,                                              \
       (CUdeviceptr * dptr, size_t *pitch, size_t w, size_t h, unsigned elem), (dptr, pitch, w, h, elem)) \
    X1(MemFree, "cuMemFree", cuMemFree_v2, (CUdeviceptr p), (p))                                          \
    X2(MemAllocAsync, "cuMemAllocAsync", cuMemAllocAsync, cuMemAllocAsync_ptsz,                            \
       (CUdeviceptr * dptr, size_t n, CUstream s), (dptr, n, s))                                          \
    X2(MemAllocFromPoolAsync, "cuMemAllocFromPoolAsync", cuMemAllocFromPoolAsync,                          \
       cuMemAllocFromPoolAsync_ptsz, (CUdeviceptr * dptr, size_t n, CUmemoryPool pool, CUstream s),       \
       (dptr, n, pool, s))                                                                                \
    X2(MemFreeAsync, "cuMemFreeAsync", cuMemFreeAsync, cuMemFreeAsync_ptsz, (CUdeviceptr p, CUstream s),  \
       (p, s))                                                                                            \
    X1(MemAllocManaged, "cuMemAllocManaged", cuMemAllocManaged,                                           \
       (CUdeviceptr * dptr, size_t n, unsigned flags), (dptr, n, flags))                                  \
    X1(MemHostAlloc, "cuMemHostAlloc", cuMemHostAlloc, (void **pp, size_t n, unsigned flags), (pp, n, flags)) \
    X1(MemAllocHost, "cuMemAllocHost", cuMemAllocHost_v2, (void **pp, size_t n), (pp, n))                \
    X1(MemFreeHost, "cuMemFreeHost", cuMemFreeHost, (void *p), (p))                                       \
    X1(MemHostRegister, "cuMemHostRegister", cuMemHostRegister_v2, (void *p, size_t n, unsigned flags),  \
       (p, n, flags))                                                                                     \
    X1(MemHostUnregister, "cuMemHostUnregister", cuMemHostUnregister, (void *p), (p))                     \
    X1(MemGetAddressRange, "cuMemGetAddressRange", cuMemGetAddressRange_v2,                               \
       (CUdeviceptr * base, size_t *size, CUdeviceptr p), (base, size, p))                                \
    X2(Memcpy, "cuMemcpy", cuMemcpy, cuMemcpy_ptds, (CUdeviceptr dst, CUdeviceptr src, size_t n),         \
       (dst, src, n))                                                                                     \
    X2(MemcpyAsync, "cuMemcpyAsync", cuMemcpyAsync, cuMemcpyAsync_ptsz,                                    \
       (CUdeviceptr dst, CUdeviceptr src, size_t n, CUstream s), (dst, src, n, s))                        \
    X2(MemcpyHtoD, "cuMemcpyHtoD", cuMemcpyHtoD_v2, cuMemcpyHtoD_v2_ptds,                                  \
       (CUdeviceptr dst, const void *src, size_t n), (dst, src, n))                                       \
    X2(MemcpyHtoDAsync, "cuMemcpyHtoDAsync", cuMemcpyHtoDAsync_v2, cuMemcpyHtoDAsync_v2_ptsz,              \
       (CUdeviceptr dst, const void *src, size_t n, CUstream s), (dst, src, n, s))                        \
    X2(MemcpyDtoD, "cuMemcpyDtoD", cuMemcpyDtoD_v2, cuMemcpyDtoD_v2_ptds,                                  \
       (CUdeviceptr dst, CUdeviceptr src, size_t n), (dst, src, n))                                       \
    X2(MemcpyDtoDAsync, "cuMemcpyDtoDAsync", cuMemcpyDtoDAsync_v2, cuMemcpyDtoDAsync_v2_ptsz,              \
       (CUdeviceptr dst, CUdeviceptr src, size_t n, CUstream s), (dst, src, n, s))                        \
    X2(MemcpyDtoH, "cuMemcpyDtoH", cuMemcpyDtoH_v2, cuMemcpyDtoH_v2_ptds,                                  \
       (void *dst, CUdeviceptr src, size_t n), (dst, src, n))                                             \
    X2(Memcpy2D, "cuMemcpy2D", cuMemcpy2D_v2, cuMemcpy2D_v2_ptds, (const CUDA_MEMCPY2D *p), (p))          \
    X2(Memcpy2DUnaligned, "cuMemcpy2DUnaligned", cuMemcpy2DUnaligned_v2, cuMemcpy2DUnaligned_v2_ptds,      \
       (const CUDA_MEMCPY2D *p), (p))                                                                     \
    X2(Memcpy2DAsync, "cuMemcpy2DAsync", cuMemcpy2DAsync_v2, cuMemcpy2DAsync_v2_ptsz,                      \
       (const CUDA_MEMCPY2D *p, CUstream s), (p, s))                                                      \
    X2(MemsetD8, "cuMemsetD8", cuMemsetD8_v2, cuMemsetD8_v2_ptds, (CUdeviceptr d, unsigned char v, size_t n), \
       (d, v, n))                                                                                         \
    X2(MemsetD16, "cuMemsetD16", cuMemsetD16_v2, cuMemsetD16_v2_ptds,                                      \
       (CUdeviceptr d, unsigned short v, size_t n), (d, v, n))                                            \
    X2(MemsetD32, "cuMemsetD32", cuMemsetD32_v2, cuMemsetD32_v2_ptds, (CUdeviceptr d, unsigned v, size_t n), \
       (d, v, n))                                                                                         \
    X2(MemsetD8Async, "cuMemsetD8Async", cuMemsetD8Async, cuMemsetD8Async_ptsz,                            \
       (CUdeviceptr d, unsigned char v, size_t n, CUstream s), (d, v, n, s))                              \
    X2(MemsetD16Async, "cuMemsetD16Async", cuMemsetD16Async, cuMemsetD16Async_ptsz,                        \
       (CUdeviceptr d, unsigned short v, size_t n, CUstream s), (d, v, n, s))                             \
    X2(MemsetD32Async, "cuMemsetD32Async", cuMemsetD32Async, cuMemsetD32Async_ptsz,                        \
       (CUdeviceptr d, unsigned v, size_t n, CUstream s), (d, v, n, s))                                   \
    X2(MemsetD2D8, "cuMemsetD2D8", cuMemsetD2D8_v2, cuMemsetD2D8_v2_ptds,                                  \
       (CUdeviceptr d, size_t pitch, unsigned char v, size_t w, size_t h), (d, pitch, v, w, h))           \
    X2(MemsetD2D8Async, "cuMemsetD2D8Async", cuMemsetD2D8Async, cuMemsetD2D8Async_ptsz,                    \
       (CUdeviceptr d, size_t pitch, unsigned char v, size_t w, size_t h, CUstream s), (d, pitch, v, w, h, s)) \
    X1(ModuleLoad, "cuModuleLoad", cuModuleLoad, (CUmodule * m, const char *fname), (m, fname))           \
    X1(ModuleLoadData, "cuModuleLoadData", cuModuleLoadData, (CUmodule * m, const void *image), (m, image)) \
    X1(ModuleLoadDataEx, "cuModuleLoadDataEx", cuModuleLoadDataEx,                                        \
       (CUmodule * m, const void *image, unsigned n, CUjit_option *o, void **v), (m, image, n, o, v))     \
    X1(ModuleLoadFatBinary, "cuModuleLoadFatBinary", cuModuleLoadFatBinary,                              \
       (CUmodule * m, const void *fatbin), (m, fatbin))                                                   \
    X1(LibraryLoadData, "cuLibraryLoadData", cuLibraryLoadData,                                           \
       (CUlibrary * l, const void *code, CUjit_option *jo, void **jv, unsigned nj, CUlibraryOption *lo,   \
        void **lv, unsigned nl),                                                                          \
       (l, code, jo, jv, nj, lo, lv, nl))                                                                 \
    X1(LibraryLoadFromFile, "cuLibraryLoadFromFile", cuLibraryLoadFromFile,                               \
       (CUlibrary * l, const char *fname, CUjit_option *jo, void **jv, unsigned nj, CUlibraryOption *lo,  \
        void **lv, unsigned nl),                                                                          \
       (l, fname, jo, jv, nj, lo, lv, nl))                                                                \
    X2(LaunchKernel, "cuLaunchKernel", cuLaunchKernel, cuLaunchKernel_ptsz,                                \
       (CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz,       \
        unsigned shmem, CUstream s, void **params, void **extra),                                         \
       (f, gx, gy, gz, bx, by, bz, shmem, s, params, extra))                                              \
    X2(LaunchKernelEx, "cuLaunchKernelEx", cuLaunchKernelEx, cuLaunchKernelEx_ptsz,                        \
       (const CUlaunchConfig *c, CUfunction f, void **params, void **extra), (c, f, params, extra))       \
    X2(LaunchCooperativeKernel, "cuLaunchCooperativeKernel", cuLaunchCooperativeKernel,                    \
       cuLaunchCooperativeKernel_ptsz,                                                                    \
       (CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz,       \
        unsigned shmem, CUstream s, void **params),                                                       \
       (f, gx, gy, gz, bx, by, bz, shmem, s, params))                                                     \
    X1(CtxSynchronizeV2, "cuCtxSynchronize", cuCtxSynchronize_v2, (CUcontext c), (c))                     \
    X2(StreamSynchronize, "cuStreamSynchronize", cuStreamSynchronize, cuStreamSynchronize_ptsz,           \
       (CUstream s), (s))                                                                                 \
    X1(EventSynchronize, "cuEventSynchronize", cuEventSynchronize, (CUevent e), (e))

#define MT_UNPACK(...) __VA_ARGS__

enum {
#define MT_E1(id, base, sym, params, args) MT_H_##id,
#define MT_E2(id, base, sym, psym, params, args) MT_H_##id,
    MT_HOOK_LIST(MT_E1, MT_E2)
#undef MT_E1
#undef MT_E2
    MT_H_CtxSynchronize, /* "cuCtxSynchronize(void)", written out in hooks.c */
    MT_H_COUNT
};

typedef struct mt_hook {
    const char *base;    /* the name cuGetProcAddress is asked for */
    const char *sym[2];  /* exported symbols: legacy, per-thread (or NULL) */
    void *hook[2];       /* our functions with those names */
    void *real[2];       /* the driver's */
} mt_hook;

extern mt_hook _mt_hooks[MT_H_COUNT];
extern uint64_t _mt_hook_calls[MT_H_COUNT][2]; /* calls per hook and slot */

/* Typed access to the driver's function of hook `id` in `slot`. */
#define MT_T1(id, base, sym, params, args) typedef CUresult(*mt_fn_##id) params;
#define MT_T2(id, base, sym, psym, params, args) typedef CUresult(*mt_fn_##id) params;
MT_HOOK_LIST(MT_T1, MT_T2)
#undef MT_T1
#undef MT_T2
#define MT_REAL(id, slot) ((mt_fn_##id)_mt_hooks[MT_H_##id].real[slot])

/* The implementations (hooks_*.c), one per hook, with the slot first. */
#define MT_P1(id, base, sym, params, args) CUresult _mt_impl_##id(int slot, MT_UNPACK params);
#define MT_P2(id, base, sym, psym, params, args) CUresult _mt_impl_##id(int slot, MT_UNPACK params);
MT_HOOK_LIST(MT_P1, MT_P2)
#undef MT_P1
#undef MT_P2
CUresult _mt_impl_CtxSynchronize(void);

/* Fills the real pointers (once). */
void _mt_hooks_resolve(void);

/* Our function for what the driver handed out as `got` under `name` (a base
 * name from cuGetProcAddress when base_name, an exported name from dlsym
 * otherwise), or NULL. */
void *_mt_hook_for(const char *name, void *got, int base_name);
extern _Thread_local int _mt_hooks_resolving; /* set while resolving */

#endif
