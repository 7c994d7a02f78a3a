/* The few CUDA driver API types and entry points the CUDA backend uses,
 * declared here because building memtrack must not need the CUDA toolkit.
 * They mirror cuda.h (driver API, CUDA >= 11); the library is opened at run
 * time with dlopen("libcuda.so.1") and the functions found by their exported
 * names (the _v2 ones where cuda.h maps the plain name to _v2). */
#ifndef MT_COH_CUDA_API_H
#define MT_COH_CUDA_API_H

#include <stddef.h>

typedef int CUresult;   /* CUDA_SUCCESS = 0 */
typedef int CUdevice;
typedef unsigned long long CUdeviceptr;
typedef struct CUctx_st *CUcontext;
typedef struct CUstream_st *CUstream;
typedef struct CUevent_st *CUevent;
typedef struct CUmod_st *CUmodule;
typedef struct CUfunc_st *CUfunction;

enum {
    CUDA_SUCCESS = 0,
    CUDA_ERROR_NOT_READY = 600,
    CU_STREAM_NON_BLOCKING = 0x1,
    CU_EVENT_DISABLE_TIMING = 0x2,
    CU_MEMHOSTALLOC_PORTABLE = 0x1,
    CU_MEMHOSTALLOC_DEVICEMAP = 0x2,
    CU_MEMHOSTREGISTER_PORTABLE = 0x1,
    CU_MEMHOSTREGISTER_DEVICEMAP = 0x2,
    CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT = 16,
};

/* One table of entry points, filled by coh_cuda_api(). */
typedef struct coh_cuda_api {
    CUresult (*Init)(unsigned);
    CUresult (*DeviceGetCount)(int *);
    CUresult (*DeviceGet)(CUdevice *, int);
    CUresult (*DeviceGetName)(char *, int, CUdevice);
    CUresult (*DeviceGetAttribute)(int *, int, CUdevice);
    CUresult (*DeviceCanAccessPeer)(int *, CUdevice, CUdevice);
    CUresult (*DevicePrimaryCtxRetain)(CUcontext *, CUdevice);
    CUresult (*DevicePrimaryCtxRelease)(CUdevice);
    CUresult (*CtxSetCurrent)(CUcontext);
    CUresult (*CtxGetCurrent)(CUcontext *);
    CUresult (*CtxEnablePeerAccess)(CUcontext, unsigned);
    CUresult (*MemGetInfo)(size_t *, size_t *);
    CUresult (*MemAlloc)(CUdeviceptr *, size_t);
    CUresult (*MemFree)(CUdeviceptr);
    CUresult (*MemHostAlloc)(void **, size_t, unsigned);
    CUresult (*MemFreeHost)(void *);
    CUresult (*MemHostRegister)(void *, size_t, unsigned);
    CUresult (*MemHostUnregister)(void *);
    CUresult (*MemHostGetDevicePointer)(CUdeviceptr *, void *, unsigned);
    CUresult (*StreamCreate)(CUstream *, unsigned);
    CUresult (*StreamDestroy)(CUstream);
    CUresult (*StreamSynchronize)(CUstream);
    CUresult (*EventCreate)(CUevent *, unsigned);
    CUresult (*EventRecord)(CUevent, CUstream);
    CUresult (*EventSynchronize)(CUevent);
    CUresult (*EventDestroy)(CUevent);
    CUresult (*MemcpyHtoDAsync)(CUdeviceptr, const void *, size_t, CUstream);
    CUresult (*MemcpyDtoHAsync)(void *, CUdeviceptr, size_t, CUstream);
    CUresult (*MemcpyDtoDAsync)(CUdeviceptr, CUdeviceptr, size_t, CUstream);
    CUresult (*MemcpyPeerAsync)(CUdeviceptr, CUcontext, CUdeviceptr, CUcontext, size_t, CUstream);
    CUresult (*ModuleLoadData)(CUmodule *, const void *);
    CUresult (*ModuleUnload)(CUmodule);
    CUresult (*ModuleGetFunction)(CUfunction *, CUmodule, const char *);
    CUresult (*LaunchKernel)(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
                             unsigned, CUstream, void **, void **);
    CUresult (*GetErrorString)(CUresult, const char **);
} coh_cuda_api;

/* Loads the driver once (any thread). NULL when there is no libcuda.so.1,
 * an entry point is missing, or cuInit fails. */
const coh_cuda_api *mti_coh_cuda_api_get(void);

#endif
