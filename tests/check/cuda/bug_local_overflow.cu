// Planted bug: a thread's local array is written far past its end through a
// generic pointer (the callee cannot know the pointer is local), beyond the
// top of the thread's local-memory window.
#include "planted.h"
__device__ __noinline__ void put(int *a, int i, int v) { a[i] = v; }
__global__ void local_overflow(int idx, int *out)
{
    int a[32];
    for (int j = 0; j < 32; j++)
        put(a, j, j);
    put(a, idx, 7);
    out[threadIdx.x] = a[threadIdx.x & 31];
}
int main()
{
    int *out;
    CK(cudaMalloc(&out, 1024)); CK(cudaMemset(out, 0, 1024));
    local_overflow<<<1, 32>>>(1 << 20, out);
    return planted_finish("local_overflow");
}
