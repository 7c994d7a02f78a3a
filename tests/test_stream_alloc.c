/* alloc's fenced frees driven by a stream's timeline: an mt_pools set whose
 * completed() is mt_timeline_completed_cb on the stream's timeline.
 *  - deterministic: with the device stalled between a fence and the COPY
 *    that reads an upload buffer, the buffer's fenced free (at a later
 *    fence) stays pending and its memory is not handed out again; once the
 *    device passes the fence the free is carried out;
 *  - the other route: mt_stream_defer with a callback that frees;
 *  - stress: uploads through pool buffers freed fenced, a deep queue ahead
 *    of a slow device, device memory checked against a reference, every
 *    fenced free carried out, nothing leaked. */
#include <errno.h>

#include "memtrack/alloc.h"
#include "stream_util.h"

enum { CHUNK = 64 << 10 };

typedef struct rig {
    mt_sim *sim;
    mt_stream *s;
    mt_pools *set;
    mt_pool *pool;
    uint32_t region;
    uint64_t chunk; /* device address of the pool's region */
} rig;

static void rig_up(rig *r, mt_sim_faults f)
{
    mt_sim_opts so = {.mem_size = 1 << 20, .faults = f};
    MT_CHECK_OK(mt_sim_create(&so, &r->sim));
    mt_stream_opts o = {0};
    MT_CHECK_OK(mt_stream_create(&o, &r->s));
    mt_pools_opts po = {.completed = mt_timeline_completed_cb, .user = mt_stream_timeline(r->s)};
    MT_CHECK_OK(mt_pools_create(&po, &r->set));
    MT_CHECK_OK(mt_pool_attach(r->set, &r->pool));
    /* The pool suballocates a chunk of device memory, as a runtime does a heap. */
    MT_CHECK_OK(mt_sim_alloc(r->sim, CHUNK, 4096, &r->chunk));
    MT_CHECK_OK(mt_pool_add_region(r->pool, 0, CHUNK, NULL, &r->region));
    MT_CHECK_OK(mt_sim_attach(r->sim, r->s));
}

static void rig_down(rig *r)
{
    mt_sim_detach(r->sim);
    mt_pool_detach(r->pool);
    mt_pools_destroy(r->set);
    mt_stream_destroy(r->s);
    mt_sim_destroy(r->sim);
}

static void copy_cmd(mt_stream *s, uint64_t src, uint64_t dst, uint64_t len)
{
    MT_CHECK_OK(mt_stream_set_state(s, MT_SIM_REG_SRC, src));
    MT_CHECK_OK(mt_stream_set_state(s, MT_SIM_REG_DST, dst));
    MT_CHECK_OK(mt_stream_set_state(s, MT_SIM_REG_LEN, len));
    mt_cmd c = {.op = MT_SIM_COPY};
    MT_CHECK_OK(mt_stream_emit(s, &c, NULL));
}

static void fenced_free_waits_for_device(void)
{
    rig r;
    /* 1 STORE, 2 FENCE; the device stops before 3 (the upload's SRC). */
    rig_up(&r, (mt_sim_faults){.stall_at = 3});
    uint64_t dst, v1, v2;
    MT_CHECK_OK(mt_sim_alloc(r.sim, 256, 64, &dst));
    mt_cmd st = {.op = MT_SIM_STORE, .a = 5, .b = dst};
    MT_CHECK_OK(mt_stream_emit(r.s, &st, NULL));
    MT_CHECK_OK(mt_stream_fence(r.s, &v1));

    mt_alloc_block x, y, z;
    MT_CHECK_OK(mt_pool_allocate(r.pool, 0, 256, 64, MT_ALLOC_LINEAR, &x));
    unsigned char pattern[256];
    for (int i = 0; i < 256; i++)
        pattern[i] = (unsigned char)(i * 7 + 1);
    MT_CHECK_OK(mt_sim_write(r.sim, r.chunk + x.offset, pattern, 256));
    copy_cmd(r.s, r.chunk + x.offset, dst, 256);
    MT_CHECK_OK(mt_stream_fence(r.s, &v2));
    MT_CHECK_OK(mt_pool_free_fenced(r.pool, r.region, x.offset, v2));

    MT_CHECK_OK(mt_timeline_wait(mt_stream_timeline(r.s), v1, -1));
    MT_CHECK_INT_EQ(mt_pool_collect(r.pool), 0); /* v2 has not completed */
    mt_pool_stats ps;
    MT_CHECK_OK(mt_pool_get_stats(r.pool, 0, &ps));
    MT_CHECK_UINT_EQ(ps.fenced_pending, 1);
    MT_CHECK_UINT_EQ(ps.fenced_done, 0);
    MT_CHECK_UINT_EQ(ps.alloc.allocations, 1);
    /* X is still the device's: a new allocation must not get its memory
     * (if it did, this host write would reach the COPY's source). */
    MT_CHECK_OK(mt_pool_allocate(r.pool, 0, 256, 64, MT_ALLOC_LINEAR, &y));
    MT_CHECK(y.offset + 256 <= x.offset || x.offset + 256 <= y.offset);
    unsigned char junk[256];
    memset(junk, 0xEE, sizeof junk);
    MT_CHECK_OK(mt_sim_write(r.sim, r.chunk + y.offset, junk, 256));

    mt_sim_unstall(r.sim);
    MT_CHECK_OK(mt_timeline_wait(mt_stream_timeline(r.s), v2, -1));
    MT_CHECK_INT_EQ(mt_pool_collect(r.pool), 1);
    MT_CHECK_OK(mt_pool_get_stats(r.pool, 0, &ps));
    MT_CHECK_UINT_EQ(ps.fenced_pending, 0);
    MT_CHECK_UINT_EQ(ps.fenced_done, 1);
    MT_CHECK_UINT_EQ(ps.alloc.allocations, 1); /* only y */
    MT_CHECK_OK(mt_pool_allocate(r.pool, 0, 256, 64, MT_ALLOC_LINEAR, &z));
    unsigned char got[256];
    MT_CHECK_OK(mt_sim_read(r.sim, dst, got, 256));
    MT_CHECK_MEM_EQ(got, pattern, 256);
    MT_CHECK_OK(mt_pool_free(r.pool, r.region, y.offset));
    MT_CHECK_OK(mt_pool_free(r.pool, r.region, z.offset));
    rig_down(&r);
}

/* The other route: the stream's deferred work calls alloc's free. */
typedef struct pending_free {
    mt_pool *pool;
    uint32_t region;
    uint64_t offset;
    int done;
} pending_free;

static void free_now(void *ctx, uint64_t value, int status)
{
    pending_free *f = ctx;
    (void)value;
    MT_CHECK_INT_EQ(status, 0);
    MT_CHECK_OK(mt_pool_free(f->pool, f->region, f->offset)); /* the owner runs the sync */
    f->done++;
}

static void defer_route(void)
{
    rig r;
    rig_up(&r, (mt_sim_faults){0});
    uint64_t dst;
    MT_CHECK_OK(mt_sim_alloc(r.sim, 64, 64, &dst));
    mt_alloc_block x;
    MT_CHECK_OK(mt_pool_allocate(r.pool, 0, 64, 64, MT_ALLOC_LINEAR, &x));
    unsigned char pattern[64];
    memset(pattern, 0x3C, sizeof pattern);
    MT_CHECK_OK(mt_sim_write(r.sim, r.chunk + x.offset, pattern, 64));
    copy_cmd(r.s, r.chunk + x.offset, dst, 64);
    pending_free f = {r.pool, r.region, x.offset, 0};
    MT_CHECK_OK(mt_stream_defer(r.s, free_now, &f));
    MT_CHECK_OK(mt_stream_sync(r.s, -1));
    MT_CHECK_INT_EQ(f.done, 1);
    mt_pool_stats ps;
    MT_CHECK_OK(mt_pool_get_stats(r.pool, 0, &ps));
    MT_CHECK_UINT_EQ(ps.alloc.allocations, 0);
    unsigned char got[64];
    MT_CHECK_OK(mt_sim_read(r.sim, dst, got, 64));
    MT_CHECK_MEM_EQ(got, pattern, 64);
    rig_down(&r);
}

/* Stress: uploads of random sizes through pool buffers, each freed fenced
 * at the fence after its COPY, a deep queue ahead of a slow device. */
static void stress(uint64_t seed)
{
    enum { NDST = 8, DSTLEN = 2048, UPLOADS = 1500 };
    rig r;
    rig_up(&r, (mt_sim_faults){.delay_every = 16, .delay_ns = 2000});
    uint64_t rng = seed, dst[NDST];
    static unsigned char ref[NDST][DSTLEN];
    memset(ref, 0, sizeof ref);
    for (int i = 0; i < NDST; i++)
        MT_CHECK_OK(mt_sim_alloc(r.sim, DSTLEN, 64, &dst[i]));
    uint64_t fenced = 0;
    for (int u = 0; u < UPLOADS; u++) {
        uint64_t len = 8 + mt_test_below(&rng, DSTLEN - 8);
        int d = (int)mt_test_below(&rng, NDST);
        uint64_t off = mt_test_below(&rng, DSTLEN - len + 1);
        mt_alloc_block b;
        int rc;
        /* A full pool is back-pressure: wait for the device, reclaim, retry. */
        while ((rc = mt_pool_allocate(r.pool, 0, len, 8, MT_ALLOC_LINEAR, &b)) == -ENOSPC) {
            MT_CHECK_OK(mt_stream_sync(r.s, -1));
            mt_pool_collect(r.pool);
        }
        MT_CHECK_OK(rc);
        unsigned char buf[DSTLEN];
        for (uint64_t i = 0; i < len; i++)
            buf[i] = (unsigned char)mt_test_rand(&rng);
        MT_CHECK_OK(mt_sim_write(r.sim, r.chunk + b.offset, buf, len));
        memcpy(&ref[d][off], buf, len);
        copy_cmd(r.s, r.chunk + b.offset, dst[d] + off, len);
        /* Every upload ends with a fence here, so its free is exact. */
        uint64_t v;
        MT_CHECK_OK(mt_stream_fence(r.s, &v));
        MT_CHECK_OK(mt_pool_free_fenced(r.pool, r.region, b.offset, v));
        fenced++;
    }
    MT_CHECK_OK(mt_stream_sync(r.s, -1));
    mt_pool_collect(r.pool);
    mt_pool_stats ps;
    MT_CHECK_OK(mt_pool_get_stats(r.pool, 0, &ps));
    MT_CHECK_UINT_EQ(ps.fenced_done, fenced);
    MT_CHECK_UINT_EQ(ps.fenced_pending, 0);
    MT_CHECK_UINT_EQ(ps.alloc.allocations, 0);
    char msg[256];
    MT_CHECK_OK(mt_pool_check(r.pool, msg, sizeof msg));
    for (int i = 0; i < NDST; i++) {
        unsigned char got[DSTLEN];
        MT_CHECK_OK(mt_sim_read(r.sim, dst[i], got, DSTLEN));
        MT_CHECK_MEM_EQ(got, ref[i], DSTLEN);
    }
    rig_down(&r);
}

int main(int argc, char **argv)
{
    uint64_t seed = mt_test_seed(argc, argv);
    fenced_free_waits_for_device();
    defer_route();
    stress(seed);
    puts("stream alloc: ok");
    return 0;
}
