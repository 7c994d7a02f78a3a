/* memtrack bench alloc: the region allocator and its pools against the
 * baseline (alloc_baseline.c: sorted free list, first fit), same run, same
 * operation sequences.
 *
 *  - small, gpu-typical: batches of 32 allocations freed in scrambled order,
 *    in a region already holding a fragmented background (1000 allocations,
 *    every other one freed); the median over batches of ns per alloc+free.
 *  - random-lifetime: 1000 live allocations; each step frees a random one
 *    and allocates a new one.
 *  - 2-thread pools: two threads allocate; half of each thread's blocks are
 *    freed by the other thread (queued on the owner's deferred list). The
 *    baseline is one shared allocator behind a mutex.
 *  - fragmentation: random ops holding occupancy at 80%; 1 - largest free /
 *    free, averaged over the second half of the run.
 * Targets (issue 6): <= 50 ns per pair median on gpu-typical sizes, >= 5x
 * faster than the baseline, fragmentation no worse than the baseline's. */
#define _GNU_SOURCE
#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "alloc_baseline.h"
#include "memtrack/alloc.h"
#include "suites.h"

#define KiB 1024ull
#define MiB (1024ull * 1024)
#define GiB (1024ull * MiB)
#define BATCH 32
#define BACKGROUND 1000
#define GRANULE 256

/* ---- operation sequences ---------------------------------------------------- */

typedef struct op {
    uint64_t size, align;
} op;

static uint64_t rng_next(uint64_t *s)
{
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static double rng_unit(uint64_t *s) { return (double)(rng_next(s) >> 11) * 0x1.0p-53; }

typedef struct workload {
    const char *name;
    double lo, hi;          /* sizes: log-uniform in [lo, hi] */
    const uint64_t *aligns; /* picked uniformly */
    int naligns;
} workload;

static const uint64_t small_aligns[] = {16, 64, 256};
static const uint64_t gpu_aligns[] = {256, 4 * KiB, 64 * KiB};
static const workload wl_small = {"small", 64, 4 * KiB, small_aligns, 3};
static const workload wl_gpu = {"gpu-typical", 4 * KiB, 16 * MiB, gpu_aligns, 3};

static void gen_ops(const workload *w, op *ops, size_t n, uint64_t seed)
{
    uint64_t s = seed;
    for (size_t i = 0; i < n; i++) {
        ops[i].size = (uint64_t)exp(log(w->lo) + rng_unit(&s) * (log(w->hi) - log(w->lo)));
        ops[i].align = w->aligns[rng_next(&s) % (uint64_t)w->naligns];
    }
}

/* ---- one interface over both allocators (a predictable branch) --------------- */

typedef struct drv {
    mt_alloc *mt;
    bl_alloc *bl;
} drv;

static int drv_open(drv *d, int baseline, mt_alloc_strategy strat, uint64_t region)
{
    *d = (drv){0};
    if (baseline)
        return (d->bl = bl_create(region, GRANULE)) ? 0 : -ENOMEM;
    mt_alloc_opts o = {.strategy = strat, .min_align = GRANULE};
    uint32_t id;
    int rc = mt_alloc_create(&o, &d->mt);
    return rc ? rc : mt_alloc_add_region(d->mt, region, NULL, &id);
}

static void drv_close(drv *d)
{
    mt_alloc_destroy(d->mt);
    bl_destroy(d->bl);
}

static inline int drv_alloc(drv *d, const op *o, uint64_t *off)
{
    if (d->mt) {
        mt_alloc_block b;
        int rc = mt_alloc_allocate(d->mt, o->size, o->align, MT_ALLOC_LINEAR, &b);
        *off = b.offset;
        return rc;
    }
    return bl_alloc_block(d->bl, o->size, o->align, off);
}

static inline int drv_free(drv *d, uint64_t off, uint64_t size)
{
    return d->mt ? mt_alloc_free(d->mt, 0, off) : bl_free_block(d->bl, off, size);
}

static double drv_fragmentation(const drv *d)
{
    uint64_t free_bytes, largest, n;
    if (d->mt) {
        mt_alloc_stats s;
        mt_alloc_get_stats(d->mt, &s);
        return s.fragmentation;
    }
    bl_stats(d->bl, &free_bytes, &largest, &n);
    return free_bytes ? 1.0 - (double)largest / (double)free_bytes : 0.0;
}

/* Fills with BACKGROUND allocations and frees every other one. */
static int background(drv *d, const workload *w, uint64_t seed)
{
    op ops[BACKGROUND];
    uint64_t off[BACKGROUND];
    gen_ops(w, ops, BACKGROUND, seed);
    for (int i = 0; i < BACKGROUND; i++)
        if (drv_alloc(d, &ops[i], &off[i]) != 0)
            return -ENOSPC;
    for (int i = 0; i < BACKGROUND; i += 2)
        if (drv_free(d, off[i], ops[i].size) != 0)
            return -EINVAL;
    return 0;
}

/* ---- batches ----------------------------------------------------------------- */

/* Median ns per alloc+free pair over `batches` batches; -1 on failure. */
static double run_batches(drv *d, const op *ops, int batches)
{
    uint64_t off[BATCH];
    double *per = malloc((size_t)batches * sizeof *per);
    if (!per)
        return -1;
    for (int pass = 0; pass < 2; pass++) { /* pass 0 warms caches and page tables */
        for (int k = 0; k < batches; k++) {
            const op *o = &ops[(size_t)k * BATCH];
            uint64_t t0 = mt_bench_now_ns();
            for (int i = 0; i < BATCH; i++)
                if (drv_alloc(d, &o[i], &off[i]) != 0) {
                    free(per);
                    return -1;
                }
            for (int i = 0; i < BATCH; i++) {
                int j = (i * 13) % BATCH; /* scrambled, not LIFO */
                drv_free(d, off[j], o[j].size);
            }
            per[k] = (double)(mt_bench_now_ns() - t0) / BATCH;
        }
    }
    double med = mt_bench_median(per, batches);
    free(per);
    return med;
}

/* Random lifetimes: live set of BACKGROUND; each step frees a random one and
 * allocates in its place. Median over batches of BATCH steps. */
static double run_lifetimes(drv *d, const op *ops, const uint32_t *victims, int batches)
{
    uint64_t off[BACKGROUND], size[BACKGROUND];
    for (int i = 0; i < BACKGROUND; i++) {
        if (drv_alloc(d, &ops[i], &off[i]) != 0)
            return -1;
        size[i] = ops[i].size;
    }
    double *per = malloc((size_t)batches * sizeof *per);
    if (!per)
        return -1;
    const op *o = ops + BACKGROUND;
    for (int k = 0; k < batches; k++) {
        uint64_t t0 = mt_bench_now_ns();
        for (int i = 0; i < BATCH; i++, o++) {
            uint32_t v = victims[(size_t)k * BATCH + i];
            drv_free(d, off[v], size[v]);
            if (drv_alloc(d, o, &off[v]) != 0) {
                free(per);
                return -1;
            }
            size[v] = o->size;
        }
        per[k] = (double)(mt_bench_now_ns() - t0) / BATCH;
    }
    double med = mt_bench_median(per, batches);
    free(per);
    return med;
}

static void emit_time(mt_bench_ctx *ctx, const char *name, double ours, double base,
                      const char *target, int met)
{
    mt_bench_row r = {name, "ns_per_pair", ours, "ns", "sorted-list", base, base / ours,
                      target, met};
    mt_bench_emit(ctx, &r);
}

static int bench_single(mt_bench_ctx *ctx, const workload *w, int batches, uint64_t region)
{
    size_t n = (size_t)batches * BATCH;
    op *ops = malloc(n * sizeof *ops);
    if (!ops)
        return -ENOMEM;
    gen_ops(w, ops, n, 42);
    double ns[3]; /* best fit, first fit, baseline */
    for (int v = 0; v < 3; v++) {
        drv d;
        if (drv_open(&d, v == 2, v == 1 ? MT_ALLOC_FIRST_FIT : MT_ALLOC_BEST_FIT, region) ||
            background(&d, w, 7) || (ns[v] = run_batches(&d, ops, batches)) < 0) {
            drv_close(&d);
            free(ops);
            return -ENOSPC;
        }
        drv_close(&d);
    }
    free(ops);
    char name[64];
    snprintf(name, sizeof name, "%s/best-fit", w->name);
    int met = ns[2] / ns[0] >= 5.0;
    if (w == &wl_gpu)
        emit_time(ctx, name, ns[0], ns[2], "<= 50 ns and >= 5x", met && ns[0] <= 50.0);
    else
        emit_time(ctx, name, ns[0], ns[2], ">= 5x", met);
    snprintf(name, sizeof name, "%s/first-fit", w->name);
    emit_time(ctx, name, ns[1], ns[2], ">= 5x", ns[2] / ns[1] >= 5.0);
    return 0;
}

static int bench_lifetimes(mt_bench_ctx *ctx, int batches)
{
    size_t steps = (size_t)batches * BATCH, n = BACKGROUND + steps;
    op *ops = malloc(n * sizeof *ops);
    uint32_t *victims = malloc(steps * sizeof *victims);
    if (!ops || !victims) {
        free(ops);
        free(victims);
        return -ENOMEM;
    }
    /* Sizes across both ranges: 64 B to 16 MiB. */
    workload mix = {"random-lifetime", 64, 16 * MiB, gpu_aligns, 3};
    gen_ops(&mix, ops, n, 99);
    uint64_t s = 5;
    for (size_t i = 0; i < steps; i++)
        victims[i] = (uint32_t)(rng_next(&s) % BACKGROUND);
    double ns[3];
    int rc = 0;
    for (int v = 0; v < 3 && rc == 0; v++) {
        drv d;
        if (drv_open(&d, v == 2, v == 1 ? MT_ALLOC_FIRST_FIT : MT_ALLOC_BEST_FIT, 64 * GiB) ||
            (ns[v] = run_lifetimes(&d, ops, victims, batches)) < 0)
            rc = -ENOSPC;
        drv_close(&d);
    }
    free(ops);
    free(victims);
    if (rc)
        return rc;
    emit_time(ctx, "random-lifetime/best-fit", ns[0], ns[2], ">= 5x", ns[2] / ns[0] >= 5.0);
    emit_time(ctx, "random-lifetime/first-fit", ns[1], ns[2], ">= 5x", ns[2] / ns[1] >= 5.0);
    return 0;
}

/* ---- fragmentation ----------------------------------------------------------- */

typedef struct frag_result {
    double frag;      /* mean over the second half */
    uint64_t failed;  /* allocations refused below the occupancy target */
} frag_result;

static frag_result run_fragmentation(drv *d, uint64_t region, long nops)
{
    enum { MAXLIVE = 8192 };
    static uint64_t off[MAXLIVE], size[MAXLIVE];
    uint64_t s = 11, used = 0, target = region / 10 * 8;
    uint32_t live = 0;
    frag_result r = {0, 0};
    double sum = 0;
    long samples = 0;
    for (long i = 0; i < nops; i++) {
        op o;
        gen_ops(&wl_gpu, &o, 1, rng_next(&s));
        int do_alloc = used + o.size <= target && live < MAXLIVE;
        if (do_alloc && drv_alloc(d, &o, &off[live]) == 0) {
            size[live] = o.size;
            used += (o.size + GRANULE - 1) / GRANULE * GRANULE;
            live++;
        } else {
            r.failed += do_alloc;
            if (live) {
                uint32_t v = (uint32_t)(rng_next(&s) % live);
                drv_free(d, off[v], size[v]);
                used -= (size[v] + GRANULE - 1) / GRANULE * GRANULE;
                off[v] = off[--live];
                size[v] = size[live];
            }
        }
        if (i >= nops / 2 && i % 1000 == 0) {
            sum += drv_fragmentation(d);
            samples++;
        }
    }
    r.frag = samples ? sum / (double)samples : drv_fragmentation(d);
    return r;
}

static int bench_fragmentation(mt_bench_ctx *ctx, long nops)
{
    const uint64_t region = 1 * GiB;
    frag_result r[3];
    for (int v = 0; v < 3; v++) {
        drv d;
        if (drv_open(&d, v == 2, v == 1 ? MT_ALLOC_FIRST_FIT : MT_ALLOC_BEST_FIT, region)) {
            drv_close(&d);
            return -ENOMEM;
        }
        r[v] = run_fragmentation(&d, region, nops);
        drv_close(&d);
    }
    static const char *const names[2] = {"fragmentation/best-fit", "fragmentation/first-fit"};
    for (int v = 0; v < 2; v++) {
        mt_bench_row row = {names[v], "fragmentation", r[v].frag, "", "sorted-list", r[2].frag,
                            r[v].frag / r[2].frag, "<= baseline", r[v].frag <= r[2].frag};
        mt_bench_emit(ctx, &row);
    }
    mt_bench_note(ctx, "%ld ops at 80%% occupancy, gpu-typical sizes in 1 GiB; allocations "
                  "refused: best-fit %llu, first-fit %llu, baseline %llu", nops,
                  (unsigned long long)r[0].failed, (unsigned long long)r[1].failed,
                  (unsigned long long)r[2].failed);
    return 0;
}

/* ---- two threads ------------------------------------------------------------- */

typedef struct xitem {
    uint64_t off, size;
    uint32_t region;
} xitem;

/* Single-producer single-consumer ring between the two threads. */
typedef struct xring {
    _Alignas(64) _Atomic uint32_t head; /* written by the consumer */
    _Alignas(64) _Atomic uint32_t tail; /* written by the producer */
    xitem slot[256];
} xring;

typedef struct xthread {
    int baseline;
    mt_pools *set;
    bl_alloc *bl;
    pthread_mutex_t *lock;
    xring *in, *out;
    const op *ops;
    long n;
    pthread_barrier_t *start;
    _Atomic int *done;
    double ns;
    int err;
} xthread;

static int ring_push(xring *r, const xitem *it)
{
    uint32_t t = atomic_load_explicit(&r->tail, memory_order_relaxed);
    /* acquire: the consumer finished reading the slot before moving head. */
    if (t - atomic_load_explicit(&r->head, memory_order_acquire) == 256)
        return 0;
    r->slot[t % 256] = *it;
    /* release: publishes the slot before the new tail. */
    atomic_store_explicit(&r->tail, t + 1, memory_order_release);
    return 1;
}

static int ring_pop(xring *r, xitem *it)
{
    uint32_t h = atomic_load_explicit(&r->head, memory_order_relaxed);
    /* acquire: pairs with ring_push's release of tail. */
    if (h == atomic_load_explicit(&r->tail, memory_order_acquire))
        return 0;
    *it = r->slot[h % 256];
    /* release: the slot is read before the producer may reuse it. */
    atomic_store_explicit(&r->head, h + 1, memory_order_release);
    return 1;
}

static int x_alloc(xthread *t, mt_pool *p, const op *o, xitem *it)
{
    it->size = o->size;
    if (!t->baseline) {
        mt_alloc_block b;
        int rc = mt_pool_allocate(p, 0, o->size, o->align, MT_ALLOC_LINEAR, &b);
        it->off = b.offset;
        it->region = b.region;
        return rc;
    }
    pthread_mutex_lock(t->lock);
    int rc = bl_alloc_block(t->bl, o->size, o->align, &it->off);
    pthread_mutex_unlock(t->lock);
    return rc;
}

static void x_free(xthread *t, mt_pool *p, const xitem *it)
{
    if (!t->baseline) {
        if (mt_pool_free(p, it->region, it->off) != 0)
            t->err = 1;
        return;
    }
    pthread_mutex_lock(t->lock);
    if (bl_free_block(t->bl, it->off, it->size) != 0)
        t->err = 1;
    pthread_mutex_unlock(t->lock);
}

enum { XLOCAL = 16 };

static void *x_main(void *arg)
{
    xthread *t = arg;
    mt_pool *p = NULL;
    if (!t->baseline && mt_pool_attach(t->set, &p) != 0) {
        t->err = 1;
        return NULL;
    }
    xitem local[XLOCAL], it;
    int nlocal = 0;
    long k = 0;
    pthread_barrier_wait(t->start);
    uint64_t t0 = mt_bench_now_ns();
    for (long i = 0; i < t->n; i++) {
        if (x_alloc(t, p, &t->ops[i], &it) != 0) {
            t->err = 1;
            break;
        }
        /* Every other block goes to the other thread; ours are freed after
         * XLOCAL more of ours (not LIFO). */
        if (!((i & 1) && ring_push(t->out, &it))) {
            if (nlocal == XLOCAL)
                x_free(t, p, &local[k % XLOCAL]);
            else
                nlocal++;
            local[k++ % XLOCAL] = it;
        }
        while (ring_pop(t->in, &it))
            x_free(t, p, &it);
    }
    /* Keep freeing what the other thread sends until it is done too; its
     * pushes happen before its increment of done, so one last drain after
     * seeing 2 gets them all. */
    atomic_fetch_add(t->done, 1);
    for (;;) {
        if (ring_pop(t->in, &it)) {
            x_free(t, p, &it);
        } else if (atomic_load(t->done) == 2) {
            while (ring_pop(t->in, &it))
                x_free(t, p, &it);
            break;
        }
    }
    t->ns = (double)(mt_bench_now_ns() - t0) / (double)t->n;
    for (int i = 0; i < nlocal; i++)
        x_free(t, p, &local[i]);
    if (p) {
        mt_pool_collect(p);
        mt_pool_detach(p);
    }
    return NULL;
}

static int grow_virtual(void *user, uint32_t memtype, uint64_t min_size, uint64_t *size,
                        void **region_user)
{
    (void)user;
    (void)memtype;
    *size = min_size > 64 * GiB ? min_size : 64 * GiB;
    *region_user = NULL;
    return 0;
}

static int run_two(int baseline, const op *ops, long n, double *ns)
{
    static xring rings[2];
    memset(rings, 0, sizeof rings);
    pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
    pthread_barrier_t start;
    pthread_barrier_init(&start, NULL, 2);
    _Atomic int done = 0;
    mt_pools_opts po = {.min_align = GRANULE, .grow = grow_virtual};
    mt_pools *set = NULL;
    bl_alloc *bl = NULL;
    if (baseline ? !(bl = bl_create(128 * GiB, GRANULE)) : mt_pools_create(&po, &set) != 0)
        return -ENOMEM;
    xthread t[2];
    pthread_t th[2];
    for (int i = 0; i < 2; i++) {
        t[i] = (xthread){.baseline = baseline, .set = set, .bl = bl, .lock = &lock,
                         .in = &rings[i], .out = &rings[1 - i], .ops = ops + (size_t)i * (size_t)n,
                         .n = n, .start = &start, .done = &done};
        pthread_create(&th[i], NULL, x_main, &t[i]);
    }
    for (int i = 0; i < 2; i++)
        pthread_join(th[i], NULL);
    int err = t[0].err | t[1].err;
    if (!baseline) {
        /* Every block came back: both pools empty. */
        mt_pool *p;
        for (int i = 0; i < 2 && !err; i++) {
            mt_pool_stats st;
            if (mt_pool_attach(set, &p) != 0 || mt_pool_collect(p) < 0 ||
                mt_pool_get_stats(p, 0, &st) != 0 ||
                st.alloc.allocations != 0 || st.deferred_errors != 0)
                err = 1;
        }
    }
    *ns = t[0].ns > t[1].ns ? t[0].ns : t[1].ns;
    mt_pools_destroy(set);
    bl_destroy(bl);
    pthread_barrier_destroy(&start);
    return err ? -EINVAL : 0;
}

static int bench_threads(mt_bench_ctx *ctx, long n)
{
    op *ops = malloc((size_t)n * 2 * sizeof *ops);
    if (!ops)
        return -ENOMEM;
    gen_ops(&wl_gpu, ops, (size_t)n * 2, 123);
    double ns_pool, ns_base;
    int rc = run_two(0, ops, n, &ns_pool);
    if (rc == 0)
        rc = run_two(1, ops, n, &ns_base);
    free(ops);
    if (rc)
        return rc;
    emit_time(ctx, "2-thread-pools/cross-free", ns_pool, ns_base, ">= 5x", ns_base / ns_pool >= 5.0);
    mt_bench_note(ctx, "2 threads, %ld gpu-typical allocations each, half freed by the other "
                  "thread; baseline: one sorted-list allocator behind a mutex", n);
    return 0;
}

int mt_bench_suite_alloc(mt_bench_ctx *ctx)
{
    int quick = mt_bench_quick(ctx);
    int batches = quick ? 2000 : 20000;
    int rc;
    if ((rc = bench_single(ctx, &wl_small, batches, 64 * MiB)) ||
        (rc = bench_single(ctx, &wl_gpu, batches, 64 * GiB)) ||
        (rc = bench_lifetimes(ctx, batches)) ||
        (rc = bench_threads(ctx, quick ? 100000 : 1000000)) ||
        (rc = bench_fragmentation(ctx, quick ? 100000 : 1000000)))
        return rc;
    mt_bench_note(ctx, "ns_per_pair: median over batches of %d alloc+free pairs; ratio = "
                  "baseline / value (speedup); background: %d allocations, every other freed",
                  BATCH, BACKGROUND);
    return 0;
}
