/* The writer's compressor threads. Each takes the next sealed chunk,
 * compresses it into its own buffer and copies the result over the chunk's
 * records (so a chunk needs one buffer, not two), or leaves it raw when
 * compression does not pay. Chunks finish in any order; whichever thread
 * finds the next chunk to write READY writes it, and keeps writing while the
 * following ones are READY, so chunks enter the file in sequence order with
 * one writer at a time, and no thread waits for another's turn.
 *
 * Ownership of a slot against the emergency flush is decided by
 * compare-and-swap on its state (writer.h): a compressor that loses
 * (FROZEN) walks away without touching the slot again. */
#include <errno.h>
#include <time.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

#include "writer.h"

static mt_wslot *slot_of(mt_trace_writer *w, uint32_t seq) { return &w->ring[seq % w->nslots]; }

/* Compresses slot s (state COMPRESSING, taken by this thread) and makes it
 * READY, unless the emergency flush froze it meanwhile. */
static void compress_slot(mt_wworker *wk, mt_wslot *s, uint32_t seq, int level)
{
    mt_trace_writer *w = wk->w;
    mt_chunk_header h = {.kind = MT_CHUNK_RECORDS, .codec = MT_CODEC_RAW, .seq = seq,
                         .nrecords = s->nrecords, .stored_size = s->len, .raw_size = s->len,
                         .submits_before = s->submits_before, .nsubmits = s->nsubmits};
    const uint8_t *payload = s->buf + MT_CHUNK_HEADER_SIZE;
    size_t z = 0;
    if (w->compress && s->len > 0) {
        if (!wk->cctx)
            wk->cctx = ZSTD_createCCtx();
        if (wk->cctx) { /* no context: stored raw, still a valid chunk */
            z = ZSTD_compressCCtx(wk->cctx, wk->zbuf + MT_CHUNK_HEADER_SIZE,
                                  ZSTD_compressBound(w->buf_cap), payload, s->len, level);
            if (ZSTD_isError(z) || z >= s->len) /* incompressible data stays raw */
                z = 0;
        }
    }
    uint32_t expect = MT_SLOT_COMPRESSING;
    if (z) {
        h.codec = MT_CODEC_ZSTD;
        h.stored_size = (uint32_t)z;
        h.payload_hash = XXH3_64bits(wk->zbuf + MT_CHUNK_HEADER_SIZE, z);
        mti_chunk_header_put(wk->zbuf, &h);
        /* acq_rel: on success nobody else reads the records any more; the
         * emergency flush waits for READY before it reads the copy. */
        if (!atomic_compare_exchange_strong_explicit(&s->state, &expect, MT_SLOT_COPYBACK,
                                                     memory_order_acq_rel, memory_order_acquire))
            return; /* frozen: the emergency flush writes the records raw */
        memcpy(s->buf, wk->zbuf, MT_CHUNK_HEADER_SIZE + z);
        s->hdr = h;
        s->out_len = MT_CHUNK_HEADER_SIZE + (uint32_t)z;
        /* Release: publishes buf, hdr and out_len to whoever writes it. */
        atomic_store_explicit(&s->state, MT_SLOT_READY, memory_order_release);
        return;
    }
    /* Raw: the header goes into the room before the records; the emergency
     * flush never reads that room of a slot it froze. */
    h.payload_hash = XXH3_64bits(payload, s->len);
    mti_chunk_header_put(s->buf, &h);
    s->hdr = h;
    s->out_len = MT_CHUNK_HEADER_SIZE + s->len;
    atomic_compare_exchange_strong_explicit(&s->state, &expect, MT_SLOT_READY, memory_order_acq_rel,
                                            memory_order_acquire);
}

/* The emergency flush owns the file: stop, free nothing (it may be reading
 * any queued slot), wake everyone waiting. Called with qlock held. */
static void halt(mt_trace_writer *w)
{
    int e = 0;
    atomic_compare_exchange_strong_explicit(&w->error, &e, -ECANCELED, memory_order_release,
                                            memory_order_relaxed);
    pthread_cond_broadcast(&w->space);
}

/* Grows the index, allocating outside the token. Returns 0 (also when the
 * allocation failed: the spare room keeps the next chunks writable, and the
 * next chunk tries again) or -ECANCELED (the emergency flush took the file). */
static int grow_index(mt_trace_writer *w, size_t cap)
{
    uint8_t *buf = mti_wfile_index_alloc(cap);
    if (!buf)
        return 0;
    int rc = mti_wfile_enter(w);
    uint8_t *old = buf;
    if (rc == 0) {
        old = mti_wfile_index_adopt(w, buf, cap);
        mti_wfile_leave(w);
    }
    free(old);
    return rc;
}

/* Writes every READY chunk from write_seq on, in order, unless another
 * thread already does. Called and returns with qlock held; holds the token
 * only around the write itself (never while taking qlock: the thread the
 * emergency flush interrupted may hold it). */
static void write_ready(mt_trace_writer *w)
{
    if (w->writing)
        return;
    w->writing = 1;
    while (w->write_seq != w->sealed_seq) {
        mt_wslot *s = slot_of(w, w->write_seq);
        if (atomic_load_explicit(&s->state, memory_order_acquire) != MT_SLOT_READY)
            break;
        pthread_mutex_unlock(&w->qlock);
        int rc = mti_wfile_enter(w);
        int err = atomic_load_explicit(&w->error, memory_order_acquire);
        if (rc == 0 && err == -ECANCELED)
            rc = -ECANCELED, mti_wfile_leave(w);
        if (rc) {
            pthread_mutex_lock(&w->qlock);
            halt(w);
            break;
        }
        uint64_t off = 0;
        size_t grow = 0;
        if (!err) { /* after an error, later chunks are dropped */
            rc = mti_wfile_append(w, &s->hdr, s->buf, s->out_len, NULL, 0);
            int zero = 0;
            if (rc) /* set under the token: the emergency flush sees it */
                atomic_compare_exchange_strong_explicit(&w->error, &zero, rc, memory_order_release,
                                                        memory_order_relaxed);
            off = w->file_off;
            grow = mti_wfile_index_want(w);
        }
        mti_wfile_leave(w);
        if (grow && (rc = grow_index(w, grow)) != 0) {
            pthread_mutex_lock(&w->qlock);
            halt(w);
            break;
        }
        /* The slot is freed without the token: the emergency flush starts
         * at nindex, past this chunk when it was written, and returns at
         * once when it was dropped (the error is set), so it never reads a
         * slot that changes hands here. */
        pthread_mutex_lock(&w->qlock);
        if (!err && !rc) {
            w->file_bytes = off;
            w->chunks_written++;
        }
        atomic_store_explicit(&s->state, MT_SLOT_FREE, memory_order_relaxed);
        w->pool[w->nfree++] = s->buf;
        w->write_seq++;
        pthread_cond_broadcast(&w->space);
    }
    w->writing = 0;
}

static void *worker_main(void *arg)
{
    mt_wworker *wk = arg;
    mt_trace_writer *w = wk->w;
    /* The first thread also seals an idle chunk once the seal interval has
     * passed (see mti_wseal_idle): it wakes up that often. */
    int sealer = wk == &w->workers[0] && w->seal_interval_ns;
    pthread_mutex_lock(&w->qlock);
    for (;;) {
        while (w->take_seq == w->sealed_seq && !w->stop) {
            if (!sealer) {
                pthread_cond_wait(&w->work, &w->qlock);
                continue;
            }
            struct timespec t;
            clock_gettime(CLOCK_REALTIME, &t);
            uint64_t ns = (uint64_t)t.tv_nsec + w->seal_interval_ns;
            t.tv_sec += (time_t)(ns / 1000000000u);
            t.tv_nsec = (long)(ns % 1000000000u);
            if (pthread_cond_timedwait(&w->work, &w->qlock, &t) == ETIMEDOUT) {
                /* Lock order is `lock` before `qlock`: let go of qlock. */
                pthread_mutex_unlock(&w->qlock);
                mti_wseal_idle(w);
                pthread_mutex_lock(&w->qlock);
            }
        }
        if (w->take_seq == w->sealed_seq)
            break; /* stop, and nothing left */
        uint32_t seq = w->take_seq++;
        mt_wslot *s = slot_of(w, seq);
        /* Chunks still waiting behind this one: half the queue means the
         * callers are about to wait for the compressors. */
        int level = w->level;
        if (w->level_behind != w->level && 2 * (w->sealed_seq - w->take_seq) >= w->nslots - 1) {
            level = w->level_behind;
            w->fast_chunks++;
        }
        int halted = atomic_load_explicit(&w->error, memory_order_relaxed) == -ECANCELED;
        pthread_mutex_unlock(&w->qlock);
        /* The mutex hand-off published the records and lengths, written
         * by the caller before it sealed the chunk under qlock. */
        uint32_t expect = MT_SLOT_SEALED;
        if (!halted && atomic_compare_exchange_strong_explicit(&s->state, &expect, MT_SLOT_COMPRESSING,
                                                               memory_order_acq_rel,
                                                               memory_order_acquire))
            compress_slot(wk, s, seq, level);
        pthread_mutex_lock(&w->qlock);
        if (atomic_load_explicit(&w->error, memory_order_relaxed) != -ECANCELED)
            write_ready(w);
    }
    pthread_mutex_unlock(&w->qlock);
    return NULL;
}

int mti_wpool_start(mt_trace_writer *w)
{
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_BLOCK, &all, &old);
    int rc = 0;
    for (unsigned i = 0; i < w->nthreads && rc == 0; i++) {
        rc = -pthread_create(&w->workers[i].thread, NULL, worker_main, &w->workers[i]);
        if (rc == 0)
            w->started++;
    }
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    return rc;
}

void mti_wpool_stop(mt_trace_writer *w)
{
    pthread_mutex_lock(&w->qlock);
    w->stop = 1;
    pthread_cond_broadcast(&w->work);
    pthread_mutex_unlock(&w->qlock);
    for (unsigned i = 0; i < w->started; i++)
        pthread_join(w->workers[i].thread, NULL);
    w->started = 0;
}
