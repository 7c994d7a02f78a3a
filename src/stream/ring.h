/* The single-producer single-consumer command ring behind a stream.
 *
 * Indices are 64-bit and only grow (slot = index & mask), so "full" is
 * head - cons == cap and there is no ABA. Each side publishes its index with
 * a release store and reads the other's with an acquire load:
 *  - prod (producer -> consumer): release publishes the slot contents.
 *  - cons (consumer -> producer): release says the consumer is done reading
 *    the slots before it, so the producer may overwrite them.
 * Both sides publish in batches, because every store to a line the other
 * core is polling costs a cache-line round trip: the producer every
 * `pub_batch` commands and at each doorbell (flush, fence, full ring); the
 * consumer when it crosses a ping_interval boundary or runs out of work, so
 * progress reports, and the producer's wake-ups, are one per ping_interval.
 *
 * A side that must wait first polls for up to `spin_ns`, yielding the CPU
 * as it goes, then sleeps. In steady state the other side is a batch (well
 * under a microsecond) from helping, while waking a sleeper costs a futex
 * round trip, and on a VM whose vCPU went idle tens of microseconds: without
 * the poll both sides fall into sleeping in turn. The poll is bounded in
 * time, never "until the ring drains".
 *
 * Sleeping uses one mutex and two condition variables, touched only on the
 * slow paths. Each sleeper announces itself in a flag, then re-checks the
 * other side's index; each waker publishes its index, then looks at the
 * flag. Both sides put a seq_cst fence between their store and their load
 * (Dekker), so a sleeper either sees the new index or is seen and signalled
 * (under the mutex, so the signal cannot fall between check and sleep). */
#ifndef MT_STREAM_RING_H
#define MT_STREAM_RING_H

#include <pthread.h>
#include <stdalign.h>
#include <stdatomic.h>
#include <stdint.h>

#include "memtrack/stream.h"

typedef struct mt_ring {
    /* Read-only after init. */
    mt_cmd *slots;
    uint32_t cap, mask, ping;
    uint32_t pub_mask; /* publish prod when head & pub_mask == 0 */
    uint64_t spin_ns;  /* poll this long before sleeping; 0 = sleep at once */
    /* 0 or the loss code. Written once, read by the producer on every
     * command: it lives here, with the read-only fields, and not with the
     * sleep flags below that the other side keeps writing. */
    _Atomic int lost;

    /* Producer-private. */
    alignas(64) uint64_t head; /* next index to write */
    uint64_t cons_seen;        /* consumer progress as last read */
    uint64_t producer_sleeps;
    uint64_t consumer_wakeups;

    /* Written by the producer only. */
    alignas(64) _Atomic uint64_t prod;

    /* Written by the consumer only. */
    alignas(64) _Atomic uint64_t cons;

    /* Consumer-private; the counters are atomic because stats read them. */
    alignas(64) uint64_t tail; /* next index to read */
    uint64_t prod_seen;        /* producer index as last read */
    uint64_t reported;         /* last value stored to `cons` */
    _Atomic uint64_t producer_wakeups;
    _Atomic uint64_t progress_reports;
    _Atomic uint64_t consumer_sleeps;

    /* Slow paths. */
    alignas(64) pthread_mutex_t lock;
    pthread_cond_t space; /* producer waits here for free slots */
    pthread_cond_t work;  /* consumer waits here for commands */
    _Atomic uint32_t prod_waiting;
    _Atomic uint32_t cons_sleeping;
    _Atomic uint32_t cons_interrupt;
    /* Bumped by cancel under `lock`; read by the producer before it polls,
     * so a cancel during the poll is not missed. */
    _Atomic uint64_t cancel_gen;
} mt_ring;

int mti_ring_init(mt_ring *r, uint32_t cap, uint32_t ping, uint64_t spin_ns);
void mti_ring_fini(mt_ring *r);

/* Producer: sleeps until a slot is free. 0, MT_ECANCELED or the loss code. */
int mti_ring_wait_space(mt_ring *r);
/* Producer: publishes everything written and rings the doorbell if the
 * consumer sleeps. */
void mti_ring_kick(mt_ring *r);

/* Producer: writes one command. 0, MT_ECANCELED or the loss code. */
static inline int mti_ring_put(mt_ring *r, const mt_cmd *cmd)
{
    /* relaxed: an early-out only; the waits below re-check under the lock. */
    int lost = atomic_load_explicit(&r->lost, memory_order_relaxed);
    if (__builtin_expect(lost != 0, 0))
        return lost;
    if (__builtin_expect(r->head - r->cons_seen >= r->cap, 0)) {
        int rc = mti_ring_wait_space(r);
        if (rc)
            return rc;
    }
    r->slots[r->head & r->mask] = *cmd;
    r->head++;
    if ((r->head & r->pub_mask) == 0) {
        /* release: pairs with the consumer's acquire load of prod: the
         * slots' contents are visible before the index that covers them. */
        atomic_store_explicit(&r->prod, r->head, memory_order_release);
        /* pub_mask + 1 divides ping, so every ping boundary lands here. */
        if ((r->head & (r->ping - 1)) == 0)
            mti_ring_kick(r);
    }
    return 0;
}

/* Consumer side and any-thread controls, as in stream.h. */
long mti_ring_consume(mt_ring *r, const mt_cmd **cmds);
void mti_ring_consumed(mt_ring *r, uint64_t n);
void mti_ring_wake_consumer(mt_ring *r);
void mti_ring_cancel(mt_ring *r);
void mti_ring_lose(mt_ring *r, int code);

#endif
