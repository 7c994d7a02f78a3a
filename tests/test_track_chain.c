/* track: chaining of faults that are not tracked writes to the handler that
 * was installed before memtrack's, with that handler's exact semantics.
 * Every case runs in a child process (the handler is process-wide, and some
 * cases must die of the signal).
 *
 * Cases: SA_SIGINFO and plain previous handlers (for SEGV_ACCERR and
 * SEGV_MAPERR faults), SIG_DFL and SIG_IGN (faults kill the process with
 * SIGSEGV; a kill()-sent SIGSEGV is ignored under SIG_IGN), sa_mask /
 * SA_NODEFER / SA_RESETHAND, SIGBUS, an application handler installed after
 * memtrack's that chains (tracking keeps working) or does not (status
 * reports it; reinstall restores tracking, and a handler that chains back to
 * memtrack's is not called in a loop), and siglongjmp out of a chained
 * handler followed by more faults. */
#define _GNU_SOURCE
#include <fcntl.h>
#include <setjmp.h>
#include <signal.h>
#include <sys/wait.h>

#include "track_util.h"

static sigjmp_buf g_jmp;
static volatile sig_atomic_t g_calls, g_calls2, g_last_sig, g_last_code;
static volatile uintptr_t g_last_addr;
static volatile sig_atomic_t g_segv_blocked, g_usr1_blocked;
static struct sigaction g_app_prev; /* what the "application" replaced */
/* Unmapped addresses, behind volatile pointers so the compiler neither
 * warns about nor optimises the deliberate bad writes. */
static volatile int *volatile g_low16 = (volatile int *)16;
static volatile int *volatile g_low8 = (volatile int *)8;

static void note_mask(void)
{
    sigset_t cur;
    sigprocmask(SIG_SETMASK, NULL, &cur);
    g_segv_blocked = sigismember(&cur, SIGSEGV);
    g_usr1_blocked = sigismember(&cur, SIGUSR1);
}

static void info_recover(int sig, siginfo_t *si, void *uc)
{
    (void)uc;
    g_calls++;
    g_last_sig = sig;
    g_last_code = si->si_code;
    g_last_addr = (uintptr_t)si->si_addr;
    note_mask();
    siglongjmp(g_jmp, 1);
}

static void plain_recover(int sig)
{
    g_calls++;
    g_last_sig = sig;
    note_mask();
    siglongjmp(g_jmp, 1);
}

static void install(int sig, void (*info)(int, siginfo_t *, void *), void (*plain)(int), int flags,
                    int mask_usr1)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sigemptyset(&sa.sa_mask);
    if (mask_usr1)
        sigaddset(&sa.sa_mask, SIGUSR1);
    if (info) {
        sa.sa_sigaction = info;
        sa.sa_flags = SA_SIGINFO | flags;
    } else {
        sa.sa_handler = plain;
        sa.sa_flags = flags;
    }
    MT_CHECK(sigaction(sig, &sa, NULL) == 0);
}

/* A tracker with one signal-backend range, and a read-only page that is NOT
 * tracked (its writes are SEGV_ACCERR faults for the previous handler). */
typedef struct env {
    mt_tracker *t;
    mt_range_id id;
    unsigned char *tracked, *ro;
} env;

static env setup(void)
{
    env e;
    size_t ps = tu_page();
    mt_tracker_opts o = {.backend = MT_TRACK_SIGNAL};
    MT_CHECK_OK(mt_tracker_create(&o, &e.t));
    e.tracked = tu_map(4 * ps);
    MT_CHECK_OK(mt_tracker_add(e.t, e.tracked, 4 * ps, NULL, &e.id));
    e.ro = mmap(NULL, ps, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    MT_CHECK(e.ro != MAP_FAILED);
    return e;
}

/* A tracked write still works and is reported exactly. */
static void check_tracking(env *e, size_t page)
{
    e->tracked[page * tu_page() + 7] = 42;
    mt_dirty_run runs[4];
    MT_CHECK_INT_EQ(mt_tracker_collect(e->t, e->id, runs, 4), 1);
    MT_CHECK_UINT_EQ(runs[0].offset, page * tu_page());
}

static int run_child(void (*fn)(void))
{
    fflush(stdout);
    pid_t pid = fork();
    MT_CHECK(pid >= 0);
    if (pid == 0) {
        fn();
        _exit(0);
    }
    int st;
    MT_CHECK(waitpid(pid, &st, 0) == pid);
    return st;
}

static void expect_exit0(const char *name, void (*fn)(void))
{
    int st = run_child(fn);
    if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
        fprintf(stderr, "%s: child status 0x%x (signal %d)\n", name, st,
                WIFSIGNALED(st) ? WTERMSIG(st) : 0);
        MT_CHECK(0);
    }
    printf("  %-40s ok\n", name);
}

static void expect_signal(const char *name, void (*fn)(void), int sig)
{
    int st = run_child(fn);
    if (!WIFSIGNALED(st) || WTERMSIG(st) != sig) {
        fprintf(stderr, "%s: expected death by signal %d, status 0x%x\n", name, sig, st);
        MT_CHECK(0);
    }
    printf("  %-40s ok (died of signal %d)\n", name, sig);
}

/* ---- cases ---- */

static void case_siginfo(void)
{
    install(SIGSEGV, info_recover, NULL, 0, 1);
    env e = setup();
    check_tracking(&e, 1);
    if (sigsetjmp(g_jmp, 1) == 0)
        e.ro[5] = 1; /* ACCERR, untracked */
    MT_CHECK_INT_EQ(g_calls, 1);
    MT_CHECK_INT_EQ(g_last_sig, SIGSEGV);
    MT_CHECK_INT_EQ(g_last_code, SEGV_ACCERR);
    MT_CHECK_UINT_EQ(g_last_addr, (uintptr_t)e.ro + 5);
    MT_CHECK_INT_EQ(g_segv_blocked, 1); /* no SA_NODEFER: blocked in the handler */
    MT_CHECK_INT_EQ(g_usr1_blocked, 1); /* its sa_mask applied */
    if (sigsetjmp(g_jmp, 1) == 0)
        *g_low16 = 1; /* MAPERR */
    MT_CHECK_INT_EQ(g_calls, 2);
    MT_CHECK_INT_EQ(g_last_code, SEGV_MAPERR);
    MT_CHECK_UINT_EQ(g_last_addr, 16);
    /* After siglongjmp out of chained handlers, more faults of both kinds. */
    for (volatile int i = 0; i < 5; i++) {
        if (sigsetjmp(g_jmp, 1) == 0)
            e.ro[i] = 1;
        check_tracking(&e, (size_t)i % 4);
    }
    MT_CHECK_INT_EQ(g_calls, 7);
    MT_CHECK_INT_EQ(mt_track_handler_status(), 1);
}

static void case_plain_nodefer(void)
{
    install(SIGSEGV, NULL, plain_recover, SA_NODEFER, 0);
    env e = setup();
    if (sigsetjmp(g_jmp, 1) == 0)
        e.ro[0] = 1;
    MT_CHECK_INT_EQ(g_calls, 1);
    MT_CHECK_INT_EQ(g_last_sig, SIGSEGV);
    MT_CHECK_INT_EQ(g_segv_blocked, 0); /* SA_NODEFER honoured */
    MT_CHECK_INT_EQ(g_usr1_blocked, 0);
    check_tracking(&e, 2);
}

static void case_dfl_fault(void)
{
    install(SIGSEGV, NULL, SIG_DFL, 0, 0);
    env e = setup();
    check_tracking(&e, 0);
    e.ro[0] = 1; /* must die of SIGSEGV */
    _exit(3);
}

static void case_dfl_null(void)
{
    install(SIGSEGV, NULL, SIG_DFL, 0, 0); /* explicit: sanitizers install their own */
    env e = setup();
    (void)e;
    *g_low8 = 1;
    _exit(3);
}

static void case_dfl_kill(void)
{
    install(SIGSEGV, NULL, SIG_DFL, 0, 0);
    env e = setup();
    (void)e;
    kill(getpid(), SIGSEGV);
    _exit(3);
}

static void case_ign_fault(void)
{
    install(SIGSEGV, NULL, SIG_IGN, 0, 0);
    env e = setup();
    check_tracking(&e, 3);
    /* The kernel does not let a process ignore a fault: it dies. */
    e.ro[0] = 1;
    _exit(3);
}

static void case_ign_kill(void)
{
    install(SIGSEGV, NULL, SIG_IGN, 0, 0);
    env e = setup();
    kill(getpid(), SIGSEGV); /* a sent signal under SIG_IGN is ignored */
    check_tracking(&e, 0);
}

static void case_resethand(void)
{
    install(SIGSEGV, info_recover, NULL, SA_RESETHAND, 0);
    env e = setup();
    if (sigsetjmp(g_jmp, 1) == 0)
        e.ro[0] = 1;
    MT_CHECK_INT_EQ(g_calls, 1);
    check_tracking(&e, 1); /* memtrack's handler is still there */
    e.ro[0] = 1;           /* one-shot handler used up: default action */
    _exit(3);
}

static void case_sigbus(void)
{
    install(SIGBUS, info_recover, NULL, 0, 0);
    env e = setup();
    /* A real SIGBUS: touching a file mapping beyond the end of the file. */
    char path[] = "/tmp/mt_sigbus_XXXXXX";
    int fd = mkstemp(path);
    MT_CHECK(fd >= 0);
    unlink(path);
    MT_CHECK(ftruncate(fd, 0) == 0);
    volatile char *m = mmap(NULL, tu_page(), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    MT_CHECK(m != MAP_FAILED);
    if (sigsetjmp(g_jmp, 1) == 0)
        m[0] = 1;
    MT_CHECK_INT_EQ(g_calls, 1);
    MT_CHECK_INT_EQ(g_last_sig, SIGBUS);
    MT_CHECK_INT_EQ(g_last_code, BUS_ADRERR);
    check_tracking(&e, 2);
}

static void case_sigbus_dfl(void)
{
    install(SIGBUS, NULL, SIG_DFL, 0, 0);
    env e = setup();
    (void)e;
    char path[] = "/tmp/mt_sigbus_XXXXXX";
    int fd = mkstemp(path);
    unlink(path);
    volatile char *m = mmap(NULL, tu_page(), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    m[0] = 1;
    _exit(3);
}

/* The application installs its handler after memtrack's and chains to the
 * one it replaced (memtrack's) for faults it does not own. */
static void app_chaining(int sig, siginfo_t *si, void *uc)
{
    g_calls2++;
    if ((uintptr_t)si->si_addr == g_last_addr) {
        g_calls++;
        siglongjmp(g_jmp, 1); /* "its own" fault */
    }
    if (g_app_prev.sa_flags & SA_SIGINFO)
        g_app_prev.sa_sigaction(sig, si, uc);
    else if (g_app_prev.sa_handler != SIG_DFL && g_app_prev.sa_handler != SIG_IGN)
        g_app_prev.sa_handler(sig);
}

static void install_app_after(void (*fn)(int, siginfo_t *, void *))
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = fn;
    sa.sa_flags = SA_SIGINFO;
    sigemptyset(&sa.sa_mask);
    MT_CHECK(sigaction(SIGSEGV, &sa, &g_app_prev) == 0);
}

static void case_app_after_chaining(void)
{
    env e = setup();
    install_app_after(app_chaining);
    MT_CHECK_INT_EQ(mt_track_handler_status(), -1); /* displaced, and says so */
    g_last_addr = (uintptr_t)e.ro + 3;
    /* Tracked writes reach memtrack through the application's handler. */
    check_tracking(&e, 0);
    check_tracking(&e, 3);
    MT_CHECK(g_calls2 >= 2);
    MT_CHECK_INT_EQ(g_calls, 0);
    if (sigsetjmp(g_jmp, 1) == 0)
        e.ro[3] = 1; /* the application's own fault */
    MT_CHECK_INT_EQ(g_calls, 1);
}

/* The application's handler does not chain: tracked writes would crash.
 * Reinstalling puts memtrack on top with the application's handler next. */
static void app_not_chaining(int sig, siginfo_t *si, void *uc)
{
    (void)sig;
    (void)uc;
    g_calls++;
    g_last_addr = (uintptr_t)si->si_addr;
    siglongjmp(g_jmp, 1);
}

static void case_app_after_reinstall(void)
{
    env e = setup();
    install_app_after(app_not_chaining);
    MT_CHECK_INT_EQ(mt_track_handler_status(), -1);
    MT_CHECK_OK(mt_track_reinstall_handler());
    MT_CHECK_INT_EQ(mt_track_handler_status(), 1);
    MT_CHECK_OK(mt_track_reinstall_handler()); /* idempotent */
    check_tracking(&e, 1);
    if (sigsetjmp(g_jmp, 1) == 0)
        e.ro[9] = 1;
    MT_CHECK_INT_EQ(g_calls, 1);
    MT_CHECK_UINT_EQ(g_last_addr, (uintptr_t)e.ro + 9);
    check_tracking(&e, 2);
}

/* Original handler H0 (recovers), then memtrack, then an application handler
 * H1 that always chains to what it replaced (memtrack's). After reinstall,
 * an untracked fault goes memtrack -> H1 -> memtrack (re-entry) -> H0: each
 * called exactly once, no loop. Repeated after siglongjmp. */
static void h0(int sig, siginfo_t *si, void *uc)
{
    (void)sig;
    (void)si;
    (void)uc;
    g_calls++;
    siglongjmp(g_jmp, 1);
}

static void h1_always_chains(int sig, siginfo_t *si, void *uc)
{
    g_calls2++;
    g_app_prev.sa_sigaction(sig, si, uc);
}

static void case_reinstall_no_loop(void)
{
    install(SIGSEGV, h0, NULL, 0, 0);
    env e = setup();
    install_app_after(h1_always_chains);
    MT_CHECK((g_app_prev.sa_flags & SA_SIGINFO) != 0); /* it saved memtrack's */
    MT_CHECK_OK(mt_track_reinstall_handler());
    for (volatile int i = 1; i <= 3; i++) {
        if (sigsetjmp(g_jmp, 1) == 0)
            e.ro[i] = 1;
        MT_CHECK_INT_EQ(g_calls, i);
        MT_CHECK_INT_EQ(g_calls2, i);
        check_tracking(&e, (size_t)i);
    }
}

int main(void)
{
    expect_exit0("previous SA_SIGINFO handler, sa_mask", case_siginfo);
    expect_exit0("previous plain handler, SA_NODEFER", case_plain_nodefer);
    expect_signal("previous SIG_DFL, tracked-memory neighbour", case_dfl_fault, SIGSEGV);
    expect_signal("previous SIG_DFL, NULL write", case_dfl_null, SIGSEGV);
    expect_signal("previous SIG_DFL, kill(SIGSEGV)", case_dfl_kill, SIGSEGV);
    expect_signal("previous SIG_IGN, fault", case_ign_fault, SIGSEGV);
    expect_exit0("previous SIG_IGN, kill(SIGSEGV) ignored", case_ign_kill);
    expect_signal("previous SA_RESETHAND, second fault", case_resethand, SIGSEGV);
    expect_exit0("previous SIGBUS handler", case_sigbus);
    expect_signal("SIGBUS with SIG_DFL", case_sigbus_dfl, SIGBUS);
    expect_exit0("app handler after ours, chaining", case_app_after_chaining);
    expect_exit0("app handler after ours, reinstall", case_app_after_reinstall);
    expect_exit0("reinstall with a handler chaining back", case_reinstall_no_loop);
    puts("track chain: ok");
    return 0;
}
