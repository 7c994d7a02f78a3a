/* The kernels an x86-64 CPU can run: scalar and SSE2 always, AVX2 when the
 * CPU (and OS, which __builtin_cpu_supports checks via XGETBV) supports it. */
#include "kernel.h"

static const mt_diff_kernel k_scalar = {"scalar", mt_diff_scan_scalar};
static const mt_diff_kernel k_sse2 = {"sse2", mt_diff_scan_sse2};
static const mt_diff_kernel k_avx2 = {"avx2", mt_diff_scan_avx2};

size_t mt_diff_kernels_available(const mt_diff_kernel **out, size_t max)
{
    const mt_diff_kernel *all[3];
    size_t n = 0;
    all[n++] = &k_scalar;
    all[n++] = &k_sse2;
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx2"))
        all[n++] = &k_avx2;
    size_t i = 0;
    for (; i < n && i < max; i++)
        out[i] = all[i];
    return i;
}
