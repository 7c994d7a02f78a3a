/* memtrack diff: exact byte-level changes between a live range and its shadow.
 *
 * The capture side keeps a shadow copy of each memory it watches. At a submit
 * it hands mt_diff() the live memory, the shadow and the candidate regions
 * (typically the dirty page runs a tracker reported, as plain offset/length
 * pairs: diff does not depend on track). mt_diff() returns the byte runs that
 * changed, merging runs separated by fewer than `merge_gap` unchanged bytes,
 * and brings the shadow up to date for exactly what it reported, so the
 * packet bytes can be read from the shadow (a stable snapshot) afterwards.
 *
 * Write-back: a caller that handed the application a shadow mapping and must
 * propagate its writes to the real (driver) mapping sets job.writeback; only
 * the bytes that really changed are copied there, never whole pages and never
 * the unchanged bytes a merged run spans, so GPU writes to other bytes of the
 * same page survive. See docs/diff.md.
 *
 * Hash mode (mt_diff_hashes): no shadow copy, one XXH3-64 per chunk; reports
 * whole changed chunks. For memory-tight users; see docs/diff.md for its
 * collision risk and cost.
 *
 * Replay side: mt_diff_apply() writes packets onto a base image;
 * apply(diff(a -> b)) == b. */
#ifndef MEMTRACK_DIFF_H
#define MEMTRACK_DIFF_H

#include <stddef.h>
#include <stdint.h>

#include "memtrack/base.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Default merge gap in bytes: changed runs separated by fewer unchanged bytes
 * are reported as one run (docs/diff.md explains the choice). */
#define MT_DIFF_DEFAULT_MERGE_GAP 32u
/* Default chunk size of hash mode, in bytes. */
#define MT_DIFF_DEFAULT_HASH_CHUNK 1024u

/* Bytes [offset, offset + length) of a range: a candidate region on input, a
 * changed run on output. */
typedef struct mt_diff_region {
    size_t offset;
    size_t length;
} mt_diff_region;

/* mt_diff_opts.flags */
enum {
    /* `live` is write-combined or uncached memory (a GPU's memory mapped
     * through the PCI BAR): each stretch of it is read once, with streaming
     * loads (mt_diff_read_wc), into a buffer the compare then reads. About
     * 11x faster there; on ordinary memory a needless extra copy. */
    MT_DIFF_LIVE_WC = 1u << 0,
};

typedef struct mt_diff_opts {
    /* Runs separated by fewer than merge_gap unchanged bytes are merged.
     * 0 = MT_DIFF_DEFAULT_MERGE_GAP; 1 = exact runs (nothing merged). */
    size_t merge_gap;
    uint32_t flags;       /* MT_DIFF_LIVE_WC, or 0 */
    uint32_t reserved32;  /* zero */
    uint64_t reserved[3]; /* zero: room to grow (docs/design.md, "Options") */
} mt_diff_opts;

/* One diff of one range. Fill it, call mt_diff() until it returns less than
 * `max` (or job.cursor == job.size). */
typedef struct mt_diff_job {
    const void *live;  /* current content (what the application wrote) */
    void *shadow;      /* previous content; updated for every reported run */
    size_t size;       /* bytes of live and shadow */
    /* Regions to examine: sorted by offset, non-overlapping, inside [0, size).
     * NULL (with ncandidates 0) examines the whole range. */
    const mt_diff_region *candidates;
    size_t ncandidates;
    /* Optional: exactly the changed bytes are also copied here (write-back to
     * a driver mapping of `size` bytes). NULL = no write-back. */
    void *writeback;
    /* In/out: offset to resume from; 0 for a new job. Set to `size` when the
     * job is complete, else to the start of the first unreported change. */
    size_t cursor;
} mt_diff_job;

/* A packet for mt_diff_apply(): `length` bytes at `data` go to `offset`. */
typedef struct mt_diff_packet {
    size_t offset;
    size_t length;
    const void *data;
} mt_diff_packet;

typedef struct mt_diff_hashes mt_diff_hashes;

typedef struct mt_diff_hash_opts {
    size_t chunk_size; /* bytes per hashed chunk, >= 64; 0 = MT_DIFF_DEFAULT_HASH_CHUNK */
    uint64_t reserved[4]; /* zero: room to grow (docs/design.md, "Options") */
} mt_diff_hash_opts;

/* Copies n bytes from src, write-combined or uncached memory (a GPU's
 * memory mapped through the PCI BAR), to dst with streaming loads where the
 * CPU has them (x86-64 with SSE4.1: each 64-byte line read from the bus
 * once), else as memcpy. Measured on an H200's device-local host-visible
 * memory: 0.60 GB/s against memcpy's 0.055. Any thread. */
MT_API void mt_diff_read_wc(void *dst, const void *src, size_t n);

/* Compares job->live with job->shadow over the candidate regions and fills
 * up to `max` changed runs (sorted, merged per opts->merge_gap; opts may be
 * NULL). For each reported run the shadow is brought up to date (and the
 * changed bytes copied to job->writeback); unreported changes stay pending
 * and job->cursor says where to resume. Returns the number of runs, or
 * -EINVAL (NULL pointers, unsorted/overlapping/out-of-range candidates).
 * Any thread; the caller serialises calls on the same shadow. */
MT_API long mt_diff(mt_diff_job *job, const mt_diff_opts *opts, mt_diff_region *out, size_t max);

/* Writes each packet's bytes onto `base` (`size` bytes). Every packet is
 * checked against `size` before anything is written: returns 0, or -EINVAL
 * when one lies outside (base is then unchanged). Any thread. */
MT_API int mt_diff_apply(void *base, size_t size, const mt_diff_packet *packets, size_t n);

/* Name of the compare kernel mt_diff() uses on this CPU: "avx2" or "sse2"
 * (x86-64), "scalar" elsewhere. Any thread. */
MT_API const char *mt_diff_isa(void);

/* Hash mode: hashes the `size` bytes at `live` in chunks (the baseline) and
 * returns the hash table in *out. Memory cost: 8 bytes per chunk. Returns 0,
 * -EINVAL or -ENOMEM. Any thread. */
MT_API int mt_diff_hashes_create(const void *live, size_t size, const mt_diff_hash_opts *opts,
                                 mt_diff_hashes **out);

/* Hash-mode diff: rehashes the chunks that overlap job's candidates and fills
 * up to `max` runs of whole changed chunks (adjacent ones merged; the last
 * one clipped to the size). job->shadow and job->writeback must be NULL and
 * job->size the size given at creation. Resumes like mt_diff(). Returns the
 * number of runs or -EINVAL. Any thread; one caller at a time per table. */
MT_API long mt_diff_hashed(mt_diff_hashes *h, mt_diff_job *job, mt_diff_region *out, size_t max);

/* The chunk size of a hash table (bytes). Any thread. */
MT_API size_t mt_diff_hashes_chunk_size(const mt_diff_hashes *h);

/* Frees a hash table. NULL is a no-op. */
MT_API void mt_diff_hashes_destroy(mt_diff_hashes *h);

#ifdef __cplusplus
}
#endif
#endif
