/* coherence: eviction under memory pressure.
 *  - A small device holding copies that are valid elsewhere evicts the least
 *    recently used one to make room, and content stays right.
 *  - Copies that are the only valid ones are never evicted: when nothing
 *    else can go, the enqueue fails with MT_EDEVMEM and changes nothing
 *    (no instance, no copy, validity as before, the kernel never runs).
 *  - Instances still in use by pending commands are not evicted.
 *  - Random traffic over more buffers than fit, checked by content. */
#include <errno.h>
#include <stdatomic.h>
#include <unistd.h>

#include "coh_util.h"
#include "memtrack/coherence.h"
#include "mt_test.h"

enum { SZ = 64 * 1024, NB = 8 };

typedef struct env {
    mt_coh *c;
    mt_coh_client *cl;
    uint32_t big, small;
    mt_coh_queue *qb, *qs;
    mt_coh_buf b[NB];
    uint8_t ref[NB][SZ];
} env;

static uint64_t use(env *e, mt_coh_queue *q, int i, uint32_t access, uint64_t pattern, int *err)
{
    tk_cmd k = {.nargs = 1, .access = {access}, .pattern = {pattern}};
    mt_coh_arg a = {.buf = e->b[i], .size = SZ, .access = access};
    mt_coh_command cmd = {.fn = tk_run, .user = &k, .args = &a, .nargs = 1};
    mt_coh_event *ev;
    int rc = mt_coh_enqueue(q, &cmd, &ev);
    if (err)
        *err = rc;
    if (rc) {
        MT_CHECK(err != NULL);
        MT_CHECK(!atomic_load(&k.ran));
        return 0;
    }
    MT_CHECK_OK(mt_coh_event_wait(ev, -1));
    mt_coh_event_release(ev);
    if (access & MT_COH_READ)
        MT_CHECK_UINT_EQ(k.seen[0], tk_hash(e->ref[i], SZ));
    if (access & MT_COH_WRITE)
        tk_fill(e->ref[i], SZ, pattern);
    return k.seen[0];
}

static int on_small(env *e, int i)
{
    mt_coh_buffer_info bi;
    MT_CHECK_OK(mt_coh_buffer_info_get(e->cl, e->b[i], &bi));
    return !!(bi.any_mask & (1ull << e->small));
}

static void setup(env *e, uint64_t small_mem)
{
    memset(e, 0, sizeof *e);
    MT_CHECK_OK(mt_coh_create(NULL, &e->c));
    MT_CHECK_OK(mt_coh_add_host_device(e->c, 16u << 20, &e->big));
    mt_sim_opts so = {.mem_size = small_mem};
    MT_CHECK_OK(mt_coh_add_sim_device(e->c, &so, &e->small));
    MT_CHECK_OK(mt_coh_client_create(e->c, &e->cl));
    MT_CHECK_OK(mt_coh_queue_create(e->cl, e->big, &e->qb));
    MT_CHECK_OK(mt_coh_queue_create(e->cl, e->small, &e->qs));
    for (int i = 0; i < NB; i++) {
        for (int j = 0; j < SZ; j++)
            e->ref[i][j] = (uint8_t)(i * 31 + j);
        mt_coh_buffer_opts o = {.flags = MT_COH_BUF_COPY_HOST_PTR, .host_ptr = e->ref[i]};
        MT_CHECK_OK(mt_coh_buffer_create(e->cl, SZ, &o, &e->b[i]));
    }
}

static void teardown(env *e)
{
    mt_coh_client_destroy(e->cl);
    mt_coh_destroy(e->c);
}

static void test_lru(void)
{
    env *e = malloc(sizeof *e);
    setup(e, 4 * SZ); /* room for four */
    for (int i = 0; i < 4; i++)
        use(e, e->qs, i, MT_COH_READ, 0, NULL);
    for (int i = 0; i < 4; i++)
        MT_CHECK(on_small(e, i));
    use(e, e->qs, 0, MT_COH_READ, 0, NULL); /* 0 is now the most recent */
    use(e, e->qs, 4, MT_COH_READ, 0, NULL); /* evicts 1, the least recent */
    MT_CHECK(on_small(e, 0) && !on_small(e, 1) && on_small(e, 2) && on_small(e, 4));
    mt_coh_device_info di;
    MT_CHECK_OK(mt_coh_device_info_get(e->c, e->small, &di));
    MT_CHECK_UINT_EQ(di.evictions, 1);
    MT_CHECK_UINT_EQ(di.instances, 4);
    /* Reading 1 again evicts 2 (then least recent) and fetches 1 in full. */
    use(e, e->qs, 1, MT_COH_READ, 0, NULL);
    MT_CHECK(!on_small(e, 2) && on_small(e, 1));
    teardown(e);
    free(e);
    puts("lru: ok");
}

static void test_only_copies(void)
{
    env *e = malloc(sizeof *e);
    setup(e, 4 * SZ);
    /* Three buffers written on the small device: their only copies. */
    for (int i = 0; i < 3; i++)
        use(e, e->qs, i, MT_COH_WRITE, 0x0101010101010101ull * (uint64_t)(i + 1), NULL);
    /* A command needing two more: the first would fit, the second cannot:
     * refused, and the first one's new instance is gone again. */
    mt_coh_stats st0, st1;
    MT_CHECK_OK(mt_coh_stats_get(e->c, &st0));
    mt_coh_buffer_info before, after;
    MT_CHECK_OK(mt_coh_buffer_info_get(e->cl, e->b[5], &before));
    tk_cmd k = {.nargs = 2, .access = {MT_COH_READ, MT_COH_READ}};
    mt_coh_arg two[2] = {{.buf = e->b[4], .size = SZ, .access = MT_COH_READ},
                         {.buf = e->b[5], .size = SZ, .access = MT_COH_READ}};
    mt_coh_command cmd = {.fn = tk_run, .user = &k, .args = two, .nargs = 2};
    MT_CHECK_ERR(mt_coh_enqueue(e->qs, &cmd, NULL), MT_EDEVMEM);
    MT_CHECK(!atomic_load(&k.ran));
    MT_CHECK_OK(mt_coh_stats_get(e->c, &st1));
    MT_CHECK_UINT_EQ(st1.migrations, st0.migrations);
    MT_CHECK_UINT_EQ(st1.evictions, st0.evictions);
    MT_CHECK_UINT_EQ(st1.rejected, st0.rejected + 1);
    MT_CHECK_OK(mt_coh_buffer_info_get(e->cl, e->b[5], &after));
    MT_CHECK_UINT_EQ(after.any_mask, before.any_mask);
    MT_CHECK_UINT_EQ(after.version, before.version);
    MT_CHECK(!on_small(e, 4) && !on_small(e, 5));
    mt_coh_device_info di;
    MT_CHECK_OK(mt_coh_device_info_get(e->c, e->small, &di));
    MT_CHECK_UINT_EQ(di.instances, 3);
    /* One at a time: 4 takes the free room, 5 evicts 4 (valid at the host). */
    use(e, e->qs, 4, MT_COH_READ, 0, NULL);
    use(e, e->qs, 5, MT_COH_READ, 0, NULL);
    MT_CHECK(!on_small(e, 4) && on_small(e, 5));
    /* Once buffer 2 is valid on the big device too, it may go as well. */
    use(e, e->qb, 2, MT_COH_READ, 0, NULL);
    use(e, e->qs, 6, MT_COH_READ, 0, NULL);
    MT_CHECK(on_small(e, 0) && on_small(e, 1) && on_small(e, 6));
    MT_CHECK(!on_small(e, 2) || !on_small(e, 5));
    for (int i = 0; i < 7; i++)
        use(e, e->qb, i, MT_COH_READ, 0, NULL); /* content everywhere right */
    teardown(e);
    free(e);
    puts("only copies: ok");
}

static void test_busy(void)
{
    env *e = malloc(sizeof *e);
    memset(e, 0, sizeof *e);
    MT_CHECK_OK(mt_coh_create(NULL, &e->c));
    MT_CHECK_OK(mt_coh_add_host_device(e->c, 16u << 20, &e->big));
    mt_sim_opts so = {.mem_size = 2 * SZ, .faults = {.stall_at = 1}};
    MT_CHECK_OK(mt_coh_add_sim_device(e->c, &so, &e->small));
    MT_CHECK_OK(mt_coh_client_create(e->c, &e->cl));
    MT_CHECK_OK(mt_coh_queue_create(e->cl, e->small, &e->qs));
    for (int i = 0; i < 3; i++)
        MT_CHECK_OK(mt_coh_buffer_create(e->cl, SZ, NULL, &e->b[i]));
    /* Two reads stall on the device: both instances are in use. */
    tk_cmd k[3];
    mt_coh_event *ev[3];
    for (int i = 0; i < 2; i++) {
        k[i] = (tk_cmd){.nargs = 1, .access = {MT_COH_READ}};
        mt_coh_arg a = {.buf = e->b[i], .size = SZ, .access = MT_COH_READ};
        mt_coh_command cmd = {.fn = tk_run, .user = &k[i], .args = &a, .nargs = 1};
        MT_CHECK_OK(mt_coh_enqueue(e->qs, &cmd, &ev[i]));
    }
    k[2] = (tk_cmd){.nargs = 1, .access = {MT_COH_READ}};
    mt_coh_arg a = {.buf = e->b[2], .size = SZ, .access = MT_COH_READ};
    mt_coh_command cmd = {.fn = tk_run, .user = &k[2], .args = &a, .nargs = 1};
    MT_CHECK_ERR(mt_coh_enqueue(e->qs, &cmd, &ev[2]), MT_EDEVMEM);
    mt_sim_unstall(mt_coh_device_sim(e->c, e->small));
    for (int i = 0; i < 2; i++) {
        MT_CHECK_OK(mt_coh_event_wait(ev[i], -1));
        mt_coh_event_release(ev[i]);
    }
    MT_CHECK_OK(mt_coh_enqueue(e->qs, &cmd, &ev[2])); /* idle now: one goes */
    MT_CHECK_OK(mt_coh_event_wait(ev[2], -1));
    mt_coh_event_release(ev[2]);
    teardown(e);
    free(e);
    puts("busy: ok");
}

static void test_random(uint64_t seed)
{
    env *e = malloc(sizeof *e);
    setup(e, 3 * SZ + SZ / 2);
    uint64_t rng = seed;
    int refused = 0;
    for (int op = 0; op < 600; op++) {
        int i = (int)mt_test_below(&rng, NB);
        int dev = (int)mt_test_below(&rng, 3); /* 2 of 3 on the small device */
        uint32_t acc = 1 + (uint32_t)mt_test_below(&rng, 3);
        int err;
        use(e, dev ? e->qs : e->qb, i, acc, mt_test_rand(&rng), &err);
        if (err) {
            /* Refused: nothing else could go. Make this buffer's neighbours
             * valid elsewhere by reading them on the big device, then retry. */
            MT_CHECK_ERR(err, MT_EDEVMEM);
            refused++;
            for (int j = 0; j < NB; j++)
                if (on_small(e, j))
                    use(e, e->qb, j, MT_COH_READ, 0, NULL);
            use(e, e->qs, i, acc, mt_test_rand(&rng), NULL);
        }
    }
    mt_coh_device_info di;
    MT_CHECK_OK(mt_coh_device_info_get(e->c, e->small, &di));
    printf("random: %llu evictions, %d refusals\n", (unsigned long long)di.evictions, refused);
    MT_CHECK(di.evictions > 0);
    for (int i = 0; i < NB; i++)
        use(e, e->qb, i, MT_COH_READ, 0, NULL);
    teardown(e);
    free(e);
}

int main(int argc, char **argv)
{
    uint64_t seed = mt_test_seed(argc, argv);
    test_lru();
    test_only_copies();
    test_busy();
    test_random(seed);
    puts("evict: ok");
    return 0;
}
