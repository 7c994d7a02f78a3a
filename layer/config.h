/* The layer's configuration: MEMTRACK_* environment variables parsed into one
 * struct. Pure (no Vulkan, no globals): tests/test_layer_units.c checks it.
 *
 *   MEMTRACK_OUTPUT            trace path (default memtrack-<pid>.mtrace)
 *   MEMTRACK_MODE              auto | guard | shadow | scan | copy (default auto)
 *   MEMTRACK_VERIFY            on/off: a content hash of every exposed memory at each submit
 *   MEMTRACK_PROGRESS          on/off: submits and MB captured on stderr every 2 s
 *   MEMTRACK_STATS             path: capture statistics as JSON when the trace closes
 *   MEMTRACK_STATUS            path: one line, "ok ..." or "error ...", for `memtrack record`
 *   MEMTRACK_MERGE_GAP         diff merge gap in bytes (default: diff's default)
 *   MEMTRACK_COMPRESSION       default | fast | none: the trace's compression preset
 *   MEMTRACK_CAPTURE_THREADS   threads that capture a submit's memories (1..8; default
 *                              min(4, CPUs / 2), 1 on up to 3 CPUs)
 *   MEMTRACK_TRACK_BACKEND     auto | signal | uffd: the tracking backend (default auto)
 *   MEMTRACK_HOT_PAGES         on/off (default on): guard and shadow leave pages written
 *                              in consecutive submits writable and diff them at every
 *                              submit instead of taking a fault per page per frame
 *   MEMTRACK_FAULT_BUDGET      on/off (default on): signal-backend ranges take at most
 *                              max(64, pages/8) faults per submit, then open whole and
 *                              are diffed whole (a dense writer's first frames)
 *   MEMTRACK_MEMORY_BUDGET     on/off (default on): reference copies and shadow mappings
 *                              leave room under the process's memory limits (its cgroup's,
 *                              the machine's); a memory they would not fit, or whose copy
 *                              must give memory back, is recorded whole (copy)
 *   MEMTRACK_SESSION           set by `memtrack record`: the first process of the session
 *                              creates the trace, later ones are children (see docs/layer.md)
 *   MEMTRACK_FOLLOW_CHILDREN   on/off: a child process that uses Vulkan gets its own
 *                              trace NAME.PID.mtrace instead of not being captured
 *   MEMTRACK_FRAMES            A-B, A- or A: capture only frames A to B (counted from 1
 *                              at each vkQueuePresentKHR, as gfxreconstruct counts)
 *   MEMTRACK_TRIGGER           a signal (USR1, SIGUSR2, 10...): each one toggles capture;
 *                              capture starts paused unless MEMTRACK_FRAMES starts at 1
 *   MEMTRACK_TEST_DROP_UPDATE  k: drop the k-th update packet (tests that verify
 *                              detects a lost write); unmap:k the k-th one written
 *                              by the capture at an unmap
 *   MEMTRACK_TEST_WC           on/off: read every driver mapping as write-combined
 *                              device memory (streaming loads, copy mode through the
 *                              reference): those paths run where no memory is such
 *   MEMTRACK_TEST_DROP_RUN     k: ignore the k-th dirty run the tracker reports (tests
 *                              that verify detects a write page tracking missed, in
 *                              shadow mode too)
 *   MEMTRACK_TEST_LOSE_DEVICE  k: the k-th vkWaitForFences returns VK_ERROR_DEVICE_LOST
 *                              to the application after the real wait (tests what an
 *                              application reads after a device loss)
 * on/off values: 1/0, yes/no, true/false, on/off (any case). An invalid value
 * is reported once and the default kept. */
#ifndef LT_CONFIG_H
#define LT_CONFIG_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

typedef enum lt_mode {
    LT_AUTO = 0,
    LT_GUARD,  /* track the driver's mapping in place */
    LT_SHADOW, /* hand the app an anonymous mapping; write back changed bytes */
    LT_SCAN,   /* no tracking: diff all exposed memory */
    LT_COPY,   /* no diff: copy all exposed memory */
    LT_NMODES,
    LT_OFF = LT_NMODES, /* not captured (trace failed, or a process left uncaptured) */
} lt_mode;

const char *lt_mode_name(lt_mode m);
int lt_mode_parse(const char *s); /* -1 if unknown */

typedef struct lt_config {
    lt_mode mode;
    int verify, progress, follow_children;
    int hot_pages; /* MT_RANGE_HOT_PAGES for guard and shadow ranges */
    int fault_budget; /* mt_range_opts.fault_budget for guard and shadow ranges */
    int memory_budget; /* copies leave room under memory limits (budget.c) */
    int backend; /* mt_track_backend */
    int compression; /* mt_trace_compression */
    int capture_threads; /* 0: the default */
    size_t merge_gap;
    uint64_t drop_update;
    int drop_at_unmap; /* drop_update counts only the captures at an unmap */
    int test_wc;       /* MEMTRACK_TEST_WC: every driver mapping taken as write-combined */
    uint64_t test_lose; /* MEMTRACK_TEST_LOSE_DEVICE: that vkWaitForFences reports a loss (0: none) */
    uint64_t drop_run;  /* MEMTRACK_TEST_DROP_RUN: that dirty run is ignored (0: none) */
    uint64_t frames_first, frames_last; /* 0, 0: every frame; last 0: to the end */
    int trigger; /* signal number, 0 if none */
    char *output;     /* malloc'd; never NULL after parsing */
    char *stats_path; /* malloc'd or NULL */
    char *status_path;
    char *session;    /* MEMTRACK_SESSION or NULL */
} lt_config;

/* Looks a variable up (getenv, or a table in tests). */
typedef const char *(*lt_getenv_fn)(const char *name, void *arg);
/* Reports an invalid value once: `name` is the variable. */
typedef void (*lt_config_warn_fn)(const char *name, const char *value, const char *expected, void *arg);

/* Fills *c from the variables; `pid` names the default output. Returns 0,
 * or -ENOMEM (c is then freed). */
int lt_config_parse(lt_config *c, lt_getenv_fn get, lt_config_warn_fn warn, void *arg, int pid);
void lt_config_free(lt_config *c);

/* 1/0 for an on/off value, -1 if it is not one. */
int lt_parse_bool(const char *s);
/* "A-B", "A-" or "A" (A >= 1, B >= A): 0, or -1. */
int lt_parse_frames(const char *s, uint64_t *first, uint64_t *last);
/* "USR1", "SIGUSR1" or a number: the signal, or -1 (SIGKILL, SIGSTOP and
 * the faults memtrack handles are refused). */
int lt_parse_signal(const char *s);

/* Test hooks that act on the k-th event of a kind (MEMTRACK_TEST_DROP_RUN
 * and the like; k from the option, 0: never): counts one more in *count
 * and says whether it is the k-th. */
static inline int lt_test_kth(_Atomic uint64_t *count, uint64_t k)
{
    return k && atomic_fetch_add_explicit(count, 1, memory_order_relaxed) + 1 == k;
}

#endif
