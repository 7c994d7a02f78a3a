/* The benchmark's baseline allocator (bench/alloc_baseline.c) is only a fair
 * yardstick if it is correct: random alloc/free sequences against a model of
 * granule owners (alignment, no overlap, every byte accounted for, free
 * extents always coalesced: never more than live blocks + 1). --seed N. */
#include <errno.h>

#include "alloc_baseline.h"
#include "mt_test.h"

#define GRAN 256u
#define REGION (4u << 20)
#define NGRAN (REGION / GRAN)
#define MAXLIVE 2048

int main(int argc, char **argv)
{
    uint64_t rng = mt_test_seed(argc, argv);
    static uint16_t owner[NGRAN]; /* live index + 1 */
    static uint64_t off[MAXLIVE], size[MAXLIVE];
    uint32_t n = 0;
    uint64_t used = 0, refused = 0;
    bl_alloc *b = bl_create(REGION, GRAN);
    MT_CHECK(b != NULL);
    for (int step = 0; step < 20000; step++) {
        if (n < MAXLIVE && mt_test_below(&rng, 2)) {
            uint64_t sz = 1 + mt_test_below(&rng, 64 * 1024);
            uint64_t align = 1ull << mt_test_below(&rng, 17);
            uint64_t o;
            int rc = bl_alloc_block(b, sz, align, &o);
            if (rc == -ENOSPC) {
                refused++;
                continue;
            }
            MT_CHECK_OK(rc);
            MT_CHECK_UINT_EQ(o % (align > GRAN ? align : GRAN), 0);
            uint64_t g0 = o / GRAN, g1 = (o + sz + GRAN - 1) / GRAN;
            MT_CHECK(g1 <= NGRAN);
            for (uint64_t g = g0; g < g1; g++) {
                MT_CHECK_UINT_EQ(owner[g], 0);
                owner[g] = (uint16_t)(n + 1);
            }
            off[n] = o;
            size[n++] = sz;
            used += (g1 - g0) * GRAN;
        } else if (n) {
            uint32_t v = (uint32_t)mt_test_below(&rng, n);
            MT_CHECK_OK(bl_free_block(b, off[v], size[v]));
            uint64_t g0 = off[v] / GRAN, g1 = (off[v] + size[v] + GRAN - 1) / GRAN;
            for (uint64_t g = g0; g < g1; g++)
                owner[g] = 0;
            used -= (g1 - g0) * GRAN;
            if (v != --n) { /* the last one moves into slot v */
                off[v] = off[n];
                size[v] = size[n];
                for (uint64_t g = off[v] / GRAN; g < (off[v] + size[v] + GRAN - 1) / GRAN; g++)
                    owner[g] = (uint16_t)(v + 1);
            }
        }
        uint64_t free_bytes, largest, extents;
        bl_stats(b, &free_bytes, &largest, &extents);
        MT_CHECK_UINT_EQ(free_bytes, REGION - used);
        MT_CHECK(extents <= (uint64_t)n + 1);
        MT_CHECK(largest <= free_bytes);
    }
    while (n) {
        n--;
        MT_CHECK_OK(bl_free_block(b, off[n], size[n]));
    }
    uint64_t free_bytes, largest, extents;
    bl_stats(b, &free_bytes, &largest, &extents);
    MT_CHECK_UINT_EQ(extents, 1);
    MT_CHECK_UINT_EQ(largest, REGION);
    printf("alloc baseline: ok (%" PRIu64 " refused)\n", refused);
    bl_destroy(b);
    return 0;
}
