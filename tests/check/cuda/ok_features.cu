// Correct program (must report nothing): the memory features a checker must
// not mistake for bugs. Every result is verified on the host.
#include <cstring>
#include <vector>
#include "planted.h"

__device__ int g_table[256];              // module global, zero-initialised
static __device__ int s_counter;          // internal-linkage module global
__constant__ float c_coef[4] = {1, 2, 3, 4};

__device__ __noinline__ float sum_generic(const float *p, int n)
{
    float s = 0;
    for (int i = 0; i < n; i++) s += p[i];
    return s;
}
__device__ __noinline__ void fill_generic(int *p, int n, int v)
{
    for (int i = 0; i < n; i++) p[i] = v + i;
}

// Kernel A writes a buffer nothing initialised; kernel B reads it (validity
// comes from device stores). Bytes are written one by one, read as words.
__global__ void write_bytes(unsigned char *p, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) p[i] = (unsigned char)(i & 0x7f);
}
__global__ void read_words(const int *p, int n, int *out)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = p[i];
}

__global__ void features(const float4 *v4, float *out, const char *last, int nlast, float *host_mapped,
                         const float *managed, int *counts)
{
    __shared__ float sh[64];
    int t = threadIdx.x;
    int loc[16];
    sh[t] = (float)t;
    __syncthreads();
    fill_generic(loc, 16, t);                       // local array, generic pointer, in bounds
    float s = sum_generic(sh, 64);                  // shared array, generic pointer
    float c = sum_generic(c_coef, 4);               // constant bank, generic pointer
    float4 q = v4[t];                               // 16-byte vector load
    atomicAdd(&counts[0], 1);                       // global atomic
    atomicAdd(&g_table[t], loc[15]);                // module global atomic
    if (t == 0) s_counter += 5;                     // internal module global
    asm volatile("prefetch.global.L2 [%0];" ::"l"(v4 + t));
    asm volatile("prefetch.L1 [%0];" ::"l"(v4 + t));
    asm volatile("prefetchu.L1 [%0];" ::"l"(v4 + t));
    float h = host_mapped[t];                       // zero-copy host memory
    host_mapped[t] = h + 1.0f;
    float m = managed[t];                           // managed memory written by the host
    int lastc = last[nlast - 1];                    // the very last byte of an allocation
    out[t] = s + c + q.x + q.y + q.z + q.w + h + m + (float)lastc;
}

int main()
{
    const int T = 64;
    // 1. device-written data read by another kernel
    const int nb = 4096;
    unsigned char *bytes; int *words;
    CK(cudaMalloc(&bytes, nb)); CK(cudaMalloc(&words, nb));
    write_bytes<<<nb / 256, 256>>>(bytes, nb);
    read_words<<<nb / 4 / 256, 256>>>((const int *)bytes, nb / 4, words);
    std::vector<int> hw(nb / 4);
    CK(cudaMemcpy(hw.data(), words, nb, cudaMemcpyDeviceToHost));
    for (int i = 0; i < nb / 4; i++) {
        int e = 0;
        for (int b = 0; b < 4; b++) e |= ((4 * i + b) & 0x7f) << (8 * b);
        if (hw[i] != e) { printf("ok_features: words[%d] = %d, expected %d\n", i, hw[i], e); return 1; }
    }

    // 2. the feature kernel
    float4 *v4; float *out; char *last; float *hm, *hm_dev, *managed; int *counts;
    const int nlast = 333;
    std::vector<float4> hv(T);
    for (int i = 0; i < T; i++) hv[i] = make_float4(i, 1, 2, 3);
    CK(cudaMalloc(&v4, T * sizeof(float4)));
    CK(cudaMemcpy(v4, hv.data(), T * sizeof(float4), cudaMemcpyHostToDevice));
    CK(cudaMalloc(&out, T * sizeof(float)));
    CK(cudaMalloc(&last, nlast)); CK(cudaMemset(last, 3, nlast));
    CK(cudaHostAlloc(&hm, T * sizeof(float), cudaHostAllocMapped));
    for (int i = 0; i < T; i++) hm[i] = 10.0f;
    CK(cudaHostGetDevicePointer(&hm_dev, hm, 0));
    CK(cudaMallocManaged(&managed, T * sizeof(float)));
    for (int i = 0; i < T; i++) managed[i] = 100.0f;
    CK(cudaMalloc(&counts, sizeof(int))); CK(cudaMemset(counts, 0, sizeof(int)));
    features<<<1, T>>>(v4, out, last, nlast, hm_dev, managed, counts);
    CK(cudaDeviceSynchronize());
    std::vector<float> ho(T);
    CK(cudaMemcpy(ho.data(), out, T * sizeof(float), cudaMemcpyDeviceToHost));
    for (int t = 0; t < T; t++) {
        float e = 2016.0f + 10.0f + (t + 6.0f) + 10.0f + 100.0f + 3.0f;
        if (ho[t] != e || hm[t] != 11.0f) { printf("ok_features: out[%d] = %g (expected %g), hm = %g\n", t, ho[t], e, hm[t]); return 1; }
    }
    int cnt, tab[T], sc;
    CK(cudaMemcpy(&cnt, counts, sizeof cnt, cudaMemcpyDeviceToHost));
    CK(cudaMemcpyFromSymbol(tab, g_table, sizeof tab));
    CK(cudaMemcpyFromSymbol(&sc, s_counter, sizeof sc));
    if (cnt != T || tab[5] != 5 + 15 || sc != 5) { printf("ok_features: counts %d tab %d sc %d\n", cnt, tab[5], sc); return 1; }

    // 3. stream-ordered allocation, async memset, device-to-device and 2D copies
    cudaStream_t s;
    CK(cudaStreamCreate(&s));
    int *a, *b;
    CK(cudaMallocAsync(&a, 1 << 20, s));
    CK(cudaMemsetAsync(a, 0, 1 << 20, s));
    CK(cudaMalloc(&b, 1 << 20));
    CK(cudaMemcpyAsync(b, a, 1 << 20, cudaMemcpyDeviceToDevice, s));
    read_words<<<(1 << 18) / 256, 256, 0, s>>>(b, 1 << 18, a);
    CK(cudaFreeAsync(a, s));
    CK(cudaStreamSynchronize(s));
    float *pitched; size_t pitch;
    CK(cudaMallocPitch(&pitched, &pitch, 100 * sizeof(float), 10));
    std::vector<float> h2(100 * 10, 1.5f);
    CK(cudaMemcpy2D(pitched, pitch, h2.data(), 100 * sizeof(float), 100 * sizeof(float), 10, cudaMemcpyHostToDevice));
    int *row;
    CK(cudaMalloc(&row, 100 * sizeof(int)));
    read_words<<<1, 100>>>((const int *)((char *)pitched + 9 * pitch), 100, row);
    CK(cudaDeviceSynchronize());
    CK(cudaFree(row));
    CK(cudaStreamDestroy(s));
    CK(cudaFree(b)); CK(cudaFree(pitched)); CK(cudaFreeHost(hm)); CK(cudaFree(managed));
    printf("ok_features: results correct\n");
    return planted_finish("ok_features");
}
