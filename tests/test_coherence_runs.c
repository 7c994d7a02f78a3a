/* White box: the validity runs' updates (src/coherence/runs.c) against a
 * model of one mask per granule. Random sequences of the planner's updates
 * (a write setting a range, a read marking it, with right and wrong hints),
 * the general update and the fixups' clearing, on buffers of 1 to 40
 * granules; after each step the runs must be well formed (sorted,
 * neighbours different) and give every granule the model's mask. */
#include <stdio.h>
#include <stdlib.h>

#include "coherence/internal.h"

#define G 16u /* bytes per granule */
#define MAXG 40u

static uint64_t rng(uint64_t *s)
{
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static int same(const coh_runs *r, const uint64_t *model, uint32_t ng)
{
    if (!mti_coh_runs_check(r))
        return 0;
    for (uint32_t g = 0; g < ng; g++) {
        uint32_t k = mti_coh_runs_find(r, (uint64_t)g * G);
        if (r->v[k].mask != model[g])
            return 0;
    }
    return 1;
}

int main(void)
{
    uint64_t s = 7;
    long steps = 0;
    for (int round = 0; round < 3000; round++) {
        uint32_t ng = 1 + (uint32_t)(rng(&s) % MAXG);
        /* Sizes not a granule multiple too: the last run ends at size. */
        uint64_t size = (uint64_t)ng * G - (rng(&s) % 3 == 0 ? G / 2 : 0);
        coh_run inl[COH_RUNS_INLINE];
        coh_runs r;
        uint64_t m0 = rng(&s) & 0x1ff;
        mti_coh_runs_init(&r, inl, size, m0);
        uint64_t model[MAXG];
        for (uint32_t g = 0; g < ng; g++)
            model[g] = m0;
        for (int step = 0; step < 60; step++, steps++) {
            uint32_t ga = (uint32_t)(rng(&s) % ng), gb = ga + 1 + (uint32_t)(rng(&s) % (ng - ga));
            uint64_t a = (uint64_t)ga * G, b = (uint64_t)gb * G > size ? size : (uint64_t)gb * G;
            uint64_t bit = 1ull << (rng(&s) % 9);
            uint32_t op = (uint32_t)(rng(&s) % 8);
            /* A hint as the planner gives it: mostly right, sometimes stale. */
            uint32_t hint = mti_coh_runs_find(&r, a);
            uint64_t h = rng(&s) % 8;
            if (h == 0)
                hint = COH_NO_HINT;
            else if (h == 1)
                hint = (uint32_t)(rng(&s) % (r.n + 2));
            else if (h == 2)
                hint |= COH_HINT_EXACT; /* the planner's unchecked hint */
            if (mti_coh_runs_reserve(&r, 2)) {
                fprintf(stderr, "reserve failed\n");
                return 1;
            }
            if (op < 3) { /* a write */
                mti_coh_runs_set_at(&r, a, b, bit, hint);
                for (uint32_t g = ga; g < gb; g++)
                    model[g] = bit;
            } else if (op < 6) { /* a read made it valid there */
                mti_coh_runs_mark_at(&r, a, b, bit, hint);
                for (uint32_t g = ga; g < gb; g++)
                    model[g] |= bit;
            } else if (op == 6) { /* a fixup: the bit cleared */
                mti_coh_runs_update(&r, a, b, ~bit, 0);
                for (uint32_t g = ga; g < gb; g++)
                    model[g] &= ~bit;
            } else { /* the general update */
                uint64_t and_m = rng(&s) & 0x1ff, or_m = rng(&s) & 0x1ff & ~and_m;
                mti_coh_runs_update_at(&r, a, b, and_m, or_m, hint);
                for (uint32_t g = ga; g < gb; g++)
                    model[g] = (model[g] & and_m) | or_m;
            }
            if (!same(&r, model, ng)) {
                fprintf(stderr, "round %d step %d op %u [%llu, %llu) bit %llx: runs differ\n",
                        round, step, op, (unsigned long long)a, (unsigned long long)b,
                        (unsigned long long)bit);
                return 1;
            }
        }
        mti_coh_runs_free(&r);
    }
    printf("runs: %ld updates checked\n", steps);
    return 0;
}
