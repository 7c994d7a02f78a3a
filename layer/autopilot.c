/* `auto`: per memory, guard or scan, whichever the observed write density
 * makes cheaper, with hysteresis so that one odd frame does not flip it.
 *
 * Cost model, calibrated once on this machine (a few milliseconds):
 *   guard: 2 x written pages x (first-write fault of the backend + diff of a page)
 *          + collect + (mapped every cycle: arm + disarm), measured per memory
 *   scan:  mapped pages * diff of a page (measured on the memory once scanned)
 * written pages: the median of the last three captures.
 * A fault costs ~1 us with uffd and 5-20 us with the signal backend, a page
 * diff ~0.3-0.5 us, so guard wins below ~5% dirty pages on the signal
 * backend and below ~40% with uffd. */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "layer.h"

/* Faults in the app's threads cost more than the single-threaded
 * calibration says: several threads faulting at once contend on the mm lock
 * (measured on memtrack-sample, many-small: about 2x). Scan's cost needs no
 * such factor: it is measured on the memory itself. */
#define GUARD_PENALTY 2.0
#define CAL_PAGES 64 /* ~0.5 ms of signal faults: enough for a cost estimate */

static struct {
    pthread_once_t once;
    double page_diff_ns;
    double fault_ns[3]; /* by mt_track_backend */
} g_cal = {PTHREAD_ONCE_INIT, 400.0, {0, 10000.0, 1500.0}};

static double time_faults(mt_track_backend b, unsigned char *buf, size_t ps)
{
    mt_tracker_opts o = {.backend = b};
    mt_tracker *t;
    if (mt_tracker_create(&o, &t) != 0)
        return -1;
    mt_range_id id;
    double ns = -1;
    if (mt_tracker_add(t, buf, CAL_PAGES * ps, NULL, &id) == 0) {
        uint64_t t0 = lt_now_ns();
        for (size_t p = 0; p < CAL_PAGES; p++)
            buf[p * ps] = (unsigned char)p;
        ns = (double)(lt_now_ns() - t0) / CAL_PAGES;
    }
    mt_tracker_destroy(t);
    return ns;
}

static void calibrate(void)
{
    size_t ps = (size_t)sysconf(_SC_PAGESIZE);
    size_t bytes = CAL_PAGES * ps;
    unsigned char *a = mmap(NULL, 2 * bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (a == MAP_FAILED)
        return;
    unsigned char *b = a + bytes;
    memset(a, 1, 2 * bytes);
    mt_diff_job job = {.live = a, .shadow = b, .size = bytes};
    mt_diff_region r[4];
    uint64_t t0 = lt_now_ns();
    mt_diff(&job, NULL, r, 4);
    double per_page = (double)(lt_now_ns() - t0) / CAL_PAGES;
    if (per_page > 0)
        g_cal.page_diff_ns = per_page;
    double f = time_faults(MT_TRACK_SIGNAL, a, ps);
    if (f > 0)
        g_cal.fault_ns[MT_TRACK_SIGNAL] = f;
    if (mt_track_backend_available(MT_TRACK_UFFD) && (f = time_faults(MT_TRACK_UFFD, a, ps)) > 0)
        g_cal.fault_ns[MT_TRACK_UFFD] = f;
    munmap(a, 2 * bytes);
    if (getenv("MEMTRACK_DEBUG_CAL"))
        fprintf(stderr, "cal: page %.0f ns, signal %.0f ns, uffd %.0f ns\n", g_cal.page_diff_ns,
                g_cal.fault_ns[MT_TRACK_SIGNAL], g_cal.fault_ns[MT_TRACK_UFFD]);
}

static mt_track_backend likely_backend(void)
{
    return mt_track_backend_available(MT_TRACK_UFFD) ? MT_TRACK_UFFD : MT_TRACK_SIGNAL;
}

int lt_autopilot_always_scan(const lt_memory *m)
{
    pthread_once(&g_cal.once, calibrate);
    size_t ps = (size_t)sysconf(_SC_PAGESIZE);
    double mapped_pages = (double)((m->map_size + ps - 1) / ps);
    /* Scanning all of it costs less than one first-write fault: whenever
     * anything at all is written, scan wins, so never track it. */
    return mapped_pages * g_cal.page_diff_ns < g_cal.fault_ns[likely_backend()];
}

static size_t median3(const lt_memory *m)
{
    size_t a = m->nhist > 0 ? m->hist[0] : 0, b = m->nhist > 1 ? m->hist[1] : 0,
           c = m->nhist > 2 ? m->hist[2] : 0;
    if (a > b) { size_t t = a; a = b; b = t; }
    if (b > c) { size_t t = b; b = c; c = t; }
    return a > b ? a : b;
}

void lt_autopilot_observe(lt_memory *m, size_t dirty_pages, uint64_t capture_ns)
{
    if (m->mode == LT_SCAN && lt_autopilot_always_scan(m))
        return; /* nothing to decide: see lt_autopilot_always_scan */
    size_t ps = (size_t)sysconf(_SC_PAGESIZE);
    double mapped_pages = (double)((m->map_size + ps - 1) / ps);
    /* The density is the median of the last three captures: one burst (an
     * app clearing a memory once at start-up) cannot flip a memory that is
     * otherwise sparse, while a memory written every other frame still
     * counts as written. Missing history counts as clean. */
    m->hist[m->nhist++ % 3] = dirty_pages;
    double density = (double)median3(m);
    /* A scan of this very memory tells what scanning it costs (device
     * memory can be slower to read than the anonymous memory calibrated). */
    if (m->mode == LT_SCAN && capture_ns > 0) {
        double per_page = (double)capture_ns / mapped_pages;
        m->scan_page_ns = m->scan_page_ns > 0 ? 0.7 * m->scan_page_ns + 0.3 * per_page : per_page;
    }
    double page_ns = m->scan_page_ns > 0 ? m->scan_page_ns : g_cal.page_diff_ns;
    mt_track_backend be = m->mode == LT_GUARD ? m->backend : likely_backend();
    if (be != MT_TRACK_SIGNAL && be != MT_TRACK_UFFD)
        be = MT_TRACK_SIGNAL;
    /* Guard's fixed costs, measured on this memory: the collect itself, and
     * arming plus disarming when it is mapped and unmapped every cycle. */
    double guard = GUARD_PENALTY * density * (g_cal.fault_ns[be] + page_ns) + m->collect_ns +
                   (m->remapped ? m->guard_setup_ns : 0);
    double scan = mapped_pages * page_ns;
    if (m->mode == LT_GUARD) {
        m->streak = guard > 1.25 * scan ? m->streak + 1 : 0;
        if (m->streak >= 2) {
            /* Safe right after a capture: the next capture scans everything,
             * so writes between this one and the untracking are not lost. */
            lt_guard_stop(m);
            m->mode = LT_SCAN;
            m->streak = 0;
            lt_ctx.st.mode_switches++;
            if (lt_tracing())
                lt_trace_check(mt_trace_write_mode(lt_ctx.trace, m->id, "scan (auto): density rose"));
        }
    } else if (m->mode == LT_SCAN) {
        if (guard < 0.8 * scan)
            m->streak = m->streak > 0 ? m->streak + 1 : 1;
        else
            m->streak = 0;
        /* The switch itself happens at the start of the next capture (arm
         * first, then scan once): a negative streak asks for it. Going back
         * to guard needs more evidence than leaving it: a wrong guard costs
         * faults in the app's threads, a wrong scan only our time. */
        if (m->streak >= 4)
            m->streak = -1;
    }
}
