/* check on a GPU: the device map against the host reference, and one
 * instrumented kernel end to end. Exits 77 (skip) without libcuda.so.1 or a
 * GPU.
 *
 *  1. Random register/unregister/mark operations go to a host map and, through
 *     the shadow-op kernel, to the device map; afterwards sampled shadow words
 *     (every window's edges and random bytes) must be equal on both.
 *  2. A kernel instrumented by mt_ptx_instrument runs over a registered
 *     allocation: in-bounds loads and stores must run unchanged (results
 *     checked) and report nothing; a store one element past the end, a load
 *     before the start, a misaligned load and a load of bytes never written
 *     must each produce exactly the expected record (kind, address, block,
 *     thread), and the out-of-bounds store must not have written anything.
 * --seed N replays step 1. */
#include <dlfcn.h>
#include <errno.h>
#include <string.h>

#include "mt_test.h"
#include "memtrack/check.h"
#include "devcheck.h"

#define SKIP 77

static const mt_cu *cu;

#define CU_OK(x) MT_CHECK_INT_EQ((x), 0)

static void test_map(mt_devcheck *d, uint64_t seed)
{
    uint64_t rng = seed;
    mt_vmap *host;
    MT_CHECK_OK(mt_vmap_create(NULL, &host));
    const uint64_t win[3] = {0x7e0000000000ull, 0x7e00fffe0000ull, 0x500000000000ull - 70000};
    const uint64_t span = 300000;
    for (int step = 0; step < 300; step++) {
        uint64_t base = win[mt_test_below(&rng, 3)];
        uint64_t len = 1 + mt_test_below(&rng, step % 5 == 0 ? span : 3000);
        uint64_t a = base + mt_test_below(&rng, span - len + 1);
        int op = (int)mt_test_below(&rng, 4);
        if (op == 3) {
            MT_CHECK_OK(mt_vmap_mark_valid(host, a, len));
            MT_CHECK_OK(_mt_devcheck_mark_valid(d, a, len, d->own));
        } else {
            MT_CHECK_OK(mt_vmap_set(host, a, len, (mt_vmap_state)op));
            MT_CHECK_OK(_mt_devcheck_set(d, a, len, (mt_vmap_state)op, d->own, step & 1));
        }
    }
    CU_OK(cu->CtxSynchronize());
    int compared = 0;
    for (int w = 0; w < 3; w++)
        for (int k = 0; k < 400; k++) {
            uint64_t a = win[w] + (k < 40 ? (uint64_t)k * 32 : mt_test_below(&rng, span));
            uint64_t dw = 0, hw = *mt_vmap_shadow_word(mt_vmap_root(host), a);
            MT_CHECK_OK(_mt_devcheck_shadow_word(d, a, &dw));
            if (dw != hw) {
                fprintf(stderr, "address %#jx: device word %#jx, host word %#jx\n", (uintmax_t)a, (uintmax_t)dw,
                        (uintmax_t)hw);
                MT_CHECK(0);
            }
            compared++;
        }
    printf("map: %d shadow words equal on device and host after 300 operations (%ju ops, %ju groups)\n",
           compared, (uintmax_t)d->ops, (uintmax_t)d->op_groups);
    mt_vmap_destroy(host);
}

/* out[i] = in[i] * 2 for i < n; then thread 0 of block 1 does the planted
 * accesses selected by `which` (bit 0: store in[n], bit 1: load in[-1],
 * bit 2: misaligned load, bit 3: load of out[n + 1], never written), storing
 * what it loaded to out[n + 4..6]. */
static const char kernel_ptx_body[] = /* after the header the helper module loaded with */
    ".address_size 64\n"
    ".visible .entry k(.param .u64 pin, .param .u64 pout, .param .u32 pn, .param .u32 which)\n{\n"
    "\t.reg .b64 %rd<12>;\n\t.reg .b32 %r<12>;\n\t.reg .f32 %f<4>;\n\t.reg .pred %p<6>;\n"
    "\tld.param.u64 %rd1, [pin];\n\tld.param.u64 %rd2, [pout];\n\tld.param.u32 %r1, [pn];\n"
    "\tld.param.u32 %r9, [which];\n"
    "\tmov.u32 %r2, %ctaid.x;\n\tmov.u32 %r3, %ntid.x;\n\tmov.u32 %r4, %tid.x;\n"
    "\tmad.lo.s32 %r5, %r2, %r3, %r4;\n\tsetp.ge.s32 %p1, %r5, %r1;\n"
    "\tmul.wide.s32 %rd3, %r5, 4;\n\tadd.s64 %rd4, %rd1, %rd3;\n\tadd.s64 %rd5, %rd2, %rd3;\n"
    "\t@!%p1 ld.global.f32 %f1, [%rd4];\n\tadd.f32 %f2, %f1, %f1;\n\t@!%p1 st.global.f32 [%rd5], %f2;\n"
    "\tsetp.ne.s32 %p2, %r2, 1;\n\tsetp.ne.s32 %p3, %r4, 0;\n\tor.pred %p2, %p2, %p3;\n"
    "\t@%p2 bra DONE;\n"
    "\tmul.wide.s32 %rd6, %r1, 4;\n\tadd.s64 %rd7, %rd1, %rd6;\n\tadd.s64 %rd8, %rd2, %rd6;\n"
    "\tand.b32 %r10, %r9, 1;\n\tsetp.ne.s32 %p4, %r10, 0;\n\t@%p4 st.global.f32 [%rd7], %f2;\n"
    "\tand.b32 %r10, %r9, 2;\n\tsetp.ne.s32 %p4, %r10, 0;\n\t@%p4 ld.global.f32 %f3, [%rd1+-4];\n"
    "\t@%p4 st.global.f32 [%rd8+16], %f3;\n"
    "\tand.b32 %r10, %r9, 4;\n\tsetp.ne.s32 %p4, %r10, 0;\n\t@%p4 ld.f32 %f3, [%rd1+2];\n"
    "\t@%p4 st.global.f32 [%rd8+20], %f3;\n"
    "\tand.b32 %r10, %r9, 8;\n\tsetp.ne.s32 %p4, %r10, 0;\n\t@%p4 ld.global.f32 %f3, [%rd8+4];\n"
    "\t@%p4 st.global.f32 [%rd8+24], %f3;\n"
    "DONE:\n\tret;\n}\n";

static void test_kernel(mt_devcheck *d)
{
    const uint32_t n = 1000;
    CUdeviceptr raw_in, out;
    /* in: n floats with 512-byte red zones around; out: n + 8 floats, the last
     * 8 never written by anyone (the "uninitialised" tail is out[n..]). */
    CU_OK(cu->MemAlloc(&raw_in, 4096 + 1024));
    CU_OK(cu->MemAlloc(&out, (n + 8) * 4));
    CUdeviceptr in = raw_in + 512;
    MT_CHECK_OK(_mt_devcheck_set(d, in, n * 4, MT_VMAP_UNDEFINED, NULL, 0));
    MT_CHECK_OK(_mt_devcheck_set(d, out, (n + 8) * 4, MT_VMAP_UNDEFINED, NULL, 0));
    float h[1000], o[1008];
    for (uint32_t i = 0; i < n; i++)
        h[i] = (float)i;
    CU_OK(cu->MemcpyHtoDAsync(in, h, sizeof h, d->own));
    MT_CHECK_OK(_mt_devcheck_mark_valid(d, in, n * 4, d->own));
    float sentinel = 12345.0f;
    CU_OK(cu->MemcpyHtoDAsync(in + n * 4, &sentinel, 4, d->own)); /* red zone content, unregistered */
    CU_OK(cu->StreamSynchronize(d->own));

    mt_ptx_opts o_ = {.map_root = mt_vmap_root(d->map), .err_buf = d->errbuf, .err_cap = d->errcap,
                      .safe_load = d->safe, .safe_store = d->sink, .local_top = d->local_top};
    mt_ptx_result *res;
    char kernel_ptx[sizeof kernel_ptx_body + 64];
    snprintf(kernel_ptx, sizeof kernel_ptx, "%s%s", d->ptx_header, kernel_ptx_body);
    MT_CHECK_OK(mt_ptx_instrument(kernel_ptx, strlen(kernel_ptx), &o_, &res));
    MT_CHECK_INT_EQ(res->nsites, 9);
    CUmodule mod;
    CUfunction fn;
    CU_OK(cu->ModuleLoadData(&mod, res->text));
    CU_OK(cu->ModuleGetFunction(&fn, mod, "k"));

    mt_check_record rec[64];
    uint64_t lost;
    MT_CHECK(_mt_devcheck_read_errors(d, rec, 64, &lost) >= 0); /* start from a clean cursor */
    for (uint32_t which = 0; which < 16; which = which ? which << 1 : 1) {
        uint32_t nn = n;
        void *params[] = {&in, &out, &nn, &which};
        CU_OK(cu->LaunchKernel(fn, (n + 255) / 256, 1, 1, 256, 1, 1, 0, d->own, params, NULL));
        CU_OK(cu->StreamSynchronize(d->own));
        long got = _mt_devcheck_read_errors(d, rec, 64, &lost);
        CU_OK(cu->MemcpyDtoHAsync(o, out, sizeof o, d->own));
        CU_OK(cu->StreamSynchronize(d->own));
        for (uint32_t i = 0; i < n; i++)
            MT_CHECK(o[i] == 2.0f * (float)i);
        if (which == 0) {
            MT_CHECK_INT_EQ(got, 0);
            continue;
        }
        MT_CHECK_INT_EQ(got, 1);
        MT_CHECK_UINT_EQ(rec[0].block[0], 1);
        MT_CHECK_UINT_EQ(rec[0].thread[0], 0);
        switch (which) {
        case 1:
            MT_CHECK_UINT_EQ(rec[0].kind, MT_CHECK_NOACCESS);
            MT_CHECK_UINT_EQ(rec[0].addr, in + n * 4);
            break;
        case 2:
            MT_CHECK_UINT_EQ(rec[0].kind, MT_CHECK_NOACCESS);
            MT_CHECK_UINT_EQ(rec[0].addr, in - 4);
            break;
        case 4:
            MT_CHECK_UINT_EQ(rec[0].kind, MT_CHECK_MISALIGNED);
            MT_CHECK_UINT_EQ(rec[0].addr, in + 2);
            break;
        case 8:
            MT_CHECK_UINT_EQ(rec[0].kind, MT_CHECK_UNINIT);
            MT_CHECK_UINT_EQ(rec[0].addr, out + n * 4 + 4);
            break;
        }
        char text[2048];
        mt_check_where w = {0};
        mt_check_format(text, sizeof text, &rec[0], &res->sites[rec[0].site], NULL, &w, 0);
        printf("which=%u:\n%s", which, text);
    }
    (void)lost;
    /* The redirected store left the red zone alone. */
    float rz = 0;
    CU_OK(cu->MemcpyDtoHAsync(&rz, in + n * 4, 4, d->own));
    CU_OK(cu->StreamSynchronize(d->own));
    MT_CHECK(rz == 12345.0f);
    mt_ptx_result_free(res);
}

int main(int argc, char **argv)
{
    uint64_t seed = mt_test_seed(argc, argv);
    if (!(cu = _mt_cu())) {
        printf("no libcuda.so.1: skipped\n");
        return SKIP;
    }
    CUdevice dev;
    CUcontext ctx;
    if (cu->Init(0) || cu->DeviceGet(&dev, 0) || cu->DevicePrimaryCtxRetain(&ctx, dev) || cu->CtxPushCurrent(ctx)) {
        printf("no usable GPU: skipped\n");
        return SKIP;
    }
    mt_devcheck d;
    int rc = _mt_devcheck_init(&d, 64);
    if (rc)
        fprintf(stderr, "init: %s failed (driver error %d): %s\n", d.fail_step ? d.fail_step : "?", d.fail_cu,
                d.jit_log);
    MT_CHECK_OK(rc);
    printf("sm_%d, local window top 0x%jx\n", d.sm, (uintmax_t)d.local_top);
    test_map(&d, seed);
    test_kernel(&d);
    _mt_devcheck_fini(&d);
    printf("test_check_gpu: ok\n");
    return 0;
}
