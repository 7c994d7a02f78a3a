/* Signals: memtrack's SIGSEGV/SIGBUS handler stays first and deliverable.
 *
 * Dispositions: once a tracker has installed its handler, the application's
 * sigaction() (and signal(), sigset(), bsd_signal(), sysv_signal(),
 * sigignore(), siginterrupt(), all re-implemented here on top of it, since
 * glibc's call its internal sigaction) for SIGSEGV/SIGBUS goes to track's
 * hook: the application's handler becomes the next in memtrack's chain, and
 * what it reads back is what it would have read without memtrack.
 *
 * Masks: a synchronous fault while its signal is blocked kills the process,
 * so SIGSEGV/SIGBUS never stay in a real signal mask. What the application
 * asked for is kept per thread in a virtual mask (mtp_vmask) and added back
 * to every mask it reads (sigprocmask, pthread_sigmask, sigaction's sa_mask,
 * sigpending). Kept up to date by: sigprocmask/pthread_sigmask, the sa_mask
 * of every handler (stripped from the real one, recorded per signal),
 * sigsuspend/sigpause/pselect/ppoll/epoll_pwait(2) (the temporary mask),
 * pthread_create (a thread starts with its creator's mask) and longjmp (a
 * saved mask is restored). Track's handler consults it: a fault that is not a
 * tracked write, while virtually blocked, kills the process as the kernel
 * would; a sent signal stays pending (mtp_vpend) until the thread unblocks
 * it. Every function here is async-signal-safe where its libc namesake is. */
#define _GNU_SOURCE
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "kw.h"
#include "preload.h"

__thread unsigned mtp_vmask __attribute__((tls_model("initial-exec")));
__thread unsigned mtp_vpend __attribute__((tls_model("initial-exec")));

/* For each signal, the SIGSEGV/SIGBUS bits of the sa_mask the application
 * gave its handler (stripped from the real one). */
static unsigned char g_vsa[65];
static mtp_lock g_sa_lock;
/* siginterrupt()'s set, consulted by signal(), as glibc's _sigintr. */
static sigset_t g_intr;

/* The set's first word holds signals 1..64 on Linux: read the two bits
 * directly (every mask call goes through here). */
unsigned mtp_vbits(const sigset_t *s)
{
    unsigned long w = s->__val[0];
    return (unsigned)((w >> (SIGSEGV - 1)) & 1u) * MT_VMASK_SEGV |
           (unsigned)((w >> (SIGBUS - 1)) & 1u) * MT_VMASK_BUS;
}

static void strip(sigset_t *s)
{
    sigdelset(s, SIGSEGV);
    sigdelset(s, SIGBUS);
}

static void add_vbits(sigset_t *s, unsigned v)
{
    if (v & MT_VMASK_SEGV)
        sigaddset(s, SIGSEGV);
    if (v & MT_VMASK_BUS)
        sigaddset(s, SIGBUS);
}

/* glibc's own signals (cancellation, setxid): its signal functions refuse them. */
static int internal_signal(int sig) { return sig == 32 || sig == 33; }

/* A sent SIGSEGV/SIGBUS held while virtually blocked: deliver it now that
 * the thread unblocked it. */
static void deliver_pending(void)
{
    unsigned fire = mtp_vpend & ~mtp_vmask;
    if (!fire)
        return;
    mtp_vpend &= ~fire;
    if (fire & MT_VMASK_SEGV)
        raise(SIGSEGV);
    if (fire & MT_VMASK_BUS)
        raise(SIGBUS);
}

/* ---- masks ------------------------------------------------------------------ */

static int mask_change(int how, const sigset_t *set, sigset_t *old, int pthread_style)
{
    unsigned v = mtp_vmask, nv = v;
    sigset_t copy;
    const sigset_t *use = set;
    if (set) {
        unsigned b = mtp_vbits(set);
        if (how == SIG_BLOCK)
            nv = v | b;
        else if (how == SIG_UNBLOCK)
            nv = v & ~b;
        else if (how == SIG_SETMASK)
            nv = b;
        if (b) {
            copy = *set; /* set may be the same object as old */
            strip(&copy);
            use = &copy;
        }
    }
    int rc = pthread_style ? REAL(pthread_sigmask)(how, use, old) : REAL(sigprocmask)(how, use, old);
    if (rc != 0)
        return rc; /* EINVAL for a bad `how`: nothing changed */
    if (old && v)
        add_vbits(old, v);
    mtp_vmask = nv;
    if (__builtin_expect(mtp_vpend != 0, 0))
        deliver_pending();
    return 0;
}

/* Nothing virtual before or after the call: a plain pass-through. */
static inline int plain_mask_call(const sigset_t *set)
{
    return (mtp_vmask | mtp_vpend) == 0 && (!set || mtp_vbits(set) == 0);
}

MTP_EXPORT int sigprocmask(int how, const sigset_t *set, sigset_t *old)
{
    if (plain_mask_call(set))
        return REAL(sigprocmask)(how, set, old);
    return mask_change(how, set, old, 0);
}

MTP_EXPORT int pthread_sigmask(int how, const sigset_t *set, sigset_t *old)
{
    if (plain_mask_call(set))
        return REAL(pthread_sigmask)(how, set, old);
    return mask_change(how, set, old, 1);
}

MTP_EXPORT int sigpending(sigset_t *set)
{
    int rc = REAL(sigpending)(set);
    if (rc == 0)
        add_vbits(set, mtp_vpend);
    return rc;
}

void mtp_import_thread_mask(void)
{
    sigset_t cur;
    if (REAL(pthread_sigmask)(SIG_SETMASK, NULL, &cur) != 0)
        return;
    unsigned b = mtp_vbits(&cur);
    if (!b)
        return;
    sigset_t un;
    sigemptyset(&un);
    add_vbits(&un, b);
    REAL(pthread_sigmask)(SIG_UNBLOCK, &un, NULL);
    mtp_vmask |= b;
}

/* A system call that waits with a temporary mask: the virtual mask is the
 * temporary one for its duration (handlers that run meanwhile see it). */
#define WITH_TEMP_MASK(maskp, call)                                                             \
    ({                                                                                          \
        sigset_t copy_;                                                                         \
        const sigset_t *use_ = (maskp);                                                         \
        unsigned saved_v_ = mtp_vmask, b_ = 0;                                                  \
        if (use_) {                                                                             \
            b_ = mtp_vbits(use_);                                                               \
            copy_ = *use_;                                                                      \
            strip(&copy_);                                                                      \
            use_ = &copy_;                                                                      \
            mtp_vmask = b_;                                                                     \
        }                                                                                       \
        __typeof__(call) rm_ = (call);                                                          \
        int e_ = errno;                                                                         \
        mtp_vmask = saved_v_;                                                                   \
        deliver_pending();                                                                      \
        errno = e_;                                                                             \
        rm_;                                                                                    \
    })

MTP_EXPORT int sigsuspend(const sigset_t *mask)
{
    /* A pending sent signal that the temporary mask unblocks ends the wait
     * at once, as it would have in the kernel. */
    if (mtp_vpend & ~mtp_vbits(mask)) {
        unsigned saved_v = mtp_vmask;
        mtp_vmask = mtp_vbits(mask);
        deliver_pending();
        mtp_vmask = saved_v;
        errno = EINTR;
        return -1;
    }
    return WITH_TEMP_MASK(mask, REAL(sigsuspend)(use_));
}

MTP_EXPORT int pselect(int n, fd_set *r, fd_set *w, fd_set *x, const struct timespec *t,
                       const sigset_t *mask)
{
    if (!mtp_get_hooks())
        return WITH_TEMP_MASK(mask, REAL(pselect)(n, r, w, x, t, use_));
    /* The kernel writes the ready sets (kwout.c brackets select alike). */
    struct iovec seg[4];
    mt_kw_segs s;
    kw_select_segs(seg, &s, n, r, w, x, NULL, 0);
    return KW_CALL(&s, WITH_TEMP_MASK(mask, REAL(pselect)(n, r, w, x, t, use_)));
}

MTP_EXPORT int ppoll(struct pollfd *fds, nfds_t n, const struct timespec *t, const sigset_t *mask)
{
    return KW_BUF(fds, kw_total(n, sizeof *fds), WITH_TEMP_MASK(mask, REAL(ppoll)(fds, n, t, use_)));
}

MTP_EXPORT int __ppoll_chk(struct pollfd *fds, nfds_t n, const struct timespec *t, const sigset_t *mask,
                           size_t fdslen)
{
    return KW_BUF(fds, kw_total(n, sizeof *fds),
                  WITH_TEMP_MASK(mask, REAL(__ppoll_chk)(fds, n, t, use_, fdslen)));
}

MTP_EXPORT int epoll_pwait(int fd, struct epoll_event *ev, int max, int timeout, const sigset_t *mask)
{
    return KW_BUF(ev, max > 0 ? kw_total((size_t)max, sizeof *ev) : 0,
                  WITH_TEMP_MASK(mask, REAL(epoll_pwait)(fd, ev, max, timeout, use_)));
}

MTP_EXPORT int epoll_pwait2(int fd, struct epoll_event *ev, int max, const struct timespec *timeout,
                            const sigset_t *mask)
{
    if (!REAL(epoll_pwait2)) {
        errno = ENOSYS;
        return -1;
    }
    return KW_BUF(ev, max > 0 ? kw_total((size_t)max, sizeof *ev) : 0,
                  WITH_TEMP_MASK(mask, mtp_r.epoll_pwait2(fd, ev, max, timeout, use_)));
}

MTP_EXPORT int __sigpause(int sig_or_mask, int is_sig)
{
    sigset_t set;
    if (is_sig) {
        sigprocmask(SIG_SETMASK, NULL, &set);
        sigdelset(&set, sig_or_mask);
    } else {
        sigemptyset(&set);
        set.__val[0] = (unsigned int)sig_or_mask; /* glibc's sigset_set_old_mask */
    }
    return sigsuspend(&set);
}

/* <signal.h> renames sigpause to __xpg_sigpause: define the BSD symbol by name. */
int mtp_bsd_sigpause(int mask) __asm__("sigpause") MTP_EXPORT;
int mtp_bsd_sigpause(int mask) { return __sigpause(mask, 0); }
MTP_EXPORT int __xpg_sigpause(int sig) { return __sigpause(sig, 1); }

MTP_EXPORT int sighold(int sig)
{
    sigset_t set;
    sigemptyset(&set);
    if (sigaddset(&set, sig) < 0)
        return -1;
    return sigprocmask(SIG_BLOCK, &set, NULL);
}

MTP_EXPORT int sigrelse(int sig)
{
    sigset_t set;
    sigemptyset(&set);
    if (sigaddset(&set, sig) < 0)
        return -1;
    return sigprocmask(SIG_UNBLOCK, &set, NULL);
}

/* ---- dispositions ---------------------------------------------------------- */

int mtp_masked_sigaction(int sig, const struct sigaction *act, struct sigaction *old)
{
    if (sig <= 0 || sig > 64)
        return REAL(sigaction)(sig, act, old); /* EINVAL as libc says it */
    mtp_lock_take(&g_sa_lock);
    unsigned prev = g_vsa[sig];
    int rc;
    if (act) {
        struct sigaction copy = *act; /* act may be the same object as old */
        unsigned b = mtp_vbits(&act->sa_mask);
        strip(&copy.sa_mask);
        rc = REAL(sigaction)(sig, &copy, old);
        if (rc == 0)
            g_vsa[sig] = (unsigned char)b;
    } else {
        rc = REAL(sigaction)(sig, NULL, old);
    }
    int e = errno;
    if (rc == 0 && old)
        add_vbits(&old->sa_mask, prev);
    mtp_lock_drop(&g_sa_lock);
    errno = e;
    return rc;
}

MTP_EXPORT int sigaction(int sig, const struct sigaction *act, struct sigaction *old)
{
    const mt_preload_hooks *h = mtp_get_hooks();
    if (h && (sig == SIGSEGV || sig == SIGBUS) && h->sigaction(sig, act, old))
        return 0;
    if (h) {
        int g = mtp_guard_sigaction(sig, act, old);
        if (g != -2)
            return g;
    }
    return mtp_masked_sigaction(sig, act, old);
}

static __sighandler_t install_simple(int sig, __sighandler_t handler, int flags, int mask_self)
{
    if (handler == SIG_ERR || sig < 1 || sig >= NSIG || internal_signal(sig)) {
        errno = EINVAL;
        return SIG_ERR;
    }
    struct sigaction act, old;
    memset(&act, 0, sizeof act);
    act.sa_handler = handler;
    sigemptyset(&act.sa_mask);
    if (mask_self)
        sigaddset(&act.sa_mask, sig);
    act.sa_flags = flags;
    if (sigaction(sig, &act, &old) < 0)
        return SIG_ERR;
    return old.sa_handler;
}

/* BSD semantics, as glibc's signal(): restartable unless siginterrupt(). */
MTP_EXPORT __sighandler_t signal(int sig, __sighandler_t handler)
{
    int flags = sig >= 1 && sig < NSIG && sigismember(&g_intr, sig) == 1 ? 0 : SA_RESTART;
    return install_simple(sig, handler, flags, 1);
}

MTP_EXPORT __sighandler_t bsd_signal(int sig, __sighandler_t handler) { return signal(sig, handler); }

MTP_EXPORT __sighandler_t __sysv_signal(int sig, __sighandler_t handler)
{
#ifndef SA_INTERRUPT
#define SA_INTERRUPT 0x20000000
#endif
    return install_simple(sig, handler, (SA_RESETHAND | SA_NODEFER | SA_INTERRUPT) & ~SA_RESTART, 0);
}

MTP_EXPORT __sighandler_t sysv_signal(int sig, __sighandler_t handler)
{
    return __sysv_signal(sig, handler);
}

MTP_EXPORT int sigignore(int sig)
{
    if (sig < 1 || sig >= NSIG || internal_signal(sig)) {
        errno = EINVAL;
        return -1;
    }
    struct sigaction act;
    memset(&act, 0, sizeof act);
    act.sa_handler = SIG_IGN;
    sigemptyset(&act.sa_mask);
    return sigaction(sig, &act, NULL);
}

MTP_EXPORT int siginterrupt(int sig, int interrupt)
{
    struct sigaction action;
    if (sigaction(sig, NULL, &action) < 0)
        return -1;
    if (interrupt) {
        sigaddset(&g_intr, sig);
        action.sa_flags &= ~SA_RESTART;
    } else {
        sigdelset(&g_intr, sig);
        action.sa_flags |= SA_RESTART;
    }
    return sigaction(sig, &action, NULL) < 0 ? -1 : 0;
}

/* As glibc's sigset(), on the wrappers above. */
MTP_EXPORT __sighandler_t sigset(int sig, __sighandler_t disp)
{
    if (disp == SIG_ERR || sig < 1 || sig >= NSIG || internal_signal(sig)) {
        errno = EINVAL;
        return SIG_ERR;
    }
    sigset_t set, oset;
    sigemptyset(&set);
    sigaddset(&set, sig);
    struct sigaction act, oact;
    if (disp == SIG_HOLD) {
        if (sigprocmask(SIG_BLOCK, &set, &oset) < 0)
            return SIG_ERR;
        if (sigismember(&oset, sig))
            return SIG_HOLD;
        if (sigaction(sig, NULL, &oact) < 0)
            return SIG_ERR;
        return oact.sa_handler;
    }
    memset(&act, 0, sizeof act);
    act.sa_handler = disp;
    sigemptyset(&act.sa_mask);
    act.sa_flags = 0;
    if (sigaction(sig, &act, &oact) < 0)
        return SIG_ERR;
    if (sigprocmask(SIG_UNBLOCK, &set, &oset) < 0)
        return SIG_ERR;
    return sigismember(&oset, sig) ? SIG_HOLD : oact.sa_handler;
}

/* ---- threads and jumps ----------------------------------------------------- */

typedef struct start_arg {
    void *(*fn)(void *);
    void *arg;
    unsigned vmask;
} start_arg;

static void *thread_start(void *p)
{
    start_arg a = *(start_arg *)p;
    free(p);
    mtp_vmask = a.vmask;
    mtp_import_thread_mask(); /* pthread_attr_setsigmask_np may have blocked them */
    return a.fn(a.arg);
}

/* A new thread starts with its creator's mask: virtual part included. */
MTP_EXPORT int pthread_create(pthread_t *t, const pthread_attr_t *attr, void *(*fn)(void *), void *arg)
{
    start_arg *a = malloc(sizeof *a);
    if (!a)
        return REAL(pthread_create)(t, attr, fn, arg);
    a->fn = fn;
    a->arg = arg;
    a->vmask = mtp_vmask;
    int rc = REAL(pthread_create)(t, attr, thread_start, a);
    if (rc != 0)
        free(a);
    return rc;
}

/* A jump restores the mask saved by sigsetjmp(env, 1): the real one, which
 * never holds SIGSEGV/SIGBUS, so the virtual part becomes what is recorded
 * there (nothing). Without a saved mask, nothing changes, as in libc. */
static void jump_mask(const struct __jmp_buf_tag *env)
{
    if (env->__mask_was_saved)
        mtp_vmask = mtp_vbits(&env->__saved_mask);
}

MTP_EXPORT void siglongjmp(sigjmp_buf env, int val)
{
    jump_mask(env);
    REAL(siglongjmp)(env, val);
    __builtin_unreachable();
}

MTP_EXPORT void longjmp(jmp_buf env, int val)
{
    jump_mask(env);
    REAL(longjmp)(env, val);
    __builtin_unreachable();
}

MTP_EXPORT void _longjmp(jmp_buf env, int val)
{
    jump_mask(env);
    REAL(_longjmp)(env, val);
    __builtin_unreachable();
}

MTP_EXPORT void __longjmp_chk(struct __jmp_buf_tag env[1], int val)
{
    jump_mask(env);
    REAL(__longjmp_chk)(env, val);
    __builtin_unreachable();
}

/* ---- fork ------------------------------------------------------------------- */

static void prepare(void) { mtp_lock_take(&g_sa_lock); }
static void release(void) { mtp_lock_drop(&g_sa_lock); }

void mtp_signals_atfork(void) { pthread_atfork(prepare, release, release); }
