/* memtrack bench track, interposer part: what a wrapped call costs compared
 * with the plain libc call, in the same run.
 *
 * The interposer is dlopen()ed (RTLD_GLOBAL, so that track finds it, while
 * this program's own calls stay bound to libc) and its wrappers are called
 * through dlsym(handle, ...):
 *  - pass-through: no tracker attached (a process that preloads the
 *    interposer but tracks nothing): read(2) of 4 KiB from /dev/zero,
 *    pthread_sigmask, mprotect;
 *  - attached, untracked: a tracker exists, the buffer is not tracked;
 *  - tracked: read(2) into a tracked page (signal backend: armed again by a
 *    collect before each call, not timed; uffd backend), the same 4 KiB
 *    written by user code into an armed page (the write-fault path, for
 *    comparison), and mprotect of a tracked page (serialised with the fault
 *    handler and collect).
 * Each case alternates blocks of libc and wrapper calls; the figure is the
 * median per-call time over the blocks, and the ratio wrapper / libc. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "memtrack/track.h"
#include "suites.h"

#define ROUNDS 15

typedef struct wrapped {
    ssize_t (*read)(int, void *, size_t);
    int (*thread_mask)(int, const sigset_t *, sigset_t *);
    int (*mprotect)(void *, size_t, int);
} wrapped;

typedef struct bufs {
    int zero_fd;
    unsigned char *plain; /* untracked, 2 pages */
    sigset_t empty;
} bufs;

/* One call of a case, through libc (w == NULL) or the wrapper. */
typedef void (*call_fn)(const wrapped *w, bufs *b, void *arg);

static void call_read(const wrapped *w, bufs *b, void *arg)
{
    unsigned char *dst = arg ? arg : b->plain;
    ssize_t n = w ? w->read(b->zero_fd, dst, 4096) : read(b->zero_fd, dst, 4096);
    (void)n;
}

static void call_sigmask(const wrapped *w, bufs *b, void *arg)
{
    (void)arg;
    if (w)
        w->thread_mask(SIG_BLOCK, &b->empty, NULL);
    else
        pthread_sigmask(SIG_BLOCK, &b->empty, NULL);
}

static void call_mprotect(const wrapped *w, bufs *b, void *arg)
{
    void *p = arg ? arg : b->plain;
    if (w)
        w->mprotect(p, 4096, PROT_READ | PROT_WRITE);
    else
        mprotect(p, 4096, PROT_READ | PROT_WRITE);
}

/* Median ns per call over ROUNDS blocks of `n` calls, libc and wrapper
 * blocks interleaved. `wrapper_arg` is what the wrapper calls get (e.g. a
 * tracked page); libc calls always use untracked memory. */
static void measure(const wrapped *w, bufs *b, call_fn fn, void *wrapper_arg, int n, double *libc_ns,
                    double *wrap_ns)
{
    double vl[ROUNDS], vw[ROUNDS];
    for (int k = 0; k < 200; k++) { /* warm-up */
        fn(NULL, b, NULL);
        fn(w, b, wrapper_arg);
    }
    for (int r = 0; r < ROUNDS; r++) {
        /* Which block goes first alternates, so neither gets the warm caches. */
        const wrapped *first = r % 2 ? w : NULL, *second = r % 2 ? NULL : w;
        uint64_t t0 = mt_bench_now_ns();
        for (int i = 0; i < n; i++)
            fn(first, b, first ? wrapper_arg : NULL);
        uint64_t t1 = mt_bench_now_ns();
        for (int i = 0; i < n; i++)
            fn(second, b, second ? wrapper_arg : NULL);
        uint64_t t2 = mt_bench_now_ns();
        vl[r] = (double)(r % 2 ? t2 - t1 : t1 - t0) / n;
        vw[r] = (double)(r % 2 ? t1 - t0 : t2 - t1) / n;
    }
    *libc_ns = mt_bench_median(vl, ROUNDS);
    *wrap_ns = mt_bench_median(vw, ROUNDS);
}

/* Tracked read with the signal backend: the page is armed again (collect,
 * not timed) before every timed call, as between two submits of a capture.
 * Also timed: the same 4 KiB written by user code into another armed page
 * (one write fault), what the application pays for its own writes. */
static void measure_armed_read(const wrapped *w, bufs *b, mt_tracker *t, mt_range_id id,
                               unsigned char *page, unsigned char *page2, int n, double *libc_ns,
                               double *wrap_ns, double *fault_ns)
{
    double vl[ROUNDS], vw[ROUNDS], vf[ROUNDS];
    mt_dirty_run runs[4];
    for (int r = 0; r < ROUNDS; r++) {
        uint64_t tl = 0, tw = 0, tf = 0;
        for (int i = 0; i < n; i++) {
            mt_tracker_collect(t, id, runs, 4);
            uint64_t t0 = mt_bench_now_ns();
            call_read(NULL, b, NULL);
            uint64_t t1 = mt_bench_now_ns();
            call_read(w, b, page);
            uint64_t t2 = mt_bench_now_ns();
            memcpy(page2, b->plain, 4096);
            uint64_t t3 = mt_bench_now_ns();
            tl += t1 - t0;
            tw += t2 - t1;
            tf += t3 - t2;
        }
        vl[r] = (double)tl / n;
        vw[r] = (double)tw / n;
        vf[r] = (double)tf / n;
    }
    *libc_ns = mt_bench_median(vl, ROUNDS);
    *wrap_ns = mt_bench_median(vw, ROUNDS);
    *fault_ns = mt_bench_median(vf, ROUNDS);
}

static void emit(mt_bench_ctx *ctx, const char *name, double libc_ns, double wrap_ns, double target)
{
    char t[48];
    if (target > 0)
        snprintf(t, sizeof t, "<= %.2fx libc", target);
    mt_bench_row row = {name, "ns_per_call", wrap_ns, "ns", "libc", libc_ns, wrap_ns / libc_ns,
                        target > 0 ? t : NULL, target > 0 ? wrap_ns / libc_ns <= target : -1};
    mt_bench_emit(ctx, &row);
}

int mt_bench_track_preload(mt_bench_ctx *ctx)
{
    char path[PATH_MAX];
    if (mt_track_preload_path(path, sizeof path) < 0) {
        mt_bench_note(ctx, "interposer: libmemtrack_preload.so not found (set MEMTRACK_PRELOAD): skipped");
        return 0;
    }
    void *h = dlopen(path, RTLD_NOW | RTLD_GLOBAL);
    if (!h) {
        mt_bench_note(ctx, "interposer: dlopen(%s) failed: %s", path, dlerror());
        return 0;
    }
    wrapped w = {dlsym(h, "read"), dlsym(h, "pthread_sigmask"), dlsym(h, "mprotect")};
    if (!w.read || !w.thread_mask || !w.mprotect)
        return 1;
    bufs b;
    b.zero_fd = open("/dev/zero", O_RDONLY | O_CLOEXEC);
    b.plain = mmap(NULL, 2 * 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    sigemptyset(&b.empty);
    if (b.zero_fd < 0 || b.plain == MAP_FAILED)
        return 1;
    int quick = mt_bench_quick(ctx);
    int n = quick ? 500 : 4000;
    mt_bench_note(ctx, "interposer %s: per call, wrapper vs libc, median of %d interleaved blocks", path,
                  ROUNDS);
    double l, x;

    /* No tracker attached yet (this process created none since loading it). */
    measure(&w, &b, call_read, NULL, n, &l, &x);
    emit(ctx, "preload/pass-through/read-4k", l, x, 1.10);
    measure(&w, &b, call_sigmask, NULL, n, &l, &x);
    emit(ctx, "preload/pass-through/pthread_sigmask", l, x, 1.10);
    measure(&w, &b, call_mprotect, NULL, n, &l, &x);
    emit(ctx, "preload/pass-through/mprotect", l, x, 1.10);

    /* Attached: a tracker exists. */
    size_t ps = (size_t)sysconf(_SC_PAGESIZE);
    unsigned char *mem = mmap(NULL, 64 * ps, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    mt_tracker_opts so = {.backend = MT_TRACK_SIGNAL};
    mt_tracker *t = NULL;
    mt_range_id id;
    if (mem == MAP_FAILED || mt_tracker_create(&so, &t) != 0 || mt_tracker_add(t, mem, 32 * ps, NULL, &id) != 0)
        return 1;
    if (mt_track_preload_status() != 1) {
        mt_bench_note(ctx, "interposer: not attached (status %d): tracked cases skipped",
                      mt_track_preload_status());
    } else {
        measure(&w, &b, call_read, NULL, n, &l, &x);
        emit(ctx, "preload/attached-untracked/read-4k", l, x, 1.25);
        measure(&w, &b, call_mprotect, NULL, n, &l, &x);
        emit(ctx, "preload/attached-untracked/mprotect", l, x, 1.25);
        double f;
        measure_armed_read(&w, &b, t, id, mem + 3 * ps, mem + 9 * ps, n / 4, &l, &x, &f);
        emit(ctx, "preload/tracked-signal/read-4k", l, x, 0);
        emit(ctx, "preload/tracked-signal/user-write-4k", l, f, 0);
        measure(&w, &b, call_mprotect, mem + 5 * ps, n / 4, &l, &x);
        emit(ctx, "preload/tracked-signal/mprotect", l, x, 0);
        if (mt_track_backend_available(MT_TRACK_UFFD)) {
            mt_tracker *tu;
            mt_range_id idu;
            mt_tracker_opts uo = {.backend = MT_TRACK_UFFD};
            if (mt_tracker_create(&uo, &tu) == 0 && mt_tracker_add(tu, mem + 32 * ps, 32 * ps, NULL, &idu) == 0) {
                measure(&w, &b, call_read, mem + 40 * ps, n, &l, &x);
                emit(ctx, "preload/tracked-uffd/read-4k", l, x, 0);
                mt_tracker_destroy(tu);
            }
        }
    }
    mt_tracker_destroy(t);
    munmap(mem, 64 * ps);
    munmap(b.plain, 2 * 4096);
    close(b.zero_fd);
    /* The interposer stays loaded: a tracker attached its hooks to it. */
    return 0;
}
