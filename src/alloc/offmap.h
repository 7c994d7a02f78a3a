/* The offset map: which used block starts at (region, offset).
 *
 * An open-addressing hash table of block ids with linear probing. Each slot
 * holds the id and the top 32 bits of the key's multiplicative hash (the
 * tag): the tag picks the home slot and rejects almost every non-matching
 * slot without touching its node; a match is confirmed on the node, which
 * free needs anyway. Deletion shifts later entries back (no tombstones).
 *
 * Bounded probes: the table is kept at most half full, and an insert that
 * lands more than PROBE_LIMIT slots from home rebuilds the table (doubling
 * it, or re-seeding the hash when it is sparse), so every entry sits within
 * PROBE_LIMIT of its home and a lookup, hit or miss, stops after
 * PROBE_LIMIT + 1 slots: O(1) worst case, like TLSF's bounded bit scans.
 * (Only when host memory runs out during a rebuild does the bound, kept in
 * ht_limit, grow to what the table needs; lookups stay correct.)
 * The table costs 16 bytes per live allocation or less, whatever the region
 * sizes: a radix map over the offsets was tried first, and its directory
 * and leaves, spread over megabytes for GPU-sized regions, cost a cache and
 * TLB miss per operation. */
#ifndef MT_ALLOC_OFFMAP_H
#define MT_ALLOC_OFFMAP_H

#include "internal.h"

static inline uint32_t map_tag(const mt_alloc *a, uint32_t rid, uint64_t off)
{
    uint64_t k = (off >> a->gshift) ^ ((uint64_t)rid * 0x9e3779b97f4a7c15ull);
    return (uint32_t)((k * a->ht_seed) >> 32);
}

static inline uint32_t map_home(const mt_alloc *a, uint32_t tag) { return tag >> a->ht_shift; }

/* Slot index of the used block at (region, off), or UINT32_MAX. */
static inline uint32_t map_find(const mt_alloc *a, uint32_t rid, uint64_t off)
{
    uint32_t tag = map_tag(a, rid, off), mask = a->ht_mask, i = map_home(a, tag);
    for (uint32_t d = 0; d <= a->ht_limit; d++, i = (i + 1) & mask) {
        const mslot *s = &a->ht[i];
        if (s->id == NIL)
            break;
        if (s->tag == tag && a->b[s->id].off == off && a->b[s->id].region == rid)
            return i;
    }
    return UINT32_MAX;
}

/* Removes slot i, moving back the entries after it that may move: an entry
 * can fill the hole unless its home lies cyclically in (hole, its slot]. */
static inline void map_remove(mt_alloc *a, uint32_t i)
{
    uint32_t mask = a->ht_mask;
    for (uint32_t j = (i + 1) & mask; a->ht[j].id != NIL; j = (j + 1) & mask) {
        uint32_t home = map_home(a, a->ht[j].tag);
        if (((j - home) & mask) >= ((j - i) & mask)) {
            a->ht[i] = a->ht[j];
            i = j;
        }
    }
    a->ht[i].id = NIL;
    a->ht_used--;
}

/* Inserts block id at (region, off). The caller reserved room
 * (mta_map_reserve); a long probe asks for a rebuild, which may fail without
 * harm: lookups are correct at any probe length. */
static inline void map_insert(mt_alloc *a, uint32_t rid, uint64_t off, uint32_t id)
{
    uint32_t tag = map_tag(a, rid, off), mask = a->ht_mask, i = map_home(a, tag), d = 0;
    while (a->ht[i].id != NIL) {
        i = (i + 1) & mask;
        d++;
    }
    a->ht[i] = (mslot){id, tag};
    a->ht_used++;
    if (d > a->ht_limit)
        a->ht_limit = d; /* lookups stay correct whatever follows */
    if (d > PROBE_LIMIT)
        mta_map_rebuild(a); /* restores the bound unless memory is short */
}

#endif
