/* track: hot pages (MT_RANGE_HOT_PAGES), both backends, exact results.
 * A page written in 3 consecutive passes stays writable (no more faults),
 * is reported by every pass whether written or not, cools down after its
 * probe pass when not written, and is never hot when shared with memory
 * outside the range; a small output array never makes a pass endless;
 * peek says "written" for a hot page. */
#include "track_util.h"

#define NP 256

/* One pass (calls until one returns fewer than `max` runs): the pages of
 * the mapping it reported (`off0`: the range's offset in the mapping). */
static long collect_pass_at(mt_tracker *t, mt_range_id id, unsigned char *seen, size_t ps, size_t max,
                            size_t off0)
{
    mt_dirty_run runs[64];
    long total = 0, n;
    memset(seen, 0, NP);
    do {
        n = mt_tracker_collect(t, id, runs, max);
        MT_CHECK_OK(n);
        for (long i = 0; i < n; i++)
            for (size_t p = (off0 + runs[i].offset) / ps; p <= (off0 + runs[i].offset + runs[i].length - 1) / ps; p++) {
                MT_CHECK(!seen[p]); /* once per pass */
                seen[p] = 1;
                total++;
            }
    } while (n == (long)max);
    return total;
}

static long collect_pass(mt_tracker *t, mt_range_id id, unsigned char *seen, size_t ps, size_t max)
{
    return collect_pass_at(t, id, seen, ps, max, 0);
}

static size_t hot_pages(mt_tracker *t, mt_range_id id)
{
    mt_range_stats st;
    MT_CHECK_OK(mt_tracker_stats(t, id, &st));
    return st.hot_pages;
}

/* A tracker on backend b with one hot-pages range [addr, addr+len). */
static mt_tracker *hot_tracker(mt_track_backend b, void *addr, size_t len, mt_range_id *id)
{
    mt_tracker_opts to = {.backend = b};
    mt_tracker *t;
    MT_CHECK_OK(mt_tracker_create(&to, &t));
    mt_range_opts ro = {.flags = MT_RANGE_HOT_PAGES};
    MT_CHECK_OK(mt_tracker_add(t, addr, len, &ro, id));
    return t;
}

static void test_heat_and_cooling(mt_track_backend b)
{
    size_t ps = tu_page();
    unsigned char *m = tu_map(NP * ps), seen[NP];
    mt_range_id id;
    mt_tracker *t = hot_tracker(b, m, NP * ps, &id);

    /* Pages 0-99 written every pass, page 200 every other pass. */
    int pass = 0;
    for (; pass < 3; pass++) {
        for (size_t p = 0; p < 100; p++)
            m[p * ps] = (unsigned char)pass;
        if (pass % 2 == 0)
            m[200 * ps] = 1;
        MT_CHECK_INT_EQ(collect_pass(t, id, seen, ps, 64), 100 + (pass % 2 == 0));
    }
    MT_CHECK_UINT_EQ(hot_pages(t, id), 100);
    mt_range_stats st;
    MT_CHECK_OK(mt_tracker_stats(t, id, &st));
    uint64_t faults = st.faults;
    MT_CHECK_INT_EQ(mt_tracker_peek(t, id, 5 * ps, 1), 1);   /* hot: maybe written */
    MT_CHECK_INT_EQ(mt_tracker_peek(t, id, 150 * ps, 1), 0); /* cold, clean */

    /* Hot pages: written without a fault, reported by every pass, written
     * or not, and every write is seen. */
    for (size_t p = 0; p < 100; p++)
        m[p * ps + 7] = 0x5a;
    MT_CHECK_OK(mt_tracker_stats(t, id, &st));
    if (b == MT_TRACK_SIGNAL)
        MT_CHECK_UINT_EQ(st.faults, faults);
    MT_CHECK_INT_EQ(collect_pass(t, id, seen, ps, 64), 100);
    pass++;
    for (size_t p = 0; p < 100; p++)
        MT_CHECK(seen[p]);

    /* Nothing written any more: each group of 64 pages is re-armed at its
     * probe pass and then drops out; within 16 + 1 passes all are cold. */
    int passes = 0;
    long n;
    while ((n = collect_pass(t, id, seen, ps, 64)) > 0) {
        MT_CHECK(n <= 100);
        MT_CHECK(++passes <= 17);
    }
    MT_CHECK_UINT_EQ(hot_pages(t, id), 0);
    /* Cold again: a write faults and is reported once. */
    m[10 * ps] = 1;
    MT_CHECK_INT_EQ(collect_pass(t, id, seen, ps, 64), 1);
    MT_CHECK_INT_EQ(collect_pass(t, id, seen, ps, 64), 0);

    /* A page that stays written through its probe pass stays hot (one
     * fault per probe, signal backend). */
    for (int k = 0; k < 40; k++) {
        m[20 * ps] = (unsigned char)k;
        MT_CHECK_INT_EQ(collect_pass(t, id, seen, ps, 64), 1);
        if (k >= 3)
            MT_CHECK(hot_pages(t, id) <= 1);
    }
    MT_CHECK_OK(mt_tracker_stats(t, id, &st));
    printf("  %s: %zu hot after 40 written passes, %" PRIu64 " faults in total\n",
           mt_track_backend_name(b), st.hot_pages, st.faults);
    MT_CHECK_OK(mt_tracker_remove(t, id));
    mt_tracker_destroy(t);
    munmap(m, NP * ps);
}

/* Many isolated hot pages against a tiny output array: every pass ends and
 * reports each page exactly once. */
static void test_small_array(mt_track_backend b)
{
    size_t ps = tu_page();
    unsigned char *m = tu_map(NP * ps), seen[NP];
    mt_range_id id;
    mt_tracker *t = hot_tracker(b, m, NP * ps, &id);
    for (int pass = 0; pass < 8; pass++) {
        for (size_t p = 0; p < NP; p += 2)
            m[p * ps] = (unsigned char)pass;
        /* 128 runs through 7 at a time; also 8 at a time: 128 = 16 x 8, a
         * pass that ends exactly on a full array. */
        MT_CHECK_INT_EQ(collect_pass(t, id, seen, ps, pass % 2 ? 8 : 7), NP / 2);
    }
    MT_CHECK(hot_pages(t, id) > 0);
    /* collect_all with a small array ends too. */
    mt_dirty_run runs[8];
    long n, total = 0;
    int calls = 0;
    do {
        n = mt_tracker_collect_all(t, runs, 8);
        MT_CHECK_OK(n);
        total += n;
        MT_CHECK(++calls <= NP);
    } while (n == 8);
    MT_CHECK(total <= NP / 2);
    mt_tracker_destroy(t);
    munmap(m, NP * ps);
}

/* collect_all sweeps: every sweep is a new pass for every range, also for a
 * range the sweep first reaches in a later call (the ranges before it
 * filled the array): a hot page written since the last sweep is reported by
 * the next one. */
static void test_sweeps(mt_track_backend b)
{
    size_t ps = tu_page();
    unsigned char *m = tu_map(2 * NP * ps);
    mt_tracker_opts to = {.backend = b};
    mt_tracker *t;
    MT_CHECK_OK(mt_tracker_create(&to, &t));
    mt_range_opts ro = {.flags = MT_RANGE_HOT_PAGES};
    mt_range_id a, h;
    MT_CHECK_OK(mt_tracker_add(t, m, NP * ps, NULL, &a));             /* cold pages, first */
    MT_CHECK_OK(mt_tracker_add(t, m + NP * ps, NP * ps, &ro, &h));  /* hot pages, second */
    unsigned char *hp = m + NP * ps;
    mt_dirty_run runs[8];
    size_t max_hot = 0;
    for (int sweep = 0; sweep < 24; sweep++) {
        /* From sweep 4 on (the page is hot by then), 8 separate dirty runs
         * in the first range fill each sweep's first call. */
        if (sweep == 4)
            MT_CHECK_UINT_EQ(hot_pages(t, h), 1);
        for (size_t p = 0; sweep >= 4 && p < 16; p += 2)
            m[p * ps] = (unsigned char)sweep;
        hp[5 * ps] = (unsigned char)(sweep + 1);
        int seen = 0, calls = 0;
        long n;
        do {
            n = mt_tracker_collect_all(t, runs, 8);
            MT_CHECK_OK(n);
            for (long i = 0; i < n; i++)
                seen += runs[i].range == h && runs[i].offset <= 5 * ps && 5 * ps < runs[i].offset + runs[i].length;
            MT_CHECK(++calls < 100);
        } while (n == 8);
        MT_CHECK_INT_EQ(seen, 1); /* written since the last sweep: reported once */
        if (hot_pages(t, h) > max_hot)
            max_hot = hot_pages(t, h);
    }
    MT_CHECK_UINT_EQ(max_hot, 1);
    mt_tracker_destroy(t);
    munmap(m, 2 * NP * ps);
}

/* A range that starts and ends mid-page: its end pages are shared with
 * untracked bytes and never become hot. */
static void test_partial_ends(mt_track_backend b)
{
    size_t ps = tu_page();
    unsigned char *m = tu_map(8 * ps), seen[NP];
    mt_range_id id;
    mt_tracker *t = hot_tracker(b, m + 100, 4 * ps, &id); /* pages 0-4, partial 0 and 4 */
    for (int pass = 0; pass < 6; pass++) {
        for (size_t p = 0; p < 5; p++)
            m[100 + p * ps - (p == 4)] = (unsigned char)pass; /* page 4: the range's last byte */
        MT_CHECK_INT_EQ(collect_pass_at(t, id, seen, ps, 64, 100), 5);
    }
    MT_CHECK_UINT_EQ(hot_pages(t, id), 3);
    mt_tracker_destroy(t);
    munmap(m, 8 * ps);
}

int main(void)
{
    mt_track_backend be[2];
    int nb = tu_backends(be);
    for (int i = 0; i < nb; i++) {
        test_heat_and_cooling(be[i]);
        test_small_array(be[i]);
        test_partial_ends(be[i]);
        test_sweeps(be[i]);
    }
    puts("track hot: ok");
    return 0;
}
