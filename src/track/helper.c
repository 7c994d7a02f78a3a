/* The collection helper, library side: start it, post scans, take their
 * results, notice when it is gone (docs/track.md, "Collection helper").
 *
 * Why a process: PAGEMAP_SCAN re-protects written pages and flushes the TLB
 * once per 2 MiB that had any, and every flush interrupts each CPU running
 * a thread of the process. Collecting threads in the process interrupt one
 * another; the helper's threads run in their own address space, so the
 * flushes reach only the application's running threads.
 *
 * Transparency for the application:
 *  - started with clone(CLONE_VM | CLONE_VFORK) and exec, like posix_spawn
 *    (nothing of the application's memory is copied, pinned memory
 *    included), with every signal blocked and raw system calls only until
 *    the exec (the child shares our memory; the interposer's wrappers must
 *    not take its exec for the application's);
 *  - not our child: a middle child (exit signal 0, which wait(),
 *    waitpid(-1) and waitid(P_ALL) never report and whose exit sends no
 *    SIGCHLD; reaped with __WCLONE) starts it and exits, so nothing of the
 *    helper reaches the application's wait() or SIGCHLD handler; memtrack
 *    holds a pidfd to it;
 *  - it dies with the application (it polls the application's pidfd and
 *    checks its pagemap after an exec), and a fork child of the
 *    application forgets it (the child's uffd ranges are reported whole
 *    anyway, fork.c).
 *
 * Failures fall back to in-process scanning, never to a lost write: a job
 * a dead or stuck helper did not finish reports its whole window (the
 * helper may have re-protected pages before dying), the same rule as a
 * failed in-process scan (collect.c). mt_tracker_helper_status() says why. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/futex.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "../common/fdpark.h"
#include "internal.h"
#include "helper_abi.h"

#define MT_HELPER_NAME "memtrack-scan"
/* A job not done after this long with the helper alive: it is stuck. */
#define MT_HELPER_STUCK_NS 10000000000ll
/* Slices of a wait between checks that the helper is alive. */
#define MT_HELPER_SLICE_NS 20000000l

struct mt_helper {
    mth_shm *shm;
    int pidfd; /* the helper's (not our child: see spawn_middle) */
    uint64_t pidfd_dev, pidfd_ino; /* its file (mti_fd_identity), see pidfd_ours */
    /* 0 while usable; else why collection is in-process (negative). */
    _Atomic int err;
    pthread_mutex_t lock; /* posting, the free slots, reaping */
    uint32_t nfree;
    uint32_t free[MTH_SLOTS];
};

static void futex_wake(_Atomic uint32_t *w, int n)
{
    syscall(SYS_futex, w, FUTEX_WAKE, n, NULL, NULL, 0);
}

/* ---- starting ------------------------------------------------------------------------ */

/* $MEMTRACK_SCAN_HELPER, else ../libexec/memtrack-scan next to the object
 * this code is in (build/lib/libmemtrack.so and build/bin/<program linked
 * statically> both find build/libexec), else the installed one. */
static int helper_path(char *buf, size_t size)
{
    const char *env = getenv("MEMTRACK_SCAN_HELPER");
    if (env && *env) {
        snprintf(buf, size, "%s", env);
        return access(buf, X_OK) == 0 ? 0 : -ENOENT;
    }
    Dl_info di;
    if (dladdr((void *)helper_path, &di) && di.dli_fname) {
        char dir[PATH_MAX];
        snprintf(dir, sizeof dir, "%s", di.dli_fname);
        char *slash = strrchr(dir, '/');
        if (slash) {
            *slash = 0;
            snprintf(buf, size, "%s/../libexec/%s", dir, MT_HELPER_NAME);
            if (access(buf, X_OK) == 0)
                return 0;
        }
    }
    snprintf(buf, size, "%s", MT_HELPER_INSTALL_PATH);
    return access(buf, X_OK) == 0 ? 0 : -ENOENT;
}

typedef int (*clone_fn)(int (*)(void *), void *, int, void *, ...);

/* libc's own clone(), not an interceptor's: ThreadSanitizer takes a clone
 * child for a fork and resets its state "in the child", which with
 * CLONE_VM is our memory (threads started afterwards die). */
static clone_fn real_clone(void)
{
    clone_fn f = clone;
    void *h = dlopen("libc.so.6", RTLD_NOW | RTLD_NOLOAD);
    void *p = h ? dlsym(h, "clone") : NULL;
    if (p)
        memcpy(&f, &p, sizeof f);
    if (h)
        dlclose(h);
    return f;
}

typedef struct spawn_args {
    const char *path;
    char *const *argv;
    int fds[3];
    int pidfd; /* the helper's, set by the middle child */
    void *stack2;
    clone_fn clone;
} spawn_args;

/* The helper itself (a vfork child of the middle one, until the exec):
 * shares our memory, every signal blocked, raw system calls only (no
 * interposer wrapper, no libc state). */
static int spawn_helper(void *arg)
{
    spawn_args *a = arg;
    static char *const envp[] = {NULL};
    for (int i = 0; i < 3; i++) /* its own descriptor table: inherit these */
        syscall(SYS_fcntl, a->fds[i], F_SETFD, 0);
    syscall(SYS_execve, a->path, a->argv, envp);
    syscall(SYS_exit, 127);
    return 127;
}

/* The middle child: starts the helper and exits at once, so the helper is
 * nobody's child here. (A direct child would be: exec makes every process
 * signal its parent with SIGCHLD, whatever exit signal clone gave it, and
 * wait() would then see it.) The middle child never execs: exit signal 0,
 * invisible to wait(), reaped with __WCLONE. It shares our descriptor
 * table, so the helper's pidfd (CLONE_PIDFD) is ours. */
static int spawn_middle(void *arg)
{
    spawn_args *a = arg;
    int pid = a->clone(spawn_helper, a->stack2, CLONE_VM | CLONE_VFORK | CLONE_PIDFD, a, &a->pidfd);
    syscall(SYS_exit, pid < 0 ? 1 : 0);
    return 0;
}

int mti_helper_start(mt_tracker *t, unsigned threads)
{
    mt_helper *h = mti_arena_alloc(sizeof *h);
    if (!h)
        return -ENOMEM;
    pthread_mutex_init(&h->lock, NULL);
    h->pidfd = -1;
    t->helper = h;
    char path[PATH_MAX];
    int rc = helper_path(path, sizeof path);
    int fd = rc ? -1 : (int)syscall(SYS_memfd_create, "memtrack-scan", MFD_CLOEXEC);
    if (!rc && fd < 0)
        rc = -errno;
    if (!rc && ftruncate(fd, sizeof *h->shm) != 0)
        rc = -errno;
    if (!rc) {
        void *p = mti_sys_mmap(NULL, sizeof *h->shm, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
        if (p == MAP_FAILED)
            rc = -errno;
        else
            h->shm = p;
    }
    /* The helper watches this to die with us (CLOEXEC here). */
    int self = rc ? -1 : (int)syscall(SYS_pidfd_open, getpid(), 0);
    if (!rc && self < 0)
        rc = -errno;
    size_t stack = 64u << 10;
    void *stk = rc ? MAP_FAILED
                   : mti_sys_mmap(NULL, 2 * stack, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (!rc && stk == MAP_FAILED)
        rc = -errno;
    if (!rc) {
        h->shm->magic = MTH_MAGIC;
        h->shm->nthreads = threads;
        for (uint32_t s = 0; s < MTH_SLOTS; s++)
            h->free[h->nfree++] = MTH_SLOTS - 1 - s;
        char a1[16], a2[16], a3[16], a4[16];
        snprintf(a1, sizeof a1, "%d", t->pagemap_fd);
        snprintf(a2, sizeof a2, "%d", fd);
        snprintf(a3, sizeof a3, "%u", threads);
        snprintf(a4, sizeof a4, "%d", self);
        char *argv[] = {(char *)MT_HELPER_NAME, a1, a2, a3, a4, NULL};
        spawn_args sa = {path, argv, {t->pagemap_fd, fd, self}, -1, (char *)stk + 2 * stack,
                         real_clone()};
        sigset_t saved;
        mti_sys_block_all(&saved);
        /* Exit signal 0 (the low byte): no SIGCHLD, invisible to wait(). */
        pid_t mid = sa.clone(spawn_middle, (char *)stk + stack, CLONE_VM | CLONE_VFORK | CLONE_FILES, &sa);
        int err = errno, st;
        if (mid > 0)
            while (waitpid(mid, &st, __WCLONE) < 0 && errno == EINTR)
                ;
        mti_sys_restore_mask(&saved);
        if (mid < 0)
            rc = -err;
        else if (sa.pidfd < 0)
            rc = -ECHILD;
        else if ((h->pidfd = mti_fd_park(sa.pidfd)) >= 0 && /* kept: out of the application's numbers */
                 (rc = mti_fd_identity(h->pidfd, &h->pidfd_dev, &h->pidfd_ino)) != 0) {
            syscall(SYS_pidfd_send_signal, h->pidfd, SIGKILL, NULL, 0);
            close(h->pidfd);
            h->pidfd = -1;
        }
    }
    if (stk != MAP_FAILED)
        mti_sys_munmap(stk, 2 * stack);
    if (fd >= 0)
        close(fd);
    if (self >= 0)
        close(self);
    if (rc)
        atomic_store_explicit(&h->err, rc, memory_order_relaxed);
    return rc;
}

/* ---- failure ---------------------------------------------------------------------------- */

/* Whether h->pidfd still names the helper's pidfd. The application may
 * close descriptors it did not open and get the number back for a file of
 * its own, a pidfd of one of its processes even: memtrack must then never
 * signal, poll or close it (killing a stuck helper would kill the
 * application's process). Since Linux 6.9 (pidfs) a pidfd's inode is its
 * process's, so the check is exact; on 6.7 and 6.8 pidfds share the
 * anonymous inode with eventfds, epoll and timer descriptors, and it tells
 * ours only from every other kind of file. */
static int pidfd_ours(const mt_helper *h)
{
    return h->pidfd >= 0 && mti_fd_names(h->pidfd, h->pidfd_dev, h->pidfd_ino);
}

/* The helper is unusable from now on: kill it (a stuck one too; whoever
 * adopted it reaps it), and keep `why` for mt_tracker_helper_status().
 * Where its pidfd's number was taken, it is forgotten: the helper, which
 * watches this process, exits with it. */
static void mark_dead(mt_helper *h, int why)
{
    pthread_mutex_lock(&h->lock);
    if (atomic_load_explicit(&h->err, memory_order_relaxed) == 0)
        atomic_store_explicit(&h->err, why, memory_order_release);
    if (pidfd_ours(h)) {
        /* By pidfd: never another process that got its pid. */
        syscall(SYS_pidfd_send_signal, h->pidfd, SIGKILL, NULL, 0);
        close(h->pidfd);
    }
    h->pidfd = -1;
    pthread_mutex_unlock(&h->lock);
}

/* Whether the helper exited (an exec failure, a crash, a kill): its pidfd
 * is readable then. A pidfd no longer ours counts as exited: the helper
 * cannot be watched any more (mark_dead then leaves the number alone). */
static int exited(mt_helper *h)
{
    pthread_mutex_lock(&h->lock);
    struct pollfd p = {.fd = h->pidfd, .events = POLLIN};
    int gone = h->pidfd >= 0 && (!pidfd_ours(h) || poll(&p, 1, 0) > 0);
    pthread_mutex_unlock(&h->lock);
    return gone;
}

static int usable(mt_helper *h)
{
    return h && atomic_load_explicit(&h->err, memory_order_acquire) == 0;
}

int mti_helper_status(const mt_tracker *t)
{
    if (!t->helper)
        return 0;
    int err = atomic_load_explicit(&t->helper->err, memory_order_acquire);
    if (err)
        return err;
    return atomic_load_explicit(&t->helper->shm->ready, memory_order_acquire) ? 1 : 2;
}

/* ---- jobs ------------------------------------------------------------------------------- */

/* Eligible: a live uffd range whose pages the helper may scan. */
static int eligible(const mt_range *r)
{
    return r->pend && r->backend == MT_TRACK_UFFD &&
           !atomic_load_explicit(&r->whole, memory_order_relaxed) &&
           !atomic_load_explicit(&r->gone_pages, memory_order_relaxed);
}

/* Fills job slots for the windows of r without one pending, queueing them
 * after `*queued` others not yet published. Returns 1 if any was. */
static int post_range(mt_helper *h, mt_range *r, uint32_t head, uint32_t *queued)
{
    mth_shm *sh = h->shm;
    int any = 0;
    size_t nwin = (r->npages + MTH_WINDOW_PAGES - 1) / MTH_WINDOW_PAGES;
    for (size_t w = 0; w < nwin && h->nfree; w++) {
        if (atomic_load_explicit(&r->pend[w], memory_order_relaxed))
            continue; /* already posted */
        uint32_t s = h->free[--h->nfree];
        mth_job *j = &sh->jobs[s];
        size_t p0 = w * MTH_WINDOW_PAGES;
        size_t np = r->npages - p0 < MTH_WINDOW_PAGES ? r->npages - p0 : MTH_WINDOW_PAGES;
        j->start = r->span_start + ((uint64_t)p0 << r->page_shift);
        j->end = j->start + ((uint64_t)np << r->page_shift);
        j->shift = r->page_shift;
        j->err = 0;
        atomic_store_explicit(&j->waiting, 0, memory_order_relaxed);
        atomic_store_explicit(&j->state, MTH_POSTED, memory_order_relaxed);
        /* A collector taking the window before the job is published waits
         * for it like for any other (the helper gets it below). */
        uint32_t none = 0;
        if (!atomic_compare_exchange_strong_explicit(&r->pend[w], &none, s + 1,
                                                     memory_order_relaxed, memory_order_relaxed)) {
            atomic_store_explicit(&j->state, MTH_FREE, memory_order_relaxed);
            h->free[h->nfree++] = s; /* a concurrent post got there first */
            continue;
        }
        atomic_store_explicit(&sh->queue[(head + *queued) % MTH_SLOTS], s, memory_order_relaxed);
        (*queued)++;
        any = 1;
    }
    return any;
}

long mti_helper_post(mt_tracker *t, mt_range *const *rs, size_t n)
{
    mt_helper *h = t->helper;
    if (!usable(h))
        return 0;
    if (!atomic_load_explicit(&h->shm->ready, memory_order_acquire)) {
        if (exited(h))
            mark_dead(h, -ECHILD); /* it never came up (exec failed?) */
        return 0;                  /* still starting: the collect scans itself */
    }
    mth_shm *sh = h->shm;
    long ranges = 0;
    uint32_t queued = 0;
    pthread_mutex_lock(&h->lock);
    uint32_t head = atomic_load_explicit(&sh->head, memory_order_relaxed);
    for (size_t i = 0; i < n && h->nfree; i++)
        if (eligible(rs[i]))
            ranges += post_range(h, rs[i], head, &queued);
    uint32_t idle = 0;
    if (queued) {
        /* One publication and one wake-up for the whole batch. seq_cst:
         * publishes the jobs (release) and pairs with the helper threads'
         * idle count (they count themselves, then re-read head). */
        atomic_fetch_add(&sh->head, queued);
        idle = atomic_load(&sh->idle);
    }
    pthread_mutex_unlock(&h->lock);
    if (idle) /* after the unlock: collectors freeing slots need not wait */
        futex_wake(&sh->head, queued < idle ? (int)queued : (int)idle);
    return ranges;
}

static int64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000ll + ts.tv_nsec;
}

/* Waits until job j is finished or the helper is gone; its final state, or
 * 0 when the helper died or got stuck before finishing it. */
static uint32_t await(mt_helper *h, mth_job *j)
{
    int64_t t0 = 0;
    for (int spin = 0;; spin++) {
        /* acquire: pairs with the helper's store of the state, so the bits
         * are visible. */
        uint32_t st = atomic_load_explicit(&j->state, memory_order_acquire);
        if (st == MTH_DONE || st == MTH_FAILED)
            return st;
        if (!usable(h))
            return 0;
        /* A short spin, then sleep: a thread of ours that keeps running
         * (or yields and runs again) is one more CPU each of the helper's
         * TLB flushes must interrupt, which is what the helper avoids. */
        if (spin < 32) {
            mti_cpu_relax();
            continue;
        }
        if (!t0)
            t0 = now_ns();
        atomic_store(&j->waiting, 1); /* seq_cst: see helper_main.c */
        st = atomic_load(&j->state);
        if (st != MTH_DONE && st != MTH_FAILED) {
            struct timespec to = {0, MT_HELPER_SLICE_NS};
            syscall(SYS_futex, &j->state, FUTEX_WAIT, st, &to, NULL, 0);
        }
        atomic_store_explicit(&j->waiting, 0, memory_order_relaxed);
        st = atomic_load_explicit(&j->state, memory_order_acquire);
        if (st == MTH_DONE || st == MTH_FAILED)
            return st;
        if (exited(h))
            mark_dead(h, -ECHILD);
        else if (now_ns() - t0 > MT_HELPER_STUCK_NS)
            mark_dead(h, -ETIMEDOUT);
    }
}

static void release_slot(mt_helper *h, uint32_t s)
{
    pthread_mutex_lock(&h->lock);
    atomic_store_explicit(&h->shm->jobs[s].state, MTH_FREE, memory_order_relaxed);
    h->free[h->nfree++] = s;
    pthread_mutex_unlock(&h->lock);
}

int mti_helper_take(mt_tracker *t, mt_range *r, size_t win, uint64_t *out, size_t nwords)
{
    if (!r->pend || !atomic_load_explicit(&r->pend[win], memory_order_relaxed))
        return 0; /* no helper, or nothing posted: the cheap common case */
    uint32_t s1 = atomic_exchange_explicit(&r->pend[win], 0, memory_order_relaxed);
    mt_helper *h = t->helper;
    if (!s1 || !h)
        return 0;
    mth_job *j = &h->shm->jobs[s1 - 1];
    uint32_t st = await(h, j);
    int rc;
    if (st == MTH_DONE) {
        for (size_t i = 0; i < nwords; i++)
            out[i] |= j->bits[i];
        rc = 1;
    } else
        rc = st == MTH_FAILED && j->err ? j->err : -ECHILD;
    if (st)
        release_slot(h, s1 - 1);
    /* else: the helper is dead; its slots are never used again. */
    return rc;
}

int mti_helper_pending(const mt_range *r, size_t win)
{
    return r->pend && atomic_load_explicit(&r->pend[win], memory_order_relaxed) != 0;
}

void mti_helper_drop_range(mt_tracker *t, mt_range *r)
{
    if (!r->pend)
        return;
    uint64_t sink[MTH_WORDS];
    size_t nwin = (r->npages + MTH_WINDOW_PAGES - 1) / MTH_WINDOW_PAGES;
    for (size_t w = 0; w < nwin; w++)
        (void)mti_helper_take(t, r, w, sink, 0); /* waits: no scan of ours outlives the range */
}

void mti_helper_stop(mt_tracker *t)
{
    mt_helper *h = t->helper;
    if (!h)
        return;
    mark_dead(h, -ESHUTDOWN);
    if (h->shm)
        mti_sys_munmap(h->shm, sizeof *h->shm);
    pthread_mutex_destroy(&h->lock);
    mti_arena_free(h, sizeof *h);
    t->helper = NULL;
}

void mti_helper_fork_child(mt_tracker *t)
{
    mt_helper *h = t->helper;
    if (!h)
        return;
    /* The helper serves the parent: never post to it, wait for it or kill
     * it from here. The child's uffd ranges are reported whole anyway. */
    if (pidfd_ours(h))
        close(h->pidfd);
    if (h->shm)
        mti_sys_munmap(h->shm, sizeof *h->shm);
    mti_arena_free(h, sizeof *h);
    t->helper = NULL;
}
