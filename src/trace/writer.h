/* Private state of a trace writer, shared by writer.c (the callers' side)
 * and writer_thread.c (the compressor thread).
 *
 * Threads and locks: `lock` serialises callers and guards the current
 * chunk; `qlock` guards the hand-off (ring of sealed chunks, pool of free
 * buffers, done_seq, error, stop). Order: lock before qlock; the compressor
 * only ever takes qlock, and never holds it while compressing or writing.
 *
 * Bounded memory: queue_depth + 1 raw chunk buffers exist in all (one being
 * filled, the rest queued or being compressed), plus one compression buffer
 * and the index (32 bytes per chunk written). A caller blocks only when it
 * seals a chunk and no buffer is free, i.e. queue_depth chunks are waiting. */
#ifndef MT_TRACE_WRITER_H
#define MT_TRACE_WRITER_H

#include <pthread.h>
#include <stdint.h>
#include <zstd.h>

#include "format.h"

typedef struct mt_wchunk {
    uint8_t *buf; /* MT_CHUNK_HEADER_SIZE bytes of headroom, then the records */
    uint32_t len, seq, nrecords, nsubmits;
    uint64_t submits_before;
} mt_wchunk;

struct mt_trace_writer {
    int fd;
    uint32_t flags;
    int level;
    size_t chunk_size; /* seal threshold */
    size_t buf_cap;    /* bytes of records a buffer holds: chunk_size + slack */
    unsigned depth;

    /* Callers' side, under `lock`. */
    pthread_mutex_t lock;
    mt_wchunk cur;
    uint32_t next_seq;
    uint64_t next_submit, next_frame, submits_sealed;
    uint64_t records, raw_bytes;

    /* Hand-off, under `qlock`. */
    pthread_mutex_t qlock;
    pthread_cond_t work;  /* signalled when a chunk is queued or stop is set */
    pthread_cond_t space; /* signalled when a buffer is freed / a chunk is done */
    mt_wchunk *ring;      /* depth + 1 slots */
    unsigned head, count;
    uint8_t **pool;       /* free buffers */
    unsigned nfree;
    uint32_t done_seq;    /* chunks [0, done_seq) are in the file (or failed) */
    int error;            /* first error; sticky */
    int stop;
    uint64_t stalls, file_bytes, chunks_written;

    /* Compressor thread only (and close, after joining it). */
    pthread_t thread;
    int thread_started;
    ZSTD_CCtx *cctx;
    uint8_t *zbuf;
    size_t zcap;
    uint64_t file_off;
    mt_index_entry *index;
    size_t nindex, index_cap;
};

void *mt_writer_thread_main(void *arg);

/* Compresses (unless disabled or useless) and writes one chunk whose payload
 * is buf[MT_CHUNK_HEADER_SIZE ..+ len]; `h` carries everything but the sizes
 * and hash. Compressor thread or close only. Returns 0 or -errno. */
int mt_writer_emit(mt_trace_writer *w, uint8_t *buf, uint32_t len, mt_chunk_header *h);

/* Writes the index chunk and the trailer. Close only, after the thread ended. */
int mt_writer_finish(mt_trace_writer *w);

/* write(2) until done; -errno on failure. */
int mt_write_all(int fd, const void *p, size_t n);

#endif
