/* Sizing and rebuilding the offset map (see offmap.h). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "offmap.h"

/* Re-inserts every entry into a map of 2^bits buckets hashed with `seed`.
 * Returns the largest distance from home, or -ENOMEM (the old map is
 * kept). */
static long rehash(mt_alloc *a, unsigned bits, uint64_t seed)
{
    size_t n = (size_t)1 << bits;
    /* Cache-line aligned, so that a bucket is one line. */
    mbucket *nt = aligned_alloc(64, n * sizeof *nt);
    if (!nt)
        return -ENOMEM;
    memset(nt, 0, n * sizeof *nt);
    mbucket *old = a->ht;
    uint32_t old_n = a->ht ? a->ht_mask + 1 : 0;
    a->ht = nt;
    a->ht_mask = (uint32_t)n - 1;
    a->ht_shift = 64 - bits;
    a->ht_seed = seed;
    a->ht_room = (uint32_t)(n * MAP_LANES / 2);
    a->ht_limit = UINT32_MAX; /* no bound while refilling */
    long worst = 0;
    for (uint32_t k = 0; k < old_n; k++)
        for (uint32_t m = lanes_eq(&old[k], 0) ^ LANES_ALL; m != 0; m &= m - 1) {
            uint32_t id = old[k].id[__builtin_ctz(m)];
            const blk *x = NODE(a->b, id);
            long d = map_place(a, map_hash(a, x->region, blk_data_off(x)), id, a->ht_mask);
            if (d > worst)
                worst = d;
        }
    free(old);
    /* Lookups read up to ht_limit buckets on: the bound, or what this map
     * needs. */
    a->ht_limit = worst > PROBE_LIMIT ? (uint32_t)worst : PROBE_LIMIT;
    return worst;
}

/* A new odd multiplier: a fixed sequence, so that runs are reproducible. */
static uint64_t next_seed(uint64_t seed)
{
    seed += 0x9e3779b97f4a7c15ull;
    seed = (seed ^ (seed >> 31)) * 0xbf58476d1ce4e5b9ull;
    return seed | 1;
}

static unsigned map_bits(const mt_alloc *a) { return 64 - a->ht_shift; }

int mti_alloc_map_rebuild(mt_alloc *a)
{
    unsigned bits = map_bits(a);
    /* Mostly a full map doubles; a sparse one with a long run has met a bad
     * seed for its keys and gets a new one. Bounded: each round doubles or
     * reseeds, and a map of 2^27 buckets (what a note can name) is the end of the road. */
    for (int round = 0; round < 64; round++) {
        if ((uint64_t)a->live * 4 > (uint64_t)a->ht_room || round % 4 == 3) {
            if (bits >= 27)
                return -ENOMEM;
            bits++;
        }
        long worst = rehash(a, bits, next_seed(a->ht_seed));
        if (worst < 0)
            return (int)worst;
        if (worst <= PROBE_LIMIT)
            return 0;
    }
    return -ENOMEM;
}

#define MAP_SLACK 16u
int mti_alloc_map_reserve(mt_alloc *a)
{
    if (!a->ht)
        return rehash(a, 2, 0x9e3779b97f4a7c15ull) < 0 ? -ENOMEM : 0;
    /* A little early: the allocation path's credit (alloc.c) wants room
     * for several entries, not just one. */
    if (a->live + MAP_SLACK < a->ht_room)
        return 0;
    unsigned bits = map_bits(a);
    if (bits >= 27)
        return -ENOMEM;
    long worst = rehash(a, bits + 1, a->ht_seed);
    if (worst < 0)
        return (int)worst;
    if (worst > PROBE_LIMIT)
        mti_alloc_map_rebuild(a); /* may fail: ht_limit covers the map as it is */
    return 0;
}
