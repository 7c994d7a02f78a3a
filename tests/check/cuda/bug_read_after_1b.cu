// Planted bug: reads the byte just past the end of a 4096-byte allocation.
#include "planted.h"
__global__ void read_after(const char *p, int n, int *out) { out[0] = p[n]; }
int main()
{
    char *p; int *out;
    CK(cudaMalloc(&p, 4096)); CK(cudaMalloc(&out, 4));
    CK(cudaMemset(p, 1, 4096)); CK(cudaMemset(out, 0, 4));
    read_after<<<1, 1>>>(p, 4096, out);
    return planted_finish("read_after_1b");
}
