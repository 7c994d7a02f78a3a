/* Sizing and rebuilding the offset map (see offmap.h). */
#include <errno.h>
#include <stdlib.h>

#include "offmap.h"

/* Re-inserts every entry into a table of 2^bits slots hashed with `seed`.
 * Returns the largest displacement, or -ENOMEM (the old table is kept). */
static long rehash(mt_alloc *a, unsigned bits, uint64_t seed)
{
    uint32_t cap = 1u << bits, mask = cap - 1;
    mslot *nt = calloc(cap, sizeof *nt);
    if (!nt)
        return -ENOMEM;
    mslot *old = a->ht;
    uint32_t old_cap = a->ht ? a->ht_mask + 1 : 0;
    a->ht = nt;
    a->ht_mask = mask;
    a->ht_shift = 32 - bits;
    a->ht_seed = seed;
    long worst = 0;
    for (uint32_t k = 0; k < old_cap; k++) {
        if (old[k].id == NIL)
            continue;
        const blk *x = &a->b[old[k].id];
        uint32_t tag = map_tag(a, x->region, x->off), i = map_home(a, tag);
        long d = 0;
        while (nt[i].id != NIL) {
            i = (i + 1) & mask;
            d++;
        }
        nt[i] = (mslot){old[k].id, tag};
            if (d > worst)
            worst = d;
    }
    free(old);
    /* Lookups stop after ht_limit probes: the bound, or what this table needs. */
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

int mta_map_rebuild(mt_alloc *a)
{
    unsigned bits = 32 - a->ht_shift;
    /* Mostly a full table doubles; a sparse one with a long run has met a bad
     * seed for its keys and gets a new one. Bounded: each round doubles or
     * reseeds, and a table of 2^31 slots is the end of the road. */
    for (int round = 0; round < 64; round++) {
        if ((uint64_t)a->ht_used * 4 > (uint64_t)a->ht_mask + 1 || round % 4 == 3) {
            if (bits >= 31)
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

int mta_map_reserve(mt_alloc *a)
{
    if (!a->ht)
        return rehash(a, 6, 0x9e3779b97f4a7c15ull) < 0 ? -ENOMEM : 0;
    if ((uint64_t)(a->ht_used + 1) * 2 <= (uint64_t)a->ht_mask + 1)
        return 0;
    unsigned bits = 32 - a->ht_shift;
    if (bits >= 31)
        return -ENOMEM;
    long worst = rehash(a, bits + 1, a->ht_seed);
    if (worst < 0)
        return (int)worst;
    if (worst > PROBE_LIMIT)
        mta_map_rebuild(a); /* may fail: ht_limit covers the table as it is */
    return 0;
}
