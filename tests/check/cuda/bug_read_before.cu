// Planted bug: reads the byte just before the start of an allocation.
#include "planted.h"
__global__ void read_before(const char *p, int *out) { out[0] = p[-1]; }
int main()
{
    char *p; int *out;
    CK(cudaMalloc(&p, 4096)); CK(cudaMalloc(&out, 4));
    CK(cudaMemset(p, 1, 4096)); CK(cudaMemset(out, 0, 4));
    read_before<<<1, 1>>>(p, out);
    return planted_finish("read_before");
}
