/* The trace writer, callers' side: records are encoded straight into the
 * current chunk buffer under `lock`; a full chunk is sealed and queued for
 * the compressor thread (writer_thread.c). See writer.h for the locking. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <unistd.h>

#include "writer.h"

#define MT_DEFAULT_CHUNK (1u << 20)
#define MT_MIN_CHUNK 512u
#define MT_DEFAULT_DEPTH 4u
/* Room past the seal threshold for any one non-update record (the largest
 * is a META with two MT_TRACE_MAX_TEXT strings). */
#define MT_CHUNK_SLACK (2u * MT_TRACE_MAX_TEXT + 64u)
/* Bound on an UPDATE record's header: type, body length, three varints. */
#define MT_UPDATE_OVERHEAD (MT_REC_HEADER_MAX + 3u * MT_VARINT_MAX)

static int writer_error(mt_trace_writer *w)
{
    pthread_mutex_lock(&w->qlock);
    int e = w->error;
    pthread_mutex_unlock(&w->qlock);
    return e;
}

/* Queues the current chunk (if it holds anything) and takes a free buffer,
 * waiting for one when all are in flight. Called with `lock` held. */
static int seal(mt_trace_writer *w)
{
    if (w->cur.nrecords == 0)
        return 0;
    w->cur.seq = w->next_seq++;
    w->cur.submits_before = w->submits_sealed;
    w->submits_sealed += w->cur.nsubmits;
    pthread_mutex_lock(&w->qlock);
    /* The ring has a slot for every buffer, so pushing never waits. */
    w->ring[(w->head + w->count) % (w->depth + 1)] = w->cur;
    w->count++;
    pthread_cond_signal(&w->work);
    if (w->nfree == 0)
        w->stalls++;
    while (w->nfree == 0)
        pthread_cond_wait(&w->space, &w->qlock);
    w->cur = (mt_wchunk){.buf = w->pool[--w->nfree]};
    int e = w->error;
    pthread_mutex_unlock(&w->qlock);
    return e;
}

/* Appends one encoded record of `size` bytes. Called with `lock` held. */
static int append(mt_trace_writer *w, const mt_trace_record *rec, size_t size)
{
    if (w->cur.len + size > w->buf_cap) {
        int rc = seal(w);
        if (rc)
            return rc;
    }
    mt_record_put(w->cur.buf + MT_CHUNK_HEADER_SIZE + w->cur.len, rec);
    w->cur.len += (uint32_t)size;
    w->cur.nrecords++;
    w->cur.nsubmits += rec->type == MT_TRACE_SUBMIT;
    w->records++;
    w->raw_bytes += size;
    return w->cur.len >= w->chunk_size ? seal(w) : 0;
}

/* An update that does not fit a chunk is split into consecutive pieces;
 * one that fits a fresh chunk is never split. Called with `lock` held. */
static int append_update(mt_trace_writer *w, const mt_trace_record *rec)
{
    mt_trace_record piece = *rec;
    const uint8_t *data = rec->u.update.data;
    size_t left = rec->u.update.length;
    do {
        size_t room = w->chunk_size - w->cur.len; /* cur.len < chunk_size always */
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
        int rc = append(w, &piece, mt_record_size(&piece));
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
    pthread_mutex_lock(&w->lock);
    int rc = writer_error(w);
    if (rc == 0) {
        uint64_t *num = r->type == MT_TRACE_SUBMIT ? &r->u.submit.index
                        : r->type == MT_TRACE_FRAME ? &r->u.frame.index : NULL;
        if (num)
            *num = r->type == MT_TRACE_SUBMIT ? w->next_submit++ : w->next_frame++;
        rc = r->type == MT_TRACE_UPDATE ? append_update(w, r) : append(w, r, mt_record_size(r));
        if (rc == 0 && num && index)
            *index = *num;
    }
    pthread_mutex_unlock(&w->lock);
    return rc;
}

int mt_trace_write(mt_trace_writer *w, const mt_trace_record *rec)
{
    if (!w || !rec || mt_record_size(rec) == 0)
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

int mt_trace_writer_flush(mt_trace_writer *w)
{
    if (!w)
        return -EINVAL;
    pthread_mutex_lock(&w->lock);
    int rc = seal(w);
    uint32_t target = w->next_seq;
    pthread_mutex_unlock(&w->lock);
    pthread_mutex_lock(&w->qlock);
    /* done_seq is written under qlock after the chunk reached the file. */
    while (w->done_seq < target && !w->error)
        pthread_cond_wait(&w->space, &w->qlock);
    if (!rc)
        rc = w->error;
    pthread_mutex_unlock(&w->qlock);
    if (rc == 0 && (w->flags & MT_TRACE_SYNC) && fdatasync(w->fd) < 0)
        rc = -errno;
    return rc;
}

void mt_trace_writer_stats_get(mt_trace_writer *w, mt_trace_writer_stats *out)
{
    pthread_mutex_lock(&w->lock);
    pthread_mutex_lock(&w->qlock);
    *out = (mt_trace_writer_stats){w->records, w->submits_sealed + w->cur.nsubmits, w->raw_bytes,
                                   w->file_bytes, w->chunks_written, w->stalls};
    pthread_mutex_unlock(&w->qlock);
    pthread_mutex_unlock(&w->lock);
}

static void writer_free(mt_trace_writer *w)
{
    if (w->pool)
        for (unsigned i = 0; i < w->nfree; i++)
            free(w->pool[i]);
    free(w->cur.buf);
    free(w->pool);
    free(w->ring);
    free(w->zbuf);
    free(w->index);
    ZSTD_freeCCtx(w->cctx);
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
    int rc = mt_trace_writer_flush(w);
    pthread_mutex_lock(&w->qlock);
    w->stop = 1;
    pthread_cond_signal(&w->work);
    pthread_mutex_unlock(&w->qlock);
    pthread_join(w->thread, NULL);
    if (rc == 0)
        rc = mt_writer_finish(w);
    if (rc == 0 && (w->flags & MT_TRACE_SYNC) && fdatasync(w->fd) < 0)
        rc = -errno;
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
    if (o->queue_depth > 1024 || o->level < 0 || o->level > ZSTD_maxCLevel() || (o->nmeta && !o->meta))
        return -EINVAL;
    return 0;
}

static int writer_alloc(mt_trace_writer *w)
{
    w->ring = calloc(w->depth + 1, sizeof *w->ring);
    w->pool = calloc(w->depth + 1, sizeof *w->pool);
    w->zcap = ZSTD_compressBound(w->buf_cap);
    w->zbuf = malloc(MT_CHUNK_HEADER_SIZE + w->zcap);
    w->cctx = ZSTD_createCCtx();
    if (!w->ring || !w->pool || !w->zbuf || !w->cctx)
        return -ENOMEM;
    for (unsigned i = 0; i <= w->depth; i++) {
        uint8_t *b = malloc(MT_CHUNK_HEADER_SIZE + w->buf_cap);
        if (!b)
            return -ENOMEM;
        w->pool[w->nfree++] = b;
    }
    w->cur.buf = w->pool[--w->nfree];
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
    w->flags = o.flags;
    w->level = o.level ? o.level : 1;
    w->chunk_size = o.chunk_size ? o.chunk_size : MT_DEFAULT_CHUNK;
    w->buf_cap = w->chunk_size + MT_CHUNK_SLACK;
    w->depth = o.queue_depth ? o.queue_depth : MT_DEFAULT_DEPTH;
    pthread_mutex_init(&w->lock, NULL);
    pthread_mutex_init(&w->qlock, NULL);
    pthread_cond_init(&w->work, NULL);
    pthread_cond_init(&w->space, NULL);
    rc = writer_alloc(w);
    uint8_t hdr[MT_FILE_HEADER_SIZE];
    mt_file_header_put(hdr, (uint32_t)w->buf_cap);
    if (rc == 0)
        rc = mt_write_all(fd, hdr, sizeof hdr);
    w->file_off = w->file_bytes = MT_FILE_HEADER_SIZE;
    if (rc == 0)
        rc = -pthread_create(&w->thread, NULL, mt_writer_thread_main, w);
    if (rc) {
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
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0)
        return -errno;
    return mt_trace_writer_open_fd(fd, opts, out);
}
