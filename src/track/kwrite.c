/* Kernel writes into tracked memory (read(2), recvmsg(2), fread() ...).
 *
 * With the signal backend a tracked page is read-only, and a kernel copy into
 * it fails with EFAULT: no signal is raised for a kernel-mode fault. The
 * interposer brackets each such call with mti_kw_begin/mti_kw_end:
 *
 *  begin: publish a pin over the tracked part of the destination, wait until
 *         no collect is between "decide which pages to re-arm" and
 *         "re-arm them", then make the pages writable and mark them dirty;
 *  the system call runs: the pages stay writable whatever collect does;
 *  end:   mark the pages dirty again (the kernel wrote them after any
 *         collect that ran meanwhile), drop the pin.
 *
 * Collect (and add) re-arm pages between mti_kw_rearm_begin/end and skip
 * pinned pages, keeping them dirty, so each collect during a long call (a
 * recv() waiting for data) reports them again: exact, if not precise.
 *
 * The handshake is a Dekker pair: a re-armer increments `rearmers` then
 * reads `pins_active`; a kernel write increments `pins_active` (its pin is
 * written before) then reads `rearmers`. With seq_cst on both, either the
 * re-armer sees the pin, or the kernel write sees the re-armer and waits for
 * it to finish. Why not retry on EFAULT: a datagram is consumed even when
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

enum { SLOT_FREE = 0, SLOT_FILLING = 1, SLOT_PINNED = 2 };

static struct {
    _Atomic int state;
    _Atomic uintptr_t lo, hi;
} g_slots[MT_KW_SLOTS];
static _Atomic int g_hwm; /* slots at or above are free */
static _Atomic int g_pins_active;
static _Atomic int g_rearmers;

void mti_kw_rearm_begin(mt_pins *pins)
{
    pins->n = 0;
    pins->all = 0;
    atomic_fetch_add_explicit(&g_rearmers, 1, memory_order_seq_cst);
    if (atomic_load_explicit(&g_pins_active, memory_order_seq_cst) == 0)
        return;
    int hwm = atomic_load_explicit(&g_hwm, memory_order_acquire);
    for (int i = 0; i < hwm; i++) {
        /* acquire: pairs with the release that made the slot PINNED. */
        if (atomic_load_explicit(&g_slots[i].state, memory_order_acquire) != SLOT_PINNED)
            continue;
        if (pins->n == (int)(sizeof pins->lo / sizeof *pins->lo)) {
            pins->all = 1;
            return;
        }
        pins->lo[pins->n] = atomic_load_explicit(&g_slots[i].lo, memory_order_relaxed);
        pins->hi[pins->n] = atomic_load_explicit(&g_slots[i].hi, memory_order_relaxed);
        pins->n++;
    }
}

void mti_kw_rearm_end(void)
{
    /* release: our mprotects are ordered before a waiting kernel write's. */
    atomic_fetch_sub_explicit(&g_rearmers, 1, memory_order_release);
}

typedef void (*seg_fn)(uintptr_t addr, size_t len, void *ctx);

static void for_each_seg(const mt_kw_segs *s, seg_fn fn, void *ctx)
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

/* ---- look-up: the hull of the tracked signal-backend pages in segs ---- */

typedef struct hull_ctx {
    const mt_sig_entry *e;
    uint32_t n;
    size_t ps;
    uintptr_t lo, hi;
} hull_ctx;

static void hull_seg(uintptr_t addr, size_t len, void *arg)
{
    hull_ctx *c = arg;
    uintptr_t lo, hi;
    page_cover(addr, len, c->ps, &lo, &hi);
    for (uint32_t i = mti_sigtable_first_ending_after(c->e, c->n, lo); i < c->n && c->e[i].start < hi; i++) {
        const mt_range *r = c->e[i].range;
        if (r->backend != MT_TRACK_SIGNAL)
            continue; /* the kernel's writes to uffd pages just work, and are recorded */
        uintptr_t a = lo > r->span_start ? lo : r->span_start;
        uintptr_t b = hi < r->span_end ? hi : r->span_end;
        if (a >= b)
            continue;
        if (c->hi == 0 || a < c->lo)
            c->lo = a;
        if (b > c->hi)
            c->hi = b;
    }
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

static int claim_slot(uintptr_t lo, uintptr_t hi)
{
    for (;;) {
        for (int i = 0; i < MT_KW_SLOTS; i++) {
            int expect = SLOT_FREE;
            if (atomic_load_explicit(&g_slots[i].state, memory_order_relaxed) != SLOT_FREE ||
                !atomic_compare_exchange_strong_explicit(&g_slots[i].state, &expect, SLOT_FILLING,
                                                         memory_order_acquire, memory_order_relaxed))
                continue;
            atomic_store_explicit(&g_slots[i].lo, lo, memory_order_relaxed);
            atomic_store_explicit(&g_slots[i].hi, hi, memory_order_relaxed);
            /* release: lo/hi before the state re-armers check. */
            atomic_store_explicit(&g_slots[i].state, SLOT_PINNED, memory_order_release);
            int h = atomic_load_explicit(&g_hwm, memory_order_relaxed);
            while (h < i + 1 &&
                   !atomic_compare_exchange_weak_explicit(&g_hwm, &h, i + 1, memory_order_release,
                                                          memory_order_relaxed))
                ;
            return i;
        }
        /* Every slot pinned by a kernel write in flight (4096 of them): wait
         * for one to end. */
        sched_yield();
    }
}

/* Async-signal-safe. */
int mti_kw_begin(const mt_kw_segs *segs)
{
    if (mti_sigtable_count() == 0)
        return -1;
    hull_ctx hc = {.ps = 0, .lo = 0, .hi = 0};
    unsigned tok = mti_sigtable_enter_light(&hc.e, &hc.n);
    if (hc.n)
        hc.ps = (size_t)1 << hc.e[0].range->page_shift;
    if (hc.n)
        for_each_seg(segs, hull_seg, &hc);
    mti_sigtable_leave_light(tok);
    if (hc.hi == 0)
        return -1;

    int slot = claim_slot(hc.lo, hc.hi);
    atomic_fetch_add_explicit(&g_pins_active, 1, memory_order_seq_cst);
    int spins = 0;
    while (atomic_load_explicit(&g_rearmers, memory_order_seq_cst) > 0) {
        if (++spins < 64)
            mti_cpu_relax();
        else
            sched_yield();
    }
    /* Asynchronous signals blocked: a hook run from a signal handler on this
     * thread must not change protections in the middle of ours. */
    sigset_t saved;
    mti_sys_block_async(&saved);
    prep_ctx pc = {.ps = hc.ps, .make_writable = 1};
    tok = mti_sigtable_enter(&pc.e, &pc.n);
    for_each_seg(segs, prep_seg, &pc);
    mti_sigtable_leave(tok);
    mti_sys_restore_mask(&saved);
    return slot;
}

/* Async-signal-safe. */
void mti_kw_end(int slot, const mt_kw_segs *segs)
{
    if (slot < 0 || slot >= MT_KW_SLOTS)
        return;
    int saved_errno = errno;
    prep_ctx pc = {.make_writable = 0};
    unsigned tok = mti_sigtable_enter_light(&pc.e, &pc.n);
    if (pc.n) {
        pc.ps = (size_t)1 << pc.e[0].range->page_shift;
        for_each_seg(segs, prep_seg, &pc);
    }
    mti_sigtable_leave_light(tok);
    /* release: the bits above are set before a re-armer can see the page
     * unpinned and re-arm it. */
    atomic_store_explicit(&g_slots[slot].state, SLOT_FREE, memory_order_release);
    atomic_fetch_sub_explicit(&g_pins_active, 1, memory_order_release);
    errno = saved_errno;
}

/* fork() child: the kernel writes and collects of other threads do not
 * exist here (the forking thread is in neither: fork.c runs from fork()). */
void mti_kw_fork_child(void)
{
    for (int i = 0; i < MT_KW_SLOTS; i++)
        atomic_store_explicit(&g_slots[i].state, SLOT_FREE, memory_order_relaxed);
    atomic_store_explicit(&g_hwm, 0, memory_order_relaxed);
    atomic_store_explicit(&g_pins_active, 0, memory_order_relaxed);
    atomic_store_explicit(&g_rearmers, 0, memory_order_relaxed);
}
