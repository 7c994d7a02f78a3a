/* Tracked host memory, the planner's side: before it reads or changes the
 * validity of a tracked range, the planner collects the chunks covering it
 * (hosttrack.c, with the worker threads), applies the host writes found and,
 * for an upload, plans the fetch chunk by chunk (transfer.c) so that copies
 * start while later chunks are still being collected. Apart from
 * hosttrack.c because transfer.c registers the downloads it issues there:
 * this file sits above transfer.c, hosttrack.c below it. */
#include <stdlib.h>

#include "hosttrack.h"
#include "probe.h"

/* ---- sync (planner) -------------------------------------------------------------------- */

/* Applies host writes: the ranges become valid at the host only. */
static void apply(mt_coh *c, coh_root *r, const coh_range *v, size_t n, uint64_t ca, uint64_t cb)
{
    if (!n)
        return;
    uint64_t bytes = 0;
    for (size_t i = 0; i < n; i++)
        bytes += v[i].b - v[i].a;
    c->st_dirty += bytes;
    r->version++;
    if (mti_coh_runs_set_many(&r->runs, v, n, COH_BIT(MT_COH_HOST)) == 0)
        return;
    /* No memory for the precise update: the whole span is host-only (room
     * for this was reserved before collecting). */
    mti_coh_runs_update(&r->runs, v[0].a > ca ? v[0].a : ca, v[n - 1].b < cb ? v[n - 1].b : cb, 0,
                    COH_BIT(MT_COH_HOST));
}

/* Applies a chunk reported whole (not page-tracked, or no memory to tell
 * its pages apart): host writes wherever the host holds the latest content,
 * and nowhere else. The host may only write what it holds (a map gets it),
 * and bytes a device wrote since the host last had them must stay newer
 * than the host's copy: marking those host-only would lose the device's
 * writes. The runs are found again by offset after each update (it may
 * merge them); only the chunk's ends can split one (room reserved). */
static void apply_whole(mt_coh *c, coh_root *r, uint64_t ca, uint64_t cb)
{
    const uint64_t host = COH_BIT(MT_COH_HOST);
    uint64_t bytes = 0;
    /* From now on the uploads this causes wait for the devices' users
     * (set at creation where every chunk is whole; here for memory that
     * became whole later: users pending before this are not ordered). */
    r->flags |= COH_ROOT_USE_CHAIN;
    for (uint64_t pos = ca; pos < cb;) {
        uint32_t i = mti_coh_runs_find(&r->runs, pos);
        uint64_t end = mti_coh_run_end(&r->runs, i), mask = r->runs.v[i].mask;
        if (end > cb)
            end = cb;
        if (mask & host) {
            bytes += end - pos;
            if (mask != host)
                mti_coh_runs_update(&r->runs, pos, end, 0, host);
        }
        pos = end;
    }
    if (bytes) {
        c->st_dirty += bytes;
        r->version++;
    }
}

static int range_cmp(const void *x, const void *y)
{
    const coh_range *p = x, *q = y;
    return p->a < q->a ? -1 : p->a > q->a;
}

int mti_coh_track_sync(mt_coh *c, coh_root *r, uint64_t a, uint64_t b, uint32_t to, coh_cmd *main,
                   const coh_range *need, int nneed, uint64_t epoch)
{
    coh_track *tr = r->track;
    if (a >= b)
        return 0;
    uint32_t k0 = mti_coh_chunk_of(tr, a), k1 = mti_coh_chunk_of(tr, b - 1);
    if (to != COH_NO_FETCH) /* an upload: the probes' unit of time */
        COH_PROBE("sync", k0, k1);
    int rc = mti_coh_runs_reserve(&r->runs, 2 * (k1 - k0 + 1) + 8);
    if (rc)
        return rc;
    pthread_mutex_lock(&tr->lock);
    /* Writes stashed by downloads' absorption first (older than any collected now). */
    if (tr->nstash) {
        qsort(tr->stash, tr->nstash, sizeof *tr->stash, range_cmp);
        size_t w = 0;
        for (size_t i = 1; i < tr->nstash; i++) {
            if (tr->stash[i].a <= tr->stash[w].b) {
                if (tr->stash[i].b > tr->stash[w].b)
                    tr->stash[w].b = tr->stash[i].b;
            } else
                tr->stash[++w] = tr->stash[i];
        }
        apply(c, r, tr->stash, w + 1, 0, r->size);
        tr->nstash = 0;
    }
    for (uint32_t k = k0; k <= k1; k++)
        atomic_store_explicit(&tr->res[k].done, 0, memory_order_relaxed);
    coh_job job = {.c = c, .r = r, .k1 = k1};
    atomic_init(&job.next, k0);
    coh_workers *w = c->workers;
    uint64_t dirty0 = c->st_dirty;
    /* With a running helper the scans are its; the planner alone takes the
     * results (about 2 us a chunk at 1% dirty): collecting threads of ours
     * waiting beside it would only be more CPUs for its TLB flushes to
     * interrupt, and more wake-ups. Unless the last sync of this memory
     * found more than a 32nd of it written: then the planner spends longer
     * on each chunk's results than the helper saves on the scans, and our
     * threads (which scan and apply side by side) finished first on the
     * H100 at 10% and 50% dirty in every run, the helper at 1%
     * (docs/benchmarks.md). Memory is rewritten much as it was last time. */
    int dense = tr->last_span && tr->last_dirty > tr->last_span / 32;
    int helper = c->o.collect_helper && !dense && mt_tracker_helper_status(c->tracker) == 1;
    int parallel = w && w->n && k1 > k0 && !helper;
    /* The helper scans every chunk at once, in its own process; the
     * collects below take its results in address order. */
    if (helper)
        (void)mt_tracker_collect_ahead(c->tracker, tr->ids + k0, k1 - k0 + 1);
    /* Our threads start at once, on the first chunks too. Before the first
     * chunk was split (hosttrack.h) the planner collected that 16 MiB alone
     * first, because every scan flushes the TLB of each CPU running a thread
     * of the process and with the others scanning beside it the chunk the
     * copy engine waits for took 2-3x as long. With a first chunk of 1 MiB
     * the copy starts early either way, and the others starting at once
     * deliver the next chunks sooner: 10% dirty 2.62-2.78 ms against
     * 2.83-2.98 with the planner alone first (H200, six alternations). */
    if (parallel) {
        pthread_mutex_lock(&w->lock);
        w->job = &job;
        w->gen++;
        pthread_cond_broadcast(&w->cond);
        pthread_mutex_unlock(&w->lock);
    }
    coh_builder bstore, *bld = NULL;
    if (to != COH_NO_FETCH) {
        bld = &bstore;
        mti_coh_fetch_begin(bld, c, r, to, main);
    }
    for (uint32_t k = k0; k <= k1; k++) {
        mti_coh_track_await(c, r, parallel ? &job : NULL, k);
        chunk_res *cr = &tr->res[k];
        COH_PROBE("chunk", k, cr->n);
        uint64_t ca = mti_coh_chunk_start(tr, k), cb = mti_coh_chunk_end(tr, k, r->size);
        /* Pages in-flight downloads write are theirs, not the host's. */
        if (!cr->all && mti_coh_track_drop_inflight(tr, &cr->v, &cr->n, &cr->cap))
            cr->all = 1;
        if (tr->whole[k] == COH_WHOLE_ONCE) { /* an absorption lost track of its pages */
            cr->all = 1;
            tr->whole[k] = 0;
        }
        if (tr->whole[k] == COH_WHOLE_ALWAYS) {
            /* Once per enqueue: between its arguments the host writes
             * nothing (it may not while the command is pending). */
            if (!epoch || tr->whole_epoch[k] != epoch)
                apply_whole(c, r, ca, cb);
            tr->whole_epoch[k] = epoch;
        } else if (cr->all)
            apply_whole(c, r, ca, cb);
        else
            apply(c, r, cr->v, cr->n, ca, cb);
        if (!bld || rc)
            continue;
        /* Plan this chunk's part of the needed ranges, mark it valid at the
         * target (these runs are final for this enqueue), maybe issue. */
        for (int i = 0; i < nneed && !rc; i++) {
            uint64_t s = need[i].a > ca ? need[i].a : ca;
            uint64_t e = need[i].b < cb ? need[i].b : cb;
            if (s >= e)
                continue;
            rc = mti_coh_fetch_add(bld, s, e);
            if (!rc && mti_coh_runs_reserve(&r->runs, 2) == 0)
                mti_coh_runs_update(&r->runs, s, e, ~0ull, COH_BIT(to));
        }
        if (!rc)
            rc = mti_coh_fetch_flush(bld, 0);
        COH_PROBE("planned", k, 0);
    }
    if (bld) {
        if (!rc)
            rc = mti_coh_fetch_flush(bld, 1);
        mti_coh_fetch_end(bld);
        /* The last piece goes to the copy engine now, not with the batch
         * at the end of the enqueue: the device is idle or finishing the
         * previous piece, and the rest of the enqueue needs no copy. */
        mti_coh_engine_kick(&c->dev[to]->eng[MT_COH_ENGINE_COPY]);
    }
    COH_PROBE("syncend", 0, 0);
    if (parallel) {
        pthread_mutex_lock(&w->lock);
        w->job = NULL;
        while (w->active)
            pthread_cond_wait(&w->done_cond, &w->lock);
        pthread_mutex_unlock(&w->lock);
    }
    tr->last_dirty = c->st_dirty - dirty0;
    tr->last_span = b - a;
    pthread_mutex_unlock(&tr->lock);
    return rc;
}
