/* Helpers for the track tests that run cases in child processes, check real
 * page protections, and compare against a shadow updated from reported runs.
 *
 * Each case that must observe a crash, a chained handler, or process-wide
 * signal state runs in a forked child (like the kernel's mm selftests). */
#ifndef MT_TRACK_CHILD_H
#define MT_TRACK_CHILD_H

#define _GNU_SOURCE
#include <signal.h>
#include <stdio.h>
#include <sys/wait.h>

#include "track_util.h"

/* Sanitizer runtimes change what these tests look at (TSan runs
 * asynchronous handlers with every signal blocked). */
#if defined(__SANITIZE_THREAD__)
#define TC_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define TC_TSAN 1
#endif
#endif
#ifndef TC_TSAN
#define TC_TSAN 0
#endif

static inline int tc_run_child(void (*fn)(void))
{
    const char *nofork = getenv("MT_TEST_NOFORK"); /* debugging: first case in-process */
    if (nofork && *nofork == '1') {
        fn();
        exit(0);
    }
    fflush(stdout);
    fflush(stderr);
    pid_t pid = fork();
    MT_CHECK(pid >= 0);
    if (pid == 0) {
        alarm(120); /* a hang fails the case instead of the whole run */
        fn();
        fflush(stdout);
        _exit(0);
    }
    int st;
    MT_CHECK(waitpid(pid, &st, 0) == pid);
    return st;
}

static inline void tc_expect_exit0(const char *name, void (*fn)(void))
{
    int st = tc_run_child(fn);
    if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
        fprintf(stderr, "%s: child status 0x%x (exit %d, signal %d)\n", name, st,
                WIFEXITED(st) ? WEXITSTATUS(st) : -1, WIFSIGNALED(st) ? WTERMSIG(st) : 0);
        MT_CHECK(0);
    }
    printf("  %-58s ok\n", name);
}

static inline void tc_expect_signal(const char *name, void (*fn)(void), int sig)
{
    int st = tc_run_child(fn);
    if (!WIFSIGNALED(st) || WTERMSIG(st) != sig) {
        fprintf(stderr, "%s: expected death by signal %d, status 0x%x (exit %d)\n", name, sig, st,
                WIFEXITED(st) ? WEXITSTATUS(st) : -1);
        MT_CHECK(0);
    }
    printf("  %-58s ok (died of signal %d)\n", name, sig);
}

/* The real protection of the page at `addr`, from /proc/self/maps, as
 * PROT_* bits; -1 if unmapped. */
static inline int tc_real_prot(const void *addr)
{
    FILE *f = fopen("/proc/self/maps", "r");
    MT_CHECK(f != NULL);
    char line[512];
    int prot = -1;
    uintptr_t a = (uintptr_t)addr;
    while (fgets(line, sizeof line, f)) {
        unsigned long lo, hi;
        char perms[8];
        if (sscanf(line, "%lx-%lx %7s", &lo, &hi, perms) != 3)
            continue;
        if (a >= lo && a < hi) {
            prot = (perms[0] == 'r' ? PROT_READ : 0) | (perms[1] == 'w' ? PROT_WRITE : 0) |
                   (perms[2] == 'x' ? PROT_EXEC : 0);
            break;
        }
    }
    fclose(f);
    return prot;
}

/* 1 when the interposer must be (and is) attached: the preload variants of
 * the tests set MT_EXPECT_PRELOAD=1, and a test that meant to run with it
 * fails if it is not there. Call after a tracker exists. */
static inline int tc_preloaded(void)
{
    const char *want = getenv("MT_EXPECT_PRELOAD");
    int expect = want && *want == '1';
    int have = mt_track_preload_status() == 1;
    if (expect != have) {
        fprintf(stderr, "interposer: expected %s, status %d\n", expect ? "attached" : "absent",
                mt_track_preload_status());
        MT_CHECK(0);
    }
    return have;
}

/* For tests that need the interposer: 1 when it is attached (checked with a
 * tracker made for the purpose), else prints the skip line and returns 0;
 * the caller then exits 77. */
static inline int tc_need_interposer(void)
{
    mt_tracker *probe;
    MT_CHECK_OK(mt_tracker_create(NULL, &probe));
    int pre = tc_preloaded();
    mt_tracker_destroy(probe);
    if (!pre)
        printf("SKIP: needs the interposer (LD_PRELOAD=libmemtrack_preload.so)\n");
    return pre;
}

/* A region, a shadow of it, and the range ids covering it: the shadow is
 * updated only from reported runs, and must equal the region at the end. */
typedef struct tc_shadow {
    unsigned char *live, *shadow;
    size_t bytes;
} tc_shadow;

/* Drains range `id` (whose first byte is at `start`) into the shadow.
 * Returns the number of pages reported; -1 when collect said the range lost
 * pages (MT_EUNMAPPED). */
static inline long tc_drain(mt_tracker *t, mt_range_id id, const unsigned char *start, tc_shadow *s)
{
    mt_dirty_run runs[64];
    long pages = 0, n;
    do {
        n = mt_tracker_collect(t, id, runs, 64);
        if (n == MT_EUNMAPPED)
            return -1;
        MT_CHECK_OK(n);
        for (long i = 0; i < n; i++) {
            size_t off = (size_t)(start - s->live) + runs[i].offset;
            MT_CHECK(off + runs[i].length <= s->bytes);
            for (size_t x = off; x < off + runs[i].length; x++)
                s->shadow[x] = __atomic_load_n(&s->live[x], __ATOMIC_RELAXED);
            pages += (long)((runs[i].length + tu_page() - 1) / tu_page());
        }
    } while (n == 64);
    return pages;
}

#endif
