/* track: fork(), with and without the interposer, both backends.
 *
 * 1. The child inherits the protections and (signal backend) the handler;
 *    its writes to tracked pages must not crash it and must not show up in
 *    the parent. The child may use the tracker: a signal range reports
 *    exactly what the child wrote; a uffd range is reported whole (the
 *    child's pages are not write-protected; its inherited descriptors act
 *    on the parent's memory and are closed); removing and destroying in the
 *    child leave the parent's tracking intact. The parent tracks exactly
 *    before and after.
 * 2. Shared memory (MAP_SHARED): the child writes the parent's own pages,
 *    unseen by the parent's page tables; the parent reports the range whole
 *    from then on. A child that only execs leaves signal ranges exact.
 * 3. Forks while other threads write tracked memory (faulting), collect,
 *    and remove/add ranges: every child writes, collects (or is told
 *    -ENOTRECOVERABLE when another thread was inside the tracker at the
 *    fork), unmaps tracked memory, destroys the tracker and exits through
 *    exit() within its time limit (no inherited lock may hang it); the
 *    parent's shadow stays exact. */
#define _GNU_SOURCE
#include <pthread.h>
#include <sched.h>

#include "track_child.h"

static void run(mt_track_backend b)
{
    size_t ps = tu_page(), np = 16;
    unsigned char *m = tu_map(np * ps);
    mt_tracker_opts o = {.backend = b};
    mt_tracker *t;
    MT_CHECK_OK(mt_tracker_create(&o, &t));
    mt_range_id id;
    MT_CHECK_OK(mt_tracker_add(t, m, np * ps, NULL, &id));
    m[1 * ps] = 1; /* before the fork, not yet collected */

    fflush(stdout);
    pid_t pid = fork();
    MT_CHECK(pid >= 0);
    if (pid == 0) {
        alarm(60);
        /* Child: write tracked pages, including one the parent wrote. */
        for (size_t p = 2; p < np; p += 3)
            m[p * ps + 5] = 0xc1;
        m[1 * ps + 1] = 0xc1;
        for (size_t p = 2; p < np; p += 3)
            if (m[p * ps + 5] != 0xc1)
                _exit(4);
        if (m[1 * ps] != 1)
            _exit(5);
        /* The child's own view of the tracker. */
        mt_dirty_run runs[32];
        long n = mt_tracker_collect(t, id, runs, 32);
        mt_range_stats st;
        if (mt_tracker_stats(t, id, &st) != 0)
            _exit(6);
        if (b == MT_TRACK_SIGNAL) {
            /* pages 1-2, 5, 8, 11, 14: the parent's unreported write too */
            if (n != 5 || runs[0].offset != 1 * ps || runs[0].length != 2 * ps || st.not_protected)
                _exit(7);
        } else {
            if (n != 1 || runs[0].offset != 0 || runs[0].length != np * ps || !st.not_protected)
                _exit(8);
            /* ... on every collect */
            if (mt_tracker_collect(t, id, runs, 32) != 1)
                _exit(9);
        }
        if (mt_tracker_remove(t, id) != 0)
            _exit(10);
        m[3 * ps] = 0xc2; /* plain memory now */
        mt_tracker_destroy(t);
        exit(0);
    }
    int st;
    MT_CHECK(waitpid(pid, &st, 0) == pid);
    if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
        fprintf(stderr, "child status 0x%x (exit %d)\n", st, WIFEXITED(st) ? WEXITSTATUS(st) : -1);
        MT_CHECK(0);
    }

    m[5 * ps] = 2; /* after the child ran */
    /* The child's writes are not ours: memory is copied on write. */
    MT_CHECK_INT_EQ(m[2 * ps + 5], 0);
    MT_CHECK_INT_EQ(m[1 * ps + 1], 0);
    MT_CHECK_INT_EQ(m[3 * ps], 0);
    mt_dirty_run runs[8];
    MT_CHECK_INT_EQ(mt_tracker_collect(t, id, runs, 8), 2);
    MT_CHECK_UINT_EQ(runs[0].offset, 1 * ps);
    MT_CHECK_UINT_EQ(runs[0].length, ps);
    MT_CHECK_UINT_EQ(runs[1].offset, 5 * ps);
    MT_CHECK_UINT_EQ(runs[1].length, ps);
    /* ...and keeps tracking afterwards (uffd: the child's remove/destroy did
     * not unregister or re-protect the parent's pages). */
    m[2 * ps] = 3;
    m[15 * ps] = 3;
    MT_CHECK_INT_EQ(mt_tracker_collect(t, id, runs, 8), 2);
    MT_CHECK_UINT_EQ(runs[0].offset, 2 * ps);
    MT_CHECK_UINT_EQ(runs[1].offset, 15 * ps);
    MT_CHECK_INT_EQ(mt_tracker_collect(t, id, runs, 8), 0);
    mt_range_stats rs;
    MT_CHECK_OK(mt_tracker_stats(t, id, &rs));
    MT_CHECK_INT_EQ(rs.not_protected, 0);
    mt_tracker_destroy(t);
    munmap(m, np * ps);
    printf("  %s: parent exact across fork; child wrote, collected, removed, destroyed\n",
           mt_track_backend_name(b));
}

/* ---- shared memory: a child writes the parent's pages ---- */

static unsigned char *map_shared(size_t bytes)
{
    void *p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    MT_CHECK(p != MAP_FAILED);
    return p;
}

static void wait_child(pid_t pid)
{
    int st;
    MT_CHECK(waitpid(pid, &st, 0) == pid);
    if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
        fprintf(stderr, "child status 0x%x\n", st);
        MT_CHECK(0);
    }
}

/* Memory mapped shared is the same pages in a forked child, which writes
 * them through page tables of its own: nothing is raised in the parent.
 * The parent must report such a range whole from then on (and say so),
 * while memory the child cannot write (private, MADV_DONTFORK) stays exact.
 * A child that only execs: signal ranges stay exact (the child is told at
 * its first write, and it made none); uffd ranges are taken whole at the
 * fork (there is no first write to see). */
static void shared_memory(mt_track_backend b)
{
    size_t ps = tu_page(), np = 8;
    unsigned char *first = map_shared(np * ps), *kept = map_shared(np * ps), *mine = tu_map(np * ps);
    MT_CHECK_OK(madvise(kept, np * ps, MADV_DONTFORK));
    mt_tracker_opts o = {.backend = b};
    mt_tracker *t;
    MT_CHECK_OK(mt_tracker_create(&o, &t));
    mt_range_id a, k, c;
    MT_CHECK_OK(mt_tracker_add(t, first, np * ps, NULL, &a));
    MT_CHECK_OK(mt_tracker_add(t, kept, np * ps, NULL, &k));
    MT_CHECK_OK(mt_tracker_add(t, mine, np * ps, NULL, &c));
    mt_dirty_run runs[16];
    mt_range_stats st;

    /* A child that execs at once, writing nothing. */
    fflush(stdout);
    pid_t pid = fork();
    MT_CHECK(pid >= 0);
    if (pid == 0) {
        execl("/bin/true", "true", (char *)NULL);
        _exit(127);
    }
    wait_child(pid);
    long n = mt_tracker_collect(t, a, runs, 16);
    MT_CHECK_OK(mt_tracker_stats(t, a, &st));
    if (b == MT_TRACK_SIGNAL) {
        MT_CHECK_INT_EQ(n, 0);
        MT_CHECK_INT_EQ(st.not_protected, 0);
    } else {
        MT_CHECK_INT_EQ(n, 1);
        MT_CHECK_UINT_EQ(runs[0].length, np * ps);
        MT_CHECK_INT_EQ(st.not_protected, 1);
    }

    /* Memory added after that child: a child that writes. */
    unsigned char *shared = map_shared(np * ps);
    mt_range_id s;
    MT_CHECK_OK(mt_tracker_add(t, shared, np * ps, NULL, &s));
    MT_CHECK_INT_EQ(mt_tracker_collect(t, s, runs, 16), 0);
    MT_CHECK_OK(mt_tracker_stats(t, s, &st));
    MT_CHECK_INT_EQ(st.not_protected, 0);
    fflush(stdout);
    pid = fork();
    MT_CHECK(pid >= 0);
    if (pid == 0) {
        alarm(30);
        shared[3 * ps + 7] = 0x77;
        mine[2 * ps] = 0x55; /* its own copy */
        _exit(0);
    }
    wait_child(pid);
    MT_CHECK_INT_EQ(shared[3 * ps + 7], 0x77); /* the parent's memory */
    MT_CHECK_INT_EQ(mine[2 * ps], 0);
    MT_CHECK_INT_EQ(mt_tracker_peek(t, s, 3 * ps, 1), 1);
    /* Reported: every page, on every collect from now on. */
    n = mt_tracker_collect(t, s, runs, 16);
    MT_CHECK_INT_EQ(n, 1);
    MT_CHECK_UINT_EQ(runs[0].offset, 0);
    MT_CHECK_UINT_EQ(runs[0].length, np * ps);
    MT_CHECK_OK(mt_tracker_stats(t, s, &st));
    MT_CHECK_INT_EQ(st.not_protected, 1);
    MT_CHECK_INT_EQ(mt_tracker_shared_with_child(t, s), 1);
    MT_CHECK_INT_EQ(mt_tracker_shared_with_child(t, k), 0);
    MT_CHECK_INT_EQ(mt_tracker_shared_with_child(t, c), 0);
    MT_CHECK_INT_EQ(mt_tracker_shared_with_child(t, a), b == MT_TRACK_UFFD);
    shared[5 * ps] = 1;
    MT_CHECK_INT_EQ(mt_tracker_collect(t, s, runs, 16), 1);
    MT_CHECK_UINT_EQ(runs[0].length, np * ps);
    /* What the child could not write stays exact. */
    MT_CHECK_INT_EQ(mt_tracker_collect(t, k, runs, 16), 0);
    MT_CHECK_INT_EQ(mt_tracker_collect(t, c, runs, 16), 0);
    MT_CHECK_OK(mt_tracker_stats(t, k, &st));
    MT_CHECK_INT_EQ(st.not_protected, 0);
    MT_CHECK_OK(mt_tracker_stats(t, c, &st));
    MT_CHECK_INT_EQ(st.not_protected, 0);
    kept[1 * ps] = 1;
    mine[6 * ps] = 1;
    MT_CHECK_INT_EQ(mt_tracker_collect(t, k, runs, 16), 1);
    MT_CHECK_UINT_EQ(runs[0].offset, 1 * ps);
    MT_CHECK_INT_EQ(mt_tracker_collect(t, c, runs, 16), 1);
    MT_CHECK_UINT_EQ(runs[0].offset, 6 * ps);

    /* Hot pages (signal backend): pages the parent keeps writable, which
     * the child inherits writable. Its write there must be told too (the
     * child protects its shared ranges again at the fork). */
    unsigned char *hotm = map_shared(np * ps);
    mt_range_opts ho = {.flags = MT_RANGE_HOT_PAGES};
    mt_range_id h;
    MT_CHECK_OK(mt_tracker_add(t, hotm, np * ps, &ho, &h));
    for (int pass = 0; pass < 6; pass++) { /* page 2 written in every pass: hot */
        hotm[2 * ps] = (unsigned char)pass;
        MT_CHECK(mt_tracker_collect(t, h, runs, 16) >= 1);
    }
    MT_CHECK(mt_tracker_collect(t, h, runs, 16) >= 0);
    MT_CHECK_OK(mt_tracker_stats(t, h, &st));
    if (b == MT_TRACK_SIGNAL)
        MT_CHECK(st.hot_pages >= 1);
    MT_CHECK_INT_EQ(st.not_protected, 0);
    fflush(stdout);
    pid = fork();
    MT_CHECK(pid >= 0);
    if (pid == 0) {
        alarm(30);
        hotm[2 * ps + 1] = 0x99;
        _exit(0);
    }
    wait_child(pid);
    MT_CHECK_INT_EQ(hotm[2 * ps + 1], 0x99);
    n = mt_tracker_collect(t, h, runs, 16);
    MT_CHECK_INT_EQ(n, 1);
    MT_CHECK_UINT_EQ(runs[0].length, np * ps);
    MT_CHECK_OK(mt_tracker_stats(t, h, &st));
    MT_CHECK_INT_EQ(st.not_protected, 1);

    mt_tracker_destroy(t);
    munmap(first, np * ps);
    munmap(kept, np * ps);
    munmap(mine, np * ps);
    munmap(shared, np * ps);
    munmap(hotm, np * ps);
    printf("  %s: shared memory a child wrote reported whole; private and MADV_DONTFORK exact\n",
           mt_track_backend_name(b));
}

/* ---- forks in the middle of everything ---- */

#define SNP 64
#define NRANGES 8

typedef struct storm {
    mt_tracker *t;
    unsigned char *m, *shadow;
    _Atomic mt_range_id ids[NRANGES];
    pthread_mutex_t ids_lock;
    _Atomic int stop;
    mt_track_backend b;
} storm;

static size_t range_off(int k) { return (size_t)k * (SNP / NRANGES) * 4096 + 100; }
static size_t range_len(void) { return (SNP / NRANGES) * 4096 - 200; }

static void *storm_writer(void *arg)
{
    storm *s = arg;
    uint64_t rng = (uintptr_t)&rng;
    while (!atomic_load(&s->stop)) {
        size_t off = (size_t)mt_test_below(&rng, SNP * 4096);
        __atomic_store_n(&s->m[off], (unsigned char)mt_test_rand(&rng), __ATOMIC_RELAXED);
    }
    return NULL;
}

static void drain_range(storm *s, int k)
{
    pthread_mutex_lock(&s->ids_lock);
    mt_range_id id = atomic_load(&s->ids[k]);
    tc_shadow sh = {s->m, s->shadow, SNP * 4096};
    MT_CHECK(tc_drain(s->t, id, s->m + range_off(k), &sh) >= 0);
    pthread_mutex_unlock(&s->ids_lock);
}

static void *storm_collector(void *arg)
{
    storm *s = arg;
    while (!atomic_load(&s->stop))
        for (int k = 0; k < NRANGES; k++)
            drain_range(s, k);
    return NULL;
}

static void *storm_churn(void *arg)
{
    storm *s = arg;
    while (!atomic_load(&s->stop)) {
        for (int k = 0; k < NRANGES; k += 2) {
            pthread_mutex_lock(&s->ids_lock);
            MT_CHECK_OK(mt_tracker_remove(s->t, atomic_load(&s->ids[k])));
            mt_range_opts o = {.backend = s->b};
            mt_range_id id;
            MT_CHECK_OK(mt_tracker_add(s->t, s->m + range_off(k), range_len(), &o, &id));
            for (size_t x = range_off(k); x < range_off(k) + range_len(); x++)
                s->shadow[x] = __atomic_load_n(&s->m[x], __ATOMIC_RELAXED);
            atomic_store(&s->ids[k], id);
            pthread_mutex_unlock(&s->ids_lock);
        }
        sched_yield();
    }
    return NULL;
}

static storm g_storm;

static void storm_child(void)
{
    storm *s = &g_storm;
    /* Alone in the child: the other threads are gone, mid-whatever. */
    for (size_t p = 0; p < SNP; p++)
        s->m[p * 4096 + 7] = 0xcc;
    mt_dirty_run runs[64];
    for (int k = 0; k < NRANGES; k++) {
        long n = mt_tracker_collect(s->t, atomic_load(&s->ids[k]), runs, 64);
        if (n < 0 && n != -ENOTRECOVERABLE && n != -ENOENT)
            _exit(20);
    }
    void *extra = malloc(100000);
    free(extra);
    /* The application's own memory calls in the child (hooks, with the
     * interposer). */
    if (munmap(s->m + 2 * 4096 * (SNP / NRANGES), 4096) != 0)
        _exit(21);
    mt_tracker_destroy(s->t);
#ifdef MT_SANITIZER_BUILD
    /* LSan's exit-time leak check locks ASan's allocator, which the fork
     * may have copied locked by another thread (GCC 12's runtime has no
     * fork handler for it): a sanitizer hang, not ours. */
    _exit(0);
#else
    exit(0);
#endif
}

static void fork_storm(mt_track_backend b)
{
    storm *s = &g_storm;
    memset(s, 0, sizeof *s);
    s->b = b;
    pthread_mutex_init(&s->ids_lock, NULL);
    s->m = tu_map(SNP * 4096);
    s->shadow = calloc(SNP * 4096, 1);
    MT_CHECK(s->shadow != NULL);
    mt_tracker_opts o = {.backend = b};
    MT_CHECK_OK(mt_tracker_create(&o, &s->t));
    for (int k = 0; k < NRANGES; k++) {
        mt_range_id id;
        MT_CHECK_OK(mt_tracker_add(s->t, s->m + range_off(k), range_len(), NULL, &id));
        atomic_store(&s->ids[k], id);
    }
    pthread_t th[5];
    for (int i = 0; i < 3; i++)
        pthread_create(&th[i], NULL, storm_writer, s);
    pthread_create(&th[3], NULL, storm_collector, s);
    pthread_create(&th[4], NULL, storm_churn, s);
#ifdef MT_SANITIZER_BUILD
    int forks = 8;
#else
    int forks = 40;
#endif
    for (int i = 0; i < forks; i++) {
        int st = tc_run_child(storm_child);
        if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
            fprintf(stderr, "fork %d: child status 0x%x (exit %d, signal %d)\n", i, st,
                    WIFEXITED(st) ? WEXITSTATUS(st) : -1, WIFSIGNALED(st) ? WTERMSIG(st) : 0);
            MT_CHECK(0);
        }
    }
    atomic_store(&s->stop, 1);
    for (int i = 0; i < 5; i++)
        pthread_join(th[i], NULL);
    for (int k = 0; k < NRANGES; k++) {
        drain_range(s, k);
        MT_CHECK_MEM_EQ(s->shadow + range_off(k), s->m + range_off(k), range_len());
    }
    printf("  %s: %d forks amid writers, a collector and remove/add churn: children exited, "
           "parent exact\n", mt_track_backend_name(b), forks);
    mt_tracker_destroy(s->t);
    munmap(s->m, SNP * 4096);
    free(s->shadow);
    pthread_mutex_destroy(&s->ids_lock);
}

int main(void)
{
    MT_CHECK(tu_page() == 4096 || tu_page() > 0);
    mt_tracker *probe;
    MT_CHECK_OK(mt_tracker_create(NULL, &probe));
    printf("interposer %s\n", tc_preloaded() ? "attached" : "absent");
    mt_tracker_destroy(probe);
    mt_track_backend be[2];
    int nb = tu_backends(be);
    for (int i = 0; i < nb; i++)
        run(be[i]);
    for (int i = 0; i < nb; i++)
        shared_memory(be[i]);
    if (tu_page() == 4096)
        for (int i = 0; i < nb; i++)
            fork_storm(be[i]);
    puts("track fork: ok");
    return 0;
}
