/* libmemtrack_check.so: shared state of the interposer.
 *
 * One lock serialises everything that touches the state below; the driver's
 * long calls (synchronisation, the application's copies and launches) run
 * outside it. The device resources live in the context that was current when
 * the first call needed them (the primary context for CUDA-runtime programs):
 * one context is checked. */
#ifndef MT_CHECK_RT_H
#define MT_CHECK_RT_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>

#include "memtrack/check.h"
#include "devcheck.h"

enum rt_api { API_MEMALLOC = 1, API_ASYNC, API_PITCH, API_MANAGED, API_HOST, API_HOSTREG, API_GLOBAL };

typedef struct rt_alloc {
    uint64_t user, size;   /* what the application sees */
    uint64_t raw, total;   /* what the driver allocated (red zones included) */
    uint64_t serial;
    int api;               /* enum rt_api; 0: empty slot */
} rt_alloc;

typedef struct rt_site_state {
    const mt_check_site *site;
    uint64_t hits[5];      /* per kind */
} rt_site_state;

typedef struct rt {
    pthread_mutex_t lock;
    /* 0 not yet, 1 checking, -1 off for good. Written under the lock once
     * set-up is done (release); read without it by every hook (acquire):
     * whoever sees 1 also sees the options and the device resources. */
    _Atomic int state;
    mt_devcheck dc;
    /* options (environment, read once) */
    uint64_t redzone;      /* bytes on each side of an allocation */
    int init_check, verbose, sync_launch;
    FILE *log;
    const char *result_path;
    /* allocations: open addressing on `user` */
    rt_alloc *tab;
    size_t tab_cap, tab_n;
    rt_alloc freed[1024];  /* recent frees, for use-after-free reports */
    size_t freed_next;
    uint64_t serial;
    /* instrumented modules and their sites */
    mt_ptx_result **mods;
    size_t nmods, capmods;
    rt_site_state *sites;  /* by id; .site NULL until its module loaded */
    uint32_t nsites, capsites; /* ids handed out (reserved at instrumentation) */
    /* figures for the summary */
    uint64_t errors, lost, reports, launches, mod_checked, mod_passed, accesses, not_checked;
} rt;

extern rt _mt_rt;

/* Creates the device resources on first use. Returns 1 when checking is on,
 * 0 when not (yet). Takes and releases the lock. */
int _mt_rt_ready(void);

/* Is checking on (set-up done and not given up)? Any thread, no lock. */
static inline int _mt_rt_on(void)
{
    return atomic_load_explicit(&_mt_rt.state, memory_order_acquire) > 0;
}

/* The stream a hook's own work goes to: the per-thread default stream for
 * the _ptds/_ptsz entry points called with stream 0. */
CUstream _mt_rt_stream(int slot, CUstream s);

/* Allocation table (lock held). */
rt_alloc *_mt_rt_alloc_find(uint64_t user);
int _mt_rt_alloc_add(const rt_alloc *a);
void _mt_rt_alloc_remove(rt_alloc *a);
/* Describes addr relative to the allocations (lock held). */
void _mt_rt_where(uint64_t addr, mt_check_where *w);

/* Reads the error buffer after a synchronisation that returned `r`, reports,
 * and returns what the synchronisation should return: r, or a fault code
 * when an access failed. `partial`: only some work is known complete (a
 * stream or an event), so completes the rest before reading. */
CUresult _mt_rt_after_sync(CUresult r, int partial);

/* Module loading with instrumentation (modules.c). */
typedef CUresult (*rt_load_fn)(void *ctx, const void *image, int with_log, char *log, size_t logsz);
typedef CUresult (*rt_global_fn)(void *ctx, CUdeviceptr *p, size_t *n, const char *name);
CUresult _mt_rt_load(const void *image, size_t size, rt_load_fn load, rt_global_fn global, void *ctx);

void _mt_rt_logf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

#endif
