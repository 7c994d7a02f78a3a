/* memtrack timeline: fences, waits and deferred reclamation.
 *
 * A timeline is a 64-bit value that only grows: the last value the device
 * completed. Producers hand out values (a stream's fences are values of its
 * timeline), the device side signals them as it passes them, and any thread
 * can query the completed value or sleep until a value completes.
 *
 *  - Waits are interruptible: mt_timeline_cancel() releases every wait in
 *    progress with MT_ECANCELED, a timeout gives MT_ETIMEDOUT, and once the
 *    device is lost (mt_timeline_lose()) every wait for a value that did not
 *    complete returns MT_EDEVLOST at once: nothing hangs on a dead device.
 *  - Narrow hardware counters: with `counter_bits` = N, mt_timeline_signal_raw()
 *    takes the device's wrapping N-bit counter and extends it to 64 bits. This
 *    is exact across any number of wraps while fewer than 2^(N-1) values are
 *    in flight (handed out but not completed).
 *  - Deferred reclamation: mt_timeline_defer() queues "run this once value V
 *    completes" (a free, an unref, an unmap). Callbacks run in order of V
 *    (ties in the order they were queued), each exactly once, outside the
 *    timeline's locks, from mt_timeline_poll() (or from the signalling thread
 *    with MT_TIMELINE_CALLBACKS_ON_SIGNAL). Their `status` says why they run:
 *    0 (completed), the loss code (the device died: it will never touch the
 *    memory again) or MT_ECANCELED (the timeline was destroyed first).
 *
 * The completed value is published with release semantics: a thread that
 * sees value V completed (by query, wait or callback) also sees every memory
 * write the signalling thread made before signalling V. */
#ifndef MEMTRACK_TIMELINE_H
#define MEMTRACK_TIMELINE_H

#include <stddef.h>
#include <stdint.h>

#include "memtrack/base.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct mt_timeline mt_timeline;

enum {
    /* Run ready deferred callbacks in the thread that signals (typically the
     * device or interrupt thread). Default: only mt_timeline_poll() runs them,
     * so a callback never runs on a thread that must keep the device moving. */
    MT_TIMELINE_CALLBACKS_ON_SIGNAL = 1u << 0,
};

typedef struct mt_timeline_opts {
    uint64_t initial;      /* completed value at creation; 0 = 0 */
    unsigned counter_bits; /* width of the device counter for signal_raw, 1..64; 0 = 64 */
    uint32_t flags;        /* MT_TIMELINE_* */
    uint64_t reserved[4]; /* zero: room to grow (docs/design.md, "Options") */
} mt_timeline_opts;

/* A deferred callback. `status` is 0 when `value` completed, the loss code
 * (e.g. MT_EDEVLOST) when the device was lost first, or MT_ECANCELED when the
 * timeline was destroyed before `value` completed. */
typedef void (*mt_timeline_fn)(void *ctx, uint64_t value, int status);

/* Creates a timeline. `opts` may be NULL (all defaults). Returns 0 and sets
 * *out, -EINVAL for a counter width above 64, or -ENOMEM. Any thread. */
MT_API int mt_timeline_create(const mt_timeline_opts *opts, mt_timeline **out);

/* Runs every pending deferred callback (status 0 if its value completed, else
 * the loss code or MT_ECANCELED), in value order, then frees the timeline.
 * Must not race with any other call on it (no waiter may remain). NULL: no-op. */
MT_API void mt_timeline_destroy(mt_timeline *tl);

/* Returns the completed value (acquire: the signaller's writes before it are
 * visible). Any thread, lock-free. */
MT_API uint64_t mt_timeline_completed(const mt_timeline *tl);

/* The same as mt_timeline_completed() with the `uint64_t (*)(void *)` shape of
 * a "completed value" callback, so that code taking such a callback (alloc's
 * fenced frees) can be driven by a timeline: pass this and the timeline. */
MT_API uint64_t mt_timeline_completed_cb(void *tl);

/* Marks every value up to `value` completed and wakes the waiters it
 * satisfies. A value at or below the completed one is a no-op. Returns 0, or
 * the loss code when the timeline is lost (the value is then ignored). Any thread. */
MT_API int mt_timeline_signal(mt_timeline *tl, uint64_t value);

/* As mt_timeline_signal() for a device counter that wraps every 2^N values
 * (N = counter_bits): `raw` (only its low N bits count) is extended to the
 * 64-bit value nearest the completed one. A raw value behind the completed
 * one (a stale read) is a no-op. Returns as mt_timeline_signal. Any thread. */
MT_API int mt_timeline_signal_raw(mt_timeline *tl, uint64_t raw);

/* Sleeps until `value` completes. timeout_ns < 0 waits without limit, 0 only
 * polls. Returns 0 (completed, even if the device was lost afterwards),
 * MT_ETIMEDOUT, MT_ECANCELED (mt_timeline_cancel during the wait) or the loss
 * code (device lost before `value` completed). Any thread, any number at once. */
MT_API int mt_timeline_wait(mt_timeline *tl, uint64_t value, int64_t timeout_ns);

/* Releases every wait in progress on `tl` with MT_ECANCELED. Waits that start
 * after this call are not affected. Any thread. */
MT_API void mt_timeline_cancel(mt_timeline *tl);

/* Marks the device behind `tl` lost with `code` (a negative code; 0 means
 * MT_EDEVLOST). Every wait for an uncompleted value returns `code`, now and
 * later; signals are ignored. Idempotent (the first code stays). Any thread. */
MT_API void mt_timeline_lose(mt_timeline *tl, int code);

/* Returns 0 while the device is alive, or the loss code. Any thread. */
MT_API int mt_timeline_status(const mt_timeline *tl);

/* Queues fn(ctx, value, status) to run once `value` completes (or the device
 * is lost, or the timeline destroyed). A value already completed runs at the
 * next poll. Returns 0, -EINVAL (fn NULL) or -ENOMEM. Any thread. */
MT_API int mt_timeline_defer(mt_timeline *tl, uint64_t value, mt_timeline_fn fn, void *ctx);

/* Runs the deferred callbacks that are ready, in value order, outside locks.
 * One thread runs callbacks at a time: a poll that finds another one running
 * returns 0 and leaves the work to it. Returns how many this call ran. Any
 * thread, including from a callback (which then returns 0). */
MT_API long mt_timeline_poll(mt_timeline *tl);

/* Returns how many deferred callbacks are queued and not yet run. Any thread. */
MT_API size_t mt_timeline_pending(mt_timeline *tl);

/* Extends a wrapping `bits`-bit counter value `raw` to 64 bits: returns the
 * value congruent to raw mod 2^bits nearest to `ref`, in the window
 * [ref - 2^(bits-1), ref + 2^(bits-1)) (mod 2^64). bits 0 means 64. Pure. */
MT_API uint64_t mt_fence_extend(uint64_t ref, uint64_t raw, unsigned bits);

/* Returns 1 when the `bits`-bit counter value `done` has reached `target`
 * (target lies in the half-range at or behind done), 0 otherwise: the
 * wrap-aware comparison a driver does between FENCE_LAST and a wait value. Pure. */
MT_API int mt_fence_reached(uint64_t done, uint64_t target, unsigned bits);

#ifdef __cplusplus
}
#endif
#endif
