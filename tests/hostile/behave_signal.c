/* Behaviours: the application's own signal handlers and masks. A capture
 * that tracks writes with page protection owns SIGSEGV; the application may
 * install its own handler after the layer did (without chaining), block every
 * signal in a thread, or write mapped memory from a signal handler, also from
 * a timer that fires while the tracker's own handler runs. */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#include "hv.h"

/* ---- an application-owned page guard, installed after the layer -------- */

static unsigned char *g_guard_page;
static volatile sig_atomic_t g_guard_hits;

static void guard_handler(int sig, siginfo_t *si, void *uc)
{
    (void)sig, (void)uc;
    uintptr_t a = (uintptr_t)si->si_addr;
    if (g_guard_page && a >= (uintptr_t)g_guard_page && a < (uintptr_t)g_guard_page + 4096) {
        mprotect(g_guard_page, 4096, PROT_READ | PROT_WRITE);
        g_guard_hits++;
        return;
    }
    /* Not ours and the app does not chain: the default action. */
    signal(SIGSEGV, SIG_DFL);
}

static void bus_handler(int sig) { (void)sig; }

static int sig_late_handler(hv *h, int argc, char **argv)
{
    (void)argc, (void)argv;
    int rc = hv_init(h, NULL);
    if (rc)
        return rc;
    hv_mem src, rb;
    hv_alloc(h, &src, 1u << 20, HV_SRC);
    hv_alloc(h, &rb, 1u << 20, HV_DST);
    /* A first submit: whatever the layer protects is protected now. This
     * handler then replaces whatever it installed, without chaining, as
     * many applications' handlers do, and the very next writes land on
     * protected pages. */
    hv_write(&src, 0, 4096 * 10, 1);
    if (hv_gpu_check(h, &src, &rb, "sig-late-handler: GPU copy before the handler"))
        return 1;
    g_guard_page = mmap(NULL, 4096, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    struct sigaction sa, old;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = guard_handler;
    sa.sa_flags = SA_SIGINFO;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGSEGV, &sa, NULL);
    signal(SIGBUS, bus_handler);
    int bad = 0;
    if (sigaction(SIGSEGV, NULL, &old) != 0 || !(old.sa_flags & SA_SIGINFO) ||
        old.sa_sigaction != guard_handler) {
        fprintf(stderr, "%s: sigaction does not read back the app's own SIGSEGV handler\n", hv_argv0);
        bad = 1;
    }
    if (signal(SIGBUS, SIG_DFL) != bus_handler) {
        fprintf(stderr, "%s: signal() does not read back the app's own SIGBUS handler\n", hv_argv0);
        bad = 1;
    }
    for (int f = 0; f < h->frames && !bad; f++) {
        mprotect(g_guard_page, 4096, PROT_READ);
        int hits = g_guard_hits;
        for (int k = 0; k < 40; k++)
            hv_write(&src, (VkDeviceSize)k * 20000 + (VkDeviceSize)f * 7, 3000, (uint64_t)(f * 100 + k));
        g_guard_page[f] = 1; /* the app's own guard fault: its handler must see it */
        if (g_guard_hits != hits + 1) {
            fprintf(stderr, "%s: the app's SIGSEGV handler saw %d faults, expected 1\n", hv_argv0,
                    (int)(g_guard_hits - hits));
            bad = 1;
        }
        bad |= hv_gpu_check(h, &src, &rb, "sig-late-handler: GPU copy");
    }
    hv_free(h, &src);
    hv_free(h, &rb);
    hv_fini(h);
    return bad;
}

/* ---- a thread that blocks every signal ---------------------------------- */

typedef struct blocked_arg {
    hv_mem *m;
    int frame, bad;
} blocked_arg;

static void *blocked_writer(void *arg)
{
    blocked_arg *a = arg;
    sigset_t all, back;
    sigfillset(&all);
    pthread_sigmask(SIG_BLOCK, &all, NULL);
    pthread_sigmask(SIG_SETMASK, NULL, &back);
    if (!sigismember(&back, SIGSEGV) || !sigismember(&back, SIGUSR1)) {
        fprintf(stderr, "%s: the thread's signal mask does not read back as set\n", hv_argv0);
        a->bad = 1;
    }
    for (int k = 0; k < 64; k++)
        hv_write(a->m, (VkDeviceSize)k * 9000 + (VkDeviceSize)a->frame, 2500,
                 (uint64_t)(a->frame * 1000 + k));
    sigprocmask(SIG_SETMASK, &all, NULL); /* and through the other call too */
    hv_write(a->m, 600000, 100, 5);
    return NULL;
}

static int sig_blocked_thread(hv *h, int argc, char **argv)
{
    (void)argc, (void)argv;
    int rc = hv_init(h, NULL);
    if (rc)
        return rc;
    hv_mem src, rb;
    hv_alloc(h, &src, 1u << 20, HV_SRC);
    hv_alloc(h, &rb, 1u << 20, HV_DST);
    int bad = 0;
    for (int f = 0; f < h->frames && !bad; f++) {
        blocked_arg a = {&src, f, 0};
        pthread_t th;
        pthread_create(&th, NULL, blocked_writer, &a);
        pthread_join(th, NULL);
        bad |= a.bad;
        bad |= hv_gpu_check(h, &src, &rb, "sig-blocked-thread: GPU copy");
    }
    hv_free(h, &src);
    hv_free(h, &rb);
    hv_fini(h);
    return bad;
}

/* A POSIX timer notifying by a thread: glibc runs the function in a thread
 * of its own with every signal blocked, which no pthread_create wrapper
 * sees (a frame-pacing or statistics timer writing a persistent mapping). */
static blocked_arg g_timer_arg;
static _Atomic int g_timer_fired;

static void timer_writer(union sigval v)
{
    blocked_arg *a = v.sival_ptr;
    sigset_t back;
    pthread_sigmask(SIG_SETMASK, NULL, &back);
    /* What glibc's thread has without a capture: SIGSEGV blocked. */
    if (!sigismember(&back, SIGSEGV))
        fprintf(stderr, "%s: the timer thread's mask reads back without SIGSEGV\n", hv_argv0), a->bad = 1;
    for (int k = 0; k < 64; k++)
        hv_write(a->m, (VkDeviceSize)k * 9000 + 7 + (VkDeviceSize)a->frame, 2500, (uint64_t)(a->frame * 77 + k));
    atomic_store(&g_timer_fired, 1);
}

static int sig_timer_thread(hv *h, int argc, char **argv)
{
    (void)argc, (void)argv;
    int rc = hv_init(h, NULL);
    if (rc)
        return rc;
    hv_mem src, rb;
    hv_alloc(h, &src, 1u << 20, HV_SRC);
    hv_alloc(h, &rb, 1u << 20, HV_DST);
    struct sigevent sev = {.sigev_notify = SIGEV_THREAD, .sigev_notify_function = timer_writer};
    sev.sigev_value.sival_ptr = &g_timer_arg;
    timer_t tm;
    if (timer_create(CLOCK_MONOTONIC, &sev, &tm) != 0)
        hv_die("timer_create: %s", strerror(errno));
    int bad = 0;
    for (int f = 0; f < h->frames && !bad; f++) {
        g_timer_arg = (blocked_arg){&src, f, 0};
        atomic_store(&g_timer_fired, 0);
        struct itimerspec its = {.it_value = {0, 2000000}};
        timer_settime(tm, 0, &its, NULL);
        for (int i = 0; !atomic_load(&g_timer_fired); i++) {
            if (i > 10000)
                hv_die("the timer's function did not run in 10 s");
            usleep(1000);
        }
        bad |= g_timer_arg.bad;
        bad |= hv_gpu_check(h, &src, &rb, "sig-timer-thread: GPU copy");
    }
    timer_delete(tm);
    hv_free(h, &src);
    hv_free(h, &rb);
    hv_fini(h);
    return bad;
}

/* ---- handlers that write mapped memory ----------------------------------- */

static hv_mem *g_sig_mem;
static volatile sig_atomic_t g_sig_count;
static VkDeviceSize g_sig_span;

/* Writes 48 bytes at a slot chosen by the count: every call a fresh page
 * until the span wraps, so most calls fault first. */
static void writing_handler(int sig)
{
    (void)sig;
    int n = g_sig_count++;
    VkDeviceSize off = ((VkDeviceSize)n * 4099) % (g_sig_span - 64);
    hv_write(g_sig_mem, off, 48, (uint64_t)n);
}

static void install_writing_handler(int sig, int full_mask)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = writing_handler;
    if (full_mask)
        sigfillset(&sa.sa_mask); /* blocks SIGSEGV too while it runs */
    else
        sigemptyset(&sa.sa_mask);
    sa.sa_flags = SA_RESTART;
    sigaction(sig, &sa, NULL);
}

static void *kicker(void *arg)
{
    pthread_t target = *(pthread_t *)arg;
    for (int i = 0; i < 50; i++)
        pthread_kill(target, SIGUSR1);
    return NULL;
}

static int sig_handler_writes(hv *h, int argc, char **argv)
{
    (void)argc, (void)argv;
    int rc = hv_init(h, NULL);
    if (rc)
        return rc;
    hv_mem src, rb;
    hv_alloc(h, &src, 1u << 20, HV_SRC);
    hv_alloc(h, &rb, 1u << 20, HV_DST);
    g_sig_mem = &src;
    g_sig_span = 1u << 19; /* the handler's half; the main thread writes the other */
    install_writing_handler(SIGUSR1, 1);
    int bad = 0;
    pthread_t self = pthread_self();
    for (int f = 0; f < h->frames && !bad; f++) {
        for (int i = 0; i < 50; i++)
            raise(SIGUSR1);
        pthread_t th;
        pthread_create(&th, NULL, kicker, &self);
        for (int k = 0; k < 50; k++)
            hv_write(&src, (1u << 19) + (VkDeviceSize)k * 9000, 1000, (uint64_t)(f * 77 + k));
        pthread_join(th, NULL);
        bad |= hv_gpu_check(h, &src, &rb, "sig-handler-writes: GPU copy");
    }
    if (g_sig_count < 50) {
        fprintf(stderr, "%s: the handler ran %d times\n", hv_argv0, (int)g_sig_count);
        bad = 1;
    }
    hv_free(h, &src);
    hv_free(h, &rb);
    hv_fini(h);
    return bad;
}

/* A 50 us SIGALRM timer whose handler (all signals masked) writes mapped
 * memory, while the main thread takes a first-write fault on page after
 * page: the timer keeps firing inside the tracker's handler. The timer
 * signals the main thread itself (as a process-wide one could land on a
 * driver thread, racing the submit: then whether the device sees the write
 * would be a matter of luck, with or without a capture). Stopping the timer
 * delivers a pending signal before the call returns: the writes are done by
 * the time the application submits. */
static int sig_timer(hv *h, int argc, char **argv)
{
    (void)argc, (void)argv;
    int rc = hv_init(h, NULL);
    if (rc)
        return rc;
    hv_mem src, rb;
    hv_alloc(h, &src, 8u << 20, HV_SRC);
    hv_alloc(h, &rb, 8u << 20, HV_DST);
    g_sig_mem = &src;
    g_sig_span = 1u << 20;
    install_writing_handler(SIGALRM, 1);
    int bad = 0;
    struct sigevent sev;
    memset(&sev, 0, sizeof sev);
    sev.sigev_notify = SIGEV_THREAD_ID;
    sev.sigev_signo = SIGALRM;
    sev._sigev_un._tid = (pid_t)syscall(SYS_gettid);
    timer_t timer;
    if (timer_create(CLOCK_MONOTONIC, &sev, &timer) != 0)
        hv_die("timer_create: %s", strerror(errno));
    for (int f = 0; f < h->frames && !bad; f++) {
        struct itimerspec it = {{0, 50000}, {0, 50000}};
        timer_settime(timer, 0, &it, NULL);
        /* ~1800 pages: a first-write fault each, every frame (re-armed at submit). */
        for (VkDeviceSize off = 1u << 20; off + 64 < src.size; off += 4096)
            hv_write(&src, off + (VkDeviceSize)f, 64, off ^ (uint64_t)f);
        struct itimerspec stop = {{0, 0}, {0, 0}};
        timer_settime(timer, 0, &stop, NULL);
        bad |= hv_gpu_check(h, &src, &rb, "sig-timer: GPU copy");
    }
    timer_delete(timer);
    if (g_sig_count < 2) {
        fprintf(stderr, "%s: the timer fired %d times\n", hv_argv0, (int)g_sig_count);
        bad = 1;
    }
    hv_free(h, &src);
    hv_free(h, &rb);
    hv_fini(h);
    return bad;
}

/* ---- dispositions read back as the application set them ----------------- */

static volatile sig_atomic_t g_usr2_seen;
static void on_usr2(int sig) { (void)sig; g_usr2_seen++; }

/* Whatever a capture installs to finish its trace on a fatal signal must be
 * invisible: every terminating signal reads back as the application left it
 * before any Vulkan (the default, or ignored: SIGHUP here, as under nohup),
 * an ignored one stays ignored, a handler the application installs runs and
 * reads back, and setting the default again reads back as the default. The
 * dispositions are set first because a shell may hand a background job
 * SIGINT and SIGQUIT ignored. */
static int sig_readback(hv *h, int argc, char **argv)
{
    (void)argc, (void)argv;
    static const int sigs[] = {SIGHUP, SIGINT, SIGQUIT, SIGABRT, SIGUSR1, SIGUSR2, SIGPIPE, SIGALRM, SIGTERM};
    for (size_t i = 0; i < sizeof sigs / sizeof sigs[0]; i++)
        signal(sigs[i], sigs[i] == SIGHUP ? SIG_IGN : SIG_DFL);
    int rc = hv_init(h, NULL);
    if (rc)
        return rc;
    hv_mem src, rb;
    hv_alloc(h, &src, 1u << 20, HV_SRC);
    hv_alloc(h, &rb, 1u << 20, HV_DST);
    int bad = 0;
    for (int f = 0; f < h->frames && !bad; f++) {
        hv_write(&src, 0, 100000, 40 + (uint64_t)f);
        bad |= hv_gpu_check(h, &src, &rb, "sig-readback: GPU copy");
        for (size_t i = 0; i < sizeof sigs / sizeof sigs[0]; i++) {
            struct sigaction old;
            void (*want)(int) = sigs[i] == SIGHUP ? SIG_IGN : SIG_DFL;
            if (sigaction(sigs[i], NULL, &old) != 0 || (old.sa_flags & SA_SIGINFO) || old.sa_handler != want) {
                fprintf(stderr, "%s: signal %d does not read back as %s\n", hv_argv0, sigs[i],
                        want == SIG_IGN ? "ignored" : "the default");
                bad = 1;
            }
        }
        raise(SIGHUP); /* ignored, as the application set it: it carries on */
        struct sigaction sa, old;
        memset(&sa, 0, sizeof sa);
        sa.sa_handler = on_usr2;
        sigemptyset(&sa.sa_mask);
        int before = g_usr2_seen;
        if (sigaction(SIGUSR2, &sa, &old) != 0 || old.sa_handler != SIG_DFL)
            bad = 1;
        raise(SIGUSR2);
        if (g_usr2_seen != before + 1) {
            fprintf(stderr, "%s: the application's SIGUSR2 handler did not run\n", hv_argv0);
            bad = 1;
        }
        sa.sa_handler = SIG_DFL;
        if (sigaction(SIGUSR2, &sa, &old) != 0 || old.sa_handler != on_usr2) {
            fprintf(stderr, "%s: SIGUSR2 does not read back the application's handler\n", hv_argv0);
            bad = 1;
        }
        if (sigaction(SIGUSR2, NULL, &old) != 0 || old.sa_handler != SIG_DFL)
            bad = 1;
    }
    hv_free(h, &src);
    hv_free(h, &rb);
    hv_fini(h);
    return bad;
}

/* ---- a language runtime's stack-overflow handler ------------------------ */

/* Rust's standard library, Go and the JVM install a SIGSEGV handler on an
 * alternate stack at start-up, before any Vulkan: a fault on a thread's
 * guard page is a stack overflow, reported by the runtime; anything else
 * gets the default action. Here a thread overflows its stack every frame;
 * the handler, on the thread's alternate stack, writes mapped memory (a
 * tracked write inside a handler that itself runs for a fault) and
 * siglongjmps out. */
typedef struct overflow_arg {
    hv_mem *m;
    int frame, hit, bad;
    uintptr_t stack_lo, guard_lo;
    sigjmp_buf back;
} overflow_arg;

static __thread overflow_arg *g_overflowing;

static void overflow_handler(int sig, siginfo_t *si, void *uc)
{
    (void)uc;
    overflow_arg *a = g_overflowing;
    uintptr_t addr = (uintptr_t)si->si_addr;
    if (sig == SIGSEGV && a && addr >= a->guard_lo && addr < a->stack_lo + 65536) {
        a->hit = 1;
        hv_write(a->m, 300000 + (VkDeviceSize)a->frame * 5000, 3000, 900 + (uint64_t)a->frame);
        siglongjmp(a->back, 1);
    }
    signal(sig, SIG_DFL); /* not an overflow: the default action on return */
}

static unsigned recurse(volatile unsigned char *prev, unsigned depth)
{
    volatile unsigned char frame[512]; /* below a page: every page is touched, the guard page too */
    if (depth > (1u << 30)) /* never: a 256 KiB stack ends long before */
        return 0;
    frame[0] = (unsigned char)depth;
    frame[511] = prev ? prev[0] : 0;
    return recurse(frame, depth + 1) + frame[100];
}

static void *overflowing_thread(void *arg)
{
    overflow_arg *a = arg;
    stack_t alt = {.ss_sp = malloc(1u << 16), .ss_size = 1u << 16}, none = {.ss_flags = SS_DISABLE};
    if (!alt.ss_sp || sigaltstack(&alt, NULL) != 0) {
        a->bad = 1;
        return NULL;
    }
    pthread_attr_t at;
    void *lo;
    size_t size, guard;
    pthread_getattr_np(pthread_self(), &at);
    pthread_attr_getstack(&at, &lo, &size);
    pthread_attr_getguardsize(&at, &guard);
    pthread_attr_destroy(&at);
    a->stack_lo = (uintptr_t)lo;
    a->guard_lo = (uintptr_t)lo - guard;
    g_overflowing = a;
    if (sigsetjmp(a->back, 1) == 0)
        (void)recurse(NULL, 0);
    g_overflowing = NULL;
    sigaltstack(&none, NULL);
    free(alt.ss_sp);
    return NULL;
}

static int sig_stack_overflow(hv *h, int argc, char **argv)
{
    (void)argc, (void)argv;
    struct sigaction sa, old;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = overflow_handler;
    sa.sa_flags = SA_SIGINFO | SA_ONSTACK;
    sigemptyset(&sa.sa_mask);
    if (sigaction(SIGSEGV, NULL, &old) == 0 && old.sa_handler == SIG_DFL)
        sigaction(SIGSEGV, &sa, NULL); /* as Rust does: only over the default */
    int rc = hv_init(h, NULL);
    if (rc)
        return rc;
    hv_mem src, rb;
    hv_alloc(h, &src, 1u << 20, HV_SRC);
    hv_alloc(h, &rb, 1u << 20, HV_DST);
    int bad = 0;
    for (int f = 0; f < h->frames && !bad; f++) {
        hv_write(&src, (VkDeviceSize)f * 4096 + 17, 9000, 77 + (uint64_t)f);
        overflow_arg a = {.m = &src, .frame = f};
        pthread_attr_t at;
        pthread_attr_init(&at);
        pthread_attr_setstacksize(&at, 256u << 10);
        pthread_t th;
        if (pthread_create(&th, &at, overflowing_thread, &a) != 0)
            hv_die("pthread_create failed");
        pthread_attr_destroy(&at);
        pthread_join(th, NULL);
        if (!a.hit || a.bad) {
            fprintf(stderr, "%s: the runtime's handler did not see the stack overflow\n", hv_argv0);
            bad = 1;
            break;
        }
        bad |= hv_gpu_check(h, &src, &rb, "sig-stack-overflow: GPU copy");
    }
    hv_free(h, &src);
    hv_free(h, &rb);
    hv_fini(h);
    return bad;
}

const hv_behaviour hv_signal_behaviours[] = {
    {"sig-late-handler", "own SIGSEGV/SIGBUS handlers installed after the layer, not chaining",
     sig_late_handler},
    {"sig-blocked-thread", "a thread that blocks every signal writes mapped memory", sig_blocked_thread},
    {"sig-timer-thread", "a POSIX timer's SIGEV_THREAD function (all signals blocked) writes mapped memory",
     sig_timer_thread},
    {"sig-handler-writes", "a SIGUSR1 handler (all signals masked) writes mapped memory",
     sig_handler_writes},
    {"sig-timer", "a 50 us SIGALRM whose handler writes mapped memory during page faults", sig_timer},
    {"sig-readback", "terminating signals read back as the defaults they are; own handlers work",
     sig_readback},
    {"sig-stack-overflow", "a runtime's alternate-stack SIGSEGV handler catches stack overflows",
     sig_stack_overflow},
    {NULL, NULL, NULL},
};
