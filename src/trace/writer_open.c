/* Opening a trace writer (options, buffers, the file header, the
 * compressor threads, the header metadata) and closing it (the index and
 * trailer, unless an emergency flush owns the file, then the threads and
 * the memory). The top of the writer: it calls the callers' side
 * (writer.c, write_typed.c), the pool, the file and the emergency flush,
 * and none of them calls it. */
#define _GNU_SOURCE
#include <errno.h>
#include <sched.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../common/clock.h"
#include "../common/fdpark.h"
#include "writer.h"

#define MT_DEFAULT_CHUNK (1u << 20)
#define MT_MIN_CHUNK 512u
#define MT_DEFAULT_DEPTH 64u
#define MT_MAX_THREADS 64u
#define MT_DEFAULT_MAX_THREADS 8u
/* Room past the seal threshold for any one non-update record (the largest
 * is a META with two MT_TRACE_MAX_TEXT strings). */
#define MT_CHUNK_SLACK (2u * MT_TRACE_MAX_TEXT + 64u)
/* zstd levels of the presets: docs/trace-format.md says why. */
#define MT_LEVEL_DEFAULT 1
#define MT_LEVEL_FAST (-3)

static void writer_free(mt_trace_writer *w)
{
    for (unsigned i = 0; i < w->nfree; i++)
        free(w->pool[i]);
    for (unsigned i = 0; i < w->nslots && w->ring; i++) {
        uint32_t st = atomic_load_explicit(&w->ring[i].state, memory_order_relaxed);
        if (st != MT_SLOT_FREE)
            free(w->ring[i].buf);
    }
    for (unsigned i = 0; i < w->nthreads && w->workers; i++) {
        ZSTD_freeCCtx(w->workers[i].cctx);
        free(w->workers[i].zbuf);
    }
    free(w->workers);
    free(w->pool);
    free(w->ring);
    free(w->index_buf);
    pthread_mutex_destroy(&w->lock);
    pthread_mutex_destroy(&w->qlock);
    pthread_cond_destroy(&w->work);
    pthread_cond_destroy(&w->space);
    if (w->fd >= 0 && mti_wfile_ours(w))
        close(w->fd);
    free(w);
}

int mt_trace_writer_close(mt_trace_writer *w)
{
    if (!w)
        return 0;
    if (mti_writer_in_forked_child(w)) {
        mt_trace_writer_abandon(w);
        return -ECHILD;
    }
    int state = MT_EMERG_NONE, rc;
    if (atomic_compare_exchange_strong_explicit(&w->emergency, &state, MT_EMERG_CLOSING,
                                                memory_order_acq_rel, memory_order_acquire)) {
        rc = mti_writer_write_end(w, MT_END_CLOSED);
    } else {
        /* After an emergency flush the file is its: touch nothing. */
        while (atomic_load_explicit(&w->emergency, memory_order_acquire) == MT_EMERG_RUNNING)
            sched_yield();
        rc = atomic_load_explicit(&w->emergency_rc, memory_order_relaxed);
    }
    mti_wpool_stop(w);
    if (!mti_wfile_ours(w)) /* the application's now: not ours to close */
        rc = rc ? rc : -EBADF;
    else if (close(w->fd) < 0 && rc == 0)
        rc = -errno;
    w->fd = -1;
    writer_free(w);
    return rc;
}

static int check_opts(const mt_trace_writer_opts *o)
{
    if (o->chunk_size && (o->chunk_size < MT_MIN_CHUNK ||
                          o->chunk_size > MT_TRACE_MAX_CHUNK_RAW - MT_CHUNK_SLACK))
        return -EINVAL;
    if (o->queue_depth > 4096 || o->threads > MT_MAX_THREADS || (o->nmeta && !o->meta))
        return -EINVAL;
    if (o->level && (o->level < ZSTD_minCLevel() || o->level > ZSTD_maxCLevel()))
        return -EINVAL;
    if ((unsigned)o->compression > MT_TRACE_COMPRESSION_NONE || o->seal_interval_ms > 3600000u)
        return -EINVAL;
    return 0;
}

static unsigned default_threads(void)
{
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    /* Half the CPUs, at most 8: enough for 3 GB/s of zstd level 1 on the
     * benchmark's mix (docs/benchmarks.md), and the application keeps the
     * other half. */
    unsigned t = n > 1 ? (unsigned)(n / 2) : 1;
    return t < MT_DEFAULT_MAX_THREADS ? t : MT_DEFAULT_MAX_THREADS;
}

static void configure(mt_trace_writer *w, const mt_trace_writer_opts *o)
{
    w->flags = o->flags;
    w->compress = !(o->flags & MT_TRACE_NO_COMPRESS) && o->compression != MT_TRACE_COMPRESSION_NONE;
    w->level = o->level ? o->level
               : o->compression == MT_TRACE_COMPRESSION_FAST ? MT_LEVEL_FAST : MT_LEVEL_DEFAULT;
    /* DEFAULT adapts (zstd's own --adapt does the same across levels): level
     * 1 costs ~2.5x the time of level -3 on mixed GPU data for ~20% smaller
     * chunks, worth it while the compressors keep up, not once the caller
     * would wait for them. An explicit level never adapts. */
    int adapts = w->compress && !o->level && o->compression == MT_TRACE_COMPRESSION_DEFAULT;
    w->level_behind = adapts ? MT_LEVEL_FAST : w->level;
    w->chunk_size = o->chunk_size ? o->chunk_size : MT_DEFAULT_CHUNK;
    w->buf_cap = w->chunk_size + MT_CHUNK_SLACK;
    w->seal_interval_ns = (uint64_t)o->seal_interval_ms * 1000000u;
    w->nslots = (o->queue_depth ? o->queue_depth : MT_DEFAULT_DEPTH) + 1;
    w->nthreads = o->threads ? o->threads : default_threads();
    /* Stored raw, a thread only hashes and writes: two keep the file busy. */
    if (!w->compress && w->nthreads > 2)
        w->nthreads = 2;
}

static int writer_alloc(mt_trace_writer *w)
{
    w->ring = calloc(w->nslots, sizeof *w->ring);
    w->pool = calloc(w->nslots, sizeof *w->pool);
    w->workers = calloc(w->nthreads, sizeof *w->workers);
    if (!w->ring || !w->pool || !w->workers)
        return -ENOMEM;
    for (unsigned i = 0; i < w->nthreads; i++) {
        w->workers[i].w = w;
        /* Untouched until a chunk is compressed: costs address space only. */
        if (w->compress &&
            !(w->workers[i].zbuf = malloc(MT_CHUNK_HEADER_SIZE + ZSTD_compressBound(w->buf_cap))))
            return -ENOMEM;
    }
    uint8_t *first = malloc(MT_CHUNK_HEADER_SIZE + w->buf_cap);
    if (!first)
        return -ENOMEM;
    w->nbufs = 1;
    mti_wseal_fill_start(w, first);
    size_t cap = mti_wfile_index_want(w); /* no thread yet: no token needed */
    uint8_t *index = mti_wfile_index_alloc(cap);
    if (!index)
        return -ENOMEM;
    free(mti_wfile_index_adopt(w, index, cap));
    return 0;
}

int mt_trace_writer_open_fd(int fd, const mt_trace_writer_opts *opts, mt_trace_writer **out)
{
    mt_trace_writer_opts o = {0};
    if (opts)
        o = *opts;
    int rc = fd < 0 || !out ? -EINVAL : check_opts(&o);
    mt_trace_writer *w = rc ? NULL : calloc(1, sizeof *w);
    if (!w) {
        if (fd >= 0)
            close(fd);
        return rc ? rc : -ENOMEM;
    }
    /* Kept open for the writer's life, often inside an application (the
     * layer's trace): out of the application's descriptor numbers. */
    w->fd = fd = mti_fd_park(fd);
    mti_writer_fork_init(w);
    struct stat st;
    int known = fstat(fd, &st) == 0;
    w->regular = known && S_ISREG(st.st_mode);
    w->fd_dev = known ? (uint64_t)st.st_dev : UINT64_MAX;
    w->fd_ino = known ? (uint64_t)st.st_ino : UINT64_MAX;
    configure(w, &o);
    pthread_mutex_init(&w->lock, NULL);
    pthread_mutex_init(&w->qlock, NULL);
    pthread_cond_init(&w->work, NULL);
    mti_cond_init_monotonic(&w->space); /* mti_wseal_wait_space() times out on the monotonic clock */
    rc = writer_alloc(w);
    uint8_t hdr[MT_FILE_HEADER_SIZE];
    mti_file_header_put(hdr, (uint32_t)w->buf_cap);
    if (rc == 0)
        rc = mti_pwrite_all(fd, hdr, sizeof hdr, 0);
    w->file_off = w->file_bytes = MT_FILE_HEADER_SIZE;
    w->last_seal_ns = mti_now_ns(); /* the interval counts from the start */
    if (rc == 0)
        rc = mti_wpool_start(w);
    if (rc) {
        mti_wpool_stop(w);
        writer_free(w);
        return rc;
    }
    /* Header metadata: the first records of chunk 0, handed off at once so
     * that even a trace whose writer dies early says what it is. */
    for (size_t i = 0; i < o.nmeta && rc == 0; i++)
        rc = mt_trace_write_meta(w, o.meta[i].key, o.meta[i].value);
    if (rc == 0 && o.nmeta) {
        pthread_mutex_lock(&w->lock);
        rc = mti_wseal(w);
        pthread_mutex_unlock(&w->lock);
    }
    if (rc) {
        mt_trace_writer_close(w);
        return rc;
    }
    *out = w;
    return 0;
}

int mt_trace_writer_open(const char *path, const mt_trace_writer_opts *opts, mt_trace_writer **out)
{
    if (!path || !out)
        return -EINVAL;
    if (opts) {
        int rc = check_opts(opts);
        if (rc)
            return rc; /* before the file is touched */
    }
    int fd = mti_wfile_open(path);
    if (fd < 0)
        return fd;
    return mt_trace_writer_open_fd(fd, opts, out);
}
