/* Producer/consumer stress through the simulated device: random FILL, COPY
 * and STORE commands over a set of device buffers (with random state
 * reuse, fences, syncs, resets, explicit barriers and temporary buffers
 * freed by deferred callbacks), checked against a sequential reference:
 *  - final device memory == the reference memory, byte for byte;
 *  - elided state commands and barriers == the counts a simple independent
 *    model predicts, exactly;
 *  - every fence completes, deferred frees run once each, in order.
 * Then proof that the check has teeth: without declared hazards the
 * pipelined device really returns stale data. */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>

#include "stream_util.h"

enum { NRES = 12, TEMP_RES = NRES, MEM = 256 << 10 };

typedef struct run_cfg {
    const char *name;
    mt_stream_opts sopts;
    mt_sim_faults faults;
    int ops;
} run_cfg;

/* ---- the independent model ----------------------------------------------- */

typedef struct model {
    unsigned char *mem; /* reference device memory, by offset */
    uint64_t base;
    uint64_t reg[MT_SIM_NREGS];
    int reg_valid[MT_SIM_NREGS];
    int dirty[NRES + 1]; /* written since the last barrier */
    uint64_t elided, barriers;
} model;

static void model_state(model *m, uint32_t r, uint64_t v)
{
    if (m->reg_valid[r] && m->reg[r] == v)
        m->elided++;
    m->reg[r] = v;
    m->reg_valid[r] = 1;
}

static void model_access(model *m, const uint32_t *rd, int nr, const uint32_t *wr, int nw)
{
    int need = 0;
    for (int i = 0; i < nr; i++)
        need |= m->dirty[rd[i]];
    if (need) {
        m->barriers++;
        memset(m->dirty, 0, sizeof m->dirty);
    }
    for (int i = 0; i < nw; i++)
        m->dirty[wr[i]] = 1;
}

static void model_reset(model *m)
{
    memset(m->reg_valid, 0, sizeof m->reg_valid);
    memset(m->dirty, 0, sizeof m->dirty);
}

/* ---- the producer's helpers ---------------------------------------------- */

typedef struct ctx {
    mt_stream *s;
    mt_sim *sim;
    model m;
    uint64_t rng;
    uint64_t res_addr[NRES];
    size_t res_len[NRES];
    int frees_run, frees_queued;
    uint64_t last_free_value;
    _Atomic uint64_t fence_pub; /* latest fence value, for the waiter thread */
    atomic_int done;
} ctx;

static void set_state(ctx *c, uint32_t r, uint64_t v)
{
    model_state(&c->m, r, v);
    MT_CHECK_OK(mt_stream_set_state(c->s, r, v));
}

static void emit(ctx *c, uint32_t op, uint64_t a, uint64_t b, const uint32_t *rd, int nr,
                 const uint32_t *wr, int nw)
{
    mt_cmd cmd = {.op = op, .a = a, .b = b};
    mt_stream_access acc = {rd, (uint32_t)nr, wr, (uint32_t)nw};
    model_access(&c->m, rd, nr, wr, nw);
    MT_CHECK_OK(mt_stream_emit(c->s, &cmd, &acc));
}

/* A sub-range of a buffer, from a small set of choices so that state
 * values repeat (and get elided). */
static void pick_range(ctx *c, int r, uint64_t *addr, uint64_t *len)
{
    size_t n = c->res_len[r];
    uint64_t k = mt_test_below(&c->rng, 4);
    *len = k == 0 ? n : k == 1 ? n / 2 : k == 2 ? 64 : 8 + mt_test_below(&c->rng, n / 4);
    uint64_t maxoff = n - *len;
    uint64_t off = mt_test_below(&c->rng, 3) ? 0 : mt_test_below(&c->rng, maxoff + 1);
    *addr = c->res_addr[r] + off;
}

static void do_fill(ctx *c)
{
    uint32_t d = (uint32_t)mt_test_below(&c->rng, NRES);
    uint64_t addr, len, v = 0x0101010101010101ull * (1 + mt_test_below(&c->rng, 3));
    if (mt_test_below(&c->rng, 4) == 0)
        v = mt_test_rand(&c->rng);
    pick_range(c, (int)d, &addr, &len);
    set_state(c, MT_SIM_REG_DST, addr);
    set_state(c, MT_SIM_REG_LEN, len);
    set_state(c, MT_SIM_REG_VALUE, v);
    unsigned char *p = c->m.mem + (addr - c->m.base);
    for (uint64_t i = 0; i < len; i++)
        p[i] = (unsigned char)(v >> (8 * (i % 8)));
    emit(c, MT_SIM_FILL, 0, 0, NULL, 0, &d, 1);
}

static void copy_between(ctx *c, uint32_t sr, uint64_t src, uint32_t dr, uint64_t dst, uint64_t len)
{
    set_state(c, MT_SIM_REG_SRC, src);
    set_state(c, MT_SIM_REG_DST, dst);
    set_state(c, MT_SIM_REG_LEN, len);
    memmove(c->m.mem + (dst - c->m.base), c->m.mem + (src - c->m.base), len);
    emit(c, MT_SIM_COPY, 0, 0, &sr, 1, &dr, 1);
}

static void do_copy(ctx *c)
{
    uint32_t sr = (uint32_t)mt_test_below(&c->rng, NRES), dr = (uint32_t)mt_test_below(&c->rng, NRES);
    uint64_t src, dst, len, dlen;
    pick_range(c, (int)sr, &src, &len);
    pick_range(c, (int)dr, &dst, &dlen);
    if (len > c->res_len[dr])
        len = c->res_len[dr];
    if (dst + len > c->res_addr[dr] + c->res_len[dr])
        dst = c->res_addr[dr] + c->res_len[dr] - len;
    copy_between(c, sr, src, dr, dst, len); /* sr == dr may overlap: memmove */
}

static void do_store(ctx *c)
{
    uint32_t r = (uint32_t)mt_test_below(&c->rng, NRES);
    uint64_t addr = c->res_addr[r] + mt_test_below(&c->rng, c->res_len[r] - 7);
    uint64_t v = mt_test_rand(&c->rng);
    for (int i = 0; i < 8; i++)
        c->m.mem[addr - c->m.base + (uint64_t)i] = (unsigned char)(v >> (8 * i));
    emit(c, MT_SIM_STORE, v, addr, NULL, 0, &r, 1);
}

typedef struct temp {
    ctx *c;
    uint64_t addr;
} temp;

static void free_temp(void *arg, uint64_t value, int status)
{
    temp *t = arg;
    MT_CHECK_INT_EQ(status, 0);
    MT_CHECK(mt_timeline_completed(mt_stream_timeline(t->c->s)) >= value);
    MT_CHECK(value >= t->c->last_free_value); /* in order */
    t->c->last_free_value = value;
    MT_CHECK_OK(mt_sim_free(t->c->sim, t->addr));
    t->c->frees_run++;
    free(t);
}

/* Upload through a temporary buffer: host-write it, COPY it into a buffer,
 * free it when the device is done with it. A free that ran too early would
 * let the next temporary reuse (and overwrite) the memory before the COPY
 * read it, and the memory check would catch it. */
static void do_upload(ctx *c)
{
    uint32_t dr = (uint32_t)mt_test_below(&c->rng, NRES);
    uint64_t len = 8 + mt_test_below(&c->rng, c->res_len[dr] - 8), dst = c->res_addr[dr];
    temp *t = malloc(sizeof *t);
    MT_CHECK(t != NULL);
    t->c = c;
    /* One size for all temporaries: a freed one is the next one's hole. */
    MT_CHECK_OK(mt_sim_alloc(c->sim, 4096, 8, &t->addr));
    unsigned char buf[4096];
    for (uint64_t i = 0; i < len; i++)
        buf[i] = (unsigned char)mt_test_rand(&c->rng);
    MT_CHECK_OK(mt_sim_write(c->sim, t->addr, buf, len));
    memcpy(c->m.mem + (t->addr - c->m.base), buf, len); /* the model mirrors all memory */
    copy_between(c, TEMP_RES, t->addr, dr, dst, len);
    MT_CHECK_OK(mt_stream_defer(c->s, free_temp, t));
    c->frees_queued++;
}

/* A second thread waits on fence values as they are published. */
static void *fence_waiter(void *arg)
{
    ctx *c = arg;
    mt_timeline *tl = mt_stream_timeline(c->s);
    uint64_t waited = 0;
    while (!atomic_load(&c->done)) {
        uint64_t v = atomic_load(&c->fence_pub);
        if (v > waited) {
            MT_CHECK_OK(mt_timeline_wait(tl, v, -1));
            MT_CHECK(mt_timeline_completed(tl) >= v);
            waited = v;
        } else {
            sched_yield();
        }
    }
    return NULL;
}

static void run(const run_cfg *cfg, uint64_t seed)
{
    ctx *c = calloc(1, sizeof *c);
    MT_CHECK(c != NULL);
    c->rng = seed;
    mt_sim_opts so = {.mem_size = MEM, .faults = cfg->faults};
    MT_CHECK_OK(mt_sim_create(&so, &c->sim));
    MT_CHECK_OK(mt_stream_create(&cfg->sopts, &c->s));
    c->m.mem = calloc(1, MEM);
    c->m.base = mt_sim_base(c->sim);
    /* Buffers with random content, uploaded before the device starts. */
    for (int r = 0; r < NRES; r++) {
        c->res_len[r] = 256 + mt_test_below(&c->rng, 3841);
        MT_CHECK_OK(mt_sim_alloc(c->sim, c->res_len[r], 64, &c->res_addr[r]));
        unsigned char *p = c->m.mem + (c->res_addr[r] - c->m.base);
        for (size_t i = 0; i < c->res_len[r]; i++)
            p[i] = (unsigned char)mt_test_rand(&c->rng);
        MT_CHECK_OK(mt_sim_write(c->sim, c->res_addr[r], p, c->res_len[r]));
    }
    MT_CHECK_OK(mt_sim_attach(c->sim, c->s));
    pthread_t waiter;
    MT_CHECK_INT_EQ(pthread_create(&waiter, NULL, fence_waiter, c), 0);

    uint64_t explicit_barriers = 0, fences = 0;
    for (int i = 0; i < cfg->ops; i++) {
        uint64_t k = mt_test_below(&c->rng, 1000);
        if (k < 400)
            do_fill(c);
        else if (k < 750)
            do_copy(c);
        else if (k < 950)
            do_store(c);
        else if (k < 965)
            do_upload(c);
        else if (k < 980) {
            uint64_t v;
            MT_CHECK_OK(mt_stream_fence(c->s, &v));
            atomic_store(&c->fence_pub, v);
            fences++;
        } else if (k < 990) {
            MT_CHECK_OK(mt_stream_sync(c->s, -1));
        } else if (k < 995) {
            MT_CHECK_OK(mt_stream_barrier(c->s));
            memset(c->m.dirty, 0, sizeof c->m.dirty);
            explicit_barriers++;
        } else {
            MT_CHECK_OK(mt_stream_reset(c->s));
            model_reset(&c->m);
        }
        /* Run ready deferred frees while commands are in flight: a free
         * queued against too early a value would run here too soon. */
        if (mt_test_below(&c->rng, 8) == 0)
            mt_timeline_poll(mt_stream_timeline(c->s));
    }
    MT_CHECK_OK(mt_stream_sync(c->s, -1));
    atomic_store(&c->done, 1);
    pthread_join(waiter, NULL);

    /* Memory, byte for byte. */
    unsigned char *dev = malloc(MEM);
    MT_CHECK_OK(mt_sim_read(c->sim, c->m.base, dev, MEM));
    MT_CHECK_MEM_EQ(dev, c->m.mem, MEM);

    mt_stream_stats st;
    mt_stream_stats_get(c->s, &st);
    mt_sim_detach(c->sim);
    mt_sim_stats sst;
    mt_sim_stats_get(c->sim, &sst);
    printf("%s: %ju commands, %ju elided, %ju barriers, %ju fences, %ju syncs (+%ju skipped), "
           "producer slept %ju, woken %ju, consumer slept %ju, %ju progress reports, %ju posted "
           "overflows\n",
           cfg->name, (uintmax_t)st.commands, (uintmax_t)st.state_elided, (uintmax_t)st.barriers,
           (uintmax_t)st.fences, (uintmax_t)st.syncs, (uintmax_t)st.syncs_skipped,
           (uintmax_t)st.producer_sleeps, (uintmax_t)st.producer_wakeups,
           (uintmax_t)st.consumer_sleeps, (uintmax_t)st.progress_reports,
           (uintmax_t)sst.overflows);
    MT_CHECK_UINT_EQ(st.state_elided, c->m.elided);
    MT_CHECK(st.state_elided > 0);
    MT_CHECK_UINT_EQ(st.barriers, c->m.barriers + explicit_barriers);
    MT_CHECK(c->m.barriers > 0);
    MT_CHECK_UINT_EQ(sst.barriers, st.barriers); /* the device ran every one */
    MT_CHECK_UINT_EQ(sst.fences, st.fences);
    MT_CHECK_UINT_EQ(sst.executed, st.commands);
    MT_CHECK(st.fences >= fences);
    MT_CHECK_UINT_EQ(mt_timeline_completed(mt_stream_timeline(c->s)), st.fences);
    MT_CHECK_INT_EQ(c->frees_run, c->frees_queued);
    MT_CHECK(c->frees_queued > 0);

    mt_stream_destroy(c->s);
    mt_sim_destroy(c->sim);
    free(dev);
    free(c->m.mem);
    free(c);
}

/* Without declared hazards there is no barrier, and the pipelined device
 * reads the old bytes: the memory check above is sensitive to barriers. */
static void stale_without_hazards(void)
{
    for (int declare = 0; declare <= 1; declare++) {
        mt_sim *sim;
        mt_stream *s;
        MT_CHECK_OK(mt_sim_create(NULL, &sim));
        MT_CHECK_OK(mt_stream_create(NULL, &s));
        uint64_t a, b;
        MT_CHECK_OK(mt_sim_alloc(sim, 64, 64, &a));
        MT_CHECK_OK(mt_sim_alloc(sim, 64, 64, &b));
        MT_CHECK_OK(mt_sim_attach(sim, s));
        const uint32_t ra = 0, rb = 1;
        mt_stream_access wa = {NULL, 0, &ra, 1}, rab = {&ra, 1, &rb, 1};
        MT_CHECK_OK(mt_stream_set_state(s, MT_SIM_REG_DST, a));
        MT_CHECK_OK(mt_stream_set_state(s, MT_SIM_REG_LEN, 64));
        MT_CHECK_OK(mt_stream_set_state(s, MT_SIM_REG_VALUE, 0x7777777777777777ull));
        mt_cmd fill = {.op = MT_SIM_FILL}, copy = {.op = MT_SIM_COPY};
        MT_CHECK_OK(mt_stream_emit(s, &fill, declare ? &wa : NULL));
        MT_CHECK_OK(mt_stream_set_state(s, MT_SIM_REG_SRC, a));
        MT_CHECK_OK(mt_stream_set_state(s, MT_SIM_REG_DST, b));
        MT_CHECK_OK(mt_stream_emit(s, &copy, declare ? &rab : NULL));
        MT_CHECK_OK(mt_stream_sync(s, -1));
        unsigned char got[64], want[64];
        MT_CHECK_OK(mt_sim_read(sim, b, got, 64));
        memset(want, declare ? 0x77 : 0, 64);
        MT_CHECK_MEM_EQ(got, want, 64);
        MT_CHECK_OK(mt_sim_read(sim, a, got, 64)); /* the fill itself landed */
        memset(want, 0x77, 64);
        MT_CHECK_MEM_EQ(got, want, 64);
        mt_sim_destroy(sim);
        mt_stream_destroy(s);
    }
}

int main(int argc, char **argv)
{
    uint64_t seed = mt_test_seed(argc, argv);
    stale_without_hazards();
    const run_cfg cfgs[] = {
        {"default ring", {0}, {0}, 20000},
        /* A small ring and a slow device: constant back-pressure, wraps. */
        {"small ring, slow device", {.slots = 16, .ping_interval = 4},
         {.delay_every = 5, .delay_ns = 20000}, 6000},
        /* A deep queue ahead of a slow device: a deferred free that ran
         * early would hand out memory a queued COPY has yet to read. */
        {"deep queue, slow device", {0}, {.delay_every = 3, .delay_ns = 5000}, 6000},
        /* A 6-bit fence counter wraps every 64 fences. */
        {"6-bit fences", {.slots = 16, .fence_bits = 6}, {0}, 20000},
        {"ping every command", {.slots = 8, .ping_interval = 1}, {0}, 10000},
        /* No polling: every wait goes to sleep at once (more sleeps, wakes). */
        {"no spin, small ring", {.slots = 32, .flags = MT_STREAM_NO_SPIN}, {0}, 10000},
    };
    for (size_t i = 0; i < sizeof cfgs / sizeof *cfgs; i++)
        run(&cfgs[i], seed + i);
    puts("stream sim: ok");
    return 0;
}
