/* What the interposer calls: the application's own memory calls on tracked
 * memory, writes that bypass page protections, and kernel writes.
 *
 * Rules kept here (docs/track.md, "The application's own memory calls"):
 *  - the application's protection is respected per page: its mprotect is
 *    applied as asked, and recorded in the page states; armed pages are the
 *    application's protection minus write; a page it made read-only faults
 *    into its own handler.
 *  - pages whose content changed without a write fault are reported dirty:
 *    after mprotect(PROT_WRITE) (the pages are writable until the next
 *    collect re-arms them), MADV_DONTNEED/REMOVE/FREE (zeroed; FREE is
 *    turned into DONTNEED on tracked pages, one of the outcomes FREE allows,
 *    because a lazily freed page can be zeroed by the kernel at any later
 *    time without any event), writes through /proc/self/mem.
 *  - unmapped, moved or replaced pages are marked gone: never re-protected,
 *    never reported; collect says MT_EUNMAPPED once the range's live pages
 *    are drained. Pages moved by mremap get the application's protection at
 *    their new address (they carried the armed one with them).
 *
 * The memory calls run as hook writers (sigtable.c): the real call and the
 * page states change together while no reader is inside. */
#define _GNU_SOURCE
#include <errno.h>
#include <sys/mman.h>
#include <unistd.h>

#include "internal.h"

#ifndef MADV_DONTNEED_LOCKED
#define MADV_DONTNEED_LOCKED 24
#endif
#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23
#endif

static size_t page_size(void) { return mti_page_size(); }

static uintptr_t floor_page(uintptr_t a) { return a & ~(uintptr_t)(page_size() - 1); }

static uintptr_t ceil_page(uintptr_t a)
{
    size_t ps = page_size();
    return a > UINTPTR_MAX - ps ? floor_page(UINTPTR_MAX) : (a + ps - 1) & ~(uintptr_t)(ps - 1);
}

static uintptr_t end_of(uintptr_t a, size_t len)
{
    return a + len < a ? UINTPTR_MAX : a + len;
}

typedef void (*pages_fn)(mt_range *r, size_t first, size_t n, void *ctx);

/* Calls fn for each range with pages in [pa, pb) (page-aligned). */
static void for_each_range(const mt_sig_entry *e, uint32_t n, uintptr_t pa, uintptr_t pb, pages_fn fn,
                           void *ctx)
{
    for (uint32_t i = mti_sigtable_first_ending_after(e, n, pa); i < n && e[i].start < pb; i++) {
        mt_range *r = e[i].range;
        uintptr_t lo = pa > r->span_start ? pa : r->span_start;
        uintptr_t hi = pb < r->span_end ? pb : r->span_end;
        if (lo < hi)
            fn(r, mti_page_index(r, lo), (hi - lo) >> r->page_shift, ctx);
    }
}

/* Async-signal-safe look-up: does any range have pages in [pa, pb)? */
static int tracked(uintptr_t pa, uintptr_t pb)
{
    if (pb <= pa || mti_sigtable_count() == 0)
        return 0;
    const mt_sig_entry *e;
    uint32_t n;
    unsigned tok = mti_sigtable_enter_light(&e, &n);
    uint32_t i = mti_sigtable_first_ending_after(e, n, pa);
    int hit = i < n && e[i].start < pb;
    mti_sigtable_leave_light(tok);
    return hit;
}

static void mark_dirty(mt_range *r, size_t first, size_t n, void *ctx)
{
    (void)ctx;
    for (size_t p = first; p < first + n; p++)
        if (!(mti_pstate(r, p) & MT_PS_GONE))
            mti_bits_set(r->bits, p);
    atomic_fetch_add_explicit(&r->app_calls, 1, memory_order_relaxed);
}

/* Reports [pa, pb) dirty in every range there. Async-signal-safe. A light
 * section: a page the application unmaps meanwhile may get a bit, which
 * collect drops (gone pages are never reported). */
static void dirty_pages(uintptr_t pa, uintptr_t pb)
{
    const mt_sig_entry *e;
    uint32_t n;
    unsigned tok = mti_sigtable_enter_light(&e, &n);
    for_each_range(e, n, pa, pb, mark_dirty, NULL);
    mti_sigtable_leave_light(tok);
}

static void set_prot(mt_range *r, size_t first, size_t n, void *ctx)
{
    unsigned prot = *(const int *)ctx & MT_PS_PROT;
    for (size_t p = first; p < first + n; p++) {
        unsigned st = mti_pstate(r, p);
        if (st & MT_PS_GONE)
            continue;
        atomic_store_explicit(&r->pstate[p], (uint8_t)((st & ~MT_PS_PROT) | prot), memory_order_relaxed);
        /* The real mprotect just made it writable: written from now on
         * without a fault, so dirty until the next collect re-arms it. */
        if (r->backend == MT_TRACK_SIGNAL && (prot & PROT_WRITE))
            mti_bits_set(r->bits, p);
    }
    atomic_fetch_add_explicit(&r->app_calls, 1, memory_order_relaxed);
}

static void set_gone(mt_range *r, size_t first, size_t n, void *ctx)
{
    (void)ctx;
    size_t newly = 0;
    for (size_t p = first; p < first + n; p++) {
        unsigned st = mti_pstate(r, p);
        if (st & MT_PS_GONE)
            continue;
        atomic_store_explicit(&r->pstate[p], (uint8_t)(st | MT_PS_GONE), memory_order_relaxed);
        newly++;
    }
    atomic_fetch_add_explicit(&r->gone_pages, newly, memory_order_relaxed);
    atomic_fetch_add_explicit(&r->app_calls, 1, memory_order_relaxed);
}

typedef struct move_ctx {
    uintptr_t old, dst;
} move_ctx;

/* Pages moved from c->old to c->dst carried the armed protection: give them
 * the application's at their new address. */
static void fix_moved(mt_range *r, size_t first, size_t n, void *ctx)
{
    const move_ctx *c = ctx;
    if (r->backend != MT_TRACK_SIGNAL)
        return;
    uintptr_t base = r->span_start - c->old + c->dst;
    mti_protect_pages(r, first, n, MT_PROT_APP, base, NULL);
}

static void gone_locked(uintptr_t pa, uintptr_t pb)
{
    uint32_t n;
    const mt_sig_entry *e = mti_sigtable_locked_view(&n);
    for_each_range(e, n, pa, pb, set_gone, NULL);
    /* A handler that trapped there before the change retries once. */
    mti_sigtable_note_removed(pa, pb);
}

static int hook_mprotect(void *addr, size_t len, int prot)
{
    uintptr_t pa = (uintptr_t)addr, pb = ceil_page(end_of(pa, len));
    if (!tracked(floor_page(pa), pb)) {
        int rc = mti_sys_mprotect(pa, len, prot);
        mti_readable_note(prot);
        if (rc)
            errno = -rc;
        return rc ? -1 : 0;
    }
    mti_sigtable_lock();
    mti_sigtable_hook_begin();
    int rc = mti_sys_mprotect(pa, len, prot);
    if (rc == 0) {
        uint32_t n;
        const mt_sig_entry *e = mti_sigtable_locked_view(&n);
        for_each_range(e, n, pa, pb, set_prot, &prot);
    }
    mti_sigtable_hook_end();
    mti_sigtable_unlock();
    mti_readable_note(prot);
    if (rc)
        errno = -rc;
    return rc ? -1 : 0;
}

static int hook_munmap(void *addr, size_t len)
{
    uintptr_t pa = (uintptr_t)addr, pb = ceil_page(end_of(pa, len));
    if (!tracked(floor_page(pa), pb)) {
        int rc = mti_sys_munmap(addr, len);
        if (rc)
            errno = -rc;
        return rc ? -1 : 0;
    }
    mti_sigtable_lock();
    mti_sigtable_hook_begin();
    int rc = mti_sys_munmap(addr, len);
    if (rc == 0)
        gone_locked(pa, pb);
    mti_sigtable_hook_end();
    mti_sigtable_unlock();
    if (rc)
        errno = -rc;
    return rc ? -1 : 0;
}

static void *hook_mmap_fixed(void *addr, size_t len, int prot, int flags, int fd, off_t off)
{
    uintptr_t pa = (uintptr_t)addr, pb = ceil_page(end_of(pa, len));
    if (!tracked(floor_page(pa), pb)) {
        void *p = mti_sys_mmap(addr, len, prot, flags, fd, off);
        int err = errno;
        mti_readable_note(prot);
        errno = err;
        return p;
    }
    mti_sigtable_lock();
    mti_sigtable_hook_begin();
    void *p = mti_sys_mmap(addr, len, prot, flags, fd, off);
    int err = errno;
    if (p != MAP_FAILED)
        gone_locked(pa, pb); /* the old pages were replaced */
    mti_sigtable_hook_end();
    mti_sigtable_unlock();
    mti_readable_note(prot);
    errno = err;
    return p;
}

static void *hook_mremap(void *old_addr, size_t old_len, size_t new_len, int flags, void *new_addr)
{
    uintptr_t old = (uintptr_t)old_addr;
    /* old_len 0 duplicates a shared mapping: the new view starts at old. */
    uintptr_t ob = ceil_page(end_of(old, old_len ? old_len : new_len));
    uintptr_t na = (uintptr_t)new_addr, nb = ceil_page(end_of(na, new_len));
    int fixed = (flags & MREMAP_FIXED) != 0;
    if (!tracked(floor_page(old), ob) && !(fixed && tracked(floor_page(na), nb))) {
        void *p = mti_sys_mremap(old_addr, old_len, new_len, flags, new_addr);
        int err = errno;
        mti_readable_note(0); /* pages of any protection may have moved in */
        errno = err;
        return p;
    }
    mti_sigtable_lock();
    mti_sigtable_hook_begin();
    void *p = mti_sys_mremap(old_addr, old_len, new_len, flags, new_addr);
    int err = errno;
    if (p != MAP_FAILED) {
        uintptr_t dst = (uintptr_t)p;
        size_t olen = (size_t)(ceil_page(end_of(old, old_len)) - old);
        size_t nlen = (size_t)(ceil_page(end_of(old, new_len)) - old);
        size_t moved = old_len == 0 ? nlen : (olen < nlen ? olen : nlen);
        uint32_t n;
        const mt_sig_entry *e = mti_sigtable_locked_view(&n);
        if (fixed) /* whatever was at the destination was unmapped */
            gone_locked(dst, ceil_page(dst + new_len));
        if (dst != old || old_len == 0 || (flags & MREMAP_DONTUNMAP)) {
            move_ctx mc = {old, dst};
            for_each_range(e, n, old, old + moved, fix_moved, &mc);
            mti_sigtable_note_removed(dst, dst + moved); /* a fault there during the move retries */
        }
        if (old_len == 0) {
            /* a second view of shared pages; the first stays as it was */
        } else if (flags & MREMAP_DONTUNMAP) {
            /* still mapped, but emptied: zero (anonymous) or refetched */
            for_each_range(e, n, old, old + olen, mark_dirty, NULL);
        } else {
            size_t keep = dst == old ? moved : 0;
            if (keep < olen)
                gone_locked(old + keep, old + olen);
        }
    }
    mti_sigtable_hook_end();
    mti_sigtable_unlock();
    mti_readable_note(0);
    errno = err;
    return p;
}

static int hook_madvise(void *addr, size_t len, int advice)
{
    uintptr_t pa = (uintptr_t)addr, pb = ceil_page(end_of(pa, len));
    int content = advice == MADV_DONTNEED || advice == MADV_DONTNEED_LOCKED || advice == MADV_REMOVE ||
                  advice == MADV_FREE;
    int populate = advice == MADV_POPULATE_WRITE;
    if ((!content && !populate) || !tracked(floor_page(pa), pb)) {
        int rc = mti_sys_madvise(addr, len, advice);
        if (rc)
            errno = -rc;
        return rc ? -1 : 0;
    }
    int rc;
    if (populate) {
        /* Write-faults the pages in, which the signal backend's armed pages
         * refuse (EFAULT): a kernel write like read(2). */
        struct iovec seg = {addr, len};
        mt_kw_segs segs = {.iov = &seg, .niov = 1};
        int tok = mti_kw_begin(&segs);
        rc = mti_sys_madvise(addr, len, advice);
        if (tok >= 0)
            mti_kw_end(tok, &segs);
    } else {
        rc = mti_sys_madvise(addr, len, advice);
        if (rc == 0 && advice == MADV_FREE)
            mti_sys_madvise(addr, len, MADV_DONTNEED);
        if (rc == 0)
            dirty_pages(pa, pb);
    }
    if (rc)
        errno = -rc;
    return rc ? -1 : 0;
}

static void hook_written(uintptr_t addr, size_t len)
{
    if (len)
        dirty_pages(floor_page(addr), ceil_page(end_of(addr, len)));
}

_Static_assert(MT_PRELOAD_LAST_EXEC == MT_TRACK_LAST_EXEC && MT_PRELOAD_LAST_EXIT == MT_TRACK_LAST_EXIT,
              "the interposer and track agree on last_words' codes");

const mt_preload_hooks mti_hooks = {
    .abi = MT_PRELOAD_ABI_VERSION,
    .size = sizeof(mt_preload_hooks),
    .sigaction = mti_chain_app_sigaction,
    .kw_begin = mti_kw_begin,
    .kw_end = mti_kw_end,
    .written = hook_written,
    .mprotect = hook_mprotect,
    .munmap = hook_munmap,
    .mremap = hook_mremap,
    .madvise = hook_madvise,
    .mmap_fixed = hook_mmap_fixed,
    .last_words = mti_last_words_call,
    .async_writer = mti_sig_unbracketed,
};
