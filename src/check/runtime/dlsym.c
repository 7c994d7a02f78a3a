/* The dlsym the interposer exports (hooks.h): the CUDA runtime dlopens
 * libcuda and looks its entry points up with dlsym on that handle, which
 * LD_PRELOAD alone does not reach. Kept apart so that tests can link the
 * hooks into a program without replacing its dlsym. */
#define _GNU_SOURCE
#include <dlfcn.h>

#include "driver.h"
#include "hooks.h"

#define MT_EXPORT __attribute__((visibility("default")))

MT_EXPORT void *dlsym(void *handle, const char *name);
/* Not instrumented: see _mt_real_dlsym. */
__attribute__((no_sanitize("address", "undefined", "thread"))) MT_EXPORT void *dlsym(void *handle, const char *name)
{
    void *r = _mt_real_dlsym(handle, name);
    if (r && name[0] == 'c' && name[1] == 'u' && !_mt_hooks_resolving) {
        _mt_hooks_resolve();
        void *h = _mt_hook_for(name, r, 0);
        if (h)
            return h;
    }
    return r;
}
