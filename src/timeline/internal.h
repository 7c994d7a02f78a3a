/* timeline internals shared by timeline.c (values, waits) and defer.c
 * (deferred callbacks).
 *
 * Invariants:
 *  - `completed` only grows; it is written by CAS (several signallers may
 *    race) and read lock-free.
 *  - A waiter registers in `waiters` before its last check of `completed`
 *    under `lock`; a signaller looks at `waiters` after publishing the new
 *    value. Both sides are seq_cst, so at least one of them sees the other
 *    (Dekker): either the waiter sees the value or the signaller wakes it.
 *  - Loss and cancellation change under `lock` + broadcast, so a waiter
 *    between its check and its sleep cannot miss them. */
#ifndef MT_TIMELINE_INTERNAL_H
#define MT_TIMELINE_INTERNAL_H

#include <pthread.h>
#include <stdalign.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "memtrack/timeline.h"

typedef struct mt_deferred {
    uint64_t value;
    uint64_t seq; /* queue order: ties on value run first-queued first */
    mt_timeline_fn fn;
    void *ctx;
} mt_deferred;

struct mt_timeline {
    /* Hot, read by every query: its own cache line. */
    alignas(64) _Atomic uint64_t completed;
    _Atomic uint32_t waiters; /* threads inside mt_timeline_wait's slow path */
    _Atomic int lost;         /* 0 or the loss code */
    /* Smallest queued callback value (UINT64_MAX when none): lets poll and
     * signal skip the lock when nothing is ready. Written under `lock`. */
    _Atomic uint64_t next_deferred;

    alignas(64) unsigned bits; /* counter width for signal_raw */
    uint32_t flags;
    pthread_mutex_t lock;
    pthread_cond_t cond;
    uint64_t cancel_gen; /* bumped by mt_timeline_cancel; under lock */

    /* Deferred callbacks: a binary min-heap on (value, seq), under lock. */
    mt_deferred *heap;
    size_t nheap, capheap;
    uint64_t next_seq;
    int draining; /* a thread is running callbacks (one at a time keeps the order) */
};

/* The completed value and the loss code, for both files: defer.c reads them
 * here rather than through timeline.c's API, so that timeline.c (which
 * drains and polls callbacks) and defer.c do not call each other. */
static inline uint64_t mti_tl_completed(const mt_timeline *tl)
{
    /* acquire: pairs with the signaller's seq_cst (release) CAS, so the
     * device's writes before the signal are visible to the caller. */
    return atomic_load_explicit(&((mt_timeline *)tl)->completed, memory_order_acquire);
}

static inline int mti_tl_lost(const mt_timeline *tl)
{
    return atomic_load_explicit(&((mt_timeline *)tl)->lost, memory_order_acquire);
}

/* Runs every queued callback regardless of its value (destroy). */
void mti_timeline_drain_all(mt_timeline *tl);

#endif
