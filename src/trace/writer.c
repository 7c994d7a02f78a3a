/* The trace writer, callers' side: records are encoded straight into the
 * chunk being filled under `lock`; a full chunk (or, with a seal interval,
 * the chunk holding a SUBMIT after the interval) is sealed and queued for
 * the compressor threads (writer_pool.c). Also flush, checkpoint, open and
 * close. See writer.h for the states, locks and the file token. */
#define _GNU_SOURCE
#include <errno.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "../common/clock.h"
#include "writer.h"

#define MT_DEFAULT_CHUNK (1u << 20)
#define MT_MIN_CHUNK 512u
#define MT_DEFAULT_DEPTH 64u
#define MT_MAX_THREADS 64u
#define MT_DEFAULT_MAX_THREADS 8u
/* Room past the seal threshold for any one non-update record (the largest
 * is a META with two MT_TRACE_MAX_TEXT strings). */
#define MT_CHUNK_SLACK (2u * MT_TRACE_MAX_TEXT + 64u)
/* Bound on an UPDATE record's header: type, body length, three varints. */
#define MT_UPDATE_OVERHEAD (MT_REC_HEADER_MAX + 3u * MT_VARINT_MAX)
/* zstd levels of the presets: docs/trace-format.md says why. */
#define MT_LEVEL_DEFAULT 1
#define MT_LEVEL_FAST (-3)

static int writer_error(mt_trace_writer *w) { return atomic_load_explicit(&w->error, memory_order_acquire); }

/* Makes buf the chunk being filled, number next_seq. Called with `lock`
 * held. Release: the emergency flush that sees FILLING sees seq, buf and
 * submits_before. */
static void start_fill(mt_trace_writer *w, uint8_t *buf)
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
static void wait_space(mt_trace_writer *w)
{
    struct timespec t;
    mti_deadline_after(&t, 10000000);
    mti_cond_wait_until(&w->space, &w->qlock, &t);
}

/* In a forked child the compressor threads do not exist, and the writer's
 * mutexes and condition variables may be frozen in the state the parent's
 * threads left them in: any wait would never end. The child must call
 * mt_trace_writer_abandon; this is the net for one that does not. A fork
 * handler bumps a generation that every call compares with the one it was
 * opened in (a relaxed load: no cost to speak of); the pid check catches
 * forks that bypass the handlers (a raw clone). */
static _Atomic unsigned g_fork_gen;
static pthread_once_t g_fork_once = PTHREAD_ONCE_INIT;

static void on_fork_child(void) { atomic_fetch_add_explicit(&g_fork_gen, 1, memory_order_relaxed); }

/* glibc drops the handler when the library is unloaded (dlclose). */
static void register_fork_handler(void) { pthread_atfork(NULL, NULL, on_fork_child); }

static int in_forked_child(const mt_trace_writer *w)
{
    return atomic_load_explicit(&g_fork_gen, memory_order_relaxed) != w->fork_gen || getpid() != w->pid;
}

static int forked(const mt_trace_writer *w)
{
    return atomic_load_explicit(&g_fork_gen, memory_order_relaxed) != w->fork_gen;
}

/* For the emergency flush (async-signal-safe: an atomic load and getpid). */
int mti_writer_in_forked_child(const mt_trace_writer *w) { return in_forked_child(w); }

/* A buffer for the next chunk: a free one, a new one while fewer than
 * nslots exist, else wait for the compressors. Called with qlock held. */
static int take_buffer(mt_trace_writer *w, uint8_t **out)
{
    int counted = 0;
    for (;;) {
        int e = writer_error(w);
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
        if (in_forked_child(w))
            return -ECHILD;
        if (!counted)
            w->stalls++, counted = 1;
        wait_space(w);
    }
}

/* Queues the current chunk (if it holds anything) and starts the next one.
 * Called with `lock` held. */
static int seal(mt_trace_writer *w)
{
    mt_wslot *s = w->cur;
    if (!s || w->cur_nrecords == 0)
        return writer_error(w);
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
        start_fill(w, buf);
    return rc;
}

void mti_writer_seal_idle(mt_trace_writer *w)
{
    /* A caller holding the lock will seal by itself at its next submit if
     * it is due: never wait for it here. */
    if (pthread_mutex_trylock(&w->lock) != 0)
        return;
    if (w->cur && w->cur_nrecords && mti_now_ns() - w->last_seal_ns >= w->seal_interval_ns)
        seal(w);
    pthread_mutex_unlock(&w->lock);
}

/* Appends one encoded record of `size` bytes. Called with `lock` held. */
static int append(mt_trace_writer *w, const mt_trace_record *rec, size_t size)
{
    if (!w->cur || w->cur_len + size > w->buf_cap) {
        int rc = w->cur ? seal(w) : writer_error(w);
        if (rc || !w->cur)
            return rc ? rc : -ENOMEM;
    }
    mti_record_put(w->cur->buf + MT_CHUNK_HEADER_SIZE + w->cur_len, rec);
    w->cur_len += (uint32_t)size;
    w->cur_nrecords++;
    int submit = rec->type == MT_TRACE_SUBMIT;
    w->cur_nsubmits += (uint32_t)submit;
    /* Release: the record's bytes are complete for the emergency flush. */
    atomic_store_explicit(&w->cur->committed, w->cur_len, memory_order_release);
    w->records++;
    w->raw_bytes += size;
    if (w->cur_len >= w->chunk_size)
        return seal(w);
    if (submit && w->seal_interval_ns && mti_now_ns() - w->last_seal_ns >= w->seal_interval_ns)
        return seal(w);
    return 0;
}

/* An update that does not fit a chunk is split into consecutive pieces;
 * one that fits a fresh chunk is never split. Called with `lock` held. */
static int append_update(mt_trace_writer *w, const mt_trace_record *rec)
{
    mt_trace_record piece = *rec;
    const uint8_t *data = rec->u.update.data;
    size_t left = rec->u.update.length;
    do {
        size_t room = w->chunk_size - w->cur_len; /* cur_len < chunk_size always */
        if (left + MT_UPDATE_OVERHEAD > room && (left + MT_UPDATE_OVERHEAD <= w->chunk_size ||
                                                 room < 2 * MT_UPDATE_OVERHEAD)) {
            int rc = seal(w);
            if (rc)
                return rc;
            room = w->chunk_size;
        }
        size_t n = left + MT_UPDATE_OVERHEAD <= room ? left : room - MT_UPDATE_OVERHEAD;
        piece.u.update.data = data;
        piece.u.update.length = n;
        int rc = append(w, &piece, mti_record_size(&piece));
        if (rc)
            return rc;
        data += n;
        piece.u.update.offset += n;
        left -= n;
    } while (left > 0);
    return 0;
}

/* Appends a record under the lock; SUBMIT and FRAME take the writer's next
 * number, returned in *index when index is not NULL. */
static int write_locked(mt_trace_writer *w, mt_trace_record *r, uint64_t *index)
{
    if (forked(w))
        return -ECHILD;
    pthread_mutex_lock(&w->lock);
    int rc = writer_error(w);
    if (rc == 0 && !w->cur)
        rc = -ENOMEM; /* no buffer could be had after the last seal */
    if (rc == 0) {
        uint64_t *num = r->type == MT_TRACE_SUBMIT ? &r->u.submit.index
                        : r->type == MT_TRACE_FRAME ? &r->u.frame.index : NULL;
        if (num)
            *num = r->type == MT_TRACE_SUBMIT ? w->next_submit++ : w->next_frame++;
        rc = r->type == MT_TRACE_UPDATE ? append_update(w, r) : append(w, r, mti_record_size(r));
        if (rc == 0 && num && index)
            *index = *num;
    }
    pthread_mutex_unlock(&w->lock);
    return rc;
}

int mt_trace_write(mt_trace_writer *w, const mt_trace_record *rec)
{
    if (!w || !rec || mti_record_size(rec) == 0)
        return -EINVAL;
    if (rec->type == MT_TRACE_UPDATE && rec->u.update.offset > UINT64_MAX - rec->u.update.length)
        return -EINVAL;
    mt_trace_record r = *rec;
    return write_locked(w, &r, NULL);
}

int mt_trace_write_submit(mt_trace_writer *w, uint64_t queue, uint64_t *index)
{
    mt_trace_record r = {.type = MT_TRACE_SUBMIT, .u.submit = {0, queue}};
    return w ? write_locked(w, &r, index) : -EINVAL;
}

int mt_trace_write_frame(mt_trace_writer *w, uint64_t *index)
{
    mt_trace_record r = {.type = MT_TRACE_FRAME};
    return w ? write_locked(w, &r, index) : -EINVAL;
}

/* Seals the current chunk and waits until every sealed chunk is written.
 * Called with `lock` held (so nothing new is sealed meanwhile). */
static int drain(mt_trace_writer *w)
{
    int rc = seal(w);
    uint32_t target = w->cur ? w->next_seq - 1 : w->next_seq;
    pthread_mutex_lock(&w->qlock);
    while (w->write_seq < target && !writer_error(w)) {
        if (in_forked_child(w)) {
            rc = rc ? rc : -ECHILD;
            break;
        }
        wait_space(w);
    }
    if (!rc)
        rc = writer_error(w);
    pthread_mutex_unlock(&w->qlock);
    return rc;
}

int mt_trace_writer_flush(mt_trace_writer *w)
{
    if (!w)
        return -EINVAL;
    if (forked(w))
        return -ECHILD;
    pthread_mutex_lock(&w->lock);
    int rc = drain(w);
    pthread_mutex_unlock(&w->lock);
    if (rc == 0 && (w->flags & MT_TRACE_SYNC) && fdatasync(w->fd) < 0)
        rc = -errno;
    return rc;
}

/* Drains, then writes the index and trailer under the token. Every chunk
 * is written and nothing is sealed (we hold `lock`), so no compressor takes
 * the token meanwhile: only the emergency flush can have it. */
static int write_end(mt_trace_writer *w, uint32_t end_reason)
{
    if (forked(w))
        return -ECHILD;
    pthread_mutex_lock(&w->lock);
    int rc = drain(w);
    if (rc == 0)
        rc = mti_wfile_enter(w);
    if (rc == 0) {
        rc = mti_wfile_write_index(w, end_reason);
        if (rc == 0 && (w->flags & MT_TRACE_SYNC) && fdatasync(w->fd) < 0)
            rc = -errno;
        mti_wfile_leave(w);
    }
    pthread_mutex_unlock(&w->lock);
    return rc;
}

int mt_trace_writer_checkpoint(mt_trace_writer *w)
{
    return w ? write_end(w, MT_END_CHECKPOINT) : -EINVAL;
}

void mt_trace_writer_stats_get(mt_trace_writer *w, mt_trace_writer_stats *out)
{
    if (forked(w)) {
        *out = (mt_trace_writer_stats){0};
        return;
    }
    pthread_mutex_lock(&w->lock);
    pthread_mutex_lock(&w->qlock);
    *out = (mt_trace_writer_stats){w->records, w->submits_sealed + w->cur_nsubmits, w->raw_bytes,
                                   w->file_bytes, w->chunks_written, w->stalls};
    pthread_mutex_unlock(&w->qlock);
    pthread_mutex_unlock(&w->lock);
}

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
    if (w->fd >= 0)
        close(w->fd);
    free(w);
}

int mt_trace_writer_close(mt_trace_writer *w)
{
    if (!w)
        return 0;
    if (in_forked_child(w)) {
        mt_trace_writer_abandon(w);
        return -ECHILD;
    }
    int state = MT_EMERG_NONE, rc;
    if (atomic_compare_exchange_strong_explicit(&w->emergency, &state, MT_EMERG_CLOSING,
                                                memory_order_acq_rel, memory_order_acquire)) {
        rc = write_end(w, MT_END_CLOSED);
    } else {
        /* After an emergency flush the file is its: touch nothing. */
        while (atomic_load_explicit(&w->emergency, memory_order_acquire) == MT_EMERG_RUNNING)
            sched_yield();
        rc = atomic_load_explicit(&w->emergency_rc, memory_order_relaxed);
    }
    mti_wpool_stop(w);
    if (close(w->fd) < 0 && rc == 0)
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
    start_fill(w, first);
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
    w->fd = fd;
    pthread_once(&g_fork_once, register_fork_handler);
    w->fork_gen = atomic_load_explicit(&g_fork_gen, memory_order_relaxed);
    w->pid = getpid();
    struct stat st;
    w->regular = fstat(fd, &st) == 0 && S_ISREG(st.st_mode);
    configure(w, &o);
    pthread_mutex_init(&w->lock, NULL);
    pthread_mutex_init(&w->qlock, NULL);
    pthread_cond_init(&w->work, NULL);
    mti_cond_init_monotonic(&w->space); /* wait_space() times out on the monotonic clock */
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
        rc = seal(w);
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

int mt_trace_compression_parse(const char *name, mt_trace_compression *out)
{
    static const char *const names[] = {"default", "fast", "none"};
    for (int i = 0; name && out && i < 3; i++)
        if (strcmp(name, names[i]) == 0) {
            *out = (mt_trace_compression)i;
            return 0;
        }
    return -EINVAL;
}

const char *mt_trace_compression_name(mt_trace_compression c)
{
    return c == MT_TRACE_COMPRESSION_FAST ? "fast" : c == MT_TRACE_COMPRESSION_NONE ? "none" : "default";
}
