/* `auto`: per memory, guard or scan, whichever the observed write density
 * makes cheaper, with hysteresis so that one odd frame does not flip it;
 * in scan, bulk (written whole without a diff) while nearly every byte
 * changes.
 *
 * A pure policy: it sees numbers (calibration, a memory's history, what the
 * last capture found and cost) and returns a decision; the capture engine
 * applies it (capture.c is the only place that changes a memory's mode).
 * No Vulkan, no globals: tests/test_layer_units.c drives it directly.
 *
 * Cost model:
 *   guard: 2 x written pages x (first-write fault of the backend + diff of a
 *          page) + collect + (mapped every cycle: arm + disarm), the fixed
 *          costs measured on the memory itself
 *   scan:  mapped pages x diff of a page (measured on the memory once scanned)
 * written pages: the median of the last three captures. The factor 2 is
 * measured: several application threads faulting at once contend on the mm
 * lock, which the single-threaded calibration does not see. */
#ifndef LT_AUTOPILOT_H
#define LT_AUTOPILOT_H

#include <stddef.h>
#include <stdint.h>

#include "config.h"

/* Measured once per process (calibrate.c); fault_ns indexed by mt_track_backend. */
typedef struct lt_ap_cal {
    double page_diff_ns;
    double fault_ns[3];
    int uffd_available;
} lt_ap_cal;

/* A memory's history, kept across map/unmap cycles (a memory mapped every
 * frame is judged on its history, not restarted in guard each time). */
typedef struct lt_ap_state {
    size_t hist[3];        /* pages written in the last three captures */
    unsigned nhist;
    double scan_page_ns;   /* measured cost of scanning one page of this memory, 0 if unknown */
    double guard_setup_ns; /* measured: arming + disarming its tracking once */
    double collect_ns;     /* measured: one collect of its tracker range */
    int remapped;          /* mapped more than once: guard pays setup every cycle */
    int streak;            /* consecutive captures that favoured the other mode */
    /* Bulk (scan's copy state): nearly every byte changes at every capture,
     * so the window is written whole without a diff, as `copy` does. */
    int bulk;
    unsigned bulk_n;       /* captures since entering bulk */
    int bulk_votes;        /* consecutive diffing captures that found >= 85% changed */
} lt_ap_state;

typedef enum lt_ap_decision {
    LT_AP_KEEP = 0,
    LT_AP_TO_SCAN,  /* stop tracking now: the next capture scans everything */
    LT_AP_TO_GUARD, /* at the next capture: arm first, then scan once */
} lt_ap_decision;

/* 1 when scanning the whole mapping costs less than one first-write fault:
 * whenever anything is written, scan wins, so the memory is never tracked. */
int lt_autopilot_always_scan(const lt_ap_cal *cal, size_t mapped_pages);

/* After a capture of a memory in `mode` (LT_GUARD served by `backend`, or
 * LT_SCAN) that found `dirty_pages` written (guard) or changed (scan) and
 * took `capture_ns`: updates the history and decides. */
lt_ap_decision lt_autopilot_decide(lt_ap_state *s, const lt_ap_cal *cal, lt_mode mode, int backend,
                                   size_t mapped_pages, size_t dirty_pages, uint64_t capture_ns);

/* Bulk: a memory in scan whose diffs find nearly every byte changed (two
 * captures in a row >= 85% of the window) is written whole without a diff
 * (bulk), like `copy`: the diff would read the reference and the memory to
 * find what the packets carry anyway. Every BULK_PERIOD-th capture of a
 * bulk memory diffs (PROBE): below 85% changed it leaves bulk. The reference
 * is left behind by the other captures, like copy keeps none, and brought up
 * to date by the one before each probe (REFRESH). */
#define LT_AP_BULK_PERIOD 16u
typedef enum lt_bulk_step {
    LT_BULK_COPY = 0, /* write the window whole from the memory */
    LT_BULK_REFRESH,  /* write it whole through the reference (the probe diffs against it) */
    LT_BULK_PROBE,    /* diff against the reference, then lt_autopilot_bulk_vote */
} lt_bulk_step;

/* What a capture of a bulk memory does. */
lt_bulk_step lt_autopilot_bulk_step(lt_ap_state *s);

/* Short-lived bulk memories (heirs.c): a freed memory that was in bulk and
 * lived at most LT_AP_SHORT_LIFE captures hands `copy` to the next memory
 * like it, which then keeps no reference and diffs nothing at map (a
 * video decoder's frames: written whole, submitted once, freed). Such a
 * memory that lives past LT_AP_COPY_LIFE captures goes to scan in bulk,
 * its reference filled by that capture's copy. */
#define LT_AP_SHORT_LIFE 2u
#define LT_AP_COPY_LIFE 4u

/* After a diffing capture of a scanned memory that changed `changed` of
 * `mapped` bytes: enters or leaves bulk. Returns 1 while in bulk. */
int lt_autopilot_bulk_vote(lt_ap_state *s, size_t mapped, size_t changed);

/* Calibration (calibrate.c): measures this machine once (a few ms), for the
 * tracking backend the layer is configured with (`backend`: mt_track_backend;
 * uffd counts only where it is allowed and available). Thread-safe. */
const lt_ap_cal *lt_autopilot_calibration(int backend);

#endif
