/* track: the collection helper (mt_tracker_opts.helper_threads), uffd only
 * (skips without it). Checked against a reference of the pages really
 * written:
 *  - collect_ahead + collect reports exactly the written pages, as the
 *    in-process scan does, over ranges of several windows with partial
 *    pages at both ends; writes after the helper's scan come with the next
 *    collect;
 *  - the helper is not the application's child as far as wait() and
 *    SIGCHLD go, also when it dies, and dies with the tracker;
 *  - a helper killed with jobs pending: nothing is lost (their windows are
 *    reported whole), the status says -ECHILD, and collection goes on
 *    in-process, exactly;
 *  - a missing helper program: -ENOENT, exact in-process collection;
 *  - fork of the application: the child forgets the helper, the parent
 *    keeps it and its own child is waited for as usual;
 *  - the application takes the number of memtrack's pidfd of the helper
 *    for a pidfd of its own child: a fork child's clean-up and the
 *    tracker's destruction (which kills the helper by pidfd) neither kill
 *    the application's child nor close its descriptor. */
#define _GNU_SOURCE
#include <dirent.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>

#include "fd_util.h"
#include "track_util.h"

#define NP (5 * 4096 + 7) /* five windows and a bit */

static _Atomic int g_sigchld;

static void on_sigchld(int sig)
{
    (void)sig;
    atomic_fetch_add(&g_sigchld, 1);
}

static void sleep_ms(long ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000l};
    nanosleep(&ts, NULL);
}

static mt_tracker *helper_tracker(unsigned threads)
{
    mt_tracker_opts o = {.backend = MT_TRACK_UFFD, .helper_threads = threads};
    mt_tracker *t;
    MT_CHECK_OK(mt_tracker_create(&o, &t));
    return t;
}

/* Waits (up to 10 s: a loaded machine) until the helper runs. */
static void await_running(mt_tracker *t)
{
    for (int i = 0; i < 1000 && mt_tracker_helper_status(t) == 2; i++)
        sleep_ms(10);
    MT_CHECK_INT_EQ(mt_tracker_helper_status(t), 1);
}

/* Whether process `pid` holds our pagemap open (the helper does). */
static int holds_our_pagemap(const char *pid)
{
    char dir[300], want[64];
    snprintf(dir, sizeof dir, "/proc/%s/fd", pid);
    snprintf(want, sizeof want, "/proc/%d/pagemap", (int)getpid());
    DIR *d = opendir(dir);
    if (!d)
        return 0;
    int found = 0;
    struct dirent *e;
    while (!found && (e = readdir(d))) {
        char path[600], link[256];
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        ssize_t n = readlink(path, link, sizeof link - 1);
        if (n > 0) {
            link[n] = 0;
            found = strcmp(link, want) == 0;
        }
    }
    closedir(d);
    return found;
}

/* The helper's pid: a live memtrack-scan holding our pagemap (/proc), -1. */
static pid_t helper_pid(void)
{
    DIR *d = opendir("/proc");
    MT_CHECK(d != NULL);
    pid_t found = -1;
    struct dirent *e;
    while ((e = readdir(d)) && found < 0) {
        char path[300], buf[512];
        snprintf(path, sizeof path, "/proc/%s/stat", e->d_name);
        FILE *f = fopen(path, "r");
        if (!f)
            continue;
        size_t n = fread(buf, 1, sizeof buf - 1, f);
        fclose(f);
        buf[n] = 0;
        char *rp = strrchr(buf, ')');
        if (strstr(buf, "(memtrack-scan)") && rp && rp[2] != 'Z' && holds_our_pagemap(e->d_name))
            found = (pid_t)atoi(buf);
    }
    closedir(d);
    return found;
}

/* Waits (up to 10 s) until the helper is gone. */
static void await_gone(void)
{
    for (int i = 0; i < 1000 && helper_pid() > 0; i++)
        sleep_ms(10);
    MT_CHECK_INT_EQ(helper_pid(), -1);
}

/* Writes a random subset of the pages of [m, m+NP pages), about 1 in
 * `every`, and records them in ref. */
static void write_random(unsigned char *m, unsigned char *ref, size_t ps, uint64_t *rng, unsigned every)
{
    for (size_t p = 0; p < NP; p++)
        if (mt_test_below(rng, every) == 0) {
            m[p * ps + mt_test_below(rng, ps)]++;
            ref[p] = 1;
        }
}

typedef struct writer_job {
    unsigned char *m, *ref;
    size_t ps;
    uint64_t rng;
    unsigned every;
} writer_job;

static void *writer(void *arg)
{
    writer_job *w = arg;
    write_random(w->m, w->ref, w->ps, &w->rng, w->every);
    return NULL;
}

static _Atomic int g_bystander_stop;

/* A thread that exists while the helper starts, doing nothing. */
static void *bystander(void *arg)
{
    (void)arg;
    while (!atomic_load(&g_bystander_stop))
        sleep_ms(1);
    return NULL;
}

/* A tracker whose 2-thread helper runs, tracking [m, m+len) as *id. */
static mt_tracker *running_helper_on(unsigned char *m, size_t len, mt_range_id *id)
{
    mt_tracker *t = helper_tracker(2);
    await_running(t);
    MT_CHECK_OK(mt_tracker_add(t, m, len, NULL, id));
    return t;
}

/* One collect round of range `id` (tracked bytes [start, ...) of the
 * mapping at m): what it reported, as pages of the mapping. */
static size_t collect_round(mt_tracker *t, mt_range_id id, unsigned char *m, uintptr_t start,
                            unsigned char *seen)
{
    memset(seen, 0, NP);
    return tu_collect_into(t, id, start, (uintptr_t)m, seen, NP);
}

static void test_exact(uint64_t seed)
{
    size_t ps = tu_page();
    unsigned char *m = tu_map(NP * ps), *ref = calloc(NP, 1), *seen = calloc(NP, 1);
    MT_CHECK(ref && seen);
    memset(m, 1, NP * ps); /* populated: the scan walks real page tables */
    /* The helper starts in a multi-threaded process, and threads start
     * after it (ThreadSanitizer took its start for a fork: they died). */
    pthread_t by;
    writer_job none = {m, ref, ps, 1, 1u << 30};
    MT_CHECK(pthread_create(&by, NULL, bystander, &none) == 0);
    mt_tracker *t = helper_tracker(4);
    await_running(t);
    /* Partial pages at both ends of the range. */
    uintptr_t start = (uintptr_t)m + 100;
    mt_range_id id;
    MT_CHECK_OK(mt_tracker_add(t, (void *)start, NP * ps - 300, NULL, &id));
    uint64_t rng = seed;
    for (int round = 0; round < 12; round++) {
        int ahead = round % 2 == 0; /* helper, in-process, helper, ... */
        memset(ref, 0, NP);
        if (round == 1) { /* a thread started after the helper (sanitizers' clone handling) */
            writer_job wj = {m, ref, ps, rng, 100};
            pthread_t th;
            MT_CHECK(pthread_create(&th, NULL, writer, &wj) == 0);
            MT_CHECK(pthread_join(th, NULL) == 0);
            rng = wj.rng + 1;
        } else
            write_random(m, ref, ps, &rng, round < 6 ? 100 : 3);
        if (ahead)
            MT_CHECK_INT_EQ(mt_tracker_collect_ahead(t, &id, 1), 1);
        /* A write after the helper's scan may come now or next time: it is
         * checked over the two rounds below. */
        size_t late = (size_t)mt_test_below(&rng, NP);
        m[late * ps + 200]++;
        collect_round(t, id, m, start, seen);
        for (size_t p = 0; p < NP; p++)
            if (p != late && seen[p] != ref[p]) {
                fprintf(stderr, "round %d (%s): page %zu reported %d written %d\n", round,
                        ahead ? "helper" : "in-process", p, seen[p], ref[p]);
                MT_CHECK(0);
            }
        if (!seen[late]) { /* the helper scanned it before the write */
            MT_CHECK(ahead);
            collect_round(t, id, m, start, seen);
            MT_CHECK(seen[late]);
            for (size_t p = 0; p < NP; p++)
                MT_CHECK(p == late || !seen[p]);
        }
    }
    MT_CHECK_INT_EQ(mt_tracker_helper_status(t), 1);
    atomic_store(&g_bystander_stop, 1);
    MT_CHECK(pthread_join(by, NULL) == 0);
    /* Jobs pending at remove and destroy are waited for and dropped. */
    m[5]++;
    MT_CHECK_INT_EQ(mt_tracker_collect_ahead(t, &id, 1), 1);
    MT_CHECK_INT_EQ(mt_tracker_peek(t, id, 0, 1), 1);
    MT_CHECK_OK(mt_tracker_remove(t, id));
    mt_tracker_destroy(t);
    await_gone(); /* killed */
    munmap(m, NP * ps);
    free(ref);
    free(seen);
}

static void test_invisible_and_death(uint64_t seed)
{
    size_t ps = tu_page();
    struct sigaction sa = {.sa_handler = on_sigchld}, old;
    sigemptyset(&sa.sa_mask);
    MT_CHECK_OK(sigaction(SIGCHLD, &sa, &old));
    atomic_store(&g_sigchld, 0);
    unsigned char *m = tu_map(NP * ps), *ref = calloc(NP, 1), *seen = calloc(NP, 1);
    MT_CHECK(ref && seen);
    mt_range_id id;
    mt_tracker *t = running_helper_on(m, NP * ps, &id);
    /* The application has no children as far as wait() knows. */
    int st;
    MT_CHECK_INT_EQ(waitpid(-1, &st, WNOHANG), -1);
    MT_CHECK_INT_EQ(errno, ECHILD);
    pid_t hp = helper_pid();
    MT_CHECK(hp > 0);
    MT_CHECK_OK(kill(hp, SIGKILL));
    await_gone();
    sleep_ms(50); /* a SIGCHLD would have come by now */
    MT_CHECK_INT_EQ(atomic_load(&g_sigchld), 0);
    MT_CHECK_INT_EQ(waitpid(-1, &st, WNOHANG), -1);
    /* Jobs posted to the dead helper: their windows are reported whole
     * (a dead helper may have re-protected pages it never reported). */
    uint64_t rng = seed;
    write_random(m, ref, ps, &rng, 50);
    MT_CHECK_INT_EQ(mt_tracker_collect_ahead(t, &id, 1), 1);
    size_t n = collect_round(t, id, m, (uintptr_t)m, seen);
    MT_CHECK_UINT_EQ(n, NP);
    MT_CHECK_INT_EQ(mt_tracker_helper_status(t), -ECHILD);
    mt_range_stats rs;
    MT_CHECK_OK(mt_tracker_stats(t, id, &rs));
    MT_CHECK(rs.degradations > 0);
    /* From now on in-process, exact. */
    for (int round = 0; round < 3; round++) {
        memset(ref, 0, NP);
        write_random(m, ref, ps, &rng, 20);
        MT_CHECK_INT_EQ(mt_tracker_collect_ahead(t, &id, 1), 0);
        collect_round(t, id, m, (uintptr_t)m, seen);
        MT_CHECK_MEM_EQ(seen, ref, NP);
    }
    MT_CHECK_INT_EQ(atomic_load(&g_sigchld), 0);
    mt_tracker_destroy(t);
    MT_CHECK_OK(sigaction(SIGCHLD, &old, NULL));
    munmap(m, NP * ps);
    free(ref);
    free(seen);
}

static void test_missing_program(uint64_t seed)
{
    size_t ps = tu_page();
    setenv("MEMTRACK_SCAN_HELPER", "/nonexistent/memtrack-scan", 1);
    mt_tracker *t = helper_tracker(2);
    unsetenv("MEMTRACK_SCAN_HELPER");
    MT_CHECK_INT_EQ(mt_tracker_helper_status(t), -ENOENT);
    unsigned char *m = tu_map(NP * ps), *ref = calloc(NP, 1), *seen = calloc(NP, 1);
    MT_CHECK(ref && seen);
    mt_range_id id;
    MT_CHECK_OK(mt_tracker_add(t, m, NP * ps, NULL, &id));
    uint64_t rng = seed ^ 1;
    write_random(m, ref, ps, &rng, 10);
    MT_CHECK_INT_EQ(mt_tracker_collect_ahead(t, &id, 1), 0);
    collect_round(t, id, m, (uintptr_t)m, seen);
    MT_CHECK_MEM_EQ(seen, ref, NP);
    mt_tracker_destroy(t);
    munmap(m, NP * ps);
    free(ref);
    free(seen);
}

static void test_fork(uint64_t seed)
{
    size_t ps = tu_page();
    unsigned char *m = tu_map(NP * ps), *ref = calloc(NP, 1), *seen = calloc(NP, 1);
    MT_CHECK(ref && seen);
    mt_range_id id;
    mt_tracker *t = running_helper_on(m, NP * ps, &id);
    uint64_t rng = seed ^ 2;
    write_random(m, ref, ps, &rng, 10);
    MT_CHECK_INT_EQ(mt_tracker_collect_ahead(t, &id, 1), 1); /* pending across the fork */
    pid_t child = fork();
    MT_CHECK(child >= 0);
    if (child == 0) {
        /* The child forgot the helper; its range is reported whole. */
        int ok = mt_tracker_helper_status(t) == 0 && mt_tracker_collect_ahead(t, &id, 1) == 0;
        m[0]++;
        size_t n = collect_round(t, id, m, (uintptr_t)m, seen);
        ok = ok && n == NP;
        mt_tracker_destroy(t); /* must not kill the parent's helper */
        _exit(ok ? 42 : 1);
    }
    int st;
    MT_CHECK_INT_EQ(waitpid(-1, &st, 0), child); /* only the real child */
    MT_CHECK(WIFEXITED(st));
    MT_CHECK_INT_EQ(WEXITSTATUS(st), 42);
    MT_CHECK_INT_EQ(mt_tracker_helper_status(t), 1);
    collect_round(t, id, m, (uintptr_t)m, seen);
    MT_CHECK_MEM_EQ(seen, ref, NP);
    memset(ref, 0, NP);
    write_random(m, ref, ps, &rng, 7);
    MT_CHECK_INT_EQ(mt_tracker_collect_ahead(t, &id, 1), 1);
    collect_round(t, id, m, (uintptr_t)m, seen);
    MT_CHECK_MEM_EQ(seen, ref, NP);
    MT_CHECK_INT_EQ(mt_tracker_helper_status(t), 1);
    mt_tracker_destroy(t);
    munmap(m, NP * ps);
    free(ref);
    free(seen);
}

/* Last: the helper whose pidfd was taken is not killed; it exits with
 * this process, which it watches. */
static void test_pidfd_taken(void)
{
    mt_tracker *t = helper_tracker(2);
    await_running(t);
    int num[4];
    MT_CHECK_INT_EQ(fd_numbers_naming("anon_inode:[pidfd]", num, 4), 1);
    pid_t child = fork();
    MT_CHECK(child >= 0);
    if (child == 0) {
        pause();
        _exit(0);
    }
    int cfd = (int)syscall(SYS_pidfd_open, child, 0);
    MT_CHECK(cfd >= 0);
    MT_CHECK(dup2(cfd, num[0]) == num[0]);
    close(cfd);
    struct stat was;
    MT_CHECK(fstat(num[0], &was) == 0);

    /* A fork child forgets the helper without closing the number. */
    pid_t fc = fork();
    MT_CHECK(fc >= 0);
    if (fc == 0)
        _exit(fd_still_names(num[0], &was) ? 0 : 1);
    int status;
    MT_CHECK(waitpid(fc, &status, 0) == fc);
    MT_CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);

    mt_tracker_destroy(t);
    MT_CHECK(fd_still_names(num[0], &was));
    sleep_ms(50);
    MT_CHECK(waitpid(child, &status, WNOHANG) == 0); /* still alive */
    MT_CHECK(kill(child, SIGKILL) == 0);
    MT_CHECK(waitpid(child, &status, 0) == child);
    MT_CHECK(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
    close(num[0]);
}

int main(int argc, char **argv)
{
    if (!mt_track_backend_available(MT_TRACK_UFFD)) {
        printf("skip: no uffd backend on this kernel\n");
        return 77;
    }
    uint64_t seed = mt_test_seed(argc, argv);
    test_exact(seed);
    test_invisible_and_death(seed);
    test_missing_program(seed);
    test_fork(seed);
    test_pidfd_taken();
    printf("ok\n");
    return 0;
}
