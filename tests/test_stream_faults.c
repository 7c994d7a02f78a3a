/* Fault injection through the simulated device:
 *  - loss at an exact command: what ran before it is in memory, what was
 *    posted is dropped, fences before it complete, later ones fail;
 *  - device loss releases every sleeping waiter (producer on a full ring,
 *    producer in sync, timeline waiters) with MT_EDEVLOST;
 *  - cancellation releases the producer (full ring, sync) with MT_ECANCELED,
 *    and the stream works on afterwards; timeouts;
 *  - deferred work does not run while the device is stalled before the
 *    commands it covers (deterministic, with a stall);
 *  - device faults (bad address, op, register) lose the device;
 *  - in-band reset with the state cache; recovery with a reset device.
 * Waiters are known to be asleep before the event (white box: the ring's and
 * timeline's waiter flags), so the release paths are what is tested. */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>

#include "stream/internal.h"
#include "stream_util.h"
#include "timeline/internal.h"

/* Polls `cond` every 100 us; fails after ~60 s instead of hanging. */
#define WAIT_FOR(cond)                                                              \
    do {                                                                            \
        int n_ = 0;                                                                 \
        while (!(cond)) {                                                           \
            MT_CHECK(++n_ < 600000);                                                \
            sleep_us(100);                                                          \
        }                                                                           \
    } while (0)

static int producer_asleep(mt_stream *s)
{
    return atomic_load(&s->ring.prod_waiting) != 0;
}

static unsigned timeline_sleepers(mt_stream *s)
{
    return atomic_load(&mt_stream_timeline(s)->waiters);
}

static void make(mt_sim **sim, mt_stream **s, const mt_stream_opts *so, mt_sim_faults f)
{
    mt_sim_opts o = {.mem_size = 1 << 20, .faults = f};
    MT_CHECK_OK(mt_sim_create(&o, sim));
    MT_CHECK_OK(mt_stream_create(so, s));
}

static int store(mt_stream *s, uint64_t addr, uint64_t v)
{
    mt_cmd c = {.op = MT_SIM_STORE, .a = v, .b = addr};
    return mt_stream_emit(s, &c, NULL);
}

static uint64_t read64(mt_sim *sim, uint64_t addr)
{
    unsigned char b[8];
    MT_CHECK_OK(mt_sim_read(sim, addr, b, 8));
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--)
        v = v << 8 | b[i];
    return v;
}

static void expect_lost(void *ctx, uint64_t value, int status)
{
    (void)value;
    MT_CHECK_ERR(status, MT_EDEVLOST);
    ++*(int *)ctx;
}

/* ---- loss at an exact command, then recovery ----------------------------- */
static void lose_at_exact(void)
{
    mt_sim *sim;
    mt_stream *s;
    /* Stalled at 1 until everything is written, so the loss point is exact. */
    make(&sim, &s, NULL, (mt_sim_faults){.stall_at = 1, .lose_at = 7});
    uint64_t x;
    MT_CHECK_OK(mt_sim_alloc(sim, 32, 8, &x));
    MT_CHECK_OK(mt_sim_attach(sim, s));
    uint64_t v1, v2;
    MT_CHECK_OK(store(s, x, 0xA));          /* 1 */
    MT_CHECK_OK(mt_stream_barrier(s));      /* 2: commits it */
    MT_CHECK_OK(mt_stream_fence(s, &v1));   /* 3 */
    MT_CHECK_OK(store(s, x + 8, 0xB));      /* 4 */
    MT_CHECK_OK(mt_stream_barrier(s));      /* 5 */
    MT_CHECK_OK(store(s, x + 16, 0xC));     /* 6: posted, never committed */
    MT_CHECK_OK(store(s, x + 24, 0xD));     /* 7: the device dies here */
    int lost_runs = 0;
    MT_CHECK_OK(mt_stream_defer(s, expect_lost, &lost_runs));
    MT_CHECK_OK(mt_stream_fence(s, &v2));   /* 8 */
    mt_sim_unstall(sim);
    MT_CHECK_ERR(mt_stream_sync(s, -1), MT_EDEVLOST);
    MT_CHECK_INT_EQ(lost_runs, 1); /* sync polled it, with the loss code */
    mt_timeline *tl = mt_stream_timeline(s);
    MT_CHECK_OK(mt_timeline_wait(tl, v1, -1));
    MT_CHECK_ERR(mt_timeline_wait(tl, v2, -1), MT_EDEVLOST);
    MT_CHECK_ERR(store(s, x, 1), MT_EDEVLOST);
    MT_CHECK_ERR(mt_stream_flush(s), MT_EDEVLOST);
    MT_CHECK_ERR(mt_stream_fence(s, NULL), MT_EDEVLOST);
    MT_CHECK_ERR(mt_stream_set_state(s, 0, 77), MT_EDEVLOST);
    MT_CHECK_ERR(mt_stream_status(s), MT_EDEVLOST);
    mt_sim_stats st;
    mt_sim_stats_get(sim, &st);
    MT_CHECK_UINT_EQ(st.executed, 6);
    MT_CHECK_ERR(st.lost, MT_EDEVLOST);
    mt_sim_detach(sim);
    MT_CHECK_UINT_EQ(read64(sim, x), 0xA);
    MT_CHECK_UINT_EQ(read64(sim, x + 8), 0xB);
    MT_CHECK_UINT_EQ(read64(sim, x + 16), 0); /* posted at the loss: dropped */
    MT_CHECK_UINT_EQ(read64(sim, x + 24), 0);
    mt_stream_destroy(s);

    /* Recovery: a lost device refuses a new stream until reset; memory stays. */
    MT_CHECK_OK(mt_stream_create(NULL, &s));
    MT_CHECK_ERR(mt_sim_attach(sim, s), MT_EDEVLOST);
    MT_CHECK_OK(mt_sim_reset(sim));
    MT_CHECK_OK(mt_sim_set_faults(sim, NULL));
    MT_CHECK_OK(mt_sim_attach(sim, s));
    MT_CHECK_ERR(mt_sim_attach(sim, s), -EBUSY);
    MT_CHECK_ERR(mt_sim_reset(sim), -EBUSY);
    MT_CHECK_ERR(mt_sim_set_faults(sim, NULL), -EBUSY);
    MT_CHECK_OK(store(s, x + 16, 0xCC));
    MT_CHECK_OK(mt_stream_sync(s, -1));
    MT_CHECK_UINT_EQ(read64(sim, x), 0xA);
    MT_CHECK_UINT_EQ(read64(sim, x + 16), 0xCC);
    mt_sim_detach(sim);
    mt_sim_detach(sim); /* idempotent */
    mt_stream_destroy(s);
    mt_sim_destroy(sim);
}

/* ---- loss releases every waiter ------------------------------------------- */
typedef struct waiter {
    pthread_t t;
    mt_stream *s;
    uint64_t value;
    int mode; /* 0: timeline wait, 1: producer filling the ring, 2: producer sync */
    int rc;
    atomic_int done;
} waiter;

static void *waiter_main(void *arg)
{
    waiter *w = arg;
    if (w->mode == 0) {
        w->rc = mt_timeline_wait(mt_stream_timeline(w->s), w->value, -1);
    } else if (w->mode == 1) {
        mt_cmd nop = {.op = MT_CMD_NOP};
        while ((w->rc = mt_stream_emit(w->s, &nop, NULL)) == 0)
            ;
    } else {
        w->rc = mt_stream_sync(w->s, -1);
    }
    atomic_store(&w->done, 1);
    return NULL;
}

static void spawn(waiter *w, mt_stream *s, int mode, uint64_t value)
{
    w->s = s;
    w->mode = mode;
    w->value = value;
    atomic_init(&w->done, 0);
    MT_CHECK_INT_EQ(pthread_create(&w->t, NULL, waiter_main, w), 0);
}

static void loss_releases_all(int producer_mode)
{
    enum { NT = 4 };
    mt_sim *sim;
    mt_stream *s;
    mt_stream_opts so = {.slots = 16};
    make(&sim, &s, &so, (mt_sim_faults){.stall_at = 1});
    MT_CHECK_OK(mt_sim_attach(sim, s));
    uint64_t v[3];
    for (int i = 0; i < 3; i++)
        MT_CHECK_OK(mt_stream_fence(s, &v[i]));
    waiter w[NT + 1];
    for (int i = 0; i < NT; i++)
        spawn(&w[i], s, 0, i < 3 ? v[i] : 1000);
    /* The producer role moves to this thread (pthread_create orders it). */
    spawn(&w[NT], s, producer_mode, 0);
    if (producer_mode == 1)
        WAIT_FOR(producer_asleep(s) && timeline_sleepers(s) == NT);
    else
        WAIT_FOR(timeline_sleepers(s) == NT + 1);
    mt_sim_lose(sim);
    for (int i = 0; i <= NT; i++) {
        pthread_join(w[i].t, NULL);
        MT_CHECK_ERR(w[i].rc, MT_EDEVLOST);
    }
    MT_CHECK_ERR(mt_stream_sync(s, -1), MT_EDEVLOST);
    MT_CHECK_ERR(mt_timeline_wait(mt_stream_timeline(s), v[0], 1000000000), MT_EDEVLOST);
    mt_sim_destroy(sim); /* detaches */
    mt_stream_destroy(s);
}

/* ---- cancellation and timeouts -------------------------------------------- */
static void cancel_and_timeout(void)
{
    mt_sim *sim;
    mt_stream *s;
    mt_stream_opts so = {.slots = 8};
    make(&sim, &s, &so, (mt_sim_faults){.stall_at = 1});
    uint64_t x;
    MT_CHECK_OK(mt_sim_alloc(sim, 8, 8, &x));
    MT_CHECK_OK(mt_sim_attach(sim, s));

    MT_CHECK_OK(store(s, x, 1));
    MT_CHECK_ERR(mt_stream_sync(s, 2000000), MT_ETIMEDOUT); /* stalled: 2 ms */

    waiter w;
    spawn(&w, s, 2, 0); /* sync, asleep on the timeline */
    WAIT_FOR(timeline_sleepers(s) == 1);
    mt_stream_cancel(s);
    pthread_join(w.t, NULL);
    MT_CHECK_ERR(w.rc, MT_ECANCELED);

    spawn(&w, s, 1, 0); /* fill the ring, asleep on it */
    WAIT_FOR(producer_asleep(s));
    mt_stream_cancel(s);
    pthread_join(w.t, NULL);
    MT_CHECK_ERR(w.rc, MT_ECANCELED);

    /* Not lost: once the device goes on, everything completes. */
    MT_CHECK_INT_EQ(mt_stream_status(s), 0);
    mt_sim_unstall(sim);
    MT_CHECK_OK(store(s, x, 42));
    MT_CHECK_OK(mt_stream_sync(s, -1));
    MT_CHECK_UINT_EQ(read64(sim, x), 42);
    mt_stream_stats st;
    mt_stream_stats_get(s, &st);
    MT_CHECK(st.producer_sleeps >= 1);
    mt_sim_destroy(sim);
    mt_stream_destroy(s);
}

/* ---- deferred work waits for the commands it covers ----------------------- */
typedef struct tmpbuf {
    mt_sim *sim;
    uint64_t addr;
    int freed;
} tmpbuf;

static void free_cb(void *ctx, uint64_t value, int status)
{
    tmpbuf *t = ctx;
    (void)value;
    MT_CHECK_INT_EQ(status, 0);
    MT_CHECK_OK(mt_sim_free(t->sim, t->addr));
    t->freed++;
}

static void defer_waits_for_device(void)
{
    mt_sim *sim;
    mt_stream *s;
    /* Commands: 1 STORE, 2 FENCE, then the upload: 3 SRC, 4 DST, 5 LEN, 6 COPY.
     * The device stops before 3: the fence completes, the COPY does not run. */
    make(&sim, &s, NULL, (mt_sim_faults){.stall_at = 3});
    uint64_t dst, tmp, v1;
    tmpbuf tb = {0};
    MT_CHECK_OK(mt_sim_alloc(sim, 64, 64, &dst));
    MT_CHECK_OK(mt_sim_attach(sim, s));
    MT_CHECK_OK(store(s, dst, 5));
    MT_CHECK_OK(mt_stream_fence(s, &v1));
    MT_CHECK_OK(mt_sim_alloc(sim, 64, 64, &tmp));
    unsigned char pattern[64];
    memset(pattern, 0x5A, sizeof pattern);
    MT_CHECK_OK(mt_sim_write(sim, tmp, pattern, 64));
    MT_CHECK_INT_EQ(mt_stream_set_state(s, MT_SIM_REG_SRC, tmp), 1);
    MT_CHECK_INT_EQ(mt_stream_set_state(s, MT_SIM_REG_DST, dst), 1);
    MT_CHECK_INT_EQ(mt_stream_set_state(s, MT_SIM_REG_LEN, 64), 1);
    mt_cmd copy = {.op = MT_SIM_COPY};
    MT_CHECK_OK(mt_stream_emit(s, &copy, NULL));
    tb = (tmpbuf){sim, tmp, 0};
    MT_CHECK_OK(mt_stream_defer(s, free_cb, &tb));
    MT_CHECK_OK(mt_stream_flush(s));
    MT_CHECK_OK(mt_timeline_wait(mt_stream_timeline(s), v1, -1));
    /* v1 completed, the COPY did not run: the free must not run. */
    MT_CHECK_INT_EQ(mt_timeline_poll(mt_stream_timeline(s)), 0);
    MT_CHECK_INT_EQ(tb.freed, 0);
    MT_CHECK_UINT_EQ(mt_timeline_pending(mt_stream_timeline(s)), 1);
    mt_sim_unstall(sim);
    MT_CHECK_OK(mt_stream_sync(s, -1));
    MT_CHECK_INT_EQ(tb.freed, 1);
    unsigned char got[64];
    MT_CHECK_OK(mt_sim_read(sim, dst, got, 64));
    MT_CHECK_MEM_EQ(got, pattern, 64);
    mt_sim_destroy(sim);
    mt_stream_destroy(s);
}

/* ---- device faults --------------------------------------------------------- */
static void device_fault(int kind)
{
    mt_sim *sim;
    mt_stream *s;
    make(&sim, &s, NULL, (mt_sim_faults){0});
    MT_CHECK_OK(mt_sim_attach(sim, s));
    mt_cmd c = {.op = MT_SIM_FILL};
    if (kind == 0) { /* fill past the end of device memory */
        MT_CHECK_OK(mt_stream_set_state(s, MT_SIM_REG_DST, mt_sim_base(sim) + mt_sim_size(sim) - 8));
        MT_CHECK_OK(mt_stream_set_state(s, MT_SIM_REG_LEN, 16));
    } else if (kind == 1) { /* an op the device does not have */
        c.op = MT_CMD_USER + 50;
    } else if (kind == 2) { /* a register it does not have */
        MT_CHECK_OK(mt_stream_set_state(s, MT_SIM_NREGS, 1));
    } else { /* an address below its range (0: state after reset) */
        MT_CHECK_OK(mt_stream_set_state(s, MT_SIM_REG_LEN, 8));
    }
    MT_CHECK_OK(mt_stream_emit(s, &c, NULL));
    MT_CHECK_ERR(mt_stream_sync(s, -1), MT_EDEVLOST);
    mt_sim_stats st;
    mt_sim_stats_get(sim, &st);
    MT_CHECK_ERR(st.lost, MT_EDEVLOST);
    mt_sim_destroy(sim);
    mt_stream_destroy(s);
}

/* ---- in-band reset and the state cache ------------------------------------ */
static void reset_with_cache(void)
{
    mt_sim *sim;
    mt_stream *s;
    make(&sim, &s, NULL, (mt_sim_faults){0});
    uint64_t a;
    MT_CHECK_OK(mt_sim_alloc(sim, 32, 8, &a));
    MT_CHECK_OK(mt_sim_attach(sim, s));
    mt_cmd fill = {.op = MT_SIM_FILL};
    MT_CHECK_INT_EQ(mt_stream_set_state(s, MT_SIM_REG_DST, a), 1);
    MT_CHECK_INT_EQ(mt_stream_set_state(s, MT_SIM_REG_LEN, 16), 1);
    MT_CHECK_INT_EQ(mt_stream_set_state(s, MT_SIM_REG_VALUE, 0x1111111111111111ull), 1);
    MT_CHECK_OK(mt_stream_emit(s, &fill, NULL));
    MT_CHECK_OK(mt_stream_reset(s)); /* the device's registers are 0 again */
    /* Same values: must be sent again, or the FILL would go to address 0
     * (a device fault) with length 0. */
    MT_CHECK_INT_EQ(mt_stream_set_state(s, MT_SIM_REG_DST, a + 16), 1);
    MT_CHECK_INT_EQ(mt_stream_set_state(s, MT_SIM_REG_LEN, 16), 1);
    MT_CHECK_INT_EQ(mt_stream_set_state(s, MT_SIM_REG_VALUE, 0x2222222222222222ull), 1);
    MT_CHECK_OK(mt_stream_emit(s, &fill, NULL));
    MT_CHECK_OK(mt_stream_sync(s, -1));
    MT_CHECK_UINT_EQ(read64(sim, a), 0x1111111111111111ull);
    MT_CHECK_UINT_EQ(read64(sim, a + 8), 0x1111111111111111ull);
    MT_CHECK_UINT_EQ(read64(sim, a + 16), 0x2222222222222222ull);
    MT_CHECK_UINT_EQ(read64(sim, a + 24), 0x2222222222222222ull);
    mt_sim_destroy(sim);
    mt_stream_destroy(s);
}

/* ---- host-side API edges ---------------------------------------------------- */
static void sim_api(void)
{
    mt_sim *sim;
    mt_sim_opts o = {.mem_size = 4096, .base = 0x5000};
    MT_CHECK_OK(mt_sim_create(&o, &sim));
    MT_CHECK_UINT_EQ(mt_sim_base(sim), 0x5000);
    MT_CHECK_UINT_EQ(mt_sim_size(sim), 4096);
    uint64_t a, b, c;
    unsigned char buf[16] = {0};
    MT_CHECK_ERR(mt_sim_read(sim, 0x4fff, buf, 1), -EFAULT);
    MT_CHECK_ERR(mt_sim_read(sim, 0x5000 + 4096 - 8, buf, 9), -EFAULT);
    MT_CHECK_OK(mt_sim_read(sim, 0x5000 + 4096 - 8, buf, 8));
    MT_CHECK_ERR(mt_sim_write(sim, UINT64_MAX - 2, buf, 8), -EFAULT);
    MT_CHECK_ERR(mt_sim_alloc(sim, 0, 8, &a), -EINVAL);
    MT_CHECK_ERR(mt_sim_alloc(sim, 8, 3, &a), -EINVAL);
    MT_CHECK_OK(mt_sim_alloc(sim, 1000, 0, &a));
    MT_CHECK_OK(mt_sim_alloc(sim, 1000, 1024, &b));
    MT_CHECK_UINT_EQ(a, 0x5000);
    MT_CHECK_UINT_EQ(b % 1024, 0);
    MT_CHECK_ERR(mt_sim_alloc(sim, 4096, 8, &c), -ENOSPC);
    MT_CHECK_OK(mt_sim_free(sim, a));
    MT_CHECK_ERR(mt_sim_free(sim, a), -ENOENT);
    MT_CHECK_ERR(mt_sim_free(sim, 1), -EINVAL);
    MT_CHECK_ERR(mt_sim_free(sim, 0x5000 + 8192), -EINVAL);
    MT_CHECK_OK(mt_sim_alloc(sim, 512, 8, &c));
    MT_CHECK_UINT_EQ(c, 0x5000); /* the freed space is reused */
    mt_sim_lose(sim); /* detached: just marks it */
    mt_stream *s;
    MT_CHECK_OK(mt_stream_create(NULL, &s));
    MT_CHECK_ERR(mt_sim_attach(sim, s), MT_EDEVLOST);
    mt_stream_destroy(s);
    mt_sim_destroy(sim);
    mt_sim_destroy(NULL);
    mt_sim_opts wrap = {.base = UINT64_MAX - 100};
    MT_CHECK_ERR(mt_sim_create(&wrap, &sim), -EINVAL);
}

int main(void)
{
    lose_at_exact();
    loss_releases_all(1);
    loss_releases_all(2);
    cancel_and_timeout();
    defer_waits_for_device();
    for (int k = 0; k < 4; k++)
        device_fault(k);
    reset_with_cache();
    sim_api();
    puts("stream faults: ok");
    return 0;
}
