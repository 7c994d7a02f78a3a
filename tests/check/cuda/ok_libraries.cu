// Correct program (must report nothing): code nobody here wrote — Thrust and
// CUB kernels (radix sort, reductions, scans, transforms; templates, warp
// and block collectives, read-only loads) — and a CUDA graph captured from a
// stream and launched several times (kernels, copies and a memset run
// without one launch call each). Every result is verified on the host.
#include <cub/cub.cuh>
#include <thrust/device_vector.h>
#include <thrust/functional.h>
#include <thrust/host_vector.h>
#include <thrust/reduce.h>
#include <thrust/scan.h>
#include <thrust/sequence.h>
#include <thrust/sort.h>
#include <thrust/transform.h>
#include <algorithm>
#include <vector>
#include "planted.h"

struct square {
    __host__ __device__ long long operator()(int x) const { return (long long)x * x; }
};

__global__ void scale(float *v, int n, float a)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) v[i] *= a;
}

int main()
{
    // 1. Thrust: sort, reduce, scan, transform on a million keys
    const int n = 1 << 20;
    thrust::host_vector<int> h(n);
    for (int i = 0; i < n; i++) h[i] = (int)((i * 2654435761u) % 1000003u);
    thrust::device_vector<int> d = h;
    thrust::sort(d.begin(), d.end());
    std::vector<int> ref(h.begin(), h.end());
    std::sort(ref.begin(), ref.end());
    thrust::host_vector<int> sorted = d;
    for (int i = 0; i < n; i += 997)
        if (sorted[i] != ref[i]) { printf("ok_libraries: thrust::sort [%d]\n", i); return 1; }
    long long sum = thrust::reduce(d.begin(), d.end(), 0LL, thrust::plus<long long>());
    long long want = 0;
    for (int v : ref) want += v;
    if (sum != want) { printf("ok_libraries: thrust::reduce %lld/%lld\n", sum, want); return 1; }
    thrust::device_vector<long long> sq(n);
    thrust::transform(d.begin(), d.end(), sq.begin(), square());
    thrust::inclusive_scan(sq.begin(), sq.end(), sq.begin());
    long long last = sq[n - 1], wsq = 0;
    for (int v : ref) wsq += (long long)v * v;
    if (last != wsq) { printf("ok_libraries: transform+scan %lld/%lld\n", last, wsq); return 1; }

    // 2. CUB: radix sort pairs and a device reduction, with their temporary storage
    const int m = 100000;
    std::vector<unsigned> keys(m), vals(m);
    for (int i = 0; i < m; i++) keys[i] = (i * 40503u) ^ 0x5bd1e995u, vals[i] = i;
    unsigned *dk, *dv, *dk2, *dv2; int *dmax, hmax;
    CK(cudaMalloc(&dk, m * 4)); CK(cudaMalloc(&dv, m * 4)); CK(cudaMalloc(&dk2, m * 4)); CK(cudaMalloc(&dv2, m * 4));
    CK(cudaMalloc(&dmax, sizeof(int)));
    CK(cudaMemcpy(dk, keys.data(), m * 4, cudaMemcpyHostToDevice));
    CK(cudaMemcpy(dv, vals.data(), m * 4, cudaMemcpyHostToDevice));
    void *tmp = nullptr; size_t tmpn = 0;
    CK(cub::DeviceRadixSort::SortPairs(tmp, tmpn, dk, dk2, dv, dv2, m));
    CK(cudaMalloc(&tmp, tmpn));
    CK(cub::DeviceRadixSort::SortPairs(tmp, tmpn, dk, dk2, dv, dv2, m));
    CK(cudaFree(tmp));
    tmp = nullptr; tmpn = 0;
    CK(cub::DeviceReduce::Max(tmp, tmpn, (const int *)dv, dmax, m));
    CK(cudaMalloc(&tmp, tmpn));
    CK(cub::DeviceReduce::Max(tmp, tmpn, (const int *)dv, dmax, m));
    CK(cudaMemcpy(&hmax, dmax, sizeof hmax, cudaMemcpyDeviceToHost));
    std::vector<unsigned> k2(m), v2(m);
    CK(cudaMemcpy(k2.data(), dk2, m * 4, cudaMemcpyDeviceToHost));
    CK(cudaMemcpy(v2.data(), dv2, m * 4, cudaMemcpyDeviceToHost));
    for (int i = 1; i < m; i++)
        if (k2[i - 1] > k2[i] || keys[v2[i]] != k2[i]) { printf("ok_libraries: cub sort [%d]\n", i); return 1; }
    if (hmax != m - 1) { printf("ok_libraries: cub max %d\n", hmax); return 1; }

    // 3. a graph captured from a stream, launched three times
    cudaStream_t s;
    CK(cudaStreamCreate(&s));
    const int g = 4096;
    float *hv, *back, *gv; // pinned: a captured copy needs page-locked host memory
    CK(cudaMallocHost(&hv, g * sizeof(float)));
    CK(cudaMallocHost(&back, g * sizeof(float)));
    for (int i = 0; i < g; i++) hv[i] = 1.0f;
    CK(cudaMalloc(&gv, g * sizeof(float)));
    cudaGraph_t graph; cudaGraphExec_t exec;
    CK(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
    CK(cudaMemsetAsync(gv, 0, g * sizeof(float), s));
    CK(cudaMemcpyAsync(gv, hv, g * sizeof(float), cudaMemcpyHostToDevice, s));
    scale<<<g / 256, 256, 0, s>>>(gv, g, 2.0f);
    scale<<<g / 256, 256, 0, s>>>(gv, g, 3.0f);
    CK(cudaMemcpyAsync(back, gv, g * sizeof(float), cudaMemcpyDeviceToHost, s));
    CK(cudaStreamEndCapture(s, &graph));
    CK(cudaGraphInstantiate(&exec, graph, 0));
    for (int r = 0; r < 3; r++) {
        std::fill(back, back + g, 0.0f);
        CK(cudaGraphLaunch(exec, s));
        CK(cudaStreamSynchronize(s));
        for (int i = 0; i < g; i++)
            if (back[i] != 6.0f) { printf("ok_libraries: graph run %d [%d] = %g\n", r, i, back[i]); return 1; }
    }
    CK(cudaGraphExecDestroy(exec)); CK(cudaGraphDestroy(graph)); CK(cudaStreamDestroy(s));
    CK(cudaFreeHost(hv)); CK(cudaFreeHost(back));
    CK(cudaFree(gv)); CK(cudaFree(tmp)); CK(cudaFree(dk)); CK(cudaFree(dv)); CK(cudaFree(dk2)); CK(cudaFree(dv2));
    CK(cudaFree(dmax));
    printf("ok_libraries: results correct\n");
    return planted_finish("ok_libraries");
}
