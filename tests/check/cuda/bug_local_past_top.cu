// Planted bug: a thread's local array written 32 elements past its end: the
// first 16 stay inside the kernel's own frame (not caught: a frame is not
// split into objects), the next 16 land just above the top of the thread's
// stack, still inside the 16 MiB local window. A native run does not fault;
// memtrack check catches them only with the window's real top (measured by
// its probe: 0xFFFDC0 on an H100), not with the window's end (0x1000000) it
// falls back to without one (measured on the H100: 8, 12, 16, 24 elements
// are not caught, 40 and 100 are; at 200 the native run faults).
#include "planted.h"
__device__ __noinline__ void put(int *a, int i, int v) { a[i] = v; }
__global__ void past_top(int n, int *out)
{
    int a[8];
    for (int j = 0; j < n; j++)
        put(a, j, j); // j = 8 .. n-1: past the array, above the stack's top
    out[threadIdx.x] = a[threadIdx.x & 7];
}
int main(int argc, char **argv)
{
    int *out, n = argc > 1 ? atoi(argv[1]) : 40;
    CK(cudaMalloc(&out, 1024)); CK(cudaMemset(out, 0, 1024));
    past_top<<<1, 32>>>(n, out);
    return planted_finish("local_past_top");
}
