/* memtrack bench track: first-write and collect cost of the two backends over
 * the same region in the same run.
 *
 * first-write: the region is populated beforehand (so page population is not
 * measured), armed, then one byte is written per page, in address order or
 * in a random permutation, by 1 or 2 threads. Cost = wall time / pages.
 * collect: the region is armed, 0%, 1% (scattered) or 100% of its pages are
 * written, and collect is timed until it has reported everything.
 * Cost = time / tracked pages. uffd rows carry signal as their baseline and
 * the ratio uffd/signal; the 1% collect is also timed with 1 and 3 other
 * threads of the process running (baseline: that backend alone). The
 * interposer's per-call cost against plain libc calls
 * (suite_track_preload.c) and the cost of reading memory someone guards
 * against reads (suite_track_guarded.c) close the suite. */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "memtrack/track.h"
#include "suites.h"

typedef struct region {
    unsigned char *mem;
    size_t npages, page;
    size_t *order; /* page visiting order for "random" */
} region;

typedef struct wjob {
    region *r;
    size_t from, to; /* indices into the order */
    int random;
    pthread_barrier_t *start;
} wjob;

static void *write_pages(void *arg)
{
    wjob *j = arg;
    pthread_barrier_wait(j->start);
    for (size_t i = j->from; i < j->to; i++) {
        size_t p = j->random ? j->r->order[i] : i;
        j->r->mem[p * j->r->page] = (unsigned char)i;
    }
    return NULL;
}

/* Drains every dirty run; returns pages reported. */
static size_t drain(mt_tracker *t, mt_range_id id)
{
    static mt_dirty_run runs[1024];
    size_t pages = 0;
    long n;
    do {
        n = mt_tracker_collect(t, id, runs, 1024);
        if (n < 0)
            return 0;
        for (long i = 0; i < n; i++)
            pages += runs[i].length;
    } while (n == 1024);
    return pages;
}

/* A tracker with the whole region as one range; NULL if the backend refuses. */
static mt_tracker *arm_region(region *r, mt_track_backend b, mt_range_id *id)
{
    mt_tracker_opts o = {.backend = b};
    mt_tracker *t;
    if (mt_tracker_create(&o, &t) != 0)
        return NULL;
    if (mt_tracker_add(t, r->mem, r->npages * r->page, NULL, id) != 0) {
        mt_tracker_destroy(t);
        return NULL;
    }
    return t;
}

static double first_write_ns(region *r, mt_track_backend b, int threads, int random, int reps)
{
    mt_range_id id;
    mt_tracker *t = arm_region(r, b, &id);
    if (!t)
        return NAN;
    double v[8];
    for (int rep = 0; rep < reps; rep++) {
        pthread_barrier_t start;
        pthread_barrier_init(&start, NULL, (unsigned)threads + 1);
        pthread_t th[2];
        wjob jobs[2];
        for (int k = 0; k < threads; k++) {
            jobs[k] = (wjob){r, r->npages * (size_t)k / (size_t)threads,
                             r->npages * (size_t)(k + 1) / (size_t)threads, random, &start};
            pthread_create(&th[k], NULL, write_pages, &jobs[k]);
        }
        pthread_barrier_wait(&start);
        uint64_t t0 = mt_bench_now_ns();
        for (int k = 0; k < threads; k++)
            pthread_join(th[k], NULL);
        uint64_t t1 = mt_bench_now_ns();
        pthread_barrier_destroy(&start);
        v[rep] = (double)(t1 - t0) / (double)r->npages;
        drain(t, id); /* re-arm for the next repetition */
    }
    mt_tracker_destroy(t);
    return mt_bench_median(v, reps);
}

static void *spin(void *arg)
{
    while (!atomic_load_explicit((atomic_int *)arg, memory_order_relaxed))
        ;
    return NULL;
}

/* `running`: threads of this process kept running (spinning) meanwhile, as
 * an application's threads run beside a collect: the uffd scan's TLB
 * flushes interrupt each CPU that runs one, the signal backend's re-arming
 * mprotect too. */
static double collect_ns(region *r, mt_track_backend b, double fraction, int reps, int running)
{
    mt_range_id id;
    mt_tracker *t = arm_region(r, b, &id);
    if (!t)
        return NAN;
    atomic_int stop = 0;
    pthread_t th[4];
    int nth = 0;
    while (nth < running && nth < 4 && pthread_create(&th[nth], NULL, spin, &stop) == 0)
        nth++;
    size_t ndirty = (size_t)((double)r->npages * fraction);
    double v[8];
    for (int rep = 0; rep < reps; rep++) {
        for (size_t i = 0; i < ndirty; i++)
            r->mem[r->order[i] * r->page + 1] = (unsigned char)rep;
        uint64_t t0 = mt_bench_now_ns();
        drain(t, id);
        uint64_t t1 = mt_bench_now_ns();
        v[rep] = (double)(t1 - t0) / (double)r->npages;
    }
    atomic_store(&stop, 1);
    for (int k = 0; k < nth; k++)
        pthread_join(th[k], NULL);
    mt_tracker_destroy(t);
    return nth == running ? mt_bench_median(v, reps) : NAN;
}

static void emit_pair(mt_bench_ctx *ctx, const char *what, double sig, double uffd,
                      const char *target_text, int target_met)
{
    char name[96];
    snprintf(name, sizeof name, "%s/signal", what);
    mt_bench_emit_value(ctx, name, "ns_per_page", sig, "ns");
    if (isnan(uffd))
        return;
    snprintf(name, sizeof name, "%s/uffd", what);
    mt_bench_row row = {name, "ns_per_page", uffd, "ns", "signal", sig, uffd / sig, target_text,
                        target_text ? target_met : -1};
    mt_bench_emit(ctx, &row);
}

int mt_bench_suite_track(mt_bench_ctx *ctx)
{
    int quick = mt_bench_quick(ctx);
    region r;
    r.page = (size_t)sysconf(_SC_PAGESIZE);
    size_t bytes = (size_t)(quick ? 32 : 256) << 20;
    r.npages = bytes / r.page;
    r.mem = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    r.order = malloc(r.npages * sizeof *r.order);
    if (r.mem == MAP_FAILED || !r.order)
        return 1;
    memset(r.mem, 1, bytes); /* populate: measure tracking, not page allocation */
    uint64_t s = 0x5eed;
    for (size_t i = 0; i < r.npages; i++)
        r.order[i] = i;
    for (size_t i = r.npages - 1; i > 0; i--) { /* Fisher-Yates */
        s = s * 6364136223846793005ull + 1442695040888963407ull;
        size_t j = (size_t)((s >> 33) % (i + 1));
        size_t tmp = r.order[i];
        r.order[i] = r.order[j];
        r.order[j] = tmp;
    }
    int uffd = mt_track_backend_available(MT_TRACK_UFFD);
    int reps = quick ? 3 : 5;
    mt_bench_note(ctx, "region %zu MiB (%zu pages), uffd %savailable, median of %d runs",
                  bytes >> 20, r.npages, uffd ? "" : "NOT ", reps);

    static const char *orders[2] = {"seq", "random"};
    for (int threads = 1; threads <= 2; threads++)
        for (int random = 0; random <= 1; random++) {
            double sig = first_write_ns(&r, MT_TRACK_SIGNAL, threads, random, reps);
            double uf = uffd ? first_write_ns(&r, MT_TRACK_UFFD, threads, random, reps) : NAN;
            char what[64];
            snprintf(what, sizeof what, "first-write/%s/%dT", orders[random], threads);
            emit_pair(ctx, what, sig, uf, "uffd/signal < 1", uf < sig);
        }

    static const double fractions[3] = {0.0, 0.01, 1.0};
    static const char *fnames[3] = {"0%", "1%", "100%"};
    double alone1[2] = {NAN, NAN}; /* the 1% collect alone: signal, uffd */
    for (int f = 0; f < 3; f++) {
        double sig = collect_ns(&r, MT_TRACK_SIGNAL, fractions[f], reps, 0);
        double uf = uffd ? collect_ns(&r, MT_TRACK_UFFD, fractions[f], reps, 0) : NAN;
        if (f == 1) {
            alone1[0] = sig;
            alone1[1] = uf;
        }
        char what[64];
        snprintf(what, sizeof what, "collect/%s-dirty", fnames[f]);
        if (f == 0) {
            /* The clean-region target applies to each backend on its own. */
            mt_bench_row row = {"collect/0%-dirty/signal", "ns_per_page", sig, "ns", NULL, NAN,
                                NAN, "<= 100 ns/page", sig <= 100.0};
            mt_bench_emit(ctx, &row);
            if (uffd) {
                mt_bench_row row2 = {"collect/0%-dirty/uffd", "ns_per_page", uf, "ns", "signal",
                                     sig, uf / sig, "<= 100 ns/page", uf <= 100.0};
                mt_bench_emit(ctx, &row2);
            }
        } else {
            emit_pair(ctx, what, sig, uf, NULL, -1);
        }
    }
    /* The same 1% collect with other threads of the process running: what
     * a collect costs inside a busy application (docs/coherence.md, "Limits
     * and open points"). Baseline: that backend's 1% collect alone, from
     * the rows above. Needs a CPU per running thread besides the
     * collecting one. */
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    for (int running = 1; running <= 3; running += 2) {
        if (cpus < running + 1)
            break;
        for (int bi = 0; bi < 2; bi++) {
            mt_track_backend b = bi ? MT_TRACK_UFFD : MT_TRACK_SIGNAL;
            if (bi && !uffd)
                continue;
            double alone = alone1[bi];
            double busy = collect_ns(&r, b, 0.01, reps, running);
            char name[96];
            snprintf(name, sizeof name, "collect/1%%-dirty/%s+%d-running", bi ? "uffd" : "signal",
                     running);
            mt_bench_row row = {name, "ns_per_page", busy, "ns", "alone", alone, busy / alone,
                                NULL, -1};
            mt_bench_emit(ctx, &row);
        }
    }
    munmap(r.mem, bytes);
    free(r.order);
    int rc = mt_bench_track_preload(ctx);
    return mt_bench_track_guarded(ctx) || rc;
}
