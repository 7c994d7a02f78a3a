/* Fixed-size structures of the trace format: file header, chunk header,
 * trailer, index entries. Every one carries an XXH3-64 of its own bytes, so
 * a reader trusts none of their lengths before the hash matched. */
#include <xxhash.h>

#include "format.h"

void mti_file_header_put(uint8_t out[MT_FILE_HEADER_SIZE], uint32_t max_chunk_raw)
{
    memcpy(out, MT_FILE_MAGIC, 8);
    mti_put16(out + 8, MT_TRACE_VERSION_MAJOR);
    mti_put16(out + 10, MT_TRACE_VERSION_MINOR);
    mti_put32(out + 12, MT_FILE_HEADER_SIZE);
    mti_put32(out + 16, max_chunk_raw);
    mti_put32(out + 20, 0);
    mti_put64(out + 24, XXH3_64bits(out, 24));
}

int mti_file_header_parse(const uint8_t in[MT_FILE_HEADER_SIZE], uint32_t *max_chunk_raw,
                         unsigned *minor)
{
    if (memcmp(in, MT_FILE_MAGIC, 8) != 0 || mti_get64(in + 24) != XXH3_64bits(in, 24))
        return MT_ECORRUPT;
    if (mti_get16(in + 8) != MT_TRACE_VERSION_MAJOR)
        return MT_EVERSION;
    uint32_t mc = mti_get32(in + 16);
    if (mti_get32(in + 12) != MT_FILE_HEADER_SIZE || mc == 0 || mc > MT_TRACE_MAX_CHUNK_RAW)
        return MT_ECORRUPT;
    *max_chunk_raw = mc;
    *minor = mti_get16(in + 10);
    return 0;
}

void mti_chunk_header_put(uint8_t out[MT_CHUNK_HEADER_SIZE], const mt_chunk_header *h)
{
    memcpy(out, MT_CHUNK_MAGIC, 4);
    out[4] = h->kind;
    out[5] = h->codec;
    mti_put16(out + 6, 0);
    mti_put32(out + 8, h->seq);
    mti_put32(out + 12, h->nrecords);
    mti_put32(out + 16, h->stored_size);
    mti_put32(out + 20, h->raw_size);
    mti_put64(out + 24, h->submits_before);
    mti_put32(out + 32, h->nsubmits);
    mti_put32(out + 36, h->end_reason);
    mti_put64(out + 40, h->payload_hash);
    mti_put64(out + 48, XXH3_64bits(out, 48));
}

int mti_chunk_header_parse(const uint8_t in[MT_CHUNK_HEADER_SIZE], uint32_t max_chunk_raw,
                          mt_chunk_header *h)
{
    if (memcmp(in, MT_CHUNK_MAGIC, 4) != 0)
        return MT_ECORRUPT;
    if (mti_get64(in + 48) != XXH3_64bits(in, 48))
        return MT_ECHECKSUM;
    h->kind = in[4];
    h->codec = in[5];
    h->seq = mti_get32(in + 8);
    h->nrecords = mti_get32(in + 12);
    h->stored_size = mti_get32(in + 16);
    h->raw_size = mti_get32(in + 20);
    h->submits_before = mti_get64(in + 24);
    h->nsubmits = mti_get32(in + 32);
    h->end_reason = mti_get32(in + 36);
    h->payload_hash = mti_get64(in + 40);
    if ((h->kind != MT_CHUNK_RECORDS && h->kind != MT_CHUNK_INDEX) ||
        (h->codec != MT_CODEC_RAW && h->codec != MT_CODEC_ZSTD))
        return MT_ECORRUPT;
    /* The index chunk may exceed max_chunk_raw (32 bytes per chunk), never the hard cap. */
    uint32_t cap = h->kind == MT_CHUNK_INDEX ? MT_TRACE_MAX_CHUNK_RAW : max_chunk_raw;
    if (h->raw_size > cap || h->nsubmits > h->nrecords)
        return MT_ECORRUPT;
    /* zstd never expands by more than this on any input (ZSTD_COMPRESSBOUND's
     * margin, restated so the bound does not depend on the zstd version). */
    uint64_t bound = (uint64_t)h->raw_size + (h->raw_size >> 7) + 1024;
    if (h->codec == MT_CODEC_RAW ? h->stored_size != h->raw_size : h->stored_size > bound)
        return MT_ECORRUPT;
    return 0;
}

void mti_trailer_put(uint8_t out[MT_TRAILER_SIZE], uint64_t index_offset, uint64_t nchunks,
                    uint64_t nsubmits)
{
    memcpy(out, MT_TRAILER_MAGIC, 8);
    mti_put64(out + 8, index_offset);
    mti_put64(out + 16, nchunks);
    mti_put64(out + 24, nsubmits);
    mti_put64(out + 32, XXH3_64bits(out, 32));
}

int mti_trailer_parse(const uint8_t in[MT_TRAILER_SIZE], uint64_t *index_offset, uint64_t *nchunks,
                     uint64_t *nsubmits)
{
    if (memcmp(in, MT_TRAILER_MAGIC, 8) != 0)
        return MT_ECORRUPT;
    if (mti_get64(in + 32) != XXH3_64bits(in, 32))
        return MT_ECHECKSUM;
    *index_offset = mti_get64(in + 8);
    *nchunks = mti_get64(in + 16);
    *nsubmits = mti_get64(in + 24);
    return 0;
}

void mti_index_entry_put(uint8_t out[MT_INDEX_ENTRY_SIZE], const mt_index_entry *e)
{
    mti_put64(out, e->offset);
    mti_put64(out + 8, e->submits_before);
    mti_put32(out + 16, e->nsubmits);
    mti_put32(out + 20, e->nrecords);
    mti_put32(out + 24, e->raw_size);
    mti_put32(out + 28, e->stored_size);
}

void mti_index_entry_get(const uint8_t in[MT_INDEX_ENTRY_SIZE], mt_index_entry *e)
{
    e->offset = mti_get64(in);
    e->submits_before = mti_get64(in + 8);
    e->nsubmits = mti_get32(in + 16);
    e->nrecords = mti_get32(in + 20);
    e->raw_size = mti_get32(in + 24);
    e->stored_size = mti_get32(in + 28);
}
