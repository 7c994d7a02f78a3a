// Not a bug (must not be reported): a generic-space prefetch 16 bytes past the
// end of an allocation whose size is not a multiple of 1 KiB. Rounded down to
// 1 KiB it falls inside the allocation: the slack Panoptes measured, where the
// hardware never faults.
#include "planted.h"
__global__ void prefetch_near(const char *p, long off)
{
    asm volatile("prefetch.L2 [%0];" ::"l"(p + off));
}
int main()
{
    char *p;
    const long n = 4096 + 1000;
    CK(cudaMalloc(&p, n)); CK(cudaMemset(p, 1, n));
    prefetch_near<<<1, 1>>>(p, n + 16);
    return planted_finish("prefetch_slack");
}
