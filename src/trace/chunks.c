/* The chunk table: from the index at the end of a closed trace, or rebuilt
 * by walking chunk headers when the index is missing (the writer died) or
 * damaged. Also reading one chunk's payload: size checks, hash, zstd. */
#include <errno.h>
#include <stdlib.h>
#include <xxhash.h>

#include "reader.h"

/* Never leaves *buf NULL, even for an empty payload: the iterator does
 * pointer arithmetic on it. */
static int grow(uint8_t **buf, size_t *cap, size_t need)
{
    if (need <= *cap && *buf)
        return 0;
    uint8_t *n = realloc(*buf, need ? need : 1);
    if (!n)
        return -ENOMEM;
    *buf = n;
    *cap = need;
    return 0;
}

int mti_chunk_payload(mt_trace_reader *r, uint64_t off, const mt_chunk_header *h)
{
    uint64_t start = off + MT_CHUNK_HEADER_SIZE;
    if (start > r->src.size || h->stored_size > r->src.size - start)
        return MT_ETRUNCATED;
    int rc = grow(&r->raw, &r->raw_cap, h->raw_size);
    if (rc)
        return rc;
    uint8_t *dst = r->raw;
    if (h->codec == MT_CODEC_ZSTD) {
        if ((rc = grow(&r->stored, &r->stored_cap, h->stored_size)))
            return rc;
        dst = r->stored;
    }
    if ((rc = mti_src_read(&r->src, start, dst, h->stored_size)))
        return rc;
    if (XXH3_64bits(dst, h->stored_size) != h->payload_hash)
        return MT_ECHECKSUM;
    if (h->codec == MT_CODEC_ZSTD) {
        if (!r->dctx && !(r->dctx = ZSTD_createDCtx()))
            return -ENOMEM;
        size_t n = ZSTD_decompressDCtx(r->dctx, r->raw, h->raw_size, r->stored, h->stored_size);
        if (ZSTD_isError(n) || n != h->raw_size)
            return MT_ECORRUPT;
    }
    return 0;
}

int mti_chunk_read(mt_trace_reader *r, size_t i, mt_chunk_header *h)
{
    const mt_index_entry *e = &r->chunks[i];
    uint8_t b[MT_CHUNK_HEADER_SIZE];
    int rc = mti_src_read(&r->src, e->offset, b, sizeof b);
    if (rc == 0)
        rc = mti_chunk_header_parse(b, r->max_chunk_raw, h);
    if (rc)
        return rc;
    if (h->kind != MT_CHUNK_RECORDS || h->seq != i || h->submits_before != e->submits_before ||
        h->nsubmits != e->nsubmits || h->nrecords != e->nrecords || h->raw_size != e->raw_size ||
        h->stored_size != e->stored_size)
        return MT_ECORRUPT;
    return mti_chunk_payload(r, e->offset, h);
}

static int table_add(mt_trace_reader *r, size_t *cap, const mt_index_entry *e)
{
    if (r->nchunks == *cap) {
        size_t ncap = *cap ? 2 * *cap : 64;
        mt_index_entry *n = realloc(r->chunks, ncap * sizeof *n);
        if (!n)
            return -ENOMEM;
        r->chunks = n;
        *cap = ncap;
    }
    r->chunks[r->nchunks++] = *e;
    return 0;
}

/* Walks chunk headers from the first chunk. Stops at the first problem (its
 * code goes to tail_error) or at an index chunk. */
static int scan(mt_trace_reader *r)
{
    size_t cap = 0;
    uint64_t off = MT_FILE_HEADER_SIZE, submits = 0;
    r->nchunks = 0;
    for (;;) {
        uint64_t left = r->src.size - off;
        if (left == 0)
            break;
        uint8_t b[MT_CHUNK_HEADER_SIZE];
        mt_chunk_header h;
        int rc = left < sizeof b ? MT_ETRUNCATED : mti_src_read(&r->src, off, b, sizeof b);
        if (rc == 0)
            rc = mti_chunk_header_parse(b, r->max_chunk_raw, &h);
        if (rc == 0 && h.stored_size > left - MT_CHUNK_HEADER_SIZE)
            rc = MT_ETRUNCATED;
        if (rc == 0 && h.kind == MT_CHUNK_INDEX) {
            if (r->info.index_error == MT_ETRUNCATED)
                r->info.index_error = MT_ECORRUPT; /* closed, but the trailer is bad */
            break;
        }
        if (rc == 0 && (h.seq != r->nchunks || h.submits_before != submits))
            rc = MT_ECORRUPT;
        if (rc < 0 && rc > -4096 && rc != -ENOMEM)
            return rc; /* an I/O error is not a property of the file */
        if (rc) {
            r->info.tail_error = rc;
            break;
        }
        mt_index_entry e = {off, h.submits_before, h.nsubmits, h.nrecords, h.raw_size, h.stored_size};
        if ((rc = table_add(r, &cap, &e)))
            return rc;
        submits += h.nsubmits;
        off += MT_CHUNK_HEADER_SIZE + (uint64_t)h.stored_size;
    }
    r->info.readable_size = off;
    return 0;
}

/* Checks the index entries (now in r->raw) against each other and the
 * totals; fills r->chunks. Returns 0 or MT_ECORRUPT / -ENOMEM. */
static int index_entries(mt_trace_reader *r, uint64_t index_off, const mt_chunk_header *h)
{
    size_t n = h->nrecords;
    if ((uint64_t)n * MT_INDEX_ENTRY_SIZE != h->raw_size || h->seq != n)
        return MT_ECORRUPT;
    mt_index_entry *t = malloc((n ? n : 1) * sizeof *t);
    if (!t)
        return -ENOMEM;
    uint64_t off = MT_FILE_HEADER_SIZE, submits = 0;
    for (size_t i = 0; i < n; i++) {
        mti_index_entry_get(r->raw + i * MT_INDEX_ENTRY_SIZE, &t[i]);
        const mt_index_entry *e = &t[i];
        int bad = e->offset != off || e->submits_before != submits || e->nsubmits > e->nrecords ||
                  e->raw_size > r->max_chunk_raw || e->stored_size > index_off - off - MT_CHUNK_HEADER_SIZE;
        if (bad || index_off - off < MT_CHUNK_HEADER_SIZE) {
            free(t);
            return MT_ECORRUPT;
        }
        off += MT_CHUNK_HEADER_SIZE + (uint64_t)e->stored_size;
        submits += e->nsubmits;
    }
    if (off != index_off || submits != h->submits_before) {
        free(t);
        return MT_ECORRUPT;
    }
    free(r->chunks);
    r->chunks = t;
    r->nchunks = n;
    return 0;
}

/* Uses the trailer and index chunk. Returns 0 when they are good, a format
 * code when not (the caller scans instead), or -ENOMEM / -errno. */
static int from_index(mt_trace_reader *r)
{
    uint64_t size = r->src.size, index_off, nchunks, nsubmits;
    uint8_t tr[MT_TRAILER_SIZE], b[MT_CHUNK_HEADER_SIZE];
    mt_chunk_header h;
    if (size < MT_FILE_HEADER_SIZE + MT_CHUNK_HEADER_SIZE + MT_TRAILER_SIZE)
        return MT_ETRUNCATED;
    int rc = mti_src_read(&r->src, size - MT_TRAILER_SIZE, tr, sizeof tr);
    if (rc)
        return rc;
    rc = mti_trailer_parse(tr, &index_off, &nchunks, &nsubmits);
    if (rc)
        return rc == MT_ECORRUPT ? MT_ETRUNCATED : rc; /* no trailer: never closed */
    if (index_off < MT_FILE_HEADER_SIZE || index_off > size - MT_TRAILER_SIZE - MT_CHUNK_HEADER_SIZE)
        return MT_ECORRUPT;
    if ((rc = mti_src_read(&r->src, index_off, b, sizeof b)) ||
        (rc = mti_chunk_header_parse(b, r->max_chunk_raw, &h)))
        return rc;
    if (h.kind != MT_CHUNK_INDEX || h.seq != nchunks || h.submits_before != nsubmits ||
        index_off + MT_CHUNK_HEADER_SIZE + h.stored_size != size - MT_TRAILER_SIZE)
        return MT_ECORRUPT;
    /* Every chunk takes at least a header's bytes: this bounds the table by
     * the file's size before anything is decompressed or allocated. */
    if (h.nrecords > (index_off - MT_FILE_HEADER_SIZE) / MT_CHUNK_HEADER_SIZE ||
        (uint64_t)h.nrecords * MT_INDEX_ENTRY_SIZE != h.raw_size)
        return MT_ECORRUPT;
    if ((rc = mti_chunk_payload(r, index_off, &h)))
        return rc;
    if ((rc = index_entries(r, index_off, &h)))
        return rc;
    /* Unknown reasons (a later minor version) read as a checkpoint: complete
     * up to here, and the writer may have gone on. */
    r->info.end = h.end_reason == MT_END_CLOSED       ? MT_TRACE_END_CLOSED
                  : h.end_reason == MT_END_EMERGENCY ? MT_TRACE_END_EMERGENCY
                                                     : MT_TRACE_END_CHECKPOINT;
    return 0;
}

int mti_chunks_load(mt_trace_reader *r)
{
    int rc = from_index(r);
    if (rc == -ENOMEM || (rc < 0 && rc > -4096 && rc != MT_ETRUNCATED))
        return rc;
    if (rc == 0) {
        r->info.indexed = r->info.complete = 1;
        r->info.readable_size = r->src.size;
    } else {
        r->info.index_error = rc;
        if ((rc = scan(r)))
            return rc;
    }
    for (size_t i = 0; i < r->nchunks; i++) {
        r->info.records += r->chunks[i].nrecords;
        r->info.raw_bytes += r->chunks[i].raw_size;
        r->info.stored_bytes += r->chunks[i].stored_size;
    }
    r->info.chunks = r->nchunks;
    r->info.submits = r->nchunks ? r->chunks[r->nchunks - 1].submits_before + r->chunks[r->nchunks - 1].nsubmits : 0;
    return 0;
}

/* Records after the last SUBMIT: those of the chunks after the last chunk
 * holding a SUBMIT, plus those after its last SUBMIT record, found by
 * decoding that one chunk. When it does not decode, all its records count
 * (an upper bound; reading the chunk reports the error). */
void mti_chunks_tail(mt_trace_reader *r)
{
    size_t last = r->nchunks;
    uint64_t tail = 0;
    while (last > 0 && r->chunks[last - 1].nsubmits == 0)
        tail += r->chunks[--last].nrecords;
    if (last == 0) {
        r->info.tail_records = tail;
        return;
    }
    const mt_index_entry *e = &r->chunks[last - 1];
    uint64_t after = e->nrecords;
    mt_chunk_header h;
    if (mti_chunk_read(r, last - 1, &h) == 0) {
        const uint8_t *p = r->raw, *end = r->raw + h.raw_size;
        mt_trace_record rec;
        uint64_t n = 0;
        int rc = 1;
        while (p < end && n < h.nrecords && rc >= 0) {
            rc = mti_record_get(&p, end, &rec);
            n++;
            if (rc == 1 && rec.type == MT_TRACE_SUBMIT)
                after = h.nrecords - n;
        }
    }
    r->info.tail_records = tail + after;
}
