/* coherence on NVIDIA GPUs (exits 77, skipped, without a driver or GPU).
 *
 * Each GPU is added twice (two devices sharing the GPU: device-to-device
 * copies without a second GPU), beside a host device and a simulated one.
 *  - uploads (one DMA for a whole buffer), scattered writes on a GPU read
 *    back by the other GPU device (peer copy kernel), by the host device
 *    (downloads) and by a map (the copy kernel writing pinned host memory);
 *  - a relay between the simulated device and a GPU through host memory;
 *  - a tracked 64 MiB buffer: after the host wrote 10% of its pages, the
 *    upload moves exactly those pages (the gather kernel) and the GPU holds
 *    the right content;
 *  - fine-grained SVM used in place by a GPU. */
#include <errno.h>
#include <stdatomic.h>
#include <sys/mman.h>
#include <unistd.h>

#include "coh_cuda_hooks.h"
#include "coh_util.h"
#include "memtrack/coherence.h"
#include "mt_test.h"

static mt_coh *c;
static mt_coh_client *cl;
static uint32_t host, sim, g1, g2;
static mt_coh_queue *q[8];

static uint64_t runq(uint32_t d, tk_cmd *k, const mt_coh_arg *a, uint32_t n,
                     mt_coh_event_info *info)
{
    k->nargs = n;
    for (uint32_t i = 0; i < n; i++)
        k->access[i] = a[i].access;
    mt_coh_command cmd = {.fn = tk_run, .user = k, .args = a, .nargs = n};
    mt_coh_event *ev;
    MT_CHECK_OK(mt_coh_enqueue(q[d], &cmd, &ev));
    MT_CHECK_OK(mt_coh_event_wait(ev, -1));
    mt_coh_event_info in;
    MT_CHECK_OK(mt_coh_event_info_get(ev, &in));
    mt_coh_event_release(ev);
    if (info)
        *info = in;
    return in.bytes_in;
}

static uint64_t read_all(uint32_t d, mt_coh_buf b, uint64_t size, const uint8_t *ref)
{
    tk_cmd k = {0};
    mt_coh_arg a = {.buf = b, .size = size, .access = MT_COH_READ};
    uint64_t n = runq(d, &k, &a, 1, NULL);
    MT_CHECK_UINT_EQ(k.seen[0], tk_hash(ref, size));
    return n;
}

static void test_paths(void)
{
    enum { N = 16u << 20 };
    uint8_t *mem = mmap(NULL, N, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    uint8_t *ref = malloc(N);
    for (size_t i = 0; i < N; i++)
        mem[i] = ref[i] = (uint8_t)(i * 11 + (i >> 12));
    mt_coh_buffer_opts o = {.flags = MT_COH_BUF_USE_HOST_PTR, .host_ptr = mem};
    mt_coh_buf b;
    MT_CHECK_OK(mt_coh_buffer_create(cl, N, &o, &b));
    MT_CHECK_UINT_EQ(read_all(g1, b, N, ref), N);
    MT_CHECK_UINT_EQ(read_all(g2, b, N, ref), N);
    MT_CHECK_UINT_EQ(read_all(host, b, N, ref), N);
    /* 48 scattered pages written on the first GPU device, in one command. */
    mt_coh_arg args[48];
    tk_cmd k = {0};
    for (int i = 0; i < 48; i++) {
        uint64_t off = (uint64_t)(i * 83 + 5) % (N / 4096) * 4096;
        args[i] = (mt_coh_arg){.buf = b, .offset = off, .size = 4096, .access = MT_COH_WRITE};
        k.pattern[i % TK_MAX] = 0x0102030405060708ull * (uint64_t)(i % TK_MAX + 1);
    }
    /* tk_cmd holds TK_MAX arguments: write them in batches of 8. */
    for (int i = 0; i < 48; i += TK_MAX) {
        runq(g1, &k, args + i, TK_MAX, NULL);
        for (int j = 0; j < TK_MAX; j++)
            tk_fill(ref + args[i + j].offset, 4096, k.pattern[j]);
    }
    mt_coh_stats s0, s1;
    MT_CHECK_OK(mt_coh_stats_get(c, &s0));
    MT_CHECK_UINT_EQ(read_all(g2, b, N, ref), 48 * 4096); /* peer copy, same GPU: the kernel */
    MT_CHECK_OK(mt_coh_stats_get(c, &s1));
    MT_CHECK_UINT_EQ(s1.bytes_d2d - s0.bytes_d2d, 48 * 4096);
    /* A map: the 48 pages come from a GPU into the pinned host pointer, one
     * launch of the copy kernel writing host memory. */
    mt_coh_arg ma = {.buf = b, .size = N, .access = MT_COH_READ};
    void *p;
    mt_coh_event *ev;
    MT_CHECK_OK(mt_coh_map(q[host], &ma, NULL, 0, &p, &ev));
    MT_CHECK_OK(mt_coh_event_wait(ev, -1));
    mt_coh_event_info info;
    MT_CHECK_OK(mt_coh_event_info_get(ev, &info));
    mt_coh_event_release(ev);
    MT_CHECK_UINT_EQ(info.bytes_in, 48 * 4096);
    MT_CHECK(p == mem);
    MT_CHECK_MEM_EQ(mem, ref, N);
    MT_CHECK_OK(mt_coh_unmap(q[host], p, NULL));
    /* The host device pulls them from host memory now (valid after the map). */
    MT_CHECK_UINT_EQ(read_all(host, b, N, ref), 48 * 4096);
    /* The simulated device writes; a GPU reads: relayed through host memory
     * (neither copies the other's memory). */
    tk_cmd w = {.pattern = {0xa5a5a5a55a5a5a5aull}};
    mt_coh_arg wa = {.buf = b, .offset = 1u << 20, .size = 1u << 20, .access = MT_COH_WRITE};
    runq(sim, &w, &wa, 1, NULL);
    tk_fill(ref + (1u << 20), 1u << 20, 0xa5a5a5a55a5a5a5aull);
    tk_cmd r = {0};
    mt_coh_arg ra = {.buf = b, .size = N, .access = MT_COH_READ};
    runq(g1, &r, &ra, 1, &info);
    MT_CHECK_UINT_EQ(r.seen[0], tk_hash(ref, N));
    MT_CHECK_UINT_EQ(info.bytes_in, 1u << 20);
    MT_CHECK_UINT_EQ(info.bytes_relay, 1u << 20);
    MT_CHECK_OK(mt_coh_buffer_free(cl, b));
    mt_coh_client_destroy(cl); /* releases (unpins) before the memory goes */
    MT_CHECK_OK(mt_coh_client_create(c, &cl));
    for (uint32_t d = 1; d <= mt_coh_device_count(c); d++)
        MT_CHECK_OK(mt_coh_queue_create(cl, d, &q[d]));
    munmap(mem, N);
    free(ref);
    puts("paths: ok");
}

/* Driver entry points the test calls itself (the application's side). */
static void *drv_sym(const char *name)
{
    static void *h;
    if (!h)
        h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    return h ? dlsym(h, name) : NULL;
}
#define DRV_FN(fn, name)                                                                       \
    do {                                                                                       \
        void *f_ = drv_sym(name);                                                              \
        MT_CHECK(f_ != NULL);                                                                  \
        memcpy(&(fn), &f_, sizeof f_);                                                         \
    } while (0)

/* The application's current CUDA context on the enqueuing thread, which
 * the planner also submits from (MT_COH_CAP_SUBMIT_ANY_THREAD): it must
 * find it as it left it. */
static int (*ctx_get)(void **);
static int (*ctx_set)(void *);
static void *app_context(void)
{
    void *cur = (void *)1;
    MT_CHECK_INT_EQ(ctx_get(&cur), 0);
    return cur;
}

static void test_tracked(void)
{
    enum { N = 64u << 20 };
    MT_CHECK_INT_EQ(ctx_set(NULL), 0); /* none, as a thread that never used CUDA */
    mt_coh_buffer_opts o = {.flags = MT_COH_BUF_TRACK_HOST};
    mt_coh_buf b;
    MT_CHECK_OK(mt_coh_buffer_create(cl, N, &o, &b));
    mt_coh_buffer_info bi;
    MT_CHECK_OK(mt_coh_buffer_info_get(cl, b, &bi));
    uint8_t *mem = bi.host, *ref = calloc(1, N);
    for (size_t i = 0; i < N; i += 64)
        mem[i] = ref[i] = (uint8_t)(i >> 6);
    MT_CHECK_UINT_EQ(read_all(g1, b, N, ref), N);
    MT_CHECK_UINT_EQ(read_all(g1, b, N, ref), 0); /* pinning it was not a host write */
    uint64_t rng = 99, dirty = 0;
    for (int round = 0; round < 3; round++) {
        uint8_t *seen = calloc(1, N / 4096);
        for (size_t i = 0; i < N / 4096 / 10; i++) {
            size_t pg = mt_test_below(&rng, N / 4096), at = pg * 4096 + mt_test_below(&rng, 4096);
            mem[at] = ref[at] = (uint8_t)mt_test_rand(&rng);
            dirty += !seen[pg];
            seen[pg] = 1;
        }
        free(seen);
        MT_CHECK_UINT_EQ(read_all(g1, b, N, ref), dirty * 4096);
        MT_CHECK(app_context() == NULL);
        dirty = 0;
    }
    MT_CHECK_OK(mt_coh_buffer_free(cl, b));
    free(ref);
    puts("tracked: ok");
}

static void test_fine_svm(void)
{
    uint8_t *p;
    MT_CHECK_OK(mt_coh_svm_alloc(cl, 1u << 20, MT_COH_SVM_FINE, (void **)&p));
    for (int i = 0; i < (1 << 20); i++)
        p[i] = (uint8_t)(i * 7);
    uint8_t *ref = malloc(1u << 20);
    memcpy(ref, p, 1u << 20);
    tk_cmd k = {.pattern = {0, 0x1020304050607080ull}};
    mt_coh_arg a[2] = {{.svm = p, .size = 4096, .access = MT_COH_READ},
                       {.svm = p, .offset = 8192, .size = 8192, .access = MT_COH_WRITE}};
    MT_CHECK_UINT_EQ(runq(g1, &k, a, 2, NULL), 0); /* in place */
    MT_CHECK_UINT_EQ(k.seen[0], tk_hash(ref, 4096));
    tk_fill(ref + 8192, 8192, 0x1020304050607080ull);
    MT_CHECK_MEM_EQ(p, ref, 1u << 20);
    MT_CHECK_OK(mt_coh_svm_free(cl, p));
    free(ref);
    puts("fine svm: ok");
}

int main(void)
{
    MT_CHECK_OK(mt_coh_create(NULL, &c));
    MT_CHECK_OK(mt_coh_add_host_device(c, 128u << 20, &host));
    mt_sim_opts so = {.mem_size = 64u << 20};
    MT_CHECK_OK(mt_coh_add_sim_device(c, &so, &sim));
    uint32_t first, n;
    mt_coh_cuda_opts co = {.repeat = 2, .max_devices = 1, .mem_limit = 1u << 30};
    MT_CHECK_OK(mt_coh_add_cuda_devices(c, &co, &first, &n));
    if (n == 0 || !tk_cuda_load()) {
        puts("no CUDA driver or GPU: skipped");
        mt_coh_destroy(c);
        return 77;
    }
    g1 = first;
    g2 = first + 1;
    DRV_FN(ctx_get, "cuCtxGetCurrent");
    DRV_FN(ctx_set, "cuCtxSetCurrent");
    for (uint32_t d = first; d < first + n; d++) {
        mt_coh_device_info di;
        MT_CHECK_OK(mt_coh_device_info_get(c, d, &di));
        printf("device %u: %s (%s)\n", d, di.name, di.backend);
        MT_CHECK(strstr(di.name, "no copy kernel") == NULL);
    }
    MT_CHECK_OK(mt_coh_client_create(c, &cl));
    for (uint32_t d = 1; d <= mt_coh_device_count(c); d++)
        MT_CHECK_OK(mt_coh_queue_create(cl, d, &q[d]));
    test_paths();
    test_tracked();
    test_fine_svm();
    mt_coh_client_destroy(cl);
    /* Shutting down gives the thread its context back too: here the GPU's
     * primary context, which the backend also uses (it used to leave none
     * current). */
    void *prim = NULL;
    int (*dev_get)(int *, int), (*prim_retain)(void **, int), (*prim_release)(int);
    DRV_FN(dev_get, "cuDeviceGet");
    DRV_FN(prim_retain, "cuDevicePrimaryCtxRetain");
    DRV_FN(prim_release, "cuDevicePrimaryCtxRelease_v2");
    int dev0 = -1;
    MT_CHECK_INT_EQ(dev_get(&dev0, 0), 0);
    MT_CHECK_INT_EQ(prim_retain(&prim, dev0), 0);
    MT_CHECK_INT_EQ(ctx_set(prim), 0);
    mt_coh_destroy(c);
    MT_CHECK(app_context() == prim);
    MT_CHECK_INT_EQ(ctx_set(NULL), 0);
    MT_CHECK_INT_EQ(prim_release(dev0), 0);
    /* The mock driver counts the registrations it refused: the second
     * device on the GPU uses the first one's instead of asking again (an
     * API error compute-sanitizer would report; the GPU run checks there). */
    void *rs = drv_sym("mock_cuda_register_refusals");
    if (rs) {
        int (*refusals)(void);
        memcpy(&refusals, &rs, sizeof rs);
        MT_CHECK_INT_EQ(refusals(), 0);
    }
    puts("no refused registration, context kept: ok");
    return 0;
}
