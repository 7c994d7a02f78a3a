// Correct program (must report nothing): saxpy with host copies both ways.
#include <vector>
#include "planted.h"
__global__ void saxpy(int n, float a, const float *x, float *y)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)
        y[i] = a * x[i] + y[i];
}
int main()
{
    const int n = 1 << 20;
    std::vector<float> x(n), y(n);
    for (int i = 0; i < n; i++) { x[i] = (float)i; y[i] = 1.0f; }
    float *dx, *dy;
    CK(cudaMalloc(&dx, n * sizeof(float))); CK(cudaMalloc(&dy, n * sizeof(float)));
    CK(cudaMemcpy(dx, x.data(), n * sizeof(float), cudaMemcpyHostToDevice));
    CK(cudaMemcpy(dy, y.data(), n * sizeof(float), cudaMemcpyHostToDevice));
    saxpy<<<(n + 255) / 256, 256>>>(n, 2.0f, dx, dy);
    CK(cudaMemcpy(y.data(), dy, n * sizeof(float), cudaMemcpyDeviceToHost));
    for (int i = 0; i < n; i++)
        if (y[i] != 2.0f * i + 1.0f) { printf("ok_saxpy: wrong y[%d] = %g\n", i, y[i]); return 1; }
    CK(cudaFree(dx)); CK(cudaFree(dy));
    printf("ok_saxpy: results correct\n");
    return planted_finish("ok_saxpy");
}
