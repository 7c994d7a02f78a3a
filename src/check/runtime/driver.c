/* Loading the real driver (see driver.h). */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <pthread.h>
#include <stddef.h>

#include "driver.h"

static mt_cu cu;
static int cu_ok;
static pthread_once_t cu_once = PTHREAD_ONCE_INIT;

/* Not instrumented by sanitizers: a sanitizer runtime looks up its own real
 * functions with dlsym, which is ours once preloaded, before it is ready. */
__attribute__((no_sanitize("address", "undefined", "thread"))) void *_mt_real_dlsym(void *handle, const char *name)
{
    /* dlvsym is not interposed; dlsym is, by this library. glibc 2.34 moved
     * dlsym into libc with a new version; older ones have only 2.2.5. */
    static void *(*real)(void *, const char *);
    if (!real) {
        void *f = dlvsym(RTLD_NEXT, "dlsym", "GLIBC_2.34");
        if (!f)
            f = dlvsym(RTLD_NEXT, "dlsym", "GLIBC_2.2.5");
        real = (void *(*)(void *, const char *))f;
    }
    return real ? real(handle, name) : NULL;
}

void *_mt_cu_sym(const char *name)
{
    const mt_cu *c = _mt_cu();
    return c ? _mt_real_dlsym(c->lib, name) : NULL;
}

#define LOAD(field, name)                                                  \
    do {                                                                   \
        *(void **)&cu.field = _mt_real_dlsym(cu.lib, name);                \
        if (!cu.field)                                                     \
            return;                                                        \
    } while (0)

static void load(void)
{
    cu.lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_GLOBAL);
    if (!cu.lib)
        return;
    LOAD(Init, "cuInit");
    LOAD(CtxGetCurrent, "cuCtxGetCurrent");
    LOAD(CtxPushCurrent, "cuCtxPushCurrent_v2");
    LOAD(CtxPopCurrent, "cuCtxPopCurrent_v2");
    LOAD(CtxGetDevice, "cuCtxGetDevice");
    LOAD(CtxSynchronize, "cuCtxSynchronize");
    LOAD(DeviceGet, "cuDeviceGet");
    LOAD(DeviceGetAttribute, "cuDeviceGetAttribute");
    LOAD(DevicePrimaryCtxRetain, "cuDevicePrimaryCtxRetain");
    LOAD(MemAlloc, "cuMemAlloc_v2");
    LOAD(MemFree, "cuMemFree_v2");
    LOAD(MemsetD8Async, "cuMemsetD8Async");
    LOAD(MemcpyHtoDAsync, "cuMemcpyHtoDAsync_v2");
    LOAD(MemcpyDtoHAsync, "cuMemcpyDtoHAsync_v2");
    LOAD(StreamCreate, "cuStreamCreate");
    LOAD(StreamSynchronize, "cuStreamSynchronize");
    LOAD(ModuleLoadData, "cuModuleLoadData");
    LOAD(ModuleLoadDataEx, "cuModuleLoadDataEx");
    LOAD(ModuleGetFunction, "cuModuleGetFunction");
    LOAD(ModuleGetGlobal, "cuModuleGetGlobal_v2");
    LOAD(LaunchKernel, "cuLaunchKernel");
    LOAD(PointerGetAttribute, "cuPointerGetAttribute");
    LOAD(GetErrorString, "cuGetErrorString");
    *(void **)&cu.LibraryGetGlobal = _mt_real_dlsym(cu.lib, "cuLibraryGetGlobal"); /* CUDA >= 12 */
    *(void **)&cu.LibraryGetModule = _mt_real_dlsym(cu.lib, "cuLibraryGetModule");
    *(void **)&cu.LibraryUnload = _mt_real_dlsym(cu.lib, "cuLibraryUnload");
    cu_ok = 1;
}

const mt_cu *_mt_cu(void)
{
    pthread_once(&cu_once, load);
    return cu_ok ? &cu : NULL;
}
