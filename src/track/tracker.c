/* Tracker core: range bookkeeping, backend choice, the public API. */
#define _GNU_SOURCE
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "internal.h"

#define MT_DEFAULT_MAX_RANGES 4096u

static int valid_backend(int b) { return b >= MT_TRACK_AUTO && b <= MT_TRACK_UFFD; }

static void free_tables(mt_tracker *t)
{
    mti_arena_free(t->slots, t->nslots * sizeof *t->slots);
    mti_arena_free(t->slot_gen, t->nslots * sizeof *t->slot_gen);
    mti_arena_free(t->sorted, t->nslots * sizeof *t->sorted);
    mti_arena_free(t, sizeof *t);
}

/* A fork child whose parent had another thread inside this tracker: its
 * tables may be half-updated there, so every call fails (fork.c). */
static int poisoned(mt_tracker *t)
{
    return atomic_load_explicit(&t->poisoned, memory_order_relaxed);
}

int mt_tracker_create(const mt_tracker_opts *opts, mt_tracker **out)
{
    mt_tracker_opts o = {0};
    if (opts)
        o = *opts;
    if (!out || !valid_backend((int)o.backend))
        return -EINVAL;
    if (o.max_ranges == 0)
        o.max_ranges = MT_DEFAULT_MAX_RANGES;
    if (o.max_ranges > (1u << 24) || o.helper_threads > 64)
        return -EINVAL;
    if (o.backend == MT_TRACK_UFFD && !mti_uffd_probe())
        return MT_EUNSUPPORTED;
    /* The interposer, if preloaded, must know about us before any range
     * exists (its real functions are what track calls from now on). */
    mti_preload_link();
    /* With the interposer, memtrack's handler goes first from now on, for
     * every backend: the application's SIGSEGV/SIGBUS dispositions and
     * masks are then virtualised uniformly (signals the application blocks
     * only virtually are emulated by the handler). */
    if (mti_sys_attached()) {
        int rc = mti_sig_install();
        if (rc)
            return rc;
    }
    /* Everything from the arena, never malloc (see arena.c). */
    mt_tracker *t = mti_arena_alloc(sizeof *t);
    if (!t)
        return -ENOMEM;
    t->opts = o;
    t->page_size = mti_page_size();
    t->page_shift = (unsigned)__builtin_ctzl((unsigned long)t->page_size);
    t->nslots = o.max_ranges;
    t->slots = mti_arena_alloc(t->nslots * sizeof *t->slots);
    t->slot_gen = mti_arena_alloc(t->nslots * sizeof *t->slot_gen);
    t->sorted = mti_arena_alloc(t->nslots * sizeof *t->sorted);
    t->uffd = t->pagemap_fd = -1;
    if (!t->slots || !t->slot_gen || !t->sorted || pthread_rwlock_init(&t->lock, NULL) != 0) {
        free_tables(t);
        return -ENOMEM;
    }
    /* The collection helper: started now, so that its (asynchronous)
     * start-up is over by the first collect; a failure leaves collection
     * in-process and is reported by mt_tracker_helper_status(). */
    if (o.helper_threads && o.backend != MT_TRACK_SIGNAL && mti_uffd_probe() &&
        mti_uffd_open(t) == 0)
        (void)mti_helper_start(t, o.helper_threads);
    /* The list of mappings and /proc/self/mem, opened while the application
     * can still open files (procfd.c). */
    mti_procfd_warm();
    mti_fork_register(t);
    *out = t;
    return 0;
}

static mt_range *lookup(mt_tracker *t, mt_range_id id)
{
    uint64_t slot = (id & 0xffffffffu);
    if (slot == 0 || slot > t->nslots)
        return NULL;
    mt_range *r = t->slots[slot - 1];
    return r && r->id == id ? r : NULL;
}

static int overlaps(const mt_tracker *t, uintptr_t start, uintptr_t end, uint32_t *pos)
{
    /* First range whose bytes end after `start`. */
    uint32_t lo = 0, hi = t->nsorted;
    while (lo < hi) {
        uint32_t mid = lo + (hi - lo) / 2;
        if (t->sorted[mid]->end <= start)
            lo = mid + 1;
        else
            hi = mid;
    }
    *pos = lo;
    return lo < t->nsorted && t->sorted[lo]->start < end;
}

static void free_range(mt_range *r)
{
    if (r)
        mti_arena_free(r, r->alloc_bytes);
}

/* The range, its dirty bitmap and its page states in one arena block. */
static mt_range *new_range(mt_tracker *t, uintptr_t start, size_t len, const mt_range_opts *o)
{
    uintptr_t mask = (uintptr_t)t->page_size - 1;
    uintptr_t span_start = start & ~mask, span_end = ((start + len) + mask) & ~mask;
    if (span_end <= span_start) /* the last page of the address space */
        return NULL;
    size_t npages = (span_end - span_start) >> t->page_shift;
    size_t nwords = (npages + 63) / 64;
    size_t head = (sizeof(mt_range) + 7) & ~(size_t)7;
    size_t bytes = head + nwords * sizeof(uint64_t) + npages;
    /* Hot pages: a bitmap and two bytes of history per page, after the
     * page states (aligned for their types). */
    size_t hot_at = (bytes + 7) & ~(size_t)7, heat_at = hot_at + nwords * sizeof(uint64_t);
    if (o->flags & MT_RANGE_HOT_PAGES)
        bytes = heat_at + npages * sizeof(uint16_t);
    /* With a collection helper: a pending-job word per window. */
    size_t pend_at = (bytes + 7) & ~(size_t)7;
    if (t->helper)
        bytes = pend_at + (npages + 4095) / 4096 * sizeof(uint32_t);
    mt_range *r = mti_arena_alloc(bytes);
    if (!r)
        return NULL;
    r->alloc_bytes = bytes;
    r->bits = (_Atomic uint64_t *)((unsigned char *)r + head);
    r->pstate = (_Atomic uint8_t *)((unsigned char *)r + head + nwords * sizeof(uint64_t));
    if (o->flags & MT_RANGE_HOT_PAGES) {
        r->hot = (_Atomic uint64_t *)((unsigned char *)r + hot_at);
        r->heat = (_Atomic uint16_t *)((unsigned char *)r + heat_at);
    }
    if (t->helper)
        r->pend = (_Atomic uint32_t *)((unsigned char *)r + pend_at);
    atomic_store_explicit(&r->pass, 1, memory_order_relaxed);
    r->fault_budget = o->fault_budget;
    r->owner = t;
    r->start = start;
    r->end = start + len;
    r->span_start = start & ~mask;
    r->span_end = (r->end + mask) & ~mask;
    r->page_shift = t->page_shift;
    r->npages = (r->span_end - r->span_start) >> t->page_shift;
    r->nwords = nwords;
    /* The application's protection of the pages now (what remove restores). */
    unsigned prot = (unsigned)(o->prot ? o->prot : PROT_READ | PROT_WRITE) & MT_PS_PROT;
    for (size_t i = 0; i < npages; i++)
        atomic_store_explicit(&r->pstate[i], (uint8_t)prot, memory_order_relaxed);
    return r;
}

/* mti_vma_fn: [lo, hi) is mapped shared or not. */
static void note_shared(void *ctx, uintptr_t lo, uintptr_t hi, unsigned prot)
{
    (void)lo;
    (void)hi;
    if (prot & MTI_VMA_SHARED)
        ((mt_range *)ctx)->shared_map = 1;
}

/* mti_vma_fn: the pages of [lo, hi) have protection prot now. */
static void own_prot(void *ctx, uintptr_t lo, uintptr_t hi, unsigned prot)
{
    mt_range *r = ctx;
    note_shared(ctx, lo, hi, prot);
    for (uintptr_t a = lo; a < hi; a += (uintptr_t)1 << r->page_shift)
        atomic_store_explicit(&r->pstate[mti_page_index(r, a)], (uint8_t)(prot & MT_PS_PROT),
                              memory_order_relaxed);
}

/* End pages shared with a range of another backend or tracker take the
 * state it recorded: one page, one protection. Table lock held. */
static void inherit_edge_states(mt_range *r)
{
    uintptr_t edges[2] = {r->span_start, r->span_end - ((uintptr_t)1 << r->page_shift)};
    for (int k = 0; k < 2; k++) {
        int st = mti_sigtable_page_state(edges[k], r);
        if (st >= 0 && !(st & MT_PS_GONE))
            atomic_store_explicit(&r->pstate[mti_page_index(r, edges[k])], (uint8_t)st,
                                  memory_order_relaxed);
    }
}

static int table_overlaps(uintptr_t start, uintptr_t end)
{
    uint32_t n;
    const mt_sig_entry *e = mti_sigtable_locked_view(&n);
    if (!e)
        return 0;
    uint32_t i = mti_sigtable_first_ending_after(e, n, start);
    return i < n && e[i].start < end;
}

/* Arms r with the requested backend, falling back from auto to signal. The
 * table of all ranges (every tracker's) is locked throughout: its overlap
 * check is the one that counts, and the hooks see r only once armed. */
static int arm(mt_tracker *t, mt_range *r, mt_track_backend want)
{
    mti_sigtable_lock();
    int rc = table_overlaps(r->start, r->end) ? -EEXIST : 0;
    if (rc == 0)
        inherit_edge_states(r);
    if (rc == 0 && (want == MT_TRACK_AUTO || want == MT_TRACK_UFFD)) {
        rc = mti_uffd_probe() ? mti_uffd_arm_range(t, r) : MT_EUNSUPPORTED;
        if (rc == 0) {
            r->backend = MT_TRACK_UFFD;
            rc = mti_sigtable_insert(r);
            if (rc)
                mti_uffd_disarm_range(t, r);
            mti_sigtable_unlock();
            return rc;
        }
        if (want == MT_TRACK_UFFD) {
            mti_sigtable_unlock();
            return rc;
        }
        r->fallback_reason = rc; /* e.g. -EINVAL for a device mapping */
        rc = 0;
    }
    if (rc == 0) {
        r->backend = MT_TRACK_SIGNAL;
        rc = mti_sig_arm_range(r);
    }
    mti_sigtable_unlock();
    return rc;
}

int mt_tracker_add(mt_tracker *t, void *addr, size_t len, const mt_range_opts *opts,
                   mt_range_id *id)
{
    mt_range_opts o = {0};
    if (opts)
        o = *opts;
    uintptr_t start = (uintptr_t)addr;
    if (!t || !addr || !id || len == 0 || start + len < start || !valid_backend((int)o.backend) ||
        (o.flags & ~(uint32_t)(MT_RANGE_INITIALLY_DIRTY | MT_RANGE_HOT_PAGES)))
        return -EINVAL;
    if (o.prot & ~(PROT_READ | PROT_WRITE | PROT_EXEC))
        return -EINVAL;
    if (poisoned(t))
        return -ENOTRECOVERABLE;
    mt_track_backend want = o.backend ? o.backend : t->opts.backend;
    mt_range *r = new_range(t, start, len, &o);
    if (!r)
        return -ENOMEM;
    /* Protection not given: the pages' own, which the signal backend keeps
     * (arms them as they are, passes on the write faults of pages that are
     * not writable, restores them on remove). Another layer below the
     * caller may have protected them already (vmaprot.c). uffd leaves
     * protections alone. Before the table lock: the kernel's list of
     * mappings can be long. */
    if (o.prot == 0 && want != MT_TRACK_UFFD)
        mti_vma_prot(r->span_start, r->span_end, own_prot, r);
    else /* whether it is shared, for forks (fork.c) */
        mti_vma_prot(r->span_start, r->span_end, note_shared, r);
    r->add_pid = getpid();
    r->add_seq = mti_fork_next_seq();

    pthread_rwlock_wrlock(&t->lock);
    uint32_t pos, slot;
    int rc = 0;
    if (overlaps(t, r->start, r->end, &pos))
        rc = -EEXIST;
    for (slot = 0; rc == 0 && slot < t->nslots && t->slots[slot]; slot++)
        ;
    if (rc == 0 && slot == t->nslots)
        rc = -ENOSPC;
    if (rc == 0) {
        /* The id before arming: a uffd neighbour handed a page during arming
         * looks ranges up by position, not id, so this is only for callers. */
        uint32_t gen = ++t->slot_gen[slot];
        if (gen == 0)
            gen = t->slot_gen[slot] = 1;
        r->id = ((uint64_t)gen << 32) | (slot + 1);
        rc = arm(t, r, want);
    }
    if (rc == 0) {
        if (o.flags & MT_RANGE_INITIALLY_DIRTY)
            mti_bits_set_range(r->bits, 0, r->npages);
        memmove(t->sorted + pos + 1, t->sorted + pos, (t->nsorted - pos) * sizeof *t->sorted);
        t->sorted[pos] = r;
        t->nsorted++;
        t->slots[slot] = r;
        *id = r->id;
    }
    pthread_rwlock_unlock(&t->lock);
    if (rc)
        free_range(r);
    return rc;
}

/* Caller holds the write lock. */
static void remove_locked(mt_tracker *t, mt_range *r)
{
    if (r->backend == MT_TRACK_SIGNAL) {
        mti_sig_disarm_range(r);
    } else {
        mti_helper_drop_range(t, r);
        mti_sigtable_lock();
        mti_uffd_disarm_range(t, r);
        mti_sigtable_remove(r);
        mti_sigtable_unlock();
    }
    uint32_t pos = mti_track_sorted_lower(t, r->span_start);
    while (pos < t->nsorted && t->sorted[pos] != r)
        pos++;
    memmove(t->sorted + pos, t->sorted + pos + 1, (t->nsorted - pos - 1) * sizeof *t->sorted);
    t->nsorted--;
    t->slots[(r->id & 0xffffffffu) - 1] = NULL;
}

int mt_tracker_remove(mt_tracker *t, mt_range_id id)
{
    if (!t)
        return -EINVAL;
    if (poisoned(t))
        return -ENOTRECOVERABLE;
    pthread_rwlock_wrlock(&t->lock);
    mt_range *r = lookup(t, id);
    if (r)
        remove_locked(t, r);
    pthread_rwlock_unlock(&t->lock);
    free_range(r);
    return r ? 0 : -ENOENT;
}

void mt_tracker_destroy(mt_tracker *t)
{
    if (!t)
        return;
    mti_fork_unregister(t);
    if (poisoned(t))
        return; /* a fork child: leave the half-updated tables alone */
    pthread_rwlock_wrlock(&t->lock);
    while (t->nsorted > 0) {
        mt_range *r = t->sorted[t->nsorted - 1];
        remove_locked(t, r);
        free_range(r);
    }
    mti_helper_stop(t);
    mti_uffd_close(t);
    pthread_rwlock_unlock(&t->lock);
    pthread_rwlock_destroy(&t->lock);
    free_tables(t);
}

long mt_tracker_collect(mt_tracker *t, mt_range_id id, mt_dirty_run *runs, size_t max)
{
    if (!t || !runs || max == 0)
        return -EINVAL;
    if (poisoned(t))
        return -ENOTRECOVERABLE;
    pthread_rwlock_rdlock(&t->lock);
    mt_range *r = lookup(t, id);
    long n = r ? mti_collect_range(t, r, runs, max, 0) : -ENOENT;
    pthread_rwlock_unlock(&t->lock);
    return n;
}

long mt_tracker_collect_all(mt_tracker *t, mt_dirty_run *runs, size_t max)
{
    if (!t || !runs || max == 0)
        return -EINVAL;
    if (poisoned(t))
        return -ENOTRECOVERABLE;
    pthread_rwlock_rdlock(&t->lock);
    size_t n = 0;
    /* The last call filled the caller's array: this one goes on with its
     * sweep (hot pages it reported are not reported again, see hot.c). */
    uint64_t sweep = atomic_load_explicit(&t->sweep_open, memory_order_relaxed)
                         ? atomic_load_explicit(&t->sweep, memory_order_relaxed)
                         : atomic_fetch_add_explicit(&t->sweep, 1, memory_order_relaxed) + 1;
    for (uint32_t i = 0; i < t->nsorted && n < max; i++) {
        /* A range the application unmapped reports its live pages here; that
         * it is gone shows in its stats and its own collect. */
        long k = mti_collect_range(t, t->sorted[i], runs + n, max - n, sweep);
        if (k > 0)
            n += (size_t)k;
    }
    atomic_store_explicit(&t->sweep_open, n == max, memory_order_relaxed);
    pthread_rwlock_unlock(&t->lock);
    return (long)n;
}

long mt_tracker_collect_ahead(mt_tracker *t, const mt_range_id *ids, size_t n)
{
    if (!t || (!ids && n))
        return -EINVAL;
    if (poisoned(t))
        return -ENOTRECOVERABLE;
    long posted = 0;
    mt_range *batch[64]; /* posted together: one wake-up of the helper */
    size_t nb = 0;
    pthread_rwlock_rdlock(&t->lock);
    for (size_t i = 0; i < n; i++) {
        mt_range *r = lookup(t, ids[i]);
        if (r)
            batch[nb++] = r;
        if (nb == 64 || (i + 1 == n && nb)) {
            posted += mti_helper_post(t, batch, nb);
            nb = 0;
        }
    }
    pthread_rwlock_unlock(&t->lock);
    return posted;
}

int mt_tracker_helper_status(mt_tracker *t)
{
    if (!t)
        return -EINVAL;
    return mti_helper_status(t);
}

int mt_tracker_prepare_write(mt_tracker *t, mt_range_id id, void *addr, size_t len)
{
    if (!t || len == 0)
        return -EINVAL;
    if (poisoned(t))
        return -ENOTRECOVERABLE;
    pthread_rwlock_rdlock(&t->lock);
    mt_range *r = lookup(t, id);
    uintptr_t a = (uintptr_t)addr;
    int rc = 0;
    if (!r)
        rc = -ENOENT;
    else if (a < r->start || a + len > r->end || a + len < a)
        rc = -EINVAL;
    else {
        size_t first = mti_page_index(r, a & ~(uintptr_t)(t->page_size - 1));
        size_t last = mti_page_index(r, (a + len - 1) & ~(uintptr_t)(t->page_size - 1));
        if (r->backend == MT_TRACK_SIGNAL)
            rc = mti_sig_make_writable(r, first, last - first + 1);
        else
            mti_bits_set_range(r->bits, first, last - first + 1); /* kernel writes are tracked */
    }
    pthread_rwlock_unlock(&t->lock);
    return rc;
}

int mt_tracker_shared_with_child(mt_tracker *t, mt_range_id id)
{
    if (!t)
        return -EINVAL;
    if (poisoned(t))
        return -ENOTRECOVERABLE;
    pthread_rwlock_rdlock(&t->lock);
    mt_range *r = lookup(t, id);
    int rc = r ? mti_fork_inherited(r) : -ENOENT;
    pthread_rwlock_unlock(&t->lock);
    return rc;
}

int mt_tracker_peek(mt_tracker *t, mt_range_id id, size_t offset, size_t len)
{
    if (!t || len == 0)
        return -EINVAL;
    if (poisoned(t))
        return -ENOTRECOVERABLE;
    pthread_rwlock_rdlock(&t->lock);
    mt_range *r = lookup(t, id);
    int written = 0;
    if (!r)
        written = -ENOENT;
    else if (offset > r->end - r->start || len > r->end - r->start - offset)
        written = -EINVAL;
    else {
        uintptr_t mask = ((uintptr_t)1 << r->page_shift) - 1;
        uintptr_t a = (r->start + offset) & ~mask, b = (r->start + offset + len + mask) & ~mask;
        size_t first = mti_page_index(r, a), last = mti_page_index(r, b) - 1;
        /* Dirty bits: the signal backend's faults, and what either backend
         * was told (kernel writes, the application's memory calls). */
        for (size_t p = first; p <= last && !written; p++)
            written = (atomic_load_explicit(&r->bits[p / 64], memory_order_acquire) >> (p % 64)) & 1;
        /* Shared memory a descendant process may write (fork.c). */
        if (!written)
            written = mti_fork_inherited(r);
        /* A hot page is writable without a fault: it may have been written. */
        if (!written)
            written = mti_hot_any(r, first, last);
        /* So is any page of the range while a fault handler is between
         * making its page writable and setting its bit: another thread's
         * write may have landed there meanwhile, bit still unset. */
        if (!written)
            written = (atomic_load_explicit(&r->faulting[0], memory_order_acquire) |
                       atomic_load_explicit(&r->faulting[1], memory_order_acquire)) != 0;
        /* A scan the helper may have done already consumed the kernel's
         * written state: like a hot page, it may have been written. */
        for (size_t w = first / 4096; w <= last / 4096 && !written; w++)
            written = mti_helper_pending(r, w);
        if (!written && r->backend == MT_TRACK_UFFD) {
            int w = mti_uffd_peek(t, a, b);
            written = w;
        }
    }
    pthread_rwlock_unlock(&t->lock);
    return written;
}

int mt_tracker_stats(mt_tracker *t, mt_range_id id, mt_range_stats *out)
{
    if (!t || !out)
        return -EINVAL;
    if (poisoned(t))
        return -ENOTRECOVERABLE;
    pthread_rwlock_rdlock(&t->lock);
    mt_range *r = lookup(t, id);
    if (r) {
        out->backend = r->backend;
        out->pages = r->npages;
        out->faults = atomic_load_explicit(&r->faults, memory_order_relaxed);
        out->collects = atomic_load_explicit(&r->collects, memory_order_relaxed);
        out->pages_collected = atomic_load_explicit(&r->pages_collected, memory_order_relaxed);
        out->degradations = atomic_load_explicit(&r->degradations, memory_order_relaxed);
        out->degraded = atomic_load_explicit(&r->degraded, memory_order_relaxed);
        out->budget_opens = atomic_load_explicit(&r->budget_opens, memory_order_relaxed);
        out->fallback_reason = r->fallback_reason;
        out->unmapped_pages = atomic_load_explicit(&r->gone_pages, memory_order_relaxed);
        out->unmapped = out->unmapped_pages > 0;
        out->kernel_writes = atomic_load_explicit(&r->kernel_writes, memory_order_relaxed);
        out->app_calls = atomic_load_explicit(&r->app_calls, memory_order_relaxed);
        out->not_protected =
            atomic_load_explicit(&r->whole, memory_order_relaxed) || mti_range_pinned_whole(r) ||
            mti_fork_inherited(r);
        out->hot_pages = mti_hot_count(r);
    }
    pthread_rwlock_unlock(&t->lock);
    return r ? 0 : -ENOENT;
}

int mt_tracker_backend(mt_tracker *t, mt_range_id id)
{
    if (!t)
        return -EINVAL;
    if (poisoned(t))
        return -ENOTRECOVERABLE;
    pthread_rwlock_rdlock(&t->lock);
    mt_range *r = lookup(t, id);
    int b = r ? (int)r->backend : -ENOENT;
    pthread_rwlock_unlock(&t->lock);
    return b;
}

int mt_track_backend_available(mt_track_backend backend)
{
    switch (backend) {
    case MT_TRACK_AUTO:
    case MT_TRACK_SIGNAL: return 1;
    case MT_TRACK_UFFD: return mti_uffd_probe();
    }
    return 0;
}

const char *mt_track_backend_name(mt_track_backend backend)
{
    switch (backend) {
    case MT_TRACK_AUTO: return "auto";
    case MT_TRACK_SIGNAL: return "signal";
    case MT_TRACK_UFFD: return "uffd";
    }
    return "unknown";
}

int mt_track_backend_parse(const char *name)
{
    if (!name)
        return -EINVAL;
    for (int b = MT_TRACK_AUTO; b <= MT_TRACK_UFFD; b++)
        if (strcmp(name, mt_track_backend_name((mt_track_backend)b)) == 0)
            return b;
    return -EINVAL;
}
