/* Tracked host memory: the host writes a buffer's host memory directly and
 * memtrack `track` reports the pages written, so the next upload copies
 * those pages only.
 *
 * The memory is watched as ranges of track_chunk bytes (the first one split
 * in smaller ones, hosttrack.h). Before the planner
 * reads or changes the validity of a range of a tracked root it collects the
 * chunks that cover it: written pages become "valid at the host only" (they
 * are newer than anything planned before). For an upload the collection is
 * pipelined: chunk by chunk the written pages are applied, their fetch is
 * planned and, once enough bytes are gathered (or the copy engine is idle),
 * issued, so the device copies early chunks while later ones are read.
 * Large buffers are collected by a pool of threads in parallel; the planner
 * consumes chunks in address order and takes unclaimed chunks too, but none
 * past the one it applies next (that would hold back the next copy).
 *
 * memtrack's own downloads into the memory (a map, a relay) also show up as
 * written pages. Each is registered as in flight when the planner issues it
 * and until it completes; every collection (the planner's, and a completing
 * download's) drops the pages in-flight downloads write: while one is in
 * flight the host cannot legitimately write those pages (they are not valid
 * at the host until it completes, and the host writes only pages it holds
 * the latest content of). When a download completes, its engine thread
 * collects the chunks it touched under the root's track lock, drops those
 * pages and keeps the others in a stash the planner applies at its next
 * collection: no host write is lost, and no download comes back as one, even
 * when a collection runs while it is still writing.
 *
 * The planner's sync (collect, apply, plan the fetch) is in hostsync.c. */
#define _GNU_SOURCE
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "hosttrack.h"

static int push_range(coh_range **v, size_t *n, size_t *cap, uint64_t a, uint64_t b)
{
    if (*n && (*v)[*n - 1].b >= a) { /* touching or overlapping the last one */
        if (b > (*v)[*n - 1].b)
            (*v)[*n - 1].b = b;
        return 0;
    }
    if (*n == *cap) {
        size_t nc = *cap ? *cap * 2 : 64;
        coh_range *p = realloc(*v, nc * sizeof *p);
        if (!p)
            return -ENOMEM;
        *v = p;
        *cap = nc;
    }
    (*v)[(*n)++] = (coh_range){a, b};
    return 0;
}

static int seg_cmp(const void *x, const void *y)
{
    const coh_range *p = x, *q = y;
    return p->a < q->a ? -1 : p->a > q->a;
}

/* Removes from the sorted, disjoint ranges *v the pages that in-flight
 * downloads write (their writes, not the host's). 0 or -ENOMEM (then *v is
 * unchanged: the pages count as host writes, an upload too many). Caller
 * holds tr->lock. */
int mti_coh_track_drop_inflight(coh_track *tr, coh_range **v, size_t *n, size_t *cap)
{
    if (!*n)
        return 0;
    pthread_mutex_lock(&tr->ilock);
    coh_range *w = NULL;
    size_t nw = 0, cw = 0;
    int rc = 0;
    uint64_t pg = tr->page;
    for (coh_cmd *d = tr->inflight; d && !rc; d = d->anext)
        for (uint32_t i = 0; i < d->nsegs && !rc; i++) {
            if (nw == cw) {
                size_t nc = cw ? cw * 2 : 16;
                coh_range *p = realloc(w, nc * sizeof *p);
                if (!p) {
                    rc = -ENOMEM;
                    break;
                }
                w = p;
                cw = nc;
            }
            w[nw++] = (coh_range){d->segs[i].dst & ~(pg - 1),
                                  (d->segs[i].dst + d->segs[i].len + pg - 1) & ~(pg - 1)};
        }
    pthread_mutex_unlock(&tr->ilock);
    if (rc || !nw) {
        free(w);
        return rc;
    }
    qsort(w, nw, sizeof *w, seg_cmp);
    coh_range *out = NULL;
    size_t no = 0, co = 0;
    size_t j = 0;
    for (size_t q = 0; q < *n && !rc; q++) {
        uint64_t a = (*v)[q].a, b = (*v)[q].b;
        while (j < nw && w[j].b <= a) /* ranges and w are sorted by start */
            j++;
        for (size_t k = j; k < nw && w[k].a < b && a < b && !rc; k++) {
            if (w[k].b <= a)
                continue;
            if (w[k].a > a)
                rc = push_range(&out, &no, &co, a, w[k].a);
            if (w[k].b > a)
                a = w[k].b;
        }
        if (a < b && !rc)
            rc = push_range(&out, &no, &co, a, b);
    }
    free(w);
    if (rc) {
        free(out);
        return rc;
    }
    free(*v);
    *v = out;
    *n = no;
    *cap = co;
    return 0;
}

/* Room for every run a chunk can have (one per two pages): a collect that
 * fills its array puts the rest back and the next one scans the chunk again
 * (another PAGEMAP_SCAN walk over all its pages), so a small array made a
 * half-dirty chunk cost five scans instead of one. */
static size_t chunk_runs(uint64_t chunk, uint64_t page)
{
    return (size_t)(chunk / page) / 2 + 1;
}

/* Collects chunk k of r into `out` (root offsets, widened to granules),
 * using the caller's run array `runs` of `max` entries (NULL: a small one
 * on the stack, more walks for a dirty chunk). Returns 0, or nonzero when
 * the whole chunk must count as written where the host holds it (a chunk
 * not page-tracked, -ENOMEM). */
static int collect_chunk(mt_coh *c, coh_root *r, uint32_t k, mt_dirty_run *runs, size_t max,
                         coh_range **v, size_t *n, size_t *cap)
{
    coh_track *tr = r->track;
    uint64_t base = mti_coh_chunk_start(tr, k), g = c->gran > c->page ? c->gran : c->page;
    mt_dirty_run small[256];
    if (!runs) {
        runs = small;
        max = 256;
    }
    int rc = 0;
    if (tr->whole[k] == COH_WHOLE_ALWAYS)
        return 1;
    for (;;) {
        long got = mt_tracker_collect(c->tracker, tr->ids[k], runs, max);
        if (got == MT_EUNMAPPED) {
            /* The application unmapped or remapped some of the chunk: what
             * is there now is not tracked. From now on the chunk counts as
             * written at every collection (what it reported so far is in v
             * already). */
            mt_tracker_remove(c->tracker, tr->ids[k]);
            tr->ids[k] = 0;
            tr->whole[k] = COH_WHOLE_ALWAYS;
            atomic_fetch_add_explicit(&c->track_whole_chunks, 1, memory_order_relaxed);
            return 1;
        }
        if (got < 0)
            break; /* the range is gone (released): nothing to report */
        for (long i = 0; i < got; i++) {
            uint64_t a = (base + runs[i].offset) & ~(g - 1);
            uint64_t b = (base + runs[i].offset + runs[i].length + g - 1) & ~(g - 1);
            if (b > r->size)
                b = r->size;
            if (!rc)
                rc = push_range(v, n, cap, a, b);
        }
        if ((size_t)got < max)
            break;
    }
    return rc;
}

/* The run array of whoever holds r's track lock, allocated on first use
 * (for the chunk size, or the root's when smaller). */
static mt_dirty_run *locked_runs(coh_root *r, size_t *max)
{
    coh_track *tr = r->track;
    if (!tr->scratch) {
        size_t want = chunk_runs(r->size < tr->chunk ? r->size : tr->chunk, tr->page);
        tr->scratch = malloc(want * sizeof *tr->scratch);
        tr->nscratch = tr->scratch ? want : 0;
    }
    *max = tr->nscratch;
    return tr->scratch;
}

static void collect_into(mt_coh *c, coh_root *r, uint32_t k, mt_dirty_run *runs, size_t max)
{
    chunk_res *cr = &r->track->res[k];
    cr->n = 0;
    cr->all = collect_chunk(c, r, k, runs, max, &cr->v, &cr->n, &cr->cap) != 0;
    /* release: the planner reading `done` sees the results. */
    atomic_store_explicit(&cr->done, 1, memory_order_release);
}

/* ---- workers ------------------------------------------------------------------------- */

static void *worker(void *arg)
{
    mt_coh *c = arg;
    coh_workers *w = c->workers;
    uint64_t seen = 0;
    /* This thread's run array, for its whole life (every root of the
     * context has the same chunk size). */
    size_t max = chunk_runs(c->o.track_chunk, c->page);
    mt_dirty_run *runs = malloc(max * sizeof *runs);
    if (!runs)
        max = 0;
    pthread_mutex_lock(&w->lock);
    for (;;) {
        while (!w->stop && (!w->job || w->gen == seen))
            pthread_cond_wait(&w->cond, &w->lock);
        if (w->stop)
            break;
        seen = w->gen;
        coh_job *job = w->job;
        w->active++;
        pthread_mutex_unlock(&w->lock);
        uint32_t k;
        while ((k = atomic_fetch_add_explicit(&job->next, 1, memory_order_relaxed)) <= job->k1) {
            collect_into(job->c, job->r, k, runs, max);
            /* Only the chunk the planner sleeps on wakes it: it consumes
             * chunks in address order, the others it finds done. `done`
             * was stored before this lock: a planner checking it under the
             * lock after us sees it, one before us has set `want`. */
            pthread_mutex_lock(&w->lock);
            if (w->want == k)
                pthread_cond_broadcast(&w->done_cond);
            pthread_mutex_unlock(&w->lock);
        }
        pthread_mutex_lock(&w->lock);
        if (--w->active == 0)
            pthread_cond_broadcast(&w->done_cond);
    }
    pthread_mutex_unlock(&w->lock);
    free(runs);
    return NULL;
}

int mti_coh_workers_start(mt_coh *c)
{
    uint32_t n = c->o.collect_threads; /* the planner is one of them */
    if (!n) {
        long cpus = sysconf(_SC_NPROCESSORS_ONLN);
        n = cpus > 9 ? 9 : cpus > 1 ? (uint32_t)cpus : 1;
    }
    n--;
    if (!n)
        return 0;
    coh_workers *w = calloc(1, sizeof *w);
    if (!w || !(w->th = calloc(n, sizeof *w->th))) {
        free(w);
        return -ENOMEM;
    }
    pthread_mutex_init(&w->lock, NULL);
    pthread_cond_init(&w->cond, NULL);
    pthread_cond_init(&w->done_cond, NULL);
    w->want = UINT32_MAX;
    c->workers = w;
    for (uint32_t i = 0; i < n; i++) {
        if (pthread_create(&w->th[i], NULL, worker, c))
            break;
        w->n++;
    }
    return 0;
}

void mti_coh_workers_stop(mt_coh *c)
{
    coh_workers *w = c->workers;
    if (!w)
        return;
    pthread_mutex_lock(&w->lock);
    w->stop = 1;
    pthread_cond_broadcast(&w->cond);
    pthread_mutex_unlock(&w->lock);
    for (uint32_t i = 0; i < w->n; i++)
        pthread_join(w->th[i], NULL);
    pthread_mutex_destroy(&w->lock);
    pthread_cond_destroy(&w->cond);
    pthread_cond_destroy(&w->done_cond);
    free(w->th);
    free(w);
    c->workers = NULL;
}

/* Waits until chunk k is collected (the planner, holding r's track lock).
 * Meanwhile it collects unclaimed chunks of `job` (NULL: k alone), but
 * none after k: it applies chunks and issues their copies in address
 * order, and a later chunk collected here would hold back chunk k's copy
 * (the workers take those). */
void mti_coh_track_await(mt_coh *c, coh_root *r, coh_job *job, uint32_t k)
{
    coh_track *tr = r->track;
    chunk_res *cr = &tr->res[k];
    size_t max;
    mt_dirty_run *runs = locked_runs(r, &max);
    if (!job) {
        collect_into(c, r, k, runs, max);
        return;
    }
    while (!atomic_load_explicit(&cr->done, memory_order_acquire)) {
        uint32_t j = atomic_load_explicit(&job->next, memory_order_relaxed);
        if (j <= k) {
            if (atomic_compare_exchange_weak_explicit(&job->next, &j, j + 1, memory_order_relaxed,
                                                      memory_order_relaxed))
                collect_into(c, r, j, runs, max);
            continue;
        }
        /* A worker has chunk k. */
        coh_workers *w = c->workers;
        pthread_mutex_lock(&w->lock);
        w->want = k;
        while (!atomic_load_explicit(&cr->done, memory_order_acquire))
            pthread_cond_wait(&w->done_cond, &w->lock);
        w->want = UINT32_MAX;
        pthread_mutex_unlock(&w->lock);
    }
}

/* ---- create, destroy ------------------------------------------------------------------ */

/* Whether range `id` may track pages. The signal tracker write-protects the
 * memory and counts on the interposer (libmemtrack_preload.so) for what the
 * application does to it: without it, a read(2) into the memory fails with
 * EFAULT, the application's own SIGSEGV handler takes memtrack's faults,
 * its madvise goes unseen. The application would notice, so such memory is
 * not protected at all and is uploaded whole at every sync instead (exact;
 * mt_coh_track_status says so). uffd needs none of that. */
static int page_tracking_ok(mt_coh *c, mt_range_id id)
{
    return mt_tracker_backend(c->tracker, id) != MT_TRACK_SIGNAL || mt_track_preload_status() == 1;
}

/* Chunk k's pages are not tracked: every sync takes it whole. */
static void take_whole_always(mt_coh *c, coh_root *r, uint32_t k)
{
    r->track->whole[k] = COH_WHOLE_ALWAYS;
    r->flags |= COH_ROOT_USE_CHAIN; /* from its first use (internal.h) */
    atomic_fetch_add_explicit(&c->track_whole_chunks, 1, memory_order_relaxed);
}

int mti_coh_track_create(mt_coh *c, coh_root *r)
{
    if (!c->tracker) {
        mt_tracker_opts to = {.backend = c->o.track_backend, .max_ranges = 16384,
                              .helper_threads = c->o.collect_helper};
        int rc = mt_tracker_create(&to, &c->tracker);
        if (rc)
            return rc;
    }
    coh_track *tr = calloc(1, sizeof *tr);
    if (!tr)
        return -ENOMEM;
    long ps = (long)mti_page_size();
    tr->page = (uint64_t)ps;
    tr->chunk = c->o.track_chunk;
    /* Only where uploads are pipelined over several chunks (a smaller root
     * is collected quickly anyway, and each range is one more collect per
     * sync and one more of the tracker's ranges), and whole pages. */
    tr->ramp = r->size >= 4 * tr->chunk && (tr->chunk >> COH_RAMP) >= tr->page &&
               (tr->chunk >> COH_RAMP) % tr->page == 0;
    tr->nchunks = mti_coh_chunk_of(tr, r->size - 1) + 1;
    tr->ids = calloc(tr->nchunks, sizeof *tr->ids);
    tr->whole = calloc(tr->nchunks, 1);
    tr->whole_epoch = calloc(tr->nchunks, sizeof *tr->whole_epoch);
    tr->res = calloc(tr->nchunks, sizeof *tr->res);
    pthread_mutex_init(&tr->lock, NULL);
    pthread_mutex_init(&tr->ilock, NULL);
    r->track = tr;
    if (!tr->ids || !tr->whole || !tr->whole_epoch || !tr->res)
        return -ENOMEM; /* the caller kills r, which frees tr */
    char *base = (char *)(uintptr_t)r->inst[0]->addr;
    mt_range_opts ro = {.backend = c->o.track_backend};
    /* Shared or file-backed memory (the application's host pointer) also
     * changes through its other mappings, which no tracker sees: such
     * chunks are taken whole. Asked per chunk only when the whole asks yes;
     * where the kernel's list cannot be read, whole too (exact first). */
    int alias = mt_track_aliasable(base, r->size) != 0;
    for (uint32_t k = 0; k < tr->nchunks; k++) {
        uint64_t off = mti_coh_chunk_start(tr, k);
        uint64_t len = mti_coh_chunk_end(tr, k, r->size) - off;
        if (alias && mt_track_aliasable(base + off, len) != 0) {
            take_whole_always(c, r, k);
            continue;
        }
        int rc = mt_tracker_add(c->tracker, base + off, len, &ro, &tr->ids[k]);
        if (rc)
            return rc;
        if (!page_tracking_ok(c, tr->ids[k])) {
            mt_tracker_remove(c->tracker, tr->ids[k]);
            tr->ids[k] = 0;
            take_whole_always(c, r, k);
        }
    }
    return 0;
}

void mti_coh_track_destroy(mt_coh *c, coh_root *r)
{
    coh_track *tr = r->track;
    if (!tr)
        return;
    if (c) { /* killing the root: stop tracking; engines may still absorb */
        pthread_mutex_lock(&tr->lock);
        for (uint32_t k = 0; k < tr->nchunks && tr->ids; k++)
            if (tr->ids[k])
                mt_tracker_remove(c->tracker, tr->ids[k]);
        tr->dead = 1;
        pthread_mutex_unlock(&tr->lock);
        return;
    }
    /* The root's last reference: nothing uses tr any more. */
    for (uint32_t k = 0; k < tr->nchunks && tr->res; k++)
        free(tr->res[k].v);
    free(tr->res);
    free(tr->ids);
    free(tr->whole);
    free(tr->whole_epoch);
    free(tr->stash);
    free(tr->scratch);
    pthread_mutex_destroy(&tr->lock);
    pthread_mutex_destroy(&tr->ilock);
    free(tr);
    r->track = NULL;
}

/* ---- absorbing memtrack's own downloads (engine threads) -------------------------------- */

/* Collects chunk k and stashes its written pages that no in-flight download
 * (this one included) writes: those are the host's. */
static void absorb_chunk(mt_coh *c, coh_root *r, uint32_t k)
{
    coh_track *tr = r->track;
    if (tr->whole[k] == COH_WHOLE_ALWAYS)
        return; /* every sync takes it whole anyway */
    coh_range *v = NULL;
    size_t nv = 0, cap = 0, max;
    mt_dirty_run *runs = locked_runs(r, &max);
    int whole = collect_chunk(c, r, k, runs, max, &v, &nv, &cap) ||
                mti_coh_track_drop_inflight(tr, &v, &nv, &cap);
    for (size_t q = 0; q < nv && !whole; q++)
        whole = push_range(&tr->stash, &tr->nstash, &tr->capstash, v[q].a, v[q].b) != 0;
    /* No memory to tell them apart: the next sync takes the whole chunk
     * where the host holds it (an upload too many, nothing lost). */
    if (whole)
        tr->whole[k] = COH_WHOLE_ONCE;
    free(v);
}

void mti_coh_track_inflight(coh_root *r, coh_cmd *cmd)
{
    coh_track *tr = r->track;
    pthread_mutex_lock(&tr->ilock);
    cmd->aprev = NULL;
    cmd->anext = tr->inflight;
    if (tr->inflight)
        tr->inflight->aprev = cmd;
    tr->inflight = cmd;
    cmd->inflight = 1;
    pthread_mutex_unlock(&tr->ilock);
}

static void inflight_remove(coh_track *tr, coh_cmd *cmd)
{
    pthread_mutex_lock(&tr->ilock);
    if (cmd->inflight) {
        if (cmd->aprev)
            cmd->aprev->anext = cmd->anext;
        else
            tr->inflight = cmd->anext;
        if (cmd->anext)
            cmd->anext->aprev = cmd->aprev;
        cmd->inflight = 0;
    }
    pthread_mutex_unlock(&tr->ilock);
}

void mti_coh_track_absorb(coh_root *r, coh_cmd *cmd)
{
    coh_track *tr = r->track;
    const mt_coh_seg *segs = cmd->segs;
    uint32_t n = cmd->nsegs;
    if (!tr)
        return;
    pthread_mutex_lock(&tr->lock);
    if (!tr->dead) {
        int have = 0;
        uint32_t last = 0;
        for (uint32_t i = 0; i < n; i++) {
            uint32_t s0 = mti_coh_chunk_of(tr, segs[i].dst);
            uint32_t s1 = mti_coh_chunk_of(tr, segs[i].dst + segs[i].len - 1);
            for (uint32_t k = s0; k <= s1; k++) {
                if (have && k <= last)
                    continue;
                have = 1;
                last = k;
                absorb_chunk(r->ctx, r, k);
            }
        }
    }
    /* After the collection (its pages were dropped above), before the lock
     * lets the planner collect again. */
    inflight_remove(tr, cmd);
    pthread_mutex_unlock(&tr->lock);
}
