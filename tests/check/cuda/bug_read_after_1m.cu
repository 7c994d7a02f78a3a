// Planted bug: reads 1 MiB past the end of a 4096-byte allocation.
#include "planted.h"
__global__ void read_far(const char *p, long off, int *out) { out[0] = p[off]; }
int main()
{
    char *p; int *out;
    CK(cudaMalloc(&p, 4096)); CK(cudaMalloc(&out, 4));
    CK(cudaMemset(p, 1, 4096)); CK(cudaMemset(out, 0, 4));
    read_far<<<1, 1>>>(p, 4096L + (1L << 20), out);
    return planted_finish("read_after_1m");
}
