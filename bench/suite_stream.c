/* memtrack bench stream: the command ring to the simulated device.
 *
 *  - ring/noop: no-op commands per second from the producer to the device
 *    thread, until the final sync returns (end to end). Baseline, same run:
 *    the same ring (512 slots of the same 32-byte commands, the same device
 *    loop shape) with a mutex and condition variables taken per command.
 *    Targets (issue 7): >= 20 Mcmd/s and >= 10x the baseline. Measured with
 *    the default bounded poll before sleeping (50 us) and without it
 *    (MT_STREAM_NO_SPIN: every wait sleeps at once).
 *  - state/elision-on|off: a draw-like sequence (3 state commands + 1 op,
 *    addresses changing every 8 draws) in API calls per second, with the
 *    state cache and without it (MT_STREAM_NO_ELISION).
 *  - backpressure/ring-full: wake-ups sent to the producer per 1000 commands
 *    when the device is slower than the producer (it sleeps 1 us, in practice
 *    ~60 us, every 8 commands), so the ring stays full; with and without the
 *    poll. Baseline: the mutex+condvar ring with the same slow device.
 *    Target: <= 10 per 1000.
 *  - fence/round-trip: fence + wait on an idle device, median latency,
 *    against the baseline ring's fence + condvar wait.
 * Medians of several repetitions; figures from a shared 2-vCPU VM move a lot
 * between runs, the same-run ratios less. */
#define _GNU_SOURCE
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "memtrack/device_sim.h"
#include "memtrack/stream.h"
#include "suites.h"

enum { SLOTS = 512, REPS = 3 };

/* ---- the baseline: the same ring, a mutex + condvars per command --------- */

typedef struct base_ring {
    pthread_mutex_t m;
    pthread_cond_t not_full, not_empty, fence_done;
    mt_cmd slots[SLOTS];
    uint64_t head, tail, completed;
    int stop;
    uint64_t producer_wakeups, executed;
    uint32_t delay_every, delay_ns;
    pthread_t thread;
} base_ring;

static void *base_device(void *arg)
{
    base_ring *r = arg;
    for (;;) {
        pthread_mutex_lock(&r->m);
        while (r->tail == r->head && !r->stop)
            pthread_cond_wait(&r->not_empty, &r->m);
        if (r->tail == r->head) {
            pthread_mutex_unlock(&r->m);
            return NULL;
        }
        mt_cmd c = r->slots[r->tail % SLOTS];
        r->tail++;
        pthread_cond_signal(&r->not_full);
        if (c.op == MT_CMD_FENCE) {
            r->completed = c.a;
            pthread_cond_broadcast(&r->fence_done);
        }
        pthread_mutex_unlock(&r->m);
        /* The same per-command fault check the simulated device makes. */
        r->executed++;
        if (r->delay_every && r->executed % r->delay_every == 0) {
            struct timespec ts = {0, (long)r->delay_ns};
            nanosleep(&ts, NULL);
        }
    }
}

static base_ring *base_start(uint32_t delay_every, uint32_t delay_ns)
{
    base_ring *r = calloc(1, sizeof *r);
    if (!r)
        abort();
    pthread_mutex_init(&r->m, NULL);
    pthread_cond_init(&r->not_full, NULL);
    pthread_cond_init(&r->not_empty, NULL);
    pthread_cond_init(&r->fence_done, NULL);
    r->delay_every = delay_every;
    r->delay_ns = delay_ns;
    if (pthread_create(&r->thread, NULL, base_device, r))
        abort();
    return r;
}

static void base_put(base_ring *r, const mt_cmd *c)
{
    pthread_mutex_lock(&r->m);
    while (r->head - r->tail == SLOTS) {
        pthread_cond_wait(&r->not_full, &r->m);
        r->producer_wakeups++;
    }
    r->slots[r->head % SLOTS] = *c;
    r->head++;
    pthread_cond_signal(&r->not_empty);
    pthread_mutex_unlock(&r->m);
}

static void base_fence_wait(base_ring *r, uint64_t v)
{
    mt_cmd f = {.op = MT_CMD_FENCE, .a = v};
    base_put(r, &f);
    pthread_mutex_lock(&r->m);
    while (r->completed < v)
        pthread_cond_wait(&r->fence_done, &r->m);
    pthread_mutex_unlock(&r->m);
}

static void base_stop(base_ring *r)
{
    pthread_mutex_lock(&r->m);
    r->stop = 1;
    pthread_cond_signal(&r->not_empty);
    pthread_mutex_unlock(&r->m);
    pthread_join(r->thread, NULL);
    free(r);
}

/* ---- memtrack's ring to the simulated device ------------------------------ */

typedef struct dev {
    mt_sim *sim;
    mt_stream *s;
} dev;

static dev dev_start(uint32_t flags, uint32_t delay_every, uint32_t delay_ns)
{
    dev d;
    mt_sim_opts so = {.mem_size = 1 << 20, .faults = {.delay_every = delay_every, .delay_ns = delay_ns}};
    mt_stream_opts o = {.slots = SLOTS, .flags = flags};
    if (mt_sim_create(&so, &d.sim) || mt_stream_create(&o, &d.s) || mt_sim_attach(d.sim, d.s))
        abort();
    return d;
}

static void dev_stop(dev d, mt_stream_stats *st)
{
    if (st)
        mt_stream_stats_get(d.s, st);
    mt_sim_destroy(d.sim);
    mt_stream_destroy(d.s);
}

static void must(int rc)
{
    if (rc < 0) {
        fprintf(stderr, "bench stream: %s\n", mt_strerror(rc));
        abort();
    }
}

/* No-op commands per second (Mcmd/s), end to end. */
static double ring_noop(long n, uint32_t flags)
{
    dev d = dev_start(flags, 0, 0);
    mt_cmd nop = {.op = MT_CMD_NOP};
    uint64_t t0 = mt_bench_now_ns();
    for (long i = 0; i < n; i++)
        must(mt_stream_emit(d.s, &nop, NULL));
    must(mt_stream_sync(d.s, -1));
    double dt = (double)(mt_bench_now_ns() - t0);
    dev_stop(d, NULL);
    return (double)n / dt * 1e3;
}

static double base_noop(long n)
{
    base_ring *r = base_start(0, 0);
    mt_cmd nop = {.op = MT_CMD_NOP};
    uint64_t t0 = mt_bench_now_ns();
    for (long i = 0; i < n; i++)
        base_put(r, &nop);
    base_fence_wait(r, 1);
    double dt = (double)(mt_bench_now_ns() - t0);
    base_stop(r);
    return (double)n / dt * 1e3;
}

/* Draw-like state traffic: API calls per second (M/s) and the elided share. */
static double state_calls(long draws, uint32_t flags, double *elided_share)
{
    dev d = dev_start(flags, 0, 0);
    mt_cmd op = {.op = MT_CMD_NOP};
    uint64_t t0 = mt_bench_now_ns();
    for (long i = 0; i < draws; i++) {
        uint64_t a = 0x1000 * (uint64_t)(i / 8);
        must(mt_stream_set_state(d.s, MT_SIM_REG_DST, a));
        must(mt_stream_set_state(d.s, MT_SIM_REG_SRC, a + 0x100000));
        must(mt_stream_set_state(d.s, MT_SIM_REG_LEN, 256));
        must(mt_stream_emit(d.s, &op, NULL));
    }
    must(mt_stream_sync(d.s, -1));
    double dt = (double)(mt_bench_now_ns() - t0);
    mt_stream_stats st;
    dev_stop(d, &st);
    *elided_share = (double)st.state_elided / (double)(3 * draws);
    return 4.0 * (double)draws / dt * 1e3;
}

/* Producer wake-ups per 1000 commands with a device slower than it. */
static double ring_wakeups(long n, uint32_t flags, double *sleeps)
{
    dev d = dev_start(flags, 8, 1000);
    mt_cmd nop = {.op = MT_CMD_NOP};
    for (long i = 0; i < n; i++)
        must(mt_stream_emit(d.s, &nop, NULL));
    must(mt_stream_sync(d.s, -1));
    mt_stream_stats st;
    dev_stop(d, &st);
    *sleeps = 1000.0 * (double)st.producer_sleeps / (double)st.commands;
    return 1000.0 * (double)st.producer_wakeups / (double)st.commands;
}

static double base_wakeups(long n)
{
    base_ring *r = base_start(8, 1000);
    mt_cmd nop = {.op = MT_CMD_NOP};
    for (long i = 0; i < n; i++)
        base_put(r, &nop);
    base_fence_wait(r, 1);
    double w = 1000.0 * (double)r->producer_wakeups / (double)(n + 1);
    base_stop(r);
    return w;
}

/* Median fence round trip on an idle device, in microseconds. */
static double ring_fence_rtt(int n)
{
    dev d = dev_start(0, 0, 0);
    double *v = malloc((size_t)n * sizeof *v);
    for (int i = 0; i < n; i++) {
        uint64_t f, t0 = mt_bench_now_ns();
        must(mt_stream_fence(d.s, &f));
        must(mt_timeline_wait(mt_stream_timeline(d.s), f, -1));
        v[i] = (double)(mt_bench_now_ns() - t0) / 1e3;
    }
    double m = mt_bench_median(v, n);
    free(v);
    dev_stop(d, NULL);
    return m;
}

static double base_fence_rtt(int n)
{
    base_ring *r = base_start(0, 0);
    double *v = malloc((size_t)n * sizeof *v);
    for (int i = 0; i < n; i++) {
        uint64_t t0 = mt_bench_now_ns();
        base_fence_wait(r, (uint64_t)i + 1);
        v[i] = (double)(mt_bench_now_ns() - t0) / 1e3;
    }
    double m = mt_bench_median(v, n);
    free(v);
    base_stop(r);
    return m;
}

static void emit_row(mt_bench_ctx *ctx, const char *name, const char *metric, double value,
                     const char *unit, double base, const char *target, int met)
{
    mt_bench_row row = {name, metric, value, unit, isnan(base) ? NULL : "mutex+condvar/cmd", base,
                        isnan(base) ? NAN : value / base, target, target ? met : -1};
    mt_bench_emit(ctx, &row);
}

int mt_bench_suite_stream(mt_bench_ctx *ctx)
{
    int quick = mt_bench_quick(ctx);
    long n = quick ? 2000000 : 20000000;
    double v[REPS], b[REPS];

    double ns[REPS];
    for (int r = 0; r < REPS; r++) {
        v[r] = ring_noop(n, 0);
        ns[r] = ring_noop(n / 4, MT_STREAM_NO_SPIN);
        b[r] = base_noop(n);
    }
    double ring = mt_bench_median(v, REPS), base = mt_bench_median(b, REPS);
    double nospin = mt_bench_median(ns, REPS);
    emit_row(ctx, "ring/noop", "throughput", ring, "Mcmd/s", base, ">= 20 Mcmd/s", ring >= 20.0);
    emit_row(ctx, "ring/noop", "speedup", ring / base, "x", NAN, ">= 10x baseline", ring / base >= 10.0);
    emit_row(ctx, "ring/noop/no-spin", "throughput", nospin, "Mcmd/s", base, NULL, -1);

    double on[REPS], off[REPS], share = 0;
    for (int r = 0; r < REPS; r++) {
        on[r] = state_calls(n / 4, 0, &share);
        off[r] = state_calls(n / 4, MT_STREAM_NO_ELISION, &(double){0});
    }
    double mon = mt_bench_median(on, REPS), moff = mt_bench_median(off, REPS);
    mt_bench_row erow = {"state/elision-on", "throughput", mon, "Mcall/s", "elision-off", moff,
                         mon / moff, NULL, -1};
    mt_bench_emit(ctx, &erow);
    emit_row(ctx, "state/elision-off", "throughput", moff, "Mcall/s", NAN, NULL, -1);
    mt_bench_emit_value(ctx, "state/elision-on", "elided_share", share, "");

    long nw = quick ? 20000 : 100000;
    double sleeps, sleeps_ns;
    double w = ring_wakeups(nw, 0, &sleeps), wn = ring_wakeups(nw, MT_STREAM_NO_SPIN, &sleeps_ns);
    double bw = base_wakeups(nw);
    emit_row(ctx, "backpressure/ring-full", "wakeups_per_1k", w, "", bw, "<= 10 per 1000", w <= 10.0);
    emit_row(ctx, "backpressure/ring-full", "sleeps_per_1k", sleeps, "", NAN, NULL, -1);
    emit_row(ctx, "backpressure/ring-full/no-spin", "wakeups_per_1k", wn, "", bw, "<= 10 per 1000",
             wn <= 10.0);
    emit_row(ctx, "backpressure/ring-full/no-spin", "sleeps_per_1k", sleeps_ns, "", NAN, NULL, -1);

    int nf = quick ? 2000 : 20000;
    double f = ring_fence_rtt(nf), bf = base_fence_rtt(nf);
    emit_row(ctx, "fence/round-trip", "median_latency", f, "us", bf, NULL, -1);
    mt_bench_note(ctx, "commands are 32 bytes; ring of %d slots, ping every %d; median of %d runs",
                  SLOTS, SLOTS / 4, REPS);
    return 0;
}
