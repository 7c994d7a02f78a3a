/* Upload probes: timestamps of a tracked upload's steps (the planner's
 * chunks, its pieces, their submits and completions), for finding where an
 * upload's time goes on a GPU machine. Built only with -DMT_COH_PROBES=ON
 * (then COH_PROBE records; otherwise it is nothing). A run with
 * MT_COH_PROBES_OUT=FILE writes the events at exit, each sync's relative
 * to its start; scripts/coh-probes.py summarises them. */
#ifndef MT_COHERENCE_PROBE_H
#define MT_COHERENCE_PROBE_H

#ifdef MT_COH_PROBES
#include <stdatomic.h>
#include <stdint.h>
#include <time.h>

#define COH_PROBE_MAX (1u << 16)

typedef struct coh_probe_ev {
    uint64_t t;
    const char *what; /* a string literal */
    uint64_t a, b;
} coh_probe_ev;

extern coh_probe_ev mti_coh_probe_ev[COH_PROBE_MAX];
extern _Atomic uint32_t mti_coh_probe_n;

/* Any thread; past COH_PROBE_MAX events the rest are dropped. */
static inline void COH_PROBE(const char *what, uint64_t a, uint64_t b)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    uint32_t i = atomic_fetch_add_explicit(&mti_coh_probe_n, 1, memory_order_relaxed);
    if (i < COH_PROBE_MAX)
        mti_coh_probe_ev[i] = (coh_probe_ev){(uint64_t)ts.tv_sec * 1000000000ull +
                                                 (uint64_t)ts.tv_nsec,
                                             what, a, b};
}
#else
#define COH_PROBE(what, a, b) ((void)0)
#endif

#endif
