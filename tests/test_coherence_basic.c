/* coherence, scripted: migrations between host, simulated and host-memory
 * devices with exact byte counts, range granularity (4 KiB written of 1 MiB
 * moves 4 KiB), sub-buffers, relays through host memory, maps, the
 * released callback after deferred release, a buffer freed while mapped,
 * queue order. */
#include <errno.h>
#include <stdatomic.h>
#include <unistd.h>

#include "coh_util.h"
#include "memtrack/coherence.h"
#include "mt_test.h"

typedef struct env {
    mt_coh *c;
    mt_coh_client *cl;
    uint32_t host1, host2, sim1, sim2;
    mt_coh_queue *q[5];
} env;

static void env_init(env *e, uint64_t gran)
{
    mt_coh_opts o = {.granularity = gran};
    MT_CHECK_OK(mt_coh_create(&o, &e->c));
    MT_CHECK_OK(mt_coh_add_host_device(e->c, 8u << 20, &e->host1));
    MT_CHECK_OK(mt_coh_add_host_device(e->c, 8u << 20, &e->host2));
    mt_sim_opts so = {.mem_size = 8u << 20};
    MT_CHECK_OK(mt_coh_add_sim_device(e->c, &so, &e->sim1));
    so.base = MT_SIM_DEFAULT_BASE * 2;
    MT_CHECK_OK(mt_coh_add_sim_device(e->c, &so, &e->sim2));
    MT_CHECK_UINT_EQ(mt_coh_device_count(e->c), 4);
    MT_CHECK_OK(mt_coh_client_create(e->c, &e->cl));
    for (uint32_t d = 1; d <= 4; d++)
        MT_CHECK_OK(mt_coh_queue_create(e->cl, d, &e->q[d]));
}

/* Runs tk on queue q over one argument and waits; returns bytes moved in. */
static uint64_t run1(env *e, uint32_t dev, mt_coh_buf b, uint64_t off, uint64_t size,
                     uint32_t access, uint64_t pattern, uint64_t *seen)
{
    tk_cmd k = {.nargs = 1, .access = {access}, .pattern = {pattern}};
    mt_coh_arg a = {.buf = b, .offset = off, .size = size, .access = access};
    mt_coh_command cmd = {.fn = tk_run, .user = &k, .args = &a, .nargs = 1};
    mt_coh_event *ev;
    MT_CHECK_OK(mt_coh_enqueue(e->q[dev], &cmd, &ev));
    MT_CHECK_OK(mt_coh_event_wait(ev, -1));
    mt_coh_event_info info;
    MT_CHECK_OK(mt_coh_event_info_get(ev, &info));
    mt_coh_event_release(ev);
    if (seen)
        *seen = k.seen[0];
    return info.bytes_in;
}

/* One argument on queue q, waited for; returns bytes moved in. */
static uint64_t run1_on(mt_coh_queue *q, mt_coh_buf b, uint64_t off, uint64_t size, uint32_t access,
                        uint64_t pattern)
{
    tk_cmd k = {.nargs = 1, .access = {access}, .pattern = {pattern}};
    mt_coh_arg a = {.buf = b, .offset = off, .size = size, .access = access};
    mt_coh_command cmd = {.fn = tk_run, .user = &k, .args = &a, .nargs = 1};
    mt_coh_event *ev;
    MT_CHECK_OK(mt_coh_enqueue(q, &cmd, &ev));
    MT_CHECK_OK(mt_coh_event_wait(ev, -1));
    mt_coh_event_info info;
    MT_CHECK_OK(mt_coh_event_info_get(ev, &info));
    mt_coh_event_release(ev);
    return info.bytes_in;
}

static void check_map(env *e, mt_coh_buf b, uint64_t off, uint64_t size, const uint8_t *want)
{
    mt_coh_arg a = {.buf = b, .offset = off, .size = size, .access = MT_COH_READ};
    void *p;
    mt_coh_event *ev;
    MT_CHECK_OK(mt_coh_map(e->q[1], &a, NULL, 0, &p, &ev));
    MT_CHECK_OK(mt_coh_event_wait(ev, -1));
    MT_CHECK_MEM_EQ(p, want, size);
    mt_coh_event_release(ev);
    MT_CHECK_OK(mt_coh_unmap(e->q[1], p, NULL));
}

static void test_migrations(void)
{
    env e;
    env_init(&e, 4096);
    enum { N = 1u << 20 };
    uint8_t *host = malloc(N), *ref = malloc(N);
    for (size_t i = 0; i < N; i++)
        host[i] = ref[i] = (uint8_t)(i * 7 + 3);
    mt_coh_buffer_opts bo = {.flags = MT_COH_BUF_USE_HOST_PTR, .host_ptr = host};
    mt_coh_buf b;
    MT_CHECK_OK(mt_coh_buffer_create(e.cl, N, &bo, &b));

    /* Every device reads the host content: one full copy each. */
    uint64_t seen;
    for (uint32_t d = 1; d <= 4; d++) {
        MT_CHECK_UINT_EQ(run1(&e, d, b, 0, N, MT_COH_READ, 0, &seen), N);
        MT_CHECK_UINT_EQ(seen, tk_hash(ref, N));
    }
    /* Nobody fetches again. */
    for (uint32_t d = 1; d <= 4; d++)
        MT_CHECK_UINT_EQ(run1(&e, d, b, 0, N, MT_COH_READ, 0, NULL), 0);

    /* 4 KiB written on the simulated device: every other device fetches 4 KiB. */
    MT_CHECK_UINT_EQ(run1(&e, e.sim1, b, 8192, 4096, MT_COH_WRITE, 0x1122334455667788ull, NULL), 0);
    tk_fill(ref + 8192, 4096, 0x1122334455667788ull);
    mt_coh_stats st0, st1;
    MT_CHECK_OK(mt_coh_stats_get(e.c, &st0));
    MT_CHECK_UINT_EQ(run1(&e, e.host1, b, 0, N, MT_COH_READ, 0, &seen), 4096);
    MT_CHECK_UINT_EQ(seen, tk_hash(ref, N));
    /* sim2 has no direct path from sim1 but host1 is a host-memory device:
     * one hop from there, no relay. */
    MT_CHECK_UINT_EQ(run1(&e, e.sim2, b, 0, N, MT_COH_READ, 0, &seen), 4096);
    MT_CHECK_UINT_EQ(seen, tk_hash(ref, N));
    MT_CHECK_OK(mt_coh_stats_get(e.c, &st1));
    MT_CHECK_UINT_EQ(st1.bytes_relay - st0.bytes_relay, 0);

    /* A write on sim2, read on sim1: the only copy is on a simulated device,
     * sim1 cannot reach it: relay through host memory (host becomes valid). */
    MT_CHECK_UINT_EQ(run1(&e, e.sim2, b, 65536, 8192, MT_COH_RW, 0x0101020203030404ull, &seen), 0);
    MT_CHECK_UINT_EQ(seen, tk_hash(ref + 65536, 8192));
    tk_fill(ref + 65536, 8192, 0x0101020203030404ull);
    MT_CHECK_OK(mt_coh_stats_get(e.c, &st0));
    MT_CHECK_UINT_EQ(run1(&e, e.sim1, b, 65536, 8192, MT_COH_READ, 0, &seen), 8192);
    MT_CHECK_UINT_EQ(seen, tk_hash(ref + 65536, 8192));
    MT_CHECK_OK(mt_coh_stats_get(e.c, &st1));
    MT_CHECK_UINT_EQ(st1.bytes_relay - st0.bytes_relay, 8192);
    /* The relay left the host copy valid: the USE_HOST_PTR memory has it. */
    MT_CHECK_MEM_EQ(host + 65536, ref + 65536, 8192);
    mt_coh_buffer_info bi;
    MT_CHECK_OK(mt_coh_buffer_info_get(e.cl, b, &bi));
    MT_CHECK(bi.any_mask & 1);
    check_map(&e, b, 0, N, ref);
    MT_CHECK_MEM_EQ(host, ref, N); /* the map downloaded into the host pointer */

    /* Unaligned write-only range: the granule's other bytes come first. */
    MT_CHECK_UINT_EQ(run1(&e, e.host2, b, 100, 50, MT_COH_WRITE, 0xabcdefull, NULL), 0);
    tk_fill(ref + 100, 50, 0xabcdefull);
    MT_CHECK_UINT_EQ(run1(&e, e.sim1, b, 0, 4096, MT_COH_READ, 0, &seen), 4096);
    MT_CHECK_UINT_EQ(seen, tk_hash(ref, 4096));
    check_map(&e, b, 0, N, ref);

    MT_CHECK_OK(mt_coh_buffer_free(e.cl, b));
    MT_CHECK_ERR(mt_coh_buffer_free(e.cl, b), MT_ENOBUF);
    mt_coh_client_destroy(e.cl);
    mt_coh_destroy(e.c);
    free(host);
    free(ref);
    puts("migrations: ok");
}

static void test_subbuffers(void)
{
    env e;
    env_init(&e, 256);
    enum { N = 65536 };
    uint8_t ref[N];
    memset(ref, 0, N);
    mt_coh_buf b, s1, s2, s3;
    MT_CHECK_OK(mt_coh_buffer_create(e.cl, N, NULL, &b));
    MT_CHECK_OK(mt_coh_subbuffer_create(e.cl, b, 4096, 8192, 0, &s1));
    MT_CHECK_OK(mt_coh_subbuffer_create(e.cl, s1, 1024, 1024, MT_COH_BUF_READ_ONLY, &s2));
    MT_CHECK_ERR(mt_coh_subbuffer_create(e.cl, s1, 8000, 1024, 0, &s3), -ERANGE);
    MT_CHECK_ERR(mt_coh_subbuffer_create(e.cl, s2, 0, 16, MT_COH_BUF_WRITE_ONLY, &s3), -EACCES);
    /* Write through the sub-buffer on sim1, read through the nested one on host2. */
    run1(&e, e.sim1, s1, 0, 8192, MT_COH_WRITE, 0x5a5a5a5a01020304ull, NULL);
    tk_fill(ref + 4096, 8192, 0x5a5a5a5a01020304ull);
    uint64_t seen;
    MT_CHECK_UINT_EQ(run1(&e, e.host2, s2, 0, 1024, MT_COH_READ, 0, &seen), 1024);
    MT_CHECK_UINT_EQ(seen, tk_hash(ref + 4096 + 1024, 1024));
    /* Read-only sub-buffer refuses writes before anything runs. */
    tk_cmd k = {.nargs = 1, .access = {MT_COH_WRITE}};
    mt_coh_arg a = {.buf = s2, .size = 16, .access = MT_COH_WRITE};
    mt_coh_command cmd = {.fn = tk_run, .user = &k, .args = &a, .nargs = 1};
    MT_CHECK_ERR(mt_coh_enqueue(e.q[1], &cmd, NULL), -EACCES);
    /* The parent freed: sub-buffers keep the content alive. */
    MT_CHECK_OK(mt_coh_buffer_free(e.cl, b));
    check_map(&e, s1, 0, 8192, ref + 4096);
    MT_CHECK_OK(mt_coh_buffer_free(e.cl, s1));
    MT_CHECK_OK(mt_coh_buffer_free(e.cl, s2));
    mt_coh_client_destroy(e.cl);
    mt_coh_destroy(e.c);
    puts("subbuffers: ok");
}

static _Atomic int released;
static void on_released(void *u)
{
    (void)u;
    atomic_fetch_add(&released, 1);
}

static void test_deferred_release(void)
{
    env e;
    env_init(&e, 4096);
    mt_sim *sim = mt_coh_device_sim(e.c, e.sim1);
    MT_CHECK(sim);
    MT_CHECK(mt_coh_device_sim(e.c, e.host1) == NULL);
    uint8_t *host = calloc(1, 65536);
    mt_coh_buffer_opts bo = {.flags = MT_COH_BUF_USE_HOST_PTR, .host_ptr = host,
                             .released = on_released};
    mt_coh_buf b;
    MT_CHECK_OK(mt_coh_buffer_create(e.cl, 65536, &bo, &b));
    /* Hold the device: its next command stalls (the mt_sim counts commands
     * itself: the stall point is a few commands ahead). */
    mt_sim_stats ss;
    mt_sim_stats_get(sim, &ss);
    /* The stall takes effect at attach: set it through a detach/attach is
     * not possible while the context owns the stream, so stall via a
     * command that never completes: a kernel that waits on a flag. */
    (void)ss;
    tk_cmd k = {.nargs = 1, .access = {MT_COH_RW}, .pattern = {7}};
    mt_coh_arg a = {.buf = b, .size = 65536, .access = MT_COH_RW};
    mt_coh_command cmd = {.fn = tk_run, .user = &k, .args = &a, .nargs = 1};
    mt_coh_event *ev;
    MT_CHECK_OK(mt_coh_enqueue(e.q[e.sim1], &cmd, &ev));
    MT_CHECK_OK(mt_coh_buffer_free(e.cl, b));
    MT_CHECK_OK(mt_coh_event_wait(ev, -1));
    mt_coh_event_release(ev);
    /* Completed: the instance and host memory were released. */
    for (int i = 0; i < 1000 && !atomic_load(&released); i++)
        usleep(1000);
    MT_CHECK_INT_EQ(atomic_load(&released), 1);
    mt_coh_device_info di;
    MT_CHECK_OK(mt_coh_device_info_get(e.c, e.sim1, &di));
    MT_CHECK_UINT_EQ(di.mem_used, 0);
    MT_CHECK_UINT_EQ(di.instances, 0);
    mt_coh_client_destroy(e.cl);
    mt_coh_destroy(e.c);
    free(host);
    puts("deferred release: ok");
}

/* A buffer freed while the host has it mapped: the handle is invalid at
 * once, the map stays usable until its unmap, which succeeds, and only then
 * is the memory released (before, the free dropped the map: the host's
 * writes through its pointer hit freed memory and the unmap said -ENOENT).
 * The same for a fine-grained SVM allocation and a client closed while
 * mapped (its maps end with it). */
static void test_free_mapped(void)
{
    env e;
    env_init(&e, 4096);
    atomic_store(&released, 0);
    enum { N = 1 << 20 };
    uint8_t *host = calloc(1, N);
    mt_coh_buffer_opts bo = {.flags = MT_COH_BUF_USE_HOST_PTR, .host_ptr = host, .released = on_released};
    mt_coh_buf b, own;
    MT_CHECK_OK(mt_coh_buffer_create(e.cl, N, &bo, &b));
    MT_CHECK_OK(mt_coh_buffer_create(e.cl, N, NULL, &own));
    mt_coh_queue *q = e.q[e.host1];
    void *p, *po;
    mt_coh_event *ev;
    MT_CHECK_OK(mt_coh_map(q, &(mt_coh_arg){.buf = b, .offset = 4096, .size = 8192, .access = MT_COH_RW},
                           NULL, 0, &p, &ev));
    MT_CHECK_OK(mt_coh_event_wait(ev, -1));
    mt_coh_event_release(ev);
    MT_CHECK_OK(mt_coh_map(q, &(mt_coh_arg){.buf = own, .size = N, .access = MT_COH_WRITE}, NULL, 0, &po,
                           &ev));
    MT_CHECK_OK(mt_coh_event_wait(ev, -1));
    mt_coh_event_release(ev);
    MT_CHECK_OK(mt_coh_buffer_free(e.cl, b));
    MT_CHECK_OK(mt_coh_buffer_free(e.cl, own));
    MT_CHECK_ERR(mt_coh_buffer_info_get(e.cl, b, &(mt_coh_buffer_info){0}), MT_ENOBUF);
    memset(p, 0x5a, 8192);   /* still the buffer's memory: host + 4096 */
    memset(po, 0xa5, N);     /* memtrack's own host memory: not unmapped yet */
    usleep(20000);
    MT_CHECK_INT_EQ(atomic_load(&released), 0); /* the map still uses host_ptr */
    MT_CHECK_OK(mt_coh_unmap(q, p, NULL));
    MT_CHECK_OK(mt_coh_unmap(q, po, NULL));
    MT_CHECK_ERR(mt_coh_unmap(q, p, NULL), -ENOENT);
    for (int i = 0; i < 1000 && !atomic_load(&released); i++)
        usleep(1000);
    MT_CHECK_INT_EQ(atomic_load(&released), 1);
    /* Fine-grained SVM freed while mapped. */
    void *fine, *pf;
    MT_CHECK_OK(mt_coh_svm_alloc(e.cl, N, MT_COH_SVM_FINE, &fine));
    MT_CHECK_OK(mt_coh_map(q, &(mt_coh_arg){.svm = fine, .size = N, .access = MT_COH_RW}, NULL, 0, &pf,
                           &ev));
    MT_CHECK_OK(mt_coh_event_wait(ev, -1));
    mt_coh_event_release(ev);
    MT_CHECK_OK(mt_coh_svm_free(e.cl, fine));
    memset(pf, 1, N);
    MT_CHECK_OK(mt_coh_unmap(q, pf, NULL));
    /* A client closed with a map open: released with it. */
    mt_coh_buf last;
    void *pl;
    MT_CHECK_OK(mt_coh_buffer_create(e.cl, N, NULL, &last));
    MT_CHECK_OK(mt_coh_map(q, &(mt_coh_arg){.buf = last, .size = N, .access = MT_COH_READ}, NULL, 0, &pl,
                           &ev));
    MT_CHECK_OK(mt_coh_event_wait(ev, -1));
    mt_coh_event_release(ev);
    mt_coh_client_destroy(e.cl);
    mt_coh_device_info di;
    MT_CHECK_OK(mt_coh_device_info_get(e.c, e.host1, &di));
    MT_CHECK_UINT_EQ(di.instances, 0);
    mt_coh_destroy(e.c);
    free(host);
    puts("free while mapped: ok");
}

static void test_queue_order(void)
{
    env e;
    env_init(&e, 4096);
    mt_coh_buf b;
    MT_CHECK_OK(mt_coh_buffer_create(e.cl, 4096, NULL, &b));
    /* 50 read-modify-writes alternating devices, each on its own queue but
     * chained by wait events: the last one sees the 49 before it. */
    mt_coh_event *prev = NULL;
    tk_cmd k[50];
    uint8_t ref[4096];
    memset(ref, 0, sizeof ref);
    uint64_t want[50];
    for (int i = 0; i < 50; i++) {
        uint32_t d = 1 + (uint32_t)i % 4;
        k[i] = (tk_cmd){.nargs = 1, .access = {MT_COH_RW},
                        .pattern = {0x0100000000000001ull * (uint64_t)(i + 1)}};
        want[i] = tk_hash(ref, 4096);
        tk_fill(ref, 4096, k[i].pattern[0]);
        mt_coh_arg a = {.buf = b, .size = 4096, .access = MT_COH_RW};
        mt_coh_command cmd = {.fn = tk_run, .user = &k[i], .args = &a, .nargs = 1,
                              .wait = prev ? &prev : NULL, .nwait = prev ? 1 : 0};
        mt_coh_event *ev;
        MT_CHECK_OK(mt_coh_enqueue(e.q[d], &cmd, &ev));
        mt_coh_event_release(prev);
        prev = ev;
    }
    MT_CHECK_OK(mt_coh_event_wait(prev, -1));
    mt_coh_event_release(prev);
    for (int i = 0; i < 50; i++)
        MT_CHECK_UINT_EQ(k[i].seen[0], want[i]);
    check_map(&e, b, 0, 4096, ref);
    mt_coh_client_destroy(e.cl);
    mt_coh_destroy(e.c);
    puts("queue order: ok");
}

/* One fetch whose stale runs come from more sources than a fetch collects
 * at once (8): the ninth makes it issue what it has in the middle of its
 * walk. Those include relays through host memory (simulated devices have
 * no path to each other), which mark host memory valid over their runs; one
 * such run then equals its neighbour (valid on sim 1 and host memory) and
 * the two merge under the walk. The walk must not lose its place: before it
 * found it again by offset, it skipped the ninth source's run and the
 * reader saw stale bytes there. */
static void test_many_sources(void)
{
    enum { G = 4096, NSIM = 9, N = 16 * G };
    mt_coh_opts o = {.granularity = G};
    mt_coh *c;
    MT_CHECK_OK(mt_coh_create(&o, &c));
    uint32_t dev[NSIM + 1];
    mt_coh_queue *q[NSIM + 1];
    mt_coh_client *cl;
    MT_CHECK_OK(mt_coh_client_create(c, &cl));
    for (uint32_t i = 1; i <= NSIM; i++) {
        mt_sim_opts so = {.mem_size = 1u << 20, .base = MT_SIM_DEFAULT_BASE * (i + 1)};
        MT_CHECK_OK(mt_coh_add_sim_device(c, &so, &dev[i]));
        MT_CHECK_OK(mt_coh_queue_create(cl, dev[i], &q[i]));
    }
    uint8_t *host = malloc(N), *ref = malloc(N);
    for (size_t i = 0; i < N; i++)
        host[i] = ref[i] = (uint8_t)(i * 13 + 1);
    mt_coh_buffer_opts bo = {.flags = MT_COH_BUF_USE_HOST_PTR, .host_ptr = host};
    mt_coh_buf b;
    MT_CHECK_OK(mt_coh_buffer_create(cl, N, &bo, &b));
    env e = {.c = c, .cl = cl, .q = {NULL, q[1]}}; /* check_map maps through q[1] */
    /* sim 1 writes granules 0-1; host memory then reads granule 1 (valid
     * on sim 1 and host memory), granule 0 stays on sim 1 alone. */
    MT_CHECK_UINT_EQ(run1_on(q[1], b, 0, 2 * G, MT_COH_WRITE, 0x1111111111111111ull), 0);
    tk_fill(ref, 2 * G, 0x1111111111111111ull);
    check_map(&e, b, G, G, ref + G);
    /* sims 2-8 write granules 2-8, one each: with granule 0 (a relay from
     * sim 1) and granule 1 (from host memory), nine sources for sim 9. */
    for (uint32_t i = 2; i <= 8; i++) {
        uint64_t pat = 0x0101010101010101ull * i;
        MT_CHECK_UINT_EQ(run1_on(q[i], b, (uint64_t)i * G, G, MT_COH_WRITE, pat), 0);
        tk_fill(ref + (size_t)i * G, G, pat);
    }
    /* Granule 9, after the ninth source's: the run a lost place skips. */
    MT_CHECK_UINT_EQ(run1_on(q[2], b, 9 * G, G, MT_COH_WRITE, 0x0909090909090909ull), 0);
    tk_fill(ref + 9 * G, G, 0x0909090909090909ull);
    tk_cmd k = {.nargs = 1, .access = {MT_COH_READ}};
    mt_coh_arg a = {.buf = b, .offset = 0, .size = 10 * G, .access = MT_COH_READ};
    mt_coh_command cmd = {.fn = tk_run, .user = &k, .args = &a, .nargs = 1};
    mt_coh_event *ev;
    MT_CHECK_OK(mt_coh_enqueue(q[NSIM], &cmd, &ev));
    MT_CHECK_OK(mt_coh_event_wait(ev, -1));
    mt_coh_event_info info;
    MT_CHECK_OK(mt_coh_event_info_get(ev, &info));
    mt_coh_event_release(ev);
    MT_CHECK_UINT_EQ(info.bytes_in, 10 * G);
    MT_CHECK_UINT_EQ(k.seen[0], tk_hash(ref, 10 * G));
    MT_CHECK_OK(mt_coh_buffer_free(cl, b));
    mt_coh_client_destroy(cl);
    mt_coh_destroy(c);
    free(host);
    free(ref);
    puts("a fetch from nine sources, relays merging runs under its walk: ok");
}

int main(void)
{
    test_migrations();
    test_subbuffers();
    test_deferred_release();
    test_free_mapped();
    test_queue_order();
    test_many_sources();
    return 0;
}
