/* Launches and synchronisation. A launch runs as the application asked (its
 * kernels were instrumented when their module loaded); a synchronisation is
 * where the errors of finished kernels are read back, reported, and turned
 * into the error a faulting native run would have returned there. */
#include "hooks.h"
#include "rt.h"

#define NEED(id, slot)                                      \
    do {                                                    \
        _mt_hooks_resolve();                                \
        if (!_mt_hooks[MT_H_##id].real[slot])               \
            return CUDA_ERROR_NOT_FOUND;                    \
    } while (0)

/* After a launch: count it; with MEMTRACK_CHECK_SYNC=1 wait for it and
 * report at once (errors then name the launch that caused them). The
 * launch's own return value stays what the driver said: a native fault is
 * never reported by the launch either. */
static CUresult launched(CUresult r)
{
    if (r || !_mt_rt_on())
        return r;
    __atomic_fetch_add(&_mt_rt.launches, 1, __ATOMIC_RELAXED);
    if (_mt_rt.sync_launch)
        (void)_mt_rt_after_sync(_mt_rt.dc.cu->CtxSynchronize(), 0);
    return r;
}

CUresult _mt_impl_LaunchKernel(int slot, CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx,
                               unsigned by, unsigned bz, unsigned shmem, CUstream s, void **params, void **extra)
{
    NEED(LaunchKernel, slot);
    return launched(MT_REAL(LaunchKernel, slot)(f, gx, gy, gz, bx, by, bz, shmem, s, params, extra));
}

CUresult _mt_impl_LaunchKernelEx(int slot, const CUlaunchConfig *c, CUfunction f, void **params, void **extra)
{
    NEED(LaunchKernelEx, slot);
    return launched(MT_REAL(LaunchKernelEx, slot)(c, f, params, extra));
}

CUresult _mt_impl_LaunchCooperativeKernel(int slot, CUfunction f, unsigned gx, unsigned gy, unsigned gz,
                                          unsigned bx, unsigned by, unsigned bz, unsigned shmem, CUstream s,
                                          void **params)
{
    NEED(LaunchCooperativeKernel, slot);
    return launched(MT_REAL(LaunchCooperativeKernel, slot)(f, gx, gy, gz, bx, by, bz, shmem, s, params));
}

CUresult _mt_impl_CtxSynchronize(void)
{
    NEED(CtxSynchronize, 0);
    return _mt_rt_after_sync(((CUresult(*)(void))_mt_hooks[MT_H_CtxSynchronize].real[0])(), 0);
}

CUresult _mt_impl_CtxSynchronizeV2(int slot, CUcontext c)
{
    NEED(CtxSynchronizeV2, slot);
    return _mt_rt_after_sync(MT_REAL(CtxSynchronizeV2, slot)(c), 0);
}

CUresult _mt_impl_StreamSynchronize(int slot, CUstream s)
{
    NEED(StreamSynchronize, slot);
    return _mt_rt_after_sync(MT_REAL(StreamSynchronize, slot)(s), 1);
}

CUresult _mt_impl_EventSynchronize(int slot, CUevent e)
{
    NEED(EventSynchronize, slot);
    return _mt_rt_after_sync(MT_REAL(EventSynchronize, slot)(e), 1);
}
