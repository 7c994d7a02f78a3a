// Planted bug: a generic-space prefetch 4 KiB past the end of an allocation,
// beyond the 1 KiB slack.
#include "planted.h"
__global__ void prefetch_far(const char *p, long off)
{
    asm volatile("prefetch.L2 [%0];" ::"l"(p + off));
}
int main()
{
    char *p;
    const long n = 4096 + 1000;
    CK(cudaMalloc(&p, n)); CK(cudaMemset(p, 1, n));
    prefetch_far<<<1, 1>>>(p, n + 4096);
    return planted_finish("prefetch_beyond");
}
