/* Capture: turning what changed in mapped memory into UPDATE records.
 *
 * Every mapped memory has a reference copy: what the trace has told replay so
 * far. A capture diffs candidate regions of the real content against it and
 * writes the changed bytes as packets, which also brings the reference up to
 * date. The candidates depend on the mode:
 *   guard   pages the tracker saw written in the driver's mapping, plus the
 *           ranges of objects the device may write (GPU writes raise no fault)
 *   shadow  the same, but app writes are tracked in the anonymous mapping we
 *           gave the app; diff writes exactly the changed bytes back to the
 *           driver's mapping, and device writes are copied to the app's
 *           mapping (sync-in) so that the app reads what the GPU produced
 *   scan    the whole mapped range
 *   copy    no diff: the whole mapped range is written every time
 * A submit captures every mapped memory, then (verify) hashes the real
 * content of each, then writes the SUBMIT record: replay applies the packets,
 * and the hash must match, or a write was lost. */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "layer.h"

#define RUNS 256

static size_t page_size(void)
{
    static size_t ps;
    if (!ps)
        ps = (size_t)sysconf(_SC_PAGESIZE);
    return ps;
}

/* ---- candidate regions ---------------------------------------------------- */

typedef struct cand {
    mt_diff_region *v;
    size_t n, cap;
} cand;

static int cand_push(cand *c, size_t off, size_t len)
{
    if (len == 0)
        return 0;
    if (c->n == c->cap) {
        size_t ncap = c->cap ? c->cap * 2 : 64;
        mt_diff_region *v = realloc(c->v, ncap * sizeof *v);
        if (!v)
            return -ENOMEM;
        c->v = v;
        c->cap = ncap;
    }
    c->v[c->n++] = (mt_diff_region){off, len};
    return 0;
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

/* Ranges of objects the device may write, clipped to the mapped range, as
 * offsets relative to the mapping. */
static int gpu_ranges(const lt_memory *m, cand *c)
{
    VkDeviceSize lo = m->map_offset, hi = m->map_offset + m->map_size;
    for (size_t i = 0; i < m->nbinds; i++) {
        const lt_object *o = m->binds[i];
        if (!o->gpu_writable)
            continue;
        VkDeviceSize a = o->offset, b = o->offset + (o->is_image ? o->size : o->used);
        if (a < lo)
            a = lo;
        if (b > hi)
            b = hi;
        if (a < b && cand_push(c, (size_t)(a - lo), (size_t)(b - a)) != 0)
            return -ENOMEM;
    }
    return 0;
}

/* Dirty page runs of m's tracker range (relative to the mapping). */
static int collected(lt_memory *m, cand *c, size_t *pages)
{
    mt_dirty_run runs[RUNS];
    long n;
    do {
        n = mt_tracker_collect(lt_ctx.tracker, m->range, runs, RUNS);
        if (n < 0)
            return (int)n;
        for (long i = 0; i < n; i++) {
            /* Runs are clipped to the range, which is the mapping: keep it
             * that way even if a range were ever larger (diff refuses
             * candidates outside the job). */
            size_t end = runs[i].offset + runs[i].length;
            if (end > m->map_size)
                end = (size_t)m->map_size;
            if (runs[i].offset < end && cand_push(c, runs[i].offset, end - runs[i].offset) != 0)
                return -ENOMEM;
            *pages += (runs[i].length + page_size() - 1) / page_size();
        }
    } while (n == RUNS);
    return 0;
}

/* ---- packets ------------------------------------------------------------ */

static void write_update(lt_memory *m, uint64_t object, VkDeviceSize off, const void *data, size_t len)
{
    if (!lt_tracing())
        return;
    if (++lt_ctx.st.packets == lt_ctx.drop_update)
        return; /* test hook: a lost write */
    lt_trace_check(mt_trace_write_update(lt_ctx.trace, m->id, object, off, data, len));
    lt_ctx.st.packet_bytes += len;
}

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
        write_update(m, obj, off, src + off, (size_t)(stop - off));
        off = stop;
    }
}

/* Diffs live (the mapping, relative offsets) against the reference over `c`
 * (NULL: everything), optionally writing changed bytes back, and emits the
 * changes. Returns the number of pages that held changes. */
static size_t diff_emit(lt_memory *m, const unsigned char *live, const cand *c, void *writeback)
{
    if (c && c->n == 0)
        return 0;
    mt_diff_job job = {
        .live = live,
        .shadow = m->reference + m->map_offset,
        .size = (size_t)m->map_size,
        .candidates = c ? c->v : NULL,
        .ncandidates = c ? c->n : 0,
        .writeback = writeback,
    };
    mt_diff_opts o = {.merge_gap = lt_ctx.merge_gap};
    mt_diff_region runs[RUNS];
    size_t pages = 0, last_page = SIZE_MAX, ps = page_size();
    long n;
    do {
        n = mt_diff(&job, &o, runs, RUNS);
        if (n < 0) {
            lt_warn_once("diff", "diff failed (%s): a capture was skipped", mt_strerror((int)n));
            return pages;
        }
        for (long i = 0; i < n; i++) {
            emit(m, m->reference, m->map_offset + runs[i].offset, runs[i].length);
            size_t p0 = runs[i].offset / ps, p1 = (runs[i].offset + runs[i].length - 1) / ps;
            pages += p1 - p0 + 1 - (p0 == last_page);
            last_page = p1;
        }
    } while (n == RUNS && job.cursor < job.size);
    return pages;
}

/* ---- setup and teardown of a mapping ----------------------------------------- */

static void account(int64_t bytes)
{
    lt_ctx.st.shadow_bytes += (uint64_t)bytes;
    if (lt_ctx.st.shadow_bytes > lt_ctx.st.shadow_bytes_peak)
        lt_ctx.st.shadow_bytes_peak = lt_ctx.st.shadow_bytes;
}

static void write_mode(lt_memory *m, const char *why)
{
    if (!lt_tracing())
        return;
    char text[160];
    const char *be = m->range ? mt_track_backend_name(m->backend) : NULL;
    snprintf(text, sizeof text, "%s%s%s%s%s%s", lt_mode_name(m->mode), be ? "/" : "", be ? be : "",
             m->auto_mode ? " (auto)" : "", why ? ": " : "", why ? why : "");
    lt_trace_check(mt_trace_write_mode(lt_ctx.trace, m->id, text));
}

static void fall_back_to_scan(lt_memory *m, int rc, const char *what)
{
    char why[128];
    snprintf(why, sizeof why, "%s tracking failed: %s", what, mt_strerror(rc));
    m->mode = LT_SCAN;
    m->fell_back = 1;
    m->auto_mode = 0;
    lt_ctx.st.fallbacks++;
    lt_warn_once("fallback", "memory %llu: %s; scanning it instead (reported once)",
                 (unsigned long long)m->id, why);
    if (lt_tracing()) {
        char text[200];
        snprintf(text, sizeof text, "memory %llu falls back to scan: %s", (unsigned long long)m->id, why);
        lt_trace_check(mt_trace_write_annotation(lt_ctx.trace, m->id, text));
    }
}

int lt_guard_start(lt_memory *m)
{
    if (!lt_ctx.tracker)
        return MT_EUNSUPPORTED;
    uint64_t t0 = lt_now_ns();
    int rc = mt_tracker_add(lt_ctx.tracker, m->driver_ptr, (size_t)m->map_size, NULL, &m->range);
    if (rc) {
        m->range = 0;
        return rc;
    }
    m->backend = (mt_track_backend)mt_tracker_backend(lt_ctx.tracker, m->range);
    m->guard_setup_ns = (double)(lt_now_ns() - t0); /* stop adds its share */
    return 0;
}

void lt_guard_stop(lt_memory *m)
{
    if (!m->range)
        return;
    uint64_t t0 = lt_now_ns();
    mt_tracker_remove(lt_ctx.tracker, m->range);
    m->range = 0;
    m->guard_setup_ns += (double)(lt_now_ns() - t0);
}

static int shadow_start(lt_memory *m)
{
    if (!lt_ctx.tracker)
        return MT_EUNSUPPORTED;
    size_t ps = page_size();
    m->app_len = ((size_t)m->map_size + ps - 1) & ~(ps - 1);
    void *p = mmap(NULL, m->app_len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED)
        return -errno;
    memcpy(p, m->driver_ptr, (size_t)m->map_size);
    /* Tracked after the copy: the app gets the pointer only when we return.
     * Only the mapped bytes: the page-rounded tail is not the memory's. */
    int rc = mt_tracker_add(lt_ctx.tracker, p, (size_t)m->map_size, NULL, &m->range);
    if (rc) {
        munmap(p, m->app_len);
        m->range = 0;
        return rc;
    }
    m->backend = (mt_track_backend)mt_tracker_backend(lt_ctx.tracker, m->range);
    m->app_ptr = p;
    m->dev->shadow_mapped++;
    account((int64_t)m->app_len);
    return 0;
}

static void shadow_stop(lt_memory *m)
{
    lt_guard_stop(m);
    munmap(m->app_ptr, m->app_len);
    account(-(int64_t)m->app_len);
    m->app_ptr = m->driver_ptr;
    m->dev->shadow_mapped--;
}

static int ensure_reference(lt_memory *m)
{
    if (m->reference)
        return 0;
    /* Zero-filled like replay's fresh image; only touched pages use memory. */
    void *p = mmap(NULL, (size_t)m->size, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (p == MAP_FAILED)
        return -errno;
    m->reference = p;
    return 0;
}

void lt_capture_map(lt_memory *m)
{
    m->app_ptr = m->driver_ptr;
    m->range = 0;
    if (lt_tracing())
        lt_trace_check(mt_trace_write_map(lt_ctx.trace, m->id, m->map_offset, m->map_size));
    m->mode = lt_ctx.mode;
    m->auto_mode = m->mode == LT_AUTO;
    if (m->auto_mode) { /* guard until the autopilot has seen the write density */
        m->mode = lt_autopilot_always_scan(m) ? LT_SCAN : LT_GUARD;
        if (m->auto_pref == LT_SCAN || m->auto_pref == LT_GUARD) {
            m->mode = m->auto_pref;
            m->remapped = 1;
        }
        if (m->streak < 0)
            m->streak = 0; /* a pending switch to guard: the map decides afresh */
    }
    if (m->mode != LT_COPY && ensure_reference(m) != 0) {
        lt_warn_once("reference", "cannot allocate a reference copy: memory %llu is copied whole",
                     (unsigned long long)m->id);
        m->mode = LT_COPY;
        m->auto_mode = 0;
    }
    if (m->fell_back)
        m->mode = LT_SCAN;
    int rc = 0;
    if (m->mode == LT_SHADOW && (rc = shadow_start(m)) != 0)
        fall_back_to_scan(m, rc, "shadow mapping");
    if (m->mode == LT_GUARD && (rc = lt_guard_start(m)) != 0)
        fall_back_to_scan(m, rc, "in-place");
    write_mode(m, NULL);
    if (m->mode == LT_COPY)
        return;

    /* Where replay does not know the content yet, diff all of it (replay's
     * image starts as zeros); elsewhere only what the device may have
     * written while the memory was not mapped. */
    VkDeviceSize lo = m->map_offset, hi = m->map_offset + m->map_size;
    if (lo >= m->known_lo && hi <= m->known_hi && m->known_hi > m->known_lo) {
        cand c = {0};
        if (gpu_ranges(m, &c) == 0)
            diff_emit(m, m->driver_ptr, &c, NULL);
        free(c.v);
    } else {
        diff_emit(m, m->driver_ptr, NULL, NULL);
        if (m->known_hi > m->known_lo && lo <= m->known_hi && hi >= m->known_lo) {
            m->known_lo = lo < m->known_lo ? lo : m->known_lo;
            m->known_hi = hi > m->known_hi ? hi : m->known_hi;
        } else {
            account((int64_t)(hi - lo));
            m->known_lo = lo;
            m->known_hi = hi;
        }
    }
}

void lt_capture_memory(lt_memory *m)
{
    cand c = {0};
    size_t pages = 0;
    uint64_t t0 = lt_now_ns();
    switch (m->mode) {
    case LT_COPY:
        emit(m, m->driver_ptr - m->map_offset, m->map_offset, m->map_size);
        return;
    case LT_SCAN:
        if (m->auto_mode && m->streak < 0) {
            /* The autopilot decided to go back to guard: arm first, then
             * scan everything once, so no write between the two is lost. */
            m->streak = 0;
            if (lt_guard_start(m) == 0) {
                m->mode = LT_GUARD;
                lt_ctx.st.mode_switches++;
                write_mode(m, "density fell");
            }
        }
        pages = diff_emit(m, m->driver_ptr, NULL, NULL);
        break;
    case LT_GUARD: {
        uint64_t tc = lt_now_ns();
        int ok = gpu_ranges(m, &c) == 0 && collected(m, &c, &pages) == 0;
        m->collect_ns = (double)(lt_now_ns() - tc);
        if (ok) {
            cand_normalize(&c);
            diff_emit(m, m->driver_ptr, &c, NULL);
        } else {
            pages = diff_emit(m, m->driver_ptr, NULL, NULL); /* no candidates: be exact anyway */
        }
        break;
    }
    case LT_SHADOW:
        /* Device writes first (to the app), then the app's writes (to the
         * driver): the reference is up to date between the two. */
        if (gpu_ranges(m, &c) == 0)
            diff_emit(m, m->driver_ptr, &c, m->app_ptr);
        c.n = 0;
        if (collected(m, &c, &pages) == 0)
            diff_emit(m, m->app_ptr, &c, m->driver_ptr);
        else
            diff_emit(m, m->app_ptr, NULL, m->driver_ptr);
        break;
    default:
        break;
    }
    free(c.v);
    if (m->auto_mode)
        lt_autopilot_observe(m, pages, lt_now_ns() - t0);
}

void lt_capture_sync_in(lt_memory *m)
{
    if (m->mode != LT_SHADOW || !m->mapped)
        return;
    cand c = {0};
    if (gpu_ranges(m, &c) == 0)
        diff_emit(m, m->driver_ptr, &c, m->app_ptr);
    free(c.v);
}

void lt_capture_unmap(lt_memory *m)
{
    lt_capture_memory(m);
    if (m->auto_mode)
        m->auto_pref = m->mode;
    if (m->mode == LT_SHADOW)
        shadow_stop(m);
    else
        lt_guard_stop(m);
    if (lt_tracing())
        lt_trace_check(mt_trace_write_unmap(lt_ctx.trace, m->id));
    lt_device *dev = m->dev;
    if (m->prev_mapped)
        m->prev_mapped->next_mapped = m->next_mapped;
    else
        dev->mapped = m->next_mapped;
    if (m->next_mapped)
        m->next_mapped->prev_mapped = m->prev_mapped;
    m->next_mapped = m->prev_mapped = NULL;
    m->mapped = 0;
    m->driver_ptr = m->app_ptr = NULL;
}

static uint64_t queue_id(lt_device *dev, VkQueue q)
{
    uintptr_t v = (uintptr_t)lt_map_get(&dev->queues, (uint64_t)(uintptr_t)q);
    return v ? v - 1 : 0;
}

void lt_capture_submit(lt_device *dev, VkQueue queue)
{
    pthread_mutex_lock(&dev->lock);
    uint64_t t0 = lt_now_ns();
    if (lt_tracing()) {
        for (lt_memory *m = dev->mapped; m; m = m->next_mapped)
            lt_capture_memory(m);
        if (lt_ctx.verify)
            for (lt_memory *m = dev->mapped; m; m = m->next_mapped) {
                uint64_t h = mt_trace_hash(m->driver_ptr, (size_t)m->map_size);
                lt_trace_check(mt_trace_write_content_hash(lt_ctx.trace, m->id, m->map_offset,
                                                           m->map_size, h));
                lt_ctx.st.hashes++;
            }
        lt_trace_check(mt_trace_write_submit(lt_ctx.trace, queue_id(dev, queue), NULL));
    }
    uint64_t dt = lt_now_ns() - t0;
    lt_ctx.st.submits++;
    lt_ctx.st.capture_ns += dt;
    if (dt > lt_ctx.st.capture_ns_max)
        lt_ctx.st.capture_ns_max = dt;
    pthread_mutex_unlock(&dev->lock);
    lt_progress();
}

void lt_capture_after_wait(lt_device *dev)
{
    if (!__atomic_load_n(&dev->shadow_mapped, __ATOMIC_RELAXED))
        return;
    pthread_mutex_lock(&dev->lock);
    for (lt_memory *m = dev->mapped; m; m = m->next_mapped)
        lt_capture_sync_in(m);
    pthread_mutex_unlock(&dev->lock);
}
