/* libmemtrack_preload.so: resolution of the real functions, the entry point
 * track looks for, and attach/detach.
 *
 * Preloaded (LD_PRELOAD) into an application recorded by memtrack, it wraps
 * what the tracker needs to see or to change so that the application
 * observes nothing of the tracking (docs/track.md, "The interposer"):
 *   signals.c  SIGSEGV/SIGBUS dispositions and masks, virtualised;
 *   kwrite.c   system calls in which the kernel writes user memory;
 *   kwout.c    the small outputs of calls that change state (ioctl, wait,
 *              poll, accept ...); idem.c: reports that can run again;
 *   memory.c   the application's own mprotect/munmap/mremap/madvise/mmap;
 *   selfmem.c  writes through /proc/self/mem;
 *   lastwords.c exec, _exit and terminating signals: the capture finishes
 *              its trace before the process is replaced or dies.
 * Until a tracker attaches (or in a process without one) every wrapper is a
 * pass-through costing one relaxed atomic load, except that SIGSEGV/SIGBUS
 * are kept out of real signal masks from the start: a thread that blocks
 * all signals before the first tracker exists must still be able to write
 * tracked memory later. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <sched.h>
#include <stdarg.h>

#include "preload.h"

mtp_real mtp_r;
const mt_preload_hooks *_Atomic mtp_hooks;

#define RESOLVE(f) mtp_r.f = (__typeof__(mtp_r.f))dlsym(RTLD_NEXT, #f)
/* A glibc symbol that later releases keep as a compat version only
 * (dlsym finds default versions alone), by the version it had on x86-64;
 * on aarch64 every symbol's first version is GLIBC_2.17. NULL where the
 * architecture's versions are not known here. */
#if defined(__x86_64__)
#define RESOLVE_OLD(f, name, x86_64_version)                                                        \
    mtp_r.f = (__typeof__(mtp_r.f))dlvsym(RTLD_NEXT, name, x86_64_version)
#elif defined(__aarch64__)
#define RESOLVE_OLD(f, name, x86_64_version)                                                        \
    mtp_r.f = (__typeof__(mtp_r.f))dlvsym(RTLD_NEXT, name, "GLIBC_2.17")
#else
#define RESOLVE_OLD(f, name, x86_64_version) mtp_r.f = NULL
#endif

void mtp_resolve(void)
{
    RESOLVE(sigaction);
    RESOLVE(sigprocmask);
    RESOLVE(pthread_sigmask);
    RESOLVE(sigsuspend);
    RESOLVE(sigpending);
    RESOLVE(pselect);
    RESOLVE(ppoll);
    RESOLVE(epoll_pwait);
    RESOLVE(epoll_pwait2);
    RESOLVE(pthread_create);
    RESOLVE(execve);
    RESOLVE(execv);
    RESOLVE(execvp);
    RESOLVE(execvpe);
    RESOLVE(fexecve);
    RESOLVE(_exit);
    RESOLVE(_Exit);
    RESOLVE(siglongjmp);
    RESOLVE(longjmp);
    RESOLVE(_longjmp);
    RESOLVE(__longjmp_chk);
    RESOLVE(read);
    RESOLVE(pread);
    RESOLVE(pread64);
    RESOLVE(readv);
    RESOLVE(preadv);
    RESOLVE(preadv64);
    RESOLVE(preadv2);
    RESOLVE(preadv64v2);
    RESOLVE(recv);
    RESOLVE(recvfrom);
    RESOLVE(recvmsg);
    RESOLVE(recvmmsg);
    RESOLVE(fread);
    RESOLVE(fread_unlocked);
    RESOLVE(__read_chk);
    RESOLVE(__pread_chk);
    RESOLVE(__pread64_chk);
    RESOLVE(__recv_chk);
    RESOLVE(__recvfrom_chk);
    RESOLVE(__fread_chk);
    RESOLVE(__fread_unlocked_chk);
    RESOLVE(process_vm_readv);
    RESOLVE(process_vm_writev);
    RESOLVE(getrandom);
    RESOLVE(syscall);
    RESOLVE(msgrcv);
    RESOLVE(mq_receive);
    RESOLVE(mq_timedreceive);
    RESOLVE(ioctl);
    RESOLVE(pipe);
    RESOLVE(pipe2);
    RESOLVE(socketpair);
    RESOLVE(accept);
    RESOLVE(accept4);
    RESOLVE(getsockopt);
    RESOLVE(wait);
    RESOLVE(waitpid);
    RESOLVE(wait3);
    RESOLVE(wait4);
    RESOLVE(waitid);
    RESOLVE(sigtimedwait);
    RESOLVE(sigwaitinfo);
    RESOLVE(getdents64);
    RESOLVE(getxattr);
    RESOLVE(lgetxattr);
    RESOLVE(fgetxattr);
    RESOLVE(listxattr);
    RESOLVE(llistxattr);
    RESOLVE(flistxattr);
    RESOLVE(sched_getaffinity);
    RESOLVE(sched_getparam);
    RESOLVE(sched_rr_get_interval);
    RESOLVE(timer_gettime);
    RESOLVE(timer_settime);
    RESOLVE(timerfd_gettime);
    RESOLVE(timerfd_settime);
    RESOLVE(getitimer);
    RESOLVE(setitimer);
    RESOLVE(getrlimit);
    RESOLVE(getrlimit64);
    RESOLVE(prlimit);
    RESOLVE(prlimit64);
    RESOLVE(mincore);
    RESOLVE(eventfd_read);
    RESOLVE(getentropy);
    RESOLVE(sigaltstack);
    RESOLVE(getresuid);
    RESOLVE(getresgid);
    RESOLVE(getgroups);
    RESOLVE(prctl);
    RESOLVE(ttyname_r);
    RESOLVE(splice);
    RESOLVE(sendfile);
    RESOLVE(sendfile64);
    RESOLVE(copy_file_range);
    RESOLVE(timer_create);
    RESOLVE(aio_read);
    RESOLVE(aio_read64);
    RESOLVE(lio_listio);
    RESOLVE(lio_listio64);
    RESOLVE(aio_error);
    RESOLVE(aio_error64);
    RESOLVE(aio_return);
    RESOLVE(aio_return64);
    RESOLVE(aio_suspend);
    RESOLVE(aio_suspend64);
    RESOLVE(aio_cancel);
    RESOLVE(aio_cancel64);
    RESOLVE(poll);
    RESOLVE(__poll_chk);
    RESOLVE(__ppoll_chk);
    RESOLVE(select);
    RESOLVE(epoll_wait);
    RESOLVE(nanosleep);
    RESOLVE(clock_nanosleep);
    RESOLVE(vmsplice);
    RESOLVE(clock_gettime);
    RESOLVE(clock_getres);
    RESOLVE(gettimeofday);
    RESOLVE(getrusage);
    RESOLVE(times);
    RESOLVE(sysinfo);
    RESOLVE(uname);
    RESOLVE(stat);
    RESOLVE(lstat);
    RESOLVE(fstat);
    RESOLVE(fstatat);
    RESOLVE(stat64);
    RESOLVE(lstat64);
    RESOLVE(fstat64);
    RESOLVE(fstatat64);
    RESOLVE(statx);
    RESOLVE_OLD(xstat, "__xstat", "GLIBC_2.2.5");
    RESOLVE_OLD(xstat64, "__xstat64", "GLIBC_2.2.5");
    RESOLVE_OLD(lxstat, "__lxstat", "GLIBC_2.2.5");
    RESOLVE_OLD(lxstat64, "__lxstat64", "GLIBC_2.2.5");
    RESOLVE_OLD(fxstat, "__fxstat", "GLIBC_2.2.5");
    RESOLVE_OLD(fxstat64, "__fxstat64", "GLIBC_2.2.5");
    RESOLVE_OLD(fxstatat, "__fxstatat", "GLIBC_2.4");
    RESOLVE_OLD(fxstatat64, "__fxstatat64", "GLIBC_2.4");
    RESOLVE(readlink);
    RESOLVE(readlinkat);
    RESOLVE(getcwd);
    RESOLVE(__readlink_chk);
    RESOLVE(__readlinkat_chk);
    RESOLVE(__getcwd_chk);
    RESOLVE(statfs);
    RESOLVE(fstatfs);
    RESOLVE(getsockname);
    RESOLVE(getpeername);
    RESOLVE(mprotect);
    RESOLVE(munmap);
    RESOLVE(madvise);
    RESOLVE(mremap);
    RESOLVE(mmap);
    RESOLVE(mmap64);
    RESOLVE(open);
    RESOLVE(open64);
    RESOLVE(openat);
    RESOLVE(openat64);
    RESOLVE(__open_2);
    RESOLVE(__open64_2);
    RESOLVE(__openat_2);
    RESOLVE(__openat64_2);
    RESOLVE(dup);
    RESOLVE(dup2);
    RESOLVE(dup3);
    RESOLVE(write);
    RESOLVE(pwrite);
    RESOLVE(pwrite64);
    RESOLVE(writev);
    RESOLVE(pwritev);
    RESOLVE(pwritev64);
    RESOLVE(pwritev2);
    RESOLVE(pwritev64v2);
}

void mtp_lock_take(mtp_lock *l)
{
    sigset_t all, saved;
    sigfillset(&all);
    REAL(pthread_sigmask)(SIG_SETMASK, &all, &saved);
    /* acquire: pairs with the release in mtp_lock_drop. */
    while (atomic_exchange_explicit(&l->held, 1, memory_order_acquire))
        sched_yield();
    l->saved = saved;
}

void mtp_lock_drop(mtp_lock *l)
{
    sigset_t saved = l->saved;
    atomic_store_explicit(&l->held, 0, memory_order_release);
    REAL(pthread_sigmask)(SIG_SETMASK, &saved, NULL);
}

/* ---- the entry point ----------------------------------------------------- */

static void *real_mremap_v(void *old, size_t old_len, size_t new_len, int flags, ...);
static mt_preload_real g_real_for_track;

static int attach(const mt_preload_hooks *h)
{
    if (!h || h->abi != MT_PRELOAD_ABI_VERSION || h->size < MT_PRELOAD_HOOKS_V1_SIZE)
        return -EINVAL;
    const mt_preload_hooks *expect = NULL;
    /* seq_cst (release at least: the hooks' owner is fully initialised, a
     * constant): pairs with mtp_async_note's report, which reads the hooks
     * after recording what it saw. */
    if (atomic_compare_exchange_strong(&mtp_hooks, &expect, h)) {
        mtp_guard_attach(); /* a capture exists now: guard its exits */
        mtp_runtimes_check(); /* Go code loaded by now (runtimes.c) */
        unsigned seen = mtp_async_seen(); /* set up before this tracker existed */
        if (seen && MT_PRELOAD_HAS(h, async_writer))
            h->async_writer(seen);
        return 0;
    }
    return expect == h ? 0 : -EBUSY;
}

static void detach(const mt_preload_hooks *h)
{
    const mt_preload_hooks *expect = h;
    atomic_compare_exchange_strong_explicit(&mtp_hooks, &expect, NULL, memory_order_release,
                                            memory_order_relaxed);
}

static unsigned vmask_get(void) { return mtp_vmask; }

static unsigned vmask_set(unsigned bits)
{
    unsigned old = mtp_vmask;
    mtp_vmask = bits & (MT_VMASK_SEGV | MT_VMASK_BUS);
    return old;
}

static void vpend(unsigned bits) { mtp_vpend |= bits & (MT_VMASK_SEGV | MT_VMASK_BUS); }

static void *real_mremap_v(void *old, size_t old_len, size_t new_len, int flags, ...)
{
    void *new_addr = NULL;
    if (flags & MREMAP_FIXED) {
        va_list ap;
        va_start(ap, flags);
        new_addr = va_arg(ap, void *);
        va_end(ap);
    }
    return REAL(mremap)(old, old_len, new_len, flags, new_addr);
}

static const mt_preload_api g_api = {
    .abi = MT_PRELOAD_ABI_VERSION,
    .size = sizeof(mt_preload_api),
    .real = &g_real_for_track,
    .attach = attach,
    .detach = detach,
    .vmask_get = vmask_get,
    .vmask_set = vmask_set,
    .vpend = vpend,
};

static pthread_once_t g_setup_once = PTHREAD_ONCE_INIT;

static void setup(void)
{
    mtp_resolve();
    /* Track's "real" sigaction still keeps the application's SIGSEGV/SIGBUS
     * sa_mask bits virtual (so the disposition it finds and later hands back
     * to the application is the one the application installed). */
    g_real_for_track.sigaction = mtp_masked_sigaction;
    g_real_for_track.pthread_sigmask = mtp_r.pthread_sigmask;
    g_real_for_track.mmap = mtp_r.mmap;
    g_real_for_track.munmap = mtp_r.munmap;
    g_real_for_track.madvise = mtp_r.madvise;
    g_real_for_track.mremap = real_mremap_v;
    mtp_signals_atfork();
    mtp_aio_atfork();
}

MTP_EXPORT const mt_preload_api *memtrack_preload_abi_v1(void);
const mt_preload_api *memtrack_preload_abi_v1(void)
{
    pthread_once(&g_setup_once, setup);
    return &g_api;
}

__attribute__((constructor)) static void mtp_init(void)
{
    pthread_once(&g_setup_once, setup);
    mtp_import_thread_mask(); /* inherited through exec */
}
