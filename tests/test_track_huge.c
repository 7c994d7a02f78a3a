/* track on transparent huge pages: a range over memory the kernel backs with
 * 2 MiB pages (MADV_HUGEPAGE, populated before tracking). Protecting part
 * of a huge page (the signal backend's mprotect, uffd's write-protect, a
 * PAGEMAP_SCAN that clears some pages' written bits) splits it; none of
 * that may lose a write. Random pages are written in rounds, both backends,
 * with hot pages on and off: every written page is reported by the next
 * collect (extra pages would be allowed, none are expected), and the
 * memory holds what was written. Skips (77) where transparent huge pages
 * are off.
 *
 * And hugetlb memory (MAP_HUGETLB, where the system has huge pages
 * reserved): one small page of it cannot change protection, so the signal
 * backend refuses it (MT_EUNSUPPORTED: before, it armed the range and the
 * first write killed the process); the uffd backend tracks it, at the huge
 * page's granularity. */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "track_util.h"

#define HUGE_SZ (2u << 20)
#define NHUGE 4

static int thp_available(void)
{
    FILE *f = fopen("/sys/kernel/mm/transparent_hugepage/enabled", "r");
    char buf[128] = "";
    if (!f)
        return 0;
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = 0;
    return strstr(buf, "[never]") == NULL;
}

/* 2 MiB-aligned memory, asked for huge pages and populated. */
static unsigned char *huge_map(size_t bytes, void **raw)
{
    unsigned char *p =
        mmap(NULL, bytes + HUGE_SZ, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    MT_CHECK(p != MAP_FAILED);
    *raw = p;
    unsigned char *a = (unsigned char *)(((uintptr_t)p + HUGE_SZ - 1) & ~(uintptr_t)(HUGE_SZ - 1));
    MT_CHECK(madvise(a, bytes, MADV_HUGEPAGE) == 0);
    memset(a, 0x5a, bytes);
    return a;
}

static size_t huge_kb(void)
{
    FILE *f = fopen("/proc/self/smaps_rollup", "r");
    char line[256];
    size_t kb = 0;
    while (f && fgets(line, sizeof line, f))
        if (sscanf(line, "AnonHugePages: %zu kB", &kb) == 1)
            break;
    if (f)
        fclose(f);
    return kb;
}

static void run(mt_track_backend be, int hot)
{
    size_t ps = tu_page(), bytes = (size_t)NHUGE * HUGE_SZ, np = bytes / ps;
    void *raw;
    unsigned char *m = huge_map(bytes, &raw), *model = malloc(bytes);
    memset(model, 0x5a, bytes);
    size_t kb_before = huge_kb();
    mt_tracker *t;
    mt_tracker_opts to = {.backend = be};
    MT_CHECK_OK(mt_tracker_create(&to, &t));
    mt_range_opts ro = {.backend = be, .flags = hot ? MT_RANGE_HOT_PAGES : 0};
    mt_range_id id;
    MT_CHECK_OK(mt_tracker_add(t, m, bytes, &ro, &id));
    unsigned char *want = calloc(np, 1), *seen = calloc(np, 1);
    uint64_t s = 0x9e3779b97f4a7c15ull ^ (uint64_t)be;
    for (int round = 0; round < 40; round++) {
        memset(want, 0, np);
        int writes = 1 + round % 17;
        if (round % 8 == 7)
            writes = 600; /* most pages of the region */
        for (int w = 0; w < writes; w++) {
            s = s * 6364136223846793005ull + 1442695040888963407ull;
            size_t pg = (size_t)(s >> 33) % np, off = pg * ps + (size_t)(s >> 20) % (ps - 8);
            unsigned char v = (unsigned char)(s >> 9);
            m[off] = v;
            model[off] = v;
            want[pg] = 1;
        }
        memset(seen, 0, np);
        tu_collect_into(t, id, (uintptr_t)m, (uintptr_t)m, seen, np);
        for (size_t pg = 0; pg < np; pg++)
            if (want[pg] && !seen[pg]) {
                fprintf(stderr, "%s%s: round %d: page %zu written, not reported\n",
                        mt_track_backend_name(be), hot ? " (hot pages)" : "", round, pg);
                MT_CHECK(0);
            }
    }
    MT_CHECK(memcmp(m, model, bytes) == 0);
    printf("  %-8s hot pages %-3s huge pages before tracking: %zu kB, ok\n", mt_track_backend_name(be),
           hot ? "on" : "off", kb_before);
    MT_CHECK_OK(mt_tracker_remove(t, id));
    mt_tracker_destroy(t);
    munmap(raw, bytes + HUGE_SZ);
    free(model);
    free(want);
    free(seen);
}

static void hugetlb(void)
{
    size_t bytes = 2 * (size_t)HUGE_SZ;
    unsigned char *m =
        mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_HUGETLB, -1, 0);
    if (m == MAP_FAILED) {
        printf("  hugetlb: no huge pages reserved here (%s): not tested\n", strerror(errno));
        return;
    }
    memset(m, 1, bytes);
    mt_tracker *t;
    mt_tracker_opts to = {.backend = MT_TRACK_SIGNAL};
    MT_CHECK_OK(mt_tracker_create(&to, &t));
    mt_range_opts ro = {.backend = MT_TRACK_SIGNAL};
    mt_range_id id;
    MT_CHECK_ERR(mt_tracker_add(t, m, bytes, &ro, &id), MT_EUNSUPPORTED);
    m[5000] = 2; /* nothing was left protected */
    m[HUGE_SZ + 7] = 3;
    mt_tracker_destroy(t);
    if (mt_track_backend_available(MT_TRACK_UFFD)) {
        to.backend = ro.backend = MT_TRACK_UFFD;
        MT_CHECK_OK(mt_tracker_create(&to, &t));
        if (mt_tracker_add(t, m, bytes, &ro, &id) == 0) {
            size_t ps = tu_page(), np = bytes / ps;
            unsigned char *seen = calloc(np, 1);
            tu_collect_into(t, id, (uintptr_t)m, (uintptr_t)m, seen, np); /* the initial state */
            m[HUGE_SZ + 4096 * 3] = 4;
            memset(seen, 0, np);
            tu_collect_into(t, id, (uintptr_t)m, (uintptr_t)m, seen, np);
            MT_CHECK(seen[HUGE_SZ / ps + 3]);
            MT_CHECK(m[HUGE_SZ + 4096 * 3] == 4 && m[5000] == 2);
            free(seen);
            MT_CHECK_OK(mt_tracker_remove(t, id));
            printf("  hugetlb: signal refuses it, uffd tracks it\n");
        } else {
            printf("  hugetlb: signal refuses it (uffd does not take it on this kernel either)\n");
        }
        mt_tracker_destroy(t);
    } else {
        printf("  hugetlb: signal refuses it\n");
    }
    munmap(m, bytes);
}

int main(void)
{
    hugetlb();
    if (!thp_available()) {
        puts("transparent huge pages are off here: skipped");
        return 77;
    }
    mt_track_backend be[2];
    int nb = tu_backends(be);
    for (int i = 0; i < nb; i++)
        for (int hot = 0; hot < 2; hot++)
            run(be[i], hot);
    puts("track over transparent huge pages: ok");
    return 0;
}
