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

struct coh_track {
    pthread_mutex_t lock; /* collections and the stash */
    int dead;             /* the root was released: its ranges are gone */
    uint64_t chunk;
    uint32_t nchunks;
    mt_range_id *ids;
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
