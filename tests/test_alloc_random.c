/* alloc: randomised alloc/free sequences checked against a reference model.
 *
 * The model keeps, per region, the owner of every granule. After every step:
 * the new allocation lies inside its region, is aligned, overlaps nothing,
 * keeps granularity pages of different kinds apart; counters agree with the
 * model. Periodically: the consistency checker passes, and the free blocks
 * are exactly the model's maximal free runs (count and largest), which
 * proves coalescing is immediate and no byte is lost. Every -ENOSPC is
 * checked against TLSF's guarantee: no free run of the rounded worst-case
 * size existed. Bad frees are mixed in, with the error the model predicts.
 * Regions come and go through grow/release callbacks. Half the
 * configurations run without the offset map (frees by block only).
 * --seed N replays. */
#include "alloc/search.h"
#include "alloc_util.h"

#define MAX_REGIONS 8
#define MAX_LIVE 4096

typedef struct mregion {
    int live;
    uint64_t size;
    uint32_t *owner; /* per granule: live index + 1, or 0 */
} mregion;

typedef struct mlive {
    uint32_t region;
    uint64_t offset, size;
    uint64_t pad; /* bytes before offset that the allocation keeps */
    unsigned kind;
    uint32_t hint; /* as mt_alloc_allocate returned it */
} mlive;

typedef struct model {
    uint64_t rng;
    unsigned gshift, pshift;
    mregion reg[MAX_REGIONS];
    mlive live[MAX_LIVE];
    uint32_t nlive;
    uint64_t used, total;
    uint64_t pad; /* bytes of pad kept in front of allocations */
    int grow_fail; /* grow refuses while set */
    int no_map;    /* MT_ALLOC_NO_OFFSET_MAP: frees only by block */
    int nregions;
    unsigned n_alloc, n_nospc, n_free, n_bad, n_grow, n_release, n_pad; /* shows what ran */
} model;

static uint64_t rnd(model *m, uint64_t n) { return mt_test_below(&m->rng, n); }

static void region_added(model *m, uint32_t id, uint64_t size)
{
    MT_CHECK(id < MAX_REGIONS);
    MT_CHECK(!m->reg[id].live);
    m->reg[id] = (mregion){1, size, calloc(size >> m->gshift, sizeof(uint32_t))};
    MT_CHECK(m->reg[id].owner != NULL);
    m->total += size;
    m->nregions++;
}

static int grow_cb(void *user, mt_alloc *a, uint64_t min_size)
{
    model *m = user;
    if (m->grow_fail || m->nregions >= MAX_REGIONS - 1)
        return -ENOSPC;
    uint64_t g = 1ull << m->gshift;
    uint64_t size = align_up(min_size + rnd(m, 128 * 1024), g);
    uint32_t id;
    MT_CHECK_OK(mt_alloc_add_region(a, size, NULL, &id));
    region_added(m, id, size);
    m->n_grow++;
    return 0;
}

static void release_cb(void *user, uint32_t id, uint64_t size, void *region_user)
{
    model *m = user;
    (void)region_user;
    MT_CHECK(id < MAX_REGIONS && m->reg[id].live);
    MT_CHECK_UINT_EQ(size, m->reg[id].size);
    for (uint64_t i = 0; i < size >> m->gshift; i++)
        MT_CHECK_UINT_EQ(m->reg[id].owner[i], 0); /* only fully free regions go */
    free(m->reg[id].owner);
    m->reg[id] = (mregion){0};
    m->total -= size;
    m->nregions--;
    m->n_release++;
}

/* Maximal free runs over all regions: their number and the longest. */
static void free_runs(const model *m, uint64_t *count, uint64_t *largest)
{
    *count = *largest = 0;
    for (int r = 0; r < MAX_REGIONS; r++) {
        if (!m->reg[r].live)
            continue;
        uint64_t n = m->reg[r].size >> m->gshift, run = 0;
        for (uint64_t i = 0; i <= n; i++) {
            if (i < n && m->reg[r].owner[i] == 0) {
                run++;
                continue;
            }
            if (run) {
                (*count)++;
                if (run > *largest)
                    *largest = run;
            }
            run = 0;
        }
    }
    *largest <<= m->gshift;
}

/* No granule of another kind within the pages the block touches at its ends. */
static void check_separation(const model *m, const mlive *l)
{
    if (m->pshift == 0)
        return;
    const mregion *r = &m->reg[l->region];
    uint64_t gs = m->gshift, first = l->offset >> gs, last = (l->offset + l->size - 1) >> gs;
    uint64_t lo = ((l->offset >> m->pshift) << m->pshift) >> gs;
    uint64_t hi = ((((l->offset + l->size - 1) >> m->pshift) + 1) << m->pshift) >> gs;
    if (hi > r->size >> gs)
        hi = r->size >> gs;
    for (uint64_t i = lo; i < hi; i++) {
        if (i >= first && i <= last)
            continue;
        uint32_t o = r->owner[i];
        if (o && m->live[o - 1].kind != l->kind) {
            fprintf(stderr, "block at 0x%" PRIx64 " (kind %u) shares a page with one of kind %u\n",
                    l->offset, l->kind, m->live[o - 1].kind);
            MT_CHECK(0);
        }
    }
}

static void mark(model *m, uint32_t idx, uint32_t val)
{
    const mlive *l = &m->live[idx];
    uint32_t *own = m->reg[l->region].owner;
    for (uint64_t i = (l->offset - l->pad) >> m->gshift; i < (l->offset + l->size) >> m->gshift;
         i++) {
        if (val)
            MT_CHECK_UINT_EQ(own[i], 0); /* overlap */
        own[i] = val;
    }
}

static void do_alloc(model *m, mt_alloc *a)
{
    uint64_t size, pick = rnd(m, 100);
    if (pick < 50)
        size = 1 + rnd(m, 4096);
    else if (pick < 85)
        size = 4096 + rnd(m, 28 * 1024);
    else
        size = 32 * 1024 + rnd(m, 96 * 1024);
    uint64_t align = rnd(m, 4) == 0 ? 0 : 1ull << rnd(m, 18);
    unsigned kind = m->pshift ? (unsigned)rnd(m, 2) : 0;
    mt_alloc_block b;
    uint64_t before = m->total;
    int rc = mt_alloc_allocate(a, size, align, (mt_alloc_kind)kind, &b);
    uint64_t g = 1ull << m->gshift;
    uint64_t size_r = align_up(size, g);
    if (rc == -ENOSPC) {
        /* TLSF promise: a free run of the rounded worst case would have fit. */
        mta_req r = {size_r >> m->gshift, align >> m->gshift ? align >> m->gshift : 1, kind};
        uint64_t need = class_round_up(mti_alloc_worst_case(a, &r)) << m->gshift;
        uint64_t count, largest;
        free_runs(m, &count, &largest);
        if (largest >= need) {
            fprintf(stderr, "-ENOSPC for %" PRIu64 " B align %" PRIu64 " with a free run of %"
                    PRIu64 " B (guaranteed at %" PRIu64 ")\n", size, align, largest, need);
            MT_CHECK(0);
        }
        MT_CHECK_UINT_EQ(m->total, before); /* a failed grow added nothing */
        m->n_nospc++;
        return;
    }
    MT_CHECK_OK(rc);
    MT_CHECK(m->nlive < MAX_LIVE);
    MT_CHECK(b.region < MAX_REGIONS && m->reg[b.region].live);
    MT_CHECK_UINT_EQ(b.size, size_r);
    MT_CHECK_UINT_EQ(b.offset % (align > g ? align : g), 0);
    MT_CHECK(b.offset + b.size <= m->reg[b.region].size);
    /* The pad between the start of the free run the allocation came from
     * and its data is kept when it is at most 1/16 of the request, at most
     * 255 granules (the node's 8 bits), and there are no granularity pages
     * (alloc.c). */
    uint64_t run = b.offset >> m->gshift;
    while (run > 0 && m->reg[b.region].owner[run - 1] == 0)
        run--;
    uint64_t pad = (b.offset >> m->gshift) - run;
    if (m->pshift || pad > 255 || pad * 16 > size_r >> m->gshift)
        pad = 0;
    pad <<= m->gshift;
    m->pad += pad;
    m->n_pad += pad != 0;
    uint32_t idx = m->nlive++;
    m->live[idx] = (mlive){b.region, b.offset, b.size, pad, kind, b.hint};
    mark(m, idx, idx + 1);
    check_separation(m, &m->live[idx]);
    m->used += b.size;
    m->n_alloc++;
}

static void model_free(model *m, uint32_t idx)
{
    mark(m, idx, 0);
    m->used -= m->live[idx].size;
    m->pad -= m->live[idx].pad;
    uint32_t last = --m->nlive;
    if (idx != last) {
        m->live[idx] = m->live[last];
        mark(m, idx, 0);
        mark(m, idx, idx + 1);
    }
}

static void do_free(model *m, mt_alloc *a)
{
    if (m->nlive == 0)
        return;
    uint32_t idx = (uint32_t)rnd(m, m->nlive);
    mlive l = m->live[idx];
    mt_alloc_block b = {.region = l.region, .offset = l.offset, .size = l.size, .hint = l.hint};
    model_free(m, idx); /* first: the free may release the region */
    /* By offset, or by block with its hint: same effect. Without the map
     * there is no freeing by offset. */
    int by_block = m->no_map || rnd(m, 2) != 0;
    if (m->no_map)
        AU_CHECK_ERR_UNCHANGED(a, mt_alloc_free(a, l.region, l.offset), -ENOTSUP);
    MT_CHECK_OK(by_block ? mt_alloc_free_block(a, &b) : mt_alloc_free(a, l.region, l.offset));
    /* Double free right away (the region may even be gone): -ENOENT, also
     * when the stale hint names a node that is used again by now. */
    MT_CHECK_ERR(mt_alloc_free(a, l.region, l.offset), m->no_map ? -ENOTSUP : -ENOENT);
    MT_CHECK_ERR(mt_alloc_free_block(a, &b), -ENOENT);
    m->n_free++;
}

/* A free at an arbitrary place: the model says what must happen. */
static void do_bad_free(model *m, mt_alloc *a)
{
    uint32_t rid = (uint32_t)rnd(m, MAX_REGIONS + 1);
    uint64_t off = rnd(m, 4) == 0 ? rnd(m, 1u << 20) : (rnd(m, 1u << 20) >> m->gshift) << m->gshift;
    int expect;
    uint32_t hit = 0;
    if (rid >= MAX_REGIONS || !m->reg[rid].live)
        expect = -ENOENT;
    else if (off >= m->reg[rid].size || off % (1ull << m->gshift))
        expect = -EINVAL;
    else {
        uint32_t o = m->reg[rid].owner[off >> m->gshift];
        hit = o && m->live[o - 1].offset == off ? o : 0;
        expect = hit ? 0 : -ENOENT;
    }
    m->n_bad++;
    /* Half of them as blocks with a made-up hint: with the map a hint never
     * changes the outcome, only the way there; without it, only a hint that
     * names the allocation frees it. */
    mt_alloc_block b = {.region = rid, .offset = off, .hint = (uint32_t)rnd(m, 1u << 12)};
    int by_block = m->no_map || rnd(m, 2) != 0;
    if (m->no_map && hit && m->live[hit - 1].hint != b.hint) {
        hit = 0;
        expect = -ENOENT;
    }
    if (expect != 0) {
        AU_CHECK_ERR_UNCHANGED(a, by_block ? mt_alloc_free_block(a, &b) : mt_alloc_free(a, rid, off),
                               expect);
        return;
    }
    model_free(m, hit - 1);
    MT_CHECK_OK(by_block ? mt_alloc_free_block(a, &b) : mt_alloc_free(a, rid, off));
}

static void compare(model *m, mt_alloc *a, int deep)
{
    mt_alloc_stats s;
    MT_CHECK_OK(mt_alloc_get_stats(a, &s));
    MT_CHECK_UINT_EQ(s.total_bytes, m->total);
    /* Pads kept in front of allocations are used but belong to none. */
    MT_CHECK_UINT_EQ(s.pad_bytes, m->pad);
    MT_CHECK_UINT_EQ(s.used_bytes, m->used + m->pad);
    MT_CHECK_UINT_EQ(s.allocations, m->nlive);
    MT_CHECK_UINT_EQ(s.regions, (uint64_t)m->nregions);
    if (!deep)
        return;
    AU_CHECK(a);
    uint64_t count, largest;
    free_runs(m, &count, &largest);
    MT_CHECK_UINT_EQ(s.free_blocks, count);
    MT_CHECK_UINT_EQ(s.largest_free, largest);
}

static void run(uint64_t seed, mt_alloc_strategy strat, uint64_t g, uint64_t page, int release,
                int no_map, int steps)
{
    model *m = calloc(1, sizeof *m);
    MT_CHECK(m != NULL);
    m->rng = seed;
    m->no_map = no_map;
    m->gshift = msb64(g);
    m->pshift = page > g ? msb64(page) : 0;
    mt_alloc_opts o = {.strategy = strat, .min_align = g, .granularity = page,
                       .flags = (release ? MT_ALLOC_RELEASE_EMPTY : 0) |
                                (no_map ? MT_ALLOC_NO_OFFSET_MAP : 0),
                       .grow = grow_cb, .release = release_cb, .user = m};
    mt_alloc *a;
    MT_CHECK_OK(mt_alloc_create(&o, &a));
    uint32_t id;
    uint64_t first = align_up(64 * 1024 + rnd(m, 192 * 1024), g);
    MT_CHECK_OK(mt_alloc_add_region(a, first, NULL, &id));
    region_added(m, id, first);
    for (int step = 0; step < steps; step++) {
        /* Phases: fill up (grow allowed), then churn near full (grow refused). */
        m->grow_fail = (step / 500) % 2;
        uint64_t op = rnd(m, 100);
        if (op < (m->grow_fail ? 45u : 60u))
            do_alloc(m, a);
        else if (op < 96)
            do_free(m, a);
        else if (op < 99)
            do_bad_free(m, a);
        else {
            int empty = 0;
            for (int r = 0; r < MAX_REGIONS; r++)
                if (m->reg[r].live) {
                    int used = 0;
                    for (uint64_t i = 0; i < m->reg[r].size >> m->gshift && !used; i++)
                        used = m->reg[r].owner[i] != 0;
                    empty += !used;
                }
            MT_CHECK_INT_EQ(mt_alloc_trim(a), empty);
        }
        compare(m, a, step % 8 == 0);
    }
    /* Free everything: every region must end as one free block. */
    while (m->nlive)
        do_free(m, a);
    compare(m, a, 1);
    mt_alloc_stats s;
    MT_CHECK_OK(mt_alloc_get_stats(a, &s));
    MT_CHECK_UINT_EQ(s.free_blocks, (uint64_t)m->nregions);
    if (release) /* all but one empty region released (trim may take that too) */
        MT_CHECK(m->nregions <= 1);
    mt_alloc_destroy(a); /* releases the rest through the model */
    MT_CHECK_INT_EQ(m->nregions, 0);
    printf("  %s g=%" PRIu64 " page=%" PRIu64 " release=%d map=%d: %u allocs, %u -ENOSPC, "
           "%u frees, %u arbitrary frees, %u grows, %u releases, %u pads kept\n",
           strat ? "first-fit" : "best-fit ", g, page, release, !no_map, m->n_alloc, m->n_nospc,
           m->n_free,
           m->n_bad, m->n_grow, m->n_release, m->n_pad);
    MT_CHECK(page > g || m->n_pad > 0); /* the pad rule ran */
    free(m);
}

int main(int argc, char **argv)
{
    uint64_t seed = mt_test_seed(argc, argv);
#ifdef MT_SANITIZER_BUILD
    int steps = 1000; /* the checker after every 8th step is slow under sanitizers */
#else
    int steps = 3000;
#endif
    int cfg = 0;
    for (int strat = 0; strat < 2; strat++)
        for (int gi = 0; gi < 2; gi++)
            for (int gran = 0; gran < 2; gran++)
                for (int rel = 0; rel < 2; rel++, cfg++) {
                    uint64_t g = gi ? 256 : 16;
                    /* With and without the offset map: each strategy and
                     * granularity runs both, with different granules. */
                    run(seed ^ (0x9e3779b97f4a7c15ull * (uint64_t)(cfg + 1)),
                        (mt_alloc_strategy)strat, g, gran ? 4096 : 0, rel, gi ^ rel, steps);
                }
    printf("alloc random: ok (%d configurations x %d steps)\n", cfg, steps);
    return 0;
}
