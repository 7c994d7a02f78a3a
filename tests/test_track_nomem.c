/* track: address space that runs out while ranges come and go changes
 * nothing that is already tracked.
 *
 * The tracker takes its memory from mmap by raw system calls (arena.c,
 * sigtable.c: never malloc), which the --wrap of the other nomem tests
 * cannot fail, so this test lowers RLIMIT_AS to just above what the process
 * has mapped (a random slack of 0 to 23 pages, mostly under 3) around each call. Under it,
 * with both backends:
 *   - mt_tracker_add of a new mapping (1 to 6,000 pages: its bookkeeping from
 *     the arena's 64 KiB chunks or a mapping of its own) returns 0 or
 *     -ENOMEM, nothing else; after -ENOMEM the memory is not tracked (it
 *     can be added once the limit is lifted: no half-inserted entry), and it
 *     was never protected (written under the limit, with no fault
 *     memtrack would have to take);
 *   - collect and remove succeed (they allocate nothing);
 *   - every range added so far reports exactly the pages written, before,
 *     during and after the droughts.
 * Usage: test_track_nomem [--seed N].
 *
 * Skipped (77) under ThreadSanitizer: its runtime maps memory of its own
 * while the limit is low (sync objects for the arena's atomics, the signal
 * path) and aborts when it cannot ("failed to allocate ... sync allocator"),
 * which is TSan running out, not the tracker. The test is single-threaded,
 * so TSan has nothing to check here; the plain and ASan+UBSan builds run it. */
#define _GNU_SOURCE
#include <stdio.h>
#include <sys/resource.h>

#include "track_child.h"

enum { MAXR = 24, STEPS = 1000, MAXPAGES = 6000 };

typedef struct live {
    unsigned char *base;
    size_t npages;
    mt_range_id id;
    unsigned char *written; /* the reference: pages written since the last collect */
} live;

static struct rlimit g_saved;

/* The process's mapped size in bytes (what RLIMIT_AS is compared with). */
static size_t mapped_bytes(void)
{
    FILE *f = fopen("/proc/self/statm", "r");
    MT_CHECK(f);
    unsigned long pages = 0;
    MT_CHECK(fscanf(f, "%lu", &pages) == 1);
    fclose(f);
    return pages * tu_page();
}

/* Leaves `slack` bytes of address space to map. */
static void squeeze(size_t slack)
{
    struct rlimit r = g_saved;
    r.rlim_cur = mapped_bytes() + slack;
    if (g_saved.rlim_max != RLIM_INFINITY && r.rlim_cur > g_saved.rlim_max)
        r.rlim_cur = g_saved.rlim_max;
    MT_CHECK(setrlimit(RLIMIT_AS, &r) == 0);
}

static void relax(void) { MT_CHECK(setrlimit(RLIMIT_AS, &g_saved) == 0); }

/* Writes a random set of pages of l, noted in its reference. */
static void write_some(live *l, uint64_t *rng)
{
    size_t n = 1 + mt_test_below(rng, 8);
    for (size_t i = 0; i < n; i++) {
        size_t p = mt_test_below(rng, l->npages);
        l->base[p * tu_page() + mt_test_below(rng, tu_page())] ^= 0x5a;
        l->written[p] = 1;
    }
}

/* Collect must report exactly the pages written since the last one. */
static void check_exact(mt_tracker *t, live *l)
{
    /* Not malloc: this runs squeezed too, where malloc may find no room. */
    static unsigned char seen[MAXPAGES];
    memset(seen, 0, l->npages);
    tu_collect_into(t, l->id, (uintptr_t)l->base, (uintptr_t)l->base, seen, l->npages);
    for (size_t p = 0; p < l->npages; p++)
        if (seen[p] != l->written[p]) {
            fprintf(stderr, "page %zu of %zu: written %d, reported %d\n", p, l->npages, l->written[p],
                    seen[p]);
            MT_CHECK(0);
        }
    memset(l->written, 0, l->npages);
}

static void drop(mt_tracker *t, live *l, int squeezed, size_t slack)
{
    if (squeezed)
        squeeze(slack);
    int rc = mt_tracker_remove(t, l->id);
    if (squeezed)
        relax();
    MT_CHECK_OK(rc);
    munmap(l->base, l->npages * tu_page());
    free(l->written);
}

static void run(mt_track_backend b, uint64_t *rng)
{
    mt_tracker_opts o = {.backend = b, .max_ranges = MAXR};
    mt_tracker *t;
    MT_CHECK_OK(mt_tracker_create(&o, &t));
    live ls[MAXR];
    size_t nl = 0;
    unsigned added = 0, refused = 0, squeezed_adds = 0;
    for (int step = 0; step < STEPS; step++) {
        /* Droughts: 40 of every 100 steps run squeezed, from the first (the
         * process's first add maps the table of all ranges). */
        int squeezed = step % 100 < 40;
        /* Mostly a few pages: a large range's own mapping, or the arena's
         * next 64 KiB chunk, fails; sometimes room for both. */
        size_t slack = (size_t)mt_test_below(rng, mt_test_below(rng, 5) < 3 ? 3 : 24) * tu_page();
        if (nl == MAXR || (nl > 0 && mt_test_below(rng, 4) == 0)) {
            size_t k = mt_test_below(rng, nl);
            check_exact(t, &ls[k]);
            drop(t, &ls[k], squeezed, slack);
            ls[k] = ls[--nl];
            continue;
        }
        /* Mostly small ranges (bookkeeping from the arena's chunks), some
         * large (a mapping of their own). */
        size_t np = mt_test_below(rng, 3) ? 1 + mt_test_below(rng, 64) : 1000 + mt_test_below(rng, 5000);
        live l = {tu_map(np * tu_page()), np, 0, calloc(np, 1)};
        MT_CHECK(l.written);
        if (squeezed)
            squeeze(slack);
        int rc = mt_tracker_add(t, l.base, np * tu_page(), NULL, &l.id);
        if (rc == 0)
            write_some(&l, rng); /* tracked under the limit: its first faults too */
        else /* never protected: writable without memtrack */
            l.base[mt_test_below(rng, np) * tu_page()] = 1;
        /* Collect allocates nothing: it works squeezed. */
        for (size_t i = 0; i < nl; i++) {
            write_some(&ls[i], rng);
            if (mt_test_below(rng, 3) == 0)
                check_exact(t, &ls[i]);
        }
        if (squeezed)
            relax();
        if (rc == -ENOMEM) {
            MT_CHECK(squeezed);
            refused++;
            /* Nothing of it was left behind: it can be added now. */
            rc = mt_tracker_add(t, l.base, np * tu_page(), NULL, &l.id);
            MT_CHECK_OK(rc);
            write_some(&l, rng);
        } else {
            MT_CHECK_OK(rc);
            squeezed_adds += squeezed;
        }
        added++;
        check_exact(t, &l);
        write_some(&l, rng);
        ls[nl++] = l;
    }
    for (size_t i = 0; i < nl; i++) {
        check_exact(t, &ls[i]);
        drop(t, &ls[i], 0, 0);
    }
    mt_tracker_destroy(t);
    printf("%s: %u ranges added, %u refused with -ENOMEM under the limit (added later), %u added under it\n",
           mt_track_backend_name(b), added, refused, squeezed_adds);
    /* The test must have made adds fail, or it tested nothing. */
    MT_CHECK(refused > 0);
}

int main(int argc, char **argv)
{
    uint64_t rng = mt_test_seed(argc, argv);
    setvbuf(stdout, NULL, _IOLBF, 0);
    if (TC_TSAN) {
        printf("skip: ThreadSanitizer's runtime cannot map its own memory under the lowered RLIMIT_AS\n");
        return 77;
    }
    MT_CHECK(getrlimit(RLIMIT_AS, &g_saved) == 0);
    mt_track_backend bs[2];
    int nb = tu_backends(bs);
    for (int i = 0; i < nb; i++)
        run(bs[i], &rng);
    printf("ok\n");
    return 0;
}
