/* Allocation, copies and memsets: keep the validity map current.
 *
 * Device allocations get red zones: the driver allocates redzone + size
 * (rounded up to 256) + redzone, the application gets the middle, and only
 * the middle is addressable, so an overflow into whatever follows is caught
 * even where it would land in another allocation. Host-visible memory (pinned,
 * registered, managed) is registered as initialised: the host writes it
 * without telling anyone. Copies and memsets mark their destination
 * initialised, in the order of the stream they ran on (a device-to-device
 * copy marks it initialised rather than copying the source's validity). */
#include <inttypes.h>
#include <string.h>

#include "hooks.h"
#include "rt.h"

#define NEED(id, slot)                                      \
    do {                                                    \
        _mt_hooks_resolve();                                \
        if (!_mt_hooks[MT_H_##id].real[slot])               \
            return CUDA_ERROR_NOT_FOUND;                    \
    } while (0)

static void warn(const char *what, int rc)
{
    _mt_rt_logf("memtrack check: %s failed (%d): checking may be incomplete\n", what, rc);
}

/* Registers an allocation: table entry and map (lock held). */
static void track(uint64_t user, uint64_t size, uint64_t raw, uint64_t total, int api, mt_vmap_state st,
                  CUstream s, int ordered)
{
    rt *r = &_mt_rt;
    rt_alloc a = {user, size, raw, total, ++r->serial, api};
    if (_mt_rt_alloc_add(&a))
        warn("allocation table", -12);
    if (size) {
        int rc = _mt_devcheck_set(&r->dc, user, size, st, s, ordered);
        if (rc)
            warn("registering an allocation", rc);
    }
}

/* Unregisters (lock held). Returns the raw address to free, or 0 if unknown. */
static uint64_t untrack(uint64_t user, CUstream s, int ordered)
{
    rt *r = &_mt_rt;
    rt_alloc *a = _mt_rt_alloc_find(user);
    if (!a)
        return 0;
    uint64_t raw = a->raw;
    if (a->size) {
        int rc = _mt_devcheck_set(&r->dc, a->user, a->size, MT_VMAP_NOACCESS, s, ordered);
        if (rc)
            warn("unregistering an allocation", rc);
    }
    _mt_rt_alloc_remove(a);
    return raw;
}

static uint64_t padded(uint64_t n)
{
    return _mt_rt.redzone + ((n + 255) & ~255ull) + _mt_rt.redzone;
}

CUresult _mt_impl_MemAlloc(int slot, CUdeviceptr *dptr, size_t n)
{
    NEED(MemAlloc, slot);
    if (!dptr || !n || !_mt_rt_ready())
        return MT_REAL(MemAlloc, slot)(dptr, n);
    CUdeviceptr raw;
    CUresult r = MT_REAL(MemAlloc, slot)(&raw, padded(n));
    if (r)
        return r;
    pthread_mutex_lock(&_mt_rt.lock);
    *dptr = raw + _mt_rt.redzone;
    track(*dptr, n, raw, padded(n), API_MEMALLOC, MT_VMAP_UNDEFINED, NULL, 0);
    pthread_mutex_unlock(&_mt_rt.lock);
    return CUDA_SUCCESS;
}

CUresult _mt_impl_MemAllocPitch(int slot, CUdeviceptr *dptr, size_t *pitch, size_t w, size_t h, unsigned elem)
{
    NEED(MemAllocPitch, slot);
    CUresult r = MT_REAL(MemAllocPitch, slot)(dptr, pitch, w, h, elem);
    if (r || !_mt_rt_ready())
        return r;
    pthread_mutex_lock(&_mt_rt.lock);
    track(*dptr, (uint64_t)*pitch * h, *dptr, (uint64_t)*pitch * h, API_PITCH, MT_VMAP_UNDEFINED, NULL, 0);
    pthread_mutex_unlock(&_mt_rt.lock);
    return r;
}

CUresult _mt_impl_MemFree(int slot, CUdeviceptr p)
{
    NEED(MemFree, slot);
    if (!p || !_mt_rt_ready())
        return MT_REAL(MemFree, slot)(p);
    /* cuMemFree waits for the work that may still use the memory; so must
     * the unregistration, or a kernel still running would see it freed. */
    _mt_rt.dc.cu->CtxSynchronize();
    pthread_mutex_lock(&_mt_rt.lock);
    uint64_t raw = untrack(p, NULL, 0);
    pthread_mutex_unlock(&_mt_rt.lock);
    return MT_REAL(MemFree, slot)(raw ? raw : p);
}

static CUresult alloc_async(int slot, CUdeviceptr *dptr, size_t n, CUstream s, CUresult r, CUdeviceptr raw)
{
    if (r)
        return r;
    pthread_mutex_lock(&_mt_rt.lock);
    *dptr = raw + _mt_rt.redzone;
    track(*dptr, n, raw, padded(n), API_ASYNC, MT_VMAP_UNDEFINED, _mt_rt_stream(slot, s), 1);
    pthread_mutex_unlock(&_mt_rt.lock);
    return CUDA_SUCCESS;
}

CUresult _mt_impl_MemAllocAsync(int slot, CUdeviceptr *dptr, size_t n, CUstream s)
{
    NEED(MemAllocAsync, slot);
    if (!dptr || !n || !_mt_rt_ready())
        return MT_REAL(MemAllocAsync, slot)(dptr, n, s);
    CUdeviceptr raw;
    CUresult r = MT_REAL(MemAllocAsync, slot)(&raw, padded(n), s);
    return alloc_async(slot, dptr, n, s, r, raw);
}

CUresult _mt_impl_MemAllocFromPoolAsync(int slot, CUdeviceptr *dptr, size_t n, CUmemoryPool pool, CUstream s)
{
    NEED(MemAllocFromPoolAsync, slot);
    if (!dptr || !n || !_mt_rt_ready())
        return MT_REAL(MemAllocFromPoolAsync, slot)(dptr, n, pool, s);
    CUdeviceptr raw;
    CUresult r = MT_REAL(MemAllocFromPoolAsync, slot)(&raw, padded(n), pool, s);
    return alloc_async(slot, dptr, n, s, r, raw);
}

CUresult _mt_impl_MemFreeAsync(int slot, CUdeviceptr p, CUstream s)
{
    NEED(MemFreeAsync, slot);
    if (!p || !_mt_rt_ready())
        return MT_REAL(MemFreeAsync, slot)(p, s);
    pthread_mutex_lock(&_mt_rt.lock);
    uint64_t raw = untrack(p, _mt_rt_stream(slot, s), 1); /* in the stream's order, like the free */
    pthread_mutex_unlock(&_mt_rt.lock);
    return MT_REAL(MemFreeAsync, slot)(raw ? raw : p, s);
}

CUresult _mt_impl_MemAllocManaged(int slot, CUdeviceptr *dptr, size_t n, unsigned flags)
{
    NEED(MemAllocManaged, slot);
    if (!dptr || !n || !_mt_rt_ready())
        return MT_REAL(MemAllocManaged, slot)(dptr, n, flags);
    CUdeviceptr raw;
    CUresult r = MT_REAL(MemAllocManaged, slot)(&raw, padded(n), flags);
    if (r)
        return r;
    pthread_mutex_lock(&_mt_rt.lock);
    *dptr = raw + _mt_rt.redzone;
    track(*dptr, n, raw, padded(n), API_MANAGED, MT_VMAP_DEFINED, NULL, 0);
    pthread_mutex_unlock(&_mt_rt.lock);
    return CUDA_SUCCESS;
}

static CUresult host_alloc(CUresult r, void **pp, size_t n, int api)
{
    if (r || !pp || !*pp || !n || !_mt_rt_ready())
        return r;
    pthread_mutex_lock(&_mt_rt.lock);
    uint64_t p = (uint64_t)(uintptr_t)*pp;
    track(p, n, p, n, api, MT_VMAP_DEFINED, NULL, 0);
    pthread_mutex_unlock(&_mt_rt.lock);
    return r;
}

CUresult _mt_impl_MemHostAlloc(int slot, void **pp, size_t n, unsigned flags)
{
    NEED(MemHostAlloc, slot);
    return host_alloc(MT_REAL(MemHostAlloc, slot)(pp, n, flags), pp, n, API_HOST);
}

CUresult _mt_impl_MemAllocHost(int slot, void **pp, size_t n)
{
    NEED(MemAllocHost, slot);
    return host_alloc(MT_REAL(MemAllocHost, slot)(pp, n), pp, n, API_HOST);
}

CUresult _mt_impl_MemHostRegister(int slot, void *p, size_t n, unsigned flags)
{
    NEED(MemHostRegister, slot);
    void *pp = p;
    return host_alloc(MT_REAL(MemHostRegister, slot)(p, n, flags), &pp, n, API_HOSTREG);
}

static void host_free(void *p)
{
    if (!p || !_mt_rt_ready())
        return;
    _mt_rt.dc.cu->CtxSynchronize();
    pthread_mutex_lock(&_mt_rt.lock);
    untrack((uint64_t)(uintptr_t)p, NULL, 0);
    pthread_mutex_unlock(&_mt_rt.lock);
}

CUresult _mt_impl_MemFreeHost(int slot, void *p)
{
    NEED(MemFreeHost, slot);
    host_free(p);
    return MT_REAL(MemFreeHost, slot)(p);
}

CUresult _mt_impl_MemHostUnregister(int slot, void *p)
{
    NEED(MemHostUnregister, slot);
    host_free(p);
    return MT_REAL(MemHostUnregister, slot)(p);
}

CUresult _mt_impl_MemGetAddressRange(int slot, CUdeviceptr *base, size_t *size, CUdeviceptr p)
{
    NEED(MemGetAddressRange, slot);
    CUresult r = MT_REAL(MemGetAddressRange, slot)(base, size, p);
    if (r || !_mt_rt_on())
        return r;
    /* The driver knows the padded allocation; the application its own. */
    pthread_mutex_lock(&_mt_rt.lock);
    for (size_t i = 0; i < _mt_rt.tab_cap; i++) {
        const rt_alloc *a = &_mt_rt.tab[i];
        if (a->api && a->user != a->raw && p >= a->raw && p < a->raw + a->total) {
            if (base)
                *base = a->user;
            if (size)
                *size = a->size;
            break;
        }
    }
    pthread_mutex_unlock(&_mt_rt.lock);
    return r;
}

/* ---- copies and memsets ---- */

static void valid(uint64_t dst, uint64_t n, CUstream s)
{
    if (!n || !_mt_rt_on())
        return;
    pthread_mutex_lock(&_mt_rt.lock);
    int rc = _mt_devcheck_mark_valid(&_mt_rt.dc, dst, n, s);
    pthread_mutex_unlock(&_mt_rt.lock);
    if (rc)
        warn("marking copied memory initialised", rc);
}

/* Does dst name device memory (where validity matters)? */
static int device_dst(uint64_t dst)
{
    if (!_mt_rt_on())
        return 0;
    unsigned type = 0;
    if (_mt_rt.dc.cu->PointerGetAttribute(&type, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, dst))
        return 0;
    return type == CU_MEMORYTYPE_DEVICE || type == CU_MEMORYTYPE_UNIFIED;
}

CUresult _mt_impl_MemcpyHtoD(int slot, CUdeviceptr dst, const void *src, size_t n)
{
    NEED(MemcpyHtoD, slot);
    CUresult r = MT_REAL(MemcpyHtoD, slot)(dst, src, n);
    if (!r)
        valid(dst, n, _mt_rt_stream(slot, NULL));
    return r;
}

CUresult _mt_impl_MemcpyHtoDAsync(int slot, CUdeviceptr dst, const void *src, size_t n, CUstream s)
{
    NEED(MemcpyHtoDAsync, slot);
    CUresult r = MT_REAL(MemcpyHtoDAsync, slot)(dst, src, n, s);
    if (!r)
        valid(dst, n, _mt_rt_stream(slot, s));
    return r;
}

CUresult _mt_impl_MemcpyDtoD(int slot, CUdeviceptr dst, CUdeviceptr src, size_t n)
{
    NEED(MemcpyDtoD, slot);
    CUresult r = MT_REAL(MemcpyDtoD, slot)(dst, src, n);
    if (!r)
        valid(dst, n, _mt_rt_stream(slot, NULL));
    return r;
}

CUresult _mt_impl_MemcpyDtoDAsync(int slot, CUdeviceptr dst, CUdeviceptr src, size_t n, CUstream s)
{
    NEED(MemcpyDtoDAsync, slot);
    CUresult r = MT_REAL(MemcpyDtoDAsync, slot)(dst, src, n, s);
    if (!r)
        valid(dst, n, _mt_rt_stream(slot, s));
    return r;
}

CUresult _mt_impl_MemcpyDtoH(int slot, void *dst, CUdeviceptr src, size_t n)
{
    NEED(MemcpyDtoH, slot);
    /* A synchronous read-back is where a native run reports a fault. */
    return _mt_rt_after_sync(MT_REAL(MemcpyDtoH, slot)(dst, src, n), 1);
}

CUresult _mt_impl_Memcpy(int slot, CUdeviceptr dst, CUdeviceptr src, size_t n)
{
    NEED(Memcpy, slot);
    CUresult r = MT_REAL(Memcpy, slot)(dst, src, n);
    if (r)
        return r;
    if (device_dst(dst)) {
        valid(dst, n, _mt_rt_stream(slot, NULL));
        return r;
    }
    return _mt_rt_after_sync(r, 1);
}

CUresult _mt_impl_MemcpyAsync(int slot, CUdeviceptr dst, CUdeviceptr src, size_t n, CUstream s)
{
    NEED(MemcpyAsync, slot);
    CUresult r = MT_REAL(MemcpyAsync, slot)(dst, src, n, s);
    if (!r && device_dst(dst))
        valid(dst, n, _mt_rt_stream(slot, s));
    return r;
}

/* The destination span of a 2D copy, padding between rows included. */
static void valid_2d(const CUDA_MEMCPY2D *p, CUstream s)
{
    if (!p || !p->Height || !p->WidthInBytes)
        return;
    if (p->dstMemoryType != CU_MEMORYTYPE_DEVICE && p->dstMemoryType != CU_MEMORYTYPE_UNIFIED)
        return;
    uint64_t start = p->dstDevice + p->dstY * p->dstPitch + p->dstXInBytes;
    valid(start, (uint64_t)(p->Height - 1) * p->dstPitch + p->WidthInBytes, s);
}

CUresult _mt_impl_Memcpy2D(int slot, const CUDA_MEMCPY2D *p)
{
    NEED(Memcpy2D, slot);
    CUresult r = MT_REAL(Memcpy2D, slot)(p);
    if (!r)
        valid_2d(p, _mt_rt_stream(slot, NULL));
    return r;
}

CUresult _mt_impl_Memcpy2DUnaligned(int slot, const CUDA_MEMCPY2D *p)
{
    NEED(Memcpy2DUnaligned, slot);
    CUresult r = MT_REAL(Memcpy2DUnaligned, slot)(p);
    if (!r)
        valid_2d(p, _mt_rt_stream(slot, NULL));
    return r;
}

CUresult _mt_impl_Memcpy2DAsync(int slot, const CUDA_MEMCPY2D *p, CUstream s)
{
    NEED(Memcpy2DAsync, slot);
    CUresult r = MT_REAL(Memcpy2DAsync, slot)(p, s);
    if (!r)
        valid_2d(p, _mt_rt_stream(slot, s));
    return r;
}

#define MEMSET(id, type, unit)                                                        \
    CUresult _mt_impl_##id(int slot, CUdeviceptr d, type v, size_t n)                 \
    {                                                                                 \
        NEED(id, slot);                                                               \
        CUresult r = MT_REAL(id, slot)(d, v, n);                                      \
        if (!r)                                                                       \
            valid(d, (uint64_t)n * unit, _mt_rt_stream(slot, NULL));                  \
        return r;                                                                     \
    }                                                                                 \
    CUresult _mt_impl_##id##Async(int slot, CUdeviceptr d, type v, size_t n, CUstream s) \
    {                                                                                 \
        NEED(id##Async, slot);                                                        \
        CUresult r = MT_REAL(id##Async, slot)(d, v, n, s);                            \
        if (!r)                                                                       \
            valid(d, (uint64_t)n * unit, _mt_rt_stream(slot, s));                     \
        return r;                                                                     \
    }
MEMSET(MemsetD8, unsigned char, 1)
MEMSET(MemsetD16, unsigned short, 2)
MEMSET(MemsetD32, unsigned, 4)

CUresult _mt_impl_MemsetD2D8(int slot, CUdeviceptr d, size_t pitch, unsigned char v, size_t w, size_t h)
{
    NEED(MemsetD2D8, slot);
    CUresult r = MT_REAL(MemsetD2D8, slot)(d, pitch, v, w, h);
    if (!r && h && w)
        valid(d, (uint64_t)(h - 1) * pitch + w, _mt_rt_stream(slot, NULL));
    return r;
}

CUresult _mt_impl_MemsetD2D8Async(int slot, CUdeviceptr d, size_t pitch, unsigned char v, size_t w, size_t h,
                                  CUstream s)
{
    NEED(MemsetD2D8Async, slot);
    CUresult r = MT_REAL(MemsetD2D8Async, slot)(d, pitch, v, w, h, s);
    if (!r && h && w)
        valid(d, (uint64_t)(h - 1) * pitch + w, _mt_rt_stream(slot, s));
    return r;
}
