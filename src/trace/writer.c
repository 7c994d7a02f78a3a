/* The trace writer, callers' side: records are encoded straight into the
 * chunk being filled under `lock`; a full chunk (or, with a seal interval,
 * the chunk holding a SUBMIT after the interval) is sealed and queued for
 * the compressor threads (writer_seal.c, writer_pool.c). Also flush,
 * checkpoint and the index written at close (writer_open.c opens and
 * closes). See writer.h for the states, locks and the file token. */
#define _GNU_SOURCE
#include <errno.h>
#include <string.h>
#include <unistd.h>

#include "../common/clock.h"
#include "writer.h"

/* Bound on an UPDATE record's header: type, body length, three varints. */
#define MT_UPDATE_OVERHEAD (MT_REC_HEADER_MAX + 3u * MT_VARINT_MAX)

/* Appends one encoded record of `size` bytes. Called with `lock` held. */
static int append(mt_trace_writer *w, const mt_trace_record *rec, size_t size)
{
    if (!w->cur || w->cur_len + size > w->buf_cap) {
        int rc = w->cur ? mti_wseal(w) : mti_writer_error(w);
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
        return mti_wseal(w);
    if (submit && w->seal_interval_ns && mti_now_ns() - w->last_seal_ns >= w->seal_interval_ns)
        return mti_wseal(w);
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
            int rc = mti_wseal(w);
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
    if (mti_writer_forked(w))
        return -ECHILD;
    pthread_mutex_lock(&w->lock);
    int rc = mti_writer_error(w);
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
    int rc = mti_wseal(w);
    uint32_t target = w->cur ? w->next_seq - 1 : w->next_seq;
    pthread_mutex_lock(&w->qlock);
    while (w->write_seq < target && !mti_writer_error(w)) {
        if (mti_writer_in_forked_child(w)) {
            rc = rc ? rc : -ECHILD;
            break;
        }
        mti_wseal_wait_space(w);
    }
    if (!rc)
        rc = mti_writer_error(w);
    pthread_mutex_unlock(&w->qlock);
    return rc;
}

int mt_trace_writer_flush(mt_trace_writer *w)
{
    if (!w)
        return -EINVAL;
    if (mti_writer_forked(w))
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
int mti_writer_write_end(mt_trace_writer *w, uint32_t end_reason)
{
    if (mti_writer_forked(w))
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
    return w ? mti_writer_write_end(w, MT_END_CHECKPOINT) : -EINVAL;
}

void mt_trace_writer_stats_get(mt_trace_writer *w, mt_trace_writer_stats *out)
{
    if (mti_writer_forked(w)) {
        *out = (mt_trace_writer_stats){0};
        return;
    }
    pthread_mutex_lock(&w->lock);
    pthread_mutex_lock(&w->qlock);
    *out = (mt_trace_writer_stats){w->records, w->submits_sealed + w->cur_nsubmits, w->raw_bytes,
                                   w->file_bytes, w->chunks_written, w->stalls,
                                   w->fast_chunks};
    pthread_mutex_unlock(&w->qlock);
    pthread_mutex_unlock(&w->lock);
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
