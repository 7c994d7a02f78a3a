/* track: the application's signal handling, with and without the interposer.
 *
 * Each case runs in a child process, for each backend:
 *  (a) the application installs its own SIGSEGV handler after memtrack's,
 *      without chaining (sigaction, signal, bsd_signal, sysv_signal, sigset,
 *      sigignore, siginterrupt, SA_RESETHAND): with the interposer tracking
 *      keeps working, its handler gets its own faults, and every disposition
 *      it reads back equals what a run without a tracker reads back (the two
 *      transcripts are compared); without it, mt_track_handler_status()
 *      says -1 and mt_track_reinstall_handler() restores tracking;
 *  (b) threads that block every signal (sigprocmask, pthread_sigmask, a
 *      thread created while blocked, sa_mask full) write tracked memory: with
 *      the interposer they work and read back the mask they set; a genuine
 *      fault while blocked kills the process as the kernel would; a
 *      SIGSEGV sent while blocked stays pending until unblocked. Without
 *      the interposer, a blocked thread's tracked write kills the process
 *      (documented limit, checked so it stays known); a POSIX timer's
 *      SIGEV_THREAD function (glibc runs it with every signal blocked)
 *      writes tracked memory and reads back its mask;
 *  (c) a SIGUSR1 handler that writes tracked memory, signalled 1000 times;
 *  (d) a SIGALRM storm whose handler writes tracked memory while the thread
 *      it interrupts is inside memtrack's fault handler: exact results (the
 *      handler blocks asynchronous signals; with or without interposer);
 *  (e) the application's handler, behind memtrack's, leaves every fault by
 *      siglongjmp, and the next faults come from deeper and shallower stack
 *      frames than the first: each reaches its handler (an abandoned chain
 *      level must not make a fresh fault look like a handler chaining back).
 * TSan runs asynchronous handlers with every signal blocked, so a handler's
 * tracked write cannot work under it: (c) and (d) write untracked memory
 * from the handler there. */
#define _GNU_SOURCE
#include <pthread.h>
#include <setjmp.h>
#include <stdatomic.h>
#include <time.h>
#include <sys/time.h>

#include "track_child.h"

/* Old interfaces applications still use: tested on purpose. */
__sighandler_t bsd_signal(int sig, __sighandler_t handler);
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"

static mt_track_backend g_be;
static int g_pre; /* interposer attached */

/* ---- a tracked region and an untracked read-only page ---- */

typedef struct env {
    mt_tracker *t;
    mt_range_id id;
    unsigned char *tracked; /* 8 pages */
    unsigned char *ro;
    unsigned char shadow[8 * 65536];
} env;

static env g_env;

static void setup(void)
{
    size_t ps = tu_page();
    mt_tracker_opts o = {.backend = g_be};
    MT_CHECK_OK(mt_tracker_create(&o, &g_env.t));
    g_env.tracked = tu_map(8 * ps);
    MT_CHECK_OK(mt_tracker_add(g_env.t, g_env.tracked, 8 * ps, NULL, &g_env.id));
    memcpy(g_env.shadow, g_env.tracked, 8 * ps);
    g_env.ro = mmap(NULL, ps, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    MT_CHECK(g_env.ro != MAP_FAILED);
}

/* Writes one byte per page of the tracked region and checks the collect. */
static void check_tracking(unsigned char v)
{
    size_t ps = tu_page();
    for (size_t p = 0; p < 8; p++)
        g_env.tracked[p * ps + v] = v;
    tc_shadow s = {g_env.tracked, g_env.shadow, 8 * ps};
    MT_CHECK_INT_EQ(tc_drain(g_env.t, g_env.id, g_env.tracked, &s), 8);
    MT_CHECK_MEM_EQ(g_env.shadow, g_env.tracked, 8 * ps);
}

/* ---- transcripts of what the application reads back ---- */

typedef struct rec {
    int tag;
    int flags;
    uintptr_t handler;
    unsigned long mask0;
} rec;

static rec g_recs[64];
static int g_nrecs;

static void note(int tag, const struct sigaction *sa)
{
    MT_CHECK(g_nrecs < 64);
    g_recs[g_nrecs++] = (rec){tag, sa->sa_flags, (uintptr_t)sa->sa_sigaction, sa->sa_mask.__val[0]};
}

static void note_handler(int tag, __sighandler_t h)
{
    MT_CHECK(g_nrecs < 64);
    g_recs[g_nrecs++] = (rec){tag, 0, (uintptr_t)h, 0};
}

static void note_mask(int tag)
{
    sigset_t cur;
    MT_CHECK(sigprocmask(SIG_SETMASK, NULL, &cur) == 0);
    MT_CHECK(g_nrecs < 64);
    g_recs[g_nrecs++] = (rec){tag, sigismember(&cur, SIGSEGV) * 2 + sigismember(&cur, SIGBUS), 0,
                              cur.__val[0]};
}

static int g_pipe[2];

static void send_transcript(void)
{
    MT_CHECK(write(g_pipe[1], &g_nrecs, sizeof g_nrecs) == sizeof g_nrecs);
    MT_CHECK(write(g_pipe[1], g_recs, sizeof(rec) * (size_t)g_nrecs) == (ssize_t)(sizeof(rec) * (size_t)g_nrecs));
}

static int recv_transcript(rec *out)
{
    int n;
    MT_CHECK(read(g_pipe[0], &n, sizeof n) == sizeof n);
    MT_CHECK(n >= 0 && n <= 64);
    size_t want = sizeof(rec) * (size_t)n, got = 0;
    while (got < want) {
        ssize_t k = read(g_pipe[0], (char *)out + got, want - got);
        MT_CHECK(k > 0);
        got += (size_t)k;
    }
    return n;
}

/* Runs `fn` twice in children, without and with a tracker; both must exit 0
 * and send identical transcripts. */
static int g_with_tracker;

static void compare_runs(const char *name, void (*fn)(void))
{
    MT_CHECK(pipe(g_pipe) == 0);
    rec a[64], b[64];
    g_with_tracker = 0;
    int st = tc_run_child(fn);
    MT_CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);
    int na = recv_transcript(a);
    g_with_tracker = 1;
    st = tc_run_child(fn);
    if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
        fprintf(stderr, "%s: child with tracker: status 0x%x\n", name, st);
        MT_CHECK(0);
    }
    int nb = recv_transcript(b);
    MT_CHECK_INT_EQ(na, nb);
    for (int i = 0; i < na; i++)
        if (a[i].tag != b[i].tag || a[i].flags != b[i].flags || a[i].handler != b[i].handler ||
            a[i].mask0 != b[i].mask0) {
            fprintf(stderr, "%s: read-back %d (tag %d) differs: without tracker flags 0x%x handler %#lx "
                            "mask %#lx; with tracker flags 0x%x handler %#lx mask %#lx\n",
                    name, i, a[i].tag, a[i].flags, (unsigned long)a[i].handler, a[i].mask0, b[i].flags,
                    (unsigned long)b[i].handler, b[i].mask0);
            MT_CHECK(0);
        }
    close(g_pipe[0]);
    close(g_pipe[1]);
    printf("  %-58s ok (%d read-backs identical)\n", name, na);
}

/* ---- (a) handlers installed after memtrack's ---- */

/* Without the interposer, a handler installed after memtrack's displaces
 * it: detected and undone (signal backend; uffd never installs one). */
static void fallback(void)
{
    if (g_pre || !g_with_tracker)
        return;
    if (g_be == MT_TRACK_SIGNAL) {
        MT_CHECK_INT_EQ(mt_track_handler_status(), -1);
        MT_CHECK_OK(mt_track_reinstall_handler());
        MT_CHECK_INT_EQ(mt_track_handler_status(), 1);
    } else {
        MT_CHECK_INT_EQ(mt_track_handler_status(), 0);
    }
}

static sigjmp_buf g_jmp;
static volatile sig_atomic_t g_calls;
static volatile uintptr_t g_addr;

static void own_info(int sig, siginfo_t *si, void *uc)
{
    (void)sig;
    (void)uc;
    g_calls++;
    g_addr = (uintptr_t)si->si_addr;
    siglongjmp(g_jmp, 1);
}

static void own_plain(int sig)
{
    (void)sig;
    g_calls++;
    siglongjmp(g_jmp, 1);
}

static void own_fault(void)
{
    if (sigsetjmp(g_jmp, 1) == 0)
        g_env.ro[17] = 1;
}

static void case_sigaction_after(void)
{
    struct sigaction pre, old, cur, h;
    MT_CHECK(sigaction(SIGSEGV, NULL, &pre) == 0);
    note(1, &pre);
    if (g_with_tracker)
        setup();
    else
        g_env.ro = mmap(NULL, tu_page(), PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    memset(&h, 0, sizeof h);
    h.sa_sigaction = own_info;
    h.sa_flags = SA_SIGINFO | SA_NODEFER;
    sigfillset(&h.sa_mask); /* SIGSEGV/SIGBUS included: read back as given */
    MT_CHECK(sigaction(SIGSEGV, &h, &old) == 0);
    note(2, &old); /* what was there before memtrack, not memtrack's */
    MT_CHECK(sigaction(SIGSEGV, NULL, &cur) == 0);
    note(3, &cur);
    if (g_with_tracker) {
        if (g_pre)
            MT_CHECK_INT_EQ(mt_track_handler_status(), 1);
        fallback();
        check_tracking(1);
    }
    own_fault();
    MT_CHECK_INT_EQ(g_calls, 1);
    MT_CHECK_UINT_EQ(g_addr, (uintptr_t)g_env.ro + 17);
    if (g_with_tracker)
        check_tracking(2);
    /* Replacing it again returns the application's handler. */
    struct sigaction dfl;
    memset(&dfl, 0, sizeof dfl);
    dfl.sa_handler = SIG_DFL;
    MT_CHECK(sigaction(SIGSEGV, &dfl, &old) == 0);
    note(4, &old);
    MT_CHECK(sigaction(SIGSEGV, &h, NULL) == 0);
    /* The same for SIGBUS. */
    MT_CHECK(sigaction(SIGBUS, &h, &old) == 0);
    note(5, &old);
    MT_CHECK(sigaction(SIGBUS, NULL, &cur) == 0);
    note(6, &cur);
    send_transcript();
}

/* Faults from `depth` frames of 2 KiB below the caller. */
static __attribute__((noinline)) void fault_at_depth(int depth)
{
    volatile char pad[2048];
    pad[0] = (char)depth;
    if (depth > 0)
        fault_at_depth(depth - 1);
    else
        own_fault();
    pad[1] = pad[0];
}

static void case_longjmp_depths(void)
{
    struct sigaction h;
    memset(&h, 0, sizeof h);
    h.sa_sigaction = own_info;
    h.sa_flags = SA_SIGINFO;
    /* Before the tracker: memtrack's handler chains to it with or without
     * the interposer. */
    MT_CHECK(sigaction(SIGSEGV, &h, NULL) == 0);
    setup();
    int depths[] = {0, 3, 1, 7, 0, 5, 2, 2, 0};
    for (int i = 0; i < (int)(sizeof depths / sizeof *depths); i++) {
        fault_at_depth(depths[i]);
        MT_CHECK_INT_EQ(g_calls, i + 1);
        MT_CHECK_UINT_EQ(g_addr, (uintptr_t)g_env.ro + 17);
        check_tracking((unsigned char)(i + 1));
    }
}

static void case_signal_family_after(void)
{
    if (g_with_tracker)
        setup();
    else
        g_env.ro = mmap(NULL, tu_page(), PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    struct sigaction cur;
    note_handler(10, signal(SIGSEGV, own_plain));
    MT_CHECK(sigaction(SIGSEGV, NULL, &cur) == 0);
    note(11, &cur);
    fallback();
    own_fault();
    MT_CHECK_INT_EQ(g_calls, 1);
    if (g_with_tracker)
        check_tracking(3);
    note_handler(12, bsd_signal(SIGSEGV, own_plain));
    MT_CHECK(sigaction(SIGSEGV, NULL, &cur) == 0);
    note(13, &cur);
    note_handler(14, sysv_signal(SIGSEGV, own_plain));
    MT_CHECK(sigaction(SIGSEGV, NULL, &cur) == 0);
    note(15, &cur); /* SA_RESETHAND|SA_NODEFER */
    fallback();
    own_fault(); /* one-shot handler: called, then reset to the default */
    MT_CHECK_INT_EQ(g_calls, 2);
    MT_CHECK(sigaction(SIGSEGV, NULL, &cur) == 0);
    if (g_pre || !g_with_tracker)
        note(16, &cur);
    note_handler(17, sigset(SIGSEGV, own_plain));
    MT_CHECK(sigaction(SIGSEGV, NULL, &cur) == 0);
    note(18, &cur);
    MT_CHECK(siginterrupt(SIGSEGV, 1) == 0);
    MT_CHECK(sigaction(SIGSEGV, NULL, &cur) == 0);
    note(19, &cur);
    note_handler(20, signal(SIGSEGV, own_plain)); /* not restartable now */
    MT_CHECK(sigaction(SIGSEGV, NULL, &cur) == 0);
    note(21, &cur);
    MT_CHECK(sigignore(SIGBUS) == 0);
    MT_CHECK(sigaction(SIGBUS, NULL, &cur) == 0);
    note(22, &cur);
    fallback();
    own_fault();
    MT_CHECK_INT_EQ(g_calls, 3);
    if (g_with_tracker)
        check_tracking(4);
    send_transcript();
}

static void case_resethand_kills(void)
{
    setup();
    struct sigaction h;
    memset(&h, 0, sizeof h);
    h.sa_sigaction = own_info;
    h.sa_flags = SA_SIGINFO | SA_RESETHAND;
    MT_CHECK(sigaction(SIGSEGV, &h, NULL) == 0);
    fallback();
    own_fault();
    MT_CHECK_INT_EQ(g_calls, 1);
    check_tracking(5);
    g_env.ro[1] = 1; /* the one-shot handler is used up: default action */
    _exit(3);
}

/* ---- (b) blocked signals ---- */

static void block_all(void)
{
    sigset_t all;
    sigfillset(&all);
    MT_CHECK(sigprocmask(SIG_BLOCK, &all, NULL) == 0);
}

static void maybe_check(unsigned char v)
{
    if (g_with_tracker)
        check_tracking(v);
}

static void *blocked_thread(void *arg)
{
    (void)arg;
    /* Created while the creator blocked everything: it starts blocked. */
    note_mask(31);
    maybe_check(6);
    sigset_t all;
    sigfillset(&all);
    MT_CHECK(pthread_sigmask(SIG_SETMASK, &all, NULL) == 0);
    maybe_check(7);
    note_mask(32);
    return NULL;
}

static void case_blocked_threads(void)
{
    if (g_with_tracker)
        setup();
    block_all();
    note_mask(30);
    maybe_check(8);
    pthread_t th;
    MT_CHECK(pthread_create(&th, NULL, blocked_thread, NULL) == 0);
    MT_CHECK(pthread_join(th, NULL) == 0);
    sigset_t none;
    sigemptyset(&none);
    MT_CHECK(sigprocmask(SIG_SETMASK, &none, NULL) == 0);
    note_mask(33);
    send_transcript();
}

/* A POSIX timer notifying by a thread: glibc runs its function in a thread
 * of its own with every signal blocked (preload/timers.c). */
static _Atomic int g_timer_done;
static void timer_fn(union sigval v)
{
    MT_CHECK(v.sival_int == 77);
    note_mask(35);
    maybe_check(10);
    atomic_store(&g_timer_done, 1);
}

static void case_timer_thread(void)
{
    if (g_with_tracker)
        setup();
    struct sigevent sev = {.sigev_notify = SIGEV_THREAD, .sigev_notify_function = timer_fn};
    sev.sigev_value.sival_int = 77;
    timer_t tm;
    MT_CHECK(timer_create(CLOCK_MONOTONIC, &sev, &tm) == 0);
    MT_CHECK(sev.sigev_notify_function == timer_fn && sev.sigev_value.sival_int == 77); /* left alone */
    struct itimerspec its = {.it_value = {0, 1000000}};
    MT_CHECK(timer_settime(tm, 0, &its, NULL) == 0);
    for (int i = 0; !atomic_load(&g_timer_done); i++) {
        MT_CHECK(i < 10000);
        usleep(1000);
    }
    MT_CHECK(timer_delete(tm) == 0);
    note_mask(36);
    send_transcript();
}

static void case_blocked_tracked_write_dies(void)
{
    /* Without the interposer: the kernel kills a thread that faults with
     * SIGSEGV blocked, tracked write or not. */
    setup();
    block_all();
    g_env.tracked[5] = 1;
    _exit(3);
}

static void case_blocked_fault_kills(void)
{
    setup();
    struct sigaction h;
    memset(&h, 0, sizeof h);
    h.sa_sigaction = own_info;
    h.sa_flags = SA_SIGINFO;
    MT_CHECK(sigaction(SIGSEGV, &h, NULL) == 0);
    block_all();
    if (g_pre || g_be == MT_TRACK_UFFD)
        check_tracking(9); /* (without the interposer this write would kill first) */
    g_env.ro[3] = 1; /* blocked: the application's handler must not run */
    _exit(3);
}

static void case_sent_while_blocked(void)
{
    setup();
    struct sigaction h;
    memset(&h, 0, sizeof h);
    h.sa_handler = own_plain;
    MT_CHECK(sigaction(SIGSEGV, &h, NULL) == 0);
    fallback();
    sigset_t segv, pend;
    sigemptyset(&segv);
    sigaddset(&segv, SIGSEGV);
    /* The jump restores the mask saved here, before the block. */
    if (sigsetjmp(g_jmp, 1) == 0) {
        MT_CHECK(sigprocmask(SIG_BLOCK, &segv, NULL) == 0);
        MT_CHECK(pthread_kill(pthread_self(), SIGSEGV) == 0);
        MT_CHECK_INT_EQ(g_calls, 0); /* pending */
        MT_CHECK(sigpending(&pend) == 0);
        MT_CHECK_INT_EQ(sigismember(&pend, SIGSEGV), 1);
        sigprocmask(SIG_UNBLOCK, &segv, NULL); /* delivered now */
        MT_CHECK(0);
    }
    MT_CHECK_INT_EQ(g_calls, 1);
    MT_CHECK(sigpending(&pend) == 0);
    MT_CHECK_INT_EQ(sigismember(&pend, SIGSEGV), 0);
    check_tracking(10);
}

/* ---- (c) an application handler that writes tracked memory ---- */

static unsigned char *g_hdest;
static _Atomic unsigned g_hcount;

static void usr1_writes(int sig)
{
    (void)sig;
    unsigned k = atomic_fetch_add(&g_hcount, 1);
    g_hdest[(size_t)(k * 4099) % (8 * tu_page())] = (unsigned char)(k | 1);
}

static _Atomic int g_stop;

static void *usr1_sender(void *arg)
{
    pthread_t target = *(pthread_t *)arg;
    for (int i = 0; i < 1000; i++) {
        pthread_kill(target, SIGUSR1);
        if (i % 16 == 0)
            sched_yield();
    }
    atomic_store(&g_stop, 1);
    return NULL;
}

static void case_handler_writes(void)
{
    setup();
    static unsigned char untracked[8 * 65536];
    g_hdest = TC_TSAN ? untracked : g_env.tracked;
    struct sigaction h;
    memset(&h, 0, sizeof h);
    h.sa_handler = usr1_writes;
    /* With the interposer the handler may block everything; without it,
     * SIGSEGV must stay open in it. */
    if (g_pre)
        sigfillset(&h.sa_mask);
    else
        sigemptyset(&h.sa_mask);
    MT_CHECK(sigaction(SIGUSR1, &h, NULL) == 0);
    pthread_t self = pthread_self(), th;
    pthread_create(&th, NULL, usr1_sender, &self);
    size_t ps = tu_page();
    tc_shadow s = {g_env.tracked, g_env.shadow, 8 * ps};
    unsigned v = 0;
    while (!atomic_load(&g_stop)) {
        g_env.tracked[(v * 7 % 8) * ps + 100] = (unsigned char)v;
        v++;
        if (v % 8 == 0)
            tc_drain(g_env.t, g_env.id, g_env.tracked, &s);
    }
    pthread_join(th, NULL);
    tc_drain(g_env.t, g_env.id, g_env.tracked, &s);
    MT_CHECK_MEM_EQ(g_env.shadow, g_env.tracked, 8 * ps);
    MT_CHECK(atomic_load(&g_hcount) > 0);
}

/* ---- (d) a timer storm during memtrack's own handler ---- */

static volatile sig_atomic_t g_alarms;

static void alarm_writes(int sig)
{
    (void)sig;
    unsigned k = (unsigned)g_alarms++;
    g_hdest[(size_t)(k * 611) % (8 * tu_page())] = (unsigned char)(k | 1);
}

static void case_alarm_storm(void)
{
    setup();
    static unsigned char untracked[8 * 65536];
    g_hdest = TC_TSAN ? untracked : g_env.tracked;
    struct sigaction h;
    memset(&h, 0, sizeof h);
    h.sa_handler = alarm_writes;
    sigemptyset(&h.sa_mask);
    h.sa_flags = SA_RESTART;
    MT_CHECK(sigaction(SIGALRM, &h, NULL) == 0);
    /* Each write after a collect faults: the timer often fires while
     * memtrack's handler runs. Sanitizer runtimes make every signal far
     * dearer (TSan defers and replays them): fewer, less often. */
#ifdef MT_SANITIZER_BUILD
    int rounds = 1500, every_us = 200;
#else
    int rounds = 8000, every_us = 20;
#endif
    struct itimerval it = {{0, every_us}, {0, every_us}};
    MT_CHECK(setitimer(ITIMER_REAL, &it, NULL) == 0);
    size_t ps = tu_page();
    tc_shadow s = {g_env.tracked, g_env.shadow, 8 * ps};
    for (int i = 0; i < rounds; i++) {
        for (size_t p = 0; p < 8; p++)
            g_env.tracked[p * ps + (size_t)i % ps] = (unsigned char)i;
        tc_drain(g_env.t, g_env.id, g_env.tracked, &s);
    }
    struct itimerval off = {{0, 0}, {0, 0}};
    setitimer(ITIMER_REAL, &off, NULL);
    tc_drain(g_env.t, g_env.id, g_env.tracked, &s);
    MT_CHECK_MEM_EQ(g_env.shadow, g_env.tracked, 8 * ps);
    printf("    (%d alarms during %d rounds of faults and collects)\n", (int)g_alarms, rounds);
}

int main(void)
{
    mt_tracker *probe;
    MT_CHECK_OK(mt_tracker_create(NULL, &probe));
    g_pre = tc_preloaded();
    mt_tracker_destroy(probe);
    printf("interposer %s\n", g_pre ? "attached" : "absent");
    mt_track_backend be[2];
    int nb = tu_backends(be);
    for (int i = 0; i < nb; i++) {
        g_be = be[i];
        printf(" backend %s\n", mt_track_backend_name(g_be));
        if (g_pre) {
            compare_runs("(a) sigaction after memtrack's, read-backs", case_sigaction_after);
            compare_runs("(a) signal/bsd/sysv/sigset/siginterrupt/sigignore", case_signal_family_after);
            compare_runs("(b) blocked threads write tracked memory", case_blocked_threads);
            if (!TC_TSAN) /* TSan's runtime cannot run SIGEV_THREAD functions (it crashes) */
                compare_runs("(b) a SIGEV_THREAD timer's function writes tracked memory", case_timer_thread);
        } else {
            g_with_tracker = 1;
            MT_CHECK(pipe(g_pipe) == 0);
            tc_expect_exit0("(a) handler after memtrack's: status -1, reinstall", case_sigaction_after);
            tc_expect_exit0("(a) signal family after memtrack's, reinstall", case_signal_family_after);
            close(g_pipe[0]);
            close(g_pipe[1]);
            if (g_be == MT_TRACK_SIGNAL)
                tc_expect_signal("(b) blocked thread's tracked write (limit)", case_blocked_tracked_write_dies,
                                 SIGSEGV);
        }
        g_with_tracker = 1;
        tc_expect_signal("(a) SA_RESETHAND used up: default action", case_resethand_kills, SIGSEGV);
        tc_expect_signal("(b) genuine fault while blocked kills", case_blocked_fault_kills, SIGSEGV);
        tc_expect_exit0("(b) SIGSEGV sent while blocked stays pending", case_sent_while_blocked);
        tc_expect_exit0(TC_TSAN ? "(c) SIGUSR1 handler storm (TSan: untracked)" : "(c) SIGUSR1 handler writes tracked memory",
                        case_handler_writes);
        tc_expect_exit0(TC_TSAN ? "(d) SIGALRM storm in faults (TSan: untracked)" : "(d) SIGALRM storm writes tracked memory",
                        case_alarm_storm);
        tc_expect_exit0("(e) handler leaves by siglongjmp, faults from any depth", case_longjmp_depths);
    }
    puts("track signals: ok");
    return 0;
}
