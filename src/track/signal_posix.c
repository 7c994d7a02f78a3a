/* Signal backend (POSIX): read-only pages, a SIGSEGV handler that records the
 * written page and makes it writable again, and chaining of every other
 * fault to the handler that was installed before ours.
 *
 * The handler is async-signal-safe: no locks, no allocation, no stdio. Its
 * only syscalls are mprotect (not on POSIX's async-signal-safe list, but
 * used this way by every page-guard tracker; on Linux it is a plain syscall
 * with no user-space state), and, when chaining, sigaction, pthread_sigmask
 * and raise, which are on the list. */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <string.h>
#include <sys/mman.h>
#include <ucontext.h>
#include <unistd.h>

#include "internal.h"

#define MT_CHAIN_MAX 8

enum { SLOT_SEGV = 0, SLOT_BUS = 1, NSLOTS = 2 };
static const int g_signals[NSLOTS] = {SIGSEGV, SIGBUS};

/* g_chain[s][0] is what was installed before memtrack's first install;
 * g_chain[s][k] the handler found on top at the k-th reinstall. Written under
 * g_install_lock before g_chain_len is published (release). */
static struct sigaction g_chain[NSLOTS][MT_CHAIN_MAX];
static _Atomic int g_chain_len[NSLOTS];
static _Atomic int g_resethand_fired[NSLOTS][MT_CHAIN_MAX];
static pthread_mutex_t g_install_lock = PTHREAD_MUTEX_INITIALIZER;
static _Atomic int g_installed;
static size_t g_page_size;

/* Per-thread state, initial-exec so that reading it in the handler never
 * calls __tls_get_addr (which may allocate) even when memtrack lives in a
 * dlopen()ed Vulkan layer. */
static __thread int tls_chain_depth __attribute__((tls_model("initial-exec")));
static __thread uintptr_t tls_chain_sp[MT_CHAIN_MAX] __attribute__((tls_model("initial-exec")));
static __thread uintptr_t tls_retry_addr __attribute__((tls_model("initial-exec")));

static void sig_write(const char *msg)
{
    ssize_t r = write(STDERR_FILENO, msg, strlen(msg));
    (void)r;
}

/* Makes r's whole span writable and marks it all dirty; for the pages at its
 * ends, other ranges sharing them are marked too. Async-signal-safe. */
static int degrade_range(mt_range *r, const mt_sig_entry *e, uint32_t n)
{
    if (mprotect((void *)r->span_start, r->span_end - r->span_start, r->prot) != 0)
        return -errno;
    mt_bits_set_range(r->bits, 0, r->npages);
    size_t ps = (size_t)1 << r->page_shift;
    uintptr_t edges[2] = {r->span_start, r->span_end - ps};
    for (int k = 0; k < 2; k++)
        for (uint32_t i = mt_sigtable_first_ending_after(e, n, edges[k]);
             i < n && e[i].start < edges[k] + ps; i++)
            mt_bits_set(e[i].range->bits, mt_page_index(e[i].range, edges[k]));
    atomic_fetch_add_explicit(&r->degradations, 1, memory_order_relaxed);
    atomic_store_explicit(&r->degraded, 1, memory_order_relaxed);
    return 0;
}

/* mprotect of one page failed with ENOMEM: vm.max_map_count is exhausted by
 * VMA splits. Whole-span protection changes merge VMAs instead of splitting
 * them, so fall back to them: first the ranges on this page, then every
 * range. Precision is lost (whole ranges reported dirty), writes are not. */
static int degrade_for_page(uintptr_t page, const mt_sig_entry *e, uint32_t n, uint32_t first,
                            uint32_t last)
{
    for (uint32_t k = first; k < last; k++)
        degrade_range(e[k].range, e, n);
    if (mprotect((void *)page, g_page_size, e[first].range->prot) == 0)
        return 0;
    for (uint32_t k = 0; k < n; k++)
        degrade_range(e[k].range, e, n);
    if (mprotect((void *)page, g_page_size, e[first].range->prot) == 0)
        return 0;
    return -errno;
}

/* Async-signal-safe. Returns 1 if addr is in tracked memory and the write
 * may now proceed, 0 if the fault is not ours, -1 if it is ours but the page
 * cannot be made writable for a reason other than map-count exhaustion. */
static int handle_tracked_write(uintptr_t addr)
{
    uintptr_t page = addr & ~(uintptr_t)(g_page_size - 1);
    const mt_sig_entry *e;
    uint32_t n;
    unsigned tok = mt_sigtable_enter(&e, &n);
    uint32_t first = mt_sigtable_first_ending_after(e, n, page), last = first;
    int prot = 0;
    while (last < n && e[last].start < page + g_page_size)
        prot |= e[last++].range->prot;
    int ret = 0;
    if (first < last) {
        ret = 1;
        /* Writable first, bit second (see internal.h). */
        if (mprotect((void *)page, g_page_size, prot) != 0) {
            if (errno != ENOMEM || degrade_for_page(page, e, n, first, last) != 0) {
                sig_write("memtrack: cannot make a tracked page writable again\n");
                ret = -1;
            }
        }
        if (ret == 1)
            for (uint32_t k = first; k < last; k++) {
                mt_range *r = e[k].range;
                mt_bits_set(r->bits, mt_page_index(r, page));
                atomic_fetch_add_explicit(&r->faults, 1, memory_order_relaxed);
            }
    }
    mt_sigtable_leave(tok);
    return ret;
}

static void reset_to_default(int sig)
{
    struct sigaction dfl;
    memset(&dfl, 0, sizeof dfl);
    dfl.sa_handler = SIG_DFL;
    sigemptyset(&dfl.sa_mask);
    sigaction(sig, &dfl, NULL);
}

/* Gives the signal to the handler that was there before ours, with the
 * semantics the kernel would have applied to it. Async-signal-safe. */
static void chain(int slot, int sig, siginfo_t *si, void *uctx)
{
    int len = atomic_load_explicit(&g_chain_len[slot], memory_order_acquire);
    /* Re-entered from a handler we chained to (it chained back to us): go one
     * further down the chain instead of calling it again. Re-entry is told
     * apart from a fresh fault by the stack: a nested call runs deeper
     * (lower) than the frame that chained, while a handler that left with
     * siglongjmp abandoned its frames, and the next fault starts higher
     * (or at the top of the alternate stack). */
    char here;
    uintptr_t sp = (uintptr_t)&here;
    while (tls_chain_depth > 0 && sp >= tls_chain_sp[tls_chain_depth - 1])
        tls_chain_depth--;
    int level = len - 1 - tls_chain_depth;
    const struct sigaction *prev = level >= 0 ? &g_chain[slot][level] : NULL;
    int siginfo = prev && (prev->sa_flags & SA_SIGINFO);
    void (*plain)(int) = prev && !siginfo ? prev->sa_handler : SIG_DFL;
    if (prev && atomic_load_explicit(&g_resethand_fired[slot][level], memory_order_relaxed))
        siginfo = 0, plain = SIG_DFL;
    int from_kernel = si && si->si_code > 0;

    if (!siginfo && plain == SIG_IGN && !from_kernel)
        return; /* an ignored signal sent by kill(): ignore it */
    if (!siginfo && (plain == SIG_DFL || plain == SIG_IGN)) {
        /* The kernel forces the default action on a fault whose signal is
         * ignored, so SIG_IGN ends like SIG_DFL here. Restore the default;
         * a fault re-executes on return and kills the process with the
         * original context (so the core shows the faulting instruction); a
         * sent signal is re-sent and delivered once we return. */
        reset_to_default(sig);
        if (!from_kernel)
            raise(sig);
        return;
    }

    /* The mask the kernel would have used: the interrupted context's mask,
     * plus the handler's sa_mask, plus the signal itself unless SA_NODEFER.
     * Computed from uc_sigmask, not from our own handler's mask, so that
     * whatever blocked signals around us (e.g. a sanitizer's wrapper) does
     * not leak into the chained handler. */
    sigset_t mask, saved;
    if (uctx)
        mask = ((const ucontext_t *)uctx)->uc_sigmask;
    else
        pthread_sigmask(SIG_SETMASK, NULL, &mask);
    sigorset(&mask, &mask, &prev->sa_mask);
    if (prev->sa_flags & SA_NODEFER)
        sigdelset(&mask, sig);
    else
        sigaddset(&mask, sig);
    pthread_sigmask(SIG_SETMASK, &mask, &saved);
    if (prev->sa_flags & SA_RESETHAND)
        atomic_store_explicit(&g_resethand_fired[slot][level], 1, memory_order_relaxed);
    if (tls_chain_depth < MT_CHAIN_MAX)
        tls_chain_sp[tls_chain_depth] = sp;
    tls_chain_depth++;
    if (siginfo)
        prev->sa_sigaction(sig, si, uctx);
    else
        plain(sig);
    tls_chain_depth--;
    pthread_sigmask(SIG_SETMASK, &saved, NULL);
}

static int is_protection_fault(int sig, const siginfo_t *si)
{
    /* Linux reports writes to read-only pages as SIGSEGV/SEGV_ACCERR. SIGBUS
     * (file truncation, hardware errors) is never ours there; it is
     * installed so that platforms reporting protection faults as SIGBUS can
     * be added in one place. */
    return sig == SIGSEGV && si->si_code == SEGV_ACCERR;
}

/* Async-signal-safe: the handler for SIGSEGV and SIGBUS. */
static void mt_on_fault(int sig, siginfo_t *si, void *uctx)
{
    int saved_errno = errno;
    int slot = sig == SIGSEGV ? SLOT_SEGV : SLOT_BUS;
    if (si && is_protection_fault(sig, si)) {
        uintptr_t addr = (uintptr_t)si->si_addr;
        int h = handle_tracked_write(addr);
        if (h > 0) {
            errno = saved_errno;
            return;
        }
        /* A thread that trapped on a page just before a remove unprotected
         * it may run its handler after the range left the table: retry the
         * instruction once; a genuine fault comes back at the same address
         * and is chained then. */
        if (h == 0 && tls_retry_addr != addr && mt_sigtable_recently_removed(addr)) {
            tls_retry_addr = addr;
            errno = saved_errno;
            return;
        }
    }
    tls_retry_addr = 0;
    chain(slot, sig, si, uctx);
    errno = saved_errno;
}

static void fill_ours(struct sigaction *sa)
{
    memset(sa, 0, sizeof *sa);
    sa->sa_sigaction = mt_on_fault;
    sigemptyset(&sa->sa_mask);
    /* SA_ONSTACK: run on the thread's alternate stack if it has one, as the
     * application's crash handler (which we may chain to) expects. */
    sa->sa_flags = SA_SIGINFO | SA_ONSTACK | SA_RESTART;
}

int mt_sig_install(void)
{
    if (atomic_load_explicit(&g_installed, memory_order_acquire))
        return 0;
    pthread_mutex_lock(&g_install_lock);
    int rc = 0;
    if (!atomic_load_explicit(&g_installed, memory_order_relaxed)) {
        g_page_size = (size_t)sysconf(_SC_PAGESIZE);
        struct sigaction ours;
        fill_ours(&ours);
        for (int s = 0; s < NSLOTS && rc == 0; s++) {
            if (sigaction(g_signals[s], &ours, &g_chain[s][0]) != 0)
                rc = -errno;
            else
                atomic_store_explicit(&g_chain_len[s], 1, memory_order_release);
        }
        if (rc == 0)
            atomic_store_explicit(&g_installed, 1, memory_order_release);
    }
    pthread_mutex_unlock(&g_install_lock);
    return rc;
}

int mt_track_handler_status(void)
{
    if (!atomic_load_explicit(&g_installed, memory_order_acquire))
        return 0;
    struct sigaction cur;
    if (sigaction(SIGSEGV, NULL, &cur) != 0)
        return -1;
    return (cur.sa_flags & SA_SIGINFO) && cur.sa_sigaction == mt_on_fault ? 1 : -1;
}

int mt_track_reinstall_handler(void)
{
    if (!atomic_load_explicit(&g_installed, memory_order_acquire))
        return mt_sig_install();
    pthread_mutex_lock(&g_install_lock);
    int rc = 0;
    struct sigaction ours;
    fill_ours(&ours);
    for (int s = 0; s < NSLOTS && rc == 0; s++) {
        struct sigaction cur;
        if (sigaction(g_signals[s], NULL, &cur) != 0) {
            rc = -errno;
            break;
        }
        if ((cur.sa_flags & SA_SIGINFO) && cur.sa_sigaction == mt_on_fault)
            continue;
        int len = atomic_load_explicit(&g_chain_len[s], memory_order_relaxed);
        if (len >= MT_CHAIN_MAX) {
            rc = -ENOSPC;
            break;
        }
        /* Publish the new chain entry before our handler can run with it. */
        g_chain[s][len] = cur;
        atomic_store_explicit(&g_resethand_fired[s][len], 0, memory_order_relaxed);
        atomic_store_explicit(&g_chain_len[s], len + 1, memory_order_release);
        if (sigaction(g_signals[s], &ours, NULL) != 0) {
            atomic_store_explicit(&g_chain_len[s], len, memory_order_release);
            rc = -errno;
        }
    }
    pthread_mutex_unlock(&g_install_lock);
    return rc;
}

/* ---- range operations (not in the handler; table writer lock held) ---- */

int mt_sig_arm_range(mt_range *r)
{
    int rc = mt_sig_install();
    if (rc)
        return rc;
    mt_sigtable_lock();
    rc = mt_sigtable_insert(r);
    if (rc == 0 && mprotect((void *)r->span_start, r->span_end - r->span_start, PROT_READ) != 0) {
        rc = -errno;
        mt_sigtable_remove(r);
    }
    mt_sigtable_unlock();
    return rc;
}

void mt_sig_disarm_range(mt_range *r)
{
    size_t ps = (size_t)1 << r->page_shift;
    mt_sigtable_lock();
    /* Any handler that trapped before the unprotect below and runs after the
     * table removal retries instead of chaining. */
    mt_sigtable_note_removed(r->span_start, r->span_end);
    uintptr_t s = r->span_start, e = r->span_end;
    if (mt_sigtable_page_shared(s, ps, r))
        s += ps; /* still needed by a neighbour: stays armed */
    if (e > s && mt_sigtable_page_shared(e - ps, ps, r))
        e -= ps;
    if (e > s)
        mprotect((void *)s, e - s, r->prot);
    mt_sigtable_remove(r);
    mt_sigtable_unlock();
}

int mt_sig_rearm(mt_range *r, size_t first, size_t n)
{
    uintptr_t a = r->span_start + ((uintptr_t)first << r->page_shift);
    if (mprotect((void *)a, n << r->page_shift, PROT_READ) == 0) {
        if (first == 0 && n == r->npages)
            atomic_store_explicit(&r->degraded, 0, memory_order_relaxed);
        return 0;
    }
    int err = -errno;
    /* Re-protecting the whole span merges VMAs rather than splitting them,
     * so it can succeed when the map-count limit refused a single run. Pages
     * outside the run keep their bits and are reported again: harmless. */
    if (err == -ENOMEM &&
        mprotect((void *)r->span_start, r->span_end - r->span_start, PROT_READ) == 0) {
        atomic_store_explicit(&r->degraded, 0, memory_order_relaxed);
        return 0;
    }
    mt_bits_set_range(r->bits, first, n); /* still writable: report it again */
    atomic_fetch_add_explicit(&r->degradations, 1, memory_order_relaxed);
    atomic_store_explicit(&r->degraded, 1, memory_order_relaxed);
    return err;
}

int mt_sig_make_writable(mt_range *r, size_t first, size_t n)
{
    uintptr_t a = r->span_start + ((uintptr_t)first << r->page_shift);
    size_t len = n << r->page_shift;
    size_t ps = (size_t)1 << r->page_shift;
    mt_sigtable_lock();
    int rc = mprotect((void *)a, len, r->prot) == 0 ? 0 : -errno;
    if (rc == 0) {
        mt_bits_set_range(r->bits, first, n);
        /* Pages at the ends may belong to neighbours too: they were just made
         * writable for them as well, so they are dirty for them. */
        const mt_sig_entry *e;
        uint32_t cnt;
        unsigned tok = mt_sigtable_enter(&e, &cnt);
        uintptr_t edges[2] = {a, a + len - ps};
        for (int k = 0; k < 2; k++)
            for (uint32_t i = mt_sigtable_first_ending_after(e, cnt, edges[k]);
                 i < cnt && e[i].start < edges[k] + ps; i++)
                mt_bits_set(e[i].range->bits, mt_page_index(e[i].range, edges[k]));
        mt_sigtable_leave(tok);
    }
    mt_sigtable_unlock();
    return rc;
}
