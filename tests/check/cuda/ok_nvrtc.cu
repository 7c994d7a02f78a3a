// Correct program (must report nothing): a driver-API program whose kernel
// is compiled at run time with NVRTC and loaded with cuModuleLoadDataEx (what
// CuPy, PyTorch's jiterator and the like do). Built with -lnvrtc -lcuda
// (run_suite.sh). bug_nvrtc_past.cu defines NVRTC_OVER 1: one element past
// both arrays.
#include <cuda.h>
#include <nvrtc.h>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>
#define CKD(x) do { CUresult r_ = (x); if (r_) { const char *s; cuGetErrorName(r_, &s); printf("%s: %s\n", #x, s); return 1; } } while (0)
#define CKN(x) do { nvrtcResult r_ = (x); if (r_) { printf("%s: %s\n", #x, nvrtcGetErrorString(r_)); return 1; } } while (0)
static const char *src = R"(
extern "C" __global__ void axpb(const float *x, float *y, int n, float a, float b, int over) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n + over) y[i] = a * x[i] + b;
})";
int main(int argc, char **argv) {
#ifndef NVRTC_OVER
#define NVRTC_OVER 0
#endif
    int over = argc > 1 ? atoi(argv[1]) : NVRTC_OVER; // 1: one element past the end
    CKD(cuInit(0)); CUdevice d; CKD(cuDeviceGet(&d, 0)); CUcontext ctx; CKD(cuDevicePrimaryCtxRetain(&ctx, d)); CKD(cuCtxSetCurrent(ctx));
    nvrtcProgram p; CKN(nvrtcCreateProgram(&p, src, "axpb.cu", 0, nullptr, nullptr));
    const char *opts[] = {"--gpu-architecture=compute_90", "-lineinfo"};
    CKN(nvrtcCompileProgram(p, 2, opts));
    size_t n_ptx; CKN(nvrtcGetPTXSize(p, &n_ptx)); std::vector<char> ptx(n_ptx); CKN(nvrtcGetPTX(p, ptx.data()));
    CUmodule m; CKD(cuModuleLoadDataEx(&m, ptx.data(), 0, nullptr, nullptr));
    CUfunction f; CKD(cuModuleGetFunction(&f, m, "axpb"));
    const int n = 1000; std::vector<float> hx(n), hy(n);
    for (int i = 0; i < n; i++) hx[i] = (float)i;
    CUdeviceptr x, y; CKD(cuMemAlloc(&x, n * 4)); CKD(cuMemAlloc(&y, n * 4));
    CKD(cuMemcpyHtoD(x, hx.data(), n * 4));
    float a = 2, b = 1; int nn = n;
    void *args[] = {&x, &y, &nn, &a, &b, &over};
    CKD(cuLaunchKernel(f, (n + 255) / 256, 1, 1, 256, 1, 1, 0, 0, args, nullptr));
    CUresult sr = cuCtxSynchronize();
    const char *sn; cuGetErrorName(sr, &sn); printf("ok_nvrtc: sync: %s\n", sn);
    CUdeviceptr t = 0; // does the context still take work?
    CUresult cr = cuMemAlloc(&t, 256);
    if (!cr) cr = cuMemsetD8(t, 0, 256);
    if (!cr) cr = cuCtxSynchronize();
    const char *cn; cuGetErrorName(cr, &cn);
    printf("ok_nvrtc: context afterwards: %s\n", cr ? cn : "usable");
    if (sr) return over ? 0 : 1;
    CKD(cuMemcpyDtoH(hy.data(), y, n * 4));
    for (int i = 0; i < n; i++) if (hy[i] != 2.0f * i + 1) { printf("ok_nvrtc: y[%d] = %g\n", i, hy[i]); return 1; }
    printf("ok_nvrtc: results correct\n");
    return 0;
}
