/* track internals shared by the tracker core, the two backends and the
 * interposer hooks.
 *
 * Ordering rules that make "never lose a write" hold (see docs/track.md):
 *  - fault handler: make the page writable FIRST, then set its dirty bit.
 *  - collect: take the dirty bits FIRST, then re-arm exactly the pages taken.
 * Whatever the interleaving, a page left writable always ends with its bit
 * set, and a write that slips in before the re-arm happened before collect
 * returned, so the caller sees it when it reads the page it was told about.
 *
 * Memory rule: nothing the fault handler, collect or the hooks write lives in
 * malloc memory. Trackers, ranges, bitmaps, page states and tables come from
 * arena.c (mmap'd pages memtrack never hands out), because the application
 * may track malloc memory and the tracker must never fault on its own
 * bookkeeping. */
#ifndef MT_TRACK_INTERNAL_H
#define MT_TRACK_INTERNAL_H

#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/mman.h>

#include "memtrack/track.h"
#include "../common/clock.h"
#include "../common/page.h"
#include "preload_abi.h"

/* ---- system calls and locks (sys.c) ------------------------------------ */
/* Track's own calls go to the real functions, never to the interposer's
 * wrappers (which would take them for the application's). mprotect is a
 * raw system call (async-signal-safe, no user-space state). All return 0 or
 * -errno, except mmap/mremap (MAP_FAILED + errno). */
int mti_sys_mprotect(uintptr_t addr, size_t len, int prot);
int mti_sys_sigaction(int sig, const struct sigaction *act, struct sigaction *old);
int mti_sys_sigmask(int how, const sigset_t *set, sigset_t *old);
void *mti_sys_mmap(void *addr, size_t len, int prot, int flags, int fd, off_t off);
int mti_sys_munmap(void *addr, size_t len);
int mti_sys_madvise(void *addr, size_t len, int advice);
void *mti_sys_mremap(void *old, size_t old_len, size_t new_len, int flags, void *new_addr);
/* Blocks every signal except the synchronous fault signals (a fault must
 * still reach the handler), saving the old mask. */
void mti_sys_block_async(sigset_t *saved);
/* Blocks every signal. */
void mti_sys_block_all(sigset_t *saved);
void mti_sys_restore_mask(const sigset_t *saved);
/* The interposer's API once found (NULL without it); set by preload_link.c. */
const mt_preload_api *mti_sys_api(void);
void mti_sys_set_api(const mt_preload_api *api);
/* 1 when the interposer is attached to this copy of track (hooks live). */
int mti_sys_attached(void);
void mti_sys_set_attached(int on);

/* Calls fn for each mapped part [lo, hi) of [start, end) with its
 * protection now (PROT_* bits, and the two below), from the kernel's list of
 * mappings (vmaprot.c). 0, or a negative errno when the list could not be read
 * (fn was then called for none or some of the parts). Not async-signal-safe
 * in intent: called where ranges are added. */
typedef void (*mti_vma_fn)(void *ctx, uintptr_t lo, uintptr_t hi, unsigned prot);
#define MTI_VMA_SHARED 0x100u /* mapped shared (MAP_SHARED, System V memory) */
#define MTI_VMA_FILE 0x200u   /* backed by a file (memfd and hugetlb memory too) */
int mti_vma_prot(uintptr_t start, uintptr_t end, mti_vma_fn fn, void *ctx);

/* /proc/self/maps and /proc/self/mem, kept open for the process
 * (procfd.c): an application that sandboxes itself later (seccomp) may
 * refuse opens. mti_procfd_get returns a descriptor of this process's file
 * (or a negative errno) to use with pread or ioctl only, and sets *priv when
 * it is the call's own, which mti_procfd_put closes. Async-signal-safe.
 * mti_procfd_warm opens them (the first tracker's start). */
enum { MTI_PROCFD_MAPS, MTI_PROCFD_MEM, MTI_PROCFD_KINDS };
int mti_procfd_get(int kind, int *priv);
void mti_procfd_put(int fd, int priv);
void mti_procfd_warm(void);
/* In a fork child (fork.c): a replacement another thread of the parent had
 * under way is nobody's now. */
void mti_procfd_fork_child(void);
/* 1 when part of [start, end) is device memory whose driver serves
 * /proc/self/mem at the wrong offsets (NVIDIA's PCI BAR mappings once split,
 * vmaprot.c), 0 when not, or a negative errno. */
int mti_vma_misread(uintptr_t start, uintptr_t end);
/* The mapping that holds addr: the file offset addr has there, and its path
 * (its last cap-1 bytes when longer; "" for anonymous memory), NUL-ended in
 * name. 0, -ENOENT when nothing is mapped there, or a negative errno.
 * Async-signal-safe: system calls and a stack buffer (vmaprot.c). */
int mti_vma_at(uintptr_t addr, uint64_t *file_off, char *name, size_t cap);
/* The hooks' note of a protection just set by the application (mprotect,
 * mmap(MAP_FIXED); mremap passes 0): one that forbids reads moves the count
 * mt_track_readable's answers depend on (readable.c). */
void mti_readable_note(int prot);

/* A spin lock for state that signal handlers and hooks reach. Callers block
 * signals first (so the holder is never interrupted on its own thread by
 * code that wants the lock) and hold it briefly. */
typedef struct mt_spin {
    _Atomic int held;
} mt_spin;
void mti_spin_lock(mt_spin *s);
void mti_spin_unlock(mt_spin *s);

/* ---- metadata arena (arena.c) ------------------------------------------ */
/* Zeroed memory from memtrack's own mappings. Not async-signal-safe. */
void *mti_arena_alloc(size_t size);
void mti_arena_free(void *p, size_t size);
void mti_arena_fork_prepare(void);
void mti_arena_fork_parent(void);
void mti_arena_fork_child(void);

/* ---- ranges -------------------------------------------------------------- */
/* Page state, one byte per page of a range's span: the protection the
 * application asked for (PROT_READ|PROT_WRITE|PROT_EXEC, as it would be
 * without memtrack) and whether the page is gone (unmapped, moved or
 * replaced by the application: memtrack never touches it again). Written by
 * the hooks (application mprotect/munmap/mremap/mmap) under the table lock
 * with every reader drained; read by readers. */
#define MT_PS_PROT 7u
#define MT_PS_GONE 0x80u

/* Protection of a tracked page while armed (signal backend): the
 * application's, minus write. PROT_WRITE alone implies read on Linux. */
static inline int mti_armed_prot(unsigned app)
{
    app &= MT_PS_PROT;
    return (app & PROT_WRITE) ? (int)((app & ~(unsigned)PROT_WRITE) | PROT_READ) : (int)app;
}

typedef struct mt_range mt_range;

struct mt_range {
    struct mt_tracker *owner;
    mt_range_id id;
    uintptr_t start, end;           /* tracked bytes [start, end) */
    uintptr_t span_start, span_end; /* page-aligned cover of [start, end) */
    size_t npages;
    unsigned page_shift;
    mt_track_backend backend;
    int fallback_reason; /* why uffd was refused, 0 if not */
    size_t alloc_bytes;  /* arena bytes of this struct + arrays */
    /* Dirty bits, one per page of the span. Signal backend: set by the fault
     * handler. Both backends: set by prepare_write, kernel writes,
     * INITIALLY_DIRTY, the hooks (pages changed without a write fault),
     * pages a collect could not report (no room in the caller's array), and
     * pages a neighbouring uffd range's scan re-protected on our behalf. */
    _Atomic uint64_t *bits;
    size_t nwords;
    _Atomic uint8_t *pstate; /* MT_PS_*, per page */
    _Atomic size_t gone_pages;
    _Atomic int whole; /* report every live page on each collect (uffd range in a fork child) */
    _Atomic uint64_t faults;
    _Atomic uint64_t collects;
    _Atomic uint64_t pages_collected;
    _Atomic uint64_t degradations;
    _Atomic uint64_t kernel_writes;
    _Atomic uint64_t app_calls;
    _Atomic int degraded; /* signal backend: the whole span is writable and all bits set */
    /* mt_range_opts.fault_budget: faults taken this pass (reset by collect)
     * and passes that ran out of it (signal_posix.c). */
    uint32_t fault_budget;
    _Atomic uint32_t pass_faults;
    /* Fault handlers between "page writable" and "its bit set" (signal
     * backend): a write by another thread in that window lands with no bit
     * yet, so mt_tracker_peek counts the range as possibly written, and a
     * collect first waits for the handlers that began before it
     * (collect.c, settle_handlers). Two counters: a handler counts itself
     * on the one fault_epoch's low bit names, which a collect flips, so
     * that handlers arriving while it waits go to the other one and the
     * counter it waits on drains. */
    _Atomic uint32_t faulting[2];
    _Atomic uint32_t fault_epoch;
    _Atomic uint64_t budget_opens;
    /* MT_RANGE_HOT_PAGES (hot.c), else NULL: pages kept writable and
     * reported by every pass, and per page its recent history. */
    _Atomic uint64_t *hot;
    _Atomic uint16_t *heat;
    _Atomic uint32_t pass;    /* the current collect pass (hot.c) */
    _Atomic int pass_open;    /* the last collect call filled its room */
    _Atomic uint64_t sweep_seen; /* the collect_all sweep that last visited it */
    /* With a collection helper (uffd ranges): per window of 4096 pages, the
     * helper's job scanning it (slot + 1), 0 when none (helper.c). */
    _Atomic uint32_t *pend;
    /* The memory is mapped shared (MAP_SHARED, System V): a forked child
     * that inherits the mapping writes these very pages through page
     * tables of its own, which raise nothing in this process (fork.c).
     * add_pid: the process that added the range; add_seq orders ranges
     * against what descendants report. */
    int shared_map;
    pid_t add_pid;
    uint64_t add_seq;
};

/* Tests only: a signal handler's dwell between "writable" and "bit set"
 * (signal_posix.c). */
extern _Atomic int64_t mti_test_fault_dwell_ns;

static inline size_t mti_page_index(const mt_range *r, uintptr_t page)
{
    return (size_t)((page - r->span_start) >> r->page_shift);
}

static inline unsigned mti_pstate(const mt_range *r, size_t i)
{
    return atomic_load_explicit(&r->pstate[i], memory_order_relaxed);
}

static inline void mti_bits_set(_Atomic uint64_t *bits, size_t i)
{
    /* release: pairs with the acquire exchange in collect, so the collector
     * that takes the bit also sees everything written before it was set. */
    atomic_fetch_or_explicit(&bits[i / 64], 1ull << (i % 64), memory_order_release);
}

/* Sets bits [first, first+n) (ranges.c). */
void mti_bits_set_range(_Atomic uint64_t *bits, size_t first, size_t n);

struct mt_tracker {
    mt_tracker_opts opts;
    size_t page_size;
    unsigned page_shift;
    pthread_rwlock_t lock; /* write: add/remove/destroy; read: collect, stats, prepare */
    mt_range **slots;      /* by slot index; NULL when free */
    uint32_t *slot_gen;
    uint32_t nslots;
    mt_range **sorted; /* live ranges in address order */
    uint32_t nsorted;
    int uffd;       /* -1 until the first uffd range; -1 again in a fork child */
    int pagemap_fd; /* -1 until the first uffd range */
    /* The files the two name (mti_fd_identity), checked before each use
     * that could act on another file at the same number (uffd_linux.c). */
    uint64_t uffd_dev, uffd_ino, pagemap_dev, pagemap_ino;
    /* Set in a fork child when another thread held the lock at the fork:
     * the tracker's tables may be half-updated, every call fails. */
    _Atomic int poisoned;
    _Atomic int sweep_open; /* the last collect_all filled the caller's array */
    _Atomic uint64_t sweep; /* collect_all sweeps begun */
    struct mt_tracker *next_registered; /* fork.c's list */
    struct mt_helper *helper; /* the collection helper, NULL when not asked (helper.c) */
};

/* ---- the table of ranges (sigtable.c) -------------------------------------
 * Every range of every tracker in the process, sorted by address, read by
 * the fault handler and the hooks without locks (left-right: two copies,
 * readers count themselves in on the active one), written by add/remove
 * under a spin lock. Ranges in it never overlap. The application's memory
 * calls (hooks.c) are the other writers: under the same lock they stop
 * readers from entering and wait for those inside to leave, so a reader
 * sees page states and real protections that agree for its whole section. */
typedef struct mt_sig_entry {
    uintptr_t start, end;
    mt_range *range;
} mt_sig_entry;

/* Writer side: blocks every signal and takes the lock (restored on unlock). */
void mti_sigtable_lock(void);
void mti_sigtable_unlock(void);
/* Inserts; -EEXIST on overlap, -ENOSPC when full, -ENOMEM. */
int mti_sigtable_insert(mt_range *r);
/* Removes and waits until no reader can still see r. */
void mti_sigtable_remove(mt_range *r);
/* The state byte of `page` as the other ranges on it know it (shared end
 * pages of a new range inherit it); -1 if no other range covers it. */
int mti_sigtable_page_state(uintptr_t page, const mt_range *self);
/* Records a removed span so a handler that trapped before the removal
 * retries instead of chaining (see signal_posix.c). */
void mti_sigtable_note_removed(uintptr_t start, uintptr_t end);
/* With the lock held: keeps readers out and waits for those inside, except
 * the calling thread's own enclosing sections. */
void mti_sigtable_hook_begin(void);
void mti_sigtable_hook_end(void);
/* The entries while the lock is held. */
const mt_sig_entry *mti_sigtable_locked_view(uint32_t *count);
/* Number of ranges in the table (relaxed; a hint for fast paths). */
uint32_t mti_sigtable_count(void);
/* Changes with every insert and remove: whether the table changed since.
 * seq_cst: ordered with the kernel-write pins (kwrite.c). */
uint64_t mti_sigtable_version(void);

/* Reader side: async-signal-safe. Heavy sections (they act on
 * protections) must be entered with asynchronous signals blocked; light
 * sections only look up ranges and set dirty bits (see sigtable.c). */
unsigned mti_sigtable_enter(const mt_sig_entry **entries, uint32_t *count);
void mti_sigtable_leave(unsigned token);
unsigned mti_sigtable_enter_light(const mt_sig_entry **entries, uint32_t *count);
void mti_sigtable_leave_light(unsigned token);
uint32_t mti_sigtable_first_ending_after(const mt_sig_entry *e, uint32_t n, uintptr_t addr);
int mti_sigtable_recently_removed(uintptr_t addr);
void mti_sigtable_fork_child(void);

/* ---- protections (protect.c) -------------------------------------------- */
/* Pages [first, first+n) of r that a kernel write is using right now: collect
 * and add leave them as they are (and keep them dirty). */
typedef struct mt_pins {
    uintptr_t lo[64], hi[64];
    int n;
    int all; /* more than fit: treat every page as pinned */
} mt_pins;
enum { MT_PROT_ARMED = 0, MT_PROT_APP = 1 };
/* Sets the real protection of pages [first, first+n) of r, whose page 0 is
 * at `base` (r->span_start, or where mremap moved it): the application's
 * protection (MT_PROT_APP) or that minus write (MT_PROT_ARMED). Gone pages
 * are skipped; pinned pages too (their dirty bit is set instead). One
 * mprotect per run of equal protection. Returns 0 or the first -errno. The
 * caller is a table reader or holds the table lock. */
int mti_protect_pages(const mt_range *r, size_t first, size_t n, int mode, uintptr_t base,
                     const mt_pins *pins);

/* ---- kernel writes (kwrite.c) ------------------------------------------- */
/* Collect's and add's side of the handshake with kernel writes in flight:
 * between begin and end no kernel write makes a page writable without this
 * re-arm seeing its pin. `pins` gets the pins that meet [lo, hi), the span
 * about to be re-armed. */
void mti_kw_rearm_begin(mt_pins *pins, uintptr_t lo, uintptr_t hi);
void mti_kw_rearm_end(void);
int mti_kw_begin(const mt_kw_segs *segs);
void mti_kw_end(int token, const mt_kw_segs *segs);
void mti_kw_fork_child(void);

/* ---- signal backend (signal_posix.c, sigchain.c) ------------------------- */
/* Installs the process-wide handler once. 0 or negative errno. */
int mti_sig_install(void);
/* Arms a new range: inserts it into the table, then protects its span. */
int mti_sig_arm_range(mt_range *r);
/* Disarms: restores the application's protection on pages no other signal
 * range needs, removes from the table. */
void mti_sig_disarm_range(mt_range *r);
/* Re-protects pages [first, first+n) of r after a collect took their bits.
 * Re-arming the whole span ends a degradation. Returns 0, or -errno; on
 * failure the bits are set again (never lost) and the range is degraded. */
int mti_sig_rearm(mt_range *r, size_t first, size_t n, const mt_pins *pins);
/* Makes pages [first, first+n) of r writable and marks them (and the pages'
 * other owners) dirty. */
int mti_sig_make_writable(mt_range *r, size_t first, size_t n);
/* Kernel writes nobody brackets (io_uring, AIO: MT_PRELOAD_ASYNC_*) are
 * possible from now on: every signal range is opened for good (writable,
 * reported whole on each collect), and so is every later one. Idempotent. */
void mti_sig_unbracketed(unsigned what);
/* Opens signal range r for good (writable, reported whole on each
 * collect): a descendant may write it unseen (fork.c). */
void mti_sig_keep_open(mt_range *r);
/* What mti_sig_unbracketed was told so far (0: none). */
unsigned mti_sig_unbracketed_seen(void);
/* Whether r is reported whole on each collect because buffers were
 * registered with io_uring (MT_TRACK_UNBRACKETED_PINNED): uffd ranges stay
 * registered but their scan misses the kernel's writes through the pins;
 * signal ranges are kept open by mti_sig_unbracketed. */
static inline int mti_range_pinned_whole(const mt_range *r)
{
    return r->backend == MT_TRACK_UFFD && (mti_sig_unbracketed_seen() & MT_TRACK_UNBRACKETED_PINNED) != 0;
}

/* sigchain.c: the handlers memtrack chains to, one chain per signal. */
enum { MT_SLOT_SEGV = 0, MT_SLOT_BUS = 1, MT_NSLOTS = 2 };
int mti_chain_install(void (*ours)(int, siginfo_t *, void *));
int mti_chain_installed(void);
/* mt_track_reinstall_handler() once installed: puts our handler back on top
 * of each signal where another replaced it, chaining to that one. */
int mti_chain_reinstall(void);
/* Calls the next handler for a signal that is not a tracked write, with the
 * semantics the kernel would have applied. Async-signal-safe. */
void mti_chain_call(int slot, int sig, siginfo_t *si, void *uctx);
/* The application's sigaction for SIGSEGV/SIGBUS, virtualised (hook). */
int mti_chain_app_sigaction(int sig, const struct sigaction *act, struct sigaction *old);
/* Sets the disposition the application sees to SIG_DFL and the real one too
 * (a fault blocked by the application's virtual mask kills the process, as
 * the kernel does for a blocked synchronous signal). */
void mti_chain_force_default(int sig);
void mti_chain_fork_prepare(void);
void mti_chain_fork_parent(void);
void mti_chain_fork_child(void);

/* ---- uffd backend (uffd_linux.c) -------------------------------------- */
/* Opens the tracker's userfaultfd and pagemap fds if not open yet, or
 * again when the application took their numbers (write lock, or creation). */
int mti_uffd_open(mt_tracker *t);
/* Closes them where they are still ours. */
void mti_uffd_close(mt_tracker *t);
/* Whether both still name the files opened (one fstat each; async-signal-
 * safe). */
int mti_uffd_kept(const mt_tracker *t);
/* Registers and write-protects r's span; pages shared with the tracker's
 * other uffd ranges are handed over without losing their written state. */
int mti_uffd_arm_range(mt_tracker *t, mt_range *r);
void mti_uffd_disarm_range(mt_tracker *t, mt_range *r);
/* Reads and re-protects the written pages of [start, end) (page-aligned),
 * ORing them into `out` (bit 0 = page `start`). Returns 0 or -errno. */
int mti_uffd_scan(mt_tracker *t, uintptr_t start, uintptr_t end, unsigned page_shift,
                 uint64_t *out);
int mti_uffd_probe(void);
/* 1 if a page of [start, end) (page-aligned) was written since it was last
 * protected, 0 if not, -errno: reads only, re-protects nothing. */
int mti_uffd_peek(mt_tracker *t, uintptr_t start, uintptr_t end);
/* Removes the write protection of [start, end) without a fault (hot pages):
 * the next scan reports them as written. Returns 0 or -errno. */
int mti_uffd_unprotect(mt_tracker *t, uintptr_t start, uintptr_t end);

/* ---- collection helper (helper.c, helper_main.c) ------------------------
 * A separate process whose threads run PAGEMAP_SCAN on our pagemap. */
typedef struct mt_helper mt_helper;
/* Starts it with `threads` scanning threads (the pagemap is open). 0 or
 * -errno; on failure t->helper records why and collection stays here. */
int mti_helper_start(mt_tracker *t, unsigned threads);
/* Kills and reaps it, frees t->helper. */
void mti_helper_stop(mt_tracker *t);
/* A fork child: forgets the parent's helper without touching it. */
void mti_helper_fork_child(mt_tracker *t);
/* 1 running, 2 starting, 0 not asked, or the negative reason it is not used. */
int mti_helper_status(const mt_tracker *t);
/* Posts a scan of each window of rs[0..n) that has none pending, in one
 * batch (one wake-up); the number of ranges with a scan posted (0: no
 * helper, not ready, none eligible). Caller holds t->lock (read). */
long mti_helper_post(mt_tracker *t, mt_range *const *rs, size_t n);
/* Takes window `win`'s pending job: 0 when none (scan it yourself), 1 with
 * its written pages ORed into out[0..nwords), or a negative code when it
 * failed or the helper died before finishing it (report the whole window:
 * its pages may have been re-protected). Waits for a running job. */
int mti_helper_take(mt_tracker *t, mt_range *r, size_t win, uint64_t *out, size_t nwords);
/* Whether window `win` of r has a job pending. */
int mti_helper_pending(const mt_range *r, size_t win);
/* Waits for and drops r's pending jobs (remove: no scan outlives a range). */
void mti_helper_drop_range(mt_tracker *t, mt_range *r);

/* ---- the tracker's sorted ranges (ranges.c) and collect (collect.c) ------ */
/* Live uffd ranges of t sharing page `page` with r (other than r) get that
 * page's bit: called when r's scan re-protected a shared page. */
void mti_track_share_page(mt_tracker *t, const mt_range *r, uintptr_t page);
/* Index in t->sorted of the first range whose end is above addr. */
uint32_t mti_track_sorted_lower(const mt_tracker *t, uintptr_t addr);

/* `sweep`: the collect_all sweep this call belongs to (a sweep goes on while
 * its calls fill the caller's array), 0 for a collect of one range. */
long mti_collect_range(mt_tracker *t, mt_range *r, mt_dirty_run *runs, size_t max, uint64_t sweep);

/* ---- hot pages (hot.c) ------------------------------------------------------
 * For ranges with MT_RANGE_HOT_PAGES, inside a collect. */
/* Adds the hot pages of window words [w0, w0+nw) to `local` (the pages this
 * collect reports), minus those this pass already reported. */
void mti_hot_add_window(mt_range *r, size_t w0, size_t nw, uint64_t *local, uint32_t pass);
/* Page p is being reported by pass `pass`: updates its history; 1 when it
 * stays writable (not re-armed, reported again by the next pass). */
int mti_hot_keep(mt_range *r, size_t p, uint32_t pass);
/* Whether any of pages [first, last] is hot now. */
int mti_hot_any(const mt_range *r, size_t first, size_t last);
size_t mti_hot_count(const mt_range *r);
/* A collect call on r begins: the pass it belongs to. A new pass starts when
 * the last call returned fewer runs than its room (a caller looping until
 * then never sees a hot page twice in one loop), except in a collect_all
 * sweep (`sweep` != 0) that already visited r. */
uint32_t mti_hot_pass_begin(mt_range *r, uint64_t sweep);
/* The call returns; `full`: it filled its room (the pass goes on). */
void mti_hot_pass_end(mt_range *r, int full);

/* ---- interposer link and fork (preload_link.c, fork.c) ------------------ */
/* Finds the interposer and attaches the hooks, once per process. */
void mti_preload_link(void);
void mti_fork_register(mt_tracker *t);
void mti_fork_unregister(mt_tracker *t);
/* Shared memory and descendants (fork.c). A number for a new range. */
uint64_t mti_fork_next_seq(void);
/* A write into r is about to be let through: when r is mapped shared and
 * this process is a descendant of the one that added it, the ancestor is
 * told (its collects report r whole from then on). Async-signal-safe. */
void mti_fork_note_write(const mt_range *r);
/* Whether a descendant told that it may write r (shared memory). */
int mti_fork_inherited(const mt_range *r);

/* Writes the line mt_track_set_fault_report asked for, if any, on a fault
 * about to take its default action. Async-signal-safe (fault_report.c). */
void mti_fault_report(int sig, const siginfo_t *si, const void *uctx);

/* Calls the function mt_track_set_last_words registered, if any.
 * Async-signal-safe (sigchain.c). */
void mti_last_words_call(int why);

/* hooks.c: what the interposer calls. */
extern const mt_preload_hooks mti_hooks;

#endif
