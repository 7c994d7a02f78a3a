// Planted bug: a 4-byte load from an address that is 2 modulo 4.
#include "planted.h"
__global__ void misaligned(const char *p, int off, int *out) { out[0] = *(const int *)(p + off); }
int main()
{
    char *p; int *out;
    CK(cudaMalloc(&p, 4096)); CK(cudaMalloc(&out, 4));
    CK(cudaMemset(p, 1, 4096)); CK(cudaMemset(out, 0, 4));
    misaligned<<<1, 1>>>(p, 2, out);
    return planted_finish("misaligned");
}
