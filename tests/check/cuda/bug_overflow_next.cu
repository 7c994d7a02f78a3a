// Planted bug: writes one element past a 256 MiB allocation. Natively the
// address falls into the allocation the driver placed right after it, so
// nothing faults and compute-sanitizer memcheck reports nothing; red zones
// catch it. The program writes past whichever of its two allocations ends
// where the other begins (the driver's placement order varies).
#include "planted.h"
__global__ void write_one_past(float *a, size_t n) { a[n] = 42.0f; }
int main()
{
    const size_t n = (256u << 20) / sizeof(float);
    float *a, *b;
    CK(cudaMalloc(&a, n * sizeof(float))); CK(cudaMalloc(&b, n * sizeof(float)));
    CK(cudaMemset(a, 0, n * sizeof(float))); CK(cudaMemset(b, 0, n * sizeof(float)));
    float *first = a, *second = b;
    if (b + n == a)
        first = b, second = a;
    printf("overflow_next: writing one past %p; the other allocation %s there\n", (void *)first,
           first + n == second ? "starts" : "does not start");
    write_one_past<<<1, 1>>>(first, n);
    int rc = planted_finish("overflow_next");
    float v = -1;
    if (cudaMemcpy(&v, second, sizeof v, cudaMemcpyDeviceToHost) == cudaSuccess)
        printf("overflow_next: first element of the other allocation = %g\n", v);
    return rc;
}
