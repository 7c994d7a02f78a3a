/* memtrack trace: a compact, checksummed, compressed record of what an
 * application handed the GPU, and the tools to read and replay it.
 *
 * Format: docs/trace-format.md. Records (memory/object created, bound,
 * mapped, unmapped, update packet, submit and frame markers, destroyed,
 * annotation, content hash, capture mode, metadata) are packed into chunks;
 * each chunk is one zstd frame with an XXH3-64 checksum; an index of submits
 * closes the file.
 *
 * Writer: callers append records from any thread; compressor threads
 * compress sealed chunks in parallel and write them in order, so a caller
 * only waits when the bounded queue of chunks is full. What survives which
 * kind of exit (docs/trace-format.md, "Crash safety"): every chunk written
 * (a kill -9 or a power cut keeps those; mt_trace_writer_opts.seal_interval_ms
 * bounds how old the newest one is), everything appended before
 * mt_trace_writer_checkpoint() (readable as a complete trace), and, where the
 * dying process gets to run mt_trace_writer_emergency_flush() (fatal signal
 * handler, _exit/exec wrapper), everything appended before it.
 *
 * Reader: validates everything it reads (corrupt or truncated input gives
 * MT_ECORRUPT, MT_ECHECKSUM, MT_ETRUNCATED or MT_EVERSION, never a crash or an
 * unbounded allocation); iterates records, seeks to submit N through the index
 * (rebuilt by scanning chunk headers when the writer died before writing it),
 * and replays update packets to reconstruct any memory at any submit.
 *
 * Ordering contract for a submit (what the replayer and verify rely on): the
 * UPDATE records of submit N, then its CONTENT_HASH records, then the SUBMIT
 * record N. Writer calls from several threads interleave record by record;
 * a caller that needs a group of records together serialises them itself. */
#ifndef MEMTRACK_TRACE_H
#define MEMTRACK_TRACE_H

#include <stddef.h>
#include <stdint.h>

#include "memtrack/base.h"

#ifdef __cplusplus
extern "C" {
#endif

#define MT_TRACE_VERSION_MAJOR 1
#define MT_TRACE_VERSION_MINOR 1
/* Largest uncompressed chunk a writer produces and a reader accepts. */
#define MT_TRACE_MAX_CHUNK_RAW (64u << 20)
/* Largest META/ANNOTATION/MODE text. */
#define MT_TRACE_MAX_TEXT (64u << 10)

typedef enum mt_trace_rec_type {
    MT_TRACE_META = 1,         /* key/value metadata */
    MT_TRACE_MEMORY = 2,       /* memory created */
    MT_TRACE_OBJECT = 3,       /* buffer/image created */
    MT_TRACE_BIND = 4,         /* object bound to memory */
    MT_TRACE_MAP = 5,          /* memory mapped */
    MT_TRACE_UNMAP = 6,        /* memory unmapped */
    MT_TRACE_UPDATE = 7,       /* update packet: bytes written into a memory */
    MT_TRACE_SUBMIT = 8,       /* queue submit marker */
    MT_TRACE_FRAME = 9,        /* frame marker (present) */
    MT_TRACE_DESTROY = 10,     /* memory or object destroyed */
    MT_TRACE_ANNOTATION = 11,  /* free-form text */
    MT_TRACE_CONTENT_HASH = 12, /* XXH3-64 of a memory's real content at a submit */
    MT_TRACE_MODE = 13,        /* capture mode of a memory from here on */
    MT_TRACE_MISMATCH = 14,    /* bytes whose real content differed from the capture, and why */
} mt_trace_rec_type;

enum { MT_TRACE_OBJECT_BUFFER = 1, MT_TRACE_OBJECT_IMAGE = 2 };
enum { MT_TRACE_DESTROY_MEMORY = 1, MT_TRACE_DESTROY_OBJECT = 2 };

/* Why a MISMATCH's bytes differed, at the instant of the submit's content
 * hash, from what the capture recorded for that submit. The first two are
 * legal and not failures: the bytes changed while the capture ran and are
 * captured at the next submit; the CONTENT_HASH that follows covers the
 * captured bytes there. LOST is a write the capture missed: the hash covers
 * the real bytes, so verify fails. */
enum {
    MT_TRACE_MISMATCH_HOST = 1,   /* written by the host while the capture ran (a race) */
    MT_TRACE_MISMATCH_DEVICE = 2, /* device-writable bytes, device work possibly still running */
    MT_TRACE_MISMATCH_LOST = 3,   /* unexplained: a write the capture missed */
};

/* One record. Pointers (data, text) point into the reader's buffers and stay
 * valid until the next call on that reader; writers copy what they are given.
 * Text is not NUL-terminated: use the lengths. */
typedef struct mt_trace_record {
    mt_trace_rec_type type;
    union {
        struct { const char *key, *value; size_t key_len, value_len; } meta;
        struct { uint64_t id, size; uint32_t type_index, property_flags; } memory;
        struct { uint64_t id; uint32_t kind; uint64_t size, used_size; } object;
        struct { uint64_t object, memory, offset; } bind;
        struct { uint64_t memory, offset, size; } map;
        struct { uint64_t memory; } unmap;
        struct { uint64_t memory, object, offset; const void *data; size_t length; } update;
        struct { uint64_t index, queue; } submit;  /* index: assigned by the writer */
        struct { uint64_t index; } frame;          /* index: assigned by the writer */
        struct { uint32_t what; uint64_t id; } destroy;
        struct { uint64_t id; const char *text; size_t length; } annotation;
        struct { uint64_t memory, offset, size, hash; } content_hash; /* bytes [offset, offset+size) */
        struct { uint64_t memory; const char *mode; size_t length; } mode;
        /* bytes [offset, offset+length) of memory, object bound there (0 if
         * none); running: submits not yet known complete (DEVICE) */
        struct { uint64_t memory, object, offset, length; uint32_t cause; uint64_t running; } mismatch;
    } u;
} mt_trace_record;

/* ---- writer ---------------------------------------------------------------- */

typedef struct mt_trace_writer mt_trace_writer;

typedef struct mt_trace_kv {
    const char *key, *value;
} mt_trace_kv;

enum {
    MT_TRACE_NO_COMPRESS = 1u << 0, /* store chunks raw: same as MT_TRACE_COMPRESSION_NONE */
    MT_TRACE_SYNC = 1u << 1,        /* flush, checkpoint, close and the emergency flush
                                       also fdatasync the file */
};

/* Compression presets (`memtrack record --compression`, MEMTRACK_COMPRESSION).
 * Chunks stay independently decodable zstd frames whatever the preset. */
typedef enum mt_trace_compression {
    MT_TRACE_COMPRESSION_DEFAULT = 0, /* zstd level 1; a chunk that finds the
                                         compressors behind (half the queue
                                         waiting) gets FAST's level instead, so
                                         a burst costs size, not the caller's
                                         time */
    MT_TRACE_COMPRESSION_FAST = 1,    /* zstd level -3: ~3x faster, larger trace */
    MT_TRACE_COMPRESSION_NONE = 2,    /* stored raw: only hashing and writing */
} mt_trace_compression;

typedef struct mt_trace_writer_opts {
    size_t chunk_size;    /* raw bytes per chunk; 0 = 1 MiB; 512 B .. 63 MiB */
    unsigned queue_depth; /* chunks sealed but not yet in the file; 0 = 64; at most 4096 */
    int level;            /* zstd level for every chunk, overriding the preset
                             (and DEFAULT's adaptation); 0 = the preset's */
    uint32_t flags;       /* MT_TRACE_* above */
    const mt_trace_kv *meta; /* header metadata, written first */
    size_t nmeta;
    mt_trace_compression compression; /* 0 = MT_TRACE_COMPRESSION_DEFAULT */
    unsigned threads;     /* compressor threads; 0 = half the online CPUs, 1 to 8
                             (at most 2 when storing raw); at most 64 */
    unsigned seal_interval_ms; /* a SUBMIT seals its chunk (and a compressor writes
                             it soon after) when at least this long passed since
                             the last seal: bounds what a kill -9 loses. 0 = seal
                             full chunks only. At most 3600000 */
    uint64_t reserved[4]; /* zero: room to grow (docs/design.md, "Options") */
} mt_trace_writer_opts;

/* Memory: at most (queue_depth + 1) chunk buffers of chunk_size + 128 KiB,
 * allocated only when callers get ahead of the compressors (reused
 * most-recently-freed first), plus per thread a zstd context and a
 * compression buffer of ~chunk_size, plus 32 bytes per chunk written (the
 * index). Defaults: at most 65 x 1.125 MiB + 8 x ~2 MiB. */

typedef struct mt_trace_writer_stats {
    uint64_t records;     /* records appended */
    uint64_t submits;     /* SUBMIT records appended */
    uint64_t raw_bytes;   /* encoded record bytes (before compression) */
    uint64_t file_bytes;  /* end of the last chunk written (an index after it
                             is not counted) */
    uint64_t chunks;      /* record chunks written */
    uint64_t stalls;      /* times a caller waited because the queue was full */
    uint64_t fast_chunks; /* chunks the DEFAULT preset compressed at FAST's level
                             because the compressors were behind */
} mt_trace_writer_stats;

/* Creates `path` and starts a writer with its compressor threads. The file
 * is opened without truncating it, locked (flock, exclusive, for as long
 * as the writer lives) and only then truncated: one trace per file, never
 * two writers in it. opts may be NULL. Any thread. Returns 0 and sets
 * *out, or
 *   -EBUSY    another open file (another process, or another writer in this
 *             one) holds the lock: it is writing this trace; choose another
 *             path (e.g. NAME.PID.mtrace)
 *   -ESPIPE   not a regular file (FIFO, socket, device such as /dev/full):
 *             a trace must be seekable; a FIFO never blocks the open
 *   -EISDIR, -EACCES, -EROFS, -ENOENT, -ENOSPC, ... from open/ftruncate/write
 *   -EINVAL   bad opts, -ENOMEM. */
MT_API int mt_trace_writer_open(const char *path, const mt_trace_writer_opts *opts,
                                mt_trace_writer **out);

/* As mt_trace_writer_open on an fd opened for writing; the writer writes it
 * from offset 0 with pwrite (no lock, no truncation: the caller's choice)
 * and owns the fd from then on (closed by mt_trace_writer_close), also when
 * this fails. It may move it to another number, above the ones an
 * application uses (close-on-exec; docs/layer.md, "Descriptors"). */
MT_API int mt_trace_writer_open_fd(int fd, const mt_trace_writer_opts *opts,
                                   mt_trace_writer **out);

/* "default", "fast" or "none" to a preset: 0, or -EINVAL for other names. */
MT_API int mt_trace_compression_parse(const char *name, mt_trace_compression *out);

/* The preset's name ("default", "fast", "none"). */
MT_API const char *mt_trace_compression_name(mt_trace_compression c);

/* Appends one record (any type; SUBMIT and FRAME get the writer's next index,
 * whatever rec holds). Updates larger than a chunk are split into several
 * records. Returns 0, -EINVAL (bad record, text over MT_TRACE_MAX_TEXT), or
 * the error that stopped the writer (e.g. -ENOSPC from the disk). Any thread. */
MT_API int mt_trace_write(mt_trace_writer *w, const mt_trace_record *rec);

/* Typed shorthands for mt_trace_write; same returns, any thread. */
MT_API int mt_trace_write_memory(mt_trace_writer *w, uint64_t id, uint64_t size,
                                 uint32_t type_index, uint32_t property_flags);
MT_API int mt_trace_write_object(mt_trace_writer *w, uint64_t id, uint32_t kind, uint64_t size,
                                 uint64_t used_size);
MT_API int mt_trace_write_bind(mt_trace_writer *w, uint64_t object, uint64_t memory,
                               uint64_t offset);
MT_API int mt_trace_write_map(mt_trace_writer *w, uint64_t memory, uint64_t offset, uint64_t size);
MT_API int mt_trace_write_unmap(mt_trace_writer *w, uint64_t memory);
/* object may be 0 (not attributed). */
MT_API int mt_trace_write_update(mt_trace_writer *w, uint64_t memory, uint64_t object,
                                 uint64_t offset, const void *data, size_t length);
MT_API int mt_trace_write_destroy(mt_trace_writer *w, uint32_t what, uint64_t id);
MT_API int mt_trace_write_annotation(mt_trace_writer *w, uint64_t id, const char *text);
/* hash: mt_trace_hash() of the memory's bytes [offset, offset + size). */
MT_API int mt_trace_write_content_hash(mt_trace_writer *w, uint64_t memory, uint64_t offset,
                                       uint64_t size, uint64_t hash);
MT_API int mt_trace_write_mode(mt_trace_writer *w, uint64_t memory, const char *mode);
/* cause: MT_TRACE_MISMATCH_*; written before the submit's CONTENT_HASH of
 * that memory. */
MT_API int mt_trace_write_mismatch(mt_trace_writer *w, uint64_t memory, uint64_t object,
                                   uint64_t offset, uint64_t length, uint32_t cause,
                                   uint64_t running);
MT_API int mt_trace_write_meta(mt_trace_writer *w, const char *key, const char *value);

/* Appends a SUBMIT record for `queue`; stores its index in *index (may be
 * NULL). Indices count from 0 in write order. Any thread. */
MT_API int mt_trace_write_submit(mt_trace_writer *w, uint64_t queue, uint64_t *index);

/* Appends a FRAME record; its index (from 0) in *index (may be NULL). */
MT_API int mt_trace_write_frame(mt_trace_writer *w, uint64_t *index);

/* The hash CONTENT_HASH records carry: XXH3-64 (seed 0) of `size` bytes. */
MT_API uint64_t mt_trace_hash(const void *data, size_t size);

/* Hands the records appended so far to the compressors and waits until they
 * are in the file (and on disk with MT_TRACE_SYNC). Returns 0 or the writer's
 * error. Any thread; not from a signal handler. */
MT_API int mt_trace_writer_flush(mt_trace_writer *w);

/* Makes everything appended so far a complete trace in the file: flushes,
 * then writes the index and trailer after the last chunk (a reader reports
 * end = MT_TRACE_END_CHECKPOINT). Appending goes on: the next chunk is
 * written over that index (truncated first, so a crash later still reads
 * back up to the last complete chunk). Cost: the flush plus one write of 32
 * bytes per chunk in the trace. For device destruction, exec, any moment a
 * complete trace should be on disk. Any thread; not from a signal handler.
 * Returns 0 or the writer's error. */
MT_API int mt_trace_writer_checkpoint(mt_trace_writer *w);

/* For a dying process: call from a fatal-signal handler (SIGSEGV, SIGTERM,
 * SIGINT, ... before the default action), or from an _exit/exec wrapper.
 * Writes after the last chunk in the file, in order, every chunk not yet
 * there (compressed if a compressor finished it, raw otherwise), the chunk
 * being filled up to its last complete record, then the index and trailer
 * (end = MT_TRACE_END_EMERGENCY). Async-signal-safe: no lock, no malloc;
 * waits at most timeout_ms for a compressor to finish a write in progress,
 * then never lets one write again. Never corrupts what is in the file
 * already. Afterwards appends fail with -ECANCELED; close only frees.
 * Returns 0 (the trace holds every record appended before the call),
 *   -ETIMEDOUT  a write in progress did not end in time (nothing written),
 *               or a chunk could not be had in time (those before it are
 *               written and indexed),
 *   -EDEADLK    this thread was itself writing the file (nothing written),
 *   -ESHUTDOWN  mt_trace_writer_close had begun,
 *   -ECHILD     called in a forked child on the parent's writer (nothing is
 *               written: the file is the parent's),
 *   or the writer's earlier error (e.g. -ENOSPC: nothing can follow it) or
 *   a write error. A second call (another crashing thread) waits, within
 *   its own timeout, for the first and returns its result. */
MT_API int mt_trace_writer_emergency_flush(mt_trace_writer *w, unsigned timeout_ms);

/* In a forked child (e.g. a pthread_atfork child handler): drops the writer
 * inherited from the parent without touching the file (no write, truncate
 * or unlock: the parent's trace and lock are unaffected), joining threads
 * (they do not exist in the child) or freeing memory (it may be in the
 * middle of use by a parent thread's copy): closes the child's copy of the
 * fd and leaves the rest allocated (copy-on-write pages the child never
 * touches). w must not be used again in the child. Async-signal-safe. NULL
 * is a no-op. (A child that does not call it is not left hanging: in the child
 * every call on w returns -ECHILD without touching its locks, and close
 * abandons it.) */
MT_API void mt_trace_writer_abandon(mt_trace_writer *w);

/* Copies the writer's counters. Any thread. */
MT_API void mt_trace_writer_stats_get(mt_trace_writer *w, mt_trace_writer_stats *out);

/* Flushes, writes the index and trailer (end = MT_TRACE_END_CLOSED), stops
 * the threads, closes the file (releasing its lock) and frees the writer.
 * Returns 0 or the first error the writer met (the writer is freed either
 * way); after an emergency flush, that flush's result (nothing is written).
 * No other call on w may run concurrently or follow, except an emergency
 * flush, which then returns -ESHUTDOWN. NULL is a no-op returning 0. */
MT_API int mt_trace_writer_close(mt_trace_writer *w);

/* ---- reader ---------------------------------------------------------------- */

typedef struct mt_trace_reader mt_trace_reader;

typedef struct mt_trace_reader_opts {
    uint64_t reserved[4]; /* zero: room to grow (docs/design.md, "Options") */
} mt_trace_reader_opts;

/* How a trace ends (mt_trace_info.end). */
typedef enum mt_trace_end {
    MT_TRACE_END_SCANNED = 0,    /* no valid index and trailer: the writer died (or the
                                    index is damaged: index_error); read up to the last
                                    complete chunk, found by scanning */
    MT_TRACE_END_CLOSED = 1,     /* closed by mt_trace_writer_close: holds every record
                                    appended */
    MT_TRACE_END_CHECKPOINT = 2, /* ends with a checkpoint's index: complete up to it;
                                    the writer was still running and may have appended
                                    more that never reached the file */
    MT_TRACE_END_EMERGENCY = 3,  /* ends with an emergency flush's index: the process
                                    was dying; holds what was appended before it */
} mt_trace_end;

typedef struct mt_trace_info {
    unsigned version_major, version_minor;
    uint64_t file_size;
    uint64_t readable_size; /* file prefix holding the header and complete chunks */
    uint64_t chunks;        /* complete record chunks */
    uint64_t records;       /* records in them (from chunk headers) */
    uint64_t submits;       /* SUBMIT records in them: submits 0 .. submits-1 are
                               complete */
    uint64_t raw_bytes;     /* their uncompressed payload */
    uint64_t stored_bytes;  /* their stored payload */
    int indexed;            /* 1: the writer's index was used */
    int complete;           /* 1: ends with a valid index and trailer (end != SCANNED) */
    int index_error;        /* why the index was not used: 0, MT_ETRUNCATED (none
                               there), MT_ECHECKSUM, MT_ECORRUPT */
    int tail_error;         /* why reading stops before the end of the file, or 0 */
    mt_trace_end end;       /* how the trace ends */
    uint64_t tail_records;  /* records after the last SUBMIT: a submit whose capture
                               was cut short unless end is CLOSED (where they are
                               teardown records: destroys, unmaps) */
} mt_trace_info;

/* For a verifier: the trace is complete when end == MT_TRACE_END_CLOSED and
 * tail_error == 0; otherwise what it holds is exact only up to SUBMIT
 * submits-1 ("exact but incomplete"). */

/* Opens a trace file. Reads the header and the index (or scans chunk headers
 * when the index is missing or damaged: see info.end), and decodes the last
 * chunk holding a SUBMIT (for info.tail_records). Returns 0 and
 * sets *out, or -errno, MT_ECORRUPT, MT_ECHECKSUM, MT_ETRUNCATED, MT_EVERSION
 * when not even the file header is usable. opts may be NULL. Any thread; a
 * reader is used by one thread at a time. */
MT_API int mt_trace_reader_open(const char *path, const mt_trace_reader_opts *opts,
                                mt_trace_reader **out);

/* As mt_trace_reader_open over `size` bytes in memory, which must stay valid
 * and unchanged until mt_trace_reader_close. */
MT_API int mt_trace_reader_open_mem(const void *data, size_t size, const mt_trace_reader_opts *opts,
                                    mt_trace_reader **out);

/* Closes a reader. NULL is a no-op. */
MT_API void mt_trace_reader_close(mt_trace_reader *r);

/* Copies what the reader learnt when it opened the trace. */
MT_API void mt_trace_reader_info(const mt_trace_reader *r, mt_trace_info *out);

/* Header metadata entry i (the META records at the start of the trace), NUL
 * terminated. Returns 0, or -ENOENT past the last one. */
MT_API int mt_trace_meta_at(const mt_trace_reader *r, size_t i, const char **key,
                            const char **value);

/* Value of header metadata `key`, or NULL. */
MT_API const char *mt_trace_meta_get(const mt_trace_reader *r, const char *key);

/* One complete record chunk, as the index (or the scan of chunk headers)
 * describes it: where it lies, what it holds and how well it compressed. */
typedef struct mt_trace_chunk_info {
    uint64_t offset;         /* of its header in the file */
    uint64_t submits_before; /* SUBMIT records in the chunks before it */
    uint32_t submits;        /* SUBMIT records in it */
    uint32_t records;        /* records in it */
    uint32_t raw_bytes;      /* payload once decompressed */
    uint32_t stored_bytes;   /* payload as stored (= raw_bytes when stored raw) */
} mt_trace_chunk_info;

/* Describes record chunk i (0 .. info.chunks-1) without reading it. Returns
 * 0, or -ENOENT past the last one. For tools that chart a trace's layout
 * (`memtrack report`). */
MT_API int mt_trace_chunk_at(const mt_trace_reader *r, size_t i, mt_trace_chunk_info *out);

/* Reads the next record into *rec. Returns 1, 0 at the end of the readable
 * records, or an error (MT_ECHECKSUM, MT_ECORRUPT, MT_EVERSION, -EIO, ...),
 * which repeats until the next seek. rec's pointers stay valid until the
 * next call on r. */
MT_API int mt_trace_next(mt_trace_reader *r, mt_trace_record *rec);

/* Positions the reader so that mt_trace_next returns the records of submit n:
 * those after SUBMIT n-1 (the start of the trace for n = 0), up to and
 * including SUBMIT n. n may equal info.submits (the records after the last
 * submit). Decompresses one chunk. Returns 0, -ENOENT (n > submits) or a
 * chunk error. */
MT_API int mt_trace_seek_submit(mt_trace_reader *r, uint64_t n);

/* Back to the first record. Returns 0. */
MT_API int mt_trace_rewind(mt_trace_reader *r);

/* ---- replay ---------------------------------------------------------------- */

typedef struct mt_trace_replay mt_trace_replay;

enum {
    MT_TRACE_REPLAY_VERIFY = 1u << 0,    /* check CONTENT_HASH records against the images */
    MT_TRACE_REPLAY_NO_IMAGES = 1u << 1, /* keep no memory images: check structure only */
};

typedef struct mt_trace_replay_opts {
    uint64_t only_memory; /* 0: keep images of every memory; else of this one only */
    uint64_t max_bytes;   /* budget for memory images; 0 = 4 GiB */
    uint32_t flags;       /* MT_TRACE_REPLAY_* */
    uint64_t reserved[4]; /* zero: room to grow (docs/design.md, "Options") */
} mt_trace_replay_opts;

typedef struct mt_trace_replay_stats {
    uint64_t records, submits, updates, update_bytes;
    uint64_t hashes_checked, hashes_mismatched;
    uint64_t first_mismatch_submit, first_mismatch_memory; /* valid when mismatched > 0 */
    uint64_t image_bytes; /* memory images allocated now */
} mt_trace_replay_stats;

/* Starts a replay of r from its first record (r is rewound and then owned by
 * the replay until mt_trace_replay_destroy). opts may be NULL. Returns 0,
 * -EINVAL or -ENOMEM. One thread at a time. */
MT_API int mt_trace_replay_create(mt_trace_reader *r, const mt_trace_replay_opts *opts,
                                  mt_trace_replay **out);

/* Reads and applies one record (copied to *rec when rec is not NULL).
 * Returns 1, 0 at the end, a reader error, MT_ECORRUPT when the record breaks
 * the trace's rules (update outside its memory, unknown memory, duplicate
 * id, submit out of order), or -ENOMEM past max_bytes. */
MT_API int mt_trace_replay_next(mt_trace_replay *rp, mt_trace_record *rec);

/* Replays up to and including SUBMIT n. Returns 0, -ENOENT when the trace
 * ends before it (or n was already passed), or an error as above. */
MT_API int mt_trace_replay_to_submit(mt_trace_replay *rp, uint64_t n);

/* Copies bytes [offset, offset + len) of memory `id` as replayed so far into
 * buf. Returns 0, -ENOENT (no such live memory, or not kept: only_memory) or
 * -EINVAL (range outside the memory). */
MT_API int mt_trace_replay_read(mt_trace_replay *rp, uint64_t id, uint64_t offset, void *buf,
                                size_t len);

/* Where live object `id` is bound as replayed so far: its memory, offset and
 * used size. Returns 0, or -ENOENT (unknown, destroyed or not bound). */
MT_API int mt_trace_replay_object(mt_trace_replay *rp, uint64_t id, uint64_t *memory,
                                  uint64_t *offset, uint64_t *used_size);

/* Size of live memory `id`, or -ENOENT. */
MT_API int64_t mt_trace_replay_memory_size(mt_trace_replay *rp, uint64_t id);

/* Copies the replay's counters. */
MT_API void mt_trace_replay_stats_get(const mt_trace_replay *rp, mt_trace_replay_stats *out);

/* Frees the replay (the reader stays open). NULL is a no-op. */
MT_API void mt_trace_replay_destroy(mt_trace_replay *rp);

/* The content of memory `memory` at submit `submit` (the GPU's view when it
 * ran submit `submit`): copies min(size, cap) bytes into buf and returns the
 * memory's size, or -ENOENT (no such memory then, or no such submit), or a
 * replay error. Rewinds r. */
MT_API int64_t mt_trace_reconstruct(mt_trace_reader *r, uint64_t memory, uint64_t submit,
                                    void *buf, size_t cap);

/* As mt_trace_reconstruct for a buffer or image: the `used_size` bytes at its
 * binding offset in its memory. Returns used_size, -ENOENT (not created or not
 * bound by then), MT_ECORRUPT (binding outside the memory) or a replay error. */
MT_API int64_t mt_trace_reconstruct_object(mt_trace_reader *r, uint64_t object, uint64_t submit,
                                           void *buf, size_t cap);

/* Name of a record type ("update", ...), "unknown" for others. */
MT_API const char *mt_trace_rec_type_name(int type);

#ifdef __cplusplus
}
#endif
#endif
