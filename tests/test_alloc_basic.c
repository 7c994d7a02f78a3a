/* alloc: single-threaded behaviour of the region allocator with exact
 * expected offsets: splitting and coalescing, best fit vs first fit,
 * alignments up to beyond 64 KiB, granularity separation of linear and
 * non-linear resources, several regions with grow/release/trim, the stats,
 * the dump, every bad-input case (error code and layout unchanged), and the
 * checker catching corrupted metadata. */
#include "alloc/offmap.h"
#include "alloc_util.h"

#define KiB 1024ull
#define MiB (1024ull * 1024)

static void check_stats(const mt_alloc *a, uint64_t total, uint64_t used, uint64_t allocs,
                        uint64_t free_blocks, uint64_t largest)
{
    mt_alloc_stats s;
    MT_CHECK_OK(mt_alloc_get_stats(a, &s));
    MT_CHECK_UINT_EQ(s.total_bytes, total);
    MT_CHECK_UINT_EQ(s.used_bytes, used);
    MT_CHECK_UINT_EQ(s.free_bytes, total - used);
    MT_CHECK_UINT_EQ(s.allocations, allocs);
    MT_CHECK_UINT_EQ(s.free_blocks, free_blocks);
    MT_CHECK_UINT_EQ(s.largest_free, largest);
    double frag = total - used ? 1.0 - (double)largest / (double)(total - used) : 0.0;
    MT_CHECK(s.fragmentation == frag);
}

static void test_split_coalesce(void)
{
    mt_alloc *a = au_create(MT_ALLOC_BEST_FIT, 0, 0); /* granule 16 */
    uint32_t r;
    MT_CHECK_OK(mt_alloc_add_region(a, MiB, NULL, &r));
    MT_CHECK_UINT_EQ(r, 0);
    check_stats(a, MiB, 0, 0, 1, MiB);

    mt_alloc_block b1 = au_alloc(a, 100, 0, MT_ALLOC_LINEAR);
    MT_CHECK_UINT_EQ(b1.offset, 0);
    MT_CHECK_UINT_EQ(b1.size, 112); /* rounded up to the granule */
    mt_alloc_block b2 = au_alloc(a, 64, 256, MT_ALLOC_LINEAR);
    MT_CHECK_UINT_EQ(b2.offset, 256); /* [112, 256) stays free */
    check_stats(a, MiB, 176, 2, 2, MiB - 320);
    AU_CHECK(a);

    /* Best fit puts 144 bytes exactly into the 144-byte hole. */
    mt_alloc_block b3 = au_alloc(a, 144, 16, MT_ALLOC_LINEAR);
    MT_CHECK_UINT_EQ(b3.offset, 112);
    check_stats(a, MiB, 320, 3, 1, MiB - 320);

    /* Free the middle: a hole between two used blocks. */
    MT_CHECK_OK(mt_alloc_free(a, r, b3.offset));
    check_stats(a, MiB, 176, 2, 2, MiB - 320);
    /* Free the last: merges with the hole before it and the tail after it. */
    MT_CHECK_OK(mt_alloc_free(a, r, b2.offset));
    check_stats(a, MiB, 112, 1, 1, MiB - 112);
    MT_CHECK_OK(mt_alloc_free(a, r, b1.offset));
    check_stats(a, MiB, 0, 0, 1, MiB);
    AU_CHECK(a);

    /* Freed in address order, reverse order and middle-first: always one block. */
    mt_alloc_block v[5];
    for (int i = 0; i < 5; i++) {
        v[i] = au_alloc(a, 1000, 0, MT_ALLOC_LINEAR);
        MT_CHECK_UINT_EQ(v[i].offset, (uint64_t)i * 1008);
    }
    int order[5] = {1, 3, 2, 4, 0};
    for (int i = 0; i < 5; i++) {
        MT_CHECK_OK(mt_alloc_free(a, r, v[order[i]].offset));
        AU_CHECK(a);
    }
    check_stats(a, MiB, 0, 0, 1, MiB);
    mt_alloc_destroy(a);
}

/* A 1005-granule hole, then a 1000-granule request: best fit takes the hole
 * (same size class), first fit the first class certain to hold it. */
static void test_strategies(void)
{
    for (int s = 0; s < 2; s++) {
        mt_alloc *a = au_create((mt_alloc_strategy)s, 16, 0);
        uint32_t r;
        MT_CHECK_OK(mt_alloc_add_region(a, MiB, NULL, &r));
        mt_alloc_block x0 = au_alloc(a, 1000 * 16, 0, MT_ALLOC_LINEAR);
        mt_alloc_block s1 = au_alloc(a, 16, 0, MT_ALLOC_LINEAR);
        mt_alloc_block x1 = au_alloc(a, 1005 * 16, 0, MT_ALLOC_LINEAR);
        mt_alloc_block s2 = au_alloc(a, 16, 0, MT_ALLOC_LINEAR);
        MT_CHECK_UINT_EQ(s1.offset, 16000);
        MT_CHECK_UINT_EQ(x1.offset, 16016);
        MT_CHECK_UINT_EQ(s2.offset, 32096);
        MT_CHECK_OK(mt_alloc_free(a, r, x1.offset));
        mt_alloc_block y = au_alloc(a, 1000 * 16, 0, MT_ALLOC_LINEAR);
        MT_CHECK_UINT_EQ(y.offset, s == MT_ALLOC_BEST_FIT ? 16016 : 32112);
        AU_CHECK(a);
        (void)x0;
        mt_alloc_destroy(a);
    }
}

static void test_alignment(void)
{
    mt_alloc *a = au_create(MT_ALLOC_BEST_FIT, 16, 0);
    uint32_t r;
    MT_CHECK_OK(mt_alloc_add_region(a, 4 * MiB, NULL, &r));
    MT_CHECK_UINT_EQ(au_alloc(a, 100, 64 * KiB, MT_ALLOC_LINEAR).offset, 0);
    MT_CHECK_UINT_EQ(au_alloc(a, 100, 64 * KiB, MT_ALLOC_LINEAR).offset, 64 * KiB);
    MT_CHECK_UINT_EQ(au_alloc(a, 100, MiB, MT_ALLOC_LINEAR).offset, MiB);
    MT_CHECK_UINT_EQ(au_alloc(a, 1, 2 * MiB, MT_ALLOC_LINEAR).offset, 2 * MiB);
    /* The smallest hole that holds it: [112, 64 KiB). */
    MT_CHECK_UINT_EQ(au_alloc(a, 100, 16, MT_ALLOC_LINEAR).offset, 112);
    AU_CHECK(a);
    /* Alignment beyond any region: only offset 0 qualifies, and it is taken. */
    AU_CHECK_ERR_UNCHANGED(a, mt_alloc_allocate(a, 16, 1ull << 60, MT_ALLOC_LINEAR, &(mt_alloc_block){0}),
                           -ENOSPC);
    mt_alloc_destroy(a);

    a = au_create(MT_ALLOC_FIRST_FIT, 16, 0);
    MT_CHECK_OK(mt_alloc_add_region(a, 4 * MiB, NULL, &r));
    MT_CHECK_UINT_EQ(au_alloc(a, 16, 1ull << 62, MT_ALLOC_LINEAR).offset, 0);
    /* Every power of two from 16 B to 1 MiB, mixed sizes. */
    for (uint64_t al = 16; al <= MiB; al *= 2) {
        mt_alloc_block b = au_alloc(a, 3 * al / 2 + 16, al, MT_ALLOC_LINEAR);
        MT_CHECK_UINT_EQ(b.offset % al, 0);
    }
    AU_CHECK(a);
    mt_alloc_destroy(a);
}

static void test_granularity(void)
{
    mt_alloc *a = au_create(MT_ALLOC_BEST_FIT, 256, 4096);
    uint32_t r;
    MT_CHECK_OK(mt_alloc_add_region(a, 64 * KiB, NULL, &r));
    mt_alloc_block l1 = au_alloc(a, 256, 0, MT_ALLOC_LINEAR);
    mt_alloc_block n1 = au_alloc(a, 256, 0, MT_ALLOC_NONLINEAR);
    MT_CHECK_UINT_EQ(l1.offset, 0);
    MT_CHECK_UINT_EQ(n1.offset, 4096); /* not in l1's page */
    /* Linear fits in l1's page: its end stays off n1's page. */
    mt_alloc_block l2 = au_alloc(a, 256, 0, MT_ALLOC_LINEAR);
    MT_CHECK_UINT_EQ(l2.offset, 256);
    /* Non-linear: the hole [512, 4096) shares l2's page; goes after n1. */
    mt_alloc_block n2 = au_alloc(a, 256, 0, MT_ALLOC_NONLINEAR);
    MT_CHECK_UINT_EQ(n2.offset, 4352);
    mt_alloc_block l3 = au_alloc(a, 3840, 0, MT_ALLOC_LINEAR);
    MT_CHECK_UINT_EQ(l3.offset, 8192);
    AU_CHECK(a);
    mt_alloc_destroy(a);

    /* The end of a request must stay off the next block's page too. */
    a = au_create(MT_ALLOC_BEST_FIT, 256, 4096);
    MT_CHECK_OK(mt_alloc_add_region(a, 64 * KiB, NULL, &r));
    MT_CHECK_UINT_EQ(au_alloc(a, 256, 0, MT_ALLOC_LINEAR).offset, 0);
    mt_alloc_block mid = au_alloc(a, 4096, 0, MT_ALLOC_LINEAR);
    MT_CHECK_UINT_EQ(mid.offset, 256);
    MT_CHECK_UINT_EQ(au_alloc(a, 256, 0, MT_ALLOC_LINEAR).offset, 4352);
    MT_CHECK_OK(mt_alloc_free(a, r, mid.offset));
    /* Hole [256, 4352): start pushed to 4096 by the first block, then its
     * end would share 4352's page. */
    MT_CHECK_UINT_EQ(au_alloc(a, 256, 0, MT_ALLOC_NONLINEAR).offset, 8192);
    AU_CHECK(a);
    mt_alloc_destroy(a);
}

typedef struct grow_ctx {
    uint64_t region_size;
    int grows, fail;
    int released;
    uint32_t last_released;
    uint64_t last_released_size;
    void *last_user;
    uintptr_t next_user;
} grow_ctx;

static int grow_cb(void *user, mt_alloc *a, uint64_t min_size)
{
    grow_ctx *g = user;
    g->grows++;
    if (g->fail)
        return -ENOMEM;
    uint32_t id;
    uint64_t sz = min_size > g->region_size ? min_size : g->region_size;
    return mt_alloc_add_region(a, sz, (void *)++g->next_user, &id);
}

static void release_cb(void *user, uint32_t rid, uint64_t size, void *region_user)
{
    grow_ctx *g = user;
    g->released++;
    g->last_released = rid;
    g->last_released_size = size;
    g->last_user = region_user;
}

static void test_regions(void)
{
    grow_ctx g = {.region_size = 64 * KiB};
    mt_alloc_opts o = {.flags = MT_ALLOC_RELEASE_EMPTY, .grow = grow_cb, .release = release_cb,
                       .user = &g};
    mt_alloc *a;
    MT_CHECK_OK(mt_alloc_create(&o, &a));
    mt_alloc_block x = au_alloc(a, 32 * KiB, 0, MT_ALLOC_LINEAR);
    MT_CHECK_INT_EQ(g.grows, 1);
    MT_CHECK_UINT_EQ(x.region, 0);
    mt_alloc_block y = au_alloc(a, 32 * KiB, 0, MT_ALLOC_LINEAR);
    MT_CHECK_INT_EQ(g.grows, 1);
    MT_CHECK_UINT_EQ(y.region, 0);
    MT_CHECK_UINT_EQ(y.offset, 32 * KiB);
    mt_alloc_block z = au_alloc(a, 16, 0, MT_ALLOC_LINEAR);
    MT_CHECK_INT_EQ(g.grows, 2);
    MT_CHECK_UINT_EQ(z.region, 1);
    mt_alloc_region ri;
    MT_CHECK_OK(mt_alloc_region_info(a, 1, &ri));
    MT_CHECK_UINT_EQ(ri.size, 64 * KiB);
    MT_CHECK_UINT_EQ(ri.used_bytes, 16);
    MT_CHECK_UINT_EQ(ri.allocations, 1);
    MT_CHECK(ri.user == (void *)2);
    check_stats(a, 128 * KiB, 64 * KiB + 16, 3, 1, 64 * KiB - 16);

    /* Region 1 empties: it is the only empty one, so it is kept. */
    MT_CHECK_OK(mt_alloc_free(a, 1, z.offset));
    MT_CHECK_INT_EQ(g.released, 0);
    /* Region 0 empties too: now one is released. */
    MT_CHECK_OK(mt_alloc_free(a, 0, x.offset));
    MT_CHECK_OK(mt_alloc_free(a, 0, y.offset));
    MT_CHECK_INT_EQ(g.released, 1);
    MT_CHECK_UINT_EQ(g.last_released, 0);
    MT_CHECK_UINT_EQ(g.last_released_size, 64 * KiB);
    MT_CHECK(g.last_user == (void *)1);
    MT_CHECK_ERR(mt_alloc_region_info(a, 0, &ri), -ENOENT);
    check_stats(a, 64 * KiB, 0, 0, 1, 64 * KiB);
    AU_CHECK(a);

    /* Larger than a region: grow is asked for at least the request; the
     * freed slot 0 is reused. */
    mt_alloc_block big = au_alloc(a, 100 * KiB, 4 * KiB, MT_ALLOC_LINEAR);
    MT_CHECK_INT_EQ(g.grows, 3);
    MT_CHECK_UINT_EQ(big.region, 0);
    MT_CHECK_UINT_EQ(big.offset, 0);
    MT_CHECK_OK(mt_alloc_region_info(a, 0, &ri));
    MT_CHECK_UINT_EQ(ri.size, 100 * KiB);

    /* Grow failing: -ENOSPC, nothing changed. */
    g.fail = 1;
    AU_CHECK_ERR_UNCHANGED(a, mt_alloc_allocate(a, MiB, 0, MT_ALLOC_LINEAR, &x), -ENOSPC);
    MT_CHECK_INT_EQ(g.grows, 4);
    g.fail = 0;

    /* remove_region: busy, unknown, then fine. */
    AU_CHECK_ERR_UNCHANGED(a, mt_alloc_remove_region(a, 0), -EBUSY);
    AU_CHECK_ERR_UNCHANGED(a, mt_alloc_remove_region(a, 7), -ENOENT);

    /* trim releases region 1 (empty), keeps region 0 (busy). */
    MT_CHECK_INT_EQ(mt_alloc_trim(a), 1);
    MT_CHECK_INT_EQ(g.released, 2);
    MT_CHECK_UINT_EQ(g.last_released, 1);
    MT_CHECK_OK(mt_alloc_free(a, 0, big.offset));
    MT_CHECK_INT_EQ(g.released, 2); /* the only empty region: kept */
    uint32_t id;
    MT_CHECK_OK(mt_alloc_add_region(a, 8 * KiB, NULL, &id));
    MT_CHECK_UINT_EQ(id, 1);
    MT_CHECK_OK(mt_alloc_remove_region(a, id)); /* asked for: no release call */
    MT_CHECK_INT_EQ(g.released, 2);
    AU_CHECK(a);
    mt_alloc_destroy(a); /* releases region 0 */
    MT_CHECK_INT_EQ(g.released, 3);
    MT_CHECK_UINT_EQ(g.last_released, 0);
}

static void test_bad_input(void)
{
    mt_alloc *a;
    mt_alloc_opts o = {.min_align = 24};
    MT_CHECK_ERR(mt_alloc_create(&o, &a), -EINVAL);
    o = (mt_alloc_opts){.granularity = 3000};
    MT_CHECK_ERR(mt_alloc_create(&o, &a), -EINVAL);
    o = (mt_alloc_opts){.strategy = (mt_alloc_strategy)2};
    MT_CHECK_ERR(mt_alloc_create(&o, &a), -EINVAL);
    o = (mt_alloc_opts){.flags = 0x80};
    MT_CHECK_ERR(mt_alloc_create(&o, &a), -EINVAL);
    o = (mt_alloc_opts){.flags = MT_ALLOC_RELEASE_EMPTY};
    MT_CHECK_ERR(mt_alloc_create(&o, &a), -EINVAL);
    MT_CHECK_ERR(mt_alloc_create(NULL, NULL), -EINVAL);
    MT_CHECK_OK(mt_alloc_create(NULL, &a)); /* all defaults */

    mt_alloc_block b;
    /* No region at all. */
    AU_CHECK_ERR_UNCHANGED(a, mt_alloc_allocate(a, 16, 0, MT_ALLOC_LINEAR, &b), -ENOSPC);
    uint32_t r, r2;
    AU_CHECK_ERR_UNCHANGED(a, mt_alloc_add_region(a, 0, NULL, &r), -EINVAL);
    AU_CHECK_ERR_UNCHANGED(a, mt_alloc_add_region(a, 8, NULL, &r), -EINVAL); /* < granule */
    AU_CHECK_ERR_UNCHANGED(a, mt_alloc_add_region(a, MT_ALLOC_MAX_SIZE * 2, NULL, &r), -EINVAL);
    MT_CHECK_OK(mt_alloc_add_region(a, 64 * KiB + 8, NULL, &r)); /* rounded down */
    mt_alloc_block x = au_alloc(a, 1000, 0, MT_ALLOC_LINEAR);
    mt_alloc_block y = au_alloc(a, 1000, 0, MT_ALLOC_LINEAR);
    MT_CHECK_OK(mt_alloc_add_region(a, 4 * KiB, NULL, &r2));

    AU_CHECK_ERR_UNCHANGED(a, mt_alloc_allocate(a, 0, 0, MT_ALLOC_LINEAR, &b), -EINVAL);
    AU_CHECK_ERR_UNCHANGED(a, mt_alloc_allocate(a, 16, 3, MT_ALLOC_LINEAR, &b), -EINVAL);
    AU_CHECK_ERR_UNCHANGED(a, mt_alloc_allocate(a, 16, 48, MT_ALLOC_LINEAR, &b), -EINVAL);
    AU_CHECK_ERR_UNCHANGED(a, mt_alloc_allocate(a, 16, 0, (mt_alloc_kind)2, &b), -EINVAL);
    AU_CHECK_ERR_UNCHANGED(a, mt_alloc_allocate(a, 16, 0, MT_ALLOC_LINEAR, NULL), -EINVAL);
    AU_CHECK_ERR_UNCHANGED(a, mt_alloc_allocate(a, 128 * KiB, 0, MT_ALLOC_LINEAR, &b), -ENOSPC);
    AU_CHECK_ERR_UNCHANGED(a, mt_alloc_allocate(a, MT_ALLOC_MAX_SIZE + 1, 0, MT_ALLOC_LINEAR, &b),
                           -ENOSPC);
    AU_CHECK_ERR_UNCHANGED(a, mt_alloc_allocate(a, UINT64_MAX, 0, MT_ALLOC_LINEAR, &b), -ENOSPC);

    /* Frees: double, unknown offsets (inside an allocation, in free space),
     * off the granule, past the region, unknown region. */
    MT_CHECK_OK(mt_alloc_free(a, x.region, x.offset));
    AU_CHECK_ERR_UNCHANGED(a, mt_alloc_free(a, x.region, x.offset), -ENOENT);
    AU_CHECK_ERR_UNCHANGED(a, mt_alloc_free(a, y.region, y.offset + 16), -ENOENT);
    AU_CHECK_ERR_UNCHANGED(a, mt_alloc_free(a, y.region, 32 * KiB), -ENOENT);
    AU_CHECK_ERR_UNCHANGED(a, mt_alloc_free(a, y.region, y.offset + 8), -EINVAL);
    AU_CHECK_ERR_UNCHANGED(a, mt_alloc_free(a, y.region, 64 * KiB), -EINVAL);
    AU_CHECK_ERR_UNCHANGED(a, mt_alloc_free(a, y.region, UINT64_MAX), -EINVAL);
    AU_CHECK_ERR_UNCHANGED(a, mt_alloc_free(a, 2, 0), -ENOENT);
    AU_CHECK_ERR_UNCHANGED(a, mt_alloc_free(a, UINT32_MAX, 0), -ENOENT);
    AU_CHECK_ERR_UNCHANGED(a, mt_alloc_free(a, r2, 0), -ENOENT); /* empty region */
    AU_CHECK_ERR_UNCHANGED(a, mt_alloc_region_info(a, 9, &(mt_alloc_region){0}), -ENOENT);

    /* Out of space exactly at the boundary: fill everything, then one more. */
    MT_CHECK_OK(mt_alloc_free(a, y.region, y.offset));
    mt_alloc_block f1 = au_alloc(a, 64 * KiB, 0, MT_ALLOC_LINEAR);
    mt_alloc_block f2 = au_alloc(a, 4 * KiB, 0, MT_ALLOC_LINEAR);
    MT_CHECK_UINT_EQ(f1.region, r);
    MT_CHECK_UINT_EQ(f2.region, r2);
    check_stats(a, 68 * KiB, 68 * KiB, 2, 0, 0);
    AU_CHECK_ERR_UNCHANGED(a, mt_alloc_allocate(a, 16, 0, MT_ALLOC_LINEAR, &b), -ENOSPC);
    MT_CHECK_OK(mt_alloc_free(a, f2.region, f2.offset));
    MT_CHECK_UINT_EQ(au_alloc(a, 16, 0, MT_ALLOC_LINEAR).region, r2);
    AU_CHECK(a);
    mt_alloc_destroy(a);
    mt_alloc_destroy(NULL);
}

/* mt_alloc_free_block: the hint only saves the lookup. With a good hint it
 * frees exactly what mt_alloc_free frees; any other hint (stale, edited,
 * another block's, out of range) falls back to the offset, with the same
 * result or error, and errors change nothing. */
static void test_free_block(void)
{
    mt_alloc *a = au_create(MT_ALLOC_BEST_FIT, 16, 0), *other = au_create(MT_ALLOC_BEST_FIT, 16, 0);
    uint32_t r, r_other;
    MT_CHECK_OK(mt_alloc_add_region(a, MiB, NULL, &r));
    MT_CHECK_OK(mt_alloc_add_region(other, MiB, NULL, &r_other));
    mt_alloc_block x = au_alloc(a, 1000, 0, MT_ALLOC_LINEAR);
    mt_alloc_block y = au_alloc(a, 2000, 256, MT_ALLOC_NONLINEAR);
    mt_alloc_block z = au_alloc(a, 3000, 0, MT_ALLOC_LINEAR);
    mt_alloc_block o = au_alloc(other, 1000, 0, MT_ALLOC_LINEAR);
    MT_CHECK(sizeof x == 24);

    /* Null arguments. */
    AU_CHECK_ERR_UNCHANGED(a, mt_alloc_free_block(NULL, &x), -EINVAL);
    AU_CHECK_ERR_UNCHANGED(a, mt_alloc_free_block(a, NULL), -EINVAL);

    /* A good hint frees the block, as by offset. */
    MT_CHECK_OK(mt_alloc_free_block(a, &y));
    AU_CHECK(a);
    AU_CHECK_ERR_UNCHANGED(a, mt_alloc_free(a, y.region, y.offset), -ENOENT);
    /* Stale now (its node went back or went to another block): -ENOENT. */
    AU_CHECK_ERR_UNCHANGED(a, mt_alloc_free_block(a, &y), -ENOENT);

    /* Another block's hint with x's offset: x is freed (found by offset). */
    mt_alloc_block edited = x;
    edited.hint = z.hint;
    MT_CHECK_OK(mt_alloc_free_block(a, &edited));
    AU_CHECK_ERR_UNCHANGED(a, mt_alloc_free(a, x.region, x.offset), -ENOENT);
    MT_CHECK_OK(mt_alloc_free(a, z.region, z.offset)); /* z was still there */
    z = au_alloc(a, 3000, 0, MT_ALLOC_LINEAR); /* at 0 again: the region is empty */

    /* Hints out of range, NIL, inside a node (ids are byte offsets),
     * inside an allocation, off the granule, in another region: the offset
     * decides. */
    uint32_t hints[] = {0, 1, UINT32_MAX, 1u << 30, o.hint, z.hint + 8, z.hint - 1};
    for (unsigned i = 0; i < sizeof hints / sizeof hints[0]; i++) {
        mt_alloc_block h = z;
        h.hint = hints[i];
        h.offset = z.offset + 16; /* inside z: no allocation starts there */
        AU_CHECK_ERR_UNCHANGED(a, mt_alloc_free_block(a, &h), -ENOENT);
        h.offset = z.offset + 8; /* off the granule */
        AU_CHECK_ERR_UNCHANGED(a, mt_alloc_free_block(a, &h), -EINVAL);
        h.offset = z.offset;
        h.region = 7; /* no such region */
        AU_CHECK_ERR_UNCHANGED(a, mt_alloc_free_block(a, &h), -ENOENT);
    }
    /* `other`'s block given to a: its hint names a node of `other`; the
     * offset decides, and in a it is z that starts there. */
    MT_CHECK_UINT_EQ(o.offset, 0);
    MT_CHECK_UINT_EQ(z.offset, 0);
    MT_CHECK_OK(mt_alloc_free_block(a, &o));
    check_stats(a, MiB, 0, 0, 1, MiB);
    MT_CHECK_OK(mt_alloc_free_block(other, &o));
    AU_CHECK(a);
    AU_CHECK(other);
    mt_alloc_destroy(a);
    mt_alloc_destroy(other);
}

/* MT_ALLOC_NO_OFFSET_MAP: frees go by block only; a block whose hint does
 * not hold gets the error mt_alloc_free would give, and -ENOENT where that
 * would have looked the offset up. A hint naming a region's sentinel frees
 * nothing, whatever the offset. Pools, which free by offset, refuse the
 * flag. The map's memory shows in metadata_bytes. */
static void test_no_offset_map(void)
{
    mt_alloc_opts o = {.flags = MT_ALLOC_NO_OFFSET_MAP};
    mt_alloc *a, *m = au_create(MT_ALLOC_BEST_FIT, 0, 0);
    MT_CHECK_OK(mt_alloc_create(&o, &a));
    MT_CHECK(a->ht == NULL);
    uint32_t r, rm;
    MT_CHECK_OK(mt_alloc_add_region(a, MiB, NULL, &r));
    MT_CHECK_OK(mt_alloc_add_region(m, MiB, NULL, &rm));
    mt_alloc_block x = au_alloc(a, 1000, 0, MT_ALLOC_LINEAR);
    mt_alloc_block y = au_alloc(a, 2000, 256, MT_ALLOC_LINEAR);
    au_alloc(m, 1000, 0, MT_ALLOC_LINEAR);
    au_alloc(m, 2000, 256, MT_ALLOC_LINEAR);

    AU_CHECK_ERR_UNCHANGED(a, mt_alloc_free(a, r, x.offset), -ENOTSUP);
    mt_alloc_block bad = x;
    bad.hint = y.hint; /* another allocation's node */
    AU_CHECK_ERR_UNCHANGED(a, mt_alloc_free_block(a, &bad), -ENOENT);
    bad.offset = x.offset + 8; /* off the granule */
    AU_CHECK_ERR_UNCHANGED(a, mt_alloc_free_block(a, &bad), -EINVAL);
    bad.offset = 2 * MiB; /* outside the region */
    AU_CHECK_ERR_UNCHANGED(a, mt_alloc_free_block(a, &bad), -EINVAL);
    bad.region = 5;
    AU_CHECK_ERR_UNCHANGED(a, mt_alloc_free_block(a, &bad), -ENOENT);
    /* The sentinel: used, of this region, but no block at any offset. */
    uint64_t offs[] = {0, x.offset, y.offset, UINT64_MAX - 255, OFF_MASK << a->gshift};
    for (unsigned i = 0; i < sizeof offs / sizeof offs[0]; i++) {
        mt_alloc_block s = {.offset = offs[i], .region = r, .hint = a->reg[r].sentinel};
        MT_CHECK(mt_alloc_free_block(a, &s) != 0);
        mt_alloc_block sm = {.offset = offs[i], .region = rm, .hint = m->reg[rm].sentinel};
        if (offs[i] != 0 && offs[i] != y.offset) /* with the map the offset decides */
            MT_CHECK(mt_alloc_free_block(m, &sm) != 0);
    }
    /* Without the map the hint check reads a used block's state and region
     * as one word (internal.h, NOTE_USED): a used node whose note no longer
     * says so is not trusted, and the checker reports it. */
    uint32_t note = NODE(a->b, x.hint)->note;
    MT_CHECK_UINT_EQ(note, NOTE_USED);
    NODE(a->b, x.hint)->note = 0;
    MT_CHECK_ERR(mt_alloc_free_block(a, &x), -ENOENT);
    MT_CHECK_ERR(mt_alloc_check(a, NULL, 0), MT_ECORRUPT);
    NODE(a->b, x.hint)->note = note;
    AU_CHECK(a);
    AU_CHECK(m);

    mt_alloc_stats sa, sm;
    MT_CHECK_OK(mt_alloc_get_stats(a, &sa));
    MT_CHECK_OK(mt_alloc_get_stats(m, &sm));
    MT_CHECK_UINT_EQ(sa.allocations, 2);
    MT_CHECK(sa.metadata_bytes >= sizeof *a + (uint64_t)a->b_cap * sizeof(blk));
    MT_CHECK_UINT_EQ(sm.metadata_bytes - sa.metadata_bytes,
                     (uint64_t)(m->ht_mask + 1) * sizeof(mbucket)); /* the map, nothing else */

    /* y's right neighbour is the region's free tail: freeing y merges it,
     * and its node goes back unused with its free block's size kept. A
     * block naming that node and its old offset frees nothing. */
    uint32_t tail = NODE(a->b, y.hint)->next_phys;
    MT_CHECK(blk_is_free(NODE(a->b, tail)));
    mt_alloc_block gone = {.offset = NODE(a->b, tail)->off << a->gshift, .region = r,
                           .hint = tail};
    MT_CHECK_OK(mt_alloc_free_block(a, &y));
    MT_CHECK(NODE(a->b, tail)->size != 0 && blk_is_free(NODE(a->b, tail)));
    AU_CHECK_ERR_UNCHANGED(a, mt_alloc_free_block(a, &gone), -ENOENT);
    AU_CHECK_ERR_UNCHANGED(a, mt_alloc_free_block(a, &y), -ENOENT); /* double free */
    MT_CHECK_OK(mt_alloc_free_block(a, &x));
    check_stats(a, MiB, 0, 0, 1, MiB);
    mt_alloc_destroy(a);
    mt_alloc_destroy(m);

    mt_pools_opts po = {.flags = MT_ALLOC_NO_OFFSET_MAP};
    mt_pools *set = NULL;
    MT_CHECK_ERR(mt_pools_create(&po, &set), -EINVAL);
    MT_CHECK(set == NULL);
}

/* The offset map's overflow machinery: with a degenerate hash (seed 0:
 * every key goes to bucket 0), entries spill into the next buckets, lookups
 * follow the spill counts, and the insertion that would land past
 * PROBE_LIMIT rebuilds the map with a new seed. The checker verifies
 * placement, spill counts and the blocks' notes at every step. */
static void test_map_overflow(void)
{
    mt_alloc *a = au_create(MT_ALLOC_BEST_FIT, 16, 0);
    uint32_t r;
    MT_CHECK_OK(mt_alloc_add_region(a, MiB, NULL, &r));
    MT_CHECK(a->live == 0);
    a->ht_seed = 0; /* an empty map: nothing hashed with the old seed */
    enum { N = 100 };
    mt_alloc_block v[N];
    for (int i = 0; i < N; i++) {
        v[i] = au_alloc(a, 16, 0, MT_ALLOC_LINEAR);
        if (i == (PROBE_LIMIT + 1) * MAP_LANES - 1) /* the buckets within reach are full */
            MT_CHECK(a->ht_seed == 0 && a->ht[0].spill == PROBE_LIMIT * MAP_LANES);
        AU_CHECK(a);
    }
    MT_CHECK(a->ht_seed != 0); /* rebuilt */
    for (int i = 0; i < N; i += 2) {
        MT_CHECK_OK(mt_alloc_free(a, r, v[i].offset));
        MT_CHECK_OK(mt_alloc_free_block(a, &v[i + 1]));
        AU_CHECK(a);
    }
    check_stats(a, MiB, 0, 0, 1, MiB);
    mt_alloc_destroy(a);
}

/* The checker must notice each kind of damage; restoring makes it pass. */
static void test_checker_catches(void)
{
    mt_alloc *a = au_create(MT_ALLOC_BEST_FIT, 16, 0);
    uint32_t r;
    MT_CHECK_OK(mt_alloc_add_region(a, MiB, NULL, &r));
    mt_alloc_block x = au_alloc(a, 100, 0, MT_ALLOC_LINEAR);
    mt_alloc_block y = au_alloc(a, 100, 0, MT_ALLOC_LINEAR);
    MT_CHECK_OK(mt_alloc_free(a, r, x.offset));
    AU_CHECK(a);
    char msg[256];
    mloc l = map_find(a, r, y.offset >> a->gshift); /* nodes count granules */
    MT_CHECK(l.bucket != UINT32_MAX);
    uint32_t used = map_id(a, l);
    MT_CHECK(used != NIL && blk_data_off(NODE(a->b, used)) << a->gshift == y.offset);
    uint32_t hole = region_first(a, r); /* the freed block at offset 0 */
    MT_CHECK(blk_is_free(NODE(a->b, hole)));

    NODE(a->b, used)->size ^= SZ_USED; /* reads as free */
    MT_CHECK_ERR(mt_alloc_check(a, msg, sizeof msg), MT_ECORRUPT);
    MT_CHECK(msg[0] != '\0');
    NODE(a->b, used)->size ^= SZ_USED;
    AU_CHECK(a);
    NODE(a->b, used)->size |= SZ_SENT; /* reads as a sentinel */
    MT_CHECK_ERR(mt_alloc_check(a, msg, sizeof msg), MT_ECORRUPT);
    NODE(a->b, used)->size &= ~SZ_SENT;
    NODE(a->b, used)->region ^= 1; /* another region */
    MT_CHECK_ERR(mt_alloc_check(a, msg, sizeof msg), MT_ECORRUPT);
    NODE(a->b, used)->region ^= 1;
    uint32_t sent = a->reg[r].sentinel;
    uint32_t last = NODE(a->b, sent)->prev_phys;
    NODE(a->b, sent)->prev_phys = hole; /* the chain's end disagrees */
    MT_CHECK_ERR(mt_alloc_check(a, msg, sizeof msg), MT_ECORRUPT);
    NODE(a->b, sent)->prev_phys = last;
    AU_CHECK(a);

    NODE(a->b, hole)->size += 1;
    MT_CHECK_ERR(mt_alloc_check(a, msg, sizeof msg), MT_ECORRUPT);
    NODE(a->b, hole)->size -= 1;

    a->ix.cls_map[N_CLASSES / 64] ^= 1ull << (N_CLASSES % 64); /* a bit past the last class */
    MT_CHECK_ERR(mt_alloc_check(a, msg, sizeof msg), MT_ECORRUPT);
    a->ix.cls_map[N_CLASSES / 64] ^= 1ull << (N_CLASSES % 64);
    a->ix.cls_map[0] ^= 1; /* class 0 never has blocks */
    MT_CHECK_ERR(mt_alloc_check(a, msg, sizeof msg), MT_ECORRUPT);
    a->ix.cls_map[0] ^= 1;

    a->used += 1;
    MT_CHECK_ERR(mt_alloc_check(a, NULL, 0), MT_ECORRUPT);
    a->used -= 1;

    a->pad += 1; /* the kept-pad counter */
    MT_CHECK_ERR(mt_alloc_check(a, NULL, 0), MT_ECORRUPT);
    a->pad -= 1;
    uint64_t off_saved = NODE(a->b, used)->off;
    /* a pad covering the block */
    NODE(a->b, used)->off |= blk_size(NODE(a->b, used)) << OFF_PAD_SHIFT;
    MT_CHECK_ERR(mt_alloc_check(a, msg, sizeof msg), MT_ECORRUPT);
    NODE(a->b, used)->off = off_saved;

    mbucket *bk = &a->ht[l.bucket];
    bk->tag[l.lane] ^= 1; /* the entry's tag no longer matches its hash */
    MT_CHECK_ERR(mt_alloc_check(a, msg, sizeof msg), MT_ECORRUPT);
    bk->tag[l.lane] ^= 1;
    uint32_t empty = lanes_eq(bk, 0);
    MT_CHECK(empty != 0);
    uint32_t other = (uint32_t)__builtin_ctz(empty); /* a second entry for the block */
    bk->tag[other] = bk->tag[l.lane];
    bk->id[other] = used;
    MT_CHECK_ERR(mt_alloc_check(a, msg, sizeof msg), MT_ECORRUPT);
    bk->tag[other] = 0;
    bk->spill++; /* a spill count that no entry accounts for */
    MT_CHECK_ERR(mt_alloc_check(a, msg, sizeof msg), MT_ECORRUPT);
    bk->spill--;
    AU_CHECK(a);

    uint32_t saved = NODE(a->b, used)->next_phys;
    NODE(a->b, used)->next_phys = used; /* a cycle */
    MT_CHECK_ERR(mt_alloc_check(a, msg, sizeof msg), MT_ECORRUPT);
    NODE(a->b, used)->next_phys = saved;
    AU_CHECK(a);
    mt_alloc_destroy(a);
}

/* A pad of at most 1/16 of the request stays with the allocation instead of
 * becoming a free block; a larger one, or any with granularity pages, does
 * not. The data offset is what the caller sees and frees by. */
static void test_kept_pad(void)
{
    mt_alloc *a = au_create(MT_ALLOC_BEST_FIT, 16, 0);
    uint32_t r;
    MT_CHECK_OK(mt_alloc_add_region(a, 64 * KiB, NULL, &r));
    au_alloc(a, 16, 0, MT_ALLOC_LINEAR);                          /* [0, 16) */
    mt_alloc_block b = au_alloc(a, 4096, 256, MT_ALLOC_LINEAR);   /* pad 240 <= 4096 / 16 */
    MT_CHECK_UINT_EQ(b.offset, 256);
    MT_CHECK_UINT_EQ(b.size, 4096);
    mt_alloc_stats s;
    MT_CHECK_OK(mt_alloc_get_stats(a, &s));
    MT_CHECK_UINT_EQ(s.pad_bytes, 240);
    MT_CHECK_UINT_EQ(s.used_bytes, 16 + 240 + 4096);
    MT_CHECK_UINT_EQ(s.free_blocks, 1); /* no free block for the pad */
    char *d = au_snapshot(a);
    MT_CHECK(strstr(d, "  [0x10, 0x1100)         4336 linear, data at 0x100\n") != NULL);
    free(d);
    /* The pad is inside the allocation: nothing starts there. */
    AU_CHECK_ERR_UNCHANGED(a, mt_alloc_free(a, r, 16), -ENOENT);
    /* A pad larger than 1/16 of the request is a free block. */
    mt_alloc_block c = au_alloc(a, 1024, 8192, MT_ALLOC_LINEAR); /* pad 3840 from 0x1100 */
    MT_CHECK_UINT_EQ(c.offset, 8192);
    MT_CHECK_OK(mt_alloc_get_stats(a, &s));
    MT_CHECK_UINT_EQ(s.pad_bytes, 240);
    MT_CHECK_UINT_EQ(s.free_blocks, 2);
    MT_CHECK_OK(mt_alloc_free(a, r, b.offset));
    MT_CHECK_OK(mt_alloc_get_stats(a, &s));
    MT_CHECK_UINT_EQ(s.pad_bytes, 0);
    MT_CHECK_UINT_EQ(s.used_bytes, 16 + 1024);
    MT_CHECK_UINT_EQ(s.free_blocks, 2); /* [16, 8192) came back whole */
    MT_CHECK_UINT_EQ(s.largest_free, 64 * KiB - 8192 - 1024);
    AU_CHECK(a);
    mt_alloc_destroy(a);

    /* With granularity pages every pad is a free block. */
    a = au_create(MT_ALLOC_BEST_FIT, 16, 1024);
    MT_CHECK_OK(mt_alloc_add_region(a, 64 * KiB, NULL, &r));
    au_alloc(a, 16, 0, MT_ALLOC_LINEAR);
    MT_CHECK_UINT_EQ(au_alloc(a, 4096, 256, MT_ALLOC_LINEAR).offset, 256);
    MT_CHECK_OK(mt_alloc_get_stats(a, &s));
    MT_CHECK_UINT_EQ(s.pad_bytes, 0);
    MT_CHECK_UINT_EQ(s.free_blocks, 2);
    AU_CHECK(a);
    mt_alloc_destroy(a);
}

static void test_dump(void)
{
    mt_alloc *a = au_create(MT_ALLOC_BEST_FIT, 16, 0);
    uint32_t r;
    MT_CHECK_OK(mt_alloc_add_region(a, 4096, NULL, &r));
    au_alloc(a, 64, 0, MT_ALLOC_LINEAR);
    au_alloc(a, 64, 1024, MT_ALLOC_NONLINEAR);
    char *s = au_snapshot(a);
    const char *want =
        "region 0: size 4096, used 128, 2 allocations\n"
        "  [0x0, 0x40)           64 linear\n"
        "  [0x40, 0x400)          960 free\n"
        "  [0x400, 0x440)           64 nonlinear\n"
        "  [0x440, 0x1000)         3008 free\n"
        "total 4096, free 3968 in 2 blocks, largest 3008, 2 allocations, fragmentation 0.2419\n";
    if (strcmp(s, want) != 0) {
        fprintf(stderr, "dump:\n%s", s);
        MT_CHECK(0);
    }
    free(s);
    mt_alloc_destroy(a);
}

int main(void)
{
    test_split_coalesce();
    test_strategies();
    test_alignment();
    test_granularity();
    test_regions();
    test_bad_input();
    test_free_block();
    test_no_offset_map();
    test_map_overflow();
    test_checker_catches();
    test_kept_pad();
    test_dump();
    puts("alloc basic: ok");
    return 0;
}
