/* memtrack bench track, guarded-read part: what a capture pays to read
 * memory someone protects against reads (docs/track.md, "Reading memory
 * someone guards"), in the same run:
 *  - readable/cached: mt_track_readable with an all-readable answer cached
 *    (the check every capture of every memory makes);
 *  - readable/fresh: the same with nothing cached (the first capture of a
 *    mapping, or the first after the process took reads away somewhere): a
 *    look at the kernel's list of mappings, PROCMAP_QUERY or the text;
 *  - read-guarded: mt_track_read_guarded of a 16 MiB region whose every
 *    other 64 KiB is PROT_NONE, in one span and in 4 KiB spans every 64 KiB
 *    (a diff's candidate pages), against memcpy of the same bytes from a
 *    readable copy (the in-place read it replaces). */
#define _GNU_SOURCE
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "memtrack/track.h"
#include "suites.h"

#define REGION (16u << 20)
#define STRIDE (64u << 10)

static double per_call_ns(const unsigned char *p, size_t len, int fresh, int calls)
{
    uint64_t seen = 0;
    volatile int sink = 0;
    uint64_t t0 = mt_bench_now_ns();
    for (int i = 0; i < calls; i++) {
        if (fresh)
            seen = 0;
        sink += mt_track_readable(p, len, &seen);
    }
    (void)sink;
    return (double)(mt_bench_now_ns() - t0) / calls;
}

int mt_bench_track_guarded(mt_bench_ctx *ctx)
{
    int quick = mt_bench_quick(ctx), reps = quick ? 3 : 7;
    unsigned char *p = mmap(NULL, REGION, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    unsigned char *dst = malloc(REGION), *plain = malloc(REGION);
    mt_track_span *pages = malloc((REGION / STRIDE) * sizeof *pages);
    if (p == MAP_FAILED || !dst || !plain || !pages) {
        free(dst), free(plain), free(pages);
        return 1;
    }
    memset(p, 7, REGION);
    memset(plain, 7, REGION);
    memset(dst, 0, REGION); /* populated: the copies, not page faults, are timed */

    double v[7];
    for (int r = 0; r < reps; r++)
        v[r] = per_call_ns(p, REGION, 0, quick ? 100000 : 1000000);
    mt_bench_emit_value(ctx, "guarded/readable/cached", "ns_per_call", mt_bench_median(v, reps), "ns");
    for (int r = 0; r < reps; r++)
        v[r] = per_call_ns(p, REGION, 1, quick ? 200 : 2000) / 1000.0;
    mt_bench_emit_value(ctx, "guarded/readable/fresh", "us_per_call", mt_bench_median(v, reps), "us");

    for (size_t off = STRIDE; off < REGION; off += 2 * STRIDE)
        mprotect(p + off, STRIDE, PROT_NONE);
    size_t np = REGION / STRIDE;
    for (size_t i = 0; i < np; i++)
        pages[i] = (mt_track_span){i * STRIDE, 4096};
    static const char *names[2] = {"guarded/read/16MiB-one-span", "guarded/read/4KiB-per-64KiB"};
    for (int k = 0; k < 2; k++) {
        mt_track_span whole = {0, REGION};
        const mt_track_span *sp = k ? pages : &whole;
        size_t n = k ? np : 1, bytes = k ? np * 4096 : REGION;
        double g[7], b[7];
        for (int r = 0; r < reps; r++) {
            uint64_t t0 = mt_bench_now_ns();
            if (mt_track_read_guarded(dst, p, sp, n) != 0) {
                mt_bench_note(ctx, "read_guarded refused: guarded rows skipped");
                goto out;
            }
            uint64_t t1 = mt_bench_now_ns();
            for (size_t i = 0; i < n; i++)
                memcpy(dst + sp[i].offset, plain + sp[i].offset, sp[i].length);
            uint64_t t2 = mt_bench_now_ns();
            g[r] = (double)(t1 - t0) / (double)(bytes / 4096);
            b[r] = (double)(t2 - t1) / (double)(bytes / 4096);
        }
        double gm = mt_bench_median(g, reps), bm = mt_bench_median(b, reps);
        mt_bench_row row = {names[k], "ns_per_page", gm, "ns", "memcpy", bm, gm / bm, NULL, -1};
        mt_bench_emit(ctx, &row);
    }
out:
    munmap(p, REGION);
    free(dst), free(plain), free(pages);
    return 0;
}
