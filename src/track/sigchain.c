/* The handlers memtrack chains to, and the application's view of them.
 *
 * g_chain[s][0] is the disposition found when memtrack installed its
 * handler; g_chain[s][k] the handler found on top at the k-th
 * mt_track_reinstall_handler() (without the interposer, an application
 * handler installed after ours). The top entry is what the application
 * "has installed": with the interposer, the application's sigaction() for
 * SIGSEGV/SIGBUS replaces it and reads it back (mti_chain_app_sigaction), so
 * the application sees exactly what it would see without memtrack while the
 * kernel keeps memtrack's handler first, as sanitizers do.
 *
 * Entries are read by the fault handler on any thread, lock-free, under a
 * sequence lock; they are written under a spin lock with every signal
 * blocked (sigaction() is async-signal-safe, so its hook may run in a signal
 * handler; the writer is never interrupted on its own thread). */
#define _GNU_SOURCE
#include <errno.h>
#include <signal.h>
#include <stdatomic.h>
#include <string.h>
#include <ucontext.h>
#include <unistd.h>

#include "internal.h"

#ifndef SA_RESTORER
#define SA_RESTORER 0x04000000
#endif

#define MT_CHAIN_MAX 8

_Static_assert(sizeof(unsigned long) == 8, "sigset word holds signals 1..64");

typedef struct chain_entry {
    _Atomic uintptr_t handler; /* sa_handler / sa_sigaction (same storage) */
    _Atomic int flags;
    _Atomic uint64_t mask; /* signals 1..64 as bits 0..63 */
    _Atomic uintptr_t restorer;
} chain_entry;

/* A plain copy of an entry, taken under the sequence lock. */
typedef struct chain_snap {
    uintptr_t handler;
    int flags;
    uint64_t mask;
    uintptr_t restorer;
} chain_snap;

static const int g_signals[MT_NSLOTS] = {SIGSEGV, SIGBUS};
static chain_entry g_chain[MT_NSLOTS][MT_CHAIN_MAX];
static _Atomic int g_chain_len[MT_NSLOTS];
static _Atomic unsigned g_seq; /* odd while a writer changes g_chain */
static mt_spin g_lock;
static sigset_t g_lock_saved;
static _Atomic int g_installed;
static void (*g_ours)(int, siginfo_t *, void *);
/* glibc adds SA_RESTORER and its own restorer to every action it installs,
 * and reads them back: entries the application sets through the hook get
 * the same, so what it reads back is bit-identical. */
static int g_add_restorer;
static uintptr_t g_restorer;

/* Per-thread chain state, initial-exec so that reading it in the handler
 * never calls __tls_get_addr (which may allocate) even when memtrack lives in
 * a dlopen()ed Vulkan layer. */
static __thread int tls_chain_depth __attribute__((tls_model("initial-exec")));
static __thread uintptr_t tls_chain_sp[MT_CHAIN_MAX] __attribute__((tls_model("initial-exec")));
/* The siginfo each level passed on: a handler chaining back passes it through. */
static __thread const void *tls_chain_si[MT_CHAIN_MAX] __attribute__((tls_model("initial-exec")));

static uint64_t set_bits(const sigset_t *s) { return (uint64_t)s->__val[0]; }

static void bits_set(uint64_t bits, sigset_t *s)
{
    /* Direct word access: sigaddset() refuses glibc's internal signals, but
     * the kernel mask may hold them and must round-trip unchanged. */
    memset(s, 0, sizeof *s);
    s->__val[0] = (unsigned long)bits;
}

static uint64_t sig_bit(int sig) { return 1ull << (sig - 1); }

static void lock(void)
{
    sigset_t saved;
    mti_sys_block_all(&saved);
    mti_spin_lock(&g_lock);
    g_lock_saved = saved;
}

static void unlock(void)
{
    sigset_t saved = g_lock_saved;
    mti_spin_unlock(&g_lock);
    mti_sys_restore_mask(&saved);
}

/* Sequence-lock writer half; the caller holds g_lock. */
static void write_begin(void)
{
    unsigned s = atomic_load_explicit(&g_seq, memory_order_relaxed);
    atomic_store_explicit(&g_seq, s + 1, memory_order_relaxed);
    /* release fence: the odd count is visible before any field changes. */
    atomic_thread_fence(memory_order_release);
}

static void write_end(void)
{
    unsigned s = atomic_load_explicit(&g_seq, memory_order_relaxed);
    /* release: the fields are visible before the even count. */
    atomic_store_explicit(&g_seq, s + 1, memory_order_release);
}

static void entry_store(chain_entry *e, const chain_snap *v)
{
    atomic_store_explicit(&e->handler, v->handler, memory_order_relaxed);
    atomic_store_explicit(&e->flags, v->flags, memory_order_relaxed);
    atomic_store_explicit(&e->mask, v->mask, memory_order_relaxed);
    atomic_store_explicit(&e->restorer, v->restorer, memory_order_relaxed);
}

static chain_snap entry_load(const chain_entry *e)
{
    chain_snap v;
    v.handler = atomic_load_explicit(&e->handler, memory_order_relaxed);
    v.flags = atomic_load_explicit(&e->flags, memory_order_relaxed);
    v.mask = atomic_load_explicit(&e->mask, memory_order_relaxed);
    v.restorer = atomic_load_explicit(&e->restorer, memory_order_relaxed);
    return v;
}

/* Async-signal-safe: a consistent copy of entry `level` and the chain length. */
static int snapshot(int slot, int want_level_from_top, chain_snap *out, int *level_out)
{
    for (;;) {
        /* acquire: pairs with write_end's release. */
        unsigned s1 = atomic_load_explicit(&g_seq, memory_order_acquire);
        if (s1 & 1) {
            mti_cpu_relax();
            continue;
        }
        int len = atomic_load_explicit(&g_chain_len[slot], memory_order_relaxed);
        int level = len - 1 - want_level_from_top;
        if (level >= 0)
            *out = entry_load(&g_chain[slot][level]);
        /* acquire fence: the field loads complete before the re-check. */
        atomic_thread_fence(memory_order_acquire);
        if (atomic_load_explicit(&g_seq, memory_order_relaxed) == s1) {
            *level_out = level;
            return level >= 0;
        }
    }
}

static chain_snap from_sigaction(const struct sigaction *sa)
{
    chain_snap v;
    v.handler = (uintptr_t)sa->sa_sigaction;
    v.flags = sa->sa_flags;
    v.mask = set_bits(&sa->sa_mask);
    v.restorer = (uintptr_t)sa->sa_restorer;
    return v;
}

static void to_sigaction(const chain_snap *v, struct sigaction *sa)
{
    memset(sa, 0, sizeof *sa);
    sa->sa_sigaction = (void (*)(int, siginfo_t *, void *))v->handler;
    sa->sa_flags = v->flags;
    bits_set(v->mask, &sa->sa_mask);
    sa->sa_restorer = (void (*)(void))v->restorer;
}

/* What the kernel would store for the application's sigaction(). */
static chain_snap from_app(const struct sigaction *act)
{
    chain_snap v = from_sigaction(act);
    v.mask &= ~(sig_bit(SIGKILL) | sig_bit(SIGSTOP)); /* the kernel drops them */
    if (g_add_restorer) {
        v.flags |= SA_RESTORER;
        v.restorer = g_restorer;
    }
    return v;
}

static void fill_ours(struct sigaction *sa)
{
    memset(sa, 0, sizeof *sa);
    sa->sa_sigaction = g_ours;
    /* Every asynchronous signal is blocked while memtrack's handler runs: an
     * application handler that interrupted it and wrote tracked memory would
     * fault with SIGSEGV blocked (the kernel adds the delivered signal) and
     * kill the process. Chaining sets the exact mask the application's
     * handler expects (mti_chain_call). Synchronous signals stay open. */
    sigfillset(&sa->sa_mask);
    static const int sync_sigs[] = {SIGSEGV, SIGBUS, SIGILL, SIGFPE, SIGTRAP, SIGSYS};
    for (size_t i = 0; i < sizeof sync_sigs / sizeof *sync_sigs; i++)
        sigdelset(&sa->sa_mask, sync_sigs[i]);
    /* SA_ONSTACK: run on the thread's alternate stack if it has one, as the
     * application's crash handler (which we may chain to) expects. */
    sa->sa_flags = SA_SIGINFO | SA_ONSTACK | SA_RESTART;
}

int mti_chain_installed(void) { return atomic_load_explicit(&g_installed, memory_order_acquire); }

int mti_chain_install(void (*ours)(int, siginfo_t *, void *))
{
    if (mti_chain_installed())
        return 0;
    lock();
    int rc = 0;
    if (!atomic_load_explicit(&g_installed, memory_order_relaxed)) {
        g_ours = ours;
        struct sigaction sa;
        fill_ours(&sa);
        write_begin();
        for (int s = 0; s < MT_NSLOTS && rc == 0; s++) {
            struct sigaction old;
            rc = mti_sys_sigaction(g_signals[s], &sa, &old);
            if (rc == 0) {
                chain_snap v = from_sigaction(&old);
                entry_store(&g_chain[s][0], &v);
                atomic_store_explicit(&g_chain_len[s], 1, memory_order_relaxed);
            }
        }
        write_end();
        struct sigaction back;
        if (rc == 0 && mti_sys_sigaction(SIGSEGV, NULL, &back) == 0 && (back.sa_flags & SA_RESTORER) &&
            !(sa.sa_flags & SA_RESTORER)) {
            g_add_restorer = 1;
            g_restorer = (uintptr_t)back.sa_restorer;
        }
        if (rc == 0)
            atomic_store_explicit(&g_installed, 1, memory_order_release);
    }
    unlock();
    return rc;
}

static int is_ours(const struct sigaction *cur)
{
    return (cur->sa_flags & SA_SIGINFO) && cur->sa_sigaction == g_ours;
}

int mt_track_handler_status(void)
{
    if (!mti_chain_installed())
        return 0;
    struct sigaction cur;
    if (mti_sys_sigaction(SIGSEGV, NULL, &cur) != 0)
        return -1;
    return is_ours(&cur) ? 1 : -1;
}

int mti_chain_reinstall(void)
{
    lock();
    int rc = 0;
    struct sigaction ours;
    fill_ours(&ours);
    for (int s = 0; s < MT_NSLOTS && rc == 0; s++) {
        struct sigaction cur;
        if ((rc = mti_sys_sigaction(g_signals[s], NULL, &cur)) != 0)
            break;
        if (is_ours(&cur))
            continue;
        int len = atomic_load_explicit(&g_chain_len[s], memory_order_relaxed);
        if (len >= MT_CHAIN_MAX) {
            rc = -ENOSPC;
            break;
        }
        /* Publish the new chain entry before our handler can run with it. */
        chain_snap v = from_sigaction(&cur);
        write_begin();
        entry_store(&g_chain[s][len], &v);
        atomic_store_explicit(&g_chain_len[s], len + 1, memory_order_relaxed);
        write_end();
        if ((rc = mti_sys_sigaction(g_signals[s], &ours, NULL)) != 0) {
            write_begin();
            atomic_store_explicit(&g_chain_len[s], len, memory_order_relaxed);
            write_end();
        }
    }
    unlock();
    return rc;
}

/* Async-signal-safe (the application may call sigaction() in a handler). */
int mti_chain_app_sigaction(int sig, const struct sigaction *act, struct sigaction *old)
{
    int slot = sig == SIGSEGV ? MT_SLOT_SEGV : sig == SIGBUS ? MT_SLOT_BUS : -1;
    if (slot < 0 || !mti_chain_installed())
        return 0;
    chain_snap nv = {0, 0, 0, 0};
    if (act)
        nv = from_app(act); /* read before *old is written */
    lock();
    int top = atomic_load_explicit(&g_chain_len[slot], memory_order_relaxed) - 1;
    if (old) {
        chain_snap v = entry_load(&g_chain[slot][top]);
        to_sigaction(&v, old);
    }
    if (act) {
        write_begin();
        entry_store(&g_chain[slot][top], &nv);
        write_end();
    }
    unlock();
    return 1;
}

/* Async-signal-safe. */
void mti_chain_force_default(int sig)
{
    int slot = sig == SIGSEGV ? MT_SLOT_SEGV : MT_SLOT_BUS;
    struct sigaction dfl;
    memset(&dfl, 0, sizeof dfl);
    dfl.sa_handler = SIG_DFL;
    lock();
    int top = atomic_load_explicit(&g_chain_len[slot], memory_order_relaxed) - 1;
    write_begin();
    atomic_store_explicit(&g_chain[slot][top].handler, (uintptr_t)SIG_DFL, memory_order_relaxed);
    write_end();
    mti_sys_sigaction(sig, &dfl, NULL);
    unlock();
}

/* Async-signal-safe: SA_RESETHAND fired on entry `level`. */
static void reset_entry(int slot, int level)
{
    lock();
    write_begin();
    atomic_store_explicit(&g_chain[slot][level].handler, (uintptr_t)SIG_DFL, memory_order_relaxed);
    write_end();
    unlock();
}

static _Atomic(mt_track_last_words_fn) g_last_words;

void mt_track_set_last_words(mt_track_last_words_fn fn)
{
    /* release: whatever fn needs was set up before it was registered. */
    atomic_store_explicit(&g_last_words, fn, memory_order_release);
}

/* Async-signal-safe. */
void mti_last_words_call(int why)
{
    mt_track_last_words_fn fn = atomic_load_explicit(&g_last_words, memory_order_acquire);
    if (fn)
        fn(why);
}

static void reset_to_default(int sig)
{
    struct sigaction dfl;
    memset(&dfl, 0, sizeof dfl);
    dfl.sa_handler = SIG_DFL;
    sigemptyset(&dfl.sa_mask);
    mti_sys_sigaction(sig, &dfl, NULL);
}

/* Async-signal-safe. Gives the signal to the next handler, with the
 * semantics the kernel would have applied to it. */
void mti_chain_call(int slot, int sig, siginfo_t *si, void *uctx)
{
    /* Re-entered from a handler we chained to (it chained back to us): go one
     * further down the chain instead of calling it again. A re-entry is a
     * plain call nested in the frame that chained: it runs deeper (lower)
     * on the same stack and passes the same siginfo on. A level whose frame
     * was abandoned (its handler left with siglongjmp) is dropped: the next
     * fault runs at or above that frame, or, coming from deeper code, brings
     * a siginfo of its own (the kernel's new signal frame; at the old
     * frame's address only if our frames are there too, which is the first
     * case). The stack alone is not enough: a fresh fault from code deeper
     * than where the abandoned one came from would look nested. */
    char here;
    uintptr_t sp = (uintptr_t)&here;
    while (tls_chain_depth > 0) {
        int top = tls_chain_depth - 1;
        if (top < MT_CHAIN_MAX && sp < tls_chain_sp[top] && (const void *)si == tls_chain_si[top])
            break;
        tls_chain_depth--;
    }
    chain_snap prev;
    int level;
    int have = snapshot(slot, tls_chain_depth, &prev, &level);
    int siginfo = have && (prev.flags & SA_SIGINFO);
    uintptr_t h = have ? prev.handler : (uintptr_t)SIG_DFL;
    int from_kernel = si && si->si_code > 0;

    if (h == (uintptr_t)SIG_IGN && !from_kernel)
        return; /* an ignored signal sent by kill(): ignore it */
    if (h == (uintptr_t)SIG_DFL || h == (uintptr_t)SIG_IGN) {
        /* The kernel forces the default action on a fault whose signal is
         * ignored, so SIG_IGN ends like SIG_DFL here. Restore the default;
         * a fault re-executes on return and kills the process with the
         * original context (so the core shows the faulting instruction); a
         * sent signal is re-sent and delivered once we return. */
        /* The process dies now: its owner may want to say its last words
         * (make a trace complete) first; then where it died (a fault),
         * after them so that nothing the report does can cost the trace. */
        mti_last_words_call(sig);
        if (from_kernel)
            mti_fault_report(sig, si, uctx);
        reset_to_default(sig);
        if (!from_kernel)
            raise(sig);
        return;
    }

    /* The mask the kernel would have used: the interrupted context's mask,
     * plus the handler's sa_mask, plus the signal itself unless SA_NODEFER.
     * Computed from uc_sigmask, not from our own handler's mask, so that what
     * blocked signals around us (our sa_mask, a sanitizer's wrapper) does not
     * leak into the chained handler. */
    sigset_t saved;
    uint64_t kmask;
    if (uctx)
        kmask = set_bits(&((const ucontext_t *)uctx)->uc_sigmask);
    else {
        sigset_t cur;
        mti_sys_sigmask(SIG_SETMASK, NULL, &cur);
        kmask = set_bits(&cur);
    }
    kmask |= prev.mask;
    if (prev.flags & SA_NODEFER)
        kmask &= ~sig_bit(sig);
    else
        kmask |= sig_bit(sig);
    /* With the interposer, SIGSEGV/SIGBUS are only blocked virtually: the
     * chained handler may write tracked memory (or be interrupted by one
     * that does) and the fault must still reach us; a genuine fault while
     * virtually blocked is turned into the kernel's outcome (signal_posix.c). */
    const mt_preload_api *api = mti_sys_attached() ? mti_sys_api() : NULL;
    unsigned vold = 0;
    if (api) {
        unsigned v = 0;
        if (kmask & sig_bit(SIGSEGV))
            v |= MT_VMASK_SEGV;
        if (kmask & sig_bit(SIGBUS))
            v |= MT_VMASK_BUS;
        kmask &= ~(sig_bit(SIGSEGV) | sig_bit(SIGBUS));
        vold = api->vmask_get();
        api->vmask_set(vold | v);
    }
    sigset_t mask;
    bits_set(kmask, &mask);
    mti_sys_sigmask(SIG_SETMASK, &mask, &saved);
    if (prev.flags & SA_RESETHAND)
        reset_entry(slot, level);
    if (tls_chain_depth < MT_CHAIN_MAX) {
        tls_chain_sp[tls_chain_depth] = sp;
        tls_chain_si[tls_chain_depth] = si;
    }
    tls_chain_depth++;
    if (siginfo)
        ((void (*)(int, siginfo_t *, void *))h)(sig, si, uctx);
    else
        ((void (*)(int))h)(sig);
    tls_chain_depth--;
    mti_sys_sigmask(SIG_SETMASK, &saved, NULL);
    if (api)
        api->vmask_set(vold);
}

/* fork(): taken before, released on both sides (fork.c). */
void mti_chain_fork_prepare(void) { lock(); }
void mti_chain_fork_parent(void) { unlock(); }
void mti_chain_fork_child(void) { unlock(); }
