/* The kernels an x86-64 CPU can run: scalar and SSE2 always, AVX2 and
 * AVX-512 (BW, with BMI and LZCNT) when the CPU and OS support them
 * (__builtin_cpu_supports checks the OS's XGETBV state too). */
#include <cpuid.h>

#include "kernel.h"

static const mt_diff_kernel k_scalar = {"scalar", mti_diff_scan_scalar};
static const mt_diff_kernel k_sse2 = {"sse2", mti_diff_scan_sse2};
static const mt_diff_kernel k_avx2 = {"avx2", mti_diff_scan_avx2};
static const mt_diff_kernel k_avx512 = {"avx512", mti_diff_scan_avx512};

/* LZCNT (CPUID 0x80000001 ECX bit 5): not every compiler's
 * __builtin_cpu_supports knows the name. */
static int has_lzcnt(void)
{
    unsigned a, b, c, d;
    return __get_cpuid(0x80000001u, &a, &b, &c, &d) && (c & (1u << 5));
}

size_t mti_diff_kernels_available(const mt_diff_kernel **out, size_t max)
{
    const mt_diff_kernel *all[4];
    size_t n = 0;
    all[n++] = &k_scalar;
    all[n++] = &k_sse2;
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx2"))
        all[n++] = &k_avx2;
    if (__builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("bmi") &&
        __builtin_cpu_supports("bmi2") && has_lzcnt())
        all[n++] = &k_avx512;
    size_t i = 0;
    for (; i < n && i < max; i++)
        out[i] = all[i];
    return i;
}
