/* Upload probes (probe.h): the event buffer and its dump at exit. */
#include "probe.h"

#ifdef MT_COH_PROBES
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

coh_probe_ev mti_coh_probe_ev[COH_PROBE_MAX];
_Atomic uint32_t mti_coh_probe_n;

/* One line per event: microseconds since the sync it belongs to (the last
 * "sync" before it), name, two values. At exit: the threads that record
 * are done or no longer matter. */
__attribute__((destructor)) static void probe_dump(void)
{
    const char *path = getenv("MT_COH_PROBES_OUT");
    if (!path || !*path)
        return;
    FILE *f = fopen(path, "w");
    if (!f)
        return;
    uint32_t n = atomic_load(&mti_coh_probe_n);
    if (n > COH_PROBE_MAX)
        n = COH_PROBE_MAX;
    uint64_t t0 = n ? mti_coh_probe_ev[0].t : 0;
    for (uint32_t i = 0; i < n; i++) {
        const coh_probe_ev *e = &mti_coh_probe_ev[i];
        if (strcmp(e->what, "sync") == 0)
            t0 = e->t;
        fprintf(f, "%10.1f %-8s %llu %llu\n", (double)(int64_t)(e->t - t0) / 1e3, e->what,
                (unsigned long long)e->a, (unsigned long long)e->b);
    }
    fclose(f);
}
#else
/* ISO C wants a translation unit to declare something. */
typedef int mti_coh_probe_unused;
#endif
