// Correct program (must report nothing): idioms of real kernels beyond
// ok_features — dynamic shared memory, warp shuffles and votes, cooperative
// groups, read-only loads (__ldg, ld.global.nc), asynchronous copies into
// shared memory (cp.async, sm_80+), 64-bit and floating-point atomics and a
// compare-and-swap loop, half-precision pairs, a structure copied as a whole
// (vector loads and stores), a dynamically indexed local array, a recursive
// device function (its frame on the local stack), device printf, templates,
// and an in-place update through __restrict__ pointers. Every result is
// verified on the host.
#include <cooperative_groups.h>
#include <cooperative_groups/reduce.h>
#include <cuda_fp16.h>
#include <vector>
#include "planted.h"

namespace cg = cooperative_groups;

struct Particle {
    float pos[3];
    float vel[3];
    int id;
    int flags;
};

template <typename T, int N>
__device__ T dyn_local_sum(const T *src, int rot)
{
    T loc[N];
    for (int i = 0; i < N; i++) loc[(i + rot) % N] = src[i]; // dynamically indexed: stays in local memory
    T s = 0;
    for (int i = 0; i < N; i++) s += loc[i] * (T)(i + 1);
    return s;
}

__device__ __noinline__ int fib(int n) { return n < 2 ? n : fib(n - 1) + fib(n - 2); }

__global__ void reduce_block(const float *__restrict__ in, float *__restrict__ out, int n)
{
    extern __shared__ float dyn[];
    cg::thread_block block = cg::this_thread_block();
    cg::thread_block_tile<32> warp = cg::tiled_partition<32>(block);
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    float v = i < n ? __ldg(&in[i]) : 0.0f;
    v = cg::reduce(warp, v, cg::plus<float>());
    if (warp.thread_rank() == 0) dyn[warp.meta_group_rank()] = v;
    block.sync();
    if (threadIdx.x < 32) {
        float w = threadIdx.x < blockDim.x / 32 ? dyn[threadIdx.x] : 0.0f;
        for (int o = 16; o > 0; o >>= 1) w += __shfl_down_sync(0xffffffffu, w, o);
        if (threadIdx.x == 0) atomicAdd(out, w);
    }
}

__global__ void async_copy(const int4 *src, int4 *dst, int n)
{
    __shared__ __align__(16) int4 tile[128];
    int t = threadIdx.x, base = blockIdx.x * 128;
    if (base + t < n) {
        unsigned saddr = (unsigned)__cvta_generic_to_shared(&tile[t]);
        asm volatile("cp.async.ca.shared.global [%0], [%1], 16;" ::"r"(saddr), "l"(src + base + t));
    }
    asm volatile("cp.async.commit_group;");
    asm volatile("cp.async.wait_group 0;" ::: "memory");
    __syncthreads();
    if (base + t < n) {
        int4 q = tile[127 - t < n - base ? 127 - t : t];
        q.x += 1;
        dst[base + t] = q;
    }
}

__global__ void atomics(unsigned long long *c64, double *dsum, int *maxv, const int *vals, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    atomicAdd(c64, 1ull << 33);
    atomicAdd(dsum, 0.5);
    int cur = *(volatile int *)maxv, v = vals[i];
    while (v > cur) { // a compare-and-swap loop
        int seen = atomicCAS(maxv, cur, v);
        if (seen == cur) break;
        cur = seen;
    }
    unsigned ballot = __ballot_sync(__activemask(), v & 1);
    if ((threadIdx.x & 31) == 0) atomicOr((unsigned *)maxv + 1, ballot != 0u);
}

__global__ void halves(const __half2 *a, const __half2 *b, __half2 *c, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) c[i] = __hadd2(a[i], b[i]);
}

__global__ void particles(Particle *__restrict__ p, const Particle *__restrict__ q, int n, float dt)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    Particle x = q[i]; // the structure as a whole
    for (int k = 0; k < 3; k++) x.pos[k] += x.vel[k] * dt;
    x.flags |= 1;
    p[i] = x;
}

__global__ void locals_and_recursion(const float *src, float *out, int *fibs)
{
    int t = threadIdx.x;
    out[t] = dyn_local_sum<float, 24>(src, t);
    fibs[t] = fib(t % 12);
    if (t == 0) printf("ok_idioms: device printf from thread %d\n", t);
}

static int near(double a, double b) { return a - b < 1e-3 && b - a < 1e-3; }

int main()
{
    // 1. a block reduction through cooperative groups and dynamic shared memory
    const int n = 1 << 16;
    std::vector<float> hin(n);
    for (int i = 0; i < n; i++) hin[i] = (float)(i % 7);
    double want = 0;
    for (int i = 0; i < n; i++) want += hin[i];
    float *in, *sum;
    CK(cudaMalloc(&in, n * sizeof(float)));
    CK(cudaMalloc(&sum, sizeof(float)));
    CK(cudaMemcpy(in, hin.data(), n * sizeof(float), cudaMemcpyHostToDevice));
    CK(cudaMemset(sum, 0, sizeof(float)));
    reduce_block<<<n / 256, 256, 8 * sizeof(float)>>>(in, sum, n);
    float hsum;
    CK(cudaMemcpy(&hsum, sum, sizeof hsum, cudaMemcpyDeviceToHost));
    if (!near(hsum, want)) { printf("ok_idioms: reduction %g, expected %g\n", hsum, want); return 1; }

    // 2. cp.async into shared memory
    const int m = 1000;
    std::vector<int4> hs(m);
    for (int i = 0; i < m; i++) hs[i] = make_int4(i, 2 * i, 3 * i, 4 * i);
    int4 *s4, *d4;
    CK(cudaMalloc(&s4, m * sizeof(int4)));
    CK(cudaMalloc(&d4, m * sizeof(int4)));
    CK(cudaMemcpy(s4, hs.data(), m * sizeof(int4), cudaMemcpyHostToDevice));
    async_copy<<<(m + 127) / 128, 128>>>(s4, d4, m);
    std::vector<int4> hd(m);
    CK(cudaMemcpy(hd.data(), d4, m * sizeof(int4), cudaMemcpyDeviceToHost));
    for (int i = 0; i < m; i++) {
        int base = i / 128 * 128, t = i - base, src = 127 - t < m - base ? base + 127 - t : i;
        if (hd[i].x != hs[src].x + 1 || hd[i].w != hs[src].w) { printf("ok_idioms: cp.async [%d]\n", i); return 1; }
    }

    // 3. atomics of every width and a CAS loop
    const int na = 4096;
    std::vector<int> hv(na);
    for (int i = 0; i < na; i++) hv[i] = (i * 7919) % 100003;
    int hmax = 0;
    for (int v : hv) hmax = v > hmax ? v : hmax;
    unsigned long long *c64; double *dsum; int *maxv, *vals;
    CK(cudaMalloc(&c64, sizeof *c64)); CK(cudaMemset(c64, 0, sizeof *c64));
    CK(cudaMalloc(&dsum, sizeof *dsum)); CK(cudaMemset(dsum, 0, sizeof *dsum));
    CK(cudaMalloc(&maxv, 2 * sizeof(int))); CK(cudaMemset(maxv, 0, 2 * sizeof(int)));
    CK(cudaMalloc(&vals, na * sizeof(int)));
    CK(cudaMemcpy(vals, hv.data(), na * sizeof(int), cudaMemcpyHostToDevice));
    atomics<<<na / 128, 128>>>(c64, dsum, maxv, vals, na);
    unsigned long long hc; double hd2; int hm[2];
    CK(cudaMemcpy(&hc, c64, sizeof hc, cudaMemcpyDeviceToHost));
    CK(cudaMemcpy(&hd2, dsum, sizeof hd2, cudaMemcpyDeviceToHost));
    CK(cudaMemcpy(hm, maxv, sizeof hm, cudaMemcpyDeviceToHost));
    if (hc != (unsigned long long)na << 33 || !near(hd2, na * 0.5) || hm[0] != hmax || hm[1] != 1) {
        printf("ok_idioms: atomics %llu %g %d/%d %d\n", hc, hd2, hm[0], hmax, hm[1]);
        return 1;
    }

    // 4. half-precision pairs
    const int nh = 512;
    std::vector<__half2> ha(nh), hb(nh), hc2(nh);
    for (int i = 0; i < nh; i++) {
        ha[i] = __floats2half2_rn((float)(i % 9), 1.0f);
        hb[i] = __floats2half2_rn(2.0f, (float)(i % 5));
    }
    __half2 *a, *b, *c;
    CK(cudaMalloc(&a, nh * sizeof(__half2))); CK(cudaMalloc(&b, nh * sizeof(__half2))); CK(cudaMalloc(&c, nh * sizeof(__half2)));
    CK(cudaMemcpy(a, ha.data(), nh * sizeof(__half2), cudaMemcpyHostToDevice));
    CK(cudaMemcpy(b, hb.data(), nh * sizeof(__half2), cudaMemcpyHostToDevice));
    halves<<<nh / 128, 128>>>(a, b, c, nh);
    CK(cudaMemcpy(hc2.data(), c, nh * sizeof(__half2), cudaMemcpyDeviceToHost));
    for (int i = 0; i < nh; i++) {
        float2 f = __half22float2(hc2[i]);
        if (f.x != (float)(i % 9) + 2.0f || f.y != 1.0f + (float)(i % 5)) { printf("ok_idioms: half2 [%d]\n", i); return 1; }
    }

    // 5. structures copied whole
    const int np = 300;
    std::vector<Particle> hp(np);
    for (int i = 0; i < np; i++) hp[i] = Particle{{1.0f * i, 2, 3}, {1, 0.5f, -1}, i, 4};
    Particle *p, *q;
    CK(cudaMalloc(&p, np * sizeof(Particle))); CK(cudaMalloc(&q, np * sizeof(Particle)));
    CK(cudaMemcpy(q, hp.data(), np * sizeof(Particle), cudaMemcpyHostToDevice));
    particles<<<(np + 63) / 64, 64>>>(p, q, np, 2.0f);
    std::vector<Particle> hr(np);
    CK(cudaMemcpy(hr.data(), p, np * sizeof(Particle), cudaMemcpyDeviceToHost));
    for (int i = 0; i < np; i++)
        if (hr[i].pos[0] != 1.0f * i + 2.0f || hr[i].pos[2] != 1.0f || hr[i].id != i || hr[i].flags != 5) {
            printf("ok_idioms: particle %d\n", i);
            return 1;
        }

    // 6. local arrays, recursion, printf
    const int tl = 64;
    std::vector<float> hsrc(24);
    for (int i = 0; i < 24; i++) hsrc[i] = (float)(i + 1);
    float *src, *lout; int *fibs;
    CK(cudaMalloc(&src, 24 * sizeof(float))); CK(cudaMalloc(&lout, tl * sizeof(float))); CK(cudaMalloc(&fibs, tl * sizeof(int)));
    CK(cudaMemcpy(src, hsrc.data(), 24 * sizeof(float), cudaMemcpyHostToDevice));
    locals_and_recursion<<<1, tl>>>(src, lout, fibs);
    std::vector<float> hl(tl); std::vector<int> hf(tl);
    CK(cudaMemcpy(hl.data(), lout, tl * sizeof(float), cudaMemcpyDeviceToHost));
    CK(cudaMemcpy(hf.data(), fibs, tl * sizeof(int), cudaMemcpyDeviceToHost));
    int fibv[12] = {0, 1, 1, 2, 3, 5, 8, 13, 21, 34, 55, 89};
    for (int t = 0; t < tl; t++) {
        float e = 0;
        for (int i = 0; i < 24; i++) e += hsrc[(i - t % 24 + 24 * 4) % 24] * (float)(i + 1);
        if (!near(hl[t], e) || hf[t] != fibv[t % 12]) { printf("ok_idioms: locals [%d] %g/%g fib %d\n", t, hl[t], e, hf[t]); return 1; }
    }
    CK(cudaFree(in)); CK(cudaFree(sum)); CK(cudaFree(s4)); CK(cudaFree(d4)); CK(cudaFree(c64)); CK(cudaFree(dsum));
    CK(cudaFree(maxv)); CK(cudaFree(vals)); CK(cudaFree(a)); CK(cudaFree(b)); CK(cudaFree(c)); CK(cudaFree(p));
    CK(cudaFree(q)); CK(cudaFree(src)); CK(cudaFree(lout)); CK(cudaFree(fibs));
    printf("ok_idioms: results correct\n");
    return planted_finish("ok_idioms");
}
