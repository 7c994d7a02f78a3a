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

int mt_tracker_create(const mt_tracker_opts *opts, mt_tracker **out)
{
    mt_tracker_opts o = {0};
    if (opts)
        o = *opts;
    if (!out || !valid_backend((int)o.backend))
        return -EINVAL;
    if (o.max_ranges == 0)
        o.max_ranges = MT_DEFAULT_MAX_RANGES;
    if (o.max_ranges > (1u << 24))
        return -EINVAL;
    if (o.backend == MT_TRACK_UFFD && !mt_uffd_probe())
        return MT_EUNSUPPORTED;
    mt_tracker *t = calloc(1, sizeof *t);
    if (!t)
        return -ENOMEM;
    t->opts = o;
    t->page_size = (size_t)sysconf(_SC_PAGESIZE);
    t->page_shift = (unsigned)__builtin_ctzl((unsigned long)t->page_size);
    t->nslots = o.max_ranges;
    t->slots = calloc(t->nslots, sizeof *t->slots);
    t->slot_gen = calloc(t->nslots, sizeof *t->slot_gen);
    t->sorted = calloc(t->nslots, sizeof *t->sorted);
    t->uffd = t->pagemap_fd = -1;
    if (!t->slots || !t->slot_gen || !t->sorted || pthread_rwlock_init(&t->lock, NULL) != 0) {
        free(t->slots);
        free(t->slot_gen);
        free(t->sorted);
        free(t);
        return -ENOMEM;
    }
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

uint32_t mt_track_sorted_lower(const mt_tracker *t, uintptr_t addr)
{
    /* Spans of byte-disjoint ranges are sorted too (span_end non-decreasing). */
    uint32_t lo = 0, hi = t->nsorted;
    while (lo < hi) {
        uint32_t mid = lo + (hi - lo) / 2;
        if (t->sorted[mid]->span_end <= addr)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

void mt_track_share_page(mt_tracker *t, const mt_range *r, uintptr_t page)
{
    for (uint32_t i = mt_track_sorted_lower(t, page);
         i < t->nsorted && t->sorted[i]->span_start <= page; i++) {
        mt_range *o = t->sorted[i];
        if (o != r && o->backend == MT_TRACK_UFFD)
            mt_bits_set(o->bits, mt_page_index(o, page));
    }
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
    if (!r)
        return;
    free((void *)r->bits);
    free(r);
}

static mt_range *new_range(mt_tracker *t, uintptr_t start, size_t len, const mt_range_opts *o)
{
    mt_range *r = calloc(1, sizeof *r);
    if (!r)
        return NULL;
    uintptr_t mask = (uintptr_t)t->page_size - 1;
    r->owner = t;
    r->start = start;
    r->end = start + len;
    r->span_start = start & ~mask;
    r->span_end = (r->end + mask) & ~mask;
    r->page_shift = t->page_shift;
    r->npages = (r->span_end - r->span_start) >> t->page_shift;
    r->nwords = (r->npages + 63) / 64;
    r->prot = o->prot ? o->prot : PROT_READ | PROT_WRITE;
    r->bits = calloc(r->nwords, sizeof(uint64_t));
    if (!r->bits) {
        free(r);
        return NULL;
    }
    return r;
}

/* Arms r with the requested backend, falling back from auto to signal. */
static int arm(mt_tracker *t, mt_range *r, mt_track_backend want)
{
    if (want == MT_TRACK_AUTO || want == MT_TRACK_UFFD) {
        int rc = mt_uffd_probe() ? mt_uffd_arm_range(t, r) : MT_EUNSUPPORTED;
        if (rc == 0) {
            r->backend = MT_TRACK_UFFD;
            return 0;
        }
        if (want == MT_TRACK_UFFD)
            return rc;
        r->fallback_reason = rc; /* e.g. -EINVAL for a device mapping */
    }
    r->backend = MT_TRACK_SIGNAL;
    return mt_sig_arm_range(r);
}

int mt_tracker_add(mt_tracker *t, void *addr, size_t len, const mt_range_opts *opts,
                   mt_range_id *id)
{
    mt_range_opts o = {0};
    if (opts)
        o = *opts;
    uintptr_t start = (uintptr_t)addr;
    if (!t || !addr || !id || len == 0 || start + len < start || !valid_backend((int)o.backend) ||
        (o.flags & ~(uint32_t)MT_RANGE_INITIALLY_DIRTY))
        return -EINVAL;
    mt_track_backend want = o.backend ? o.backend : t->opts.backend;
    mt_range *r = new_range(t, start, len, &o);
    if (!r)
        return -ENOMEM;

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
            mt_bits_set_range(r->bits, 0, r->npages);
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
    if (r->backend == MT_TRACK_SIGNAL)
        mt_sig_disarm_range(r);
    else
        mt_uffd_disarm_range(t, r);
    uint32_t pos = mt_track_sorted_lower(t, r->span_start);
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
    pthread_rwlock_wrlock(&t->lock);
    while (t->nsorted > 0) {
        mt_range *r = t->sorted[t->nsorted - 1];
        remove_locked(t, r);
        free_range(r);
    }
    mt_uffd_close(t);
    pthread_rwlock_unlock(&t->lock);
    pthread_rwlock_destroy(&t->lock);
    free(t->slots);
    free(t->slot_gen);
    free(t->sorted);
    free(t);
}

long mt_tracker_collect(mt_tracker *t, mt_range_id id, mt_dirty_run *runs, size_t max)
{
    if (!t || !runs || max == 0)
        return -EINVAL;
    pthread_rwlock_rdlock(&t->lock);
    mt_range *r = lookup(t, id);
    long n = r ? mt_collect_range(t, r, runs, max) : -ENOENT;
    pthread_rwlock_unlock(&t->lock);
    return n;
}

long mt_tracker_collect_all(mt_tracker *t, mt_dirty_run *runs, size_t max)
{
    if (!t || !runs || max == 0)
        return -EINVAL;
    pthread_rwlock_rdlock(&t->lock);
    size_t n = 0;
    for (uint32_t i = 0; i < t->nsorted && n < max; i++)
        n += (size_t)mt_collect_range(t, t->sorted[i], runs + n, max - n);
    pthread_rwlock_unlock(&t->lock);
    return (long)n;
}

int mt_tracker_prepare_write(mt_tracker *t, mt_range_id id, void *addr, size_t len)
{
    if (!t || len == 0)
        return -EINVAL;
    pthread_rwlock_rdlock(&t->lock);
    mt_range *r = lookup(t, id);
    uintptr_t a = (uintptr_t)addr;
    int rc = 0;
    if (!r)
        rc = -ENOENT;
    else if (a < r->start || a + len > r->end || a + len < a)
        rc = -EINVAL;
    else {
        size_t first = mt_page_index(r, a & ~(uintptr_t)(t->page_size - 1));
        size_t last = mt_page_index(r, (a + len - 1) & ~(uintptr_t)(t->page_size - 1));
        if (r->backend == MT_TRACK_SIGNAL)
            rc = mt_sig_make_writable(r, first, last - first + 1);
        else
            mt_bits_set_range(r->bits, first, last - first + 1); /* kernel writes are tracked */
    }
    pthread_rwlock_unlock(&t->lock);
    return rc;
}

int mt_tracker_stats(mt_tracker *t, mt_range_id id, mt_range_stats *out)
{
    if (!t || !out)
        return -EINVAL;
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
        out->fallback_reason = r->fallback_reason;
    }
    pthread_rwlock_unlock(&t->lock);
    return r ? 0 : -ENOENT;
}

int mt_tracker_backend(mt_tracker *t, mt_range_id id)
{
    if (!t)
        return -EINVAL;
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
    case MT_TRACK_UFFD: return mt_uffd_probe();
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
