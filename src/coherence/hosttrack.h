/* Tracked host memory shared by hosttrack.c (collection, workers, in-flight
 * downloads) and hostsync.c (the planner's sync above transfer.c). */
#ifndef MT_COHERENCE_HOSTTRACK_H
#define MT_COHERENCE_HOSTTRACK_H

#include "internal.h"

typedef struct chunk_res {
    coh_range *v;
    size_t n, cap;
    int all;              /* out of memory while collecting: the whole chunk is dirty */
    _Atomic int done;
} chunk_res;

enum { COH_WHOLE_ALWAYS = 1, COH_WHOLE_ONCE = 2 };

struct coh_track {
    pthread_mutex_t lock; /* collections and the stash */
    int dead;             /* the root was released: its ranges are gone */
    uint64_t chunk;
    uint32_t nchunks;
    /* The first `chunk` bytes are COH_RAMP + 1 smaller ranges (see
     * mti_coh_chunk_start); 0 when a chunk is too small to split. */
    int ramp;
    mt_range_id *ids; /* 0: chunk not page-tracked (COH_WHOLE_ALWAYS) */
    /* Per chunk (under `lock`, or by the collecting thread during a sync):
     * COH_WHOLE_ALWAYS when its pages are not tracked, so every sync takes
     * it whole, as written wherever the host holds it (the signal tracker
     * without the interposer, which would break the application's kernel
     * writes and signal handlers there; memory the application unmapped or
     * remapped); COH_WHOLE_ONCE for the next sync only (an absorption that
     * ran out of memory). Exact, not minimal. */
    uint8_t *whole;
    /* Per COH_WHOLE_ALWAYS chunk: the enqueue (c->sync_epoch) that last
     * applied it. Its later arguments must not apply it again: that would
     * take back the validity the fetch for an earlier argument just gave
     * the target, and copy the same bytes twice. */
    uint64_t *whole_epoch;
    chunk_res *res;
    coh_range *stash;
    size_t nstash, capstash;
    uint64_t page;
    /* Run array for collections by whoever holds `lock` (the planner, an
     * absorbing engine thread; workers have their own): allocated once,
     * not per chunk. */
    mt_dirty_run *scratch;
    size_t nscratch;
    /* Downloads into the memory issued and not yet completed (a leaf lock:
     * taken under `lock` or the planner's, never the other way). */
    pthread_mutex_t ilock;
    coh_cmd *inflight;
    /* The last sync (under `lock`): bytes found written, of bytes collected.
     * Picks who scans the next one (hostsync.c). */
    uint64_t last_dirty, last_span;
};

/* Chunks. An upload's copy can start only once its first chunk is collected,
 * and the copy engine waits for that first scan (a 16 MiB chunk, 10% of it
 * written, took 130 us on the GPU machine, alone): so the first chunk of a
 * tracked root of four chunks or more (`ramp`, hosttrack.c) is split in
 * ranges of 1/16, 1/16, 1/8, 1/4 and 1/2 of it,
 * whose scans take about as long as copying what the range before them
 * held, and every later chunk is whole. Chunk k covers
 * [mti_coh_chunk_start(k), mti_coh_chunk_start(k + 1)), cut at the root's
 * size. */
#define COH_RAMP 4

static inline uint64_t mti_coh_chunk_start(const coh_track *tr, uint32_t k)
{
    if (!tr->ramp)
        return (uint64_t)k * tr->chunk;
    if (k == 0)
        return 0;
    if (k <= COH_RAMP)
        return tr->chunk >> (COH_RAMP + 1 - k);
    return (uint64_t)(k - COH_RAMP) * tr->chunk;
}

static inline uint32_t mti_coh_chunk_of(const coh_track *tr, uint64_t off)
{
    if (!tr->ramp)
        return (uint32_t)(off / tr->chunk);
    if (off >= tr->chunk)
        return (uint32_t)(off / tr->chunk) + COH_RAMP;
    uint32_t k = 0;
    for (uint64_t lim = tr->chunk >> COH_RAMP; k < COH_RAMP && off >= lim; lim <<= 1)
        k++;
    return k;
}

/* Where chunk k of a root of `size` bytes ends. */
static inline uint64_t mti_coh_chunk_end(const coh_track *tr, uint32_t k, uint64_t size)
{
    uint64_t e = mti_coh_chunk_start(tr, k + 1);
    return e < size ? e : size;
}

/* A collection job the worker threads help with. */
typedef struct coh_job {
    mt_coh *c;
    coh_root *r;
    uint32_t k1;          /* last chunk */
    _Atomic uint32_t next;/* next chunk to claim */
} coh_job;

struct coh_workers {
    pthread_t *th;
    uint32_t n;
    pthread_mutex_t lock;
    pthread_cond_t cond;      /* workers: a job or stop */
    pthread_cond_t done_cond; /* planner: the chunk it waits for done, or workers left */
    coh_job *job;
    uint64_t gen;
    uint32_t active;
    int stop;
    /* The chunk the planner sleeps on (under `lock`; UINT32_MAX: none): a
     * worker wakes it for that chunk only, not for every chunk done. */
    uint32_t want;
};

/* Removes from the sorted, disjoint ranges *v the pages that in-flight
 * downloads write. 0 or -ENOMEM (then *v is unchanged). Caller holds
 * tr->lock. */
int mti_coh_track_drop_inflight(coh_track *tr, coh_range **v, size_t *n, size_t *cap);
/* Waits until chunk k of r is collected (the planner, holding r's track
 * lock), collecting unclaimed chunks of `job` up to k (NULL: k alone)
 * meanwhile. */
void mti_coh_track_await(mt_coh *c, coh_root *r, coh_job *job, uint32_t k);

#endif
