/* Shared by the alloc benchmarks (suite_alloc.c: time, instructions,
 * threads; alloc_space.c: fragmentation, occupancy, metadata): operation
 * sequences, the workloads, and one driver over mt_alloc and the baseline. */
#ifndef MT_BENCH_ALLOC_BENCH_H
#define MT_BENCH_ALLOC_BENCH_H

#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>

#include "alloc_baseline.h"
#include "bench.h"
#include "memtrack/alloc.h"

#define KiB 1024ull
#define MiB (1024ull * 1024)
#define GiB (1024ull * MiB)
#define BATCH 32
#define LIVE 1000      /* live blocks in random-lifetime */
#define AGE_OPS 20000  /* ageing before timing */
#define MAXLIVE 8192

/* ---- operation sequences ---------------------------------------------------- */

typedef struct op {
    uint64_t size, align;
} op;

static inline uint64_t rng_next(uint64_t *s)
{
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static inline double rng_unit(uint64_t *s) { return (double)(rng_next(s) >> 11) * 0x1.0p-53; }

typedef struct workload {
    const char *name;
    double lo, hi;          /* sizes: log-uniform in [lo, hi] */
    const uint64_t *aligns; /* picked uniformly */
    int naligns;
    uint64_t granule;
    uint64_t region;        /* ~50% holds about 1000 blocks */
} workload;

static const uint64_t small_aligns[] = {16, 64, 256};
static const uint64_t gpu_aligns[] = {256, 4 * KiB, 64 * KiB};
static const workload wl_small = {"small", 64, 4 * KiB, small_aligns, 3, 16, 2 * MiB};
static const workload wl_gpu = {"gpu-typical", 4 * KiB, 16 * MiB, gpu_aligns, 3, 256, 4 * GiB};
static const workload wl_mix = {"random-lifetime", 64, 16 * MiB, gpu_aligns, 3, 256, 4 * GiB};

static inline void gen_ops(const workload *w, op *ops, size_t n, uint64_t seed)
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
    int by_offset; /* mt: free with mt_alloc_free, not mt_alloc_free_block */
} drv;

/* The allocators a case compares. */
typedef enum variant {
    V_BEST_FIT,        /* mt_alloc defaults: best fit, offset map; freed by block */
    V_BEST_FIT_NO_MAP, /* best fit, MT_ALLOC_NO_OFFSET_MAP; freed by block */
    V_FIRST_FIT,       /* first fit, offset map; freed by block */
    V_BASELINE,        /* alloc_baseline.c */
    V_BY_OFFSET,       /* best fit, offset map; freed with mt_alloc_free */
    V_COUNT
} variant;

static const char *const variant_names[V_COUNT] = {"best-fit", "best-fit-no-map", "first-fit",
                                                    "baseline", "best-fit-free-by-offset"};

/* What a caller keeps of an allocation: the block mt_alloc_allocate filled
 * in (its hint lets mt_alloc_free_block skip the offset lookup); the
 * baseline uses the offset alone. */
typedef struct rec {
    mt_alloc_block b;
} rec;

/* A driver for variant v over one region of `region` bytes (0: the
 * workload's). */
static inline int drv_open_v(drv *d, variant v, const workload *w, uint64_t region)
{
    *d = (drv){0};
    region = region ? region : w->region;
    if (v == V_BASELINE)
        return (d->bl = bl_create(region, w->granule)) ? 0 : -ENOMEM;
    mt_alloc_opts o = {.strategy = v == V_FIRST_FIT ? MT_ALLOC_FIRST_FIT : MT_ALLOC_BEST_FIT,
                       .flags = v == V_BEST_FIT_NO_MAP ? MT_ALLOC_NO_OFFSET_MAP : 0,
                       .min_align = w->granule};
    d->by_offset = v == V_BY_OFFSET;
    uint32_t id;
    int rc = mt_alloc_create(&o, &d->mt);
    return rc ? rc : mt_alloc_add_region(d->mt, region, NULL, &id);
}

static inline int drv_open(drv *d, int baseline, mt_alloc_strategy strat, const workload *w)
{
    return drv_open_v(d, baseline ? V_BASELINE : strat == MT_ALLOC_FIRST_FIT ? V_FIRST_FIT : V_BEST_FIT,
                      w, 0);
}

static inline void drv_close(drv *d)
{
    mt_alloc_destroy(d->mt);
    bl_destroy(d->bl);
}

static inline int drv_alloc(drv *d, const op *o, rec *r)
{
    if (d->mt)
        return mt_alloc_allocate(d->mt, o->size, o->align, MT_ALLOC_LINEAR, &r->b);
    return bl_alloc_block(d->bl, o->size, o->align, &r->b.offset);
}

static inline int drv_free(drv *d, const rec *r, uint64_t size)
{
    if (!d->mt)
        return bl_free_block(d->bl, r->b.offset, size);
    if (d->by_offset)
        return mt_alloc_free(d->mt, r->b.region, r->b.offset);
    return mt_alloc_free_block(d->mt, &r->b);
}

static inline double drv_fragmentation(const drv *d)
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

/* Live blocks of a driver, in no particular order. */
typedef struct liveset {
    rec rec[MAXLIVE];
    uint64_t size[MAXLIVE];
    uint32_t n;
    uint64_t used, target;
} liveset;

static inline void live_drop(drv *d, liveset *l, uint32_t v)
{
    drv_free(d, &l->rec[v], l->size[v]);
    l->used -= l->size[v];
    l->n--;
    l->rec[v] = l->rec[l->n];
    l->size[v] = l->size[l->n];
}

/* One random op holding occupancy near l->target: allocate while below it
 * (and the allocator agrees), else free a random block. The size does not
 * decide (that would keep only small blocks live near the target). Returns
 * 1 for an allocation refused below the target. */
static inline int churn_step(drv *d, liveset *l, const workload *w, uint64_t *s)
{
    op o;
    gen_ops(w, &o, 1, rng_next(s));
    int want = l->used < l->target && l->n < MAXLIVE;
    if (want && drv_alloc(d, &o, &l->rec[l->n]) == 0) {
        l->size[l->n++] = o.size;
        l->used += o.size;
        return 0;
    }
    if (l->n)
        live_drop(d, l, (uint32_t)(rng_next(s) % l->n));
    return want;
}

/* Ages the region: AGE_OPS random ops at 50% occupancy (same sequence for
 * every allocator; they may diverge a little where one refuses). */
static inline liveset *age(drv *d, const workload *w)
{
    liveset *l = calloc(1, sizeof *l);
    if (!l)
        return NULL;
    l->target = w->region / 2;
    uint64_t s = 7;
    for (int i = 0; i < AGE_OPS; i++)
        churn_step(d, l, w, &s);
    return l;
}

/* alloc_space.c: the fragmentation, occupancy and metadata cases. */
int mt_bench_alloc_space(mt_bench_ctx *ctx);

#endif
