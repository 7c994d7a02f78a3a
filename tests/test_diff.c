/* diff: exact results against a byte-by-byte reference, for every compare
 * kernel this CPU runs. Random buffers and edits (seeded): the runs reported
 * cover exactly the changed bytes, obey the merge-gap bounds, resume
 * correctly when the output array is small, bring the shadow up to date,
 * write back only changed bytes, and apply(diff(a -> b)) == b. */
#include <errno.h>
#include <stdlib.h>

#include "diff/kernel.h"
#include "memtrack/diff.h"
#include "mt_test.h"

static uint64_t rng;

/* Exact runs of differing bytes of a vs b over [0, n): the reference. */
static size_t ref_runs(const uint8_t *a, const uint8_t *b, size_t n, mt_diff_region *out)
{
    size_t k = 0;
    for (size_t i = 0; i < n;) {
        if (a[i] == b[i]) {
            i++;
            continue;
        }
        size_t s = i;
        while (i < n && a[i] != b[i])
            i++;
        out[k].offset = s;
        out[k].length = i - s;
        k++;
    }
    return k;
}

/* Merges exact runs separated by fewer than gap bytes. */
static size_t ref_merge(mt_diff_region *r, size_t n, size_t gap)
{
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        if (k > 0 && r[i].offset - (r[k - 1].offset + r[k - 1].length) < gap)
            r[k - 1].length = r[i].offset + r[i].length - r[k - 1].offset;
        else
            r[k++] = r[i];
    }
    return k;
}

/* The runs equal the reference, run by run. */
static void check_same_runs(const mt_diff_region *got, size_t ngot, const mt_diff_region *ref, size_t nref)
{
    MT_CHECK_UINT_EQ(ngot, nref);
    for (size_t i = 0; i < nref; i++) {
        MT_CHECK_UINT_EQ(got[i].offset, ref[i].offset);
        MT_CHECK_UINT_EQ(got[i].length, ref[i].length);
    }
}

/* Random edits of several shapes: scattered bytes, short runs, long blocks. */
static void edit(uint8_t *buf, size_t n)
{
    if (n == 0)
        return;
    size_t nedits = mt_test_below(&rng, 40);
    for (size_t e = 0; e < nedits; e++) {
        size_t shape = mt_test_below(&rng, 3);
        size_t len = shape == 0 ? 1 : shape == 1 ? 1 + mt_test_below(&rng, 80) : 1 + mt_test_below(&rng, 3000);
        size_t off = mt_test_below(&rng, n);
        if (len > n - off)
            len = n - off;
        for (size_t i = 0; i < len; i++)
            buf[off + i] = (uint8_t)(buf[off + i] + 1 + mt_test_below(&rng, 255)); /* always changes */
    }
}

/* Candidates covering every changed byte: the "pages" (size 256 here) that
 * hold a change, merged into runs, plus some random clean pages. */
static size_t candidates(const uint8_t *a, const uint8_t *b, size_t n, mt_diff_region *out)
{
    const size_t pg = 256;
    size_t k = 0;
    for (size_t p = 0; p < n; p += pg) {
        size_t len = n - p < pg ? n - p : pg;
        int dirty = memcmp(a + p, b + p, len) != 0 || mt_test_below(&rng, 10) == 0;
        if (!dirty)
            continue;
        if (k > 0 && out[k - 1].offset + out[k - 1].length == p)
            out[k - 1].length += len;
        else
            out[k++] = (mt_diff_region){p, len};
    }
    return k;
}

static void check_runs_against(const mt_diff_region *got, size_t ngot, const uint8_t *old,
                               const uint8_t *cur, size_t n, size_t gap, size_t maxcall)
{
    /* Every run starts and ends on a changed byte, lies inside the range,
     * and holds no unchanged stretch of gap bytes or more; runs are sorted and
     * cover every changed byte. */
    uint8_t *covered = calloc(n + 1, 1);
    MT_CHECK(covered);
    for (size_t i = 0; i < ngot; i++) {
        const mt_diff_region *r = &got[i];
        MT_CHECK(r->length > 0 && r->offset + r->length <= n);
        MT_CHECK(old[r->offset] != cur[r->offset]);
        MT_CHECK(old[r->offset + r->length - 1] != cur[r->offset + r->length - 1]);
        if (i > 0)
            MT_CHECK(r->offset >= got[i - 1].offset + got[i - 1].length);
        size_t same = 0;
        for (size_t j = r->offset; j < r->offset + r->length; j++) {
            covered[j] = 1;
            same = old[j] == cur[j] ? same + 1 : 0;
            MT_CHECK(same < gap);
        }
    }
    for (size_t j = 0; j < n; j++)
        if (old[j] != cur[j])
            MT_CHECK(covered[j]);
    free(covered);
    (void)maxcall;
}

static void one_case(const mt_diff_kernel *k, size_t n, size_t gap, size_t maxcall, int use_cand)
{
    /* Odd offsets inside the allocations: kernels must not assume alignment. */
    size_t skew = mt_test_below(&rng, 64);
    uint8_t *oldb = malloc(n + 64), *curb = malloc(n + 64), *shb = malloc(n + 64);
    uint8_t *gpub = malloc(n + 64), *gpu0b = malloc(n + 64);
    MT_CHECK(oldb && curb && shb && gpub && gpu0b);
    uint8_t *old = oldb + skew, *cur = curb + skew, *shadow = shb + skew, *gpu = gpub + skew,
            *gpu0 = gpu0b + skew;
    for (size_t i = 0; i < n; i++)
        old[i] = (uint8_t)(mt_test_below(&rng, 4) == 0 ? mt_test_rand(&rng) : 0);
    memcpy(cur, old, n);
    edit(cur, n);
    memcpy(shadow, old, n);
    /* The driver mapping: the old content plus "GPU writes" to bytes the
     * application did not change; write-back must not touch those. */
    memcpy(gpu, old, n);
    for (size_t i = 0; n && i < 20; i++) {
        size_t j = mt_test_below(&rng, n);
        if (cur[j] == old[j])
            gpu[j] = (uint8_t)(gpu[j] ^ 0x5a);
    }
    memcpy(gpu0, gpu, n);

    mt_diff_region *cand = malloc((n / 256 + 2) * sizeof *cand);
    mt_diff_region *got = malloc((n + 1) * sizeof *got), *ref = malloc((n + 1) * sizeof *ref);
    MT_CHECK(cand && got && ref);
    size_t ncand = use_cand ? candidates(old, cur, n, cand) : 0;

    int use_wb = (int)mt_test_below(&rng, 2); /* without: the dense loop for gaps >= 32 */
    mt_diff_job job = {.live = cur, .shadow = shadow, .size = n, .candidates = use_cand ? cand : NULL,
                       .ncandidates = ncand, .writeback = use_wb ? gpu : NULL};
    /* Half the time live is read as write-combined memory: through a
     * buffer, a stretch at a time (the same runs, shadow and write-back). */
    mt_diff_opts opts = {.merge_gap = gap, .flags = mt_test_below(&rng, 2) ? MT_DIFF_LIVE_WC : 0u};
    size_t ngot = 0, calls = 0;
    while (job.cursor < n) {
        long r = mt_diff(&job, &opts, got + ngot, maxcall);
        MT_CHECK_OK(r);
        MT_CHECK((size_t)r <= maxcall);
        if ((size_t)r < maxcall)
            MT_CHECK_UINT_EQ(job.cursor, n);
        ngot += (size_t)r;
        MT_CHECK(++calls <= n + 2);
    }
    MT_CHECK_UINT_EQ(job.cursor, n);
    MT_CHECK_MEM_EQ(shadow, cur, n);
    check_runs_against(got, ngot, old, cur, n, gap ? gap : MT_DIFF_DEFAULT_MERGE_GAP, maxcall);

    /* With room for everything the result is exactly the reference. */
    if (maxcall > n) {
        size_t nref = ref_merge(ref, ref_runs(old, cur, n, ref), gap ? gap : MT_DIFF_DEFAULT_MERGE_GAP);
        check_same_runs(got, ngot, ref, nref);
    }
    /* Write-back: changed bytes took the new value, every other byte kept
     * the driver mapping's own (GPU-written) value. */
    for (size_t i = 0; i < n; i++)
        MT_CHECK_UINT_EQ(gpu[i], use_wb && old[i] != cur[i] ? cur[i] : gpu0[i]);

    /* apply(diff(old -> cur)) == cur, packets read from the shadow. */
    mt_diff_packet *pk = malloc((ngot + 1) * sizeof *pk);
    MT_CHECK(pk);
    for (size_t i = 0; i < ngot; i++)
        pk[i] = (mt_diff_packet){got[i].offset, got[i].length, shadow + got[i].offset};
    uint8_t *replay = malloc(n + 1);
    MT_CHECK(replay);
    memcpy(replay, old, n);
    MT_CHECK_OK(mt_diff_apply(replay, n, pk, ngot));
    MT_CHECK_MEM_EQ(replay, cur, n);

    /* A second diff finds nothing. */
    job.cursor = 0;
    MT_CHECK_INT_EQ(mt_diff(&job, &opts, got, n + 1), 0);
    (void)k;
    free(replay);
    free(pk);
    free(cand);
    free(got);
    free(ref);
    free(oldb);
    free(curb);
    free(shb);
    free(gpub);
    free(gpu0b);
}

/* Checks runs got[0, ngot) of a kernel against the content they were found
 * in: inside [start, n), changed ends, no stretch of gap equal bytes. */
static void check_kernel_runs(const mt_diff_region *got, size_t ngot, const uint8_t *a,
                              const uint8_t *b0, size_t start, size_t n, size_t gap)
{
    for (size_t i = 0; i < ngot; i++) {
        MT_CHECK(got[i].length > 0 && got[i].offset >= start && got[i].offset + got[i].length <= n);
        MT_CHECK(a[got[i].offset] != b0[got[i].offset]);
        MT_CHECK(a[got[i].offset + got[i].length - 1] != b0[got[i].offset + got[i].length - 1]);
        size_t same = 0;
        for (size_t j = got[i].offset; j < got[i].offset + got[i].length; j++) {
            same = a[j] == b0[j] ? same + 1 : 0;
            MT_CHECK(same < gap);
        }
    }
}

/* The kernels themselves against the reference, with a random merge gap.
 * The range is cut into consecutive pieces scanned one call each, the last
 * run of a piece left open for the next (as the driver does across candidate
 * regions); a random small output stops a call early, and the next "call of
 * mt_diff()" starts a fresh output there. Runs of separate outputs are not
 * merged with each other, so the concatenation, merged once more, must equal
 * the reference. The shadow must end equal to the live bytes scanned (and
 * untouched elsewhere, and past every stop when it stops), the write-back
 * target must get exactly the changed bytes. */
static void kernel_case(const mt_diff_kernel *k)
{
    static const size_t gaps[] = {1, 1, 2, 5, 31, 32, 32, 33, 63, 64, 65, 200};
    size_t n = mt_test_below(&rng, 3000), gap = gaps[mt_test_below(&rng, sizeof gaps / sizeof gaps[0])];
    uint8_t *a = malloc(n + 1), *b = malloc(n + 1), *b0 = malloc(n + 1), *wb = malloc(n + 1),
            *wb0 = malloc(n + 1);
    mt_diff_region *ref = malloc((n + 1) * sizeof *ref), *got = malloc((n + 1) * sizeof *got);
    MT_CHECK(a && b && b0 && wb && wb0 && ref && got);
    for (size_t i = 0; i < n; i++) {
        a[i] = b[i] = (uint8_t)mt_test_rand(&rng);
        wb[i] = (uint8_t)mt_test_rand(&rng); /* "GPU" bytes: kept unless changed */
    }
    edit(a, n);
    memcpy(b0, b, n);
    memcpy(wb0, wb, n);
    int use_wb = (int)mt_test_below(&rng, 2);
    size_t start = n ? mt_test_below(&rng, n) : 0;
    size_t nref = ref_merge(ref, ref_runs(a + start, b0 + start, n - start, ref), gap);
    size_t big = mt_test_below(&rng, 4) == 0;
    mt_diff_scan sc = {a, b, use_wb ? wb : NULL, gap, got, 0, 0};
    size_t ngot = 0, pos = start;
    while (pos < n) {
        if (sc.max == 0) { /* a new output array: a new call of mt_diff() */
            sc.runs = got + ngot;
            sc.n = 0;
            size_t small = mt_test_below(&rng, 2) ? 1 + mt_test_below(&rng, 5) : 3 + mt_test_below(&rng, 40);
            sc.max = big ? n + 1 : small;
        }
        size_t piece = 1 + mt_test_below(&rng, mt_test_below(&rng, 2) ? 200 : 3000);
        size_t end = n - pos < piece ? n : pos + piece;
        size_t before = sc.n;
        size_t stop = k->scan(&sc, pos, end);
        MT_CHECK(sc.n >= before && sc.n <= sc.max && stop >= pos && stop <= end);
        if (stop < end) { /* stopped at a run start: full, nothing copied from there on */
            MT_CHECK(sc.n == sc.max && a[stop] != b0[stop]);
            MT_CHECK_MEM_EQ(b + stop, b0 + stop, n - stop);
            ngot += sc.n;
            sc.max = 0;
        }
        pos = stop;
    }
    if (sc.max)
        ngot += sc.n;
    check_kernel_runs(got, ngot, a, b0, start, n, gap);
    for (size_t i = 0; i < ngot; i++)
        got[i].offset -= start;
    ngot = ref_merge(got, ngot, gap);
    check_same_runs(got, ngot, ref, nref);
    MT_CHECK_MEM_EQ(b, b0, start);
    MT_CHECK_MEM_EQ(b + start, a + start, n - start);
    for (size_t i = 0; i < n; i++)
        MT_CHECK_UINT_EQ(wb[i], use_wb && i >= start && a[i] != b0[i] ? a[i] : wb0[i]);
    free(a);
    free(b);
    free(b0);
    free(wb);
    free(wb0);
    free(ref);
    free(got);
}

static void test_errors(void)
{
    uint8_t a[100] = {0}, b[100] = {0};
    mt_diff_region out[4];
    mt_diff_region unsorted[2] = {{50, 10}, {10, 10}}, overlap[2] = {{10, 10}, {15, 10}},
                   outside[1] = {{90, 11}};
    mt_diff_job job = {.live = a, .shadow = b, .size = 100};
    MT_CHECK_ERR(mt_diff(NULL, NULL, out, 4), -EINVAL);
    job.candidates = unsorted, job.ncandidates = 2;
    MT_CHECK_ERR(mt_diff(&job, NULL, out, 4), -EINVAL);
    job.candidates = overlap;
    MT_CHECK_ERR(mt_diff(&job, NULL, out, 4), -EINVAL);
    job.candidates = outside, job.ncandidates = 1;
    MT_CHECK_ERR(mt_diff(&job, NULL, out, 4), -EINVAL);
    job.candidates = NULL, job.ncandidates = 1;
    MT_CHECK_ERR(mt_diff(&job, NULL, out, 4), -EINVAL);
    job.ncandidates = 0, job.cursor = 101;
    MT_CHECK_ERR(mt_diff(&job, NULL, out, 4), -EINVAL);
    job.cursor = 0, job.shadow = NULL;
    MT_CHECK_ERR(mt_diff(&job, NULL, out, 4), -EINVAL);

    /* max 0: nothing reported, nothing copied, cursor at the first change. */
    job.shadow = b;
    a[70] = 1;
    MT_CHECK_INT_EQ(mt_diff(&job, NULL, out, 0), 0);
    MT_CHECK_UINT_EQ(job.cursor, 70);
    MT_CHECK_UINT_EQ(b[70], 0);
    MT_CHECK_INT_EQ(mt_diff(&job, NULL, out, 4), 1);
    MT_CHECK_UINT_EQ(out[0].offset, 70);
    MT_CHECK_UINT_EQ(out[0].length, 1);
    MT_CHECK_UINT_EQ(b[70], 1);

    /* Empty range. */
    mt_diff_job empty = {.live = a, .shadow = b, .size = 0};
    MT_CHECK_INT_EQ(mt_diff(&empty, NULL, out, 4), 0);

    /* apply checks every packet before writing any. */
    uint8_t img[16] = {0}, src[16];
    memset(src, 7, sizeof src);
    mt_diff_packet pk[2] = {{0, 4, src}, {14, 4, src}};
    MT_CHECK_ERR(mt_diff_apply(img, sizeof img, pk, 2), -EINVAL);
    for (size_t i = 0; i < sizeof img; i++)
        MT_CHECK_UINT_EQ(img[i], 0);
    pk[1].offset = 12;
    MT_CHECK_OK(mt_diff_apply(img, sizeof img, pk, 2));
    MT_CHECK_UINT_EQ(img[15], 7);
    MT_CHECK_UINT_EQ(img[5], 0);
}

/* Merge-gap bound at the exact threshold: gap g merges a hole of g-1 bytes
 * and keeps a hole of g bytes. */
static void test_gap_threshold(void)
{
    for (size_t g = 1; g < 80; g += 7) {
        uint8_t a[400] = {0}, sh[400] = {0};
        a[10] = 1;
        a[10 + g] = 1; /* hole of g-1 bytes: merged */
        a[10 + g + 1 + g] = 1; /* hole of g bytes: separate */
        mt_diff_job job = {.live = a, .shadow = sh, .size = sizeof a};
        mt_diff_opts o = {.merge_gap = g};
        mt_diff_region out[4];
        long n = mt_diff(&job, &o, out, 4);
        MT_CHECK_INT_EQ(n, 2);
        MT_CHECK_UINT_EQ(out[0].offset, 10);
        MT_CHECK_UINT_EQ(out[0].length, g + 1);
        MT_CHECK_UINT_EQ(out[1].offset, 10 + 2 * g + 1);
        MT_CHECK_UINT_EQ(out[1].length, 1);
    }
}

/* Diffs old -> cur (n bytes, at an odd address), `max` runs per call, and
 * checks the result exactly: the runs of all calls, merged
 * once more (runs of separate calls are not merged), equal the reference;
 * the shadow ends equal to cur; the write-back target, if used, got exactly
 * the changed bytes. */
static void diff_exact_wb(const uint8_t *old, const uint8_t *cur, size_t n, size_t gap, size_t max, int use_wb)
{
    uint8_t *buf = malloc(2 * n + 2);
    mt_diff_region *got = malloc((n + 1) * sizeof *got), *ref = malloc((n + 1) * sizeof *ref);
    mt_diff_region *out = malloc(max * sizeof *out); /* exactly max: ASan sees a write past it */
    MT_CHECK(buf && got && ref && out);
    uint8_t *shadow = buf + 1, *wb = buf + n + 2;
    memcpy(shadow, old, n);
    for (size_t i = 0; i < n; i++)
        wb[i] = (uint8_t)~old[i];
    mt_diff_job job = {.live = cur, .shadow = shadow, .size = n, .writeback = use_wb ? wb : NULL};
    mt_diff_opts o = {.merge_gap = gap};
    size_t ngot = 0;
    while (job.cursor < n) {
        long r = mt_diff(&job, &o, out, max);
        MT_CHECK_OK(r);
        MT_CHECK((size_t)r <= max && ngot + (size_t)r <= n);
        memcpy(got + ngot, out, (size_t)r * sizeof *out);
        ngot += (size_t)r;
    }
    ngot = ref_merge(got, ngot, gap);
    size_t nref = ref_merge(ref, ref_runs(old, cur, n, ref), gap);
    check_same_runs(got, ngot, ref, nref);
    MT_CHECK_MEM_EQ(shadow, cur, n);
    for (size_t i = 0; i < n; i++)
        MT_CHECK_UINT_EQ(wb[i], use_wb && old[i] != cur[i] ? cur[i] : (uint8_t)~old[i]);
    free(buf);
    free(got);
    free(ref);
    free(out);
}

/* Without write-back (the dense loop, for gaps >= 32) and with it (the exact
 * path). */
static void diff_exact(const uint8_t *old, const uint8_t *cur, size_t n, size_t gap, size_t max)
{
    diff_exact_wb(old, cur, n, gap, max, 0);
    diff_exact_wb(old, cur, n, gap, max, 1);
}

/* The dense loop's bit tricks at every position in a 64-byte block (the
 * blocks lie on the shadow's cache lines, after a head of up to 63 bytes
 * compared byte by byte): after a first change (which starts
 * the pending run), a run of length len at x, then a change d bytes after
 * its end, with d around the gap: the gap closed or not inside a block and
 * across a block boundary, runs crossing boundaries, stretches of equal
 * bytes around bytes 31 and 32 of a block (the only place a gap >= 32 fits)
 * and elsewhere. Then changes every gap + 1 bytes (each its own run, two
 * per block for gaps up to 62) or every gap bytes (one run), with output
 * sizes that make the dense loop stop at the last block it has room for and
 * hand over to the exact path. */
static void test_dense_patterns(void)
{
    static const size_t gaps[] = {31, 32, 33, 62, 64, 100};
    static const size_t lens[] = {1, 2, 33, 65, 129};
    static const size_t maxes[] = {2, 3, 4, 5, 6, 7, 8, 9, 1000};
    enum { N = 700 };
    uint8_t old[N], cur[N];
    for (size_t i = 0; i < N; i++)
        old[i] = (uint8_t)mt_test_rand(&rng);
    for (size_t gi = 0; gi < sizeof gaps / sizeof gaps[0]; gi++) {
        size_t gap = gaps[gi];
        for (size_t x = 64; x < 128; x++) {
            for (size_t li = 0; li < sizeof lens / sizeof lens[0]; li++) {
                for (size_t d = gap - 2; d <= gap + 1; d++) {
                    size_t len = lens[li];
                    memcpy(cur, old, N);
                    cur[1] ^= 1;
                    for (size_t i = x; i < x + len; i++)
                        cur[i] ^= 0x80;
                    cur[x + len + d] ^= 1; /* < 128 + 129 + 101 */
                    if (mt_test_below(&rng, 2))
                        cur[x + len + d + 1 + mt_test_below(&rng, 2 * gap)] ^= 1; /* < 358 + 200 */
                    diff_exact(old, cur, N, gap, maxes[mt_test_below(&rng, sizeof maxes / sizeof maxes[0])]);
                }
            }
        }
        for (size_t i = 0; i < sizeof maxes / sizeof maxes[0]; i++) {
            for (size_t period = gap; period <= gap + 1; period++) {
                memcpy(cur, old, N);
                for (size_t at = mt_test_below(&rng, period); at < N; at += period)
                    cur[at] ^= 1;
                diff_exact(old, cur, N, gap, maxes[i]);
            }
        }
    }
}

static void test_hash_mode(void)
{
    for (int iter = 0; iter < 300; iter++) {
        size_t n = mt_test_below(&rng, 20000);
        size_t chunk = 64 + mt_test_below(&rng, 2000);
        uint8_t *old = malloc(n + 1), *cur = malloc(n + 1);
        MT_CHECK(old && cur);
        for (size_t i = 0; i < n; i++)
            old[i] = (uint8_t)mt_test_rand(&rng);
        memcpy(cur, old, n);
        edit(cur, n);
        mt_diff_hashes *h = NULL;
        mt_diff_hash_opts ho = {.chunk_size = iter % 5 == 0 ? 0 : chunk};
        MT_CHECK_OK(mt_diff_hashes_create(old, n, &ho, &h));
        chunk = mt_diff_hashes_chunk_size(h);
        size_t nch = n / chunk + 1;
        mt_diff_region *cand = malloc((n / 256 + 2) * sizeof *cand), *got = malloc(nch * sizeof *got);
        MT_CHECK(cand && got);
        int use_cand = iter % 2;
        size_t ncand = use_cand ? candidates(old, cur, n, cand) : 0;
        mt_diff_job job = {.live = cur, .size = n, .candidates = use_cand ? cand : NULL, .ncandidates = ncand};
        size_t max = 1 + mt_test_below(&rng, 4), ngot = 0;
        while (job.cursor < n) {
            long r = mt_diff_hashed(h, &job, got + ngot, max);
            MT_CHECK_OK(r);
            ngot += (size_t)r;
        }
        /* Exactly the chunks holding a change are reported (whole, merged). */
        uint8_t *rep = calloc(nch, 1);
        MT_CHECK(rep);
        for (size_t i = 0; i < ngot; i++) {
            MT_CHECK(got[i].offset % chunk == 0);
            MT_CHECK(got[i].offset + got[i].length == n || got[i].length % chunk == 0);
            if (i > 0)
                MT_CHECK(got[i].offset > got[i - 1].offset + got[i - 1].length);
            for (size_t c = got[i].offset / chunk; c * chunk < got[i].offset + got[i].length; c++)
                rep[c] = 1;
        }
        for (size_t c = 0; c * chunk < n; c++) {
            size_t len = n - c * chunk < chunk ? n - c * chunk : chunk;
            MT_CHECK_INT_EQ(rep[c], memcmp(old + c * chunk, cur + c * chunk, len) != 0);
        }
        job.cursor = 0;
        MT_CHECK_INT_EQ(mt_diff_hashed(h, &job, got, nch), 0);
        /* Hash mode has no shadow to update or write back from. */
        uint8_t dummy;
        job.writeback = &dummy;
        MT_CHECK_ERR(mt_diff_hashed(h, &job, got, nch), -EINVAL);
        job.writeback = NULL;
        job.size = n + 1;
        MT_CHECK_ERR(mt_diff_hashed(h, &job, got, nch), -EINVAL);
        mt_diff_hashes_destroy(h);
        free(rep);
        free(cand);
        free(got);
        free(old);
        free(cur);
    }
    mt_diff_hash_opts bad = {.chunk_size = 63};
    mt_diff_hashes *h;
    uint8_t b[8];
    MT_CHECK_ERR(mt_diff_hashes_create(b, 8, &bad, &h), -EINVAL);
}

/* mt_diff_read_wc copies exactly n bytes, whatever the alignments. */
static void test_read_wc(void)
{
    uint8_t *src = malloc(70000), *dst = malloc(70000 + 2);
    MT_CHECK(src && dst);
    for (size_t i = 0; i < 70000; i++)
        src[i] = (uint8_t)mt_test_rand(&rng);
    for (int k = 0; k < 500; k++) {
        size_t so = mt_test_below(&rng, 128), doff = mt_test_below(&rng, 64);
        size_t n = k < 200 ? (size_t)k : mt_test_below(&rng, 70000 - 128);
        memset(dst, 0xee, 70000 + 2);
        mt_diff_read_wc(dst + doff, src + so, n);
        MT_CHECK_MEM_EQ(dst + doff, src + so, n);
        MT_CHECK(doff == 0 || dst[doff - 1] == 0xee);
        MT_CHECK(dst[doff + n] == 0xee);
    }
    free(src);
    free(dst);
    printf("read_wc: ok\n");
}

int main(int argc, char **argv)
{
    rng = mt_test_seed(argc, argv);
    const mt_diff_kernel *ks[8];
    size_t nk = mti_diff_kernels_available(ks, 8);
    MT_CHECK(nk >= 1);
    printf("default kernel: %s\n", mt_diff_isa());
    const size_t gaps[] = {0, 1, 2, 7, 32, 100, 5000};
    for (size_t ki = 0; ki < nk; ki++) {
        MT_CHECK_OK(mti_diff_kernel_force(ks[ki]->name));
        MT_CHECK(strcmp(mt_diff_isa(), ks[ki]->name) == 0);
        printf("kernel %s\n", ks[ki]->name);
        for (int i = 0; i < 2000; i++)
            kernel_case(ks[ki]);
        for (int i = 0; i < 300; i++) {
            /* Some past two of MT_DIFF_LIVE_WC's 64 KiB stretches. */
            size_t n = i < 10 ? (size_t)i : mt_test_below(&rng, i % 10 == 0 ? 200000 : 5000);
            size_t gap = gaps[mt_test_below(&rng, sizeof gaps / sizeof gaps[0])];
            size_t maxcall = mt_test_below(&rng, 3) == 0 ? 1 + mt_test_below(&rng, 3) : n + 1;
            one_case(ks[ki], n, gap, maxcall, (int)mt_test_below(&rng, 2));
        }
        test_gap_threshold();
        test_dense_patterns();
        test_errors();
    }
    MT_CHECK_ERR(mti_diff_kernel_force("no-such-isa"), -ENOTSUP);
    test_hash_mode();
    test_read_wc();
    printf("ok\n");
    return 0;
}
