/* memtrack stream: a bounded command ring to a device, with fences, state
 * elision and lazy hazard barriers.
 *
 * One producer thread writes fixed-size commands (mt_cmd) into a ring of
 * `slots` entries; one device backend thread consumes them (mt_stream_consume
 * / mt_stream_consumed; the simulated device in memtrack/device_sim.h is one
 * such backend). The fast paths take no lock and make no system call:
 *
 *  - Back-pressure: when the ring is full the producer polls for a bounded
 *    time (spin_ns, yielding the CPU as it goes), then sleeps on a condition
 *    variable until space frees. The consumer reports its progress only
 *    every `ping_interval` commands (the HardDoom driver's "ping every
 *    128"), so a producer sleeping on a full ring is woken at most once per
 *    ping_interval commands consumed.
 *  - Doorbell: the producer publishes what it wrote every 32 commands (or
 *    ping_interval, if smaller) and at each doorbell. A consumer that found
 *    the ring empty polls for spin_ns, then sleeps; the producer wakes it when
 *    it crosses a ping_interval boundary, on mt_stream_flush(),
 *    mt_stream_fence(), mt_stream_sync() and before it sleeps itself.
 *    Commands written since the last of these may wait in the ring until then.
 *  - Fences: mt_stream_fence() writes a FENCE command carrying the low
 *    `fence_bits` bits of the next value of the stream's timeline; the device
 *    signals it (mt_timeline_signal_raw) once every earlier command executed
 *    and its writes are visible.
 *  - mt_stream_sync() is skipped when nothing was written since the last
 *    successful one (the "is synchronised" flag).
 *  - State elision: mt_stream_set_state(slot, value) writes nothing when the
 *    device already holds `value` in `slot` (as far as the stream sent it).
 *    mt_stream_reset() resets the device's state and invalidates the cache.
 *  - Lazy barriers: mt_stream_emit() takes the resources a command reads and
 *    writes. A BARRIER command is written only before a command that reads a
 *    resource written since the last barrier; one barrier clears every
 *    pending hazard.
 *  - Device loss (mt_stream_lose, or the backend dying) releases every
 *    waiter (full ring, sync, timeline waits) with the loss code; the stream
 *    stays lost. Recovery means a new stream (and a reset device).
 *
 * Threads: the producer functions are called by one thread at a time (the
 * producer); the consumer functions by the backend's thread; the functions
 * marked "any thread" from anywhere. */
#ifndef MEMTRACK_STREAM_H
#define MEMTRACK_STREAM_H

#include <stddef.h>
#include <stdint.h>

#include "memtrack/base.h"
#include "memtrack/timeline.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct mt_stream mt_stream;

/* One command: 32 bytes. Ops below MT_CMD_USER belong to the stream; the
 * device defines the meaning of MT_CMD_USER and above (and of arg, a, b, c). */
typedef struct mt_cmd {
    uint32_t op;
    uint32_t arg;
    uint64_t a, b, c;
} mt_cmd;

enum mt_cmd_op {
    MT_CMD_NOP = 0,     /* does nothing */
    MT_CMD_STATE = 1,   /* state register `arg` := a (written by mt_stream_set_state) */
    MT_CMD_FENCE = 2,   /* signal fence value a (low fence_bits bits) when all before it is done */
    MT_CMD_BARRIER = 3, /* later commands see every write of earlier ones (INTERLOCK) */
    MT_CMD_RESET = 4,   /* reset the state registers (implies a barrier) */
    MT_CMD_USER = 0x100 /* first device-defined op */
};

enum {
    MT_STREAM_NO_ELISION = 1u << 0, /* write every state command (for measurements) */
    MT_STREAM_NO_SPIN = 1u << 1,    /* sleep at once when waiting (no polling) */
};

typedef struct mt_stream_opts {
    uint32_t slots;         /* ring size, a power of two >= 4; 0 = 512 */
    uint32_t ping_interval; /* progress report period, a power of two <= slots; 0 = slots/4 */
    unsigned fence_bits;    /* device fence counter width, 1..64; 0 = 64. Must
                             * exceed log2(slots)+1 so that fences in flight
                             * stay below 2^(fence_bits-1) */
    uint32_t state_slots;   /* elidable state registers, 1..64; 0 = 16 */
    uint32_t resources;     /* resource ids for hazards are 0..resources-1; 0 = 256 */
    uint32_t flags;         /* MT_STREAM_* */
    uint32_t spin_ns;       /* a waiting side polls this long before it sleeps;
                             * 0 = 50000 (see MT_STREAM_NO_SPIN) */
    uint64_t reserved[4]; /* zero: room to grow (docs/design.md, "Options") */
} mt_stream_opts;

/* The resources one command reads and writes (ids below opts.resources). */
typedef struct mt_stream_access {
    const uint32_t *reads;
    uint32_t n_reads;
    const uint32_t *writes;
    uint32_t n_writes;
} mt_stream_access;

typedef struct mt_stream_stats {
    uint64_t commands;        /* commands written to the ring, of every kind */
    uint64_t emitted;         /* commands written by mt_stream_emit */
    uint64_t state_written;   /* state commands written */
    uint64_t state_elided;    /* state commands dropped as redundant */
    uint64_t barriers;        /* barriers written (lazy ones and mt_stream_barrier) */
    uint64_t fences;          /* fences written */
    uint64_t syncs;           /* mt_stream_sync calls that waited for the device */
    uint64_t syncs_skipped;   /* mt_stream_sync calls skipped (already synchronised) */
    uint64_t resets;          /* mt_stream_reset calls */
    uint64_t producer_sleeps; /* times the producer slept on a full ring */
    uint64_t producer_wakeups;/* wake-ups the consumer sent to a sleeping producer */
    uint64_t progress_reports;/* times the consumer published its progress */
    uint64_t consumer_sleeps; /* times the consumer slept on an empty ring */
    uint64_t consumer_wakeups;/* doorbells that woke a sleeping consumer */
} mt_stream_stats;

/* Creates a stream and its timeline. `opts` may be NULL. Returns 0 and sets
 * *out, -EINVAL for bad options, or -ENOMEM. Any thread. */
MT_API int mt_stream_create(const mt_stream_opts *opts, mt_stream **out);

/* Frees the stream. The backend must have stopped consuming it. Deferred
 * callbacks still queued run with status MT_ECANCELED (or the loss code)
 * unless their value completed: call mt_stream_sync() first to drain them.
 * NULL is a no-op. */
MT_API void mt_stream_destroy(mt_stream *s);

/* Writes one command whose op is MT_CMD_NOP or >= MT_CMD_USER, preceded by a
 * barrier when it reads a resource written since the last barrier. `acc` may
 * be NULL (touches no tracked resource). Sleeps while the ring is full.
 * Returns 0, -EINVAL (reserved op, resource id out of range; nothing
 * written), MT_ECANCELED or the loss code. Producer thread. */
MT_API int mt_stream_emit(mt_stream *s, const mt_cmd *cmd, const mt_stream_access *acc);

/* Sets state register `slot` to `value` on the device, unless the stream
 * knows it already holds that value. Returns 1 (written), 0 (elided),
 * -EINVAL (slot out of range), MT_ECANCELED or the loss code. Producer thread. */
MT_API int mt_stream_set_state(mt_stream *s, uint32_t slot, uint64_t value);

/* Writes a barrier now and clears every pending hazard. Returns 0,
 * MT_ECANCELED or the loss code. Producer thread. */
MT_API int mt_stream_barrier(mt_stream *s);

/* Writes a RESET command (the device's state registers go back to 0 and
 * pending writes become visible), invalidates the state cache and clears the
 * hazards. Returns 0, MT_ECANCELED or the loss code. Producer thread. */
MT_API int mt_stream_reset(mt_stream *s);

/* Wakes the device for everything written so far (the doorbell). Returns 0
 * or the loss code. Producer thread. */
MT_API int mt_stream_flush(mt_stream *s);

/* Writes a fence and flushes. *value receives the timeline value that
 * completes when the device has passed this point. Returns 0, MT_ECANCELED or
 * the loss code. Producer thread. */
MT_API int mt_stream_fence(mt_stream *s, uint64_t *value);

/* Waits until the device has executed everything written so far (writing a
 * fence if needed), then runs ready deferred callbacks. Returns 0 at once when
 * nothing was written since the last successful sync. timeout_ns as in
 * mt_timeline_wait. Returns 0, MT_ETIMEDOUT, MT_ECANCELED or the loss code.
 * Producer thread. */
MT_API int mt_stream_sync(mt_stream *s, int64_t timeout_ns);

/* Queues fn(ctx, value, status) to run once the device has executed every
 * command written so far (the seed's "free at the next sync"): it runs from
 * the mt_stream_sync or mt_timeline_poll that finds it ready (status as in
 * mt_timeline_fn). Returns 0, -EINVAL or -ENOMEM. Producer thread. */
MT_API int mt_stream_defer(mt_stream *s, mt_timeline_fn fn, void *ctx);

/* The stream's timeline (fence values). Valid until mt_stream_destroy. Any thread. */
MT_API mt_timeline *mt_stream_timeline(mt_stream *s);

/* Copies the counters into *out. Producer thread (or any thread while the
 * producer is idle and ordered with it, e.g. after joining it). */
MT_API void mt_stream_stats_get(mt_stream *s, mt_stream_stats *out);

/* Releases the producer's wait in progress (full ring, sync) and every wait
 * on the stream's timeline with MT_ECANCELED. Any thread. */
MT_API void mt_stream_cancel(mt_stream *s);

/* Marks the device lost with `code` (negative; 0 means MT_EDEVLOST): every
 * waiter is released with it, producer calls fail with it from now on, and
 * consumers get it. Idempotent. Any thread. */
MT_API void mt_stream_lose(mt_stream *s, int code);

/* Returns 0 while the device is alive, or the loss code. Any thread. */
MT_API int mt_stream_status(const mt_stream *s);

/* Consumer: sleeps until commands are available, then points *cmds at the
 * oldest one and returns how many may be read in order (> 0; never past the
 * next ping_interval boundary). Returns 0 when woken by
 * mt_stream_wake_consumer(), or the loss code. Backend thread. */
MT_API long mt_stream_consume(mt_stream *s, const mt_cmd **cmds);

/* Consumer: the `n` oldest commands are done with and their slots may be
 * reused (n at most what the last consume returned). Reports progress to the
 * producer at ping_interval boundaries and when the ring runs empty. Backend thread. */
MT_API void mt_stream_consumed(mt_stream *s, size_t n);

/* Makes the consumer's current or next blocking mt_stream_consume() return 0
 * (for shutting a backend thread down). Any thread. */
MT_API void mt_stream_wake_consumer(mt_stream *s);

#ifdef __cplusplus
}
#endif
#endif
