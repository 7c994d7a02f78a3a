/* Kernel writes into tracked memory (read(2), recvmsg(2), fread() ...).
 *
 * With the signal backend a tracked page is read-only, and a kernel copy into
 * it fails with EFAULT: no signal is raised for a kernel-mode fault. The
 * interposer brackets each such call with mti_kw_begin/mti_kw_end:
 *
 *  begin: publish a pin over the destination's pages, wait until no
 *         collect or add is between "decide which pages to arm" and "arm
 *         them", then make the tracked ones writable and mark them dirty;
 *  the system call runs: the pages stay writable whatever collect does;
 *  end:   mark the pages dirty again (the kernel wrote them after any
 *         collect that ran meanwhile), drop the pin.
 *
 * Collect (and add) re-arm pages between mti_kw_rearm_begin/end and skip
 * pinned pages, keeping them dirty, so each collect during a long call (a
 * recv() waiting for data) reports them again: exact, if not precise.
 *
 * The pin covers the destination whether it is tracked or not: memory may
 * start being tracked while the call is in flight (the layer's auto mode
 * moves a memory it scanned to guard at a submit; an AIO read glibc does
 * later), and its add must not arm the pages the kernel is about to write.
 * Pins never wait for a free slot: with all 4096 taken (calls blocked in
 * recv for ever), the next call is only counted, and re-arms treat every
 * page as pinned until it ends.
 *
 * The handshake is a Dekker pair: a re-armer increments `rearmers` then
 * reads which pin slots are taken; a kernel write takes its slot (one
 * atomic OR of a bit) then reads `rearmers`. With seq_cst on both, either
 * the re-armer sees the pin, or the kernel write sees the re-armer and waits
 * for it to finish. Why not retry on EFAULT: a datagram is consumed even when
 * copying it out fails; why not a bounce buffer: the result must be
 * bit-identical to the call without tracking, partial copies and EFAULT on
 * the application's own read-only pages included, and the kernel must see
 * the application's own buffer sizes (MSG_TRUNC, short reads).
 *
 * Everything here is async-signal-safe: read() may be called from a signal
 * handler. The waits are spins on other threads' short sections: a re-armer
 * blocks asynchronous signals, so it is never the interrupted context of the
 * thread that waits for it. */
#define _GNU_SOURCE
#include <errno.h>
#include <sched.h>
#include <string.h>

#include "internal.h"

#define MT_KW_SLOTS 4096
/* Page intervals one pin names: a read(2) names one, a recvmsg(2) up to its
 * data, address, control data and header; more are merged into the nearest. */
#define MT_KW_IV 4
/* kw_begin's token when every slot is taken: the call is counted in
 * g_overflow, and each re-arm meanwhile treats every page as pinned. */
#define MT_KW_OVERFLOW MT_KW_SLOTS

#define MT_KW_WORDS (MT_KW_SLOTS / 64)
_Static_assert(MT_KW_OVERFLOW < MT_PRELOAD_KW_MET, "a token is a slot, or the overflow, with the met flag above");

/* Slot i is taken while bit i of g_taken is set. Taking and freeing a slot
 * is one atomic operation each: the bit is both the slot's ownership and
 * the pin's publication that the Dekker pair above needs. */
static _Atomic uint64_t g_taken[MT_KW_WORDS];
static _Atomic int g_words; /* words of g_taken ever used: the re-armers' scan */
static struct {
    /* Set once the intervals are written; a taken slot not yet ready makes
     * a re-armer treat every page as pinned (for those few instructions). */
    _Atomic int ready;
    _Atomic int niv;
    _Atomic uintptr_t lo[MT_KW_IV], hi[MT_KW_IV];
    /* The owner's alone: whether begin met tracked pages, and the range
     * table's version it saw (kw_end skips its look-up when neither says
     * there is anything to report). */
    int met;
    uint64_t version;
} g_slots[MT_KW_SLOTS];
static _Atomic int g_overflow;
static _Atomic int g_rearmers;

static void add_pin(mt_pins *pins, uintptr_t lo, uintptr_t hi)
{
    if (pins->n == (int)(sizeof pins->lo / sizeof *pins->lo)) {
        pins->all = 1;
        return;
    }
    pins->lo[pins->n] = lo;
    pins->hi[pins->n] = hi;
    pins->n++;
}

void mti_kw_rearm_begin(mt_pins *pins, uintptr_t lo, uintptr_t hi)
{
    pins->n = 0;
    pins->all = 0;
    atomic_fetch_add_explicit(&g_rearmers, 1, memory_order_seq_cst);
    if (atomic_load_explicit(&g_overflow, memory_order_seq_cst) > 0) {
        pins->all = 1;
        return;
    }
    int words = atomic_load_explicit(&g_words, memory_order_seq_cst);
    for (int w = 0; w < words && !pins->all; w++) {
        uint64_t x = atomic_load_explicit(&g_taken[w], memory_order_seq_cst);
        for (; x && !pins->all; x &= x - 1) {
            int i = w * 64 + __builtin_ctzll(x);
            /* acquire: pairs with the release that made the slot ready. A
             * slot freed and taken again while it is read here may give a
             * mix of two pins: the new one's call has not made anything
             * writable yet (it waits for this re-arm), so only precision is
             * at stake. */
            if (!atomic_load_explicit(&g_slots[i].ready, memory_order_acquire)) {
                pins->all = 1;
                break;
            }
            int niv = atomic_load_explicit(&g_slots[i].niv, memory_order_relaxed);
            for (int k = 0; k < niv && k < MT_KW_IV; k++) {
                uintptr_t a = atomic_load_explicit(&g_slots[i].lo[k], memory_order_relaxed);
                uintptr_t b = atomic_load_explicit(&g_slots[i].hi[k], memory_order_relaxed);
                if (a < hi && b > lo) /* only pins this re-arm can meet */
                    add_pin(pins, a, b);
            }
        }
    }
}

void mti_kw_rearm_end(void)
{
    /* release: our mprotects are ordered before a waiting kernel write's. */
    atomic_fetch_sub_explicit(&g_rearmers, 1, memory_order_release);
}

typedef void (*seg_fn)(uintptr_t addr, size_t len, void *ctx);

/* Inlined at each use, so that `fn` is a direct (inlined) call. */
static inline __attribute__((always_inline)) void for_each_seg(const mt_kw_segs *s, seg_fn fn, void *ctx)
{
    for (size_t i = 0; i < s->niov; i++)
        if (s->iov[i].iov_len)
            fn((uintptr_t)s->iov[i].iov_base, s->iov[i].iov_len, ctx);
    for (size_t i = 0; i < s->nextra; i++)
        if (s->extra[i].iov_base && s->extra[i].iov_len)
            fn((uintptr_t)s->extra[i].iov_base, s->extra[i].iov_len, ctx);
    for (size_t m = 0; m < s->nmmsg; m++) {
        const struct msghdr *h = &s->mmsg[m].msg_hdr;
        for (size_t i = 0; h->msg_iov && i < h->msg_iovlen; i++)
            if (h->msg_iov[i].iov_len)
                fn((uintptr_t)h->msg_iov[i].iov_base, h->msg_iov[i].iov_len, ctx);
        if (h->msg_name && h->msg_namelen)
            fn((uintptr_t)h->msg_name, h->msg_namelen, ctx);
        if (h->msg_control && h->msg_controllen)
            fn((uintptr_t)h->msg_control, h->msg_controllen, ctx);
        fn((uintptr_t)&s->mmsg[m], sizeof s->mmsg[m], ctx); /* msg_len, msg_flags... */
    }
}

/* Page-granular cover of [addr, addr+len), clipped to the address space. */
static void page_cover(uintptr_t addr, size_t len, size_t ps, uintptr_t *lo, uintptr_t *hi)
{
    *lo = addr & ~(uintptr_t)(ps - 1);
    uintptr_t end = addr + len < addr ? UINTPTR_MAX : addr + len;
    *hi = end > UINTPTR_MAX - ps ? (UINTPTR_MAX & ~(uintptr_t)(ps - 1)) : (end + ps - 1) & ~(uintptr_t)(ps - 1);
}

/* ---- the pin: page intervals of every segment, tracked or not ---- */

/* A destination that is not tracked when the call begins may become
 * tracked before the kernel writes it (a memory the layer scanned and now
 * guards, a host buffer coherence starts tracking), so the pin names all
 * of it: the add that arms it then leaves those pages writable. */
typedef struct iv_ctx {
    size_t ps;
    int n;
    uintptr_t lo[MT_KW_IV], hi[MT_KW_IV];
} iv_ctx;

static void iv_seg(uintptr_t addr, size_t len, void *arg)
{
    iv_ctx *c = arg;
    uintptr_t lo, hi;
    page_cover(addr, len, c->ps, &lo, &hi);
    for (int k = 0; k < c->n; k++)
        if (lo <= c->hi[k] && hi >= c->lo[k]) { /* overlaps or touches */
            c->lo[k] = lo < c->lo[k] ? lo : c->lo[k];
            c->hi[k] = hi > c->hi[k] ? hi : c->hi[k];
            return;
        }
    if (c->n < MT_KW_IV) {
        c->lo[c->n] = lo;
        c->hi[c->n] = hi;
        c->n++;
        return;
    }
    /* Full: widen the interval that grows least (a wider pin only keeps
     * more pages writable and reported for the call's length). */
    int best = 0;
    uintptr_t best_gap = UINTPTR_MAX;
    for (int k = 0; k < c->n; k++) {
        uintptr_t gap = hi < c->lo[k] ? c->lo[k] - hi : lo - c->hi[k];
        if (gap < best_gap) {
            best_gap = gap;
            best = k;
        }
    }
    c->lo[best] = lo < c->lo[best] ? lo : c->lo[best];
    c->hi[best] = hi > c->hi[best] ? hi : c->hi[best];
}

/* ---- does a segment meet tracked signal-backend pages? ---- */

typedef struct meet_ctx {
    const mt_sig_entry *e;
    uint32_t n;
    size_t ps;
    int met;
} meet_ctx;

static void meet_seg(uintptr_t addr, size_t len, void *arg)
{
    meet_ctx *c = arg;
    uintptr_t lo, hi;
    page_cover(addr, len, c->ps, &lo, &hi);
    for (uint32_t i = mti_sigtable_first_ending_after(c->e, c->n, lo); i < c->n && c->e[i].start < hi; i++)
        if (c->e[i].range->backend == MT_TRACK_SIGNAL) /* uffd pages take kernel writes as they are */
            c->met = 1;
}

/* Per thread, the gap between tracked ranges that the last single-buffer
 * call wrote into, at a table version: the next call into the same gap at
 * the same version needs no look-up (most calls of a thread read into the
 * same few buffers). Initial-exec: no __tls_get_addr in a signal handler,
 * even in a dlopen()ed layer. A handler that interrupts an update finds
 * version 0, which never matches. */
static __thread struct {
    uint64_t version;
    uintptr_t lo, hi;
} tls_gap __attribute__((tls_model("initial-exec")));

static void remember_gap(uint64_t version, uintptr_t lo, uintptr_t hi)
{
    tls_gap.version = 0;
    atomic_signal_fence(memory_order_seq_cst);
    tls_gap.lo = lo;
    tls_gap.hi = hi;
    atomic_signal_fence(memory_order_seq_cst);
    tls_gap.version = version;
}

/* Whether segs meet tracked signal-backend pages now; *version: the table
 * version this answer is for. Called with the pin published: a range
 * inserted after the version was read arms around the pin. */
static int meets_tracked(const mt_kw_segs *segs, uint64_t *version)
{
    uint64_t v = mti_sigtable_version();
    *version = v;
    int single = segs->niov == 1 && segs->nextra == 0 && segs->nmmsg == 0;
    uintptr_t lo = 0, hi = 0;
    if (single) {
        page_cover((uintptr_t)segs->iov[0].iov_base, segs->iov[0].iov_len, mti_page_size(), &lo, &hi);
        atomic_signal_fence(memory_order_seq_cst);
        if (tls_gap.version == v && v != 0 && lo >= tls_gap.lo && hi <= tls_gap.hi)
            return 0;
    }
    if (mti_sigtable_count() == 0) { /* (and the table may not exist yet) */
        if (single)
            remember_gap(v, 0, UINTPTR_MAX);
        return 0;
    }
    meet_ctx c = {.met = 0};
    unsigned tok = mti_sigtable_enter_light(&c.e, &c.n);
    if (single) {
        /* The gap around [lo, hi) between signal-backend ranges (uffd
         * ranges take kernel writes as they are): a few entries each way at
         * most, then the nearest one bounds it. */
        uint32_t i = mti_sigtable_first_ending_after(c.e, c.n, lo), j = i;
        while (j < c.n && c.e[j].start < hi && c.e[j].range->backend != MT_TRACK_SIGNAL)
            j++;
        if (j == c.n || c.e[j].start >= hi) {
            for (int k = 0; k < 8 && j < c.n && c.e[j].range->backend != MT_TRACK_SIGNAL; k++)
                j++;
            uint32_t b = i;
            for (int k = 0; k < 8 && b > 0 && c.e[b - 1].range->backend != MT_TRACK_SIGNAL; k++)
                b--;
            uintptr_t gap_lo = b > 0 ? c.e[b - 1].end : 0, gap_hi = j < c.n ? c.e[j].start : UINTPTR_MAX;
            mti_sigtable_leave_light(tok); /* the entries are not read after this */
            remember_gap(v, gap_lo, gap_hi);
            return 0;
        }
    }
    if (c.n) {
        c.ps = (size_t)1 << c.e[0].range->page_shift;
        for_each_seg(segs, meet_seg, &c);
    }
    mti_sigtable_leave_light(tok);
    return c.met;
}

/* ---- prepare / finish: per range, pages of a segment ---- */

typedef struct prep_ctx {
    const mt_sig_entry *e;
    uint32_t n;
    size_t ps;
    int make_writable;
} prep_ctx;

static void prep_seg(uintptr_t addr, size_t len, void *arg)
{
    prep_ctx *c = arg;
    uintptr_t lo, hi;
    page_cover(addr, len, c->ps, &lo, &hi);
    for (uint32_t i = mti_sigtable_first_ending_after(c->e, c->n, lo); i < c->n && c->e[i].start < hi; i++) {
        mt_range *r = c->e[i].range;
        if (r->backend != MT_TRACK_SIGNAL)
            continue;
        uintptr_t a = lo > r->span_start ? lo : r->span_start;
        uintptr_t b = hi < r->span_end ? hi : r->span_end;
        if (a >= b)
            continue;
        size_t first = mti_page_index(r, a), cnt = (b - a) >> r->page_shift;
        /* Only the pages the application can write: on its own read-only
         * pages the kernel must fail exactly as it would without memtrack. */
        if (c->make_writable) {
            mti_protect_pages(r, first, cnt, MT_PROT_APP, r->span_start, NULL);
            atomic_fetch_add_explicit(&r->kernel_writes, 1, memory_order_relaxed);
        }
        for (size_t p = first; p < first + cnt; p++) {
            unsigned st = mti_pstate(r, p);
            if (!(st & MT_PS_GONE) && (st & PROT_WRITE))
                mti_bits_set(r->bits, p);
        }
    }
}

/* Takes a free slot and fills it with c's intervals; MT_KW_OVERFLOW when
 * all are taken (thousands of calls blocked at once): never waits, since
 * the calls that hold them may block for ever (a recv with no data). The
 * caller then reads `rearmers` (seq_cst after the seq_cst take). */
static int claim_slot(const iv_ctx *c)
{
    for (int w = 0; w < MT_KW_WORDS; w++) {
        uint64_t x = atomic_load_explicit(&g_taken[w], memory_order_relaxed);
        while (~x) {
            uint64_t bit = ~x & (x + 1); /* the lowest free one */
            x = atomic_fetch_or_explicit(&g_taken[w], bit, memory_order_seq_cst);
            if (x & bit)
                continue; /* another thread took it first: x is fresh */
            int i = w * 64 + __builtin_ctzll(bit);
            /* Before rearmers is read: a re-armer that missed this word's
             * count is one the caller then waits for. */
            int words = atomic_load_explicit(&g_words, memory_order_relaxed);
            while (words < w + 1 &&
                   !atomic_compare_exchange_weak_explicit(&g_words, &words, w + 1, memory_order_seq_cst,
                                                          memory_order_relaxed))
                ;
            for (int k = 0; k < c->n; k++) {
                atomic_store_explicit(&g_slots[i].lo[k], c->lo[k], memory_order_relaxed);
                atomic_store_explicit(&g_slots[i].hi[k], c->hi[k], memory_order_relaxed);
            }
            atomic_store_explicit(&g_slots[i].niv, c->n, memory_order_relaxed);
            /* release: the intervals before a re-armer's acquire of ready. */
            atomic_store_explicit(&g_slots[i].ready, 1, memory_order_release);
            return i;
        }
    }
    atomic_fetch_add_explicit(&g_overflow, 1, memory_order_seq_cst);
    return MT_KW_OVERFLOW;
}

/* Async-signal-safe. */
int mti_kw_begin(const mt_kw_segs *segs)
{
    iv_ctx ic = {.ps = mti_page_size(), .n = 0};
    for_each_seg(segs, iv_seg, &ic);
    if (ic.n == 0)
        return -1;
    int slot = claim_slot(&ic);
    int spins = 0;
    while (atomic_load_explicit(&g_rearmers, memory_order_seq_cst) > 0) {
        if (++spins < 64)
            mti_cpu_relax();
        else
            sched_yield();
    }
    /* The pages tracked now (the table is read after the wait, so a range
     * whose add raced with the pin is seen) are made writable. Asynchronous
     * signals blocked: a hook run from a signal handler on this thread must
     * not change protections in the middle of ours. */
    uint64_t version;
    int met = meets_tracked(segs, &version);
    if (slot != MT_KW_OVERFLOW) {
        g_slots[slot].met = met;
        g_slots[slot].version = version;
    }
    if (met) { /* the heavy section only where there is something to open */
        sigset_t saved;
        mti_sys_block_async(&saved);
        prep_ctx pc = {.make_writable = 1};
        unsigned tok = mti_sigtable_enter(&pc.e, &pc.n);
        if (pc.n) {
            pc.ps = (size_t)1 << pc.e[0].range->page_shift;
            for_each_seg(segs, prep_seg, &pc);
        }
        mti_sigtable_leave(tok);
        mti_sys_restore_mask(&saved);
    }
    return slot | (met ? MT_PRELOAD_KW_MET : 0);
}

/* Async-signal-safe. */
void mti_kw_end(int token, const mt_kw_segs *segs)
{
    int slot = token & ~MT_PRELOAD_KW_MET;
    if (token < 0 || slot > MT_KW_OVERFLOW)
        return;
    /* Nothing tracked at begin and no range added since: nothing to report.
     * (A range added after this look-up sees the pin, which keeps the pages
     * writable and dirty until the next collect after the slot is freed.)
     * Nothing here sets errno. */
    if (slot == MT_KW_OVERFLOW || g_slots[slot].met || g_slots[slot].version != mti_sigtable_version()) {
        prep_ctx pc = {.make_writable = 0};
        unsigned tok = mti_sigtable_enter_light(&pc.e, &pc.n);
        if (pc.n) {
            pc.ps = (size_t)1 << pc.e[0].range->page_shift;
            for_each_seg(segs, prep_seg, &pc);
        }
        mti_sigtable_leave_light(tok);
    }
    /* release: the bits above are set before a re-armer can see the page
     * unpinned and re-arm it. */
    if (slot == MT_KW_OVERFLOW) {
        atomic_fetch_sub_explicit(&g_overflow, 1, memory_order_release);
    } else {
        atomic_store_explicit(&g_slots[slot].ready, 0, memory_order_relaxed);
        atomic_fetch_and_explicit(&g_taken[slot / 64], ~(1ull << (slot % 64)), memory_order_release);
    }
}

/* fork() child: the kernel writes and collects of other threads do not
 * exist here (the forking thread is in neither: fork.c runs from fork()). */
void mti_kw_fork_child(void)
{
    for (int w = 0; w < MT_KW_WORDS; w++)
        atomic_store_explicit(&g_taken[w], 0, memory_order_relaxed);
    for (int i = 0; i < MT_KW_SLOTS; i++)
        atomic_store_explicit(&g_slots[i].ready, 0, memory_order_relaxed);
    atomic_store_explicit(&g_overflow, 0, memory_order_relaxed);
    atomic_store_explicit(&g_rearmers, 0, memory_order_relaxed);
}
