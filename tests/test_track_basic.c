/* track: single-threaded behaviour of both backends, exact results.
 * Aligned and unaligned ranges, pages shared between ranges and with
 * untracked memory, collect with a small output array, INITIALLY_DIRTY,
 * prepare_write, stats, and every bad-input case. */
#include "track_util.h"

static mt_tracker *new_tracker(mt_track_backend b)
{
    mt_tracker_opts o = {.backend = b};
    mt_tracker *t = NULL;
    MT_CHECK_OK(mt_tracker_create(&o, &t));
    return t;
}

static void test_exact_pages(mt_track_backend b)
{
    size_t ps = tu_page(), np = 64;
    unsigned char *m = tu_map(np * ps);
    mt_tracker *t = new_tracker(b);
    mt_range_id id;
    MT_CHECK_OK(mt_tracker_add(t, m, np * ps, NULL, &id));
    MT_CHECK_INT_EQ(mt_tracker_backend(t, id), b);

    mt_dirty_run runs[16];
    MT_CHECK_INT_EQ(mt_tracker_collect(t, id, runs, 16), 0); /* clean */

    m[3 * ps] = 1;          /* page 3 */
    m[4 * ps + 100] = 2;    /* page 4: merges with 3 */
    m[10 * ps + ps - 1] = 3; /* page 10, last byte */
    m[63 * ps] = 4;         /* last page */
    long n = mt_tracker_collect(t, id, runs, 16);
    MT_CHECK_INT_EQ(n, 3);
    MT_CHECK_UINT_EQ(runs[0].offset, 3 * ps);
    MT_CHECK_UINT_EQ(runs[0].length, 2 * ps);
    MT_CHECK_UINT_EQ(runs[1].offset, 10 * ps);
    MT_CHECK_UINT_EQ(runs[1].length, ps);
    MT_CHECK_UINT_EQ(runs[2].offset, 63 * ps);
    MT_CHECK_UINT_EQ(runs[2].length, ps);
    MT_CHECK_INT_EQ(mt_tracker_collect(t, id, runs, 16), 0); /* re-armed */

    /* The same pages again: tracking was re-armed, writes are seen again. */
    m[3 * ps + 5] = 5;
    MT_CHECK_INT_EQ(mt_tracker_collect(t, id, runs, 16), 1);
    MT_CHECK_UINT_EQ(runs[0].offset, 3 * ps);

    /* Reads never count. */
    volatile unsigned char sink = m[20 * ps];
    (void)sink;
    MT_CHECK_INT_EQ(mt_tracker_collect(t, id, runs, 16), 0);

    mt_range_stats st;
    MT_CHECK_OK(mt_tracker_stats(t, id, &st));
    MT_CHECK_INT_EQ(st.backend, b);
    MT_CHECK_UINT_EQ(st.pages, np);
    MT_CHECK_UINT_EQ(st.pages_collected, 5);
    MT_CHECK_UINT_EQ(st.collects, 5);
    if (b == MT_TRACK_SIGNAL)
        MT_CHECK_UINT_EQ(st.faults, 5);
    MT_CHECK_INT_EQ(st.degraded, 0);

    MT_CHECK_OK(mt_tracker_remove(t, id));
    m[5 * ps] = 9; /* writable again after remove */
    MT_CHECK_ERR(mt_tracker_remove(t, id), -ENOENT);
    MT_CHECK_ERR(mt_tracker_collect(t, id, runs, 16), -ENOENT);
    mt_tracker_destroy(t);
    munmap(m, np * ps);
}

/* Unaligned ranges: runs are clipped to the range's bytes; a page shared by
 * two ranges is dirty for both whichever range's bytes were written; a page
 * shared with untracked memory is reported when the untracked part is
 * written (page granularity). */
static void test_unaligned_shared(mt_track_backend b)
{
    size_t ps = tu_page();
    unsigned char *m = tu_map(8 * ps);
    mt_tracker *t = new_tracker(b);
    mt_range_id a, c;
    /* a = [100, 2ps+50), c = [2ps+50, 5ps+7): page 2 is shared by a and c;
     * page 0 is shared by a and untracked bytes [0,100); page 5 by c and
     * untracked bytes after 5ps+7. */
    MT_CHECK_OK(mt_tracker_add(t, m + 100, 2 * ps - 50, NULL, &a));
    MT_CHECK_OK(mt_tracker_add(t, m + 2 * ps + 50, 3 * ps - 43, NULL, &c));
    mt_dirty_run runs[8];

    m[2 * ps + 10] = 1; /* a's bytes in the shared page */
    long n = mt_tracker_collect(t, a, runs, 8);
    MT_CHECK_INT_EQ(n, 1);
    MT_CHECK_UINT_EQ(runs[0].offset, 2 * ps - 100);
    MT_CHECK_UINT_EQ(runs[0].length, 50); /* clipped to a's end */
    /* c still sees the shared page dirty although a collected it. */
    n = mt_tracker_collect(t, c, runs, 8);
    MT_CHECK_INT_EQ(n, 1);
    MT_CHECK_UINT_EQ(runs[0].offset, 0);
    MT_CHECK_UINT_EQ(runs[0].length, ps - 50);

    m[2 * ps + 60] = 2; /* c's bytes in the shared page: dirty for both */
    MT_CHECK_INT_EQ(mt_tracker_collect(t, c, runs, 8), 1);
    MT_CHECK_INT_EQ(mt_tracker_collect(t, a, runs, 8), 1);
    MT_CHECK_INT_EQ(mt_tracker_collect(t, a, runs, 8), 0);
    MT_CHECK_INT_EQ(mt_tracker_collect(t, c, runs, 8), 0);

    m[10] = 3; /* untracked bytes of page 0 */
    n = mt_tracker_collect(t, a, runs, 8);
    MT_CHECK_INT_EQ(n, 1);
    MT_CHECK_UINT_EQ(runs[0].offset, 0);
    MT_CHECK_UINT_EQ(runs[0].length, ps - 100);
    m[5 * ps + 7] = 4; /* first untracked byte after c, page 5 */
    n = mt_tracker_collect(t, c, runs, 8);
    MT_CHECK_INT_EQ(n, 1);
    MT_CHECK_UINT_EQ(runs[0].offset, 3 * ps - 50);
    MT_CHECK_UINT_EQ(runs[0].length, 7);

    /* Removing a keeps the shared page armed for c. */
    MT_CHECK_OK(mt_tracker_remove(t, a));
    m[2 * ps + 20] = 5; /* a's old bytes in the shared page */
    MT_CHECK_INT_EQ(mt_tracker_collect(t, c, runs, 8), 1);
    m[ps] = 6; /* a's old private page: plain memory now */
    MT_CHECK_INT_EQ(mt_tracker_collect(t, c, runs, 8), 0);
    mt_tracker_destroy(t);
    munmap(m, 8 * ps);
}

/* Several tiny ranges inside one page. */
static void test_tiny_ranges(mt_track_backend b)
{
    size_t ps = tu_page();
    unsigned char *m = tu_map(ps);
    mt_tracker *t = new_tracker(b);
    mt_range_id id[4];
    for (int i = 0; i < 4; i++)
        MT_CHECK_OK(mt_tracker_add(t, m + i * 64 + 1, 60, NULL, &id[i]));
    mt_dirty_run runs[4];
    m[2 * 64 + 5] = 1;
    for (int i = 0; i < 4; i++) {
        MT_CHECK_INT_EQ(mt_tracker_collect(t, id[i], runs, 4), 1);
        MT_CHECK_UINT_EQ(runs[0].offset, 0);
        MT_CHECK_UINT_EQ(runs[0].length, 60);
    }
    for (int i = 0; i < 4; i++)
        MT_CHECK_INT_EQ(mt_tracker_collect(t, id[i], runs, 4), 0);
    mt_tracker_destroy(t);
    munmap(m, ps);
}

/* A small output array: collect reports what fits, the rest stays dirty. */
static void test_small_array(mt_track_backend b)
{
    size_t ps = tu_page(), np = 9000; /* > one 4096-page window */
    unsigned char *m = tu_map(np * ps);
    mt_tracker *t = new_tracker(b);
    mt_range_id id;
    MT_CHECK_OK(mt_tracker_add(t, m, np * ps, NULL, &id));
    for (size_t p = 0; p < np; p += 3)
        m[p * ps] = 1;
    mt_dirty_run runs[7];
    size_t got = 0, calls = 0;
    size_t expect_next = 0;
    for (;;) {
        long n = mt_tracker_collect(t, id, runs, 7);
        MT_CHECK_OK(n);
        calls++;
        for (long i = 0; i < n; i++) {
            MT_CHECK_UINT_EQ(runs[i].offset, expect_next * ps);
            MT_CHECK_UINT_EQ(runs[i].length, ps);
            expect_next += 3;
            got++;
        }
        if (n < 7)
            break;
    }
    MT_CHECK_UINT_EQ(got, (np + 2) / 3);
    MT_CHECK_UINT_EQ(calls, (got + 6) / 7 + (got % 7 == 0));
    /* collect_all behaves the same over several ranges. */
    for (size_t p = 1; p < np; p += 1000)
        m[p * ps] = 2;
    mt_dirty_run all[3];
    MT_CHECK_INT_EQ(mt_tracker_collect_all(t, all, 3), 3);
    MT_CHECK_UINT_EQ(all[0].offset, 1 * ps);
    MT_CHECK_UINT_EQ(all[2].offset, 2001 * ps);
    MT_CHECK_INT_EQ(mt_tracker_collect_all(t, all, 3), 3);
    MT_CHECK_INT_EQ(mt_tracker_collect_all(t, all, 3), 3);
    MT_CHECK_UINT_EQ(all[2].offset, 8001 * ps);
    MT_CHECK_INT_EQ(mt_tracker_collect_all(t, all, 3), 0);
    mt_tracker_destroy(t);
    munmap(m, np * ps);
}

static void test_flags_and_prepare(mt_track_backend b)
{
    size_t ps = tu_page();
    unsigned char *m = tu_map(4 * ps);
    mt_tracker *t = new_tracker(b);
    mt_range_id id;
    mt_range_opts ro = {.flags = MT_RANGE_INITIALLY_DIRTY};
    MT_CHECK_OK(mt_tracker_add(t, m + 1, 4 * ps - 2, &ro, &id));
    mt_dirty_run runs[4];
    MT_CHECK_INT_EQ(mt_tracker_collect(t, id, runs, 4), 1);
    MT_CHECK_UINT_EQ(runs[0].offset, 0);
    MT_CHECK_UINT_EQ(runs[0].length, 4 * ps - 2);
    MT_CHECK_INT_EQ(mt_tracker_collect(t, id, runs, 4), 0);

    MT_CHECK_OK(mt_tracker_prepare_write(t, id, m + ps + 3, ps));
    MT_CHECK_INT_EQ(mt_tracker_collect(t, id, runs, 4), 1);
    MT_CHECK_UINT_EQ(runs[0].offset, ps - 1);
    MT_CHECK_UINT_EQ(runs[0].length, 2 * ps);
    MT_CHECK_ERR(mt_tracker_prepare_write(t, id, m, 10), -EINVAL);          /* before range */
    MT_CHECK_ERR(mt_tracker_prepare_write(t, id, m + 2, 4 * ps), -EINVAL);  /* past end */
    MT_CHECK_ERR(mt_tracker_prepare_write(t, id + 1, m + 2, 4), -ENOENT);
    mt_tracker_destroy(t);
    munmap(m, 4 * ps);
}

static void test_bad_input(void)
{
    size_t ps = tu_page();
    unsigned char *m = tu_map(4 * ps);
    mt_tracker *t = NULL;
    mt_tracker_opts bad = {.backend = (mt_track_backend)7};
    MT_CHECK_ERR(mt_tracker_create(&bad, &t), -EINVAL);
    MT_CHECK_ERR(mt_tracker_create(NULL, NULL), -EINVAL);
    mt_tracker_opts small = {.max_ranges = 2};
    MT_CHECK_OK(mt_tracker_create(&small, &t));
    mt_range_id id, id2, id3;
    MT_CHECK_ERR(mt_tracker_add(t, NULL, 10, NULL, &id), -EINVAL);
    MT_CHECK_ERR(mt_tracker_add(t, m, 0, NULL, &id), -EINVAL);
    MT_CHECK_ERR(mt_tracker_add(t, m, 10, NULL, NULL), -EINVAL);
    MT_CHECK_ERR(mt_tracker_add(t, (void *)(UINTPTR_MAX - 10), 100, NULL, &id), -EINVAL);
    mt_range_opts badflags = {.flags = 0x80};
    MT_CHECK_ERR(mt_tracker_add(t, m, 10, &badflags, &id), -EINVAL);
    MT_CHECK_OK(mt_tracker_add(t, m, 100, NULL, &id));
    MT_CHECK_ERR(mt_tracker_add(t, m + 50, 100, NULL, &id2), -EEXIST); /* overlapping bytes */
    MT_CHECK_ERR(mt_tracker_add(t, m + 99, 1, NULL, &id2), -EEXIST);
    MT_CHECK_OK(mt_tracker_add(t, m + 100, 100, NULL, &id2)); /* touching is fine */
    MT_CHECK_ERR(mt_tracker_add(t, m + 2 * ps, 100, NULL, &id3), -ENOSPC);
    mt_dirty_run runs[2];
    MT_CHECK_ERR(mt_tracker_collect(t, id, NULL, 2), -EINVAL);
    MT_CHECK_ERR(mt_tracker_collect(t, id, runs, 0), -EINVAL);
    MT_CHECK_ERR(mt_tracker_collect(t, 0, runs, 2), -ENOENT);
    MT_CHECK_ERR(mt_tracker_collect(t, 12345, runs, 2), -ENOENT);
    MT_CHECK_OK(mt_tracker_remove(t, id));
    /* The freed slot is reused with a new generation: the old id stays dead. */
    MT_CHECK_OK(mt_tracker_add(t, m + 2 * ps, 100, NULL, &id3));
    MT_CHECK(id3 != id);
    MT_CHECK_ERR(mt_tracker_collect(t, id, runs, 2), -ENOENT);
    MT_CHECK_ERR(mt_tracker_stats(t, id, &(mt_range_stats){0}), -ENOENT);
    mt_tracker_destroy(t);
    mt_tracker_destroy(NULL);

    MT_CHECK_INT_EQ(mt_track_backend_parse("uffd"), MT_TRACK_UFFD);
    MT_CHECK_INT_EQ(mt_track_backend_parse("signal"), MT_TRACK_SIGNAL);
    MT_CHECK_INT_EQ(mt_track_backend_parse("auto"), MT_TRACK_AUTO);
    MT_CHECK_ERR(mt_track_backend_parse("mprotect"), -EINVAL);
    munmap(m, 4 * ps);
}

/* Two trackers may not claim the same bytes with the signal backend. */
static void test_two_trackers(void)
{
    size_t ps = tu_page();
    unsigned char *m = tu_map(2 * ps);
    mt_tracker *t1 = new_tracker(MT_TRACK_SIGNAL), *t2 = new_tracker(MT_TRACK_SIGNAL);
    mt_range_id a, b;
    MT_CHECK_OK(mt_tracker_add(t1, m, 100, NULL, &a));
    MT_CHECK_ERR(mt_tracker_add(t2, m + 10, 10, NULL, &b), -EEXIST);
    MT_CHECK_OK(mt_tracker_add(t2, m + 100, 100, NULL, &b)); /* shares the page */
    m[150] = 1;
    mt_dirty_run runs[2];
    MT_CHECK_INT_EQ(mt_tracker_collect(t1, a, runs, 2), 1);
    MT_CHECK_INT_EQ(mt_tracker_collect(t2, b, runs, 2), 1);
    mt_tracker_destroy(t1);
    m[150] = 2; /* the page stays armed for t2 */
    MT_CHECK_INT_EQ(mt_tracker_collect(t2, b, runs, 2), 1);
    mt_tracker_destroy(t2);
    m[150] = 3;
    munmap(m, 2 * ps);
}

int main(void)
{
    mt_track_backend be[2];
    int nb = tu_backends(be);
    for (int i = 0; i < nb; i++) {
        printf("backend %s\n", mt_track_backend_name(be[i]));
        test_exact_pages(be[i]);
        test_unaligned_shared(be[i]);
        test_tiny_ranges(be[i]);
        test_small_array(be[i]);
        test_flags_and_prepare(be[i]);
    }
    test_bad_input();
    test_two_trackers();
    puts("track basic: ok");
    return 0;
}
