// Memory-bound kernels for the memtrack check slowdown figures: copy, saxpy,
// a block reduction and a 5-point stencil, each over 256 MiB arrays.
// Usage: bench_mem [launches]  (default 10). Prints, per kernel, the time of
// `launches` back-to-back launches (CUDA events, after one warm-up launch) and
// a checksum of the results so that runs under different tools can be compared.
#include <cstdlib>
#include <cstring>
#include "planted.h"

__global__ void init(float *p, size_t n, float scale)
{
    size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
    if (i < n) p[i] = scale * (float)(i % 1000);
}
__global__ void copy(const float *__restrict__ src, float *__restrict__ dst, size_t n)
{
    size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
    if (i < n) dst[i] = src[i];
}
__global__ void saxpy(size_t n, float a, const float *__restrict__ x, float *__restrict__ y)
{
    size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
    if (i < n) y[i] = a * x[i] + y[i];
}
__global__ void reduce(const float *__restrict__ in, size_t n, unsigned long long *out)
{
    __shared__ float s[256];
    size_t i = blockIdx.x * (size_t)blockDim.x * 2 + threadIdx.x;
    float v = 0;
    if (i < n) v = in[i];
    if (i + blockDim.x < n) v += in[i + blockDim.x];
    s[threadIdx.x] = v;
    __syncthreads();
    for (unsigned k = blockDim.x / 2; k > 0; k >>= 1) {
        if (threadIdx.x < k) s[threadIdx.x] += s[threadIdx.x + k];
        __syncthreads();
    }
    if (threadIdx.x == 0) atomicAdd(out, (unsigned long long)s[0]); // exact: block sums are integers < 2^24
}
__global__ void stencil(const float *__restrict__ in, float *__restrict__ out, int w, int h)
{
    int x = blockIdx.x * blockDim.x + threadIdx.x, y = blockIdx.y * blockDim.y + threadIdx.y;
    if (x < 1 || y < 1 || x >= w - 1 || y >= h - 1) return;
    size_t i = (size_t)y * w + x;
    out[i] = 0.5f * in[i] + 0.125f * (in[i - 1] + in[i + 1] + in[i - w] + in[i + w]);
}

static double checksum(const float *d, size_t n)
{
    static float h[4096];
    double s = 0;
    for (size_t off = 0; off + 4096 <= n; off += n / 16) {
        if (cudaMemcpy(h, d + off, sizeof h, cudaMemcpyDeviceToHost) != cudaSuccess) return -1;
        for (int i = 0; i < 4096; i++) s += h[i];
    }
    return s;
}

int main(int argc, char **argv)
{
    int launches = argc > 1 ? atoi(argv[1]) : 10;
    const size_t n = (256u << 20) / sizeof(float);
    const int W = 8192, H = (int)(n / W);
    float *a, *b, *x, *y;
    unsigned long long *red;
    CK(cudaMalloc(&a, n * 4)); CK(cudaMalloc(&b, n * 4));
    CK(cudaMalloc(&x, n * 4)); CK(cudaMalloc(&y, n * 4)); CK(cudaMalloc(&red, 8));
    const unsigned blocks = (unsigned)((n + 255) / 256);
    init<<<blocks, 256>>>(a, n, 1.0f); init<<<blocks, 256>>>(b, n, 0.0f);
    init<<<blocks, 256>>>(x, n, 0.5f); init<<<blocks, 256>>>(y, n, 2.0f);
    CK(cudaMemset(red, 0, 8));
    CK(cudaDeviceSynchronize());
    cudaEvent_t e0, e1;
    CK(cudaEventCreate(&e0)); CK(cudaEventCreate(&e1));
    for (int k = 0; k < 4; k++) {
        const char *name[] = {"copy", "saxpy", "reduce", "stencil"};
        for (int rep = -1; rep < launches; rep++) {
            if (rep == 0) CK(cudaEventRecord(e0));
            switch (k) {
            case 0: copy<<<blocks, 256>>>(a, b, n); break;
            case 1: saxpy<<<blocks, 256>>>(n, 2.0f, x, y); break;
            case 2: reduce<<<(unsigned)((n + 511) / 512), 256>>>(a, n, red); break;
            case 3: stencil<<<dim3(W / 32, H / 8), dim3(32, 8)>>>(a, b, W, H); break;
            }
        }
        CK(cudaEventRecord(e1));
        CK(cudaEventSynchronize(e1));
        CK(cudaGetLastError());
        float ms = 0;
        CK(cudaEventElapsedTime(&ms, e0, e1));
        double sum;
        if (k == 2) {
            unsigned long long r;
            CK(cudaMemcpy(&r, red, 8, cudaMemcpyDeviceToHost));
            sum = (double)r;
        } else {
            sum = checksum(k == 1 ? y : b, n);
        }
        printf("bench %s launches %d ms %.3f checksum %.6e\n", name[k], launches, ms, sum);
    }
    CK(cudaFree(a)); CK(cudaFree(b)); CK(cudaFree(x)); CK(cudaFree(y)); CK(cudaFree(red));
    return planted_finish("bench_mem");
}
