/* memtrack bench coherence: the enqueue-time planner and dirty-page uploads.
 *
 *  - enqueue/decision: 8 devices, 10,000 live buffers of 64 KiB, commands
 *    with 4 buffer arguments (random buffer, random 4 KiB-aligned range,
 *    read 50% / write 25% / read-write 25%) on random devices. Cost: wall
 *    time of mt_coh_enqueue per buffer argument (validation, instance
 *    lookup, planning, migration commands, dependencies, hand-over), the
 *    devices running alongside. Bytes: planned copies per command. Baseline,
 *    same run, same machinery: MT_COH_WHOLE_BUFFER (PoCL's rule: one version
 *    per buffer, whole-buffer copies). The devices are a backend plugged in
 *    by this file ("null": direct copies between all of them, nothing
 *    moved for real), so the figure is the planner's, not memcpy's.
 *    Target (issue 13): <= 150 ns per argument.
 *  - upload/dirty-N%: a 1 GiB tracked host buffer (MT_COH_BUF_TRACK_HOST)
 *    made coherent on a GPU after the host wrote N% of its 4 KiB pages at
 *    random, end to end: mt_coh_enqueue of a migration (collecting the
 *    dirty pages from the tracker, planning, the upload) until its event
 *    completes. Baselines, same run: the full copy of the buffer (1 GiB,
 *    one DMA; the ideal dirty upload is N% of it), and one cuMemcpyAsync
 *    per dirty page (the copies alone, page list given). Targets: <= 1.2x
 *    (N% x full copy) at 10% and 50%, <= 1.3x at 1%, >= 30x faster than the
 *    per-page copies. Needs a GPU (CUDA driver); skipped without one.
 *  - upload-host/dirty-N% (any machine): the same on a host-memory device
 *    with a 256 MiB buffer, against memcpy of the whole buffer: what the
 *    tracker and planner cost where copies are cheap.
 * MT_BENCH_COH_PARTS=decision,upload-host,upload picks parts (default all);
 * MT_BENCH_COH_HOST_MIB sets upload-host's size (default 256);
 * MT_BENCH_COH_VARIANTS=1 adds upload variants (below).
 * The uploads collect with the collection helper process (9 threads,
 * mt_coh_opts.collect_helper); the variant upload[in-process] without,
 * upload[collect=N] with N collecting threads instead of up to 9. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "memtrack/coherence.h"
#include "suites.h"

enum { NDEV = 8, NBUF = 10000, BUFSZ = 64 << 10, NARGS = 4, REPS = 5 };

/* ---- the null backend: device memory as address space only ----------------- */

typedef struct nulldev {
    uint64_t base;
    int given;
} nulldev;

static int null_grow(void *dev, uint64_t min_size, uint64_t *base, uint64_t *size)
{
    nulldev *n = dev;
    if (n->given || min_size > (64ull << 30))
        return -ENOSPC;
    n->given = 1;
    *base = n->base;
    *size = 64ull << 30;
    return 0;
}

static int null_submit(void *dev, int engine, mt_coh_op *op)
{
    (void)dev;
    (void)engine;
    if (op->kind == MT_COH_OP_RUN)
        return op->fn(op->user, &op->exec);
    return 0; /* a copy between address ranges nobody reads */
}

static int null_peer(void *dev, void *src)
{
    (void)dev;
    (void)src;
    return 1;
}

static void null_destroy(void *dev)
{
    free(dev);
}

static const mt_coh_backend null_backend = {
    .name = "null",
    .mem_grow = null_grow,
    .submit = null_submit,
    .can_peer = null_peer,
    .destroy = null_destroy,
};

static int noop(void *user, const mt_coh_exec *ex)
{
    (void)user;
    (void)ex;
    return 0;
}

static uint64_t rng_next(uint64_t *s)
{
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

typedef struct planner_run {
    double ns_per_arg;
    double bytes_per_cmd;
    double migs_per_cmd; /* migration commands created per command */
} planner_run;

/* deferred: commands are enqueued in timed bursts of 1,000 and handed to
 * the engines (and drained, untimed) after each burst: the planner's cost
 * in a steady state with a few thousand commands in flight. Else they are
 * handed over in batches of 32 while the loop runs, the engine threads
 * competing with it for the CPUs. */
static int bench_planner(uint32_t flags, int quick, int deferred, int cg, planner_run *out)
{
    mt_coh *c;
    mt_coh_opts o = {.flags = flags, .batch = deferred ? UINT32_MAX : 0};
    int rc = mt_coh_create(&o, &c);
    if (rc)
        return rc;
    mt_coh_queue *q[NDEV + 1];
    mt_coh_client *cl;
    for (uint32_t d = 1; d <= NDEV && !rc; d++) {
        nulldev *n = calloc(1, sizeof *n);
        n->base = (uint64_t)d << 44;
        uint32_t id;
        rc = mt_coh_device_add(c, &null_backend, n, NULL, &id);
    }
    if (!rc)
        rc = mt_coh_client_create(c, &cl);
    for (uint32_t d = 1; d <= NDEV && !rc; d++)
        rc = mt_coh_queue_create(cl, d, &q[d]);
    int nbuf = quick ? 1000 : NBUF;
    mt_coh_buf *bufs = calloc((size_t)nbuf, sizeof *bufs);
    /* Buffers start written on device 1 (no host memory involved), then
     * read on every device: the steady state, every instance allocated. */
    for (int i = 0; i < nbuf && !rc; i++) {
        rc = mt_coh_buffer_create(cl, BUFSZ, NULL, &bufs[i]);
        mt_coh_arg a = {.buf = bufs[i], .size = BUFSZ, .access = MT_COH_WRITE};
        mt_coh_command cmd = {.fn = noop, .args = &a, .nargs = 1};
        for (uint32_t d = 1; d <= NDEV && !rc; d++) {
            rc = mt_coh_enqueue(q[d], &cmd, NULL);
            a.access = MT_COH_READ;
        }
    }
    for (uint32_t d = 1; d <= NDEV && !rc; d++)
        rc = mt_coh_finish(q[d]);
    uint64_t rng = 42;
    int n = quick ? 5000 : 20000;
    double ns[REPS], bytes[REPS], migs[REPS];
    /* Under --callgrind (child) one counted repetition after the warm-up. */
    int reps = cg ? 1 : REPS;
    for (int rep = -1; rep < reps && !rc; rep++) { /* rep -1: warm-up */
        mt_coh_stats s0, s1;
        mt_coh_stats_get(c, &s0);
        uint64_t t = 0;
        for (int i = 0; i < n && !rc; i++) {
            if (deferred && i && i % 1000 == 0)
                for (uint32_t d = 1; d <= NDEV && !rc; d++)
                    rc = mt_coh_finish(q[d]);
            mt_coh_arg a[NARGS];
            for (int k = 0; k < NARGS; k++) {
                uint64_t r = rng_next(&rng);
                uint64_t pages = BUFSZ / 4096, first = (r >> 8) % pages,
                         count = 1 + (r >> 24) % (pages - first);
                uint32_t acc = (r & 3) < 2 ? MT_COH_READ : (r & 3) == 2 ? MT_COH_WRITE : MT_COH_RW;
                a[k] = (mt_coh_arg){.buf = bufs[(r >> 32) % (uint64_t)nbuf], .offset = first * 4096,
                                    .size = count * 4096, .access = acc};
            }
            mt_coh_command cmd = {.fn = noop, .args = a, .nargs = NARGS};
            uint32_t d = 1 + (uint32_t)(rng_next(&rng) % NDEV);
            if (cg && rep >= 0)
                mt_bench_cg_toggle();
            uint64_t t0 = mt_bench_now_ns();
            rc = mt_coh_enqueue(q[d], &cmd, NULL);
            t += mt_bench_now_ns() - t0;
            if (cg && rep >= 0)
                mt_bench_cg_toggle();
        }
        if (cg && rep >= 0)
            mt_bench_cg_done(flags & MT_COH_WHOLE_BUFFER ? "decision/whole" : "decision/range",
                             (uint64_t)n * NARGS);
        for (uint32_t d = 1; d <= NDEV && !rc; d++)
            rc = mt_coh_finish(q[d]);
        mt_coh_stats_get(c, &s1);
        if (rep >= 0) {
            ns[rep] = (double)t / n / NARGS;
            bytes[rep] = (double)((s1.bytes_h2d + s1.bytes_d2h + s1.bytes_d2d) -
                                  (s0.bytes_h2d + s0.bytes_d2h + s0.bytes_d2d)) / n;
            migs[rep] = (double)(s1.migrations - s0.migrations) / n;
        }
    }
    if (!rc) {
        out->ns_per_arg = mt_bench_median(ns, reps);
        out->bytes_per_cmd = mt_bench_median(bytes, reps);
        out->migs_per_cmd = mt_bench_median(migs, reps);
    }
    free(bufs);
    mt_coh_destroy(c);
    return rc;
}

static void bench_decision(mt_bench_ctx *ctx)
{
    int quick = mt_bench_quick(ctx);
    planner_run rng, whole, rng_c, whole_c;
    if (bench_planner(0, quick, 1, 0, &rng) ||
        bench_planner(MT_COH_WHOLE_BUFFER, quick, 1, 0, &whole) ||
        bench_planner(0, quick, 0, 0, &rng_c) ||
        bench_planner(MT_COH_WHOLE_BUFFER, quick, 0, 0, &whole_c)) {
        mt_bench_note(ctx, "enqueue/decision: setup failed");
        return;
    }
    mt_bench_row r1 = {"enqueue/decision", "ns_per_arg", rng.ns_per_arg, "ns",
                       "whole-buffer (PoCL)", whole.ns_per_arg, rng.ns_per_arg / whole.ns_per_arg,
                       "<= 150 ns", rng.ns_per_arg <= 150.0};
    mt_bench_emit(ctx, &r1);
    mt_bench_row r2 = {"enqueue/decision", "bytes_per_cmd", rng.bytes_per_cmd, "B",
                       "whole-buffer (PoCL)", whole.bytes_per_cmd,
                       rng.bytes_per_cmd / whole.bytes_per_cmd, NULL, -1};
    mt_bench_emit(ctx, &r2);
    mt_bench_row r2b = {"enqueue/decision", "migrations_per_cmd", rng.migs_per_cmd, "cmds",
                        "whole-buffer (PoCL)", whole.migs_per_cmd,
                        rng.migs_per_cmd / whole.migs_per_cmd, NULL, -1};
    mt_bench_emit(ctx, &r2b);
    mt_bench_row r3 = {"enqueue/concurrent", "ns_per_arg", rng_c.ns_per_arg, "ns",
                       "whole-buffer (PoCL)", whole_c.ns_per_arg,
                       rng_c.ns_per_arg / whole_c.ns_per_arg, NULL, -1};
    mt_bench_emit(ctx, &r3);
}

/* ---- dirty uploads ------------------------------------------------------------------------ */

typedef int (*cu_htod_fn)(unsigned long long dst, const void *src, size_t n, void *stream);

typedef struct perpage {
    cu_htod_fn htod;
    const uint8_t *host;
    const uint32_t *pages;
    size_t npages;
} perpage;

/* The baseline as a command on the GPU: one async copy per dirty page into
 * a second buffer, then the backend's event wait (copies alone). */
static int perpage_run(void *user, const mt_coh_exec *ex)
{
    perpage *p = user;
    for (size_t i = 0; i < p->npages; i++) {
        uint64_t off = (uint64_t)p->pages[i] * 4096;
        if (p->htod(ex->addr[0] + off, p->host + off, 4096, ex->native))
            return -5;
    }
    return 0;
}

static int wait_rel(mt_coh_event *ev)
{
    int rc = mt_coh_event_wait(ev, -1);
    mt_coh_event_release(ev);
    return rc;
}

/* Makes buffer b coherent at queue q's device: returns ns, or -1. */
static double migrate(mt_coh_queue *q, mt_coh_buf b, uint64_t size, mt_coh_event_info *info,
                      double *enq)
{
    mt_coh_arg a = {.buf = b, .size = size, .access = MT_COH_READ};
    mt_coh_command cmd = {.args = &a, .nargs = 1};
    mt_coh_event *ev;
    uint64_t t0 = mt_bench_now_ns();
    if (mt_coh_enqueue(q, &cmd, &ev))
        return -1;
    if (enq) /* collection and planning done, copies under way */
        *enq = (double)(mt_bench_now_ns() - t0);
    if (mt_coh_event_wait(ev, -1)) {
        mt_coh_event_release(ev);
        return -1;
    }
    double t = (double)(mt_bench_now_ns() - t0);
    if (info)
        mt_coh_event_info_get(ev, info);
    mt_coh_event_release(ev);
    return t;
}

/* The plain full copy, as a command on the device: one cuMemcpyAsync of
 * the whole pinned host memory (one memcpy on a host device) into a second
 * buffer. */
typedef struct fullcopy {
    cu_htod_fn htod;
    const uint8_t *host;
    uint64_t size;
} fullcopy;

static int fullcopy_run(void *user, const mt_coh_exec *ex)
{
    fullcopy *f = user;
    if (strcmp(ex->backend, "host") == 0) {
        memcpy((void *)(uintptr_t)ex->addr[0], f->host, f->size);
        return 0;
    }
    return f->htod(ex->addr[0], f->host, f->size, ex->native) ? -5 : 0;
}

static double full_copy(mt_coh_queue *q, mt_coh_buf copy, fullcopy *f)
{
    mt_coh_arg a = {.buf = copy, .size = f->size, .access = MT_COH_WRITE};
    mt_coh_command cmd = {.fn = fullcopy_run, .user = f, .args = &a, .nargs = 1};
    mt_coh_event *ev;
    uint64_t t0 = mt_bench_now_ns();
    if (mt_coh_enqueue(q, &cmd, &ev) || wait_rel(ev))
        return -1;
    return (double)(mt_bench_now_ns() - t0);
}

static size_t dirty(uint8_t *mem, uint64_t size, double frac, uint64_t *rng, uint32_t *pages)
{
    size_t np = size / 4096, want = (size_t)((double)np * frac), n = 0;
    uint8_t *seen = calloc(np, 1);
    while (n < want) {
        size_t pg = rng_next(rng) % np;
        if (seen[pg])
            continue;
        seen[pg] = 1;
        mem[pg * 4096 + rng_next(rng) % 4096]++;
        pages[n++] = (uint32_t)pg;
    }
    free(seen);
    return n;
}

/* Threads of the collection helper process in the uploads. */
#define MT_BENCH_HELPER 9

typedef struct upload_cfg {
    const char *prefix;   /* "upload" or "upload-host" */
    uint64_t size;
    int cuda;
    int reps;
    mt_coh_opts opts;     /* a variant's options (0: defaults) */
    int targets;          /* report targets (the default configuration) */
} upload_cfg;

static void bench_upload(mt_bench_ctx *ctx, const upload_cfg *cfg)
{
    mt_coh *c;
    if (mt_coh_create(&cfg->opts, &c))
        return;
    uint32_t dev = 0, n = 0;
    if (cfg->cuda) {
        mt_coh_cuda_opts co = {.max_devices = 1};
        if (mt_coh_add_cuda_devices(c, &co, &dev, &n) || !n) {
            mt_bench_note(ctx, "%s: no CUDA driver or GPU here: skipped", cfg->prefix);
            mt_coh_destroy(c);
            return;
        }
    } else if (mt_coh_add_host_device(c, 2 * cfg->size + (64u << 20), &dev)) {
        mt_coh_destroy(c);
        return;
    }
    mt_coh_device_info di;
    mt_coh_device_info_get(c, dev, &di);
    mt_coh_client *cl;
    mt_coh_queue *q;
    mt_coh_buf b, copy;
    mt_coh_buffer_opts o = {.flags = MT_COH_BUF_TRACK_HOST};
    mt_coh_buffer_info bi;
    perpage pp = {0};
    if (cfg->cuda) {
        void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
        void *f = h ? dlsym(h, "cuMemcpyHtoDAsync_v2") : NULL;
        memcpy(&pp.htod, &f, sizeof f);
    }
    if (mt_coh_client_create(c, &cl) || mt_coh_queue_create(cl, dev, &q) ||
        mt_coh_buffer_create(cl, cfg->size, &o, &b) ||
        mt_coh_buffer_create(cl, cfg->size, NULL, &copy) ||
        mt_coh_buffer_info_get(cl, b, &bi)) {
        mt_bench_note(ctx, "%s: setup failed", cfg->prefix);
        mt_coh_destroy(c);
        return;
    }
    uint8_t *mem = bi.host;
    memset(mem, 1, cfg->size);
    uint32_t *pages = malloc(cfg->size / 4096 * sizeof *pages);
    uint64_t rng = 7;
    /* First upload (the instance is new), then the full copy reference. */
    double tf[3];
    migrate(q, b, cfg->size, NULL, NULL);
    fullcopy fc = {pp.htod, mem, cfg->size};
    for (int i = 0; i < 3; i++)
        tf[i] = full_copy(q, copy, &fc);
    double full = mt_bench_median(tf, 3);
    mt_bench_emit_value(ctx, cfg->prefix, "full_copy_ms", full / 1e6, "ms");
    mt_bench_note(ctx, "%s: %s, %.0f MiB tracked, full copy %.2f ms (%.1f GB/s)", cfg->prefix,
                  di.name,
                  (double)cfg->size / (1 << 20), full / 1e6, (double)cfg->size / full);
    const double fracs[] = {0.01, 0.10, 0.50};
    for (int fi = 0; fi < 3; fi++) {
        double frac = fracs[fi], t[8], tp[8], te[8];
        uint32_t migs = 0;
        int reps = cfg->reps;
        for (int r = 0; r < reps; r++) {
            pp.npages = dirty(mem, cfg->size, frac, &rng, pages);
            mt_coh_event_info info;
            t[r] = migrate(q, b, cfg->size, &info, &te[r]);
            migs = info.migrations;
            if (info.bytes_in != pp.npages * 4096)
                mt_bench_note(ctx, "%s: moved %llu bytes for %zu dirty pages", cfg->prefix,
                              (unsigned long long)info.bytes_in, pp.npages);
            tp[r] = NAN;
            if (cfg->cuda && pp.htod) {
                pp.host = mem;
                pp.pages = pages;
                mt_coh_arg a = {.buf = copy, .size = cfg->size, .access = MT_COH_WRITE};
                mt_coh_command cmd = {.fn = perpage_run, .user = &pp, .args = &a, .nargs = 1};
                mt_coh_event *ev;
                uint64_t t0 = mt_bench_now_ns();
                if (mt_coh_enqueue(q, &cmd, &ev) == 0 && wait_rel(ev) == 0)
                    tp[r] = (double)(mt_bench_now_ns() - t0);
            }
        }
        double m = mt_bench_median(t, reps), ideal = frac * full;
        char name[64];
        snprintf(name, sizeof name, "%s/dirty-%d%%", cfg->prefix, (int)(frac * 100 + 0.5));
        double limit = frac < 0.05 ? 1.3 : 1.2;
        char target[32];
        snprintf(target, sizeof target, "<= %.1fx ideal", limit);
        int tg = cfg->cuda && cfg->targets;
        mt_bench_row r1 = {name, "ms", m / 1e6, "ms", "dirty x full copy", ideal / 1e6, m / ideal,
                           tg ? target : NULL, tg ? m / ideal <= limit : -1};
        mt_bench_emit(ctx, &r1);
        mt_bench_emit_value(ctx, name, "enqueue_ms", mt_bench_median(te, reps) / 1e6, "ms");
        mt_bench_emit_value(ctx, name, "GB_per_s", frac * (double)cfg->size / m, "GB/s");
        mt_bench_emit_value(ctx, name, "migrations", migs, "cmds");
        if (cfg->cuda && !isnan(tp[0])) {
            double mp = mt_bench_median(tp, reps);
            mt_bench_row r2 = {name, "speedup", mp / m, "x", "cuMemcpyAsync per page", mp / 1e6,
                               mp / m, tg ? ">= 30x" : NULL, tg ? mp / m >= 30.0 : -1};
            mt_bench_emit(ctx, &r2);
        }
    }
    mt_coh_stats st;
    mt_coh_stats_get(c, &st);
    int hs = mt_coh_collect_helper_status(c);
    mt_bench_note(ctx, "%s: %llu dirty bytes collected; collection helper: %s (%d)", cfg->prefix,
                  (unsigned long long)st.host_dirty_bytes,
                  hs == 1 ? "running" : hs == 0 ? "none" : hs == 2 ? "starting" : "failed, in-process",
                  hs);
    if (mt_coh_track_status(c) == 0)
        mt_bench_note(ctx, "%s: uploaded whole: the signal tracker needs the interposer "
                           "(LD_PRELOAD=libmemtrack_preload.so) to track pages",
                      cfg->prefix);
    free(pages);
    mt_coh_client_destroy(cl);
    mt_coh_destroy(c);
}

/* --callgrind: instructions and L1 data misses per argument of the
 * decision (the deferred case, each mt_coh_enqueue counted alone: the
 * drains between bursts are not), memtrack against whole-buffer versions.
 * The child counts; the parent emits the rows. */
static int bench_decision_cg(mt_bench_ctx *ctx)
{
    int quick = mt_bench_quick(ctx);
    planner_run x;
    if (mt_bench_callgrind(ctx) == MT_BENCH_CG_CHILD)
        return bench_planner(0, quick, 1, 1, &x) ||
               bench_planner(MT_COH_WHOLE_BUFFER, quick, 1, 1, &x);
    mt_bench_cg_result res[2];
    int n = mt_bench_cg_run(ctx, res, 2);
    if (n < 0)
        return n;
    if (n != 2 || strcmp(res[0].name, "decision/range") || strcmp(res[1].name, "decision/whole")) {
        mt_bench_note(ctx, "enqueue/decision: callgrind gave %d results", n);
        return 1;
    }
    double ir = res[0].ir / res[0].ops, base = res[1].ir / res[1].ops;
    double l1 = res[0].d1_misses / res[0].ops, base_l1 = res[1].d1_misses / res[1].ops;
    mt_bench_row r1 = {"enqueue/decision", "instructions_per_arg", ir, "", "whole-buffer (PoCL)",
                       base, ir / base, NULL, -1};
    mt_bench_emit(ctx, &r1);
    mt_bench_row r2 = {"enqueue/decision", "l1_misses_per_arg", l1, "", "whole-buffer (PoCL)",
                       base_l1, l1 / base_l1, NULL, -1};
    mt_bench_emit(ctx, &r2);
    mt_bench_note(ctx, "valgrind --tool=callgrind --cache-sim=yes, counting mt_coh_enqueue alone "
                  "(%d commands of %d arguments after a warm-up pass)",
                  quick ? 5000 : 20000, NARGS);
    return 0;
}

/* MT_BENCH_COH_PARTS (a comma-separated list of decision, upload-host,
 * upload; unset: all) picks the parts to run. */
static int part_on(const char *name)
{
    const char *v = getenv("MT_BENCH_COH_PARTS");
    if (!v || !*v)
        return 1;
    size_t n = strlen(name);
    for (const char *p = v; (p = strstr(p, name)) != NULL; p += n)
        if ((p == v || p[-1] == ',') && (p[n] == ',' || p[n] == '\0'))
            return 1;
    return 0;
}

int mt_bench_suite_coherence(mt_bench_ctx *ctx)
{
    int quick = mt_bench_quick(ctx);
    if (mt_bench_callgrind(ctx) != MT_BENCH_CG_OFF)
        return bench_decision_cg(ctx);
    if (part_on("decision"))
        bench_decision(ctx);
    upload_cfg host = {"upload-host", quick ? 32u << 20 : 256u << 20, 0, quick ? 2 : 5,
                       {.collect_helper = MT_BENCH_HELPER}, 0};
    /* MT_BENCH_COH_HOST_MIB: the host device's buffer size (1024: the GPU
     * part's size, to compare the collection costs). */
    const char *hm = getenv("MT_BENCH_COH_HOST_MIB");
    if (hm && atoi(hm) > 0)
        host.size = (uint64_t)atoi(hm) << 20;
    if (part_on("upload-host"))
        bench_upload(ctx, &host);
    upload_cfg gpu = {"upload", quick ? 64u << 20 : 1u << 30, 1, quick ? 2 : 5,
                      {.collect_helper = MT_BENCH_HELPER}, 1};
    if (!part_on("upload"))
        return 0;
    bench_upload(ctx, &gpu);
    /* MT_BENCH_COH_VARIANTS=1: the GPU upload collected in-process (the
     * collecting threads scan: the TLB flushes of each scan interrupt the
     * others), with other helper thread counts, fewer collecting threads
     * (which scan at 10% and 50%, where the helper is not used) and
     * another piece size. */
    const char *v = getenv("MT_BENCH_COH_VARIANTS");
    if (v && *v == '1') {
        static const struct {
            const char *name;
            uint32_t helper, collect;
            uint64_t pipeline;
        } var[] = {{"upload[in-process]", 0, 0, 0},
                   {"upload[helper=4]", 4, 0, 0},
                   {"upload[helper=15]", 15, 0, 0},
                   {"upload[collect=2]", MT_BENCH_HELPER, 2, 0},
                   {"upload[collect=4]", MT_BENCH_HELPER, 4, 0},
                   {"upload[piece=8M]", MT_BENCH_HELPER, 0, 8u << 20},
                   {"upload[piece=1G]", MT_BENCH_HELPER, 0, 1ull << 30}};
        for (size_t i = 0; i < sizeof var / sizeof var[0]; i++) {
            upload_cfg x = gpu;
            x.prefix = var[i].name;
            x.reps = 3;
            x.targets = 0;
            x.opts.collect_helper = var[i].helper;
            x.opts.collect_threads = var[i].collect;
            x.opts.pipeline_bytes = var[i].pipeline;
            bench_upload(ctx, &x);
        }
    }
    return 0;
}
