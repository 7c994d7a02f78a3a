/* The chunk being filled and its hand-off: starting a chunk in a buffer,
 * sealing it for the compressor threads (writer_pool.c) and taking the next
 * buffer, also from the first compressor when the seal interval passes with
 * nobody appending. Used by the callers' side (writer.c), open
 * (writer_open.c) and the pool; calls none of them. See writer.h for the
 * states and locks. */
#define _GNU_SOURCE
#include <errno.h>
#include <stdlib.h>
#include <time.h>

#include "../common/clock.h"
#include "writer.h"

/* Makes buf the chunk being filled, number next_seq. Called with `lock`
 * held. Release: the emergency flush that sees FILLING sees seq, buf and
 * submits_before. */
void mti_wseal_fill_start(mt_trace_writer *w, uint8_t *buf)
{
    mt_wslot *s = &w->ring[w->next_seq % w->nslots];
    s->buf = buf;
    s->submits_before = w->submits_sealed;
    atomic_store_explicit(&s->seq, w->next_seq, memory_order_relaxed);
    atomic_store_explicit(&s->committed, 0, memory_order_relaxed);
    atomic_store_explicit(&s->state, MT_SLOT_FILLING, memory_order_release);
    w->cur = s;
    w->cur_len = w->cur_nrecords = w->cur_nsubmits = 0;
    w->next_seq++;
}

/* Waits for `space` (a buffer freed, a chunk written, an error). The
 * emergency flush cannot signal a condition variable (not async-signal-safe)
 * when it stops the writer, so waiters also look at the error every 10 ms.
 * Called with qlock held. */
void mti_wseal_wait_space(mt_trace_writer *w)
{
    struct timespec t;
    mti_deadline_after(&t, 10000000);
    mti_cond_wait_until(&w->space, &w->qlock, &t);
}

/* A buffer for the next chunk: a free one, a new one while fewer than
 * nslots exist, else wait for the compressors. Called with qlock held. */
static int take_buffer(mt_trace_writer *w, uint8_t **out)
{
    int counted = 0;
    for (;;) {
        int e = mti_writer_error(w);
        if (e)
            return e;
        if (w->nfree) {
            *out = w->pool[--w->nfree];
            return 0;
        }
        /* Buffers in use cannot exceed the ring, so the next slot is free. */
        if (w->nbufs < w->nslots) {
            uint8_t *b = malloc(MT_CHUNK_HEADER_SIZE + w->buf_cap);
            if (b) {
                w->nbufs++;
                *out = b;
                return 0;
            }
            if (w->nbufs == w->nfree)
                return -ENOMEM; /* none in flight would come back */
        }
        if (mti_writer_in_forked_child(w))
            return -ECHILD;
        if (!counted)
            w->stalls++, counted = 1;
        mti_wseal_wait_space(w);
    }
}

/* Queues the current chunk (if it holds anything) and starts the next one.
 * Called with `lock` held. */
int mti_wseal(mt_trace_writer *w)
{
    mt_wslot *s = w->cur;
    if (!s || w->cur_nrecords == 0)
        return mti_writer_error(w);
    s->len = w->cur_len;
    s->nrecords = w->cur_nrecords;
    s->nsubmits = w->cur_nsubmits;
    uint32_t expect = MT_SLOT_FILLING;
    /* Release: the lengths above reach the emergency flush with SEALED. */
    if (!atomic_compare_exchange_strong_explicit(&s->state, &expect, MT_SLOT_SEALED,
                                                 memory_order_acq_rel, memory_order_acquire))
        return -ECANCELED; /* frozen: the emergency flush writes it */
    w->submits_sealed += w->cur_nsubmits;
    if (w->seal_interval_ns)
        w->last_seal_ns = mti_now_ns();
    w->cur = NULL;
    pthread_mutex_lock(&w->qlock);
    w->sealed_seq++;
    pthread_cond_signal(&w->work);
    uint8_t *buf = NULL;
    int rc = take_buffer(w, &buf);
    pthread_mutex_unlock(&w->qlock);
    if (rc == 0)
        mti_wseal_fill_start(w, buf);
    return rc;
}

void mti_wseal_idle(mt_trace_writer *w)
{
    /* A caller holding the lock will seal by itself at its next submit if
     * it is due: never wait for it here. */
    if (pthread_mutex_trylock(&w->lock) != 0)
        return;
    if (w->cur && w->cur_nrecords && mti_now_ns() - w->last_seal_ns >= w->seal_interval_ns)
        mti_wseal(w);
    pthread_mutex_unlock(&w->lock);
}
