/* alloc: host memory that runs out inside the allocator changes nothing.
 *
 * Host allocations fail on demand (nomem_util.h): before most calls the
 * test makes the k-th allocation of the call and every later one fail (k
 * of 1-3). mt_alloc_allocate and mt_alloc_add_region then either succeed
 * or return -ENOMEM (-ENOSPC when there is no room) and, as alloc.h
 * promises, change nothing: the statistics are those of before, the
 * consistency checker passes, and every allocation made so far is still
 * freeable exactly once, by its offset too (the offset map knows every
 * allocation, also one made while the map could not grow). Thousands of
 * small allocations make the node array and the offset map grow (the
 * allocations that fail); regions come and go. At the end everything is
 * freed and the allocator is empty.
 * Usage: test_alloc_nomem [--seed N]. */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "memtrack/alloc.h"
#include "mt_test.h"
#include "nomem_util.h"

enum { MAXLIVE = 20000, MAXREG = 16 };

static mt_alloc_block live[MAXLIVE];
static uint32_t nlive;
static uint32_t regions[MAXREG];
static uint32_t nregions;

static void check(mt_alloc *a)
{
    char msg[256];
    int rc = mt_alloc_check(a, msg, sizeof msg);
    if (rc) {
        fprintf(stderr, "consistency: %s\n", msg);
        MT_CHECK(0);
    }
}

static int same_stats(const mt_alloc_stats *x, const mt_alloc_stats *y)
{
    return x->total_bytes == y->total_bytes && x->free_bytes == y->free_bytes &&
           x->allocations == y->allocations && x->free_blocks == y->free_blocks &&
           x->regions == y->regions && x->largest_free == y->largest_free;
}

int main(int argc, char **argv)
{
    uint64_t rng = mt_test_seed(argc, argv);
    mt_alloc *a;
    MT_CHECK_OK(mt_alloc_create(NULL, &a));
    unsigned enomem = 0, ok_fired = 0, region_fail = 0;
    for (unsigned step = 0; step < 60000; step++) {
        uint64_t r = mt_test_below(&rng, 100);
        mt_alloc_stats before, after;
        MT_CHECK_OK(mt_alloc_get_stats(a, &before));
        /* Droughts: for 400 of every 1,000 steps no host memory at all,
         * so that the allocator's slack runs out; else most calls fail at
         * a random allocation. */
        int drought = step % 1000 >= 600;
        int armed = drought || mt_test_below(&rng, 4) != 0;
        if (r < 2 || nregions == 0) { /* a region */
            if (nregions == MAXREG)
                continue;
            uint32_t id;
            nomem_arm(drought ? 1 : armed ? 1 + (long)mt_test_below(&rng, 3) : 0, 1);
            int rc = mt_alloc_add_region(a, (1 + mt_test_below(&rng, 8)) << 20, NULL, &id);
            int f = nomem_disarm();
            if (rc) {
                MT_CHECK(rc == -ENOMEM && f);
                region_fail++;
                MT_CHECK_OK(mt_alloc_get_stats(a, &after));
                MT_CHECK(same_stats(&before, &after));
            } else
                regions[nregions++] = id;
        } else if (r < 60 && nlive < MAXLIVE) { /* an allocation, mostly small */
            uint64_t size = mt_test_below(&rng, 8) ? 256 + mt_test_below(&rng, 4096)
                                                   : 1 + mt_test_below(&rng, 1u << 20);
            uint64_t align = 1ull << mt_test_below(&rng, 13);
            nomem_arm(drought ? 1 : armed ? 1 + (long)mt_test_below(&rng, 3) : 0, 1);
            int rc = mt_alloc_allocate(a, size, align, MT_ALLOC_LINEAR, &live[nlive]);
            int f = nomem_disarm();
            if (rc == 0) {
                nlive++;
                ok_fired += (unsigned)f;
            } else {
                MT_CHECK(rc == -ENOSPC || (rc == -ENOMEM && f));
                enomem += rc == -ENOMEM;
                MT_CHECK_OK(mt_alloc_get_stats(a, &after));
                MT_CHECK(same_stats(&before, &after));
            }
        } else if (nlive) { /* a free: it allocates nothing, so it is not failed */
            uint32_t i = (uint32_t)mt_test_below(&rng, nlive);
            /* By offset half the time: the offset map must know every
             * allocation, also those made while it could not grow. */
            if (mt_test_below(&rng, 2))
                MT_CHECK_OK(mt_alloc_free(a, live[i].region, live[i].offset));
            else
                MT_CHECK_OK(mt_alloc_free_block(a, &live[i]));
            live[i] = live[--nlive];
        }
        if (step % 997 == 0)
            check(a);
    }
    check(a);
    printf("alloc nomem: %u allocations refused with ENOMEM (%u succeeded although one failed), "
           "%u regions refused, %u live\n",
           enomem, ok_fired, region_fail, nlive);
    MT_CHECK(enomem > 5);
    while (nlive) {
        nlive--;
        MT_CHECK_OK(mt_alloc_free(a, live[nlive].region, live[nlive].offset));
    }
    mt_alloc_stats s;
    MT_CHECK_OK(mt_alloc_get_stats(a, &s));
    MT_CHECK(s.allocations == 0 && s.free_bytes == s.total_bytes);
    check(a);
    mt_alloc_destroy(a);
    puts("alloc nomem: ok");
    return 0;
}
