/* memtrack-scan: the collection helper program (docs/track.md, "Collection
 * helper"). The library starts it with vfork+exec (helper.c):
 *
 *   memtrack-scan PAGEMAP_FD SHM_FD THREADS APP_PIDFD
 *
 * PAGEMAP_FD is the application's /proc/self/pagemap, opened by the
 * application: a pagemap descriptor acts on the address space of the
 * process that opened it, whoever uses it. SHM_FD is the shared memory of
 * helper_abi.h. THREADS threads take jobs from the queue and scan; the main
 * thread exits when the application goes away (APP_PIDFD becomes readable,
 * or its address space is gone after an exec: the pagemap reads nothing).
 * Every other descriptor inherited is closed, standard ones go to
 * /dev/null: the helper must not keep the application's pipes open.
 * The helper never touches the application's memory otherwise. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/futex.h>
#include <poll.h>
#include <pthread.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "helper_abi.h"
#include "pmscan.h"

static mth_shm *g_shm;
static int g_pagemap;

static void futex_wait(_Atomic uint32_t *w, uint32_t val)
{
    syscall(SYS_futex, w, FUTEX_WAIT, val, NULL, NULL, 0);
}

static void futex_wake(_Atomic uint32_t *w, int n)
{
    syscall(SYS_futex, w, FUTEX_WAKE, n, NULL, NULL, 0);
}

/* The next posted slot, sleeping while there is none. */
static uint32_t claim(void)
{
    for (;;) {
        uint32_t t = atomic_load_explicit(&g_shm->tail, memory_order_relaxed);
        /* acquire: pairs with the poster's release increment of head, so
         * the queue entry and the job it names are visible. */
        uint32_t h = atomic_load_explicit(&g_shm->head, memory_order_acquire);
        if (t != h) {
            if (atomic_compare_exchange_weak_explicit(&g_shm->tail, &t, t + 1,
                                                      memory_order_acquire, memory_order_relaxed))
                return atomic_load_explicit(&g_shm->queue[t % MTH_SLOTS], memory_order_relaxed);
            continue;
        }
        /* seq_cst pair with the poster: it increments head, then reads
         * idle; we count ourselves idle, then re-read head in the wait. */
        atomic_fetch_add(&g_shm->idle, 1);
        if (atomic_load(&g_shm->head) == h)
            futex_wait(&g_shm->head, h);
        atomic_fetch_sub(&g_shm->idle, 1);
    }
}

static void *scanner(void *arg)
{
    (void)arg;
    for (;;) {
        uint32_t s = claim();
        if (s >= MTH_SLOTS)
            continue; /* a damaged queue: nothing we can scan */
        mth_job *j = &g_shm->jobs[s];
        atomic_store_explicit(&j->state, MTH_RUNNING, memory_order_relaxed);
        memset(j->bits, 0, sizeof j->bits);
        int rc = -EINVAL;
        if (j->end > j->start && ((j->end - j->start) >> j->shift) <= MTH_WINDOW_PAGES)
            rc = mti_pmscan(g_pagemap, (uintptr_t)j->start, (uintptr_t)j->end, j->shift, j->bits);
        j->err = rc;
        /* seq_cst: the collector sets `waiting` then re-reads `state`
         * before it sleeps; one of us sees the other. The store publishes
         * the bits (release is part of seq_cst). */
        atomic_store(&j->state, rc ? MTH_FAILED : MTH_DONE);
        if (atomic_load(&j->waiting))
            futex_wake(&j->state, 1);
    }
    return NULL;
}

/* Whether the application is still there: its pagemap reads entries while
 * its address space lives (after its exec or exit it reads nothing). */
static int app_alive(void)
{
    uint64_t e;
    return pread(g_pagemap, &e, sizeof e, 0) == (ssize_t)sizeof e;
}

/* Closes every descriptor but 0-2 and the `n` in keep[] (sorted). */
static void close_others(const int *keep, int n)
{
    int from = 3;
    for (int i = 0; i <= n; i++) {
        int to = i < n ? keep[i] - 1 : INT_MAX;
        if (to >= from)
            syscall(SYS_close_range, (unsigned)from, (unsigned)to, 0);
        if (i < n)
            from = keep[i] + 1;
    }
    int null = open("/dev/null", O_RDWR | O_CLOEXEC);
    if (null >= 0) {
        for (int fd = 0; fd < 3; fd++)
            dup2(null, fd);
        close(null);
    }
}

int main(int argc, char **argv)
{
    if (argc != 5)
        return 2;
    g_pagemap = atoi(argv[1]);
    int shm_fd = atoi(argv[2]);
    int nthreads = atoi(argv[3]);
    int pidfd = atoi(argv[4]);
    int keep[3] = {g_pagemap, shm_fd, pidfd};
    for (int i = 0; i < 3; i++) /* sort three */
        for (int k = i + 1; k < 3; k++)
            if (keep[k] < keep[i]) {
                int x = keep[i];
                keep[i] = keep[k];
                keep[k] = x;
            }
    close_others(keep, 3);
    /* Signals stay blocked (inherited from the start): a terminal's SIGINT
     * to the process group is the application's business; SIGKILL still
     * works, and the library uses it. */
    prctl(PR_SET_NAME, "memtrack-scan", 0, 0, 0);
    g_shm = mmap(NULL, sizeof *g_shm, PROT_READ | PROT_WRITE, MAP_SHARED, shm_fd, 0);
    if (g_shm == MAP_FAILED || g_shm->magic != MTH_MAGIC)
        return 3;
    close(shm_fd);
    if (nthreads < 1 || nthreads > (int)MTH_MAX_THREADS)
        return 2;
    if (!app_alive())
        return 4;
    for (int i = 0; i < nthreads; i++) {
        pthread_t th;
        pthread_attr_t at;
        pthread_attr_init(&at);
        pthread_attr_setstacksize(&at, 256u << 10); /* the scan's vector: 6 KiB */
        if (pthread_create(&th, &at, scanner, NULL) != 0)
            return 5;
        pthread_attr_destroy(&at);
    }
    atomic_store(&g_shm->ready, 1);
    futex_wake(&g_shm->ready, 1 << 30);
    /* The pidfd wakes us when the application exits; the one-second check
     * covers an exec. */
    for (;;) {
        struct pollfd p = {.fd = pidfd, .events = POLLIN};
        int n = poll(&p, 1, 1000);
        if ((n > 0 && (p.revents & (POLLIN | POLLHUP | POLLERR))) || !app_alive())
            _exit(0);
    }
}
