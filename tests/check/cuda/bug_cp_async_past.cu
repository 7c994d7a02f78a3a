// Planted bug: an asynchronous copy into shared memory (cp.async, sm_80+)
// whose last 16-byte source lies just past the end of a 4 KiB allocation
// (one element too many: the tile loop's bound is off by one).
#include "planted.h"
__global__ void tile_sum(const int4 *src, int n, int *out)
{
    __shared__ __align__(16) int4 tile[257];
    int t = threadIdx.x;
    for (int i = t; i <= n; i += blockDim.x) { // <= : one past the end
        unsigned dst = (unsigned)__cvta_generic_to_shared(&tile[i]);
        asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" ::"r"(dst), "l"(src + i));
    }
    asm volatile("cp.async.commit_group;");
    asm volatile("cp.async.wait_group 0;" ::: "memory");
    __syncthreads();
    if (t == 0) {
        int s = 0;
        for (int i = 0; i < n; i++) s += tile[i].x;
        *out = s;
    }
}
int main()
{
    const int n = 256; // 256 x 16 bytes = 4 KiB
    int4 *src; int *out;
    CK(cudaMalloc(&src, n * sizeof(int4)));
    CK(cudaMemset(src, 0, n * sizeof(int4)));
    CK(cudaMalloc(&out, sizeof(int)));
    tile_sum<<<1, 64>>>(src, n, out);
    return planted_finish("cp_async_past");
}
