/* Leaving a trace behind when the process dies (emergency flush), and
 * forgetting an inherited one in a forked child (abandon).
 *
 * The emergency flush runs in a signal handler of a dying process, or just
 * before _exit/exec: the interrupted thread may hold `lock` or `qlock`, a
 * compressor may be in the middle of a write, other threads keep running.
 * So it takes no mutex and allocates nothing: it waits, for a bounded time,
 * for the file token (writer.h), keeps it for good (no compressor writes
 * again), freezes the queued chunks one by one with a compare-and-swap on
 * their state (whoever owned a chunk leaves it alone from then on), writes
 * them after the last chunk in the file, in order (compressed when a
 * compressor had finished, raw otherwise), then the chunk being filled up to
 * its last complete record, then the index and trailer. Everything it
 * calls is async-signal-safe: atomics, pwrite, ftruncate, fdatasync,
 * clock_gettime, nanosleep, syscall(gettid), and pure computation (XXH3). */
#define _GNU_SOURCE
#include <errno.h>
#include <time.h>
#include <unistd.h>
#include <xxhash.h>

#include "../common/clock.h"
#include "writer.h"

static void pause_briefly(void) { mti_sleep_ns(50000); /* 50 us */ }

/* Records and SUBMIT records in p[0, len): complete records this writer
 * encoded, so only the type byte and the body length are read. */
static void count_records(const uint8_t *p, size_t len, uint32_t *nrec, uint32_t *nsub)
{
    const uint8_t *end = p + len;
    uint32_t n = 0, s = 0;
    while (p < end) {
        uint8_t type = *p++;
        uint64_t body = 0;
        if (mti_varint_get(&p, end, &body) < 0 || body > (uint64_t)(end - p))
            break; /* cannot happen for committed bytes; stop rather than overrun */
        p += body;
        n++;
        s += type == MT_TRACE_SUBMIT;
    }
    *nrec = n;
    *nsub = s;
}

/* Writes chunk `seq` if it is still queued or being filled. Token held.
 * Returns 1 (written, go on), 0 (nothing more to write) or -errno. */
static int flush_one(mt_trace_writer *w, uint32_t seq, uint64_t deadline)
{
    mt_wslot *s = &w->ring[seq % w->nslots];
    for (;;) {
        uint32_t st = atomic_load_explicit(&s->state, memory_order_acquire);
        if (st == MT_SLOT_FREE || st == MT_SLOT_FROZEN ||
            atomic_load_explicit(&s->seq, memory_order_relaxed) != seq)
            return 0;
        if (st == MT_SLOT_READY) { /* published by the compressor's release */
            int rc = mti_wfile_append(w, &s->hdr, s->buf, s->out_len, NULL, 0);
            return rc ? rc : 1;
        }
        if (st == MT_SLOT_COPYBACK) { /* a compressor is copying: moments */
            if (mti_now_ns() > deadline)
                return -ETIMEDOUT;
            pause_briefly();
            continue;
        }
        /* FILLING, SEALED or COMPRESSING: freeze it, then its records are
         * ours and stay as they are. Acquire: the lengths of a sealed chunk. */
        if (!atomic_compare_exchange_strong_explicit(&s->state, &st, MT_SLOT_FROZEN,
                                                     memory_order_acq_rel, memory_order_acquire))
            continue; /* its owner moved it on: look again */
        uint32_t len = s->len, nrec = s->nrecords, nsub = s->nsubmits;
        if (st == MT_SLOT_FILLING) {
            len = atomic_load_explicit(&s->committed, memory_order_acquire);
            count_records(s->buf + MT_CHUNK_HEADER_SIZE, len, &nrec, &nsub);
        }
        if (nrec == 0)
            return 0;
        mt_chunk_header h = {.kind = MT_CHUNK_RECORDS, .codec = MT_CODEC_RAW, .seq = seq,
                             .nrecords = nrec, .stored_size = len, .raw_size = len,
                             .submits_before = s->submits_before, .nsubmits = nsub};
        h.payload_hash = XXH3_64bits(s->buf + MT_CHUNK_HEADER_SIZE, len);
        uint8_t hb[MT_CHUNK_HEADER_SIZE];
        mti_chunk_header_put(hb, &h);
        int rc = mti_wfile_append(w, &h, hb, sizeof hb, s->buf + MT_CHUNK_HEADER_SIZE, len);
        if (rc)
            return rc;
        return st == MT_SLOT_FILLING ? 0 : 1; /* the chunk being filled is the last */
    }
}

/* Waits for the token until the deadline. Returns 0, -EDEADLK when this
 * thread holds it (we interrupted it), or -ETIMEDOUT. */
static int take_token(mt_trace_writer *w, uint64_t deadline)
{
    long me = mti_wfile_tid();
    for (;;) {
        long expect = 0;
        /* Acquire: pairs with the last holder's release (file_off, index). */
        if (atomic_compare_exchange_strong_explicit(&w->token, &expect, MT_TOKEN_EMERGENCY,
                                                    memory_order_acquire, memory_order_relaxed))
            return 0;
        if (expect == me)
            return -EDEADLK;
        if (mti_now_ns() > deadline)
            return -ETIMEDOUT;
        pause_briefly();
    }
}

static int flush_all(mt_trace_writer *w, uint64_t deadline)
{
    int rc = take_token(w, deadline);
    if (rc)
        return rc;
    /* From here on the token stays taken: compressors stop, and callers'
     * appends fail with -ECANCELED. A writer that had already failed (full
     * disk) has a hole after its last chunk: nothing can follow it. */
    int prior = 0;
    if (!atomic_compare_exchange_strong_explicit(&w->error, &prior, -ECANCELED,
                                                 memory_order_acq_rel, memory_order_acquire) &&
        prior != -ECANCELED)
        return prior;
    for (uint32_t seq = w->nindex;; seq++) {
        int r = flush_one(w, seq, deadline);
        if (r < 0)
            rc = r;
        if (r <= 0)
            break;
    }
    /* What was written is complete chunks: index them even after a
     * timeout, unless the file itself failed. */
    if (rc == 0 || rc == -ETIMEDOUT) {
        int r = mti_wfile_write_index(w, MT_END_EMERGENCY);
        if (r)
            rc = r;
    }
    if (rc == 0 && (w->flags & MT_TRACE_SYNC) && fdatasync(w->fd) < 0)
        rc = -errno;
    return rc;
}

int mt_trace_writer_emergency_flush(mt_trace_writer *w, unsigned timeout_ms)
{
    if (!w)
        return -EINVAL;
    /* A forked child's copy of the parent's writer: writing would land in
     * the parent's file, in the middle of what the parent writes. */
    if (mti_writer_in_forked_child(w))
        return -ECHILD;
    uint64_t deadline = mti_now_ns() + (uint64_t)timeout_ms * 1000000u;
    int state = MT_EMERG_NONE;
    if (!atomic_compare_exchange_strong_explicit(&w->emergency, &state, MT_EMERG_RUNNING,
                                                 memory_order_acq_rel, memory_order_acquire)) {
        if (state == MT_EMERG_CLOSING)
            return -ESHUTDOWN;
        /* Another thread flushes (two threads crashing at once): wait for
         * it, since returning lets our signal's default action kill the
         * process before it is done. */
        while (atomic_load_explicit(&w->emergency, memory_order_acquire) == MT_EMERG_RUNNING) {
            if (mti_now_ns() > deadline)
                return -ETIMEDOUT;
            pause_briefly();
        }
        return atomic_load_explicit(&w->emergency_rc, memory_order_relaxed);
    }
    int rc = flush_all(w, deadline);
    atomic_store_explicit(&w->emergency_rc, rc, memory_order_relaxed);
    /* Release: a waiting caller reads emergency_rc after seeing DONE. */
    atomic_store_explicit(&w->emergency, MT_EMERG_DONE, memory_order_release);
    return rc;
}

void mt_trace_writer_abandon(mt_trace_writer *w)
{
    /* The child's copy of the fd shares the parent's open file, its offset
     * and its lock: closing the copy releases neither (flock is released
     * when the last descriptor of the open file closes; LOCK_UN would
     * release the parent's). Threads, mutexes and buffers belong to the
     * parent's image: left as they are. */
    if (w && w->fd >= 0) {
        if (mti_wfile_ours(w))
            close(w->fd);
        w->fd = -1;
    }
}
