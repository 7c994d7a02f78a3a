/* track internals shared by the tracker core and the two backends.
 *
 * Ordering rules that make "never lose a write" hold (see docs/track.md):
 *  - fault handler: make the page writable FIRST, then set its dirty bit.
 *  - collect: take the dirty bits FIRST, then re-arm exactly the pages taken.
 * Whatever the interleaving, a page left writable always ends with its bit
 * set, and a write that slips in before the re-arm happened before collect
 * returned, so the caller sees it when it reads the page it was told about. */
#ifndef MT_TRACK_INTERNAL_H
#define MT_TRACK_INTERNAL_H

#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "memtrack/track.h"

typedef struct mt_range mt_range;

struct mt_range {
    struct mt_tracker *owner;
    mt_range_id id;
    uintptr_t start, end;           /* tracked bytes [start, end) */
    uintptr_t span_start, span_end; /* page-aligned cover of [start, end) */
    size_t npages;
    unsigned page_shift;
    mt_track_backend backend;
    int prot;            /* protection while writable */
    int fallback_reason; /* why uffd was refused, 0 if not */
    /* Dirty bits, one per page of the span. Signal backend: set by the fault
     * handler. Both backends: set by prepare_write, INITIALLY_DIRTY, pages a
     * collect could not report (no room in the caller's array), and pages a
     * neighbouring uffd range's scan re-protected on our behalf. */
    _Atomic uint64_t *bits;
    size_t nwords;
    _Atomic uint64_t faults;
    _Atomic uint64_t collects;
    _Atomic uint64_t pages_collected;
    _Atomic uint64_t degradations;
    _Atomic int degraded; /* signal backend: the whole span is writable and all bits set */
};

static inline size_t mt_page_index(const mt_range *r, uintptr_t page)
{
    return (size_t)((page - r->span_start) >> r->page_shift);
}

static inline void mt_bits_set(_Atomic uint64_t *bits, size_t i)
{
    /* release: pairs with the acquire exchange in collect, so the collector
     * that takes the bit also sees everything written before it was set. */
    atomic_fetch_or_explicit(&bits[i / 64], 1ull << (i % 64), memory_order_release);
}

/* Sets bits [first, first+n). */
void mt_bits_set_range(_Atomic uint64_t *bits, size_t first, size_t n);

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
    int uffd;       /* -1 until the first uffd range */
    int pagemap_fd; /* -1 until the first uffd range */
};

/* ---- global table of signal-backend ranges (sigtable.c) ------------------
 * Read by the fault handler without locks (left-right: two copies, readers
 * count themselves in on the active one), written by add/remove under a
 * mutex. Ranges in it never overlap. */
typedef struct mt_sig_entry {
    uintptr_t start, end;
    mt_range *range;
} mt_sig_entry;

/* Writer side: the caller holds mt_sigtable_lock(). */
void mt_sigtable_lock(void);
void mt_sigtable_unlock(void);
/* Inserts; -EEXIST on overlap, -ENOSPC when full, -ENOMEM. */
int mt_sigtable_insert(mt_range *r);
/* Removes and waits until no handler can still see r. */
void mt_sigtable_remove(mt_range *r);
/* 1 if any live signal range other than `self` covers a byte of page [p, p+ps). */
int mt_sigtable_page_shared(uintptr_t page, size_t page_size, const mt_range *self);
/* Records a removed span so a handler that trapped before the removal
 * retries instead of chaining (see signal_posix.c). */
void mt_sigtable_note_removed(uintptr_t start, uintptr_t end);

/* Reader side: async-signal-safe. */
unsigned mt_sigtable_enter(const mt_sig_entry **entries, uint32_t *count);
void mt_sigtable_leave(unsigned token);
uint32_t mt_sigtable_first_ending_after(const mt_sig_entry *e, uint32_t n, uintptr_t addr);
int mt_sigtable_recently_removed(uintptr_t addr);

/* ---- signal backend (signal_posix.c) ---------------------------------- */
/* Installs the process-wide handler once. 0 or negative errno. */
int mt_sig_install(void);
/* Arms a new range: inserts it into the table, then protects its span. */
int mt_sig_arm_range(mt_range *r);
/* Disarms: unprotects pages no other signal range needs, removes from table. */
void mt_sig_disarm_range(mt_range *r);
/* Re-protects pages [first, first+n) of r after a collect took their bits.
 * Re-arming the whole span ends a degradation. Returns 0, or -errno; on
 * failure the bits are set again (never lost) and the range is degraded. */
int mt_sig_rearm(mt_range *r, size_t first, size_t n);
/* Makes pages [first, first+n) of r writable and marks them (and the pages'
 * other owners) dirty. */
int mt_sig_make_writable(mt_range *r, size_t first, size_t n);

/* ---- uffd backend (uffd_linux.c) -------------------------------------- */
/* Opens the tracker's userfaultfd and pagemap fds if not open yet. */
int mt_uffd_open(mt_tracker *t);
void mt_uffd_close(mt_tracker *t);
/* Registers and write-protects r's span; pages shared with the tracker's
 * other uffd ranges are handed over without losing their written state. */
int mt_uffd_arm_range(mt_tracker *t, mt_range *r);
void mt_uffd_disarm_range(mt_tracker *t, mt_range *r);
/* Reads and re-protects the written pages of [start, end) (page-aligned),
 * ORing them into `out` (bit 0 = page `start`). Returns 0 or -errno. */
int mt_uffd_scan(mt_tracker *t, uintptr_t start, uintptr_t end, unsigned page_shift,
                 uint64_t *out);
int mt_uffd_probe(void);

/* ---- tracker core (tracker.c) ------------------------------------------- */
/* Live uffd ranges of t sharing page `page` with r (other than r) get that
 * page's bit: called when r's scan re-protected a shared page. */
void mt_track_share_page(mt_tracker *t, const mt_range *r, uintptr_t page);
/* Index in t->sorted of the first range whose end is above addr. */
uint32_t mt_track_sorted_lower(const mt_tracker *t, uintptr_t addr);

long mt_collect_range(mt_tracker *t, mt_range *r, mt_dirty_run *runs, size_t max);

#endif
