/* The on-disk constants and layouts of docs/trace-format.md, and the byte
 * helpers both the writer and the reader use. Keep the two in this file so
 * they cannot drift apart. */
#ifndef MT_TRACE_FORMAT_H
#define MT_TRACE_FORMAT_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "memtrack/trace.h"

#define MT_FILE_MAGIC "MTTRACE\x1a"
#define MT_FILE_HEADER_SIZE 32u
#define MT_CHUNK_MAGIC "MTCK"
#define MT_CHUNK_HEADER_SIZE 56u
#define MT_TRAILER_MAGIC "MTTRAIL\x1a"
#define MT_TRAILER_SIZE 40u
#define MT_INDEX_ENTRY_SIZE 32u

enum { MT_CHUNK_RECORDS = 1, MT_CHUNK_INDEX = 2 };
enum { MT_CODEC_RAW = 0, MT_CODEC_ZSTD = 1 };

/* Record types above the last known one up to 127 are skipped by readers
 * (a 1.0/1.1 reader skips MISMATCH); 128..255 must be understood. */
#define MT_REC_LAST_KNOWN MT_TRACE_MISMATCH
#define MT_REC_FIRST_CRITICAL 128u

/* Longest varint (u64) and the longest record header (type + body length). */
#define MT_VARINT_MAX 10u
#define MT_REC_HEADER_MAX (1u + MT_VARINT_MAX)

/* How a trace ends: the index chunk's `end_reason` (header bytes 36..39,
 * reserved in 1.0, where writers always wrote 0 = closed). */
enum { MT_END_CLOSED = 0, MT_END_CHECKPOINT = 1, MT_END_EMERGENCY = 2 };

typedef struct mt_chunk_header {
    uint8_t kind, codec;
    uint32_t seq, nrecords, stored_size, raw_size;
    uint64_t submits_before;
    uint32_t nsubmits;
    uint32_t end_reason; /* index chunk: MT_END_*; record chunks: 0, ignored */
    uint64_t payload_hash;
} mt_chunk_header;

typedef struct mt_index_entry {
    uint64_t offset, submits_before;
    uint32_t nsubmits, nrecords, raw_size, stored_size;
} mt_index_entry;

static inline void mti_put16(uint8_t *p, uint16_t v) { p[0] = (uint8_t)v; p[1] = (uint8_t)(v >> 8); }
static inline void mti_put32(uint8_t *p, uint32_t v)
{
    for (int i = 0; i < 4; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}
static inline void mti_put64(uint8_t *p, uint64_t v)
{
    for (int i = 0; i < 8; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}
static inline uint16_t mti_get16(const uint8_t *p) { return (uint16_t)(p[0] | p[1] << 8); }
static inline uint32_t mti_get32(const uint8_t *p)
{
    uint32_t v = 0;
    for (int i = 3; i >= 0; i--)
        v = v << 8 | p[i];
    return v;
}
static inline uint64_t mti_get64(const uint8_t *p)
{
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--)
        v = v << 8 | p[i];
    return v;
}

/* Bytes a varint of v takes. */
static inline size_t mti_varint_len(uint64_t v)
{
    size_t n = 1;
    while (v >= 0x80) {
        v >>= 7;
        n++;
    }
    return n;
}

/* Writes v at p (room for MT_VARINT_MAX); returns the bytes written. */
static inline size_t mti_varint_put(uint8_t *p, uint64_t v)
{
    size_t n = 0;
    while (v >= 0x80) {
        p[n++] = (uint8_t)(v | 0x80);
        v >>= 7;
    }
    p[n++] = (uint8_t)v;
    return n;
}

/* Reads a varint from [*p, end). Returns 0 and advances *p, or -1 when the
 * bytes run out or the encoding exceeds 64 bits. */
static inline int mti_varint_get(const uint8_t **p, const uint8_t *end, uint64_t *out)
{
    uint64_t v = 0;
    const uint8_t *q = *p;
    for (unsigned i = 0; i < MT_VARINT_MAX; i++) {
        if (q >= end)
            return -1;
        uint8_t b = *q++;
        if (i == MT_VARINT_MAX - 1 && b > 1)
            return -1; /* a 10th byte holds bit 63 only */
        v |= (uint64_t)(b & 0x7f) << (7 * i);
        if (!(b & 0x80)) {
            *p = q;
            *out = v;
            return 0;
        }
    }
    return -1;
}

/* File header, chunk header and trailer (de)serialisation: format.c. */
void mti_file_header_put(uint8_t out[MT_FILE_HEADER_SIZE], uint32_t max_chunk_raw);
/* Returns 0 and the max_chunk_raw, or MT_ECORRUPT / MT_EVERSION. */
int mti_file_header_parse(const uint8_t in[MT_FILE_HEADER_SIZE], uint32_t *max_chunk_raw,
                         unsigned *minor);
void mti_chunk_header_put(uint8_t out[MT_CHUNK_HEADER_SIZE], const mt_chunk_header *h);
/* Checks magic, header hash, kind, codec and size bounds. Returns 0,
 * MT_ECORRUPT or MT_ECHECKSUM. */
int mti_chunk_header_parse(const uint8_t in[MT_CHUNK_HEADER_SIZE], uint32_t max_chunk_raw,
                          mt_chunk_header *h);
void mti_trailer_put(uint8_t out[MT_TRAILER_SIZE], uint64_t index_offset, uint64_t nchunks,
                    uint64_t nsubmits);
/* Returns 0, MT_ECORRUPT (no trailer magic) or MT_ECHECKSUM. */
int mti_trailer_parse(const uint8_t in[MT_TRAILER_SIZE], uint64_t *index_offset, uint64_t *nchunks,
                     uint64_t *nsubmits);
void mti_index_entry_put(uint8_t out[MT_INDEX_ENTRY_SIZE], const mt_index_entry *e);
void mti_index_entry_get(const uint8_t in[MT_INDEX_ENTRY_SIZE], mt_index_entry *e);

/* Record encoding (record_enc.c). Bytes the record takes, or 0 when it is
 * invalid (NULL data with a length, text over the limit, unknown type). */
size_t mti_record_size(const mt_trace_record *rec);
/* Encodes into out (room for mti_record_size bytes); returns bytes written. */
size_t mti_record_put(uint8_t *out, const mt_trace_record *rec);

/* Record decoding (record_dec.c). Decodes the record at [*p, end): returns 1
 * and advances *p, 0 when the record's type is unknown but skippable (*p
 * advanced past it), MT_ECORRUPT, or MT_EVERSION for a critical unknown type. */
int mti_record_get(const uint8_t **p, const uint8_t *end, mt_trace_record *rec);

#endif
