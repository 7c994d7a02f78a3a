/* The capture session: the process's one trace and everything about it.
 *
 * One trace per process. It is opened when the first device is created
 * (its header names the driver), kept across instance and device lifetimes
 * (a second device appends), made complete (index and trailer) whenever the
 * last device goes away, and closed at exit. Which process writes where:
 *   - under `memtrack record` (MEMTRACK_SESSION set), the first process of
 *     the session that creates a device creates the trace; any later
 *     process (an exec'd or spawned child, or the next command of a script)
 *     is not captured, or with MEMTRACK_FOLLOW_CHILDREN gets NAME.PID.mtrace;
 *   - by hand, the trace file is locked while written: a second process
 *     finding it locked behaves like a child above;
 *   - a forked child never touches its parent's trace.
 *
 * Records are written through lt_rec_*: each takes the writer's lifetime
 * lock for reading, so that exit (which closes the writer) never races a
 * capture on another thread. A write error stops recording once, says so on
 * stderr and in the status line, and leaves the trace readable up to what was
 * written; the capture engine keeps the application's data flowing (shadow
 * mode) regardless. No Vulkan here. */
#ifndef LT_SESSION_H
#define LT_SESSION_H

#include <stdint.h>

#include "config.h"
#include "memtrack/memtrack.h"

/* Loads the configuration and process hooks once. Any thread. */
void lt_session_init(void);
const lt_config *lt_cfg(void);
/* The process's tracker (NULL if it could not be created). */
mt_tracker *lt_tracker(void);

/* Opens the trace if this process is to write one and has not yet (first
 * device). meta: the header's key/values. Any thread. */
void lt_session_open(const mt_trace_kv *meta, size_t nmeta);
/* 1 while records are being written (open, not failed). */
int lt_tracing(void);
/* 1 when this process captures at all (it may still be waiting for its
 * first device): 0 in an uncaptured child or after fork. */
int lt_session_capturing(void);
/* The last device was destroyed: make the trace complete as it stands. */
void lt_session_devices_gone(void);

/* Process events (process.c calls these). */
void lt_session_forked_child(void);  /* in the child, right after fork */
void lt_session_exit(void);          /* normal exit: close the trace */
/* The process is about to be replaced (exec) or to die (_exit, a fatal
 * signal): make the trace complete now. `from_signal`: only best-effort,
 * lock-free paths. */
void lt_session_last_words(int from_signal);

/* The capture window (MEMTRACK_FRAMES, MEMTRACK_TRIGGER). While it is closed
 * the trace still records what exists (memories, objects, bindings, maps)
 * but no content and no submits; when it opens, every exposed memory's full
 * content is written first. The epoch changes at every opening and closing:
 * devices compare it with theirs at their next capture point. */
int lt_window_open(void);
uint64_t lt_window_epoch(void);
/* After a vkQueuePresentKHR: the next frame begins. */
void lt_window_present(void);
/* Applies trigger signals received since the last call. */
void lt_window_poll(void);
/* The trigger signal's handler. Async-signal-safe. */
void lt_window_trigger(void);

/* Records. Each is a no-op returning 0 when not tracing. */
void lt_rec_memory(uint64_t id, uint64_t size, uint32_t type_index, uint32_t flags);
void lt_rec_object(uint64_t id, uint32_t kind, uint64_t size, uint64_t used);
void lt_rec_bind(uint64_t object, uint64_t memory, uint64_t offset);
void lt_rec_map(uint64_t memory, uint64_t offset, uint64_t size);
void lt_rec_unmap(uint64_t memory);
/* Returns 0, or 1 when the test hook dropped the packet. */
int lt_rec_update(uint64_t memory, uint64_t object, uint64_t offset, const void *data, size_t len,
                  int at_unmap);
void lt_rec_hash(uint64_t memory, uint64_t offset, uint64_t size, uint64_t hash);
void lt_rec_submit(uint64_t queue);
void lt_rec_frame(void);
void lt_rec_destroy(uint32_t what, uint64_t id);
void lt_rec_mode(uint64_t memory, const char *text);
void lt_rec_mismatch(uint64_t memory, uint64_t object, uint64_t offset, uint64_t length, uint32_t cause,
                     uint64_t running);
/* An annotation: something the user must know (a fallback, something not
 * captured). Also printed once per `key` on stderr. */
void lt_rec_note(uint64_t id, const char *key, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/* Next stable id for a memory or object. */
uint64_t lt_next_id(void);
/* Prints "memtrack: ..." on stderr once per distinct key. */
void lt_warn_once(const char *key, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
uint64_t lt_now_ns(void);

/* Statistics (atomic counters). */
typedef enum lt_stat {
    LT_ST_SUBMITS, LT_ST_FRAMES, LT_ST_CAPTURE_NS, LT_ST_PACKETS, LT_ST_PACKET_BYTES, LT_ST_HASHES,
    LT_ST_EXTRA_BYTES, LT_ST_MODE_SWITCHES, LT_ST_FALLBACKS, LT_ST_SYNC_IN_NS, LT_ST_SLICES, LT_ST_COUNT
} lt_stat;
void lt_stat_add(lt_stat s, int64_t v);
uint64_t lt_stat_get(lt_stat s);
void lt_stat_max(uint64_t capture_ns); /* capture_ns_max and the extra-bytes peak */
void lt_progress(void);

#endif
