/* Private state of a trace writer, shared by (each file calls only those
 * below it, never one above: no loops between files)
 *   writer_open.c      open (options, buffers, threads, metadata), close
 *   write_typed.c      typed shorthands over mt_trace_write
 *   writer.c           callers: append, flush, checkpoint, the index at close
 *   writer_pool.c      compressor threads: compress in parallel, write in order
 *   writer_seal.c      the chunk being filled: start, seal, take a buffer
 *   writer_emergency.c emergency flush (signal handlers), abandon (fork child)
 *   writer_file.c      the file: open and lock, chunk and index writes, token
 *   writer_fork.c      the fork generation (forked-child checks inline here)
 *
 * Chunks. Chunk `seq` occupies ring[seq % nslots] from the moment a caller
 * starts filling it until it is in the file; its state (an atomic, so that
 * the emergency flush can read it without locks) goes
 *
 *   FILLING -> SEALED -> COMPRESSING -> [COPYBACK ->] READY -> FREE
 *
 * FILLING: a caller appends records; `committed` (release) counts the bytes
 * of complete records. SEALED: queued for a compressor. COMPRESSING: a
 * compressor reads the records. COPYBACK: it copies the compressed bytes
 * over the records. READY: buf[0, out_len) holds the chunk exactly as it goes
 * into the file. FROZEN: taken by the emergency flush; nobody else touches
 * the slot again. Transitions out of FILLING, SEALED and COMPRESSING are
 * compare-and-swaps, so exactly one of {owner, emergency flush} wins.
 *
 * Locks. `lock` serialises callers and guards the chunk being filled
 * (`cur`, `cur_len`, ...); `qlock` guards the hand-off (take/write/sealed
 * sequence numbers, the pool of free buffers, error, stop). Order: lock
 * before qlock; compressor threads only take qlock, never while compressing
 * or writing.
 *
 * The file. Only the holder of the file token writes to the file or to the
 * index (`file_off`, `nindex`, `index_buf`, ...): a compressor writing chunks
 * in order, a checkpoint or close writing the index, or the emergency flush,
 * which takes the token for good. The token is an atomic word (0 free, a
 * thread id, or MT_TOKEN_EMERGENCY); acquire on taking it pairs with the
 * release of the previous holder, which publishes everything it wrote. A
 * holder takes no lock and allocates nothing: the emergency flush waits for
 * the token from a signal handler whose thread may hold `qlock`, `lock` or
 * the allocator's lock.
 *
 * Bounded memory: at most nslots raw buffers (allocated on demand, reused
 * most-recently-freed first), one compression buffer per thread, and the
 * index (32 bytes per chunk, with room for 2 * (nslots + 1) more entries
 * kept in advance so that the emergency flush never allocates). */
#ifndef MT_TRACE_WRITER_H
#define MT_TRACE_WRITER_H

#include <pthread.h>
#include <sys/types.h>
#include <stdatomic.h>
#include <stdint.h>
#include <unistd.h>
#include <zstd.h>

#include "../common/io.h"
#include "format.h"

enum {
    MT_SLOT_FREE,
    MT_SLOT_FILLING,
    MT_SLOT_SEALED,
    MT_SLOT_COMPRESSING,
    MT_SLOT_COPYBACK,
    MT_SLOT_READY,
    MT_SLOT_FROZEN,
};

#define MT_TOKEN_EMERGENCY (-1)

/* Emergency flush state (mt_trace_writer.emergency). CLOSING: close began,
 * an emergency flush returns at once. */
enum { MT_EMERG_NONE, MT_EMERG_RUNNING, MT_EMERG_DONE, MT_EMERG_CLOSING };

typedef struct mt_wslot {
    _Atomic uint32_t state;
    _Atomic uint32_t seq;
    _Atomic uint32_t committed; /* FILLING: bytes of complete records */
    uint8_t *buf;               /* MT_CHUNK_HEADER_SIZE bytes of room, then records */
    uint64_t submits_before;    /* set before FILLING */
    uint32_t len, nrecords, nsubmits; /* set before SEALED */
    mt_chunk_header hdr;        /* set before READY, with out_len: buf[0, out_len) */
    uint32_t out_len;           /* is the chunk as it goes into the file */
} mt_wslot;

typedef struct mt_wworker {
    struct mt_trace_writer *w;
    pthread_t thread;
    ZSTD_CCtx *cctx;
    uint8_t *zbuf; /* header room + ZSTD_compressBound(buf_cap) */
} mt_wworker;

struct mt_trace_writer {
    int fd;
    pid_t pid;         /* the process that opened it, and the fork generation */
    unsigned fork_gen; /* then: a forked child's copy never waits (writer_fork.c) */
    int regular; /* a regular file: a checkpoint's index is truncated before appending */
    /* What fd names (fstat at open): an application that closed the number
     * and got it back for a file of its own must not have trace bytes
     * written into it, nor that file closed (mti_wfile_ours). */
    uint64_t fd_dev, fd_ino;
    uint32_t flags;
    int level;    /* zstd level; compress == 0: stored raw */
    int level_behind; /* != level: the level of a chunk that finds half the
                         queue waiting for a compressor (DEFAULT preset) */
    int compress;
    size_t chunk_size; /* seal threshold */
    size_t buf_cap;    /* bytes of records a buffer holds: chunk_size + slack */
    uint64_t seal_interval_ns; /* 0: seal full chunks only */
    unsigned nslots;   /* queue_depth + 1 */
    mt_wslot *ring;

    /* Callers' side, under `lock`. */
    pthread_mutex_t lock;
    mt_wslot *cur;     /* the chunk being filled */
    uint32_t cur_len, cur_nrecords, cur_nsubmits;
    uint32_t next_seq; /* seq of the next chunk to start */
    uint64_t next_submit, next_frame, submits_sealed;
    uint64_t records, raw_bytes, last_seal_ns;

    /* Hand-off, under `qlock`. */
    pthread_mutex_t qlock;
    pthread_cond_t work;  /* a chunk was sealed, or stop */
    pthread_cond_t space; /* a buffer was freed, a chunk written, or an error */
    uint32_t sealed_seq;  /* chunks [0, sealed_seq) are sealed */
    uint32_t take_seq;    /* next chunk a compressor takes */
    uint32_t write_seq;   /* next chunk to write: [0, write_seq) are done */
    int writing;          /* a thread is writing chunks in order */
    uint8_t **pool;       /* free buffers, most recently freed last */
    unsigned nfree, nbufs;
    _Atomic int error;    /* first error, sticky; written under qlock or the token,
                             read anywhere; -ECANCELED: the emergency flush took over */
    int stop;
    uint64_t stalls, file_bytes, chunks_written, fast_chunks;

    /* Threads. */
    mt_wworker *workers;
    unsigned nthreads, started;

    /* The file, under the token. */
    _Atomic long token;
    uint64_t file_off;      /* end of the last chunk written */
    uint64_t index_end;     /* != 0: an index and trailer lie at file_off, up to here */
    uint64_t submits_written;
    uint8_t *index_buf;     /* MT_CHUNK_HEADER_SIZE of room, then 32-byte entries */
    uint32_t nindex;        /* chunks written = seq of the next one */
    size_t index_cap;       /* entries index_buf holds */

    /* Emergency flush and close. */
    _Atomic int emergency;  /* MT_EMERG_* */
    _Atomic int emergency_rc;
};

/* First error, sticky (0: none). Acquire: pairs with the release of
 * whoever set it (under qlock or the token). */
static inline int mti_writer_error(mt_trace_writer *w)
{
    return atomic_load_explicit(&w->error, memory_order_acquire);
}

/* ---- writer_fork.c ---- */

/* Bumped in every forked child (pthread_atfork). */
extern _Atomic unsigned mti_writer_fork_gen;

/* At open: registers the fork handler (once) and records the generation and
 * pid that w belongs to. */
void mti_writer_fork_init(mt_trace_writer *w);

/* 1 in a forked child of the process that opened w. Async-signal-safe (an
 * atomic load and getpid). */
static inline int mti_writer_in_forked_child(const mt_trace_writer *w)
{
    return atomic_load_explicit(&mti_writer_fork_gen, memory_order_relaxed) != w->fork_gen ||
           getpid() != w->pid;
}

/* 1 in a child forked through fork(3) (the handlers ran): the check on
 * every call, without a system call. */
static inline int mti_writer_forked(const mt_trace_writer *w)
{
    return atomic_load_explicit(&mti_writer_fork_gen, memory_order_relaxed) != w->fork_gen;
}

/* ---- writer.c ---- */

/* Drains, then writes the index and trailer (`end_reason` MT_END_*) under
 * the token. Returns 0 or -errno (-ECHILD in a forked child). */
int mti_writer_write_end(mt_trace_writer *w, uint32_t end_reason);

/* ---- writer_seal.c ---- */

/* Makes buf the chunk being filled, number next_seq. Called with `lock`
 * held (or before the threads start). */
void mti_wseal_fill_start(mt_trace_writer *w, uint8_t *buf);

/* Waits (at most 10 ms) for `space`. Called with qlock held. */
void mti_wseal_wait_space(mt_trace_writer *w);

/* Queues the current chunk (if it holds records) and starts the next one
 * in a buffer taken from the pool (waiting for one if need be). Called with
 * `lock` held. Returns 0 or -errno (-ECANCELED: the emergency flush took it). */
int mti_wseal(mt_trace_writer *w);

/* Seals the chunk being filled if it holds records and the seal interval has
 * passed since the last seal, so that the last submits before a quiet
 * period (or a kill -9) reach the file without waiting for another submit.
 * Called by the first compressor thread when its wait times out, holding no
 * lock; gives up at once if a caller holds `lock`. */
void mti_wseal_idle(mt_trace_writer *w);

/* ---- writer_pool.c ---- */

/* Starts the compressor threads with every signal blocked (so that
 * asynchronous signals, and the handlers that may call the emergency flush,
 * never run on them). Returns 0 or -errno. */
int mti_wpool_start(mt_trace_writer *w);

/* Sets stop, wakes and joins the threads. */
void mti_wpool_stop(mt_trace_writer *w);


/* ---- writer_file.c ---- */

/* Opens `path` for a new trace: regular files only, never blocking (FIFO),
 * exclusively locked (flock) before it is truncated. Returns the fd, or
 * -EBUSY (another open file holds the lock), -ESPIPE (not a regular file),
 * or -errno. */
int mti_wfile_open(const char *path);
/* Whether w->fd still names the file the writer opened (fstat; the
 * application may close descriptors it does not own and reuse the number).
 * Async-signal-safe. */
int mti_wfile_ours(const mt_trace_writer *w);

/* Takes the file token for the calling thread. Returns 0, or -ECANCELED
 * when the emergency flush holds it for good. */
int mti_wfile_enter(mt_trace_writer *w);
void mti_wfile_leave(mt_trace_writer *w);

/* Token held: appends a chunk (a[0, na) then b[0, nb), a starting with the
 * chunk header `h`), truncating a checkpoint's index first, and records it
 * in the index. No allocation: async-signal-safe. Returns 0 or -errno. */
int mti_wfile_append(mt_trace_writer *w, const mt_chunk_header *h, const void *a, size_t na,
                    const void *b, size_t nb);

/* Token held: the capacity (entries) the index should grow to so that it
 * keeps 2 * (nslots + 1) spare entries, or 0 when it has them. */
size_t mti_wfile_index_want(const mt_trace_writer *w);

/* Without the token (it allocates): a buffer for `cap` entries, or NULL. */
uint8_t *mti_wfile_index_alloc(size_t cap);

/* Token held: moves the index into buf (from mti_wfile_index_alloc(cap)),
 * unless it has grown to cap meanwhile. Returns the buffer to free, after
 * leaving the token. */
uint8_t *mti_wfile_index_adopt(mt_trace_writer *w, uint8_t *buf, size_t cap);

/* Token held: writes the index chunk (stored raw) and the trailer after the
 * last chunk, `end_reason` MT_END_*. The next append overwrites them. No
 * allocation: async-signal-safe. Returns 0 or -errno. */
int mti_wfile_write_index(mt_trace_writer *w, uint32_t end_reason);


/* The calling thread's id (gettid). Async-signal-safe. */
long mti_wfile_tid(void);

#endif
