/* Private state of a trace reader (reader.c, chunks.c, source.c). */
#ifndef MT_TRACE_READER_H
#define MT_TRACE_READER_H

#include <zstd.h>

#include "format.h"

/* Where the bytes come from: a file (pread) or caller memory. */
typedef struct mt_src {
    int fd; /* -1 for memory */
    const uint8_t *mem;
    uint64_t size;
} mt_src;

/* Copies n bytes at off. Returns 0, MT_ETRUNCATED (past the end, e.g. the
 * file shrank) or -errno. */
int mti_src_read(const mt_src *s, uint64_t off, void *buf, size_t n);

struct mt_trace_reader {
    mt_src src;
    uint32_t max_chunk_raw;
    mt_trace_info info;
    mt_index_entry *chunks; /* the record chunks, validated */
    size_t nchunks;

    /* Iteration. */
    size_t next_chunk;        /* chunk to load when the current one ends */
    int loaded;               /* a chunk is loaded: pos/end/hdr valid */
    mt_chunk_header hdr;      /* the loaded chunk's header */
    const uint8_t *pos, *end; /* records left in it */
    uint32_t seen_records, seen_submits;
    int err;                  /* sticky until seek/rewind */
    uint64_t skipped;         /* records of unknown (skippable) types */

    uint8_t *raw, *stored;
    size_t raw_cap, stored_cap;
    ZSTD_DCtx *dctx;

    /* Header metadata: NUL-terminated copies. */
    char *meta_buf;
    const char **meta; /* key0, value0, key1, value1, ... */
    size_t nmeta;
};

/* Builds r->chunks from the index (or by scanning headers) and fills
 * r->info. Returns 0 or -ENOMEM / -errno; format problems only set
 * info.index_error / info.tail_error. */
int mti_chunks_load(mt_trace_reader *r);

/* Sets info.tail_records (decodes at most one chunk). */
void mti_chunks_tail(mt_trace_reader *r);

/* Reads, checks and decompresses record chunk i into r->raw. Returns 0 or
 * MT_ECORRUPT / MT_ECHECKSUM / MT_ETRUNCATED / -errno / -ENOMEM. */
int mti_chunk_read(mt_trace_reader *r, size_t i, mt_chunk_header *h);

/* Reads, checks and decompresses a chunk of any kind at `off` whose header
 * was parsed into *h, into *raw (grown as needed, bounded by the header's
 * raw_size). */
int mti_chunk_payload(mt_trace_reader *r, uint64_t off, const mt_chunk_header *h);

#endif
