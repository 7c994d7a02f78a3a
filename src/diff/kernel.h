/* Private interface between the diff driver (diff.c) and its compare kernels.
 *
 * A kernel scans bytes [pos, end) of two buffers and appends the runs of
 * differing bytes to runs[] (at most `max`), merging runs separated by fewer
 * than `gap` equal bytes (gap 1: exact runs). It returns the number of runs
 * and sets *stop to where the caller must resume: `end` when the range is
 * done, else the first byte of the first run it had no room for (never inside
 * a run, so resuming there starts that run afresh). Kernels keep no state. */
#ifndef MT_DIFF_KERNEL_H
#define MT_DIFF_KERNEL_H

#include <stddef.h>
#include <stdint.h>

#include "memtrack/diff.h"

typedef size_t (*mt_diff_scan_fn)(const uint8_t *a, const uint8_t *b, size_t pos, size_t end,
                                  size_t gap, mt_diff_region *runs, size_t max, size_t *stop);

typedef struct mt_diff_kernel {
    const char *name;
    mt_diff_scan_fn scan;
} mt_diff_kernel;

size_t mt_diff_scan_scalar(const uint8_t *a, const uint8_t *b, size_t pos, size_t end, size_t gap,
                           mt_diff_region *runs, size_t max, size_t *stop);
size_t mt_diff_scan_sse2(const uint8_t *a, const uint8_t *b, size_t pos, size_t end, size_t gap,
                         mt_diff_region *runs, size_t max, size_t *stop);
size_t mt_diff_scan_avx2(const uint8_t *a, const uint8_t *b, size_t pos, size_t end, size_t gap,
                         mt_diff_region *runs, size_t max, size_t *stop);

/* The kernel mt_diff() uses: chosen once from the CPU (or $MT_DIFF_ISA). */
const mt_diff_kernel *mt_diff_kernel_get(void);

/* Kernels this CPU can run, best last; fills up to max, returns the count.
 * Tests run every one of them against the reference. */
size_t mt_diff_kernels_available(const mt_diff_kernel **out, size_t max);

/* Makes mt_diff() use the named kernel ("scalar", "sse2", "avx2"). Returns 0,
 * or -ENOTSUP when this CPU or build lacks it. For tests and benchmarks. */
int mt_diff_kernel_force(const char *name);

#endif
