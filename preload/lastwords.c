/* The ends of a process that run no exit handler: exec, _exit, and a signal
 * whose default action terminates. Before any of them the capture gets its
 * last words (track's last_words hook: the layer makes its trace complete),
 * so that a trace reads back up to its last submit however the application
 * ends.
 *
 * exec*, _exit and _Exit are wrapped. Terminating signals are guarded: once a
 * tracker attaches, every such signal whose disposition is the default gets
 * a guard handler, which says the last words, restores the default and lets
 * the signal take its course (a fault re-executes, a sent signal is raised
 * again), so the process ends exactly as it would have: same signal, same
 * status. The application never sees the guard: its sigaction() for a
 * guarded signal reads back the default it believes is there, and installing
 * its own handler replaces the guard (installing the default again brings it
 * back). SIGSEGV and SIGBUS are memtrack's handler's, which says the last
 * words itself before a fault takes the default action. */
#define _GNU_SOURCE
#include <errno.h>
#include <stdarg.h>
#include <string.h>
#include <unistd.h>

#include "preload.h"

static const int g_guard_sigs[] = {SIGHUP,  SIGINT,    SIGQUIT,   SIGILL,  SIGTRAP, SIGABRT, SIGFPE,
                                   SIGUSR1, SIGUSR2,   SIGPIPE,   SIGALRM, SIGTERM, SIGSTKFLT,
                                   SIGXCPU, SIGXFSZ,   SIGVTALRM, SIGPROF, SIGSYS,  SIGPWR};

static _Atomic int g_active;              /* guards installed (a tracker attached) */
static _Atomic unsigned char g_guarded[65]; /* 1: the guard is the real handler */
static struct sigaction g_view[65];       /* what the application sees while guarded */
static mtp_lock g_lock;

static void say_last_words(int why)
{
    const mt_preload_hooks *h = mtp_get_hooks();
    if (h && MT_PRELOAD_HAS(h, last_words) && h->last_words)
        h->last_words(why);
}

static int guardable(int sig)
{
    for (size_t i = 0; i < sizeof g_guard_sigs / sizeof g_guard_sigs[0]; i++)
        if (g_guard_sigs[i] == sig)
            return 1;
    return 0;
}

static int is_default(const struct sigaction *sa)
{
    return !(sa->sa_flags & SA_SIGINFO) && sa->sa_handler == SIG_DFL;
}

/* Async-signal-safe. */
static void guard(int sig, siginfo_t *si, void *uc)
{
    (void)uc;
    int saved = errno;
    say_last_words(sig);
    struct sigaction dfl;
    memset(&dfl, 0, sizeof dfl);
    dfl.sa_handler = SIG_DFL;
    sigemptyset(&dfl.sa_mask);
    REAL(sigaction)(sig, &dfl, NULL);
    atomic_store_explicit(&g_guarded[sig], 0, memory_order_relaxed);
    /* A fault (the kernel's SIGILL, SIGFPE, SIGTRAP, SIGSYS) re-executes on
     * return and ends the process with its own context; a sent signal (or
     * abort()'s SIGABRT) is raised again and taken once unblocked. */
    int fault = si && si->si_code > 0 && (sig == SIGILL || sig == SIGFPE || sig == SIGTRAP || sig == SIGSYS);
    if (!fault) {
        sigset_t s;
        sigemptyset(&s);
        sigaddset(&s, sig);
        raise(sig);
        REAL(pthread_sigmask)(SIG_UNBLOCK, &s, NULL);
    }
    errno = saved;
}

/* Makes the guard the real handler of sig (g_lock held). */
static int install_guard(int sig)
{
    struct sigaction g;
    memset(&g, 0, sizeof g);
    g.sa_sigaction = guard;
    g.sa_flags = SA_SIGINFO | SA_ONSTACK | SA_RESTART;
    sigfillset(&g.sa_mask);
    /* Tracked writes must stay possible while the last words are said. */
    sigdelset(&g.sa_mask, SIGSEGV);
    sigdelset(&g.sa_mask, SIGBUS);
    if (REAL(sigaction)(sig, &g, NULL) != 0)
        return -1;
    atomic_store_explicit(&g_guarded[sig], 1, memory_order_relaxed);
    return 0;
}

void mtp_guard_attach(void)
{
    mtp_lock_take(&g_lock);
    if (!atomic_load(&g_active)) {
        for (size_t i = 0; i < sizeof g_guard_sigs / sizeof g_guard_sigs[0]; i++) {
            int sig = g_guard_sigs[i];
            struct sigaction cur;
            /* Only defaults are guarded: a handler the application installed
             * (or an inherited SIG_IGN) is its own business. */
            if (mtp_masked_sigaction(sig, NULL, &cur) == 0 && is_default(&cur)) {
                g_view[sig] = cur;
                install_guard(sig);
            }
        }
        atomic_store(&g_active, 1);
    }
    mtp_lock_drop(&g_lock);
}

int mtp_guard_sigaction(int sig, const struct sigaction *act, struct sigaction *old)
{
    if (sig <= 0 || sig > 64 || !atomic_load_explicit(&g_active, memory_order_relaxed) || !guardable(sig))
        return -2;
    mtp_lock_take(&g_lock);
    int rc = 0, e = 0;
    if (atomic_load_explicit(&g_guarded[sig], memory_order_relaxed)) {
        struct sigaction was = g_view[sig];
        if (act && is_default(act)) {
            g_view[sig] = *act; /* still the default: the guard stays */
        } else if (act) {
            rc = mtp_masked_sigaction(sig, act, NULL);
            e = errno;
            if (rc == 0)
                atomic_store_explicit(&g_guarded[sig], 0, memory_order_relaxed);
        }
        if (rc == 0 && old)
            *old = was;
    } else if (act && is_default(act)) {
        /* Back to the default: what it replaces is read back, then guarded. */
        rc = mtp_masked_sigaction(sig, NULL, old);
        e = errno;
        if (rc == 0) {
            g_view[sig] = *act;
            install_guard(sig);
        }
    } else {
        rc = mtp_masked_sigaction(sig, act, old);
        e = errno;
    }
    mtp_lock_drop(&g_lock);
    errno = e;
    return rc;
}

/* ---- exec and _exit ------------------------------------------------------ */

MTP_EXPORT int execve(const char *path, char *const argv[], char *const envp[])
{
    say_last_words(MT_PRELOAD_LAST_EXEC);
    return REAL(execve)(path, argv, envp);
}

MTP_EXPORT int execv(const char *path, char *const argv[])
{
    say_last_words(MT_PRELOAD_LAST_EXEC);
    return REAL(execv)(path, argv);
}

MTP_EXPORT int execvp(const char *file, char *const argv[])
{
    say_last_words(MT_PRELOAD_LAST_EXEC);
    return REAL(execvp)(file, argv);
}

MTP_EXPORT int execvpe(const char *file, char *const argv[], char *const envp[])
{
    say_last_words(MT_PRELOAD_LAST_EXEC);
    return REAL(execvpe)(file, argv, envp);
}

MTP_EXPORT int fexecve(int fd, char *const argv[], char *const envp[])
{
    say_last_words(MT_PRELOAD_LAST_EXEC);
    return REAL(fexecve)(fd, argv, envp);
}

/* The list forms, as glibc builds them: the arguments into an array on the
 * stack, then the vector form (which says the last words). */
#define COLLECT_ARGS(first, argv, envp_out)                                                        \
    va_list ap_;                                                                                   \
    va_start(ap_, first);                                                                          \
    size_t n_ = 1;                                                                                 \
    while (va_arg(ap_, char *))                                                                    \
        n_++;                                                                                      \
    va_end(ap_);                                                                                   \
    char *argv[n_ + 1];                                                                            \
    va_start(ap_, first);                                                                          \
    argv[0] = (char *)(first);                                                                     \
    for (size_t i_ = 1; i_ <= n_; i_++)                                                            \
        argv[i_] = va_arg(ap_, char *);                                                            \
    envp_out;                                                                                      \
    va_end(ap_)

MTP_EXPORT int execl(const char *path, const char *arg, ...)
{
    COLLECT_ARGS(arg, argv, (void)0);
    return execv(path, argv);
}

MTP_EXPORT int execlp(const char *file, const char *arg, ...)
{
    COLLECT_ARGS(arg, argv, (void)0);
    return execvp(file, argv);
}

MTP_EXPORT int execle(const char *path, const char *arg, ...)
{
    char *const *envp;
    COLLECT_ARGS(arg, argv, envp = va_arg(ap_, char *const *));
    return execve(path, argv, envp);
}

MTP_EXPORT void _exit(int status)
{
    say_last_words(MT_PRELOAD_LAST_EXIT);
    REAL(_exit)(status);
    __builtin_unreachable();
}

MTP_EXPORT void _Exit(int status)
{
    say_last_words(MT_PRELOAD_LAST_EXIT);
    REAL(_Exit)(status);
    __builtin_unreachable();
}
