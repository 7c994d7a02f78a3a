/* The offset map: which used block starts at (region, offset).
 *
 * A hash table of buckets, one cache line each, of MAP_LANES block ids and
 * one tag byte per lane (0x80 | 7 bits of the key's hash; 0 = empty), the
 * layout of SwissTable and F14. A lookup compares the key's tag with all
 * lanes of its home bucket at once and checks the (almost always single)
 * candidate on its node, which free needs anyway. Deleting clears a tag:
 * nothing moves. Compared with linear probing over single slots, the
 * common case has no data-dependent branch (probing and the
 * backward-shift deletion mispredicted about once per alloc+free pair) and
 * touches one cache line.
 *
 * A full home bucket sends an insertion to the next ones; the home's spill
 * count says how many of its keys live further on, so a lookup reads past
 * the home only when that count is not zero. Bounded probes: the map is
 * kept at most half full (6 of 12 lanes per bucket on average), and an
 * insertion that lands more than PROBE_LIMIT buckets from home rebuilds the
 * map (doubling it, or re-seeding the hash when it is sparse), so a lookup,
 * hit or miss, reads at most PROBE_LIMIT + 1 buckets: O(1) worst case.
 * (Only when host memory runs out during a rebuild does the bound, kept in
 * ht_limit, grow to what the map needs; lookups stay correct.) The map
 * costs 64 bytes per 6 live allocations or less, whatever the region sizes:
 * a radix map over the offsets was tried first, and its directory and
 * leaves, spread over megabytes for GPU-sized regions, cost a cache and TLB
 * miss per operation. */
#ifndef MT_ALLOC_OFFMAP_H
#define MT_ALLOC_OFFMAP_H

#include <string.h>
#ifdef __SSE2__
#include <emmintrin.h>
#endif

#include "internal.h"

#define LANES_ALL ((1u << MAP_LANES) - 1)

/* Bit i set when lane i of bucket bk holds tag t (t = 0: is empty). */
#ifdef __SSE2__
static inline uint32_t lanes_eq(const mbucket *bk, unsigned t)
{
    __m128i v = _mm_load_si128((const __m128i *)(const void *)bk);
    /* Spread the tag with a multiply: shorter than a byte broadcast. */
    __m128i tt = _mm_shuffle_epi32(_mm_cvtsi32_si128((int)(t * 0x01010101u)), 0);
    return (uint32_t)_mm_movemask_epi8(_mm_cmpeq_epi8(v, tt)) & LANES_ALL;
}
#else
/* Eight lanes at a time: a byte of x is zero exactly when its top bit
 * survives below; the multiply gathers those top bits into one byte. */
static inline uint32_t zero_bytes(uint64_t x)
{
    const uint64_t low7 = 0x7f7f7f7f7f7f7f7full;
    uint64_t z = ~(((x & low7) + low7) | x | low7);
    return (uint32_t)((z * 0x0002040810204081ull) >> 56);
}

static inline uint32_t lanes_eq(const mbucket *bk, unsigned t)
{
    uint64_t lo, hi, rep = 0x0101010101010101ull * t;
    memcpy(&lo, bk->tag, 8);
    memcpy(&hi, bk->tag + 8, 8);
    return (zero_bytes(lo ^ rep) | zero_bytes(hi ^ rep) << 8) & LANES_ALL;
}
#endif

/* The key's hash; off in granules, as in the nodes. The region goes into
 * the high bits, which offsets rarely reach, so one multiply does. */
static inline uint64_t map_hash(const mt_alloc *a, uint32_t rid, uint64_t off)
{
    return (off ^ (uint64_t)rid << 40) * a->ht_seed;
}

/* The top bits pick the home bucket; 7 bits below them make the tag. */
static inline uint32_t map_home(const mt_alloc *a, uint64_t h)
{
    return (uint32_t)(h >> a->ht_shift);
}

static inline unsigned map_tag(uint64_t h) { return 0x80u | (unsigned)((h >> 24) & 0x7f); }

/* Where an entry is: bucket UINT32_MAX when there is none. */
typedef struct mloc {
    uint32_t bucket, lane, home;
} mloc;

/* The used block at (region, off). */
static inline mloc map_find(const mt_alloc *a, uint32_t rid, uint64_t off)
{
    uint64_t h = map_hash(a, rid, off);
    uint32_t home = map_home(a, h), j = home;
    unsigned t = map_tag(h);
    for (uint32_t d = 0; d <= a->ht_limit; d++, j = (j + 1) & a->ht_mask) {
        const mbucket *bk = &a->ht[j];
        for (uint32_t m = lanes_eq(bk, t); m != 0; m &= m - 1) {
            uint32_t lane = (uint32_t)__builtin_ctz(m);
            const blk *x = NODE(a->b, bk->id[lane]);
            if (blk_data_off(x) == off && x->region == rid) /* x is a used block */
                return (mloc){j, lane, home};
        }
        if (a->ht[home].spill == 0)
            break; /* all of home's keys live at home */
    }
    return (mloc){UINT32_MAX, 0, home};
}

static inline uint32_t map_id(const mt_alloc *a, mloc l) { return a->ht[l.bucket].id[l.lane]; }

/* A used block's node keeps where its entry is, in `note`: bucket, lane,
 * and whether the entry lives away from its home bucket (then the home's
 * spill count must drop at removal, and the home is recomputed from the
 * key). Buckets are below 2^27 (offmap.c). Freeing a block whose node is
 * known (mt_alloc_free_block) then needs no lookup. */
#define NOTE_AWAY 16u
static inline void map_note(blk *x, uint32_t bucket, uint32_t lane, int away)
{
    x->note = bucket << 5 | (away ? NOTE_AWAY : 0) | lane;
}

static inline uint32_t noted_bucket(const blk *x) { return x->note >> 5; }
static inline uint32_t noted_lane(const blk *x) { return x->note & 15; }

/* Removes the entry of used block x, which its note locates. */
static inline void map_remove_noted(mt_alloc *a, const blk *x)
{
    a->ht[noted_bucket(x)].tag[noted_lane(x)] = 0;
    if (__builtin_expect(x->note & NOTE_AWAY, 0))
        a->ht[map_home(a, map_hash(a, x->region, blk_data_off(x)))].spill--;
}

/* Finds a lane for block id, whose key has hash h, at or after its home
 * within `limit` buckets, claims it and notes it in the node. Returns the
 * distance from home, or UINT32_MAX. */
static inline uint32_t map_place(mt_alloc *a, uint64_t h, uint32_t id, uint32_t limit)
{
    uint32_t home = map_home(a, h), j = home;
    for (uint32_t d = 0; d <= limit; d++, j = (j + 1) & a->ht_mask) {
        mbucket *bk = &a->ht[j];
        uint32_t m = lanes_eq(bk, 0);
        if (m != 0) {
            uint32_t lane = (uint32_t)__builtin_ctz(m);
            bk->tag[lane] = (uint8_t)map_tag(h);
            bk->id[lane] = id;
            if (__builtin_expect(d != 0, 0))
                a->ht[home].spill++;
            map_note(NODE(a->b, id), j, lane, d != 0);
            return d;
        }
    }
    return UINT32_MAX;
}

/* Inserts block id at (region, off). The caller reserved room
 * (mti_alloc_map_reserve), so a free lane exists; one farther than PROBE_LIMIT
 * from home asks for a rebuild, which may fail without harm: lookups are
 * correct at any distance up to ht_limit. Always inline: called from four
 * places, gcc would otherwise call it, and the allocation path's
 * registers suffer either way. */
static inline __attribute__((always_inline)) void map_insert(mt_alloc *a, uint32_t rid,
                                                             uint64_t off, uint32_t id)
{
    uint64_t h = map_hash(a, rid, off);
    if (__builtin_expect(map_place(a, h, id, PROBE_LIMIT) != UINT32_MAX, 1))
        return;
    uint32_t d = map_place(a, h, id, a->ht_mask); /* at most half full: found */
    if (d > a->ht_limit)
        a->ht_limit = d; /* lookups stay correct whatever follows */
    mti_alloc_map_rebuild(a);  /* restores the bound unless memory is short */
}

#endif
