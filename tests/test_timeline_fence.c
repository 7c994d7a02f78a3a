/* Fence counter extension: mt_fence_extend / mt_fence_reached against a
 * direct reference, exhaustively for narrow counters, exactly at the wrap and
 * half-range edges for HardDoom's 26 bits, and through a timeline fed raw
 * counter values across many wraps. */
#include <errno.h>

#include "memtrack/timeline.h"
#include "mt_test.h"

/* Every reference near 0, near a wrap and near 2^64, every delta in the
 * window [-half, half): extend must give back ref + delta exactly. */
static void exhaustive(unsigned bits)
{
    uint64_t range = 1ull << bits, half = range / 2;
    uint64_t refs[] = {0, 1, half - 1, half, range - 1, range, range + 1, 5 * range - 1,
                       UINT64_MAX, UINT64_MAX - range, UINT64_MAX - half};
    for (size_t r = 0; r < sizeof refs / sizeof *refs; r++) {
        uint64_t ref = refs[r];
        for (int64_t d = -(int64_t)half; d < (int64_t)half; d++) {
            uint64_t truth = ref + (uint64_t)d;
            uint64_t raw = truth & (range - 1);
            MT_CHECK_UINT_EQ(mt_fence_extend(ref, raw, bits), truth);
            /* Junk above the counter's width is ignored. */
            MT_CHECK_UINT_EQ(mt_fence_extend(ref, raw | (range << 3), bits), truth);
            /* done = ref has reached target = truth exactly when truth is at
             * or behind ref by less than half the range. */
            MT_CHECK_INT_EQ(mt_fence_reached(ref & (range - 1), raw, bits),
                            d <= 0 && d > -(int64_t)half);
        }
    }
}

static void edges26(void)
{
    const unsigned N = 26;
    const uint64_t R = 1ull << N, H = R / 2;
    /* Wrap: counter at its top, next value reads 0. */
    MT_CHECK_UINT_EQ(mt_fence_extend(R - 1, 0, N), R);
    MT_CHECK_UINT_EQ(mt_fence_extend(7 * R - 1, 0, N), 7 * R);
    MT_CHECK_UINT_EQ(mt_fence_extend(7 * R - 1, R - 1, N), 7 * R - 1);
    /* The largest forward step (2^25 - 1) across a wrap. */
    uint64_t ref = 3 * R + H + 10;
    MT_CHECK_UINT_EQ(mt_fence_extend(ref, (ref + H - 1) & (R - 1), N), ref + H - 1);
    /* One more and it reads as behind: exactly the documented limit. */
    MT_CHECK_UINT_EQ(mt_fence_extend(ref, (ref + H) & (R - 1), N), ref - H);
    /* Behind by one (a stale read) stays behind. */
    MT_CHECK_UINT_EQ(mt_fence_extend(ref, (ref - 1) & (R - 1), N), ref - 1);
    /* reached: target exactly half ahead is not reached; half-1 behind is. */
    MT_CHECK_INT_EQ(mt_fence_reached(0, H, N), 0);
    MT_CHECK_INT_EQ(mt_fence_reached(0, H + 1, N), 1); /* H+1 ahead == H-1 behind */
    MT_CHECK_INT_EQ(mt_fence_reached(5, R - 3, N), 1); /* target before the wrap */
    MT_CHECK_INT_EQ(mt_fence_reached(R - 3, 5, N), 0);
    /* 64 bits (and 0, meaning 64) is the identity. */
    MT_CHECK_UINT_EQ(mt_fence_extend(12345, 99, 64), 99);
    MT_CHECK_UINT_EQ(mt_fence_extend(12345, 99, 0), 99);
    MT_CHECK_INT_EQ(mt_fence_reached(UINT64_MAX, 3, 64), 0); /* 3 is 4 ahead */
}

/* A timeline fed only the low N bits of a growing counter, with random
 * steps up to the limit, ends at the true value after many wraps. */
static void timeline_wraps(unsigned bits, uint64_t *rng, uint64_t initial)
{
    mt_timeline *tl;
    mt_timeline_opts o = {.initial = initial, .counter_bits = bits};
    MT_CHECK_OK(mt_timeline_create(&o, &tl));
    uint64_t half = 1ull << (bits - 1), mask = (half << 1) - 1, truth = initial;
    for (int i = 0; i < 4000; i++) {
        uint64_t step = mt_test_below(rng, 8) == 0 ? half - 1 : mt_test_below(rng, half);
        truth += step;
        MT_CHECK_OK(mt_timeline_signal_raw(tl, truth & mask));
        MT_CHECK_UINT_EQ(mt_timeline_completed(tl), truth);
        /* A stale read (behind by up to half) changes nothing. */
        uint64_t back = 1 + mt_test_below(rng, half);
        MT_CHECK_OK(mt_timeline_signal_raw(tl, (truth - back) & mask));
        MT_CHECK_UINT_EQ(mt_timeline_completed(tl), truth);
    }
    MT_CHECK(truth - initial > 50 * (mask + 1) || bits > 20); /* it really wrapped */
    mt_timeline_destroy(tl);
}

int main(int argc, char **argv)
{
    uint64_t rng = mt_test_seed(argc, argv);
    for (unsigned bits = 1; bits <= 10; bits++)
        exhaustive(bits);
    edges26();
    timeline_wraps(4, &rng, 0);
    timeline_wraps(4, &rng, UINT64_MAX - 100000); /* 64-bit value near its own top */
    timeline_wraps(26, &rng, (1ull << 26) - 3);
    timeline_wraps(2, &rng, 0);

    /* Exact edge through a timeline: 26-bit counter at 2^26-1, then 0. */
    mt_timeline *tl;
    mt_timeline_opts o = {.initial = (1ull << 26) - 1, .counter_bits = 26};
    MT_CHECK_OK(mt_timeline_create(&o, &tl));
    MT_CHECK_OK(mt_timeline_signal_raw(tl, 0));
    MT_CHECK_UINT_EQ(mt_timeline_completed(tl), 1ull << 26);
    MT_CHECK_OK(mt_timeline_signal_raw(tl, (1ull << 25) - 1 + 0)); /* +2^25-1: accepted */
    MT_CHECK_UINT_EQ(mt_timeline_completed(tl), (1ull << 26) + (1ull << 25) - 1);
    MT_CHECK_OK(mt_timeline_signal_raw(tl, (1ull << 26) - 1)); /* +2^25: read as stale */
    MT_CHECK_UINT_EQ(mt_timeline_completed(tl), (1ull << 26) + (1ull << 25) - 1);
    mt_timeline_destroy(tl);

    mt_timeline_opts bad = {.counter_bits = 65};
    MT_CHECK_ERR(mt_timeline_create(&bad, &tl), -EINVAL);
    puts("timeline fence: ok");
    return 0;
}
