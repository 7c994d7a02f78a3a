/* Timeline values: create/destroy, signal (plain and from a wrapping device
 * counter), interruptible waits, cancellation and device loss. */
#include <errno.h>
#include <stdlib.h>

#include "internal.h"
#include "../common/clock.h"

int mt_timeline_create(const mt_timeline_opts *opts, mt_timeline **out)
{
    mt_timeline_opts o = {0};
    if (opts)
        o = *opts;
    if (!out || o.counter_bits > 64)
        return -EINVAL;
    mt_timeline *tl = aligned_alloc(64, sizeof *tl);
    if (!tl)
        return -ENOMEM;
    *tl = (mt_timeline){0};
    atomic_init(&tl->completed, o.initial);
    atomic_init(&tl->waiters, 0);
    atomic_init(&tl->lost, 0);
    atomic_init(&tl->next_deferred, UINT64_MAX);
    tl->bits = o.counter_bits ? o.counter_bits : 64;
    tl->flags = o.flags;
    int rc = mti_cond_init_monotonic(&tl->cond);
    if (rc) {
        free(tl);
        return rc;
    }
    pthread_mutex_init(&tl->lock, NULL);
    *out = tl;
    return 0;
}

void mt_timeline_destroy(mt_timeline *tl)
{
    if (!tl)
        return;
    mti_timeline_drain_all(tl);
    pthread_cond_destroy(&tl->cond);
    pthread_mutex_destroy(&tl->lock);
    free(tl->heap);
    free(tl);
}

uint64_t mt_timeline_completed(const mt_timeline *tl) { return mti_tl_completed(tl); }

uint64_t mt_timeline_completed_cb(void *tl)
{
    return mt_timeline_completed(tl);
}

int mt_timeline_status(const mt_timeline *tl) { return mti_tl_lost(tl); }

static void wake_waiters(mt_timeline *tl)
{
    /* seq_cst: the other half of the Dekker pair with the waiter's seq_cst
     * increment of `waiters` (see internal.h). Skips the lock when nobody
     * sleeps, which is the common case for a device signalling every fence. */
    if (atomic_load_explicit(&tl->waiters, memory_order_seq_cst) == 0)
        return;
    pthread_mutex_lock(&tl->lock);
    pthread_cond_broadcast(&tl->cond);
    pthread_mutex_unlock(&tl->lock);
}

int mt_timeline_signal(mt_timeline *tl, uint64_t value)
{
    int lost = atomic_load_explicit(&tl->lost, memory_order_acquire);
    if (lost)
        return lost;
    uint64_t cur = atomic_load_explicit(&tl->completed, memory_order_relaxed);
    do {
        if (value <= cur)
            return 0;
        /* seq_cst: releases the signaller's writes with the value, and orders
         * the store before the load of `waiters` in wake_waiters. */
    } while (!atomic_compare_exchange_weak_explicit(&tl->completed, &cur, value,
                                                    memory_order_seq_cst, memory_order_relaxed));
    wake_waiters(tl);
    if (tl->flags & MT_TIMELINE_CALLBACKS_ON_SIGNAL)
        mt_timeline_poll(tl);
    return 0;
}

int mt_timeline_signal_raw(mt_timeline *tl, uint64_t raw)
{
    /* Extending against the completed value is right while fewer than
     * 2^(bits-1) values are in flight: the true value lies in
     * [completed, completed + 2^(bits-1)). A concurrent signal can only raise
     * `completed`, and signal() ignores a value below it. */
    uint64_t cur = atomic_load_explicit(&tl->completed, memory_order_relaxed);
    uint64_t v = mt_fence_extend(cur, raw, tl->bits);
    if ((int64_t)(v - cur) <= 0)
        return mt_timeline_status(tl); /* stale or repeated read */
    return mt_timeline_signal(tl, v);
}

/* The slow path of a wait, under tl->lock. */
static int wait_locked(mt_timeline *tl, uint64_t value, const struct timespec *deadline)
{
    uint64_t gen = tl->cancel_gen;
    int timed_out = 0;
    for (;;) {
        /* seq_cst: second half of the Dekker pair with wake_waiters. */
        if (atomic_load_explicit(&tl->completed, memory_order_seq_cst) >= value)
            return 0;
        int lost = atomic_load_explicit(&tl->lost, memory_order_acquire);
        if (lost)
            return lost;
        if (tl->cancel_gen != gen)
            return MT_ECANCELED;
        if (timed_out)
            return MT_ETIMEDOUT;
        timed_out = mti_cond_wait_until(&tl->cond, &tl->lock, deadline);
    }
}

int mt_timeline_wait(mt_timeline *tl, uint64_t value, int64_t timeout_ns)
{
    if (mt_timeline_completed(tl) >= value)
        return 0;
    int lost = mt_timeline_status(tl);
    if (lost)
        return lost;
    if (timeout_ns == 0)
        return MT_ETIMEDOUT;
    struct timespec deadline;
    if (timeout_ns > 0)
        mti_deadline_after(&deadline, timeout_ns);
    pthread_mutex_lock(&tl->lock);
    atomic_fetch_add_explicit(&tl->waiters, 1, memory_order_seq_cst);
    int rc = wait_locked(tl, value, timeout_ns > 0 ? &deadline : NULL);
    atomic_fetch_sub_explicit(&tl->waiters, 1, memory_order_relaxed);
    pthread_mutex_unlock(&tl->lock);
    return rc;
}

void mt_timeline_cancel(mt_timeline *tl)
{
    pthread_mutex_lock(&tl->lock);
    tl->cancel_gen++;
    pthread_cond_broadcast(&tl->cond);
    pthread_mutex_unlock(&tl->lock);
}

void mt_timeline_lose(mt_timeline *tl, int code)
{
    if (code >= 0)
        code = MT_EDEVLOST;
    int expected = 0;
    /* release: a thread that sees the loss also sees what the loser did
     * before (e.g. the device's last state). First code wins. */
    atomic_compare_exchange_strong_explicit(&tl->lost, &expected, code, memory_order_acq_rel,
                                            memory_order_acquire);
    /* Under the lock, so that a waiter between its check and its sleep
     * cannot miss the broadcast. */
    pthread_mutex_lock(&tl->lock);
    pthread_cond_broadcast(&tl->cond);
    pthread_mutex_unlock(&tl->lock);
}
