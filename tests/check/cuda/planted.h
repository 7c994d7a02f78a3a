// planted.h: what every planted-bug and correct program of the memtrack check
// suite shares. Each program plants at most one bug, launches it, synchronises
// and prints what the synchronisation returned and whether the context still
// works afterwards (a real fault poisons it; memtrack check must not).
// Exit status: 0 when every CUDA call succeeded, 1 when one failed.
#pragma once
#include <cstdio>
#include <cstdlib>
#include <cuda_runtime.h>

#define CK(x)                                                                          \
    do {                                                                               \
        cudaError_t e_ = (x);                                                          \
        if (e_ != cudaSuccess) {                                                       \
            printf("%s:%d: %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e_)); \
            return 1;                                                                  \
        }                                                                              \
    } while (0)

// Synchronises after the planted access and reports the outcome; then checks
// that the context still accepts work (allocation, memset, synchronisation).
static inline int planted_finish(const char *name)
{
    cudaError_t e = cudaDeviceSynchronize();
    printf("%s: sync: %s\n", name, cudaGetErrorName(e));
    void *p = nullptr;
    cudaError_t a = cudaMalloc(&p, 256);
    if (a == cudaSuccess)
        a = cudaMemset(p, 0, 256);
    if (a == cudaSuccess)
        a = cudaDeviceSynchronize();
    if (p)
        cudaFree(p);
    printf("%s: context afterwards: %s\n", name, a == cudaSuccess ? "usable" : cudaGetErrorName(a));
    return (e != cudaSuccess || a != cudaSuccess) ? 1 : 0;
}
