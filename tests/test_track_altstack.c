/* track: memtrack's fault handler on an application's small alternate
 * signal stack.
 *
 * The handler is installed with SA_ONSTACK (sigchain.c), so on a thread
 * that has an alternate stack it runs there, and so does the application's
 * handler it chains to, below memtrack's frames. Runtimes give every thread
 * one: Rust's standard library max(SIGSTKSZ, AT_MINSIGSTKSZ) with a guard
 * page below it, Go 32 KiB. A handler that needs more than such a stack
 * holds, less the kernel's signal frame, writes below it: into the guard
 * page (the process dies) or, without one, into whatever memory is there.
 *
 * Checked, with the signal backend (the uffd backend takes no signal for a
 * write; run too):
 *  - how deep memtrack's handler reaches on the alternate stack for a write
 *    fault on tracked memory, and how much deeper the application's handler
 *    starts when memtrack passes it a fault that is not its own, against
 *    the same handler run for a signal memtrack does not take (the kernel's
 *    frame alone): measured on a 64 KiB stack filled with a pattern, and
 *    held to MAX_OWN_USE bytes (not under a sanitizer, whose frames come
 *    in between);
 *  - how deep the crash report reaches (a fault memtrack reports before the
 *    process dies): its own part held to MAX_REPORT_OWN_USE, with the
 *    interposer;
 *  - 20,000 write faults on tracked memory, collected in between, from a
 *    thread whose alternate stack is exactly Rust's size with a guard page
 *    below it: no crash, every page written reported.
 * Usage: test_track_altstack. */
#define _GNU_SOURCE
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <sys/wait.h>
#include <stdio.h>
#include <string.h>
#include <sys/auxv.h>

#include "track_util.h"

#ifndef AT_MINSIGSTKSZ
#define AT_MINSIGSTKSZ 51
#endif

/* Sanitizers' runtimes put their own frames into every handler and grow
 * memtrack's: their builds print the figures and check the rest. */
#define SANITIZED TU_SANITIZED

/* What memtrack may add to the alternate stack, beyond the kernel's frame:
 * its handler for a tracked write, or its frames below a chained handler. */
#define MAX_OWN_USE 3072
/* The crash report's own part: 8 KiB less a 3 KiB kernel frame. */
#define MAX_REPORT_OWN_USE 5120
#define PATTERN 0xa5
#define BIG (64u << 10)
#define NPAGES 64
#define FAULTS 20000

typedef struct alt {
    unsigned char *map; /* guard page, then the stack */
    unsigned char *lo, *hi;
    size_t size;
} alt;

/* An alternate stack of `size` bytes with a PROT_NONE page below it, set for
 * the calling thread and filled with the pattern. */
static alt alt_on(size_t size)
{
    size_t ps = tu_page();
    size = (size + ps - 1) & ~(ps - 1);
    alt a = {tu_map(size + ps), NULL, NULL, size};
    MT_CHECK(mprotect(a.map, ps, PROT_NONE) == 0);
    a.lo = a.map + ps;
    a.hi = a.lo + size;
    memset(a.lo, PATTERN, size);
    stack_t ss = {.ss_sp = a.lo, .ss_size = size};
    MT_CHECK(sigaltstack(&ss, NULL) == 0);
    return a;
}

static void alt_off(alt *a)
{
    stack_t ss = {.ss_flags = SS_DISABLE};
    MT_CHECK(sigaltstack(&ss, NULL) == 0);
    munmap(a->map, a->size + tu_page());
}

/* Bytes of the stack written since it was filled: from the top down to
 * the lowest byte that lost the pattern. */
static size_t used(const alt *a)
{
    const unsigned char *p = a->lo;
    while (p < a->hi && *p == PATTERN)
        p++;
    return (size_t)(a->hi - p);
}

static void refill(alt *a) { memset(a->lo, PATTERN, a->size); }

/* The application's handler: where its frame starts, below the top. */
static _Atomic uintptr_t g_handler_sp;
static unsigned char *g_guarded; /* the application's own PROT_NONE page */

static void app_handler(int sig, siginfo_t *si, void *uc)
{
    (void)uc;
    volatile char here = 0;
    atomic_store(&g_handler_sp, (uintptr_t)&here);
    if (sig == SIGSEGV) {
        if ((unsigned char *)si->si_addr < g_guarded || (unsigned char *)si->si_addr >= g_guarded + tu_page())
            abort(); /* not its page: the test failed */
        mprotect(g_guarded, tu_page(), PROT_READ | PROT_WRITE);
    }
}

typedef struct measured {
    size_t tracked_write; /* deepest reach of a tracked write fault */
    size_t direct;        /* the application's handler for SIGUSR1: its frame below the kernel's */
    size_t chained;       /* the same handler, reached through memtrack for its own fault */
} measured;

static measured g_m;

static void *measure_thread(void *arg)
{
    mt_tracker *t = arg;
    alt a = alt_on(BIG);
    unsigned char *mem = tu_map(NPAGES * tu_page());
    mt_range_id id;
    MT_CHECK_OK(mt_tracker_add(t, mem, NPAGES * tu_page(), NULL, &id));
    size_t deepest = 0;
    for (int round = 0; round < 20; round++) {
        for (size_t p = 0; p < NPAGES; p++) {
            refill(&a);
            mem[p * tu_page() + (size_t)round] = (unsigned char)round;
            size_t u = used(&a);
            deepest = u > deepest ? u : deepest;
        }
        static unsigned char seen[NPAGES];
        tu_collect_into(t, id, (uintptr_t)mem, (uintptr_t)mem, seen, NPAGES);
    }
    g_m.tracked_write = deepest;
    /* The application's handler, run by the kernel directly... */
    refill(&a);
    MT_CHECK(raise(SIGUSR1) == 0);
    g_m.direct = (size_t)((uintptr_t)a.hi - atomic_load(&g_handler_sp));
    /* ...and for its own page's fault, which memtrack's handler passes on. */
    refill(&a);
    g_guarded[1] = 7;
    MT_CHECK(g_guarded[1] == 7);
    g_m.chained = (size_t)((uintptr_t)a.hi - atomic_load(&g_handler_sp));
    MT_CHECK_OK(mt_tracker_remove(t, id));
    munmap(mem, NPAGES * tu_page());
    alt_off(&a);
    return NULL;
}

/* Rust's size: max(SIGSTKSZ, AT_MINSIGSTKSZ) (std's stack_overflow.rs). */
static size_t rust_size(void)
{
    size_t min = (size_t)getauxval(AT_MINSIGSTKSZ);
    return min > 8192 ? min : 8192;
}

static void *small_thread(void *arg)
{
    mt_tracker *t = arg;
    alt a = alt_on(rust_size());
    unsigned char *mem = tu_map(NPAGES * tu_page());
    unsigned char written[NPAGES], seen[NPAGES];
    mt_range_id id;
    MT_CHECK_OK(mt_tracker_add(t, mem, NPAGES * tu_page(), NULL, &id));
    uint64_t rng = 12345;
    memset(written, 0, sizeof written);
    for (int i = 0; i < FAULTS; i++) {
        size_t p = mt_test_below(&rng, NPAGES);
        mem[p * tu_page() + mt_test_below(&rng, tu_page())] ^= 1;
        written[p] = 1;
        if (i % 97 == 96) {
            memset(seen, 0, sizeof seen);
            tu_collect_into(t, id, (uintptr_t)mem, (uintptr_t)mem, seen, NPAGES);
            for (size_t k = 0; k < NPAGES; k++)
                MT_CHECK(!written[k] || seen[k]); /* every page written reported */
            memset(written, 0, sizeof written);
        }
    }
    MT_CHECK_OK(mt_tracker_remove(t, id));
    munmap(mem, NPAGES * tu_page());
    alt_off(&a);
    return NULL;
}

/* The crash report (mt_track_set_fault_report): a fault in no tracked
 * memory with no handler of the application's left (a runtime's handler
 * that gives up restores the default, and the fault comes again) is
 * reported by memtrack's handler, on the alternate stack, before the
 * process dies. Measured in a child on a shared stack the parent reads. */
static size_t crash_report_depth(mt_track_backend b)
{
    size_t ps = tu_page();
    unsigned char *map = mmap(NULL, BIG + ps, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    MT_CHECK(map != MAP_FAILED);
    alt a = {map, map + ps, map + ps + BIG, BIG};
    memset(a.lo, PATTERN, BIG);
    fflush(stdout);
    pid_t pid = fork();
    MT_CHECK(pid >= 0);
    if (pid == 0) {
        mt_tracker_opts o = {.backend = b};
        mt_tracker *t;
        if (mt_tracker_create(&o, &t) != 0)
            _exit(2);
        int null = open("/dev/null", O_WRONLY);
        mt_track_set_fault_report(null); /* the report's words are not the point */
        struct sigaction dfl = {.sa_handler = SIG_DFL};
        sigaction(SIGSEGV, &dfl, NULL);
        mprotect(map, ps, PROT_NONE);
        stack_t ss = {.ss_sp = a.lo, .ss_size = BIG};
        if (sigaltstack(&ss, NULL) != 0)
            _exit(3);
        volatile uintptr_t wild = 8; /* the compiler must not see a constant null store */
        *(volatile int *)wild = 1;
        _exit(4);
    }
    int st;
    MT_CHECK(waitpid(pid, &st, 0) == pid);
    MT_CHECK(WIFSIGNALED(st) && WTERMSIG(st) == SIGSEGV);
    size_t u = used(&a);
    munmap(map, BIG + ps);
    return u;
}

static void run(mt_track_backend b)
{
    mt_tracker_opts o = {.backend = b};
    mt_tracker *t;
    MT_CHECK_OK(mt_tracker_create(&o, &t));
    pthread_t th;
    MT_CHECK(pthread_create(&th, NULL, measure_thread, t) == 0);
    MT_CHECK(pthread_join(th, NULL) == 0);
    size_t over = g_m.chained > g_m.direct ? g_m.chained - g_m.direct : 0;
    printf("%s: a tracked write's handler reached %zu bytes deep; the application's handler started %zu bytes "
           "below the top directly, %zu through memtrack (+%zu); Rust's stack here %zu bytes\n",
           mt_track_backend_name(b), g_m.tracked_write, g_m.direct, g_m.chained, over, rust_size());
    /* The kernel's frame is in both; memtrack's own part is the rest. */
    if (b == MT_TRACK_SIGNAL && !SANITIZED)
        MT_CHECK(g_m.tracked_write <= g_m.direct + MAX_OWN_USE);
    MT_CHECK(SANITIZED || over <= MAX_OWN_USE);
    /* Only the interposer keeps memtrack's handler when the application
     * sets the default (without it, the default replaces the handler). */
    if (mt_track_preload_status() == 1) {
        size_t report = crash_report_depth(b);
        printf("%s: the crash report reached %zu bytes deep\n", mt_track_backend_name(b), report);
        /* It ran, and its own part (beyond the kernel's frame) leaves room
         * in Rust's 8 KiB where that frame is 3 KiB, as on x86-64 with
         * AVX-512 (a machine with AMX has a far larger frame, and Rust's
         * stack grows with it: AT_MINSIGSTKSZ). */
        MT_CHECK(report > g_m.direct && (SANITIZED || report - g_m.direct <= MAX_REPORT_OWN_USE));
    } else {
        printf("%s: the crash report is measured with the interposer (the _preload variant)\n",
               mt_track_backend_name(b));
    }
    MT_CHECK(pthread_create(&th, NULL, small_thread, t) == 0);
    MT_CHECK(pthread_join(th, NULL) == 0);
    printf("%s: %d write faults on Rust's alternate stack size with a guard page: ok\n", mt_track_backend_name(b),
           FAULTS);
    mt_tracker_destroy(t);
}

int main(void)
{
    setvbuf(stdout, NULL, _IOLBF, 0);
    g_guarded = tu_map(tu_page());
    MT_CHECK(mprotect(g_guarded, tu_page(), PROT_NONE) == 0);
    /* Installed first, as an application's runtime installs its own at
     * start: memtrack chains to them. */
    struct sigaction sa = {.sa_sigaction = app_handler, .sa_flags = SA_SIGINFO | SA_ONSTACK | SA_NODEFER};
    MT_CHECK(sigaction(SIGSEGV, &sa, NULL) == 0);
    MT_CHECK(sigaction(SIGUSR1, &sa, NULL) == 0);
    mt_track_backend bs[2];
    int nb = tu_backends(bs);
    for (int i = 0; i < nb; i++) {
        run(bs[i]);
        MT_CHECK(mprotect(g_guarded, tu_page(), PROT_NONE) == 0);
    }
    printf("ok\n");
    return 0;
}
