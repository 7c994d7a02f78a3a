/* Kernel facilities that write the application's memory later, outside any
 * call of the application: io_uring (reads complete in the submitting
 * io_uring_enter, in kernel workers, or with SQPOLL with no call at all) and
 * Linux AIO (io_submit's reads complete in the kernel). No bracket like
 * kwrite.c's can cover such a write, and with the signal backend it would
 * fail with EFAULT on a protected page. So their set-up is what gets
 * reported: track stops protecting signal-backend memory from then on and
 * reports every page on each collect (exact; docs/track.md, "Kernel writes
 * nobody brackets"), before the facility exists.
 *
 * Buffers registered with io_uring (fixed buffers) are reported too
 * (MT_PRELOAD_ASYNC_PINNED): the kernel writes them later through its own
 * mapping of the pinned pages, which not even the uffd backend sees, so uffd
 * ranges are reported whole from then on as well.
 *
 * Seen here: libc's syscall() (io_uring_setup, io_uring_register's buffer
 * registrations, io_setup; getrandom and the reading calls are bracketed
 * like read()), liburing's and libaio's set-up and registration functions
 * (liburing makes its own system calls, so its exported entry points are
 * the only place to see it). Not seen: a raw system call instruction elsewhere (a
 * statically linked liburing, a language runtime's own syscalls). */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "preload.h"

#ifndef SYS_io_uring_setup
#define SYS_io_uring_setup 425
#endif
#ifndef SYS_io_uring_register
#define SYS_io_uring_register 427
#endif

/* io_uring_register opcodes that pin buffers for IORING_OP_READ_FIXED and
 * friends (linux/io_uring.h: IORING_REGISTER_BUFFERS, _BUFFERS2,
 * _BUFFERS_UPDATE). The kernel writes such a buffer later through its own
 * mapping of the pinned pages: no page table of the application changes, so
 * not even the uffd backend sees it. */
static int pins_buffers(unsigned opcode)
{
    return opcode == 0 || opcode == 15 || opcode == 16;
}

static _Atomic unsigned g_seen; /* MT_PRELOAD_ASYNC_* so far: for a tracker attached later */

void mtp_async_note(unsigned what)
{
    /* seq_cst, with attach's exchange of the hooks then read of g_seen: one
     * of the two sides reports (both may: the hook is idempotent). */
    atomic_fetch_or(&g_seen, what);
    const mt_preload_hooks *h = atomic_load(&mtp_hooks);
    if (h && MT_PRELOAD_HAS(h, async_writer))
        h->async_writer(what);
}

unsigned mtp_async_seen(void) { return atomic_load(&g_seen); }

/* The next definition of a function of a library loaded after us (liburing,
 * libaio), looked up on first use: these are set-up calls, never in a
 * signal handler. */
static void *next_fn(void *_Atomic *cache, const char *name)
{
    void *f = atomic_load_explicit(cache, memory_order_acquire);
    if (!f) {
        f = dlsym(RTLD_NEXT, name);
        atomic_store_explicit(cache, f, memory_order_release);
    }
    return f;
}

#define NEXT(name, type) ((type)next_fn(&g_next_##name, #name))

/* syscall(): the six argument registers are read whatever the number (as
 * libc's own syscall() does); what the kernel ignores is passed along
 * unchanged. */
MTP_EXPORT long syscall(long nr, ...)
{
    va_list ap;
    va_start(ap, nr);
    long a[6];
    for (int i = 0; i < 6; i++)
        a[i] = va_arg(ap, long);
    va_end(ap);
    if (nr == SYS_io_uring_setup)
        mtp_async_note(MT_PRELOAD_ASYNC_URING);
    else if (nr == SYS_io_uring_register && pins_buffers((unsigned)a[1]))
        mtp_async_note(MT_PRELOAD_ASYNC_URING | MT_PRELOAD_ASYNC_PINNED);
    else if (nr == SYS_io_setup)
        mtp_async_note(MT_PRELOAD_ASYNC_AIO);
    else if (nr == SYS_getrandom)
        return mtp_kw_buf_syscall(nr, a);
    else if (nr == SYS_read || nr == SYS_pread64 || nr == SYS_readv || nr == SYS_preadv ||
             nr == SYS_preadv2 || nr == SYS_getdents64)
        return mtp_kw_read_syscall(nr, a);
    return REAL(syscall)(nr, a[0], a[1], a[2], a[3], a[4], a[5]);
}

/* liburing (its structs only passed through: pointers here). */
static void *_Atomic g_next_io_uring_setup, *_Atomic g_next_io_uring_queue_init,
    *_Atomic g_next_io_uring_queue_init_params, *_Atomic g_next_io_uring_queue_init_mem;

MTP_EXPORT int io_uring_setup(unsigned entries, void *params)
{
    int (*f)(unsigned, void *) = NEXT(io_uring_setup, int (*)(unsigned, void *));
    mtp_async_note(MT_PRELOAD_ASYNC_URING);
    return f ? f(entries, params) : -ENOSYS;
}

MTP_EXPORT int io_uring_queue_init(unsigned entries, void *ring, unsigned flags)
{
    int (*f)(unsigned, void *, unsigned) = NEXT(io_uring_queue_init, int (*)(unsigned, void *, unsigned));
    mtp_async_note(MT_PRELOAD_ASYNC_URING);
    return f ? f(entries, ring, flags) : -ENOSYS;
}

MTP_EXPORT int io_uring_queue_init_params(unsigned entries, void *ring, void *params)
{
    int (*f)(unsigned, void *, void *) =
        NEXT(io_uring_queue_init_params, int (*)(unsigned, void *, void *));
    mtp_async_note(MT_PRELOAD_ASYNC_URING);
    return f ? f(entries, ring, params) : -ENOSYS;
}

MTP_EXPORT int io_uring_queue_init_mem(unsigned entries, void *ring, void *params, void *buf,
                                       size_t size)
{
    int (*f)(unsigned, void *, void *, void *, size_t) =
        NEXT(io_uring_queue_init_mem, int (*)(unsigned, void *, void *, void *, size_t));
    mtp_async_note(MT_PRELOAD_ASYNC_URING);
    return f ? f(entries, ring, params, buf, size) : -ENOSYS;
}

/* liburing's buffer registrations (its own system calls again). */
static void *_Atomic g_next_io_uring_register, *_Atomic g_next_io_uring_register_buffers,
    *_Atomic g_next_io_uring_register_buffers_tags,
    *_Atomic g_next_io_uring_register_buffers_update_tag,
    *_Atomic g_next_io_uring_register_buffers_sparse;

MTP_EXPORT int io_uring_register(unsigned fd, unsigned opcode, const void *arg, unsigned nr)
{
    int (*f)(unsigned, unsigned, const void *, unsigned) =
        NEXT(io_uring_register, int (*)(unsigned, unsigned, const void *, unsigned));
    if (pins_buffers(opcode))
        mtp_async_note(MT_PRELOAD_ASYNC_URING | MT_PRELOAD_ASYNC_PINNED);
    if (f)
        return f(fd, opcode, arg, nr);
    /* No next definition (liburing is not loaded): the system call, with
     * liburing's convention for the result. */
    long rc = REAL(syscall)(SYS_io_uring_register, (long)fd, (long)opcode, (long)arg, (long)nr, 0L, 0L);
    return rc < 0 ? -errno : (int)rc;
}

MTP_EXPORT int io_uring_register_buffers(void *ring, const void *iov, unsigned nr)
{
    int (*f)(void *, const void *, unsigned) =
        NEXT(io_uring_register_buffers, int (*)(void *, const void *, unsigned));
    mtp_async_note(MT_PRELOAD_ASYNC_URING | MT_PRELOAD_ASYNC_PINNED);
    return f ? f(ring, iov, nr) : -ENOSYS;
}

MTP_EXPORT int io_uring_register_buffers_tags(void *ring, const void *iov, const void *tags, unsigned nr)
{
    int (*f)(void *, const void *, const void *, unsigned) =
        NEXT(io_uring_register_buffers_tags, int (*)(void *, const void *, const void *, unsigned));
    mtp_async_note(MT_PRELOAD_ASYNC_URING | MT_PRELOAD_ASYNC_PINNED);
    return f ? f(ring, iov, tags, nr) : -ENOSYS;
}

MTP_EXPORT int io_uring_register_buffers_update_tag(void *ring, unsigned off, const void *iov,
                                                    const void *tags, unsigned nr)
{
    int (*f)(void *, unsigned, const void *, const void *, unsigned) =
        NEXT(io_uring_register_buffers_update_tag,
             int (*)(void *, unsigned, const void *, const void *, unsigned));
    mtp_async_note(MT_PRELOAD_ASYNC_URING | MT_PRELOAD_ASYNC_PINNED);
    return f ? f(ring, off, iov, tags, nr) : -ENOSYS;
}

MTP_EXPORT int io_uring_register_buffers_sparse(void *ring, unsigned nr)
{
    int (*f)(void *, unsigned) = NEXT(io_uring_register_buffers_sparse, int (*)(void *, unsigned));
    mtp_async_note(MT_PRELOAD_ASYNC_URING | MT_PRELOAD_ASYNC_PINNED);
    return f ? f(ring, nr) : -ENOSYS;
}

/* libaio (io_context_t is a pointer; its functions return -errno). */
static void *_Atomic g_next_io_setup, *_Atomic g_next_io_queue_init;

MTP_EXPORT int io_setup(int maxevents, void *ctxp)
{
    int (*f)(int, void *) = NEXT(io_setup, int (*)(int, void *));
    mtp_async_note(MT_PRELOAD_ASYNC_AIO);
    return f ? f(maxevents, ctxp) : -ENOSYS;
}

MTP_EXPORT int io_queue_init(int maxevents, void *ctxp)
{
    int (*f)(int, void *) = NEXT(io_queue_init, int (*)(int, void *));
    mtp_async_note(MT_PRELOAD_ASYNC_AIO);
    return f ? f(maxevents, ctxp) : -ENOSYS;
}
