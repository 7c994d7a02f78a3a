// Planted bug: a kernel reads device memory nothing ever wrote.
#include "planted.h"
__global__ void uninit_read(const int *p, int *out) { out[threadIdx.x] = p[threadIdx.x] + 1; }
int main()
{
    int *p, *out;
    CK(cudaMalloc(&p, 4096)); CK(cudaMalloc(&out, 4096));
    CK(cudaMemset(out, 0, 4096));
    uninit_read<<<1, 256>>>(p, out);
    return planted_finish("uninit_read");
}
