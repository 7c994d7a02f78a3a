/* The ring's slow paths: the producer waiting for space, the consumer
 * waiting for work, progress reports, doorbells, cancellation and loss.
 * The protocol is described in ring.h. */
#include "ring.h"

#include <errno.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>

#include "../common/clock.h"

int mti_ring_init(mt_ring *r, uint32_t cap, uint32_t ping, uint64_t spin_ns)
{
    memset(r, 0, sizeof *r);
    r->slots = aligned_alloc(64, (size_t)cap * sizeof *r->slots);
    if (!r->slots)
        return -ENOMEM;
    memset(r->slots, 0, (size_t)cap * sizeof *r->slots);
    r->cap = cap;
    r->mask = cap - 1;
    r->ping = ping;
    r->pub_mask = (ping < 32 ? ping : 32) - 1;
    r->spin_ns = spin_ns;
    atomic_init(&r->prod, 0);
    atomic_init(&r->cons, 0);
    atomic_init(&r->producer_wakeups, 0);
    atomic_init(&r->progress_reports, 0);
    atomic_init(&r->consumer_sleeps, 0);
    atomic_init(&r->prod_waiting, 0);
    atomic_init(&r->cons_sleeping, 0);
    atomic_init(&r->cons_interrupt, 0);
    atomic_init(&r->lost, 0);
    atomic_init(&r->cancel_gen, 0);
    int rc = mti_cond_init_monotonic(&r->space);
    if (!rc && (rc = mti_cond_init_monotonic(&r->work)) != 0)
        pthread_cond_destroy(&r->space);
    if (rc) {
        free(r->slots);
        return rc;
    }
    pthread_mutex_init(&r->lock, NULL);
    return 0;
}

void mti_ring_fini(mt_ring *r)
{
    pthread_cond_destroy(&r->space);
    pthread_cond_destroy(&r->work);
    pthread_mutex_destroy(&r->lock);
    free(r->slots);
}

void mti_ring_kick(mt_ring *r)
{
    /* release: as in mti_ring_put (commands since the last batch). */
    atomic_store_explicit(&r->prod, r->head, memory_order_release);
    /* seq_cst fence: orders that store of `prod` before the load of
     * `cons_sleeping` (Dekker with sleep_for_work). */
    atomic_thread_fence(memory_order_seq_cst);
    if (!atomic_load_explicit(&r->cons_sleeping, memory_order_relaxed))
        return;
    pthread_mutex_lock(&r->lock);
    pthread_cond_signal(&r->work);
    pthread_mutex_unlock(&r->lock);
    r->consumer_wakeups++;
}

/* Under r->lock. */
static int space_or_error(mt_ring *r, uint64_t gen)
{
    /* seq_cst fence: orders our store of prod_waiting before this load of
     * `cons` (Dekker with publish_progress). acquire: pairs with the
     * consumer's release store: it no longer reads the slots we reuse. */
    atomic_thread_fence(memory_order_seq_cst);
    r->cons_seen = atomic_load_explicit(&r->cons, memory_order_acquire);
    if (r->head - r->cons_seen < r->cap)
        return 0;
    int lost = atomic_load_explicit(&r->lost, memory_order_acquire);
    if (lost)
        return lost;
    if (atomic_load_explicit(&r->cancel_gen, memory_order_relaxed) != gen)
        return MT_ECANCELED;
    return 1;
}

/* The bounded poll before sleeping: calls ready() until it says yes or
 * spin_ns has passed. The caller re-checks what it waits for afterwards.
 *
 * Every 16 polls it yields the CPU: on a machine with more runnable threads
 * than cores the other side may be queued behind us on this very CPU, and a
 * poll that keeps the CPU only delays what it waits for (measured on a busy
 * 2-vCPU VM: 4 Mcmd/s with a plain poll, 75 with the yielding one). */
static void poll_bounded(mt_ring *r, int (*ready)(mt_ring *r, uint64_t gen), uint64_t gen)
{
    if (!r->spin_ns)
        return;
    uint64_t t0 = mti_now_ns();
    for (unsigned i = 1; !ready(r, gen); i++) {
        mti_cpu_relax();
        if ((i & 15) == 0) {
            if (mti_now_ns() - t0 >= r->spin_ns)
                return;
            sched_yield();
        }
    }
}

/* Producer's poll: a free slot, or a loss or cancel for the sleeping path
 * to report. acquire on `cons`: as in space_or_error. */
static int space_ready(mt_ring *r, uint64_t gen)
{
    r->cons_seen = atomic_load_explicit(&r->cons, memory_order_acquire);
    return r->head - r->cons_seen < r->cap ||
           atomic_load_explicit(&r->lost, memory_order_relaxed) ||
           atomic_load_explicit(&r->cancel_gen, memory_order_relaxed) != gen;
}

int mti_ring_wait_space(mt_ring *r)
{
    /* The consumer may have moved on without us reading it yet. */
    r->cons_seen = atomic_load_explicit(&r->cons, memory_order_acquire);
    if (r->head - r->cons_seen < r->cap)
        return 0;
    /* A cancel from here on releases this wait. */
    uint64_t gen = atomic_load_explicit(&r->cancel_gen, memory_order_relaxed);
    /* It may also be asleep on commands we never rang the doorbell for. */
    mti_ring_kick(r);
    poll_bounded(r, space_ready, gen);
    if (r->head - r->cons_seen < r->cap)
        return 0;
    pthread_mutex_lock(&r->lock);
    atomic_store_explicit(&r->prod_waiting, 1, memory_order_relaxed);
    int rc;
    while ((rc = space_or_error(r, gen)) == 1) {
        r->producer_sleeps++;
        pthread_cond_wait(&r->space, &r->lock);
    }
    atomic_store_explicit(&r->prod_waiting, 0, memory_order_relaxed);
    pthread_mutex_unlock(&r->lock);
    return rc;
}

/* Consumer: makes `tail` visible to the producer and wakes it if it sleeps. */
static void publish_progress(mt_ring *r)
{
    if (r->reported == r->tail)
        return;
    r->reported = r->tail;
    /* release: pairs with the producer's acquire load of `cons`. */
    atomic_store_explicit(&r->cons, r->tail, memory_order_release);
    atomic_fetch_add_explicit(&r->progress_reports, 1, memory_order_relaxed);
    /* seq_cst fence: Dekker with space_or_error (store cons; load flag). */
    atomic_thread_fence(memory_order_seq_cst);
    if (!atomic_load_explicit(&r->prod_waiting, memory_order_relaxed))
        return;
    pthread_mutex_lock(&r->lock);
    pthread_cond_signal(&r->space);
    pthread_mutex_unlock(&r->lock);
    atomic_fetch_add_explicit(&r->producer_wakeups, 1, memory_order_relaxed);
}

static void sleep_for_work(mt_ring *r)
{
    pthread_mutex_lock(&r->lock);
    atomic_store_explicit(&r->cons_sleeping, 1, memory_order_relaxed);
    /* seq_cst fence: orders the flag before re-reading `prod` (Dekker with
     * mti_ring_kick). acquire: pairs with the producer's release of `prod`. */
    atomic_thread_fence(memory_order_seq_cst);
    r->prod_seen = atomic_load_explicit(&r->prod, memory_order_acquire);
    if (r->tail == r->prod_seen && !atomic_load_explicit(&r->lost, memory_order_relaxed) &&
        !atomic_load_explicit(&r->cons_interrupt, memory_order_relaxed)) {
        atomic_fetch_add_explicit(&r->consumer_sleeps, 1, memory_order_relaxed);
        pthread_cond_wait(&r->work, &r->lock);
    }
    atomic_store_explicit(&r->cons_sleeping, 0, memory_order_relaxed);
    pthread_mutex_unlock(&r->lock);
}

/* Consumer's poll: work, or a loss or interrupt for the consume loop to
 * look at. acquire on `prod`: as in mti_ring_consume. */
static int work_ready(mt_ring *r, uint64_t unused)
{
    (void)unused;
    r->prod_seen = atomic_load_explicit(&r->prod, memory_order_acquire);
    return r->tail != r->prod_seen || atomic_load_explicit(&r->lost, memory_order_relaxed) ||
           atomic_load_explicit(&r->cons_interrupt, memory_order_relaxed);
}

long mti_ring_consume(mt_ring *r, const mt_cmd **cmds)
{
    for (;;) {
        int lost = atomic_load_explicit(&r->lost, memory_order_acquire);
        if (lost)
            return lost;
        if (r->tail == r->prod_seen) /* acquire: pairs with mti_ring_put's release */
            r->prod_seen = atomic_load_explicit(&r->prod, memory_order_acquire);
        if (r->tail != r->prod_seen)
            break;
        /* Out of work: report everything, a producer may wait for it. */
        publish_progress(r);
        /* Load before exchanging: a locked exchange would write the line on
         * every idle moment. */
        if (atomic_load_explicit(&r->cons_interrupt, memory_order_relaxed) &&
            atomic_exchange_explicit(&r->cons_interrupt, 0, memory_order_acq_rel))
            return 0;
        poll_bounded(r, work_ready, 0);
        if (r->tail == r->prod_seen)
            sleep_for_work(r); /* returns at once on loss or interrupt */
    }
    uint64_t n = r->prod_seen - r->tail;
    uint64_t to_wrap = r->cap - (r->tail & r->mask);
    /* Never past the next ping boundary, so that mti_ring_consumed reports
     * progress there even when the backend works in large batches. */
    uint64_t to_ping = r->ping - (r->tail & (r->ping - 1));
    if (n > to_wrap)
        n = to_wrap;
    if (n > to_ping)
        n = to_ping;
    *cmds = &r->slots[r->tail & r->mask];
    return (long)n;
}

void mti_ring_consumed(mt_ring *r, uint64_t n)
{
    uint64_t old = r->tail;
    r->tail += n;
    /* The ping: progress is reported when tail enters a new ping block. */
    if ((old ^ r->tail) & ~(uint64_t)(r->ping - 1))
        publish_progress(r);
}

void mti_ring_wake_consumer(mt_ring *r)
{
    /* Stored before taking the lock the sleeper checks it under. */
    atomic_store_explicit(&r->cons_interrupt, 1, memory_order_release);
    pthread_mutex_lock(&r->lock);
    pthread_cond_signal(&r->work);
    pthread_mutex_unlock(&r->lock);
}

void mti_ring_cancel(mt_ring *r)
{
    pthread_mutex_lock(&r->lock);
    /* Under the lock: a sleeper checks it between its check and its sleep. */
    atomic_fetch_add_explicit(&r->cancel_gen, 1, memory_order_relaxed);
    pthread_cond_broadcast(&r->space);
    pthread_mutex_unlock(&r->lock);
}

void mti_ring_lose(mt_ring *r, int code)
{
    int expected = 0;
    /* release: whoever sees the loss sees what the loser did before it. */
    atomic_compare_exchange_strong_explicit(&r->lost, &expected, code, memory_order_acq_rel,
                                            memory_order_acquire);
    pthread_mutex_lock(&r->lock);
    pthread_cond_broadcast(&r->space);
    pthread_cond_broadcast(&r->work);
    pthread_mutex_unlock(&r->lock);
}
