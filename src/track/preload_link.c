/* Finding the interposer (libmemtrack_preload.so) and attaching to it.
 *
 * The tracker lives in libmemtrack, often linked statically into the Vulkan
 * layer with hidden symbols, so the interposer cannot find track: track
 * finds the interposer, with dlsym(RTLD_DEFAULT) on its versioned entry
 * point, when the first tracker is created. Without it (not preloaded),
 * everything works as before: track uses libc, and the layer detects a
 * displaced handler with mt_track_handler_status(). */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "internal.h"

#ifndef MT_PRELOAD_INSTALL_PATH
#define MT_PRELOAD_INSTALL_PATH "/usr/local/lib/libmemtrack_preload.so"
#endif
#define MT_PRELOAD_NAME "libmemtrack_preload.so"

static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;
static _Atomic int g_status;  /* 0 not found (yet), 1 attached, < 0 refused */
static _Atomic int g_decided; /* found (attached or refused): never looked up again */

static void try_link(void)
{
    mt_preload_entry_fn entry = (mt_preload_entry_fn)dlsym(RTLD_DEFAULT, MT_PRELOAD_ENTRY);
    if (!entry)
        return; /* status 0: not there (an interposer dlopen()ed later is found next time) */
    atomic_store_explicit(&g_decided, 1, memory_order_release);
    const mt_preload_api *api = entry();
    if (!api || api->abi != MT_PRELOAD_ABI_VERSION || api->size < sizeof *api) {
        atomic_store_explicit(&g_status, MT_EVERSION, memory_order_release);
        return;
    }
    /* From now on track's own calls go to the real functions, attached or
     * not (another copy of libmemtrack may own the hooks). */
    mti_sys_set_api(api);
    int rc = api->attach(&mti_hooks);
    if (rc == 0)
        mti_sys_set_attached(1);
    atomic_store_explicit(&g_status, rc == 0 ? 1 : rc, memory_order_release);
}

/* Called when a tracker is created: a look-up until the interposer is
 * found, then nothing. */
void mti_preload_link(void)
{
    if (atomic_load_explicit(&g_decided, memory_order_acquire))
        return;
    /* trylock: another thread is looking; and a fork child that inherited
     * the lock held must not hang on it. */
    if (pthread_mutex_trylock(&g_lock) != 0)
        return;
    if (!atomic_load_explicit(&g_decided, memory_order_relaxed))
        try_link();
    pthread_mutex_unlock(&g_lock);
}

int mt_track_preload_status(void)
{
    mti_preload_link();
    return atomic_load_explicit(&g_status, memory_order_acquire);
}

static int copy_path(char *buf, size_t size, const char *path)
{
    size_t n = strlen(path);
    if (n + 1 > size)
        return -ENAMETOOLONG;
    memcpy(buf, path, n + 1);
    return (int)n;
}

int mt_track_preload_path(char *buf, size_t size)
{
    if (!buf || size == 0)
        return -EINVAL;
    const char *env = getenv("MEMTRACK_PRELOAD");
    if (env && *env)
        return access(env, R_OK) == 0 ? copy_path(buf, size, env) : -ENOENT;
    /* Next to the running program: build/bin/memtrack -> build/lib/, and
     * PREFIX/bin -> PREFIX/lib for an install with libdir "lib". */
    char exe[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (n > 0) {
        exe[n] = 0;
        char *slash = strrchr(exe, '/');
        if (slash) {
            *slash = 0;
            char cand[PATH_MAX + 64];
            snprintf(cand, sizeof cand, "%s/../lib/%s", exe, MT_PRELOAD_NAME);
            if (access(cand, R_OK) == 0) {
                char real[PATH_MAX];
                return copy_path(buf, size, realpath(cand, real) ? real : cand);
            }
        }
    }
    if (access(MT_PRELOAD_INSTALL_PATH, R_OK) == 0)
        return copy_path(buf, size, MT_PRELOAD_INSTALL_PATH);
    return -ENOENT;
}
