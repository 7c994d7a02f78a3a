/* memtrack track: find the pages an application wrote in host-mapped memory.
 *
 * A tracker watches ranges of the address space and answers one question:
 * "which pages of this range were written since I last looked?". The
 * application needs no change. Two backends:
 *
 *  - signal: pages are made read-only with mprotect; a SIGSEGV/SIGBUS handler
 *    records the page in a preallocated dirty bitmap and makes it writable
 *    again. Works on any mapping, including GPU driver mappings. Costs one
 *    signal per first write to a page, splits VMAs, and makes kernel writes
 *    into tracked memory (read(2) into a tracked buffer) fail with EFAULT.
 *  - uffd: userfaultfd write-protect in asynchronous mode plus the
 *    PAGEMAP_SCAN ioctl (Linux >= 6.7). The kernel resolves write faults by
 *    itself, no signal is raised, and one ioctl reads and re-protects the
 *    written pages. Kernel writes into tracked memory work and are recorded.
 *    Only anonymous, shmem and hugetlb memory can be registered: device
 *    mappings are refused, and such ranges fall back to the signal backend.
 *
 * Guarantee: a write to tracked memory that happens before or during a
 * collect is reported by that collect or by the next one; never lost.
 *
 * Contract with the application's own signal handlers (signal backend):
 * memtrack installs its handler when the first signal-backend range is
 * added and chains every fault that is not a tracked write to the handler
 * that was installed before it, with that handler's semantics (SA_SIGINFO or
 * plain, its sa_mask, SA_NODEFER, SA_RESETHAND; SIG_IGN and SIG_DFL as the
 * kernel applies them to faults: the process dies of the signal). A handler
 * the application installs *after* memtrack's must chain to the one it
 * replaced for faults it does not own, as crash reporters do; then tracking
 * keeps working. mt_track_handler_status() tells whether memtrack's handler is
 * still installed, and mt_track_reinstall_handler() puts it back on top while
 * keeping the application's handler in the chain.
 *
 * fork(): the child inherits the read-only protections and the handler
 * (signal backend): its writes to tracked pages are absorbed by the inherited
 * handler, which unprotects the page in the child only. With the uffd backend
 * the child's mappings are not write-protected at all. The child must not
 * call mt_tracker_* functions (other threads' locks may be held). The
 * parent's tracking is unaffected by the fork and by the child's writes. */
#ifndef MEMTRACK_TRACK_H
#define MEMTRACK_TRACK_H

#include <stddef.h>
#include <stdint.h>

#include "memtrack/base.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct mt_tracker mt_tracker;

/* A range handle; 0 is never a valid id. */
typedef uint64_t mt_range_id;

typedef enum mt_track_backend {
    MT_TRACK_AUTO = 0,   /* uffd where the kernel accepts the range, else signal */
    MT_TRACK_SIGNAL = 1, /* mprotect + SIGSEGV handler */
    MT_TRACK_UFFD = 2,   /* userfaultfd-wp async + PAGEMAP_SCAN; fails if unavailable */
} mt_track_backend;

typedef struct mt_tracker_opts {
    mt_track_backend backend; /* default backend for ranges; 0 = auto */
    uint32_t max_ranges;      /* ranges this tracker can hold at once; 0 = 4096 */
} mt_tracker_opts;

enum {
    /* The first collect reports every page of the range as dirty (for callers
     * that did not copy the range's content when they added it). */
    MT_RANGE_INITIALLY_DIRTY = 1u << 0,
};

typedef struct mt_range_opts {
    mt_track_backend backend; /* 0 = the tracker's default */
    uint32_t flags;           /* MT_RANGE_* */
    int prot;                 /* protection restored on remove; 0 = PROT_READ|PROT_WRITE */
} mt_range_opts;

/* One run of dirty pages, clipped to the range: bytes [offset, offset+length)
 * relative to the range's start address. Runs are sorted and never overlap. */
typedef struct mt_dirty_run {
    mt_range_id range;
    size_t offset;
    size_t length;
} mt_dirty_run;

typedef struct mt_range_stats {
    mt_track_backend backend; /* the backend serving the range now */
    size_t pages;             /* pages the range spans (partial pages included) */
    uint64_t faults;          /* write faults handled (signal backend; uffd's are silent) */
    uint64_t collects;        /* collect calls that covered this range */
    uint64_t pages_collected; /* dirty pages reported so far */
    uint64_t degradations;    /* times tracking fell back to "whole range dirty" */
    int degraded;             /* 1 while the range is reported whole on each collect */
    int fallback_reason;      /* why uffd was not used (negative code), 0 if it was or not asked */
} mt_range_stats;

/* Creates a tracker. `opts` may be NULL (all defaults). Returns 0 and sets
 * *out, -EINVAL for bad options, -ENOMEM, or MT_EUNSUPPORTED when the uffd
 * backend is demanded and the kernel lacks it. Any thread. */
MT_API int mt_tracker_create(const mt_tracker_opts *opts, mt_tracker **out);

/* Removes every range (restoring protections) and frees the tracker. The
 * process-wide signal handler stays installed while other trackers use it.
 * Must not race with other calls on the same tracker. NULL is a no-op. */
MT_API void mt_tracker_destroy(mt_tracker *t);

/* Starts tracking [addr, addr+len): any address, any length > 0. Pages at the
 * ends may be shared with untracked memory or with other ranges; a byte may
 * belong to only one range (-EEXIST otherwise). The content at the moment
 * this returns is the baseline: callers keeping a shadow copy take it after
 * the call. Returns 0 and sets *id, -EINVAL, -EEXIST, -ENOSPC (max_ranges),
 * -ENOMEM, or the mprotect/uffd error when no backend could arm the range.
 * Any thread, concurrently with writers and other tracker calls. */
MT_API int mt_tracker_add(mt_tracker *t, void *addr, size_t len, const mt_range_opts *opts,
                          mt_range_id *id);

/* Stops tracking a range and restores its protection (pages shared with other
 * tracked ranges stay armed). Safe while other threads write to the range.
 * Unreported writes are dropped. Returns 0 or -ENOENT. Any thread. */
MT_API int mt_tracker_remove(mt_tracker *t, mt_range_id id);

/* Fills up to `max` runs with the dirty pages of range `id` and re-arms
 * tracking for exactly the pages it reports. When it returns `max`, more
 * pages may be dirty: call again (unreported pages stay dirty). Returns the
 * number of runs, or -ENOENT / -EINVAL. Any thread; concurrent collects of
 * the same range split the dirty pages between them. */
MT_API long mt_tracker_collect(mt_tracker *t, mt_range_id id, mt_dirty_run *runs, size_t max);

/* As mt_tracker_collect, over every range of the tracker in address order. */
MT_API long mt_tracker_collect_all(mt_tracker *t, mt_dirty_run *runs, size_t max);

/* Marks [addr, addr+len) of range `id` dirty and writable now, so that the
 * kernel can write into it (e.g. read(2) into a buffer tracked by the signal
 * backend, which would otherwise fail with EFAULT). The pages are reported by
 * the next collect. Returns 0, -ENOENT or -EINVAL. Any thread. */
MT_API int mt_tracker_prepare_write(mt_tracker *t, mt_range_id id, void *addr, size_t len);

/* Copies the range's statistics into *out. Returns 0 or -ENOENT. Any thread. */
MT_API int mt_tracker_stats(mt_tracker *t, mt_range_id id, mt_range_stats *out);

/* Returns the backend serving range `id`, or -ENOENT. Any thread. */
MT_API int mt_tracker_backend(mt_tracker *t, mt_range_id id);

/* Returns 1 when the kernel offers the backend (uffd-wp async and
 * PAGEMAP_SCAN for MT_TRACK_UFFD), 0 when not. Any thread. */
MT_API int mt_track_backend_available(mt_track_backend backend);

/* Name of a backend: "auto", "signal", "uffd". */
MT_API const char *mt_track_backend_name(mt_track_backend backend);

/* Parses a backend name; returns the backend or -EINVAL. */
MT_API int mt_track_backend_parse(const char *name);

/* 1 if memtrack's SIGSEGV handler is installed and on top, 0 if it was never
 * installed, -1 if another handler replaced it. Any thread. */
MT_API int mt_track_handler_status(void);

/* Puts memtrack's handler back on top of whatever the application installed,
 * keeping the application's handler as the next in the chain (re-entry from
 * it is detected, so a handler that chains back to memtrack's does not loop).
 * Returns 0, -ENOSPC when the chain is full, or a sigaction error. */
MT_API int mt_track_reinstall_handler(void);

#ifdef __cplusplus
}
#endif
#endif
