/* memtrack track: find the pages an application wrote in host-mapped memory.
 *
 * A tracker watches ranges of the address space and answers one question:
 * "which pages of this range were written since I last looked?". The
 * application needs no change. Two backends:
 *
 *  - signal: pages are made read-only with mprotect; a SIGSEGV/SIGBUS handler
 *    records the page in a dirty bitmap and makes it writable again. Works
 *    on any mapping, including GPU driver mappings. Costs one signal per
 *    first write to a page and splits VMAs.
 *  - uffd: userfaultfd write-protect in asynchronous mode plus the
 *    PAGEMAP_SCAN ioctl (Linux >= 6.7). The kernel resolves write faults by
 *    itself, no signal is raised, and one ioctl reads and re-protects the
 *    written pages. Only anonymous, shmem and hugetlb memory can be
 *    registered: device mappings are refused, and such ranges fall back to
 *    the signal backend.
 *
 * Guarantee: a write to tracked memory that happens before a collect begins
 * is reported by that collect; one made while it runs, by that collect or
 * by the next one; never lost.
 *
 * Transparency: with the interposer libmemtrack_preload.so in LD_PRELOAD
 * (docs/track.md), the application observes nothing of the tracking: its
 * SIGSEGV/SIGBUS handlers are chained behind memtrack's and what it reads
 * back is what it installed; those two signals stay deliverable while it
 * believes them blocked; read(2)-family calls into tracked memory work and
 * are reported; its own mprotect is respected per page; pages it zeroes
 * (madvise), writes through /proc/self/mem, or unmaps are reported or marked
 * gone (MT_EUNMAPPED). The tracker finds the interposer by itself when a
 * tracker is created (mt_track_preload_status()).
 *
 * Without the interposer (signal backend): read(2) into tracked memory fails
 * with EFAULT (use mt_tracker_prepare_write()), and a handler the
 * application installs *after* memtrack's must chain to the one it replaced
 * for faults it does not own, as crash reporters do;
 * mt_track_handler_status() tells whether memtrack's handler is still on
 * top, and mt_track_reinstall_handler() puts it back while keeping the
 * application's handler in the chain. Either way every fault that is not a
 * tracked write goes to the handler installed before, with that handler's
 * semantics (SA_SIGINFO or plain, sa_mask, SA_NODEFER, SA_RESETHAND; SIG_IGN
 * and SIG_DFL as the kernel applies them to faults).
 *
 * Memory: the tracker's own bookkeeping (ranges, bitmaps, page states) lives
 * in memtrack's own mappings, never in malloc memory, so the application may
 * track heap memory.
 *
 * fork(): the child inherits the read-only protections and the handler;
 * its writes are absorbed in the child only and never disturb the parent's
 * tracking. The child may keep using a tracker: signal ranges work as in the
 * parent; uffd ranges are reported whole on each collect (the child's pages
 * are not write-protected); a tracker that another thread was using at the
 * fork fails every call with -ENOTRECOVERABLE in the child. */
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
    /* uffd ranges: threads of a collection helper process that runs the
     * scans mt_tracker_collect_ahead() asks for (up to 64); 0 = no helper,
     * every scan runs in the collecting thread. The helper is invisible to
     * the application's wait()/SIGCHLD and dies with the process; if it
     * cannot start or dies, collection goes on in-process
     * (mt_tracker_helper_status() says why). */
    uint32_t helper_threads;
    uint32_t reserved32;  /* zero */
    uint64_t reserved[3]; /* zero: room to grow (docs/design.md, "Options") */
} mt_tracker_opts;

enum {
    /* The first collect reports every page of the range as dirty (for callers
     * that did not copy the range's content when they added it). */
    MT_RANGE_INITIALLY_DIRTY = 1u << 0,
    /* Pages written in 3 consecutive collect passes stay writable and are
     * reported by every pass, written or not (no fault per page per pass
     * for memory rewritten every frame); each is re-armed once every 16
     * passes and cools down if not written then. For callers that compare
     * reported pages against a copy (extra reports cost a compare, never a
     * lost write); mt_tracker_peek says "written" for a hot page. A pass is
     * one collect, or the calls up to one that returns fewer than `max` (a
     * caller that stops earlier goes on with that pass at its next call);
     * for collect_all, one sweep (its calls up to one that returns fewer
     * than `max`) is one pass of every range. A hot page is reported once
     * per pass. Partial pages at the range's ends never become hot. */
    MT_RANGE_HOT_PAGES = 1u << 1,
};

typedef struct mt_range_opts {
    mt_track_backend backend; /* 0 = the tracker's default */
    uint32_t flags;           /* MT_RANGE_* */
    /* The application's protection of the memory now (PROT_READ|PROT_WRITE|
     * PROT_EXEC bits; 0 = PROT_READ|PROT_WRITE): kept per page from then on
     * (its own mprotect calls update it, with the interposer), restored on
     * remove, and never widened or narrowed by tracking. */
    int prot;
    /* Signal backend: once this many write faults have been taken in one
     * collect pass, the whole range is made writable and the next collect
     * reports all of it, so that a writer rewriting most of a big range pays
     * this many faults (~5 us each) and the caller one compare of the range,
     * not a fault per page. 0: never. uffd ranges ignore it (their faults
     * cost no signal). Counted in mt_range_stats.budget_opens. */
    uint32_t fault_budget;
    uint64_t reserved[4]; /* zero: room to grow (docs/design.md, "Options") */
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
    /* The application unmapped, moved (mremap) or replaced (mmap MAP_FIXED)
     * pages of the range (seen through the interposer): those pages are
     * never touched or reported again; stop capturing the range and remove
     * it. `unmapped` is 1 when unmapped_pages > 0. */
    int unmapped;
    size_t unmapped_pages;
    uint64_t kernel_writes; /* read(2)-family calls the interposer prepared the range for */
    uint64_t app_calls;     /* the application's mprotect/madvise/munmap/mremap calls on it */
    /* 1 when every page is reported on each collect because the range is
     * not (or not only) written through its page tables: a uffd range in a
     * fork child (not write-protected there), a signal range once an
     * unbracketed writer was set up, any range once buffers were
     * registered with io_uring (MT_TRACK_UNBRACKETED_PINNED), and memory
     * mapped shared once a forked child (or its descendants) may write it
     * (a signal range: from the child's first write; uffd: from the fork):
     * the child writes the same pages through page tables of its own. */
    int not_protected;
    size_t hot_pages; /* MT_RANGE_HOT_PAGES: pages kept writable now */
    uint64_t budget_opens; /* passes whose fault_budget ran out (the range was opened whole) */
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
 * number of runs, -ENOENT / -EINVAL, or MT_EUNMAPPED instead of 0 once the
 * application has unmapped or moved part of the range (its remaining live
 * dirty pages are reported first). Any thread; concurrent collects of the
 * same range split the dirty pages between them. */
MT_API long mt_tracker_collect(mt_tracker *t, mt_range_id id, mt_dirty_run *runs, size_t max);

/* As mt_tracker_collect, over every range of the tracker in address order.
 * Ranges the application unmapped contribute their live pages, no error
 * (check mt_range_stats.unmapped). */
MT_API long mt_tracker_collect_all(mt_tracker *t, mt_dirty_run *runs, size_t max);

/* Starts scanning the uffd ranges ids[0..n) in the collection helper, in
 * parallel (opts.helper_threads): their next collect waits for those scans
 * and reports what they found instead of scanning itself. Writes after a
 * range's scan are reported by the collect after. Returns the number of
 * ranges handed over (0 without a running helper: collects then scan
 * themselves), -EINVAL. Any thread. */
MT_API long mt_tracker_collect_ahead(mt_tracker *t, const mt_range_id *ids, size_t n);

/* The collection helper: 1 running, 2 starting (collects scan themselves
 * until it runs), 0 not asked (or no uffd), or why collection fell back to
 * in-process scanning: -ENOENT (the memtrack-scan program was not found),
 * -ECHILD (it exited or was killed), -ETIMEDOUT (stuck; killed), or the
 * error that stopped its start. Any thread. */
MT_API int mt_tracker_helper_status(mt_tracker *t);

/* Marks [addr, addr+len) of range `id` dirty and writable now, so that the
 * kernel can write into it (e.g. read(2) into a buffer tracked by the signal
 * backend, which would otherwise fail with EFAULT). The pages are reported by
 * the next collect; a collect that runs before the kernel write re-arms them
 * (the interposer has no such race: prefer it). Returns 0, -ENOENT or
 * -EINVAL. Any thread. */
MT_API int mt_tracker_prepare_write(mt_tracker *t, mt_range_id id, void *addr, size_t len);

/* Whether any page overlapping bytes [offset, offset+len) of range `id` was
 * written since the collect that last reported it, without reporting or
 * re-arming anything (a verifier asks this about bytes that changed after a
 * capture: written since the collect means the write raced the capture).
 * Also 1 (may have been) for a hot page, and for any page of a signal range
 * while a fault on it is being handled: between making a page writable and
 * setting its bit, another thread's write can land there with no bit yet.
 * Returns 1, 0, -ENOENT or -EINVAL. Any thread. */
MT_API int mt_tracker_peek(mt_tracker *t, mt_range_id id, size_t offset, size_t len);

/* 1 when the range's memory is mapped shared and a forked child of this
 * process (or a descendant of one) may write it: its writes raise nothing
 * here, so the range is reported whole on each collect from now on (signal
 * ranges: once the child wrote there; uffd ranges: once it was forked with
 * the mapping). 0 otherwise, -ENOENT or -EINVAL. Any thread. */
MT_API int mt_tracker_shared_with_child(mt_tracker *t, mt_range_id id);

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
 * installed, -1 if another handler replaced it (only possible without the
 * interposer, or with a raw rt_sigaction system call). Any thread. */
MT_API int mt_track_handler_status(void);

/* Kernel facilities that write the application's memory with no call around
 * the write that the interposer could bracket (mt_track_unbracketed_writers).
 * PINNED: buffers registered with io_uring (fixed buffers), which the kernel
 * pins once and writes later through its own mapping of the pages, never
 * through the application's page tables, so neither backend sees those
 * writes. RAW: Go code is loaded, whose runtime makes its own system calls
 * (seen when a tracker attaches to the interposer). */
enum {
    MT_TRACK_UNBRACKETED_URING = 1,
    MT_TRACK_UNBRACKETED_AIO = 2,
    MT_TRACK_UNBRACKETED_PINNED = 4,
    MT_TRACK_UNBRACKETED_RAW = 8
};

/* The facilities the application set up so far, as the interposer saw them
 * (io_uring through libc's syscall() or liburing, Linux AIO through syscall()
 * or libaio). From the first one on, the signal backend stops protecting:
 * every signal range is writable and reported whole on each collect (exact,
 * slower), because a kernel write into a protected page would fail with
 * EFAULT in the application. uffd ranges are unaffected (the kernel's writes
 * are tracked there), except after MT_TRACK_UNBRACKETED_PINNED: from then on
 * uffd ranges are reported whole on each collect too (their pages stay
 * registered; mt_range_stats.not_protected says 1). 0 when none, or without
 * the interposer. Any thread. */
MT_API unsigned mt_track_unbracketed_writers(void);

/* Whether every page of [addr, addr + len) can be read now: 1 yes, 0 some
 * page cannot (PROT_NONE: the application or a layer below guards it, and a
 * read would fault into their handler), or a negative errno when the
 * kernel's list of mappings cannot be read. *seen caches an all-readable
 * answer for this memory (start it at 0, and again when the address
 * changes): with the interposer attached, the answer stands without a
 * system call until the process next sets a protection that forbids reads
 * (mprotect, mmap(MAP_FIXED), mremap); without it, the first all-readable
 * answer stands. Any thread. */
MT_API int mt_track_readable(const void *addr, size_t len, uint64_t *seen);

/* Whether [addr, addr + len) can change without a write through these
 * addresses, which track would not see (docs/track.md, "Limits"): 1 when part
 * of it is mapped shared (MAP_SHARED, System V shared memory, a memfd) or
 * backed by a file (write(2) to the file changes it, also under a private
 * mapping until a page is copied), 0 when it is private anonymous memory
 * throughout (unmapped parts count as that), or a negative errno when the
 * kernel's list of mappings cannot be read (MT_EUNSUPPORTED off Linux).
 * Costs a look at that list. Any thread. */
MT_API int mt_track_aliasable(const void *addr, size_t len);

/* Part of a range: bytes [offset, offset + length). */
typedef struct mt_track_span {
    size_t offset;
    size_t length;
} mt_track_span;

/* Copies each span of src to the same offsets of dst, whatever the pages'
 * protection, with no fault and no handler called: through /proc/self/mem,
 * which reads past PROT_NONE as a debugger does. Returns 0, or a negative
 * errno when the kernel refuses (memory it cannot reach that way, such as
 * some device mappings, or a kernel that restricts /proc/self/mem), or
 * MT_EUNSUPPORTED where the driver would serve the read at the wrong
 * offsets (NVIDIA's device memory mapped through the PCI BAR once an
 * mprotect split its mapping: docs/track.md); dst's bytes are then
 * unspecified. Any thread. */
MT_API int mt_track_read_guarded(void *dst, const void *src, const mt_track_span *spans, size_t n);

/* Ways a process ends without running exit handlers (mt_track_last_words). */
enum { MT_TRACK_LAST_EXEC = 0, MT_TRACK_LAST_EXIT = -1 };

/* A function to call when the process is about to be replaced or to die
 * without running exit handlers: `why` is MT_TRACK_LAST_EXEC (exec*),
 * MT_TRACK_LAST_EXIT (_exit/_Exit) or a signal number (a fatal signal about
 * to take its default action: a fault memtrack's handler chains to the
 * default, or a terminating signal the interposer guards). With a signal it
 * runs in a signal handler: it must be async-signal-safe. exec and _exit are
 * seen only with the interposer preloaded. NULL removes it. Any thread. */
typedef void (*mt_track_last_words_fn)(int why);
MT_API void mt_track_set_last_words(mt_track_last_words_fn fn);

/* Where to say how the process dies when a fault the kernel raised
 * (SIGSEGV, SIGBUS) reaches memtrack's handler, is not a tracked write, and
 * is about to take its default action: one line is written to fd just
 * before (after the last words, mt_track_set_last_words), with the signal
 * and its cause, the faulting address and whether it lies in memory a
 * tracker covers, and the instruction as the file it was loaded from and
 * its offset there (from /proc/self/maps; no symbol lookup), e.g.
 *   memtrack: the process dies of SIGSEGV (address not mapped) at address
 *   0x8, outside any memory memtrack tracks; instruction at 0x7f3e1a2d66fd
 *   in libvulkan_lvp.so+0xd66fd
 * (one line). It answers "did memtrack cause this?" where no core is kept.
 * A fault the application's own handler takes is not reported. -1 (the
 * default) turns it off. Async-signal-safe; any thread. */
MT_API void mt_track_set_fault_report(int fd);

/* Puts memtrack's handler back on top of whatever the application installed,
 * keeping the application's handler as the next in the chain (re-entry from
 * it is detected, so a handler that chains back to memtrack's does not loop).
 * Returns 0, -ENOSPC when the chain is full, or a sigaction error. */
MT_API int mt_track_reinstall_handler(void);

/* Whether the interposer libmemtrack_preload.so is in the process and this
 * copy of memtrack is attached to it: 1 attached, 0 not preloaded,
 * MT_EVERSION for an interposer of another ABI version, -EBUSY when another
 * copy of libmemtrack in the process attached first. Any thread. */
MT_API int mt_track_preload_status(void);

/* Writes the path of the interposer to preload into buf: $MEMTRACK_PRELOAD,
 * else ../lib/libmemtrack_preload.so next to the running program, else the
 * installed one. Returns its length, -ENOENT if none exists, -ENAMETOOLONG,
 * or -EINVAL. Any thread. */
MT_API int mt_track_preload_path(char *buf, size_t size);

#ifdef __cplusplus
}
#endif
#endif
