/* POSIX AIO: aio_read and lio_listio's reads.
 *
 * glibc performs each request in a thread of its own through its internal
 * pread, which no wrapper sees, whenever that thread gets to it: with the
 * signal backend the read into a protected page fails with EFAULT, and the
 * application's aio_error reports it. A bracket around aio_read would end
 * before the read happens, so here the bracket spans the operation: track's
 * kw_begin when a read is queued, kw_end once the application learns that
 * it ended (aio_error other than EINPROGRESS, aio_return, an aio_suspend or
 * lio_listio after which aio_error says so, the same control block queued
 * again). Meanwhile the pages stay writable and every collect reports them
 * dirty (track/kwrite.c's pins): exact, if not precise. A hold is released
 * only where the application hands us its control block, because a block
 * whose end it learned otherwise (a completion signal) may be freed memory
 * by then. When all HOLDS are taken (an application that never asks), the
 * next read into tracked memory reports AIO as an unbracketed writer: track
 * then stops protecting its signal-backend memory (exact, and said so).
 *
 * aio_error and aio_return are async-signal-safe, so is all of this: a
 * fixed table, atomics, no locks. Linux AIO (io_submit) is async.c's. */
#define _GNU_SOURCE
#include <aio.h>
#include <dlfcn.h>
#include <errno.h>
#include <stddef.h>
#include <stdatomic.h>
#include <stdint.h>

#include "preload.h"

#define HOLDS 256
#define SLOT_BUSY ((const void *)1) /* being filled or released */

static struct hold {
    const void *_Atomic cb; /* NULL: free */
    const mt_preload_hooks *h;
    int token;
    struct iovec seg;
} g_holds[HOLDS];
static _Atomic int g_nholds;

/* The next definition of `name`, also when it was not there at start-up
 * (before glibc 2.34 AIO lives in librt, which may be loaded later). */
#define AREAL(f) (REAL(f) ? mtp_r.f : (mtp_r.f = (__typeof__(mtp_r.f))dlsym(RTLD_NEXT, #f)))
#define NEED(real)                                                                                 \
    do {                                                                                           \
        if (!(real)) {                                                                             \
            errno = ENOSYS;                                                                        \
            return -1;                                                                             \
        }                                                                                          \
    } while (0)

static void end_hold(struct hold *s)
{
    mt_kw_segs segs = {.iov = &s->seg, .niov = 1};
    s->h->kw_end(s->token, &segs); /* keeps errno */
    atomic_store_explicit(&s->cb, NULL, memory_order_release);
    atomic_fetch_sub_explicit(&g_nholds, 1, memory_order_relaxed);
}

/* The operation of `cb` ended (or never started): its pages are reported
 * and may be re-armed again. */
static void release(const void *cb)
{
    if (!cb || atomic_load_explicit(&g_nholds, memory_order_relaxed) == 0)
        return;
    for (int i = 0; i < HOLDS; i++) {
        const void *want = cb;
        if (atomic_load_explicit(&g_holds[i].cb, memory_order_relaxed) == cb &&
            atomic_compare_exchange_strong_explicit(&g_holds[i].cb, &want, SLOT_BUSY, memory_order_acquire,
                                                    memory_order_relaxed))
            end_hold(&g_holds[i]);
    }
}

/* Before a read of `len` bytes at `buf` is queued for `cb`. */
static void hold(const mt_preload_hooks *h, const void *cb, volatile void *buf, size_t len)
{
    release(cb); /* a control block queued again: its previous operation ended */
    if (len == 0)
        return;
    struct iovec seg = {(void *)(uintptr_t)buf, len};
    mt_kw_segs segs = {.iov = &seg, .niov = 1};
    int tok = h->kw_begin(&segs); /* pins the buffer, tracked or not: it may be by the time glibc reads */
    if (tok < 0)
        return;
    for (int i = 0; i < HOLDS; i++) {
        const void *want = NULL;
        if (atomic_load_explicit(&g_holds[i].cb, memory_order_relaxed) != NULL ||
            !atomic_compare_exchange_strong_explicit(&g_holds[i].cb, &want, SLOT_BUSY, memory_order_acquire,
                                                     memory_order_relaxed))
            continue;
        g_holds[i].h = h;
        g_holds[i].token = tok;
        g_holds[i].seg = seg;
        atomic_fetch_add_explicit(&g_nholds, 1, memory_order_relaxed);
        atomic_store_explicit(&g_holds[i].cb, cb, memory_order_release);
        return;
    }
    /* Every hold taken: no bracket can cover this read. Into tracked
     * memory, AIO becomes an unbracketed writer (exact fallback); into
     * memory not tracked now the read goes ahead without a hold, as it
     * would without memtrack (a range added over it before glibc reads it
     * would make it fail: 256 reads in flight into other memory first). */
    if (tok & MT_PRELOAD_KW_MET)
        mtp_async_note(MT_PRELOAD_ASYNC_AIO);
    h->kw_end(tok, &segs);
}

/* After a call that may have ended `cb`'s operation. */
static void release_if_done(int (*real_error)(const struct aiocb *), const struct aiocb *cb)
{
    if (cb && atomic_load_explicit(&g_nholds, memory_order_relaxed) && real_error(cb) != EINPROGRESS)
        release(cb);
}

static int do_aio_read(int (*real)(struct aiocb *), struct aiocb *cb)
{
    NEED(real);
    const mt_preload_hooks *h = mtp_get_hooks();
    if (!h || !cb)
        return real(cb);
    hold(h, cb, cb->aio_buf, cb->aio_nbytes);
    int r = real(cb);
    if (r != 0)
        release(cb); /* not queued: keeps errno */
    return r;
}

static int do_lio_listio(int (*real)(int, struct aiocb *const[], int, struct sigevent *),
                         int (*real_error)(const struct aiocb *), int mode, struct aiocb *const list[],
                         int n, struct sigevent *sev)
{
    NEED(real && real_error);
    const mt_preload_hooks *h = mtp_get_hooks();
    if (!h || !list || n <= 0)
        return real(mode, list, n, sev);
    for (int i = 0; i < n; i++)
        if (list[i] && list[i]->aio_lio_opcode == LIO_READ)
            hold(h, list[i], list[i]->aio_buf, list[i]->aio_nbytes);
    int r = real(mode, list, n, sev);
    int e = errno;
    /* LIO_WAIT: all ended, unless interrupted; a failed LIO_NOWAIT may have
     * queued only some. Either way aio_error tells, on blocks the
     * application just handed us. */
    for (int i = 0; i < n; i++)
        if (list[i] && list[i]->aio_lio_opcode == LIO_READ)
            release_if_done(real_error, list[i]);
    errno = e;
    return r;
}

static int do_aio_error(int (*real)(const struct aiocb *), const struct aiocb *cb)
{
    NEED(real);
    int r = real(cb);
    if (r != EINPROGRESS && atomic_load_explicit(&g_nholds, memory_order_relaxed)) {
        int e = errno;
        release(cb);
        errno = e;
    }
    return r;
}

static ssize_t do_aio_return(ssize_t (*real)(struct aiocb *), struct aiocb *cb)
{
    NEED(real);
    ssize_t r = real(cb);
    int e = errno;
    release(cb);
    errno = e;
    return r;
}

static int do_aio_suspend(int (*real)(const struct aiocb *const[], int, const struct timespec *),
                          int (*real_error)(const struct aiocb *), const struct aiocb *const list[], int n,
                          const struct timespec *t)
{
    NEED(real && real_error);
    int r = real(list, n, t);
    if (list && atomic_load_explicit(&g_nholds, memory_order_relaxed)) {
        int e = errno;
        for (int i = 0; i < n; i++)
            release_if_done(real_error, list[i]);
        errno = e;
    }
    return r;
}

static int do_aio_cancel(int (*real)(int, struct aiocb *), int (*real_error)(const struct aiocb *), int fd,
                         struct aiocb *cb)
{
    NEED(real && real_error);
    int r = real(fd, cb);
    int e = errno;
    release_if_done(real_error, cb);
    errno = e;
    return r;
}

_Static_assert(sizeof(struct aiocb) == sizeof(struct aiocb64) &&
                   offsetof(struct aiocb, aio_buf) == offsetof(struct aiocb64, aio_buf) &&
                   offsetof(struct aiocb, aio_nbytes) == offsetof(struct aiocb64, aio_nbytes) &&
                   offsetof(struct aiocb, aio_lio_opcode) == offsetof(struct aiocb64, aio_lio_opcode),
               "the *64 control blocks are the same as the plain ones (LP64)");

/* On 64-bit glibc the *64 names are aliases of the same functions; an
 * application built with _FILE_OFFSET_BITS=64 calls them by those names. */
MTP_EXPORT int aio_read(struct aiocb *cb) { return do_aio_read(AREAL(aio_read), cb); }
MTP_EXPORT int aio_read64(struct aiocb64 *cb) { return do_aio_read(AREAL(aio_read64), (struct aiocb *)cb); }

MTP_EXPORT int lio_listio(int mode, struct aiocb *const list[], int n, struct sigevent *sev)
{
    return do_lio_listio(AREAL(lio_listio), AREAL(aio_error), mode, list, n, sev);
}

MTP_EXPORT int lio_listio64(int mode, struct aiocb64 *const list[], int n, struct sigevent *sev)
{
    return do_lio_listio(AREAL(lio_listio64), AREAL(aio_error), mode, (struct aiocb *const *)list, n, sev);
}

MTP_EXPORT int aio_error(const struct aiocb *cb) { return do_aio_error(AREAL(aio_error), cb); }
MTP_EXPORT int aio_error64(const struct aiocb64 *cb)
{
    return do_aio_error(AREAL(aio_error64), (const struct aiocb *)cb);
}
MTP_EXPORT ssize_t aio_return(struct aiocb *cb) { return do_aio_return(AREAL(aio_return), cb); }
MTP_EXPORT ssize_t aio_return64(struct aiocb64 *cb)
{
    return do_aio_return(AREAL(aio_return64), (struct aiocb *)cb);
}

MTP_EXPORT int aio_suspend(const struct aiocb *const list[], int n, const struct timespec *t)
{
    return do_aio_suspend(AREAL(aio_suspend), AREAL(aio_error), list, n, t);
}

MTP_EXPORT int aio_suspend64(const struct aiocb64 *const list[], int n, const struct timespec *t)
{
    return do_aio_suspend(AREAL(aio_suspend64), AREAL(aio_error), (const struct aiocb *const *)list, n, t);
}

MTP_EXPORT int aio_cancel(int fd, struct aiocb *cb) { return do_aio_cancel(AREAL(aio_cancel), AREAL(aio_error), fd, cb); }

MTP_EXPORT int aio_cancel64(int fd, struct aiocb64 *cb)
{
    return do_aio_cancel(AREAL(aio_cancel64), AREAL(aio_error), fd, (struct aiocb *)cb);
}

/* fork() child: the parent's operations do not continue here, and the
 * tracker dropped their pins (track/kwrite.c). */
static void fork_child(void)
{
    for (int i = 0; i < HOLDS; i++)
        atomic_store_explicit(&g_holds[i].cb, NULL, memory_order_relaxed);
    atomic_store_explicit(&g_nholds, 0, memory_order_relaxed);
}

void mtp_aio_atfork(void) { pthread_atfork(NULL, NULL, fork_child); }
