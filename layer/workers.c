/* A small pool of capture threads: a submit captures its exposed memories in
 * parallel (each memory's diff, packets and hash are independent of the
 * others'), so that a dense writer's capture costs about the largest memory's
 * diff rather than the sum of all of them.
 *
 * The submitting thread holds its device's lock and takes part in the work;
 * the workers touch only the memories they are handed (each by exactly one
 * thread) and thread-safe services (the tracker, the trace writer, atomic
 * statistics), never a lock of the layer. They block every signal but the
 * synchronous faults, so that no signal meant for the application is taken
 * by a thread of ours. Created on first use, min(4, CPUs / 2) capture threads
 * in all counting the caller (just the caller on up to 3 CPUs: it does
 * everything, as before), or MEMTRACK_CAPTURE_THREADS; a forked child starts
 * without them and creates its own if it ever captures.
 *
 * One memory can also be worth several threads (a 32 MiB readback buffer
 * the GPU rewrote, a big arena the app rewrote): its diff is cut into slices
 * shared with the pool (lt_workers_share). Pool threads take slices when
 * they are idle or have finished their own items, so a submit with one big
 * memory among small ones costs about its share of the big one's diff, and a
 * wait's sync-in (the app's thread, outside any job) gets the whole pool. */
#define _GNU_SOURCE
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <string.h>
#include <unistd.h>

#include "session.h"
#include "workers.h"

#define MAX_WORKERS 7

static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t g_go = PTHREAD_COND_INITIALIZER, g_done = PTHREAD_COND_INITIALIZER;
static int g_nworkers = -1; /* -1: not started yet */
static pthread_t g_threads[MAX_WORKERS];
/* The job being run (under g_lock): items are taken with an atomic index. */
static lt_work_fn g_fn;
static void **g_items;
static size_t g_nitems;
static _Atomic size_t g_next;
static unsigned g_generation, g_busy;

/* Shared slices (lt_workers_share), under g_lock: each slot is a sharer's
 * item list; pool threads claim items by index. A sharer waits only for
 * items already claimed, so nobody waits on work nobody does. */
#define MAX_SHARED 8
typedef struct shared {
    lt_work_fn fn;
    void **items;
    size_t n, next, done; /* n == 0: free slot */
} shared;
static shared g_shared[MAX_SHARED];
static unsigned g_nshared; /* slots with items left to claim */
static pthread_cond_t g_shared_done = PTHREAD_COND_INITIALIZER;

/* Claims and runs one item of s, if one is left (g_lock held; released
 * while the item runs). Returns 0 when none was. */
static int run_shared_item(shared *s)
{
    if (s->next >= s->n)
        return 0;
    size_t i = s->next++;
    if (s->next == s->n)
        g_nshared--;
    pthread_mutex_unlock(&g_lock);
    s->fn(s->items[i]);
    pthread_mutex_lock(&g_lock);
    if (++s->done == s->n)
        pthread_cond_broadcast(&g_shared_done);
    return 1;
}

/* Runs one unclaimed item of any sharer, if any (g_lock held). Returns 0
 * when there was none. */
static int help_one(void)
{
    for (int k = 0; g_nshared && k < MAX_SHARED; k++)
        if (run_shared_item(&g_shared[k]))
            return 1;
    return 0;
}

static void run_items(lt_work_fn fn, void **items, size_t n)
{
    for (size_t i; (i = atomic_fetch_add_explicit(&g_next, 1, memory_order_relaxed)) < n;)
        fn(items[i]);
}

static void *worker(void *arg)
{
    (void)arg;
    unsigned seen = 0;
    pthread_mutex_lock(&g_lock);
    for (;;) {
        while (g_generation == seen) {
            if (!help_one())
                pthread_cond_wait(&g_go, &g_lock);
        }
        seen = g_generation;
        lt_work_fn fn = g_fn;
        void **items = g_items;
        size_t n = g_nitems;
        g_busy++;
        pthread_mutex_unlock(&g_lock);
        run_items(fn, items, n);
        pthread_mutex_lock(&g_lock);
        /* Done with the job's items: help its slow ones' slices before
         * saying so (the submit waits for the slices either way). */
        while (help_one())
            ;
        if (--g_busy == 0)
            pthread_cond_broadcast(&g_done);
    }
    return NULL;
}

static void start(void)
{
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    int want = lt_cfg()->capture_threads ? lt_cfg()->capture_threads - 1
               : cpus >= 4 ? (int)(cpus / 2 < 4 ? cpus / 2 : 4) - 1 : 0;
    if (want > MAX_WORKERS)
        want = MAX_WORKERS;
    sigset_t all, old;
    sigfillset(&all);
    sigdelset(&all, SIGSEGV);
    sigdelset(&all, SIGBUS);
    pthread_sigmask(SIG_BLOCK, &all, &old);
    g_nworkers = 0;
    for (int i = 0; i < want; i++)
        if (pthread_create(&g_threads[g_nworkers], NULL, worker, NULL) == 0)
            g_nworkers++;
    pthread_sigmask(SIG_SETMASK, &old, NULL);
}

void lt_workers_run(lt_work_fn fn, void **items, size_t n)
{
    if (n == 0)
        return;
    pthread_mutex_lock(&g_lock);
    if (g_nworkers < 0)
        start();
    if (n == 1 || g_nworkers == 0) {
        pthread_mutex_unlock(&g_lock);
        for (size_t i = 0; i < n; i++)
            fn(items[i]);
        return;
    }
    /* One job at a time: a second device's submit waits for the first. */
    while (g_busy)
        pthread_cond_wait(&g_done, &g_lock);
    g_fn = fn;
    g_items = items;
    g_nitems = n;
    atomic_store_explicit(&g_next, 0, memory_order_relaxed);
    g_generation++;
    g_busy++; /* this thread */
    pthread_cond_broadcast(&g_go);
    pthread_mutex_unlock(&g_lock);
    run_items(fn, items, n);
    pthread_mutex_lock(&g_lock);
    g_busy--;
    /* Workers that woke up late find no item left and finish at once; those
     * still on a big memory may have shared its slices: take some. */
    while (g_busy)
        if (!help_one())
            pthread_cond_wait(&g_done, &g_lock);
    pthread_mutex_unlock(&g_lock);
}

int lt_workers_available(void)
{
    pthread_mutex_lock(&g_lock);
    if (g_nworkers < 0)
        start();
    int n = g_nworkers;
    pthread_mutex_unlock(&g_lock);
    return n > 0;
}

void lt_workers_share(lt_work_fn fn, void **items, size_t n)
{
    pthread_mutex_lock(&g_lock);
    if (g_nworkers < 0)
        start();
    shared *s = NULL;
    if (n > 1 && g_nworkers > 0)
        for (int k = 0; k < MAX_SHARED && !s; k++)
            if (g_shared[k].n == 0)
                s = &g_shared[k];
    if (!s) { /* nobody to share with, or every slot taken: alone */
        pthread_mutex_unlock(&g_lock);
        for (size_t i = 0; i < n; i++)
            fn(items[i]);
        return;
    }
    *s = (shared){.fn = fn, .items = items, .n = n};
    g_nshared++;
    pthread_cond_broadcast(&g_go);   /* idle pool threads */
    pthread_cond_broadcast(&g_done); /* a job's caller waiting for its last items */
    while (run_shared_item(s))
        ;
    while (s->done < s->n)
        pthread_cond_wait(&g_shared_done, &g_lock);
    s->n = 0; /* the slot is free again */
    pthread_mutex_unlock(&g_lock);
}

void lt_workers_after_fork(void)
{
    /* Only the forking thread exists in the child: no workers, and locks
     * that may have been held by them. */
    pthread_mutex_t m = PTHREAD_MUTEX_INITIALIZER;
    pthread_cond_t c = PTHREAD_COND_INITIALIZER;
    memcpy(&g_lock, &m, sizeof m);
    memcpy(&g_go, &c, sizeof c);
    memcpy(&g_done, &c, sizeof c);
    memcpy(&g_shared_done, &c, sizeof c);
    memset(g_shared, 0, sizeof g_shared);
    g_nshared = 0;
    g_nworkers = -1;
    g_busy = 0;
}
