/* `auto`'s calibration: what a page diff and a first-write fault cost on this
 * machine, measured once per process (a few milliseconds) on anonymous
 * memory. MEMTRACK_DEBUG_CAL=1 prints the result. */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "autopilot.h"
#include "memtrack/diff.h"
#include "memtrack/track.h"

#define CAL_PAGES 64 /* ~0.5 ms of signal faults: enough for a cost estimate */

static pthread_once_t g_once = PTHREAD_ONCE_INIT;
static int g_backend_plus1; /* the configured backend + 1; 0 until the first call */
/* Defaults for when a measurement fails: the orders of magnitude measured on
 * the development and GPU machines. */
static lt_ap_cal g_cal = {400.0, {0, 10000.0, 1500.0}, 0};

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static double time_faults(mt_track_backend b, unsigned char *buf, size_t ps)
{
    mt_tracker_opts o = {.backend = b};
    mt_tracker *t;
    if (mt_tracker_create(&o, &t) != 0)
        return -1;
    mt_range_id id;
    double ns = -1;
    if (mt_tracker_add(t, buf, CAL_PAGES * ps, NULL, &id) == 0) {
        uint64_t t0 = now_ns();
        for (size_t p = 0; p < CAL_PAGES; p++)
            buf[p * ps] = (unsigned char)p;
        ns = (double)(now_ns() - t0) / CAL_PAGES;
    }
    mt_tracker_destroy(t);
    return ns;
}

static void calibrate(void)
{
    size_t ps = (size_t)sysconf(_SC_PAGESIZE);
    size_t bytes = CAL_PAGES * ps;
    int backend = __atomic_load_n(&g_backend_plus1, __ATOMIC_RELAXED) - 1;
    g_cal.uffd_available = backend != MT_TRACK_SIGNAL && mt_track_backend_available(MT_TRACK_UFFD);
    unsigned char *a = mmap(NULL, 2 * bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (a == MAP_FAILED)
        return;
    unsigned char *b = a + bytes;
    memset(a, 1, 2 * bytes);
    mt_diff_job job = {.live = a, .shadow = b, .size = bytes};
    mt_diff_region r[4];
    uint64_t t0 = now_ns();
    mt_diff(&job, NULL, r, 4);
    double per_page = (double)(now_ns() - t0) / CAL_PAGES;
    if (per_page > 0)
        g_cal.page_diff_ns = per_page;
    double f = time_faults(MT_TRACK_SIGNAL, a, ps);
    if (f > 0)
        g_cal.fault_ns[MT_TRACK_SIGNAL] = f;
    if (g_cal.uffd_available && (f = time_faults(MT_TRACK_UFFD, a, ps)) > 0)
        g_cal.fault_ns[MT_TRACK_UFFD] = f;
    munmap(a, 2 * bytes);
    if (getenv("MEMTRACK_DEBUG_CAL"))
        fprintf(stderr, "memtrack: calibration: page diff %.0f ns, signal fault %.0f ns, uffd fault %.0f ns%s\n",
                g_cal.page_diff_ns, g_cal.fault_ns[MT_TRACK_SIGNAL], g_cal.fault_ns[MT_TRACK_UFFD],
                g_cal.uffd_available ? "" : " (uffd not used)");
}

const lt_ap_cal *lt_autopilot_calibration(int backend)
{
    /* The first caller's backend wins: the layer has one configuration. */
    int unset = 0;
    __atomic_compare_exchange_n(&g_backend_plus1, &unset, backend + 1, 0, __ATOMIC_RELAXED,
                                __ATOMIC_RELAXED);
    pthread_once(&g_once, calibrate);
    return &g_cal;
}
