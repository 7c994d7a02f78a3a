/* track: the signal backend at vm.max_map_count.
 *
 * Each page made writable inside a read-only range splits a VMA; a process
 * near the limit gets ENOMEM from mprotect. Here the process really is at
 * the limit: a filler mapping is split page by page until mprotect refuses,
 * then a few splits are released. Writing every other page of a tracked
 * range must then degrade (whole range writable, all of it reported dirty)
 * instead of crashing or losing a write, and tracking must become precise
 * again once the filler is gone. Nothing here allocates while at the limit.
 * Needs no privileges; skipped when the limit is too large to reach quickly. */
#include "track_util.h"

#define NP (2 * 4096 + 8) /* more than two collect windows */

static long read_long(const char *path)
{
    FILE *f = fopen(path, "r");
    long v = -1;
    if (f) {
        if (fscanf(f, "%ld", &v) != 1)
            v = -1;
        fclose(f);
    }
    return v;
}

static unsigned char g_seen[NP];

static size_t collect_pages(mt_tracker *t, mt_range_id id)
{
    static mt_dirty_run runs[64];
    size_t ps = tu_page(), pages = 0;
    memset(g_seen, 0, sizeof g_seen);
    long n;
    do {
        n = mt_tracker_collect(t, id, runs, 64);
        MT_CHECK_OK(n);
        for (long i = 0; i < n; i++)
            for (size_t o = runs[i].offset; o < runs[i].offset + runs[i].length; o += ps) {
                g_seen[o / ps] = 1;
                pages++;
            }
    } while (n == 64);
    return pages;
}

int main(void)
{
    long max = read_long("/proc/sys/vm/max_map_count");
    if (max <= 0 || max > 300000) {
        printf("note: vm.max_map_count=%ld: too large to exhaust in a test; skipped\n", max);
        return 0;
    }
    size_t ps = tu_page();
    unsigned char *m = tu_map(NP * ps);
    mt_tracker_opts o = {.backend = MT_TRACK_SIGNAL};
    mt_tracker *t;
    MT_CHECK_OK(mt_tracker_create(&o, &t));
    mt_range_id id;
    MT_CHECK_OK(mt_tracker_add(t, m, NP * ps, NULL, &id));
    mt_range_stats st;

    /* Fill the map count: PROT_NONE reservation, every other page made
     * readable (each split adds two VMAs), until the kernel says ENOMEM. */
    size_t filler_pages = (size_t)max * 2 + 16;
    unsigned char *filler = mmap(NULL, filler_pages * ps, PROT_NONE,
                                 MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    MT_CHECK(filler != MAP_FAILED);
    size_t i, last_ok = 0;
    for (i = 1; i < filler_pages; i += 2) {
        if (mprotect(filler + i * ps, ps, PROT_READ) != 0) {
            MT_CHECK_INT_EQ(errno, ENOMEM);
            break;
        }
        last_ok = i;
    }
    MT_CHECK(i < filler_pages);
    /* Release three splits: room for a few single-page unprotects only. */
    for (int k = 0; k < 3; k++, last_ok -= 2)
        MT_CHECK(mprotect(filler + last_ok * ps, ps, PROT_NONE) == 0);

    /* Round 1 and 2: every other page, at the limit. */
    for (int round = 0; round < 2; round++) {
        for (size_t p = (size_t)round; p < NP; p += 2)
            m[p * ps + 1] = (unsigned char)(round + 1);
        size_t pages = collect_pages(t, id);
        for (size_t p = (size_t)round; p < NP; p += 2)
            MT_CHECK(g_seen[p]); /* every written page reported */
        MT_CHECK(pages >= NP / 2);
        MT_CHECK_OK(mt_tracker_stats(t, id, &st));
        MT_CHECK(st.degradations >= (uint64_t)round + 1);
        for (size_t p = (size_t)round; p < NP; p += 2)
            MT_CHECK_INT_EQ(m[p * ps + 1], round + 1);
    }
    /* The collect re-armed the whole span in one call (merging VMAs): the
     * range is not degraded any more even though the process is still at
     * the limit. */
    MT_CHECK_OK(mt_tracker_stats(t, id, &st));
    MT_CHECK_INT_EQ(st.degraded, 0);

    /* Limit pressure gone: precise again. */
    munmap(filler, filler_pages * ps);
    m[3 * ps] = 9;
    m[4000 * ps] = 9;
    MT_CHECK_UINT_EQ(collect_pages(t, id), 2);
    MT_CHECK(g_seen[3] && g_seen[4000]);
    MT_CHECK_OK(mt_tracker_stats(t, id, &st));
    printf("max_map_count=%ld: %zu filler splits; degradations=%llu, faults=%llu; precise "
           "again after release\n",
           max, i / 2, (unsigned long long)st.degradations, (unsigned long long)st.faults);
    mt_tracker_destroy(t);
    munmap(m, NP * ps);
    puts("track mapcount: ok");
    return 0;
}
