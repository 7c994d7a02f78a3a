/* memtrack bench trace: the trace writer.
 *
 * Throughput: MB/s of update-packet bytes through the writer, end to end
 * (open until close returns, so everything is in the file), for each
 * compression preset and compressor thread count, on two data sets: "mix"
 * (uniform updates, vertex ranges, texture tiles: compressible) and "dense"
 * (4 MiB updates of random bytes, like memtrack-sample's dense workload:
 * incompressible). Baseline: one compressor thread with the same preset, in
 * the same run. Target (issue 12): >= 3 GB/s of update bytes on the GPU
 * host. Also the compression ratio per preset and the callers' stalls, and
 * for DEFAULT the share of chunks it compressed at FAST's level because the
 * compressors were behind ("level1": the same without that adaptation). 
 *
 * Seal interval: submit-heavy workloads (tiny submits, paced at 10000/s and
 * at 60/s) with seal_interval_ms 0 (full chunks only: the baseline), 1, 10,
 * 100: CPU time of the whole process per submit (callers and compressors,
 * pacing included: compare with the baseline), time inside the writer calls
 * per submit, and bytes of the closed trace per submit (small chunks carry a
 * header each and compress worse). */
#define _GNU_SOURCE
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "memtrack/trace.h"
#include "suites.h"

static uint64_t rnd(uint64_t *s)
{
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/* ---- data sets -------------------------------------------------------------- */

typedef struct dataset {
    const char *name;
    uint8_t *uniform, *vertex, *texture; /* mix */
    uint8_t *random;                      /* dense */
    size_t nu, nv, nt, nr;
} dataset;

static void mix_init(dataset *d)
{
    *d = (dataset){.name = "mix", .nu = 1 << 16, .nv = 1 << 20, .nt = 1 << 20};
    d->uniform = malloc(d->nu), d->vertex = malloc(d->nv), d->texture = malloc(d->nt);
    if (!d->uniform || !d->vertex || !d->texture)
        abort();
    uint64_t s = 7;
    float *u = (float *)d->uniform, *v = (float *)d->vertex;
    for (size_t i = 0; i < d->nu / 4; i++) /* matrices: rotations, identity-like */
        u[i] = (i % 5 == 0) ? 1.0f : (float)sin((double)i * 0.01) * 0.5f;
    for (size_t i = 0; i < d->nv / 4; i++) /* positions/normals of a mesh */
        v[i] = (float)(cos((double)(i / 3) * 0.002) * (1 + (i % 3)));
    for (size_t i = 0; i < d->nt; i++) /* gradient texture with noise */
        d->texture[i] = (uint8_t)((i % 4 == 3) ? 255 : (i / 4 % 256) / 2 + (rnd(&s) % 8));
}

static void dense_init(dataset *d)
{
    *d = (dataset){.name = "dense", .nr = 32u << 20};
    d->random = malloc(d->nr);
    if (!d->random)
        abort();
    uint64_t s = 11;
    for (size_t i = 0; i < d->nr; i += 8) {
        uint64_t v = rnd(&s);
        memcpy(d->random + i, &v, 8);
    }
}

static void dataset_free(dataset *d)
{
    free(d->uniform), free(d->vertex), free(d->texture), free(d->random);
}

/* One submit's packets; returns the update bytes written. */
static size_t write_submit(mt_trace_writer *w, const dataset *d, uint64_t *s)
{
    size_t bytes = 0;
    if (d->random) { /* 29 MiB rewritten in 4 MiB updates, as the sample's dense frames */
        for (size_t off = 0; off + (4u << 20) <= d->nr && bytes < (29u << 20); off += 4u << 20) {
            mt_trace_write_update(w, 1, 2, off, d->random + off, 4u << 20);
            bytes += 4u << 20;
        }
    } else {
        for (int p = 0; p < 40; p++) {
            uint64_t k = rnd(s) % 100;
            size_t len, off;
            const uint8_t *src;
            if (k < 60)
                len = 64 + 16 * (rnd(s) % 13), off = rnd(s) % (d->nu - len), src = d->uniform + off;
            else if (k < 92)
                len = 4096, off = 4 * (rnd(s) % ((d->nv - len) / 4)), src = d->vertex + off;
            else
                len = 65536, off = rnd(s) % (d->nt - len), src = d->texture + off;
            mt_trace_write_update(w, 1, 1 + k % 7, off, src, len);
            bytes += len;
        }
    }
    mt_trace_write_content_hash(w, 1, 0, 64u << 20, rnd(s));
    mt_trace_write_submit(w, 0, NULL);
    return bytes;
}

typedef struct wresult {
    double mbps, ratio; /* update MB/s; raw bytes / file bytes */
    uint64_t stalls;
    double fast_share; /* chunks the DEFAULT preset compressed at FAST's level */
} wresult;

static wresult write_run(const dataset *d, const char *path, const mt_trace_writer_opts *o, size_t total)
{
    mt_trace_writer *w;
    if (mt_trace_writer_open(path, o, &w))
        abort();
    uint64_t s = 99, bytes = 0, t0 = mt_bench_now_ns();
    mt_trace_write_memory(w, 1, 64u << 20, 2, 0xe);
    while (bytes < total)
        bytes += write_submit(w, d, &s);
    /* Everything compressed and written before the stats are read (close
     * would do the same work, inside the timing either way). */
    if (mt_trace_writer_flush(w))
        abort();
    mt_trace_writer_stats st;
    mt_trace_writer_stats_get(w, &st);
    if (mt_trace_writer_close(w))
        abort();
    uint64_t ns = mt_bench_now_ns() - t0;
    struct stat sb;
    stat(path, &sb);
    unlink(path); /* the next run starts from an empty file, not a truncation */
    return (wresult){(double)bytes / (double)ns * 1e3, (double)st.raw_bytes / (double)sb.st_size,
                     st.stalls, st.chunks ? (double)st.fast_chunks / (double)st.chunks : 0};
}

static void bench_throughput(mt_bench_ctx *ctx, const dataset *d, const char *path, size_t total, int reps)
{
    static const unsigned threads[] = {1, 2, 4, 8};
    long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
    /* Presets, then "level1": DEFAULT's level for every chunk (no
     * adaptation), to show what the adaptation buys and costs. */
    for (int preset = 0; preset < 4; preset++) {
        int level1 = preset == 3;
        double base = NAN;
        for (size_t ti = 0; ti < sizeof threads / sizeof threads[0]; ti++) {
            unsigned t = threads[ti];
            /* Stored raw, a thread only hashes and writes: the writer uses
             * at most two; and no more threads than CPUs. */
            if ((preset == MT_TRACE_COMPRESSION_NONE && t > 2) || (t > 1 && (long)t > ncpu))
                continue;
            mt_trace_writer_opts o = {.compression = level1 ? MT_TRACE_COMPRESSION_DEFAULT
                                                            : (mt_trace_compression)preset,
                                      .level = level1 ? 1 : 0, .threads = t};
            double v[16], r = 0, fast = 0;
            uint64_t stalls = 0;
            for (int k = 0; k < reps; k++) {
                wresult res = write_run(d, path, &o, total);
                v[k] = res.mbps, r = res.ratio, stalls = res.stalls, fast = res.fast_share;
            }
            double mbps = mt_bench_median(v, reps);
            if (t == 1)
                base = mbps;
            char name[96];
            snprintf(name, sizeof name, "trace-write/%s/%s/%u-threads", d->name,
                     level1 ? "level1" : mt_trace_compression_name((mt_trace_compression)preset), t);
            mt_bench_row row = {name, "throughput", mbps, "MB/s", "1 thread", base, mbps / base,
                                ">= 3000 MB/s (GPU host)", mbps >= 3000};
            mt_bench_emit(ctx, &row);
            mt_bench_emit_value(ctx, name, "compression", r, "x");
            if (preset == MT_TRACE_COMPRESSION_DEFAULT)
                mt_bench_emit_value(ctx, name, "fast-chunks", 100 * fast, "%");
            mt_bench_emit_value(ctx, name, "stalls", (double)stalls, "waits");
        }
    }
}

/* ---- seal interval on submit-heavy workloads -------------------------------- */

static double cpu_s(void)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return (double)ru.ru_utime.tv_sec + (double)ru.ru_utime.tv_usec * 1e-6 +
           (double)ru.ru_stime.tv_sec + (double)ru.ru_stime.tv_usec * 1e-6;
}

typedef struct sresult {
    double cpu_us, call_us, file_bytes; /* per submit */
} sresult;

/* Tiny submits (three 64-byte updates, a content hash, the submit) paced at
 * `rate` per second for `seconds`. */
static sresult seal_run(const char *path, unsigned interval, double rate, double seconds)
{
    mt_trace_writer_opts o = {.seal_interval_ms = interval};
    mt_trace_writer *w;
    if (mt_trace_writer_open(path, &o, &w))
        abort();
    uint8_t data[64];
    memset(data, 0x5a, sizeof data);
    mt_trace_write_memory(w, 1, 1u << 20, 2, 0xe);
    uint64_t period = (uint64_t)(1e9 / rate), n = (uint64_t)(rate * seconds), in_calls = 0;
    double c0 = cpu_s();
    struct timespec next;
    clock_gettime(CLOCK_MONOTONIC, &next);
    for (uint64_t i = 0; i < n; i++) {
        uint64_t t0 = mt_bench_now_ns();
        for (int k = 0; k < 3; k++) {
            data[0] = (uint8_t)i;
            mt_trace_write_update(w, 1, 0, (uint64_t)k * 4096 + (i % 64) * 64, data, sizeof data);
        }
        mt_trace_write_content_hash(w, 1, 0, 1u << 20, i);
        mt_trace_write_submit(w, 0, NULL);
        in_calls += mt_bench_now_ns() - t0;
        next.tv_nsec += (long)period;
        while (next.tv_nsec >= 1000000000) {
            next.tv_sec++;
            next.tv_nsec -= 1000000000;
        }
        clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &next, NULL);
    }
    double cpu = cpu_s() - c0; /* before close: the steady state only */
    if (mt_trace_writer_close(w))
        abort();
    struct stat sb;
    stat(path, &sb);
    unlink(path);
    return (sresult){cpu / (double)n * 1e6, (double)in_calls / (double)n / 1e3,
                     (double)sb.st_size / (double)n};
}

static void bench_seal(mt_bench_ctx *ctx, const char *path, int quick)
{
    static const unsigned intervals[] = {0, 1, 10, 100};
    static const double rates[] = {10000, 60};
    for (int ri = 0; ri < 2; ri++) {
        double seconds = ri == 0 ? (quick ? 0.3 : 1.0) : (quick ? 1.0 : 2.0);
        sresult base = {0};
        for (int ii = 0; ii < 4; ii++) {
            sresult r = seal_run(path, intervals[ii], rates[ri], seconds);
            if (ii == 0)
                base = r;
            char name[96];
            snprintf(name, sizeof name, "seal/%g-per-s/%ums", rates[ri], intervals[ii]);
            mt_bench_row row = {name, "cpu_per_submit", r.cpu_us, "us", "full chunks only",
                                base.cpu_us, r.cpu_us / base.cpu_us, NULL, -1};
            mt_bench_emit(ctx, &row);
            mt_bench_emit_value(ctx, name, "in_calls_per_submit", r.call_us, "us");
            mt_bench_emit_value(ctx, name, "file_bytes_per_submit", r.file_bytes, "B");
        }
    }
}

int mt_bench_suite_trace(mt_bench_ctx *ctx)
{
    int quick = mt_bench_quick(ctx);
    char path[256];
    const char *dir = getenv("TMPDIR");
    snprintf(path, sizeof path, "%s/mt-bench-trace-%d.mtrace", dir && *dir ? dir : "/tmp", (int)getpid());
    size_t total = quick ? (32u << 20) : (256u << 20);
    int reps = quick ? 1 : 3;
    mt_bench_note(ctx, "trace writer, end to end into %s; %zu MiB of update bytes per run, median of %d; "
                       "1 MiB chunks; %ld CPUs online",
                  path, total >> 20, reps, sysconf(_SC_NPROCESSORS_ONLN));
    dataset d;
    mix_init(&d);
    bench_throughput(ctx, &d, path, total, reps);
    dataset_free(&d);
    dense_init(&d);
    bench_throughput(ctx, &d, path, total, reps);
    dataset_free(&d);
    mt_bench_note(ctx, "seal interval: tiny submits (3 x 64 B updates, a hash, the submit) paced; "
                       "CPU = the whole process (callers and compressors)");
    bench_seal(ctx, path, quick);
    return 0;
}
