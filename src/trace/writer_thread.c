/* The writer's compressor thread: takes sealed chunks from the ring,
 * compresses them with zstd and appends them to the file, one write(2) per
 * chunk, in sequence order. Also writes the index and trailer at close. */
#include <errno.h>
#include <stdlib.h>
#include <unistd.h>
#include <xxhash.h>

#include "writer.h"

int mt_write_all(int fd, const void *p, size_t n)
{
    const uint8_t *q = p;
    while (n > 0) {
        ssize_t k = write(fd, q, n);
        if (k < 0) {
            if (errno == EINTR)
                continue;
            return -errno;
        }
        if (k == 0)
            return -EIO;
        q += k;
        n -= (size_t)k;
    }
    return 0;
}

int mt_writer_emit(mt_trace_writer *w, uint8_t *buf, uint32_t len, mt_chunk_header *h)
{
    uint8_t *out = buf;
    h->codec = MT_CODEC_RAW;
    h->raw_size = h->stored_size = len;
    if (!(w->flags & MT_TRACE_NO_COMPRESS) && len > 0) {
        size_t z = ZSTD_compressCCtx(w->cctx, w->zbuf + MT_CHUNK_HEADER_SIZE, w->zcap,
                                     buf + MT_CHUNK_HEADER_SIZE, len, w->level);
        if (!ZSTD_isError(z) && z < len) { /* incompressible data stays raw */
            out = w->zbuf;
            h->codec = MT_CODEC_ZSTD;
            h->stored_size = (uint32_t)z;
        }
    }
    h->payload_hash = XXH3_64bits(out + MT_CHUNK_HEADER_SIZE, h->stored_size);
    mt_chunk_header_put(out, h);
    int rc = mt_write_all(w->fd, out, MT_CHUNK_HEADER_SIZE + (size_t)h->stored_size);
    if (rc == 0)
        w->file_off += MT_CHUNK_HEADER_SIZE + (uint64_t)h->stored_size;
    return rc;
}

static int index_add(mt_trace_writer *w, uint64_t offset, const mt_chunk_header *h)
{
    if (w->nindex == w->index_cap) {
        size_t cap = w->index_cap ? 2 * w->index_cap : 256;
        mt_index_entry *n = realloc(w->index, cap * sizeof *n);
        if (!n)
            return -ENOMEM;
        w->index = n;
        w->index_cap = cap;
    }
    w->index[w->nindex++] = (mt_index_entry){offset, h->submits_before, h->nsubmits, h->nrecords,
                                             h->raw_size, h->stored_size};
    return 0;
}

static int write_chunk(mt_trace_writer *w, mt_wchunk *c)
{
    uint64_t offset = w->file_off;
    mt_chunk_header h = {.kind = MT_CHUNK_RECORDS, .seq = c->seq, .nrecords = c->nrecords,
                         .submits_before = c->submits_before, .nsubmits = c->nsubmits};
    int rc = mt_writer_emit(w, c->buf, c->len, &h);
    return rc ? rc : index_add(w, offset, &h);
}

void *mt_writer_thread_main(void *arg)
{
    mt_trace_writer *w = arg;
    pthread_mutex_lock(&w->qlock);
    for (;;) {
        while (w->count == 0 && !w->stop)
            pthread_cond_wait(&w->work, &w->qlock);
        if (w->count == 0)
            break; /* stop, and nothing left */
        /* The mutex hand-off publishes the chunk's bytes, written by the
         * caller before it queued the chunk under qlock. */
        mt_wchunk c = w->ring[w->head];
        w->head = (w->head + 1) % (w->depth + 1);
        w->count--;
        int failed = w->error != 0;
        pthread_mutex_unlock(&w->qlock);

        int rc = failed ? 0 : write_chunk(w, &c);

        pthread_mutex_lock(&w->qlock);
        if (rc && !w->error)
            w->error = rc; /* later chunks are dropped, callers see the error */
        if (!rc && !failed) {
            w->file_bytes = w->file_off;
            w->chunks_written++;
        }
        w->pool[w->nfree++] = c.buf;
        w->done_seq = c.seq + 1;
        pthread_cond_broadcast(&w->space);
    }
    pthread_mutex_unlock(&w->qlock);
    return NULL;
}

int mt_writer_finish(mt_trace_writer *w)
{
    size_t len = w->nindex * MT_INDEX_ENTRY_SIZE;
    if (len > MT_TRACE_MAX_CHUNK_RAW)
        return -EFBIG; /* > 2 million chunks: the trace stays readable by scanning */
    uint8_t *buf = malloc(MT_CHUNK_HEADER_SIZE + len + 1);
    if (!buf)
        return -ENOMEM;
    for (size_t i = 0; i < w->nindex; i++)
        mt_index_entry_put(buf + MT_CHUNK_HEADER_SIZE + i * MT_INDEX_ENTRY_SIZE, &w->index[i]);
    uint64_t index_off = w->file_off;
    mt_chunk_header h = {.kind = MT_CHUNK_INDEX, .seq = (uint32_t)w->nindex,
                         .nrecords = (uint32_t)w->nindex, .submits_before = w->submits_sealed};
    /* The index must fit the compression buffer sized for one record chunk. */
    uint32_t saved = w->flags;
    if (len > w->buf_cap)
        w->flags |= MT_TRACE_NO_COMPRESS;
    int rc = mt_writer_emit(w, buf, (uint32_t)len, &h);
    w->flags = saved;
    free(buf);
    if (rc)
        return rc;
    uint8_t tr[MT_TRAILER_SIZE];
    mt_trailer_put(tr, index_off, w->nindex, w->submits_sealed);
    rc = mt_write_all(w->fd, tr, sizeof tr);
    if (rc == 0)
        w->file_off += sizeof tr;
    return rc;
}
