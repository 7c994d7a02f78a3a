/* `auto`'s policy: see autopilot.h for the cost model. Leaving guard needs
 * two captures above 1.25x the scan cost; going back needs four below 0.8x,
 * because a wrong guard costs faults in the application's threads and a
 * wrong scan only the layer's time. */
#include "autopilot.h"
#include "memtrack/track.h"

/* Faults in the app's threads cost more than the single-threaded
 * calibration says (several threads faulting at once contend on the mm
 * lock; measured on memtrack-sample, many-small: about 2x). Scan's cost
 * needs no such factor: it is measured on the memory itself. */
#define GUARD_PENALTY 2.0

static int likely_backend(const lt_ap_cal *cal)
{
    return cal->uffd_available ? MT_TRACK_UFFD : MT_TRACK_SIGNAL;
}

int lt_autopilot_always_scan(const lt_ap_cal *cal, size_t mapped_pages)
{
    return (double)mapped_pages * cal->page_diff_ns < cal->fault_ns[likely_backend(cal)];
}

static size_t median3(const lt_ap_state *s)
{
    size_t a = s->nhist > 0 ? s->hist[0] : 0, b = s->nhist > 1 ? s->hist[1] : 0,
           c = s->nhist > 2 ? s->hist[2] : 0;
    if (a > b) { size_t t = a; a = b; b = t; }
    if (b > c) { size_t t = b; b = c; c = t; }
    return a > b ? a : b;
}

lt_ap_decision lt_autopilot_decide(lt_ap_state *s, const lt_ap_cal *cal, lt_mode mode, int backend,
                                   size_t mapped_pages, size_t dirty_pages, uint64_t capture_ns)
{
    if (mapped_pages == 0 || (mode != LT_GUARD && mode != LT_SCAN))
        return LT_AP_KEEP;
    if (mode == LT_SCAN && lt_autopilot_always_scan(cal, mapped_pages))
        return LT_AP_KEEP; /* nothing to decide: see lt_autopilot_always_scan */
    /* The density is the median of the last three captures: one burst (an
     * app clearing a memory once at start-up) cannot flip a memory that is
     * otherwise sparse, while a memory written every other frame still
     * counts as written. Missing history counts as clean. */
    s->hist[s->nhist++ % 3] = dirty_pages;
    double density = (double)median3(s);
    /* A scan of this very memory tells what scanning it costs (device
     * memory can be slower to read than the anonymous memory calibrated). */
    if (mode == LT_SCAN && capture_ns > 0) {
        double per_page = (double)capture_ns / (double)mapped_pages;
        s->scan_page_ns = s->scan_page_ns > 0 ? 0.7 * s->scan_page_ns + 0.3 * per_page : per_page;
    }
    double page_ns = s->scan_page_ns > 0 ? s->scan_page_ns : cal->page_diff_ns;
    int be = mode == LT_GUARD ? backend : likely_backend(cal);
    if (be != MT_TRACK_SIGNAL && be != MT_TRACK_UFFD)
        be = MT_TRACK_SIGNAL;
    double guard = GUARD_PENALTY * density * (cal->fault_ns[be] + page_ns) + s->collect_ns +
                   (s->remapped ? s->guard_setup_ns : 0);
    double scan = (double)mapped_pages * page_ns;
    if (mode == LT_GUARD) {
        s->streak = guard > 1.25 * scan ? s->streak + 1 : 0;
        if (s->streak >= 2) {
            s->streak = 0;
            return LT_AP_TO_SCAN;
        }
        return LT_AP_KEEP;
    }
    s->streak = guard < 0.8 * scan ? s->streak + 1 : 0;
    if (s->streak >= 4) {
        s->streak = 0;
        return LT_AP_TO_GUARD;
    }
    return LT_AP_KEEP;
}

lt_bulk_step lt_autopilot_bulk_step(lt_ap_state *s)
{
    unsigned k = ++s->bulk_n % LT_AP_BULK_PERIOD;
    return k == 0 ? LT_BULK_PROBE : k == LT_AP_BULK_PERIOD - 1 ? LT_BULK_REFRESH : LT_BULK_COPY;
}

int lt_autopilot_bulk_vote(lt_ap_state *s, size_t mapped, size_t changed)
{
    int dense = mapped > 0 && (double)changed >= 0.85 * (double)mapped;
    s->bulk_votes = dense ? s->bulk_votes + 1 : 0;
    if (s->bulk) {
        s->bulk = dense; /* the probe decides: one sparse diff leaves */
    } else if (s->bulk_votes >= 2) {
        s->bulk = 1;
        s->bulk_n = 0;
    }
    return s->bulk;
}
