/* Private interface between the diff driver (diff.c) and its compare kernels.
 *
 * A kernel scans bytes [pos, end) of live and shadow, appends the changed
 * runs to runs[n, max) (merging runs separated by fewer than `gap` equal
 * bytes, gap >= 1) and brings the shadow (and the write-back target, if any)
 * up to date for exactly what it reported. runs[n - 1], when n > 0, is still
 * open: a change less than `gap` bytes after its end extends it (the driver
 * copies the bytes between its old end and `pos`, which this call did not
 * examine). The kernel returns where the caller must resume: `end` when the
 * range is done, else the first byte of the first run it had no room for
 * (never inside a run, and nothing at or after it has been copied). Kernels
 * keep no state between calls. */
#ifndef MT_DIFF_KERNEL_H
#define MT_DIFF_KERNEL_H

#include <stddef.h>
#include <stdint.h>

#include "memtrack/diff.h"

typedef struct mt_diff_scan {
    const uint8_t *live;
    uint8_t *shadow;
    uint8_t *wb;          /* NULL: no write-back */
    size_t gap;           /* >= 1; 1 = exact runs */
    mt_diff_region *runs; /* runs[0, n) reported so far; up to max */
    size_t n, max;
} mt_diff_scan;

typedef size_t (*mt_diff_scan_fn)(mt_diff_scan *sc, size_t pos, size_t end);

typedef struct mt_diff_kernel {
    const char *name;
    mt_diff_scan_fn scan;
} mt_diff_kernel;

size_t mti_diff_scan_scalar(mt_diff_scan *sc, size_t pos, size_t end);
size_t mti_diff_scan_sse2(mt_diff_scan *sc, size_t pos, size_t end);
size_t mti_diff_scan_avx2(mt_diff_scan *sc, size_t pos, size_t end);
size_t mti_diff_scan_avx512(mt_diff_scan *sc, size_t pos, size_t end);

/* The kernel mt_diff() uses: chosen once from the CPU (or $MT_DIFF_ISA). */
const mt_diff_kernel *mti_diff_kernel_get(void);

/* Kernels this CPU can run, best last; fills up to max, returns the count.
 * Tests run every one of them against the reference. */
size_t mti_diff_kernels_available(const mt_diff_kernel **out, size_t max);

/* Makes mt_diff() use the named kernel ("scalar", "sse2", "avx2", "avx512"). Returns 0,
 * or -ENOTSUP when this CPU or build lacks it. For tests and benchmarks. */
int mti_diff_kernel_force(const char *name);

#endif
