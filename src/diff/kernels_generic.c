/* Kernels on CPUs without an x86 vector unit: the portable one only. */
#include "kernel.h"

static const mt_diff_kernel k_scalar = {"scalar", mti_diff_scan_scalar};

size_t mti_diff_kernels_available(const mt_diff_kernel **out, size_t max)
{
    if (max == 0)
        return 0;
    out[0] = &k_scalar;
    return 1;
}
