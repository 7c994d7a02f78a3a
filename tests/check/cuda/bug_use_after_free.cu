// Planted bug: a kernel reads an allocation after cudaFree released it.
#include "planted.h"
__global__ void use_after_free(const int *p, int *out) { out[threadIdx.x] = p[threadIdx.x]; }
int main()
{
    int *p, *out;
    CK(cudaMalloc(&p, 1 << 16)); CK(cudaMalloc(&out, 1024));
    CK(cudaMemset(p, 1, 1 << 16)); CK(cudaMemset(out, 0, 1024));
    CK(cudaFree(p));
    use_after_free<<<1, 32>>>(p, out);
    return planted_finish("use_after_free");
}
