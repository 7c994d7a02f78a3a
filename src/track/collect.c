/* Collect: turn a range's dirty state into runs and re-arm what was reported.
 *
 * The range is processed in windows of MT_WINDOW_WORDS bitmap words. For each
 * window the dirty bits are taken (atomic exchange), the uffd scan's written
 * pages are ORed in (the scan re-protects them itself), and the result is
 * emitted as runs. When the caller's array is full, the pages not reported
 * are put back as dirty bits, so the next collect reports them: for the
 * signal backend they were never re-armed, for uffd the bit replaces the
 * written state the scan consumed. Nothing is lost either way. */
#define _GNU_SOURCE
#include <errno.h>
#include <sched.h>
#include <string.h>

#include "internal.h"

#define MT_WINDOW_WORDS 64 /* 4096 pages per window (MTH_WINDOW_PAGES too) */

/* Index of the first set bit at or after `from` in a window of `nbits`, or nbits. */
static size_t next_set(const uint64_t *w, size_t from, size_t nbits)
{
    while (from < nbits) {
        uint64_t x = w[from / 64] >> (from % 64);
        if (x)
            return from + (size_t)__builtin_ctzll(x) < nbits ? from + (size_t)__builtin_ctzll(x) : nbits;
        from = (from / 64 + 1) * 64;
    }
    return nbits;
}

static size_t next_clear(const uint64_t *w, size_t from, size_t nbits)
{
    while (from < nbits) {
        uint64_t x = ~w[from / 64] >> (from % 64);
        if (x)
            return from + (size_t)__builtin_ctzll(x) < nbits ? from + (size_t)__builtin_ctzll(x) : nbits;
        from = (from / 64 + 1) * 64;
    }
    return nbits;
}

/* Appends pages [a, b) of r as a run, merging with the previous run when they
 * touch. Returns 0, or -ENOSPC when a new run is needed and none is left. */
static int emit(const mt_range *r, size_t a, size_t b, mt_dirty_run *runs, size_t max, size_t *n)
{
    uintptr_t lo = r->span_start + ((uintptr_t)a << r->page_shift);
    uintptr_t hi = r->span_start + ((uintptr_t)b << r->page_shift);
    if (lo < r->start)
        lo = r->start;
    if (hi > r->end)
        hi = r->end;
    size_t off = lo - r->start, len = hi - lo;
    if (*n > 0) {
        mt_dirty_run *last = &runs[*n - 1];
        if (last->range == r->id && last->offset + last->length == off) {
            last->length += len;
            return 0;
        }
    }
    if (*n >= max)
        return -ENOSPC;
    runs[(*n)++] = (mt_dirty_run){r->id, off, len};
    return 0;
}

/* Puts the set bits of `local` from bit `from` on back into the range. */
static void put_back(mt_range *r, size_t word0, const uint64_t *local, size_t nwords, size_t from)
{
    for (size_t i = from / 64; i < nwords; i++) {
        uint64_t x = local[i];
        if (i == from / 64)
            x &= ~0ull << (from % 64);
        if (x)
            atomic_fetch_or_explicit(&r->bits[word0 + i], x, memory_order_release);
    }
}

/* Signal backend: reported pages waiting to be re-armed. Contiguous runs are
 * re-armed with one mprotect even across windows: fewer syscalls, and a
 * degraded range (all pages dirty) is re-armed in one call over its whole
 * span, which merges VMAs instead of splitting them. Pages a kernel write
 * is using are left writable (and dirty) for the next collect. */
typedef struct rearm {
    size_t first, n;
} rearm;

static void rearm_flush(mt_range *r, rearm *ra)
{
    if (ra->n) {
        mt_pins pins;
        /* The whole span: a re-arm the map-count limit refuses re-arms it all. */
        mti_kw_rearm_begin(&pins, r->span_start, r->span_end);
        mti_sig_rearm(r, ra->first, ra->n, &pins);
        mti_kw_rearm_end();
    }
    ra->n = 0;
}

static void rearm_add(mt_range *r, rearm *ra, size_t first, size_t n)
{
    if (ra->n && ra->first + ra->n == first) {
        ra->n += n;
        return;
    }
    rearm_flush(r, ra);
    ra->first = first;
    ra->n = n;
}

/* Clears the bits of pages the application unmapped: never reported. */
static void drop_gone(const mt_range *r, size_t p0, uint64_t *w, size_t nbits)
{
    for (size_t p = 0; p < nbits; p++)
        if ((w[p / 64] >> (p % 64) & 1) && (mti_pstate(r, p0 + p) & MT_PS_GONE))
            w[p / 64] &= ~(1ull << (p % 64));
}

/* uffd: the written pages of pages [p0, p0+nbits) of r, ORed into `out`.
 * Pages the application unmapped are not scanned (the address may hold an
 * unrelated mapping now). Returns 0 or -errno. */
static int scan_window(mt_tracker *t, const mt_range *r, size_t p0, size_t nbits, uint64_t *out)
{
    if (atomic_load_explicit(&r->gone_pages, memory_order_relaxed) == 0) {
        uintptr_t s = r->span_start + ((uintptr_t)p0 << r->page_shift);
        return mti_uffd_scan(t, s, s + ((uintptr_t)nbits << r->page_shift), r->page_shift, out);
    }
    for (size_t a = 0; a < nbits;) {
        while (a < nbits && (mti_pstate(r, p0 + a) & MT_PS_GONE))
            a++;
        size_t b = a;
        while (b < nbits && !(mti_pstate(r, p0 + b) & MT_PS_GONE))
            b++;
        if (b > a) {
            uint64_t part[MT_WINDOW_WORDS];
            size_t nw = (b - a + 63) / 64;
            memset(part, 0, nw * sizeof *part);
            uintptr_t s = r->span_start + ((uintptr_t)(p0 + a) << r->page_shift);
            int rc = mti_uffd_scan(t, s, s + ((uintptr_t)(b - a) << r->page_shift), r->page_shift, part);
            if (rc)
                return rc;
            for (size_t p = 0; p < b - a; p++)
                if (part[p / 64] >> (p % 64) & 1)
                    out[(a + p) / 64] |= 1ull << ((a + p) % 64);
        }
        a = b;
    }
    return 0;
}

/* Pages [a, b) were just reported with hot pages on: those that stay hot
 * are left writable (signal: not re-armed; uffd: the scan's protection is
 * removed again), the others are re-armed as usual. */
static void settle_hot(mt_tracker *t, mt_range *r, rearm *ra, size_t a, size_t b, uint32_t pass)
{
    size_t run0 = a;
    int run_keep = -1;
    for (size_t p = a; p <= b; p++) {
        int k = p < b ? mti_hot_keep(r, p, pass) : -1;
        if (k == run_keep)
            continue;
        if (run_keep == 0 && r->backend == MT_TRACK_SIGNAL)
            rearm_add(r, ra, run0, p - run0);
        else if (run_keep == 1 && r->backend == MT_TRACK_UFFD) {
            uintptr_t s = r->span_start + ((uintptr_t)run0 << r->page_shift);
            /* On failure the pages stay protected: cold, still exact. */
            (void)mti_uffd_unprotect(t, s, s + ((uintptr_t)(p - run0) << r->page_shift));
        }
        run0 = p, run_keep = k;
    }
}

/* Whether a collect of r has anything to report: a dirty bit or a hot page. */
static int any_bit(const mt_range *r)
{
    for (size_t i = 0; i < r->nwords; i++)
        if (atomic_load_explicit(&r->bits[i], memory_order_relaxed) ||
            (r->hot && atomic_load_explicit(&r->hot[i], memory_order_relaxed)))
            return 1;
    return 0;
}

static long collect_windows(mt_tracker *t, mt_range *r, mt_dirty_run *runs, size_t max, uint32_t pass)
{
    size_t n = 0;
    rearm ra = {0, 0};
    uint64_t local[MT_WINDOW_WORDS];
    int whole = atomic_load_explicit(&r->whole, memory_order_relaxed);
    int gone = atomic_load_explicit(&r->gone_pages, memory_order_relaxed) > 0;
    /* Buffers registered with io_uring: the kernel writes pinned pages
     * through its own mapping, which leaves no trace in the page tables the
     * uffd scan reads. Every page is reported (the scan still runs, so that
     * the registration stays as it was); signal ranges are open and whole
     * already (mti_sig_unbracketed). The same for shared memory that a
     * descendant process may write (fork.c; its signal ranges were opened
     * by mti_collect_range). */
    if (!whole && (mti_range_pinned_whole(r) || mti_fork_inherited(r))) {
        mti_bits_set_range(r->bits, 0, r->npages);
        whole = 2; /* reported whole, but still scanned and left registered */
    }
    /* A new pass's fault budget (signal backend): faults from here on count
     * towards the next collect. */
    if (r->fault_budget)
        atomic_store_explicit(&r->pass_faults, 0, memory_order_relaxed);
    /* Hot pages: not while every page is reported anyway. */
    int hot = r->hot && !whole && !atomic_load_explicit(&r->degraded, memory_order_relaxed);
    for (size_t w0 = 0; w0 < r->nwords; w0 += MT_WINDOW_WORDS) {
        size_t nw = r->nwords - w0 < MT_WINDOW_WORDS ? r->nwords - w0 : MT_WINDOW_WORDS;
        size_t p0 = w0 * 64;
        size_t nbits = r->npages - p0 < nw * 64 ? r->npages - p0 : nw * 64;
        uint64_t any = 0;
        for (size_t i = 0; i < nw; i++) {
            /* Cheap read first: most words of a mostly clean range are zero,
             * and an exchange would dirty the cache line for nothing. */
            uint64_t x = atomic_load_explicit(&r->bits[w0 + i], memory_order_relaxed);
            /* acquire: pairs with the release in mti_bits_set. */
            local[i] = x ? atomic_exchange_explicit(&r->bits[w0 + i], 0, memory_order_acquire) : 0;
            any |= local[i];
        }
        if (r->backend == MT_TRACK_UFFD && whole != 1) {
            uint64_t scanned[MT_WINDOW_WORDS];
            memset(scanned, 0, nw * sizeof *scanned);
            /* A scan the collection helper did (or is doing) for this
             * window replaces ours. One that failed, or that a dead helper
             * may have begun, counts as a failed scan (pages it re-protected
             * are unknown); ours then re-protects what is written now, so
             * that the next collect is exact again. */
            int rc = mti_helper_take(t, r, w0 / MT_WINDOW_WORDS, scanned, nw);
            if (rc < 0)
                (void)scan_window(t, r, p0, nbits, scanned);
            else if (rc == 0)
                rc = scan_window(t, r, p0, nbits, scanned);
            else
                rc = 0;
            if (rc != 0) {
                /* Unknown state: report the whole window. Pages the scan did
                 * not re-protect stay "written" and come back next time. */
                memset(scanned, 0, nw * sizeof *scanned);
                for (size_t p = 0; p < nbits; p++)
                    scanned[p / 64] |= 1ull << (p % 64);
                atomic_fetch_add_explicit(&r->degradations, 1, memory_order_relaxed);
            }
            /* The scan re-protected pages we may share with neighbouring
             * uffd ranges: they were written for them too. */
            size_t last = r->npages - 1;
            if (p0 == 0 && (scanned[0] & 1))
                mti_track_share_page(t, r, r->span_start);
            if (last >= p0 && last < p0 + nbits && last != 0 &&
                (scanned[(last - p0) / 64] >> ((last - p0) % 64) & 1))
                mti_track_share_page(t, r, r->span_end - ((uintptr_t)1 << r->page_shift));
            for (size_t i = 0; i < nw; i++) {
                local[i] |= scanned[i];
                any |= scanned[i];
            }
        }
        if (hot) {
            mti_hot_add_window(r, w0, nw, local, pass);
            any = 0;
            for (size_t i = 0; i < nw; i++)
                any |= local[i];
        }
        if (!any)
            continue;
        if (gone)
            drop_gone(r, p0, local, nbits);
        for (size_t a = next_set(local, 0, nbits); a < nbits;) {
            size_t b = next_clear(local, a, nbits);
            if (emit(r, p0 + a, p0 + b, runs, max, &n) != 0) {
                put_back(r, w0, local, nw, a);
                rearm_flush(r, &ra);
                return (long)n;
            }
            if (hot)
                settle_hot(t, r, &ra, p0 + a, p0 + b, pass);
            else if (r->backend == MT_TRACK_SIGNAL)
                rearm_add(r, &ra, p0 + a, b - a);
            atomic_fetch_add_explicit(&r->pages_collected, b - a, memory_order_relaxed);
            a = next_set(local, b, nbits);
        }
    }
    rearm_flush(r, &ra);
    /* A uffd range in a fork child is not write-protected there (the
     * registration stays with the parent): every page may change at any
     * time, so each complete pass ends with every page dirty again. */
    if (whole == 1)
        mti_bits_set_range(r->bits, 0, r->npages);
    return (long)n;
}

/* Signal backend: a fault handler makes its page writable first and sets
 * the page's bit second (signal_posix.c). Another thread's write to that
 * page in between raises no fault of its own; were this collect to take
 * the bits then, the page would come back only from the next one, one
 * capture late, although the write happened before this collect began (a
 * thread writes, then submits, while another thread's fault on the same
 * page is in flight: hostile submit-race, shadow mode, lost at that submit
 * in about 1 run in 6 with three runs at once on two cores). So a collect
 * first waits until each of the two in-flight counters has been seen at
 * zero after it began: a handler that began before keeps its counter above
 * zero until its bit is set. Each round flips the epoch, so handlers that
 * arrive meanwhile count on the other counter and the awaited one drains.
 * Handlers take microseconds; one that does not end (its thread stopped
 * inside it) makes the whole range reported instead, after 100 ms. */
static void settle_handlers(mt_range *r)
{
    unsigned seen = 0;
    uint64_t t0 = 0;
    for (int round = 0; round < 16; round++) {
        unsigned old = atomic_fetch_xor_explicit(&r->fault_epoch, 1, memory_order_seq_cst) & 1u;
        for (long spin = 0;; spin++) {
            for (unsigned c = 0; c < 2; c++)
                if (atomic_load_explicit(&r->faulting[c], memory_order_seq_cst) == 0)
                    seen |= 1u << c;
            if (seen == 3)
                return;
            if (seen >> old & 1u)
                break; /* flip again: the other counter's turn to drain */
            if (spin < 256) {
                mti_cpu_relax();
                continue;
            }
            if (!t0)
                t0 = mti_now_ns();
            else if (mti_now_ns() - t0 > 100 * 1000000ull)
                goto whole;
            sched_yield();
        }
    }
whole:
    mti_bits_set_range(r->bits, 0, r->npages);
    atomic_fetch_add_explicit(&r->degradations, 1, memory_order_relaxed);
}

long mti_collect_range(mt_tracker *t, mt_range *r, mt_dirty_run *runs, size_t max, uint64_t sweep)
{
    atomic_fetch_add_explicit(&r->collects, 1, memory_order_relaxed);
    /* Shared memory a descendant process may write (fork.c): its writes
     * raise nothing here, so every page is reported on each collect from
     * now on. A signal range is opened for good (its faults would only
     * cost); a uffd range is reported whole below. */
    if (r->backend == MT_TRACK_SIGNAL && !atomic_load_explicit(&r->whole, memory_order_relaxed) &&
        mti_fork_inherited(r))
        mti_sig_keep_open(r);
    int gone = atomic_load_explicit(&r->gone_pages, memory_order_relaxed) > 0;
    if (r->backend == MT_TRACK_SIGNAL)
        settle_handlers(r);
    /* A clean signal range: nothing to report or re-arm, no system call. */
    uint32_t pass = r->hot ? mti_hot_pass_begin(r, sweep) : 0;
    if (r->backend == MT_TRACK_SIGNAL && !any_bit(r)) {
        if (r->hot) /* still a pass: "consecutive" means consecutive passes */
            mti_hot_pass_end(r, 0);
        return gone ? MT_EUNMAPPED : 0;
    }
    /* One table reader section, asynchronous signals blocked: the
     * application's mprotect/munmap (hook writers) wait until the page
     * states this collect acts on are consistent with what it did, and no
     * signal handler on this thread can run one in the middle (sigtable.c). */
    sigset_t saved;
    mti_sys_block_async(&saved);
    const mt_sig_entry *e;
    uint32_t cnt;
    unsigned tok = mti_sigtable_enter(&e, &cnt);
    long n = collect_windows(t, r, runs, max, pass);
    if (r->hot)
        mti_hot_pass_end(r, n == (long)max);
    gone = atomic_load_explicit(&r->gone_pages, memory_order_relaxed) > 0;
    mti_sigtable_leave(tok);
    mti_sys_restore_mask(&saved);
    return n == 0 && gone ? MT_EUNMAPPED : n;
}
