/* The capture engine: turning what changed in exposed memory into UPDATE
 * records. The only place that sets or changes a memory's mode.
 *
 * Every exposed memory has a reference copy: what the trace has told replay
 * so far. A capture diffs candidate regions of the real content against it
 * and writes the changed bytes as packets, which also brings the reference up
 * to date. The candidates depend on the mode:
 *   guard   pages the tracker saw written in the driver's mapping, plus the
 *           ranges the device may have written (bound objects with a
 *           writable usage, and such objects gone since: GPU writes raise no
 *           fault)
 *   shadow  the same, but app writes are tracked in the anonymous mapping we
 *           gave the app; diff writes exactly the changed bytes back to the
 *           driver's mapping, and device writes are copied to the app's
 *           mapping (sync-in) so that the app reads what the GPU produced
 *   scan    the whole exposed range
 *   copy    no diff: the whole exposed range is written every time
 *   off     not captured (the trace failed, or the process is not captured)
 * A submit captures every exposed memory, then (verify) hashes the real
 * content of each, then writes the SUBMIT record: replay applies the packets,
 * and the hash must match, or a write was lost.
 *
 * Shadow mode keeps the application's data flowing whatever happens to the
 * trace: after a write error it still writes back and syncs in (without
 * packets), because the application holds the shadow pointer. */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>
/* XXH3's streaming state on the stack: its layout is fixed for the library
 * version this is built with. */
#define XXH_STATIC_LINKING_ONLY
#include <xxhash.h>

#include "budget.h"
#include "layer.h"
#include "refcache.h"
#include "slices.h"
#include "workers.h"

#define RUNS 256

static size_t page_size(void)
{
    /* Relaxed: every thread computes the same value (capture threads may
     * get here first at the same time). */
    static size_t ps;
    size_t v = __atomic_load_n(&ps, __ATOMIC_RELAXED);
    if (!v) {
        v = (size_t)sysconf(_SC_PAGESIZE);
        __atomic_store_n(&ps, v, __ATOMIC_RELAXED);
    }
    return v;
}

/* Packets and hashes are written only while the trace is open and the
 * capture window is open for the device. */
static int recording(const lt_memory *m) { return m->dev->active && lt_tracing(); }

static size_t exposed_pages(const lt_memory *m) { return ((size_t)m->map_size + page_size() - 1) / page_size(); }

/* Device memory the host maps through the PCI BAR (device-local, not
 * cached), not memory imported from a host pointer. */
static int bar_memory(const lt_memory *m)
{
    VkMemoryPropertyFlags want = VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT | VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT;
    return (m->flags & (want | VK_MEMORY_PROPERTY_HOST_CACHED_BIT)) == want && !(m->external & LT_EXT_HOST_PTR);
}

/* BAR memory is write-combined: every plain load is an uncached read
 * across the bus. Captures read its driver mapping with streaming loads
 * (mt_diff_read_wc, MT_DIFF_LIVE_WC): measured on an H200, 0.60 GB/s
 * against 0.055 for memcpy. MEMTRACK_TEST_WC takes every mapping for it. */
static int wc_memory(const lt_memory *m)
{
    return bar_memory(m) || (lt_cfg()->test_wc && !(m->external & LT_EXT_HOST_PTR));
}

/* Copies n bytes of the window from src (the driver's mapping, or a
 * snapshot of it) to dst. */
static void read_live(const lt_memory *m, void *dst, const unsigned char *src, size_t n)
{
    if (src == m->driver_ptr && wc_memory(m))
        mt_diff_read_wc(dst, src, n);
    else
        memcpy(dst, src, n);
}

/* ---- candidate regions ---------------------------------------------------- */

typedef struct cand {
    mt_diff_region *v;
    size_t n, cap;
    int oom;
} cand;

static void cand_push(cand *c, size_t off, size_t len)
{
    if (len == 0 || c->oom)
        return;
    if (c->n == c->cap) {
        size_t ncap = c->cap ? c->cap * 2 : 64;
        mt_diff_region *v = realloc(c->v, ncap * sizeof *v);
        if (!v) {
            c->oom = 1; /* the caller diffs everything instead */
            return;
        }
        c->v = v;
        c->cap = ncap;
    }
    c->v[c->n++] = (mt_diff_region){off, len};
}

static int cmp_region(const void *a, const void *b)
{
    const mt_diff_region *x = a, *y = b;
    return (x->offset > y->offset) - (x->offset < y->offset);
}

/* Sorts and merges overlapping or touching regions (diff wants them sorted
 * and disjoint). */
static void cand_normalize(cand *c)
{
    if (c->n < 2)
        return;
    qsort(c->v, c->n, sizeof *c->v, cmp_region);
    size_t o = 0;
    for (size_t i = 1; i < c->n; i++) {
        mt_diff_region *last = &c->v[o];
        size_t end = last->offset + last->length;
        if (c->v[i].offset <= end) {
            size_t e2 = c->v[i].offset + c->v[i].length;
            if (e2 > end)
                last->length = e2 - last->offset;
        } else {
            c->v[++o] = c->v[i];
        }
    }
    c->n = o + 1;
}

/* [a, b) of the memory, clipped to the exposed window, as window offsets. */
static void push_clipped(const lt_memory *m, cand *c, VkDeviceSize a, VkDeviceSize b)
{
    VkDeviceSize lo = m->map_offset, hi = m->map_offset + m->map_size;
    if (a < lo)
        a = lo;
    if (b > hi)
        b = hi;
    if (a < b)
        cand_push(c, (size_t)(a - lo), (size_t)(b - a));
}

/* Ranges the device may have written: bound objects with a writable usage,
 * the stale ranges of such objects that are gone, and the ranges bound to
 * writable sparse resources. */
static void device_ranges(const lt_memory *m, cand *c)
{
    if (m->stale_whole || m->sparse_whole) {
        push_clipped(m, c, 0, m->size);
        return;
    }
    for (size_t i = 0; i < m->nbinds; i++) {
        const lt_object *o = m->binds[i];
        if (o->gpu_writable)
            push_clipped(m, c, o->offset, o->offset + (o->is_image ? o->size : o->used));
    }
    for (size_t i = 0; i < m->nstale; i++)
        push_clipped(m, c, m->stale[i].offset, m->stale[i].offset + m->stale[i].length);
    for (size_t i = 0; i < m->nsparse; i++)
        push_clipped(m, c, m->sparse[i].offset, m->sparse[i].offset + m->sparse[i].length);
}

/* The window at p (driver_ptr or app_ptr) as this capture may read it over
 * c (NULL: all of it): p itself, or a snapshot where some pages are
 * protected against reads (view.c). What the device may have written is
 * read in place; the app's own pointer in shadow mode has no such part. */
static const unsigned char *view(lt_memory *m, const unsigned char *p, const cand *c)
{
    if (lt_view_readable(m, p))
        return p;
    cand dev = {0};
    if (p == m->driver_ptr) {
        device_ranges(m, &dev);
        cand_normalize(&dev);
    }
    const unsigned char *v =
        dev.oom ? p : lt_view_snapshot(m, p, c ? c->v : NULL, c ? c->n : 0, dev.v, dev.n);
    free(dev.v);
    return v;
}

/* The stale ranges inside the window have just been diffed: forget them
 * (the objects are gone, so nothing writes there through them any more). */
static void stale_consumed(lt_memory *m)
{
    VkDeviceSize lo = m->map_offset, hi = m->map_offset + m->map_size;
    if (m->stale_whole && lo == 0 && hi == m->size)
        m->stale_whole = 0;
    size_t o = 0;
    for (size_t i = 0; i < m->nstale; i++)
        if (!(m->stale[i].offset >= lo && m->stale[i].offset + m->stale[i].length <= hi))
            m->stale[o++] = m->stale[i];
    m->nstale = o;
}

/* MEMTRACK_TEST_DROP_RUN: whether to ignore this dirty run (the k-th of the
 * process), as if page tracking had missed its write. */
static int drop_run(void)
{
    static _Atomic uint64_t runs;
    return lt_test_kth(&runs, lt_cfg()->drop_run);
}

/* Dirty page runs of m's tracker range (window offsets). Returns 0, or <0
 * when the tracker could not say (the caller diffs everything). */
static int collected(lt_memory *m, cand *c, size_t *pages)
{
    mt_dirty_run runs[RUNS];
    long n;
    do {
        n = mt_tracker_collect(lt_tracker(), m->range, runs, RUNS);
        if (n < 0)
            return (int)n;
        for (long i = 0; i < n; i++) {
            /* Runs are clipped to the range, which is the window: keep it
             * that way even if a range were ever larger (diff refuses
             * candidates outside the job). */
            size_t end = runs[i].offset + runs[i].length;
            if (end > m->map_size)
                end = (size_t)m->map_size;
            if (drop_run())
                continue;
            if (runs[i].offset < end)
                cand_push(c, runs[i].offset, end - runs[i].offset);
            *pages += (runs[i].length + page_size() - 1) / page_size();
        }
    } while (n == RUNS);
    /* Every page came back: a forked child may write this (shared) mapping
     * unseen, and will come back whole from now on (track.h). Said once per
     * memory, in the trace. */
    if (!m->child_noted && *pages * page_size() >= m->map_size &&
        mt_tracker_shared_with_child(lt_tracker(), m->range) == 1) {
        m->child_noted = 1;
        lt_rec_note(m->id, "shared-with-child",
                    "memory %llu is mapped shared and a forked child may write it, unseen by page "
                    "tracking: each capture compares all of it from now on (exact, slower)",
                    (unsigned long long)m->id);
    }
    /* The signal backend stopped protecting (track.h): every page comes
     * back on every collect from now on. Said once, here where it costs. */
    unsigned unbracketed = mt_track_unbracketed_writers();
    if (m->backend == MT_TRACK_UFFD && (unbracketed & MT_TRACK_UNBRACKETED_PINNED))
        lt_warn_once("pinned",
                     "the application registered buffers with io_uring (fixed buffers), which the "
                     "kernel writes through its own mapping of the pinned pages, unseen by page "
                     "tracking: each capture compares all of the memory from now on (exact, slower)");
    if (m->backend == MT_TRACK_SIGNAL && (unbracketed & MT_TRACK_UNBRACKETED_RAW))
        lt_warn_once("unbracketed-raw",
                     "the application runs Go code, whose runtime makes its own system calls: "
                     "their kernel writes into its memory no call brackets, so signal-backend "
                     "memory is not write-protected and each capture compares all of it (exact, "
                     "slower; the uffd backend, Linux 6.7 and later, keeps tracking pages)");
    else if (m->backend == MT_TRACK_SIGNAL && unbracketed)
        lt_warn_once("unbracketed",
                     "the application set up io_uring or Linux AIO, or has more POSIX AIO reads "
                     "in flight than can be followed, whose kernel writes into its memory no call brackets: signal-backend memory is no longer write-protected, "
                     "each capture compares all of it (exact, slower; the uffd backend, Linux 6.7 "
                     "and later, keeps tracking pages)");
    return c->oom ? -ENOMEM : 0;
}

/* ---- packets ------------------------------------------------------------ */

/* Index of the last binding starting at or before `off`, or -1. */
static long binding_at(const lt_memory *m, VkDeviceSize off)
{
    long lo = 0, hi = (long)m->nbinds - 1, r = -1;
    while (lo <= hi) {
        long mid = lo + (hi - lo) / 2;
        if (m->binds[mid]->offset <= off)
            r = mid, lo = mid + 1;
        else
            hi = mid - 1;
    }
    return r;
}

/* Writes memory bytes [off, off+len) (data from `src`, which holds the memory
 * at offset 0) as packets attributed to the buffers/images bound there: a
 * buffer owns its used bytes, not its padding; bytes outside any object get
 * object 0. */
static void emit(lt_memory *m, const unsigned char *src, VkDeviceSize off, VkDeviceSize len)
{
    if (!recording(m))
        return;
    VkDeviceSize end = off + len;
    while (off < end) {
        long i = binding_at(m, off);
        uint64_t obj = 0;
        VkDeviceSize stop = end;
        if (i >= 0) {
            const lt_object *o = m->binds[i];
            VkDeviceSize oend = o->offset + (o->is_image ? o->size : o->used);
            if (off < oend) {
                obj = o->id;
                stop = oend < end ? oend : end;
            }
        }
        if (!obj && (size_t)(i + 1) < m->nbinds && m->binds[i + 1]->offset < stop)
            stop = m->binds[i + 1]->offset;
        lt_rec_update(m->id, obj, off, src + off, (size_t)(stop - off), m->concealing);
        off = stop;
    }
}

/* Diffs one job whose offset 0 is window offset `base`, emitting its changes
 * and adding the changed bytes to *changed. Returns the number of pages that
 * held changes, or a negative error. Any thread (one per job). */
static long diff_job(lt_memory *m, mt_diff_job *job, size_t base, size_t *changed)
{
    mt_diff_opts o = {.merge_gap = lt_cfg()->merge_gap};
    /* Slices point into the same window: their live is the driver mapping
     * moved by their base. */
    if ((const unsigned char *)job->live == m->driver_ptr + base && wc_memory(m))
        o.flags |= MT_DIFF_LIVE_WC;
    mt_diff_region runs[RUNS];
    size_t pages = 0, last_page = SIZE_MAX, ps = page_size();
    long n;
    do {
        n = mt_diff(job, &o, runs, RUNS);
        if (n < 0)
            return n;
        for (long i = 0; i < n; i++) {
            size_t off = base + runs[i].offset;
            emit(m, m->reference, m->map_offset + off, runs[i].length);
            *changed += runs[i].length;
            size_t p0 = off / ps, p1 = (off + runs[i].length - 1) / ps;
            pages += p1 - p0 + 1 - (p0 == last_page);
            last_page = p1;
        }
    } while (n == RUNS && job->cursor < job->size);
    return (long)pages;
}

/* A diff worth several threads is cut into slices of about SLICE candidate
 * bytes (slices.c), each a job of its own on a stretch of the window that
 * shares no page with another, run with the capture threads' help
 * (workers.c). Packets of one memory may then be written
 * in any order: they never overlap, and all come before the SUBMIT. */
#define SLICE ((size_t)2 << 20)

typedef struct slice {
    lt_memory *m;
    mt_diff_job job;
    size_t base, changed;
    long pages;
} slice;

static void slice_item(void *item)
{
    slice *sl = item;
    sl->pages = diff_job(sl->m, &sl->job, sl->base, &sl->changed);
}

/* Cuts the diff into slices (slices.c); returns how many, 0 when it is not
 * worth it or there is no memory for it (the caller diffs in one piece).
 * *out and (*out)[0].job.candidates are the two allocations to free. */
static size_t make_slices(lt_memory *m, const unsigned char *live, const cand *c, void *writeback,
                          slice **out)
{
    size_t size = (size_t)m->map_size, total = 0, nc = c ? c->n : 0;
    for (size_t i = 0; i < nc; i++)
        total += c->v[i].length;
    if (!c)
        total = size;
    m->work_bytes += total;
    if (total < 2 * SLICE || !lt_workers_available())
        return 0;
    size_t max = lt_slices_max(total, SLICE);
    lt_slice *cut = malloc(max * sizeof *cut);
    slice *v = calloc(max, sizeof *v);
    mt_diff_region *rc = nc ? malloc(lt_slices_max_cands(total, nc, SLICE) * sizeof *rc) : NULL;
    if (!cut || !v || (nc && !rc)) {
        free(cut);
        free(v);
        free(rc);
        return 0;
    }
    size_t ns = lt_slices_cut(size, nc ? c->v : NULL, nc, page_size(), SLICE, cut, rc);
    for (size_t i = 0; i < ns; i++) {
        slice *sl = &v[i];
        sl->m = m;
        sl->base = cut[i].base;
        sl->job.candidates = rc ? rc + cut[i].first : NULL;
        sl->job.ncandidates = cut[i].n;
        sl->job.live = live + sl->base;
        sl->job.shadow = m->reference + m->map_offset + sl->base;
        sl->job.writeback = writeback ? (unsigned char *)writeback + sl->base : NULL;
        sl->job.size = cut[i].size;
    }
    free(cut);
    *out = v; /* ns >= 1: total > 0 */
    return ns;
}

/* Diffs live (the window, relative offsets) against the reference over `c`
 * (NULL: everything), optionally writing changed bytes back, and emits the
 * changes. Returns the number of pages that held changes. */
static size_t diff_emit(lt_memory *m, const unsigned char *live, const cand *c, void *writeback)
{
    if (c && c->n == 0)
        return 0;
    live = view(m, live, c);
    m->changed_bytes = 0;
    slice *sl = NULL;
    size_t ns = make_slices(m, live, c, writeback, &sl);
    long pages = 0, err = 0;
    void **items = ns ? malloc(ns * sizeof *items) : NULL;
    if (ns && !items) {
        free((void *)sl[0].job.candidates);
        free(sl);
        ns = 0;
    }
    if (ns) {
        for (size_t i = 0; i < ns; i++)
            items[i] = &sl[i];
        lt_workers_share(slice_item, items, ns);
        lt_stat_add(LT_ST_SLICES, (int64_t)ns);
        free(items);
        for (size_t i = 0; i < ns; i++) {
            m->changed_bytes += sl[i].changed;
            if (sl[i].pages < 0)
                err = sl[i].pages;
            else
                pages += sl[i].pages;
        }
        free((void *)sl[0].job.candidates);
        free(sl);
    } else {
        mt_diff_job job = {
            .live = live,
            .shadow = m->reference + m->map_offset,
            .size = (size_t)m->map_size,
            .candidates = c ? c->v : NULL,
            .ncandidates = c ? c->n : 0,
            .writeback = writeback,
        };
        size_t changed = 0;
        pages = diff_job(m, &job, 0, &changed);
        m->changed_bytes = changed;
        if (pages < 0)
            err = pages, pages = 0;
    }
    if (err)
        lt_rec_note(m->id, "diff", "diff failed (%s): a capture was skipped", mt_strerror((int)err));
    return (size_t)pages;
}

/* Diffs what the device may have written (driver -> reference, and to the
 * app's mapping in shadow mode). */
static void diff_device_writes(lt_memory *m, void *writeback)
{
    cand c = {0};
    device_ranges(m, &c);
    cand_normalize(&c);
    diff_emit(m, m->driver_ptr, c.oom ? NULL : &c, writeback);
    free(c.v);
    stale_consumed(m);
}

/* ---- mode changes ------------------------------------------------------------- */

static void write_mode(lt_memory *m, const char *why)
{
    char text[200];
    const char *be = m->range ? mt_track_backend_name(m->backend) : NULL;
    snprintf(text, sizeof text, "%s%s%s%s%s%s", lt_mode_name(m->mode), be ? "/" : "", be ? be : "",
             !m->auto_mode ? "" : m->mode == LT_SCAN && m->ap.bulk ? " (auto, bulk)" : " (auto)",
             why ? ": " : "", why ? why : "");
    lt_rec_mode(m->id, text);
}

/* Tracking cannot be set up, or must not be used: scan, which is exact. */
static void fall_back_to_scan(lt_memory *m, const char *key, const char *why)
{
    m->mode = LT_SCAN;
    m->pinned = 1;
    m->auto_mode = 0;
    lt_stat_add(LT_ST_FALLBACKS, 1);
    lt_rec_note(m->id, key, "memory %llu is scanned whole at each submit instead: %s",
                (unsigned long long)m->id, why);
}

/* Hot pages: a memory rewritten every frame costs a diff of its pages per
 * submit instead of a fault per page per frame (5-10 us each with the
 * signal backend); every reported page is diffed against the reference
 * anyway, so pages reported unwritten cost a compare, never a packet. The
 * fault budget does the same for a memory's first frames, before its pages
 * are hot (and for the autopilot's first captures of a dense memory in
 * guard): past max(64, pages/8) faults between two captures, the signal
 * backend opens the range whole and the capture diffs all of it (uffd's
 * faults cost no signal: it ignores the budget). */
static mt_range_opts range_opts(size_t len)
{
    size_t pages = (len + page_size() - 1) / page_size(), budget = pages / 8 > 64 ? pages / 8 : 64;
    mt_range_opts o = {0};
    if (lt_cfg()->hot_pages)
        o.flags |= MT_RANGE_HOT_PAGES;
    if (lt_cfg()->fault_budget)
        o.fault_budget = budget > UINT32_MAX ? UINT32_MAX : (uint32_t)budget;
    return o;
}

static int guard_start(lt_memory *m)
{
    mt_tracker *t = lt_tracker();
    if (!t)
        return MT_EUNSUPPORTED;
    uint64_t t0 = lt_now_ns();
    mt_range_opts o = range_opts((size_t)m->map_size);
    int rc = mt_tracker_add(t, m->driver_ptr, (size_t)m->map_size, &o, &m->range);
    if (rc) {
        m->range = 0;
        return rc;
    }
    m->backend = (mt_track_backend)mt_tracker_backend(t, m->range);
    m->ap.guard_setup_ns = (double)(lt_now_ns() - t0); /* stop adds its share */
    return 0;
}

static void guard_stop(lt_memory *m)
{
    if (!m->range)
        return;
    uint64_t t0 = lt_now_ns();
    mt_tracker_remove(lt_tracker(), m->range);
    m->range = 0;
    m->ap.guard_setup_ns += (double)(lt_now_ns() - t0);
}

static void account(int64_t bytes) { lt_stat_add(LT_ST_EXTRA_BYTES, bytes); }

static int shadow_start(lt_memory *m)
{
    if (!lt_tracker())
        return MT_EUNSUPPORTED;
    /* The app's pointer keeps the driver's pointer's offset within a page,
     * so (pointer - map offset) stays aligned to minMemoryMapAlignment (and
     * to anything up to a page) exactly as the driver's was. */
    size_t ps = page_size(), lead = (uintptr_t)m->driver_ptr & (ps - 1);
    size_t len = (lead + (size_t)m->map_size + ps - 1) & ~(ps - 1);
    void *base = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (base == MAP_FAILED)
        return -errno;
    unsigned char *p = (unsigned char *)base + lead;
    read_live(m, p, view(m, m->driver_ptr, NULL), (size_t)m->map_size);
    /* Tracked after the copy: the app gets the pointer only when we return.
     * Only the window's bytes: the page-rounded ends are not the memory's. */
    mt_range_opts o = range_opts((size_t)m->map_size);
    int rc = mt_tracker_add(lt_tracker(), p, (size_t)m->map_size, &o, &m->range);
    if (rc) {
        munmap(base, len);
        m->range = 0;
        return rc;
    }
    m->backend = (mt_track_backend)mt_tracker_backend(lt_tracker(), m->range);
    m->shadow_base = base;
    m->shadow_len = len;
    m->app_ptr = p;
    __atomic_add_fetch(&m->dev->shadow_mapped, 1, __ATOMIC_RELAXED);
    account((int64_t)len);
    return 0;
}

static void shadow_stop(lt_memory *m)
{
    guard_stop(m);
    munmap(m->shadow_base, m->shadow_len);
    account(-(int64_t)m->shadow_len);
    m->shadow_base = NULL;
    m->shadow_len = 0;
    m->app_ptr = m->driver_ptr;
    __atomic_sub_fetch(&m->dev->shadow_mapped, 1, __ATOMIC_RELAXED);
}

/* m is recorded whole from now on: no reference copy fits beside the
 * application under a memory limit (budget.h). Said once on stderr, and in
 * the trace for each memory. */
static void budget_copy(lt_memory *m, const char *what, const char *why)
{
    m->budget_copy = 1;
    m->auto_mode = 0;
    m->pending_guard = 0;
    lt_stat_add(LT_ST_FALLBACKS, 1);
    lt_rec_note(m->id, "memory-budget", "memory %llu %s (%s): it is recorded whole (copy) at each submit "
                "from now on (MEMTRACK_MEMORY_BUDGET=off keeps references regardless)",
                (unsigned long long)m->id, what, why);
}

static int ensure_reference(lt_memory *m)
{
    if (m->reference)
        return 0;
    if (m->budget_copy)
        return -ENOMEM;
    /* Zero-filled like replay's fresh image; only touched pages use memory.
     * A freed memory's of the same size is reused, zeroed (refcache.c); a
     * new one must fit under the memory limits, counted at the window's
     * size (only exposed bytes are ever touched). One below 1 MiB is not
     * checked (reading the limits costs about 13 us): the next submit's
     * check counts it with the others. */
    size_t bytes = lt_reference_bytes(m);
    void *p = lt_refcache_take(bytes);
    if (!p) {
        char why[200];
        if (m->map_size >= ((VkDeviceSize)1 << 20) && !lt_budget_admits((size_t)m->map_size, 2, why, sizeof why)) {
            budget_copy(m, "gets no reference copy", why);
            return -ENOMEM;
        }
        p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    }
    if (p == MAP_FAILED)
        return -errno;
    m->reference = p;
    return 0;
}

/* Gives m's reference copy back to the system (a memory limit is near):
 * m is recorded whole from its next capture on, which is exact whatever
 * happened since the last one. Not for shadow memories (the application
 * holds the shadow, which needs the reference). Returns the bytes the
 * reference held. */
static size_t give_back_reference(lt_memory *m, const char *why)
{
    size_t held = lt_reference_held(m);
    guard_stop(m);
    munmap(m->reference, lt_reference_bytes(m));
    account(-(int64_t)held);
    m->reference = NULL;
    m->known_lo = m->known_hi = m->staged_lo = m->staged_hi = 0;
    m->lag_lo = m->lag_hi = 0;
    budget_copy(m, "gives its reference copy back", why);
    if (m->mapped && m->mode != LT_OFF) {
        m->mode = LT_COPY;
        m->copied = 1;
        lt_stat_add(LT_ST_MODE_SWITCHES, 1);
        write_mode(m, "memory limit");
    }
    return held;
}

typedef struct shed_pick {
    lt_memory *best;
    size_t held;
} shed_pick;

static void pick_largest(void *val, void *arg)
{
    lt_memory *m = val;
    shed_pick *p = arg;
    size_t held = lt_reference_held(m);
    if (m->reference && held > p->held && !(m->mapped && m->mode == LT_SHADOW)) {
        p->best = m;
        p->held = held;
    }
}

/* The application grew toward a memory limit: the layer's copies give
 * memory back, the kept references of freed memories first, then the
 * references of this device's memories, the largest first (dev->lock held;
 * before a submit's captures, which then write those memories whole, or
 * before an allocation, `coming` its size). A memory exposed while the
 * capture window is closed (mode off) goes to copy when the window opens. */
static void budget_shed(lt_device *dev, uint64_t coming)
{
    char why[200];
    size_t need = lt_budget_excess(coming, why, sizeof why);
    if (!need)
        return;
    size_t freed = lt_refcache_drop_all();
    while (freed < need) {
        shed_pick p = {NULL, 0};
        lt_map_each(&dev->memories, pick_largest, &p);
        if (!p.best)
            break;
        freed += give_back_reference(p.best, why);
    }
}

size_t lt_reference_held(const lt_memory *m)
{
    return (size_t)(m->known_hi - m->known_lo + m->staged_hi - m->staged_lo);
}

size_t lt_reference_bytes(const lt_memory *m)
{
    return ((size_t)m->size + page_size() - 1) & ~(page_size() - 1);
}

const char *lt_capture_untrackable(const lt_memory *m)
{
    if (m->external & (LT_EXT_EXPORTED | LT_EXT_IMPORTED))
        return "it is shared with other processes or APIs, whose writes raise no fault here";
    if (m->external & LT_EXT_HOST_SHARED)
        return "its host memory is mapped shared or from a file, and writes through other mappings "
               "raise no fault here";
    return NULL;
}

static int whole_window(const lt_memory *m) { return m->map_offset == 0 && m->map_size == m->size; }

/* The mode a freshly exposed memory starts in. */
static lt_mode initial_mode(lt_memory *m)
{
    lt_mode mode = lt_cfg()->mode;
    m->auto_mode = mode == LT_AUTO;
    if (m->auto_mode) { /* guard until the autopilot has seen the write density */
        const lt_ap_cal *cal = lt_autopilot_calibration(lt_cfg()->backend);
        mode = lt_autopilot_always_scan(cal, exposed_pages(m)) ? LT_SCAN : LT_GUARD;
        if (m->auto_pref == LT_SCAN || m->auto_pref == LT_GUARD || m->auto_pref == LT_COPY) {
            mode = m->auto_pref;
            /* Mapped again; an inherited choice keeps its own history's. */
            if (!m->inherited)
                m->ap.remapped = 1;
            m->inherited = 0;
        }
        m->pending_guard = 0; /* the map decides afresh */
        /* auto's copy leaves for scan by filling the reference with the
         * whole memory (copy_to_bulk): it needs windows over all of it. A
         * memory copied before keeps being copied in a partial window (its
         * reference cannot say what replay holds outside it). */
        if (mode == LT_COPY && !whole_window(m))
            mode = m->copied ? LT_COPY : LT_SCAN;
        if (mode == LT_COPY && !whole_window(m))
            m->auto_mode = 0; /* for this exposure */
    }
    if (mode == LT_SHADOW && (m->external & LT_EXT_HOST_PTR)) {
        /* The app writes through its own pointer: there is no mapping to
         * hand it a shadow of. */
        lt_rec_note(m->id, "shadow-host-ptr", "memory %llu is imported from a host pointer: tracked "
                    "in place (guard) instead of shadow", (unsigned long long)m->id);
        mode = LT_GUARD;
    }
    if (mode == LT_SHADOW && __atomic_load_n(&m->dev->progress_exported, __ATOMIC_RELAXED)) {
        lt_rec_note(m->id, "shadow-exported", "memory %llu: tracked in place (guard) instead of "
                    "shadow: the application exports device progress", (unsigned long long)m->id);
        mode = LT_GUARD;
    }
    if (mode == LT_SHADOW && m->placed) {
        lt_rec_note(m->id, "shadow-placed", "memory %llu is mapped at an address the application "
                    "chose: tracked in place (guard) instead of shadow", (unsigned long long)m->id);
        mode = LT_GUARD;
    }
    return mode;
}

/* Whether the reference lags replay somewhere in the window (bulk captures
 * written straight from the memory: bulk_capture). */
static int window_lags(const lt_memory *m)
{
    return m->lag_lo < m->lag_hi && m->lag_lo < m->map_offset + m->map_size && m->map_offset < m->lag_hi;
}

/* The window's reference was just brought up to what replay holds. */
static void window_caught_up(lt_memory *m)
{
    if (m->lag_lo >= m->map_offset && m->lag_hi <= m->map_offset + m->map_size)
        m->lag_lo = m->lag_hi = 0;
}

/* The window's whole content, written as it is now: where replay's idea of
 * the memory cannot be trusted (capture was paused, or the reference lags). */
static void emit_whole(lt_memory *m)
{
    read_live(m, m->reference + m->map_offset, view(m, m->driver_ptr, NULL), (size_t)m->map_size);
    emit(m, m->reference, m->map_offset, m->map_size);
    stale_consumed(m);
}

/* Sets up tracking for m's mode (falling back to scan), then records what
 * replay does not know yet. Shared by a fresh exposure and by the capture
 * window opening on a memory already exposed (`reopen`: the application
 * holds the driver's pointer, so shadow is not possible). */
static void start_capture(lt_memory *m, int reopen)
{
    m->mode = m->budget_copy ? LT_COPY : m->pinned ? LT_SCAN : initial_mode(m);
    if (reopen && m->mode == LT_SHADOW)
        m->mode = LT_GUARD;
    const char *why = lt_capture_untrackable(m);
    if (why && m->mode != LT_SCAN && m->mode != LT_COPY)
        fall_back_to_scan(m, "external", why);
    char budget_why[200];
    /* Shadow needs two copies of the window: its mapping and the reference,
     * neither of which can be given back while mapped (the application
     * holds the shadow pointer), and most applications map a memory once
     * and keep it mapped. So they must leave nearly all of what is free
     * (7/8) to the application's growth; else in place (guard: one copy,
     * which can be given back). */
    if (m->mode == LT_SHADOW &&
        !lt_budget_admits((m->reference ? 1 : 2) * (size_t)m->map_size, 8, budget_why, sizeof budget_why)) {
        lt_rec_note(m->id, "memory-budget-shadow", "memory %llu is tracked in place (guard) instead of "
                    "shadow: a second copy of its window does not fit (%s)", (unsigned long long)m->id,
                    budget_why);
        m->mode = LT_GUARD;
    }
    if (m->mode != LT_COPY && ensure_reference(m) != 0) {
        if (!m->budget_copy)
            lt_rec_note(m->id, "reference", "cannot allocate a reference copy: memory %llu is copied "
                        "whole at each submit", (unsigned long long)m->id);
        m->mode = LT_COPY;
        m->auto_mode = 0;
    }
    int rc = 0;
    char why_text[160];
    if (m->mode == LT_SHADOW && (rc = shadow_start(m)) != 0) {
        snprintf(why_text, sizeof why_text, "a tracked shadow mapping could not be set up (%s)",
                 mt_strerror(rc));
        fall_back_to_scan(m, "fallback", why_text);
    }
    if (m->mode == LT_GUARD && (rc = guard_start(m)) != 0) {
        if (rc == -EEXIST) /* a byte is tracked for one range only */
            snprintf(why_text, sizeof why_text, "some of its bytes are exposed by another memory too "
                     "(host-pointer imports of overlapping host memory), which tracks them");
        else
            snprintf(why_text, sizeof why_text, "in-place tracking could not be set up (%s)", mt_strerror(rc));
        fall_back_to_scan(m, "fallback", why_text);
    }
    write_mode(m, NULL);
    if (m->mode == LT_COPY)
        return;

    /* Where replay does not know the content yet, diff all of it (replay's
     * image starts as zeros); elsewhere only what the device may have
     * written while the memory was not exposed. */
    VkDeviceSize lo = m->map_offset, hi = m->map_offset + m->map_size;
    if (m->ref_stale || reopen || window_lags(m)) {
        emit_whole(m);
        m->ref_stale = 0;
        window_caught_up(m);
        account((int64_t)(hi - lo) - (int64_t)(m->known_hi - m->known_lo));
        m->known_lo = lo;
        m->known_hi = hi;
    } else if (lo >= m->known_lo && hi <= m->known_hi && m->known_hi > m->known_lo) {
        diff_device_writes(m, m->mode == LT_SHADOW ? m->app_ptr : NULL);
    } else {
        diff_emit(m, m->driver_ptr, NULL, NULL);
        stale_consumed(m);
        if (m->known_hi > m->known_lo && lo <= m->known_hi && hi >= m->known_lo) {
            VkDeviceSize nlo = lo < m->known_lo ? lo : m->known_lo;
            VkDeviceSize nhi = hi > m->known_hi ? hi : m->known_hi;
            account((int64_t)((nhi - nlo) - (m->known_hi - m->known_lo)));
            m->known_lo = nlo;
            m->known_hi = nhi;
        } else {
            account((int64_t)(hi - lo) - (int64_t)(m->known_hi - m->known_lo));
            m->known_lo = lo;
            m->known_hi = hi;
        }
    }
}

void lt_capture_make_room(lt_device *dev, VkDeviceSize bytes)
{
    /* Small ones are left to the next submit's check (each check reads the
     * limits: about 13 us). */
    if (!dev->capture || bytes < ((VkDeviceSize)1 << 20) || !lt_tracing())
        return;
    pthread_mutex_lock(&dev->lock);
    budget_shed(dev, (uint64_t)bytes);
    pthread_mutex_unlock(&dev->lock);
}

void lt_capture_expose(lt_memory *m)
{
    m->app_ptr = m->driver_ptr;
    m->range = 0;
    m->mode = LT_OFF; /* nothing to record: the app keeps the driver's pointer */
    if (!lt_tracing())
        return;
    lt_rec_map(m->id, m->map_offset, m->map_size);
    if (m->dev->active)
        start_capture(m, 0);
}

/* The trace stopped, or the capture window closed: leave tracking (its
 * faults now buy nothing), keep shadow memories flowing (the application
 * holds the shadow pointer). What the trace knows is no longer what the
 * reference holds once writes go unrecorded. */
static void detach(lt_memory *m)
{
    if (m->mode == LT_GUARD)
        guard_stop(m);
    if (m->mode != LT_SHADOW)
        m->mode = LT_OFF;
    m->ref_stale = 1;
}

static void mark_stale(void *val, void *arg)
{
    (void)arg;
    lt_memory *m = val;
    if (!m->mapped)
        m->ref_stale = 1;
}

/* Brings dev in line with the capture window (dev->lock held). */
static void window_sync(lt_device *dev)
{
    uint64_t epoch = lt_window_epoch();
    if (dev->window_epoch == epoch)
        return;
    dev->window_epoch = epoch;
    int open = lt_window_open();
    if (open == dev->active)
        return;
    dev->active = open;
    for (lt_memory *m = dev->mapped; m; m = m->next_mapped) {
        if (!open)
            detach(m);
        else if (m->mode == LT_SHADOW) {
            emit_whole(m); /* it kept flowing unrecorded: replay knows nothing of it */
            m->ref_stale = 0;
        } else if (lt_tracing())
            start_capture(m, 1);
    }
    /* Memories not exposed now: their next exposure writes them whole. */
    lt_map_each(&dev->memories, mark_stale, NULL);
}

/* The application unmapped or moved (part of) the memory the tracker
 * watched (its own munmap or mremap of a mapping it got from the driver):
 * those bytes are gone, so nothing may read them again. Capture of this
 * memory stops, and the trace says so. */
static void lost_mapping(lt_memory *m)
{
    lt_rec_note(m->id, "unmapped", "the application unmapped or moved memory %llu's mapping itself "
                "(not through vkUnmapMemory): its capture stops here", (unsigned long long)m->id);
    guard_stop(m);
    m->mode = LT_OFF;
    m->ref_stale = 1;
    m->pinned = 1;
}

/* Applies the autopilot's decision after a capture of an auto memory. */
static void autopilot(lt_memory *m, size_t pages, uint64_t ns)
{
    if (!m->auto_mode || m->pinned)
        return;
    /* The last capture before an unmap or free that finds nothing new says
     * nothing about density: the submit before it captured the writes (a
     * memory written, submitted, then freed would otherwise alternate
     * dense and clean and never settle). */
    if (m->concealing && pages == 0)
        return;
    const lt_ap_cal *cal = lt_autopilot_calibration(lt_cfg()->backend);
    lt_ap_decision d = lt_autopilot_decide(&m->ap, cal, m->mode, m->backend, exposed_pages(m), pages, ns);
    if (d == LT_AP_TO_SCAN) {
        /* Safe right after a capture: the next capture scans everything, so
         * writes between this one and the untracking are not lost. */
        guard_stop(m);
        m->mode = LT_SCAN;
        lt_stat_add(LT_ST_MODE_SWITCHES, 1);
        write_mode(m, "density rose");
    } else if (d == LT_AP_TO_GUARD) {
        m->pending_guard = 1;
    }
}

/* A capture of a scanned memory in bulk (autopilot.h): returns 1 when the
 * window was written whole, 0 when this capture diffs. Most captures write
 * it straight from the memory, as copy does, leaving the reference behind
 * (lag_lo/lag_hi); the one before a probe writes it through the reference,
 * so that the probe's diff measures one capture's changes. Through the
 * reference always with verify (packets and content hash then come from the
 * same instant), and for the last capture before an unmap or free when the
 * reference lags (else that one diffs: right after a submit's capture it
 * usually finds nothing). */
static int bulk_capture(lt_memory *m)
{
    int lags = window_lags(m);
    if (m->concealing && !lags)
        return 0;
    lt_bulk_step step = m->concealing ? LT_BULK_REFRESH : lt_autopilot_bulk_step(&m->ap);
    if (step == LT_BULK_PROBE && !lags)
        return 0;
    const unsigned char *live = view(m, m->driver_ptr, NULL);
    /* A probe on a lagging reference refreshes instead; write-combined
     * memory too, read once with streaming loads rather than by the trace
     * writer's plain loads. */
    if (step != LT_BULK_COPY || lt_cfg()->verify || wc_memory(m)) {
        read_live(m, m->reference + m->map_offset, live, (size_t)m->map_size);
        emit(m, m->reference, m->map_offset, m->map_size);
        window_caught_up(m);
    } else {
        emit(m, live - m->map_offset, m->map_offset, m->map_size);
        VkDeviceSize lo = m->map_offset, hi = m->map_offset + m->map_size;
        if (m->lag_lo < m->lag_hi) {
            lo = lo < m->lag_lo ? lo : m->lag_lo;
            hi = hi > m->lag_hi ? hi : m->lag_hi;
        }
        m->lag_lo = lo;
        m->lag_hi = hi;
    }
    stale_consumed(m);
    return 1;
}

/* An auto memory in copy that lives longer than the memories it inherited
 * copy from: this capture writes the whole memory through the reference
 * (a copy, as before), which makes the reference what replay holds, and
 * the memory goes on in scan, in bulk (probed like any bulk memory). */
static void copy_to_bulk(lt_memory *m)
{
    size_t size = (size_t)m->size;
    read_live(m, m->reference, view(m, m->driver_ptr, NULL), size);
    emit(m, m->reference, 0, size);
    stale_consumed(m);
    account((int64_t)size - (int64_t)lt_reference_held(m));
    m->staged_lo = m->staged_hi = 0;
    m->known_lo = 0;
    m->known_hi = size;
    m->ref_stale = 0;
    m->copied = 0;
    m->mode = LT_SCAN;
    m->ap.bulk = 1;
    m->ap.bulk_n = 0;
    lt_stat_add(LT_ST_MODE_SWITCHES, 1);
    write_mode(m, "lives longer than the memories it took copy from");
}

void lt_capture_memory(lt_memory *m)
{
    if (!recording(m))
        detach(m);
    /* Whole-window modes read it all; the diffs add what they compare. */
    m->work_bytes = m->mode == LT_COPY || (m->mode == LT_SCAN && m->ap.bulk) ? (size_t)m->map_size : 0;
    cand c = {0};
    size_t pages = 0;
    uint64_t t0 = lt_now_ns();
    if (!m->concealing)
        m->lives++;
    switch (m->mode) {
    case LT_COPY:
        if (m->auto_mode && !m->concealing && m->lives > LT_AP_COPY_LIFE && whole_window(m) &&
            ensure_reference(m) == 0) {
            copy_to_bulk(m);
            return;
        }
        m->copied = 1;
        /* With verify, through the reference: the packets and the content
         * hash then come from the same instant (see verify_memory). So is
         * write-combined memory: read once with streaming loads, not by
         * the trace writer's plain loads. */
        const unsigned char *live = view(m, m->driver_ptr, NULL);
        if ((lt_cfg()->verify || wc_memory(m)) && ensure_reference(m) == 0) {
            VkDeviceSize lo = m->map_offset, hi = lo + m->map_size;
            if (m->staged_lo < m->staged_hi) {
                lo = lo < m->staged_lo ? lo : m->staged_lo;
                hi = hi > m->staged_hi ? hi : m->staged_hi;
            }
            account((int64_t)((hi - lo) - (m->staged_hi - m->staged_lo)));
            m->staged_lo = lo;
            m->staged_hi = hi;
            read_live(m, m->reference + m->map_offset, live, (size_t)m->map_size);
            emit(m, m->reference, m->map_offset, m->map_size);
        } else {
            emit(m, live - m->map_offset, m->map_offset, m->map_size);
        }
        return;
    case LT_SCAN:
        if (m->pending_guard) {
            /* Back to guard: arm first, then scan everything once, so no
             * write between the two is lost. */
            m->pending_guard = 0;
            if (guard_start(m) == 0) {
                m->mode = LT_GUARD;
                lt_stat_add(LT_ST_MODE_SWITCHES, 1);
                write_mode(m, "density fell");
            }
        }
        if (m->ap.bulk && bulk_capture(m))
            return;
        pages = diff_emit(m, m->driver_ptr, NULL, NULL);
        stale_consumed(m);
        /* (A last capture that finds nothing new does not vote: see autopilot().) */
        if (m->auto_mode && !m->pinned && m->mode == LT_SCAN && !(m->concealing && !m->changed_bytes)) {
            int was = m->ap.bulk;
            if (lt_autopilot_bulk_vote(&m->ap, (size_t)m->map_size, m->changed_bytes) != was) {
                lt_stat_add(LT_ST_MODE_SWITCHES, 1);
                write_mode(m, was ? "bulk ends: fewer bytes change" : "nearly every byte changes");
            }
            if (m->ap.bulk)
                return; /* the autopilot's guard/scan choice waits for bulk to end */
        }
        break;
    case LT_GUARD: {
        uint64_t tc = lt_now_ns();
        device_ranges(m, &c);
        int rc = collected(m, &c, &pages);
        if (rc == MT_EUNMAPPED) {
            lost_mapping(m);
            break;
        }
        int ok = rc == 0;
        m->ap.collect_ns = (double)(lt_now_ns() - tc);
        if (ok) {
            cand_normalize(&c);
            diff_emit(m, m->driver_ptr, &c, NULL);
        } else {
            pages = diff_emit(m, m->driver_ptr, NULL, NULL); /* no candidates: be exact anyway */
        }
        stale_consumed(m);
        break;
    }
    case LT_SHADOW:
        /* Device writes first (to the app), then the app's writes (to the
         * driver): the reference is up to date between the two. */
        diff_device_writes(m, m->app_ptr);
        int rc = collected(m, &c, &pages);
        if (rc == MT_EUNMAPPED) {
            lost_mapping(m);
            break;
        }
        diff_emit(m, m->app_ptr, rc == 0 ? &c : NULL, m->driver_ptr);
        break;
    default:
        break;
    }
    free(c.v);
    autopilot(m, pages, lt_now_ns() - t0);
}

void lt_capture_sync_in(lt_memory *m)
{
    if (m->mode == LT_SHADOW && m->mapped)
        diff_device_writes(m, m->app_ptr);
}

static void hash_item(void *item);

void lt_capture_conceal(lt_memory *m, int freeing)
{
    /* Writes since the last submit reach the device only through a later
     * submit: a memory being freed has none (it must be idle), so its last
     * capture would only tell replay about bytes nothing reads (a memory
     * filled, submitted and freed per frame paid a diff of all of it, or a
     * second copy, at each free). Kept where the bytes outlive the memory
     * for someone: shadow mode owes the driver's memory the app's writes,
     * and memory shared with other processes or APIs lives on there. */
    int skip = freeing && m->mode != LT_SHADOW && !(m->external & (LT_EXT_EXPORTED | LT_EXT_IMPORTED));
    m->concealing = 1;
    if (!skip)
        lt_capture_memory(m);
    m->concealing = 0;
    /* verify: the content as it is unmapped, hashed as at a submit. The
     * usual upload (map, write, unmap, submit) leaves nothing mapped at the
     * submit, so without this no hash ever covered what its capture found
     * here, and a write lost at the unmap went unnoticed by verify. */
    if (!skip && m->mode != LT_OFF && lt_cfg()->verify && lt_tracing() && m->dev->active) {
        hash_item(m);
        lt_rec_hash(m->id, m->map_offset, m->map_size, m->verify_hash);
    }
    if (m->auto_mode)
        m->auto_pref = m->mode;
    if (m->mode == LT_SHADOW)
        shadow_stop(m);
    else
        guard_stop(m);
    if (m->mode != LT_OFF)
        lt_rec_unmap(m->id);
    lt_memory_unlink_exposed(m->dev, m);
    m->mapped = 0;
    m->driver_ptr = m->app_ptr = NULL;
}

static uint64_t queue_id(lt_device *dev, VkQueue q)
{
    lt_queue *lq = lt_queue_of(dev, q);
    return lq ? lq->id : 0;
}

/* ---- verify: the content hash, and what differed ------------------------- */

/* 1 when [off, off+len) (window offsets) overlaps a range the device may
 * write (bound objects with a writable usage, stale or sparse ranges). */
static int device_writable(const lt_memory *m, size_t off, size_t len)
{
    VkDeviceSize a = m->map_offset + off, b = a + len;
    if (m->stale_whole || m->sparse_whole)
        return 1;
    for (size_t i = 0; i < m->nbinds; i++) {
        const lt_object *o = m->binds[i];
        VkDeviceSize oa = o->offset, ob = o->offset + (o->is_image ? o->size : o->used);
        if (o->gpu_writable && oa < b && a < ob)
            return 1;
    }
    for (size_t i = 0; i < m->nstale; i++)
        if (m->stale[i].offset < b && a < m->stale[i].offset + m->stale[i].length)
            return 1;
    for (size_t i = 0; i < m->nsparse; i++)
        if (m->sparse[i].offset < b && a < m->sparse[i].offset + m->sparse[i].length)
            return 1;
    return 0;
}

/* Why window bytes [off, off+len) hold something else than what this
 * submit's capture recorded for them. */
static uint32_t classify(lt_memory *m, size_t off, size_t len)
{
    int dev = device_writable(m, off, len);
    switch (m->mode) {
    case LT_GUARD:
    case LT_SHADOW: {
        /* Tracked in place (or the application's copy, which verify reads
         * in shadow mode): written since the capture's collect means a
         * write that raced the capture; else only the device explains it. */
        int written = mt_tracker_peek(lt_tracker(), m->range, off, len);
        if (dev && lt_inflight_running(m->dev))
            return MT_TRACE_MISMATCH_DEVICE;
        if (written > 0)
            return MT_TRACE_MISMATCH_HOST;
        return dev ? MT_TRACE_MISMATCH_DEVICE : MT_TRACE_MISMATCH_LOST;
    }
    default:
        /* scan and copy read every byte: a difference appeared after. */
        return dev ? MT_TRACE_MISMATCH_DEVICE : MT_TRACE_MISMATCH_HOST;
    }
}

/* Records a run of differing window bytes and feeds the hash what the
 * trace must hold there: the recorded bytes for a race, the real ones for a
 * lost write (so that verify fails). */
static void mismatch_run(lt_memory *m, const unsigned char *live, XXH3_state_t *h, size_t off, size_t len)
{
    uint32_t cause = classify(m, off, len);
    const unsigned char *bytes = cause == MT_TRACE_MISMATCH_LOST ? live : m->reference + m->map_offset;
    XXH3_64bits_update(h, bytes + off, len);
    long i = binding_at(m, m->map_offset + off);
    uint64_t obj = 0;
    if (i >= 0) {
        const lt_object *o = m->binds[i];
        if (m->map_offset + off < o->offset + (o->is_image ? o->size : o->used))
            obj = o->id;
    }
    lt_rec_mismatch(m->id, obj, m->map_offset + off, len, cause,
                    cause == MT_TRACE_MISMATCH_DEVICE ? lt_inflight_running(m->dev) : 0);
}

/* The submit's content hash of m's window, after its capture: equal to
 * XXH3-64 of the real bytes wherever they equal what was recorded (the
 * comparison and the hash read the same bytes at the same instant, block by
 * block); where they differ, the run is classified and recorded first. */
static uint64_t verify_memory(lt_memory *m)
{
    enum { BLOCK = 64 << 10 };
    /* Shadow mode: the application's copy, where its writes land. The
     * driver's memory gets only what the capture wrote back, which the
     * reference holds as well, so a write page tracking missed would leave
     * both equal and go unseen. After the capture the copy equals the
     * reference, but for writes racing it and device work in flight. */
    const unsigned char *mine = m->mode == LT_SHADOW ? m->app_ptr : m->driver_ptr;
    const unsigned char *live = view(m, mine, NULL), *ref = m->reference + m->map_offset;
    size_t size = (size_t)m->map_size, ps = page_size(), run = 0, run_len = 0;
    /* Write-combined device memory is read once per block, with streaming
     * loads, into blk; the compare and the hash read that copy (lv + a is
     * the block's first byte either way). A run of differing pages then
     * ends at each block's end (recorded as several: the hash is the same). */
    unsigned char *blk = live == m->driver_ptr && wc_memory(m) ? malloc(BLOCK) : NULL;
    XXH3_state_t h;
    XXH3_64bits_reset(&h);
    for (size_t a = 0; a < size;) {
        size_t n = size - a < BLOCK ? size - a : BLOCK;
        const unsigned char *lv = live;
        if (blk) {
            mt_diff_read_wc(blk, live + a, n);
            lv = (const unsigned char *)((uintptr_t)blk - a);
        }
        if (memcmp(lv + a, ref + a, n) == 0) {
            if (run_len) {
                mismatch_run(m, lv, &h, run, run_len);
                run_len = 0;
            }
            XXH3_64bits_update(&h, ref + a, n);
            a += n;
            continue;
        }
        /* Page by page inside a block that differs: runs of whole pages
         * (the tracker's granularity), clipped to the window. */
        for (size_t end = a + n; a < end;) {
            size_t pn = ps - ((uintptr_t)(live + a) & (ps - 1));
            if (pn > end - a)
                pn = end - a;
            if (memcmp(lv + a, ref + a, pn) == 0) {
                if (run_len) {
                    mismatch_run(m, lv, &h, run, run_len);
                    run_len = 0;
                }
                XXH3_64bits_update(&h, ref + a, pn);
            } else if (run_len) {
                run_len += pn;
            } else {
                run = a;
                run_len = pn;
            }
            a += pn;
        }
        if (blk && run_len) {
            mismatch_run(m, lv, &h, run, run_len);
            run_len = 0;
        }
    }
    if (run_len)
        mismatch_run(m, live, &h, run, run_len);
    free(blk);
    return XXH3_64bits_digest(&h);
}

/* Without the interposer an application can replace memtrack's SIGSEGV
 * handler without chaining; then a tracked write would reach the app's
 * handler. Put ours back on top (the app's stays next in the chain, so it
 * still sees every fault that is not a tracked write), and say so. */
static void check_handler(void)
{
    if (mt_track_handler_status() >= 0)
        return;
    int rc = mt_track_reinstall_handler();
    lt_rec_note(0, "handler-displaced",
                "the application replaced memtrack's SIGSEGV handler without chaining: %s (record "
                "with memtrack record, which preloads the interposer, to keep it first)",
                rc == 0 ? "put back on top, the application's handler is chained"
                        : "could not put it back: tracked writes may reach the application");
}

static void capture_item(void *item) { lt_capture_memory(item); }

/* Bytes a submit's captures are expected to read (each memory's last
 * capture, or its window in scan and copy) below which the capture threads
 * are not woken: on the H100 the sparse workload (a few pages in 4 memories)
 * captured in 1.0 ms with them against 0.6-0.7 ms without (same lease). */
#define PARALLEL_MIN ((size_t)1 << 20)

static void hash_item(void *item)
{
    lt_memory *m = item;
    /* Modes mapped as OFF were left out; a memory whose capture just
     * stopped (unmapped by the application) is hashed from its reference. */
    if (m->mode == LT_OFF)
        m->verify_hash = m->reference ? mt_trace_hash(m->reference + m->map_offset, (size_t)m->map_size) : 0;
    else
        m->verify_hash = m->reference ? verify_memory(m)
                                      : mt_trace_hash(view(m, m->driver_ptr, NULL), (size_t)m->map_size);
}

void lt_capture_submit(lt_device *dev, VkQueue queue, const lt_submit *sub)
{
    if (!dev->capture)
        return;
    lt_window_poll();
    pthread_mutex_lock(&dev->lock);
    window_sync(dev);
    uint64_t t0 = lt_now_ns();
    int tracing = lt_tracing() && dev->active;
    if (tracing)
        check_handler();
    /* Also while the capture window is closed: the references stay. */
    if (lt_tracing())
        budget_shed(dev, 0);
    /* Every exposed memory's capture (and then its hash) is independent of
     * the others': in parallel (workers.c). All UPDATE records come before
     * any hash, every hash before the SUBMIT. */
    size_t n = 0, work = 0;
    for (lt_memory *m = dev->mapped; m; m = m->next_mapped)
        if (m->mode != LT_OFF) {
            n++;
            work += m->mode == LT_SCAN || m->mode == LT_COPY ? (size_t)m->map_size : m->work_bytes;
        }
    lt_memory *one[8], **list = n <= 8 ? one : malloc(n * sizeof *list);
    if (!list) { /* out of memory: one at a time */
        for (lt_memory *m = dev->mapped; m; m = m->next_mapped)
            if (m->mode != LT_OFF)
                lt_capture_memory(m);
    } else {
        size_t k = 0;
        for (lt_memory *m = dev->mapped; m; m = m->next_mapped)
            if (m->mode != LT_OFF)
                list[k++] = m;
        /* A submit whose memories are estimated to need little reading
         * (sparse writers: a few pages each) is captured on this thread:
         * waking the capture threads costs more than it saves. */
        if (work >= PARALLEL_MIN)
            lt_workers_run(capture_item, (void **)list, n);
        else
            for (size_t i = 0; i < n; i++)
                capture_item(list[i]);
        if (tracing && lt_cfg()->verify) {
            lt_workers_run(hash_item, (void **)list, n);
            for (size_t i = 0; i < n; i++)
                lt_rec_hash(list[i]->id, list[i]->map_offset, list[i]->map_size, list[i]->verify_hash);
        }
        if (list != one)
            free(list);
    }
    if (tracing)
        lt_rec_submit(queue_id(dev, queue));
    if (sub->s2)
        lt_inflight_submit2(dev, queue, sub->n, sub->s2, sub->fence);
    else
        lt_inflight_submit(dev, queue, sub->n, sub->s, sub->fence);
    uint64_t dt = lt_now_ns() - t0;
    lt_stat_add(LT_ST_SUBMITS, 1);
    lt_stat_add(LT_ST_CAPTURE_NS, (int64_t)dt);
    lt_stat_max(dt);
    pthread_mutex_unlock(&dev->lock);
    lt_progress();
}

void lt_capture_present(lt_device *dev)
{
    if (!dev->capture)
        return;
    pthread_mutex_lock(&dev->lock);
    window_sync(dev);
    if (dev->active && lt_tracing())
        lt_rec_frame();
    lt_stat_add(LT_ST_FRAMES, 1);
    pthread_mutex_unlock(&dev->lock);
    lt_window_present();
}

void lt_capture_host_release(lt_device *dev)
{
    if (!dev->capture || !__atomic_load_n(&dev->shadow_mapped, __ATOMIC_RELAXED))
        return;
    pthread_mutex_lock(&dev->lock);
    for (lt_memory *m = dev->mapped; m; m = m->next_mapped)
        if (m->mode == LT_SHADOW)
            lt_capture_memory(m);
    pthread_mutex_unlock(&dev->lock);
}

/* Shadow memories get what the device wrote (BAR memory left out where
 * `skip_bar`). dev->lock held. */
static void sync_in_mapped(lt_device *dev, int skip_bar)
{
    if (!__atomic_load_n(&dev->shadow_mapped, __ATOMIC_RELAXED))
        return;
    uint64_t t0 = lt_now_ns();
    for (lt_memory *m = dev->mapped; m; m = m->next_mapped)
        if (!(skip_bar && bar_memory(m)))
            lt_capture_sync_in(m);
    lt_stat_add(LT_ST_SYNC_IN_NS, (int64_t)(lt_now_ns() - t0));
}

void lt_capture_device_lost(lt_device *dev, const char *call)
{
    if (!dev->capture)
        return;
    lt_rec_note(0, "device-lost", "the device was lost (%s): memories in shadow mode get what the "
                "driver's mapping holds, but those in the device's own memory, whose mapping may be "
                "gone", call);
    pthread_mutex_lock(&dev->lock);
    sync_in_mapped(dev, 1);
    pthread_mutex_unlock(&dev->lock);
}

/* dev->lock held. */
static void note_seen(lt_device *dev, const lt_seen *seen)
{
    switch (seen->kind) {
    case LT_SEEN_QUEUE_IDLE: lt_inflight_queue_idle(dev, seen->queue); break;
    case LT_SEEN_DEVICE_IDLE: lt_inflight_device_idle(dev); break;
    case LT_SEEN_FENCES: lt_inflight_fences_done(dev, seen->n, seen->fences, seen->all); break;
    case LT_SEEN_COUNTER: lt_inflight_timeline_reached(dev, seen->sem, seen->value); break;
    case LT_SEEN_SEMAPHORES: {
        const VkSemaphoreWaitInfo *w = seen->wait;
        /* "Any of these" says nothing about each one. */
        if (!(w->flags & VK_SEMAPHORE_WAIT_ANY_BIT) || w->semaphoreCount == 1)
            for (uint32_t i = 0; i < w->semaphoreCount; i++)
                lt_inflight_timeline_reached(dev, w->pSemaphores[i], w->pValues[i]);
        break;
    }
    case LT_SEEN_EVENT: break; /* an event says nothing about whole submits */
    case LT_SEEN_HOST_COPY: break; /* the host's own work: nothing about submits */
    }
}

void lt_capture_after_wait(lt_device *dev, const lt_seen *seen)
{
    if (!dev->capture)
        return;
    pthread_mutex_lock(&dev->lock);
    note_seen(dev, seen);
    sync_in_mapped(dev, 0);
    pthread_mutex_unlock(&dev->lock);
}
