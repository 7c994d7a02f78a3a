/* track: fault budgets (mt_range_opts.fault_budget), exact results.
 * Signal backend: the pass that takes `budget` faults opens the range
 * whole (no fault after that), the next collect reports every page and
 * re-arms them all, and the next pass is exact again; with hot pages, an
 * opened range's pages turn hot and stop faulting; 0 means no budget. The
 * uffd backend ignores it. */
#include "track_util.h"

#define NP 512

static long collect_all_pages(mt_tracker *t, mt_range_id id, unsigned char *seen, size_t ps)
{
    mt_dirty_run runs[16];
    long total = 0, n;
    memset(seen, 0, NP);
    do {
        n = mt_tracker_collect(t, id, runs, 16);
        MT_CHECK_OK(n);
        for (long i = 0; i < n; i++)
            for (size_t p = runs[i].offset / ps; p <= (runs[i].offset + runs[i].length - 1) / ps; p++) {
                MT_CHECK(!seen[p]);
                seen[p] = 1;
                total++;
            }
    } while (n == 16);
    return total;
}

static mt_range_stats stats(mt_tracker *t, mt_range_id id)
{
    mt_range_stats st;
    MT_CHECK_OK(mt_tracker_stats(t, id, &st));
    return st;
}

static mt_tracker *budget_tracker(mt_track_backend b, void *addr, size_t len, uint32_t flags, uint32_t budget,
                                  mt_range_id *id)
{
    mt_tracker_opts to = {.backend = b};
    mt_tracker *t;
    MT_CHECK_OK(mt_tracker_create(&to, &t));
    mt_range_opts ro = {.flags = flags, .fault_budget = budget};
    MT_CHECK_OK(mt_tracker_add(t, addr, len, &ro, id));
    return t;
}

static void test_signal_budget(void)
{
    size_t ps = tu_page();
    unsigned char *m = tu_map(NP * ps), seen[NP];
    mt_range_id id;
    mt_tracker *t = budget_tracker(MT_TRACK_SIGNAL, m, NP * ps, 0, 32, &id);

    /* Every page written: 32 faults, then none. All reported. */
    for (size_t p = 0; p < NP; p++)
        m[p * ps] = 1;
    MT_CHECK_UINT_EQ(stats(t, id).faults, 32);
    MT_CHECK_UINT_EQ(stats(t, id).budget_opens, 1);
    MT_CHECK_INT_EQ(collect_all_pages(t, id, seen, ps), NP);

    /* Re-armed whole: a pass under budget is exact. */
    for (size_t p = 100; p < 110; p++)
        m[p * ps] = 2;
    MT_CHECK_UINT_EQ(stats(t, id).faults, 42);
    MT_CHECK_INT_EQ(collect_all_pages(t, id, seen, ps), 10);
    for (size_t p = 100; p < 110; p++)
        MT_CHECK(seen[p]);
    MT_CHECK_UINT_EQ(stats(t, id).budget_opens, 1);

    /* The budget is per pass: 31 faults in each of two passes open nothing. */
    for (int pass = 0; pass < 2; pass++) {
        for (size_t p = 0; p < 31; p++)
            m[(p * 7 + (size_t)pass) * ps] = 3;
        MT_CHECK_INT_EQ(collect_all_pages(t, id, seen, ps), 31);
    }
    MT_CHECK_UINT_EQ(stats(t, id).budget_opens, 1);
    MT_CHECK_INT_EQ(stats(t, id).degraded, 0);
    MT_CHECK_UINT_EQ(stats(t, id).degradations, 0);
    mt_tracker_destroy(t);
    munmap(m, NP * ps);
}

/* With hot pages, an opened range's pages are reported by consecutive
 * passes, turn hot and stop faulting; writes are never lost. */
static void test_budget_with_hot_pages(void)
{
    size_t ps = tu_page();
    unsigned char *m = tu_map(NP * ps), seen[NP];
    mt_range_id id;
    mt_tracker *t = budget_tracker(MT_TRACK_SIGNAL, m, NP * ps, MT_RANGE_HOT_PAGES, 16, &id);
    for (int pass = 0; pass < 6; pass++) {
        for (size_t p = 0; p < NP; p++)
            m[p * ps] = (unsigned char)pass;
        MT_CHECK_INT_EQ(collect_all_pages(t, id, seen, ps), NP);
    }
    uint64_t faults = stats(t, id).faults;
    MT_CHECK(faults <= 3 * 16 + 8); /* at most the budget per pass until hot */
    MT_CHECK_UINT_EQ(stats(t, id).hot_pages, NP); /* every page is whole */
    mt_tracker_destroy(t);
    munmap(m, NP * ps);
}

static void test_no_budget_and_uffd(void)
{
    size_t ps = tu_page();
    unsigned char *m = tu_map(NP * ps), seen[NP];
    mt_range_id id;
    mt_tracker *t = budget_tracker(MT_TRACK_SIGNAL, m, NP * ps, 0, 0, &id);
    for (size_t p = 0; p < NP; p++)
        m[p * ps] = 1;
    MT_CHECK_UINT_EQ(stats(t, id).faults, NP);
    MT_CHECK_UINT_EQ(stats(t, id).budget_opens, 0);
    MT_CHECK_INT_EQ(collect_all_pages(t, id, seen, ps), NP);
    mt_tracker_destroy(t);

    mt_track_backend be[2];
    if (tu_backends(be) == 2) { /* uffd here: the budget is ignored, reports stay exact */
        t = budget_tracker(MT_TRACK_UFFD, m, NP * ps, 0, 4, &id);
        for (size_t p = 0; p < 40; p++)
            m[p * 3 * ps] = 2;
        MT_CHECK_INT_EQ(collect_all_pages(t, id, seen, ps), 40);
        MT_CHECK_UINT_EQ(stats(t, id).budget_opens, 0);
        mt_tracker_destroy(t);
    }
    munmap(m, NP * ps);
}

int main(void)
{
    test_signal_budget();
    test_budget_with_hot_pages();
    test_no_budget_and_uffd();
    puts("track budget: ok");
    return 0;
}
