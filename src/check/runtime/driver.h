/* The real driver: libcuda.so.1 loaded with dlopen, and the entry points the
 * runtime itself calls (never through its own hooks). */
#ifndef MT_CHECK_RT_DRIVER_H
#define MT_CHECK_RT_DRIVER_H

#include "cuda_types.h"

typedef struct mt_cu {
    void *lib;
    CUresult (*Init)(unsigned);
    CUresult (*CtxGetCurrent)(CUcontext *);
    CUresult (*CtxPushCurrent)(CUcontext);
    CUresult (*CtxPopCurrent)(CUcontext *);
    CUresult (*CtxGetDevice)(CUdevice *);
    CUresult (*CtxSynchronize)(void);
    CUresult (*DeviceGet)(CUdevice *, int);
    CUresult (*DeviceGetAttribute)(int *, int, CUdevice);
    CUresult (*DevicePrimaryCtxRetain)(CUcontext *, CUdevice);
    CUresult (*MemAlloc)(CUdeviceptr *, size_t);
    CUresult (*MemFree)(CUdeviceptr);
    CUresult (*MemsetD8Async)(CUdeviceptr, unsigned char, size_t, CUstream);
    CUresult (*MemcpyHtoDAsync)(CUdeviceptr, const void *, size_t, CUstream);
    CUresult (*MemcpyDtoHAsync)(void *, CUdeviceptr, size_t, CUstream);
    CUresult (*StreamCreate)(CUstream *, unsigned);
    CUresult (*StreamSynchronize)(CUstream);
    CUresult (*ModuleLoadData)(CUmodule *, const void *);
    CUresult (*ModuleLoadDataEx)(CUmodule *, const void *, unsigned, CUjit_option *, void **);
    CUresult (*ModuleGetFunction)(CUfunction *, CUmodule, const char *);
    CUresult (*ModuleGetGlobal)(CUdeviceptr *, size_t *, CUmodule, const char *);
    CUresult (*LibraryGetGlobal)(CUdeviceptr *, size_t *, CUlibrary, const char *); /* NULL before 12.0 */
    CUresult (*LibraryGetModule)(CUmodule *, CUlibrary);
    CUresult (*LibraryUnload)(CUlibrary);
    CUresult (*LaunchKernel)(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
                             CUstream, void **, void **);
    CUresult (*PointerGetAttribute)(void *, int, CUdeviceptr);
    CUresult (*GetErrorString)(CUresult, const char **);
} mt_cu;

/* Loads the driver once; returns the table, or NULL when libcuda.so.1 or an
 * entry point is missing (the runtime then passes everything through). Any
 * thread. */
const mt_cu *_mt_cu(void);

/* The symbol `name` of the driver itself (never a hook), or NULL. */
void *_mt_cu_sym(const char *name);

/* dlsym as glibc implements it (the runtime interposes dlsym). */
void *_mt_real_dlsym(void *handle, const char *name);

#endif
