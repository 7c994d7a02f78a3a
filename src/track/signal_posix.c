/* Signal backend (POSIX): read-only pages, a SIGSEGV handler that records the
 * written page and makes it writable again, and chaining of every other
 * fault to the handler that was installed before ours (sigchain.c).
 *
 * The handler is async-signal-safe: no locks on the tracked-write path, no
 * allocation, no stdio. Its only system call there is mprotect (not on
 * POSIX's async-signal-safe list, but used this way by every page-guard
 * tracker; on Linux it is a plain syscall with no user-space state). It runs
 * with every asynchronous signal blocked (sa_mask), so an application
 * handler that writes tracked memory can never interrupt it and fault while
 * SIGSEGV is blocked. */
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

static size_t g_page_size;
static __thread uintptr_t tls_retry_addr __attribute__((tls_model("initial-exec")));

static void sig_write(const char *msg)
{
    ssize_t r = write(STDERR_FILENO, msg, strlen(msg));
    (void)r;
}

/* Makes r's whole span writable (the application's protection) and marks it
 * all dirty; for the pages at its ends, other ranges sharing them are marked
 * too. Async-signal-safe. */
static int open_range(mt_range *r, const mt_sig_entry *e, uint32_t n)
{
    mti_fork_note_write(r); /* a descendant's writes go unseen from here */
    int rc = mti_protect_pages(r, 0, r->npages, MT_PROT_APP, r->span_start, NULL);
    if (rc)
        return rc;
    mti_bits_set_range(r->bits, 0, r->npages);
    size_t ps = (size_t)1 << r->page_shift;
    uintptr_t edges[2] = {r->span_start, r->span_end - ps};
    for (int k = 0; k < 2; k++)
        for (uint32_t i = mti_sigtable_first_ending_after(e, n, edges[k]);
             i < n && e[i].start < edges[k] + ps; i++)
            mti_bits_set(e[i].range->bits, mti_page_index(e[i].range, edges[k]));
    return 0;
}

/* As open_range, as a fallback that loses precision (counted, and flagged
 * until a collect re-arms the whole span). */
static int degrade_range(mt_range *r, const mt_sig_entry *e, uint32_t n)
{
    int rc = open_range(r, e, n);
    if (rc)
        return rc;
    atomic_fetch_add_explicit(&r->degradations, 1, memory_order_relaxed);
    atomic_store_explicit(&r->degraded, 1, memory_order_relaxed);
    return 0;
}

/* A fault on signal range r: counts it, and opens the whole range once the
 * pass's fault budget runs out (mt_range_opts.fault_budget). Unlike a
 * degradation this keeps hot pages going: every page is reported this pass,
 * which is what it costs. Async-signal-safe. */
static void count_fault(mt_range *r, const mt_sig_entry *e, uint32_t n)
{
    atomic_fetch_add_explicit(&r->faults, 1, memory_order_relaxed);
    if (r->fault_budget &&
        atomic_fetch_add_explicit(&r->pass_faults, 1, memory_order_relaxed) + 1 == r->fault_budget &&
        open_range(r, e, n) == 0)
        atomic_fetch_add_explicit(&r->budget_opens, 1, memory_order_relaxed);
}

/* mprotect of one page failed with ENOMEM: vm.max_map_count is exhausted by
 * VMA splits. Whole-span protection changes merge VMAs instead of splitting
 * them, so fall back to them: first the ranges on this page, then every
 * signal range. Precision is lost (whole ranges reported dirty), writes are
 * not. */
static int degrade_for_page(uintptr_t page, int prot, const mt_sig_entry *e, uint32_t n,
                            uint32_t first, uint32_t last)
{
    for (uint32_t k = first; k < last; k++)
        if (e[k].range->backend == MT_TRACK_SIGNAL)
            degrade_range(e[k].range, e, n);
    if (mti_sys_mprotect(page, g_page_size, prot) == 0)
        return 0;
    for (uint32_t k = 0; k < n; k++)
        if (e[k].range->backend == MT_TRACK_SIGNAL)
            degrade_range(e[k].range, e, n);
    return mti_sys_mprotect(page, g_page_size, prot);
}

/* Tests only (test_track_timely): a fault handler dwells this long between
 * making its page writable and setting its bit, which widens the window a
 * collect must wait for (collect.c, settle_handlers). 0 outside tests. */
_Atomic int64_t mti_test_fault_dwell_ns;

static void test_dwell(void)
{
    int64_t ns = atomic_load_explicit(&mti_test_fault_dwell_ns, memory_order_relaxed);
    if (ns <= 0)
        return;
    struct timespec a, b; /* clock_gettime is async-signal-safe */
    clock_gettime(CLOCK_MONOTONIC, &a);
    do
        clock_gettime(CLOCK_MONOTONIC, &b);
    while ((int64_t)(b.tv_sec - a.tv_sec) * 1000000000 + (b.tv_nsec - a.tv_nsec) < ns);
}

/* Async-signal-safe. Returns 1 if addr is in tracked memory and the write
 * may now proceed, 0 if the fault is not ours (untracked, a page the
 * application itself made non-writable, or memory it unmapped), -1 if it is
 * ours but the page cannot be made writable. */
static int handle_tracked_write(uintptr_t addr)
{
    uintptr_t page = addr & ~(uintptr_t)(g_page_size - 1);
    const mt_sig_entry *e;
    uint32_t n;
    unsigned tok = mti_sigtable_enter(&e, &n);
    uint32_t first = mti_sigtable_first_ending_after(e, n, page), last = first;
    int ours = 0;
    unsigned prot = 0;
    for (; last < n && e[last].start < page + g_page_size; last++) {
        mt_range *r = e[last].range;
        unsigned st = mti_pstate(r, mti_page_index(r, page));
        if (st & MT_PS_GONE)
            continue;
        prot |= st & MT_PS_PROT;
        if (r->backend == MT_TRACK_SIGNAL && (st & PROT_WRITE))
            ours = 1;
    }
    int ret = 0;
    if (ours) {
        ret = 1;
        /* In flight on each range's current counter (internal.h), before
         * the page is writable: a collect that begins after this waits for
         * the bit. Bit j of odd: range first + j counted on counter 1 (past
         * 64 ranges on one page, counter 0 always). */
        uint64_t odd = 0;
        for (uint32_t k = first; k < last; k++) {
            mt_range *r = e[k].range;
            unsigned c = k - first < 64 ? atomic_load_explicit(&r->fault_epoch, memory_order_seq_cst) & 1u : 0;
            atomic_fetch_add_explicit(&r->faulting[c], 1, memory_order_seq_cst);
            odd |= (uint64_t)c << ((k - first) & 63);
        }
        /* Writable first, bit second (see internal.h). */
        int rc = mti_sys_mprotect(page, g_page_size, (int)prot);
        if (rc != 0 && (rc != -ENOMEM || degrade_for_page(page, (int)prot, e, n, first, last) != 0)) {
            sig_write("memtrack: cannot make a tracked page writable again\n");
            ret = -1;
        }
        test_dwell();
        if (ret == 1)
            for (uint32_t k = first; k < last; k++) {
                mt_range *r = e[k].range;
                size_t i = mti_page_index(r, page);
                if (mti_pstate(r, i) & MT_PS_GONE)
                    continue;
                mti_bits_set(r->bits, i);
                if (r->backend == MT_TRACK_SIGNAL) {
                    mti_fork_note_write(r);
                    count_fault(r, e, n);
                }
            }
        for (uint32_t k = first; k < last; k++) {
            unsigned c = k - first < 64 ? (unsigned)(odd >> (k - first)) & 1u : 0;
            atomic_fetch_sub_explicit(&e[k].range->faulting[c], 1, memory_order_release);
        }
    }
    mti_sigtable_leave(tok);
    return ret;
}

static int is_protection_fault(int sig, const siginfo_t *si)
{
    /* Linux reports writes to read-only pages as SIGSEGV/SEGV_ACCERR. SIGBUS
     * (file truncation, hardware errors) is never ours there; it is
     * installed so that platforms reporting protection faults as SIGBUS can
     * be added in one place. */
    return sig == SIGSEGV && si->si_code == SEGV_ACCERR;
}

static unsigned vbit(int sig) { return sig == SIGSEGV ? MT_VMASK_SEGV : MT_VMASK_BUS; }

/* Async-signal-safe: the handler for SIGSEGV and SIGBUS. */
static void mt_on_fault(int sig, siginfo_t *si, void *uctx)
{
    int saved_errno = errno;
    int slot = sig == SIGSEGV ? MT_SLOT_SEGV : MT_SLOT_BUS;
    if (si && is_protection_fault(sig, si)) {
        uintptr_t addr = (uintptr_t)si->si_addr;
        int h = handle_tracked_write(addr);
        if (h > 0) {
            errno = saved_errno;
            return;
        }
        /* A thread that trapped on a page just before a remove unprotected
         * it (or an application munmap/mremap changed it) may run its
         * handler after the change: retry the instruction once; a genuine
         * fault comes back at the same address and is chained then. */
        if (h == 0 && tls_retry_addr != addr && mti_sigtable_recently_removed(addr)) {
            tls_retry_addr = addr;
            errno = saved_errno;
            return;
        }
    }
    tls_retry_addr = 0;
    /* Not ours. With the interposer the application may have blocked the
     * signal only virtually; do what the kernel does with a blocked signal:
     * a fault kills the process (default action forced), a sent signal
     * stays pending until the thread unblocks it. */
    const mt_preload_api *api = mti_sys_attached() ? mti_sys_api() : NULL;
    if (api && (api->vmask_get() & vbit(sig))) {
        if (si && si->si_code > 0)
            mti_chain_force_default(sig); /* the fault re-executes and kills */
        else
            api->vpend(vbit(sig));
        errno = saved_errno;
        return;
    }
    mti_chain_call(slot, sig, si, uctx);
    errno = saved_errno;
}

int mti_sig_install(void)
{
    if (!g_page_size)
        g_page_size = mti_page_size();
    return mti_chain_install(mt_on_fault);
}

/* Here, not in sigchain.c: a first install is this file's (sigchain.c
 * knows nothing of the fault handler it chains from). */
int mt_track_reinstall_handler(void)
{
    if (!mti_chain_installed())
        return mti_sig_install();
    return mti_chain_reinstall();
}

/* ---- range operations (table lock held, or a reader section) ---- */

/* MT_PRELOAD_ASYNC_* seen: signal ranges are not protected any more; and
 * whether every range armed before that is open again. */
static _Atomic unsigned g_unbracketed;
static _Atomic int g_opened;

unsigned mti_sig_unbracketed_seen(void)
{
    return atomic_load(&g_unbracketed);
}

_Static_assert(MT_TRACK_UNBRACKETED_URING == MT_PRELOAD_ASYNC_URING &&
                   MT_TRACK_UNBRACKETED_AIO == MT_PRELOAD_ASYNC_AIO &&
                   MT_TRACK_UNBRACKETED_PINNED == MT_PRELOAD_ASYNC_PINNED &&
                   MT_TRACK_UNBRACKETED_RAW == MT_PRELOAD_ASYNC_RAW,
               "the interposer and track agree on the unbracketed writers' bits");

unsigned mt_track_unbracketed_writers(void)
{
    return mti_sig_unbracketed_seen();
}

/* A range that is never protected: every live page is written as far as
 * anyone knows, on every collect (collect.c sets them again after each
 * pass, as for a uffd range in a fork child). */
static void keep_open(mt_range *r)
{
    atomic_store_explicit(&r->whole, 1, memory_order_relaxed);
    mti_bits_set_range(r->bits, 0, r->npages);
}

/* An armed range opened for good (table lock held, view e/n): open_range
 * gives back the application's protection (pages it made read-only stay
 * so) and marks its pages and its neighbours' shared end pages; a failed
 * mprotect leaves pages protected, which still fault and are reported. */
static void open_for_good(mt_range *r, const mt_sig_entry *e, uint32_t n)
{
    (void)open_range(r, e, n);
    keep_open(r);
}

void mti_sig_unbracketed(unsigned what)
{
    /* seq_cst: a collect's re-arm that reads the flag after this sees it;
     * one that read it before is inside a table section, which the lock
     * below waits for, and its protection is undone there. */
    atomic_fetch_or(&g_unbracketed, what);
    /* Until the ranges are open, every reporter goes through the loop (a
     * second thread setting up its ring must not return before the first
     * opened them); once open, nothing to do. */
    if (atomic_load(&g_opened))
        return;
    mti_sigtable_lock();
    mti_sigtable_hook_begin();
    uint32_t n;
    const mt_sig_entry *e = mti_sigtable_locked_view(&n);
    for (uint32_t i = 0; i < n; i++) {
        mt_range *r = e[i].range;
        if (r->backend == MT_TRACK_SIGNAL && !atomic_load_explicit(&r->whole, memory_order_relaxed))
            open_for_good(r, e, n);
    }
    mti_sigtable_hook_end();
    mti_sigtable_unlock();
    atomic_store(&g_opened, 1);
}

void mti_sig_keep_open(mt_range *r)
{
    mti_sigtable_lock();
    mti_sigtable_hook_begin();
    uint32_t n;
    const mt_sig_entry *e = mti_sigtable_locked_view(&n);
    if (!atomic_load_explicit(&r->whole, memory_order_relaxed))
        open_for_good(r, e, n);
    mti_sigtable_hook_end();
    mti_sigtable_unlock();
}

int mti_sig_arm_range(mt_range *r)
{
    int rc = mti_sig_install();
    if (rc)
        return rc;
    rc = mti_sigtable_insert(r);
    if (rc)
        return rc;
    if (atomic_load(&g_unbracketed)) {
        keep_open(r);
        return 0;
    }
    /* The first page alone first: memory the kernel maps with pages larger
     * than the tracker's (hugetlbfs, MAP_HUGETLB) cannot change the
     * protection of one small page (mprotect fails with EINVAL; a whole
     * range's protection can change, so arming it would work and the
     * application would die on its first write, whose page cannot be made
     * writable again). Such memory is refused before anything else is
     * armed, and the caller falls back to what it does without tracking
     * (the layer scans it). */
    mt_pins pins;
    mti_kw_rearm_begin(&pins, r->span_start, r->span_end);
    rc = mti_protect_pages(r, 0, 1, MT_PROT_ARMED, r->span_start, &pins);
    if (rc == -EINVAL)
        rc = MT_EUNSUPPORTED;
    if (rc == 0 && r->npages > 1)
        rc = mti_protect_pages(r, 1, r->npages - 1, MT_PROT_ARMED, r->span_start, &pins);
    mti_kw_rearm_end();
    if (rc) {
        mti_protect_pages(r, 0, r->npages, MT_PROT_APP, r->span_start, NULL);
        mti_sigtable_remove(r);
        return rc;
    }
    /* An unbracketed writer reported meanwhile may have opened the table's
     * ranges before the protection above: open this one again. */
    if (atomic_load(&g_unbracketed)) {
        mti_sigtable_lock();
        mti_sigtable_hook_begin();
        uint32_t n;
        const mt_sig_entry *e = mti_sigtable_locked_view(&n);
        open_for_good(r, e, n);
        mti_sigtable_hook_end();
        mti_sigtable_unlock();
    }
    return 0;
}

static int shared_with_signal_range(uintptr_t page, const mt_range *self)
{
    uint32_t n;
    const mt_sig_entry *e = mti_sigtable_locked_view(&n);
    size_t ps = (size_t)1 << self->page_shift;
    for (uint32_t i = mti_sigtable_first_ending_after(e, n, page); i < n && e[i].start < page + ps; i++)
        if (e[i].range != self && e[i].range->backend == MT_TRACK_SIGNAL &&
            !(mti_pstate(e[i].range, mti_page_index(e[i].range, page)) & MT_PS_GONE))
            return 1;
    return 0;
}

void mti_sig_disarm_range(mt_range *r)
{
    size_t ps = (size_t)1 << r->page_shift;
    mti_sigtable_lock();
    /* Any handler that trapped before the unprotect below and runs after the
     * table removal retries instead of chaining. */
    mti_sigtable_note_removed(r->span_start, r->span_end);
    uintptr_t s = r->span_start, e = r->span_end;
    if (shared_with_signal_range(s, r))
        s += ps; /* still needed by a neighbour: stays armed */
    if (e > s && shared_with_signal_range(e - ps, r))
        e -= ps;
    if (e > s)
        mti_protect_pages(r, mti_page_index(r, s), (e - s) >> r->page_shift, MT_PROT_APP,
                         r->span_start, NULL);
    mti_sigtable_remove(r);
    mti_sigtable_unlock();
}

int mti_sig_rearm(mt_range *r, size_t first, size_t n, const mt_pins *pins)
{
    if (atomic_load(&g_unbracketed)) { /* kept open: written again as far as anyone knows */
        mti_bits_set_range(r->bits, first, n);
        return 0;
    }
    int err = mti_protect_pages(r, first, n, MT_PROT_ARMED, r->span_start, pins);
    if (err == 0) {
        if (first == 0 && n == r->npages)
            atomic_store_explicit(&r->degraded, 0, memory_order_relaxed);
        return 0;
    }
    /* Re-protecting the whole span merges VMAs rather than splitting them,
     * so it can succeed when the map-count limit refused a single run. Pages
     * outside the run keep their bits and are reported again: harmless. */
    if (err == -ENOMEM &&
        mti_protect_pages(r, 0, r->npages, MT_PROT_ARMED, r->span_start, pins) == 0) {
        atomic_store_explicit(&r->degraded, 0, memory_order_relaxed);
        return 0;
    }
    mti_bits_set_range(r->bits, first, n); /* still writable: report it again */
    atomic_fetch_add_explicit(&r->degradations, 1, memory_order_relaxed);
    atomic_store_explicit(&r->degraded, 1, memory_order_relaxed);
    return err;
}

int mti_sig_make_writable(mt_range *r, size_t first, size_t n)
{
    uintptr_t a = r->span_start + ((uintptr_t)first << r->page_shift);
    size_t len = n << r->page_shift;
    size_t ps = (size_t)1 << r->page_shift;
    sigset_t saved;
    mti_sys_block_async(&saved);
    const mt_sig_entry *e;
    uint32_t cnt;
    unsigned tok = mti_sigtable_enter(&e, &cnt);
    mti_fork_note_write(r);
    int rc = mti_protect_pages(r, first, n, MT_PROT_APP, r->span_start, NULL);
    if (rc == 0) {
        mti_bits_set_range(r->bits, first, n);
        /* Pages at the ends may belong to neighbours too: they were just made
         * writable for them as well, so they are dirty for them. */
        uintptr_t edges[2] = {a, a + len - ps};
        for (int k = 0; k < 2; k++)
            for (uint32_t i = mti_sigtable_first_ending_after(e, cnt, edges[k]);
                 i < cnt && e[i].start < edges[k] + ps; i++)
                mti_bits_set(e[i].range->bits, mti_page_index(e[i].range, edges[k]));
    }
    mti_sigtable_leave(tok);
    mti_sys_restore_mask(&saved);
    return rc;
}
