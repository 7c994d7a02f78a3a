/* Track's own system calls and locks.
 *
 * When the interposer (libmemtrack_preload.so) is in the process, a call from
 * here to plain sigaction() or munmap() would reach its wrapper and be taken
 * for the application's (virtualised, or routed back into the tracker). So
 * track calls the functions the interposer hands over as "real" (a
 * sanitizer's interceptor or libc), and mprotect as a raw system call: it
 * has no user-space state, no sanitizer needs to see it, and it is the one
 * call the fault handler makes. */
#define _GNU_SOURCE
#include <errno.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "internal.h"

/* acquire/release: the API struct is written before the pointer is published. */
static const mt_preload_api *_Atomic g_api;
static _Atomic int g_attached;

const mt_preload_api *mti_sys_api(void)
{
    return atomic_load_explicit(&g_api, memory_order_acquire);
}

void mti_sys_set_api(const mt_preload_api *api)
{
    atomic_store_explicit(&g_api, api, memory_order_release);
}

int mti_sys_attached(void) { return atomic_load_explicit(&g_attached, memory_order_acquire); }

void mti_sys_set_attached(int on) { atomic_store_explicit(&g_attached, on, memory_order_release); }

/* Async-signal-safe. */
int mti_sys_mprotect(uintptr_t addr, size_t len, int prot)
{
    return syscall(SYS_mprotect, addr, len, prot) == 0 ? 0 : -errno;
}

/* Async-signal-safe. */
int mti_sys_sigaction(int sig, const struct sigaction *act, struct sigaction *old)
{
    const mt_preload_api *api = mti_sys_api();
    int rc = api ? api->real->sigaction(sig, act, old) : sigaction(sig, act, old);
    return rc == 0 ? 0 : -errno;
}

/* Async-signal-safe. */
int mti_sys_sigmask(int how, const sigset_t *set, sigset_t *old)
{
    const mt_preload_api *api = mti_sys_api();
    return -(api ? api->real->pthread_sigmask(how, set, old) : pthread_sigmask(how, set, old));
}

void *mti_sys_mmap(void *addr, size_t len, int prot, int flags, int fd, off_t off)
{
    const mt_preload_api *api = mti_sys_api();
    return api ? api->real->mmap(addr, len, prot, flags, fd, off) : mmap(addr, len, prot, flags, fd, off);
}

int mti_sys_munmap(void *addr, size_t len)
{
    const mt_preload_api *api = mti_sys_api();
    int rc = api ? api->real->munmap(addr, len) : munmap(addr, len);
    return rc == 0 ? 0 : -errno;
}

int mti_sys_madvise(void *addr, size_t len, int advice)
{
    const mt_preload_api *api = mti_sys_api();
    int rc = api ? api->real->madvise(addr, len, advice) : madvise(addr, len, advice);
    return rc == 0 ? 0 : -errno;
}

void *mti_sys_mremap(void *old, size_t old_len, size_t new_len, int flags, void *new_addr)
{
    const mt_preload_api *api = mti_sys_api();
    if (api)
        return api->real->mremap(old, old_len, new_len, flags, new_addr);
    return mremap(old, old_len, new_len, flags, new_addr);
}

void mti_sys_block_async(sigset_t *saved)
{
    sigset_t all;
    sigfillset(&all);
    /* A synchronous fault while blocked kills the process: keep them. */
    static const int sync_sigs[] = {SIGSEGV, SIGBUS, SIGILL, SIGFPE, SIGTRAP, SIGSYS};
    for (size_t i = 0; i < sizeof sync_sigs / sizeof *sync_sigs; i++)
        sigdelset(&all, sync_sigs[i]);
    mti_sys_sigmask(SIG_SETMASK, &all, saved);
}

void mti_sys_block_all(sigset_t *saved)
{
    sigset_t all;
    sigfillset(&all);
    mti_sys_sigmask(SIG_SETMASK, &all, saved);
}

void mti_sys_restore_mask(const sigset_t *saved) { mti_sys_sigmask(SIG_SETMASK, saved, NULL); }

/* Async-signal-safe. */
void mti_spin_lock(mt_spin *s)
{
    /* acquire: pairs with the release in mti_spin_unlock. */
    while (atomic_exchange_explicit(&s->held, 1, memory_order_acquire)) {
        int spins = 0;
        while (atomic_load_explicit(&s->held, memory_order_relaxed)) {
            if (++spins < 64)
                mti_cpu_relax();
            else
                sched_yield(); /* the holder may be descheduled (2 cores) */
        }
    }
}

void mti_spin_unlock(mt_spin *s) { atomic_store_explicit(&s->held, 0, memory_order_release); }
