// Planted bug: writes 1 MiB past the end of a 4096-byte allocation.
#include "planted.h"
__global__ void write_far(char *p, long off) { p[off] = 7; }
int main()
{
    char *p;
    CK(cudaMalloc(&p, 4096)); CK(cudaMemset(p, 1, 4096));
    write_far<<<1, 1>>>(p, 4096L + (1L << 20));
    return planted_finish("write_after_1m");
}
