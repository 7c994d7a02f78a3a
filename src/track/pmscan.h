/* PAGEMAP_SCAN for the uffd backend (uffd_linux.c) and the collection
 * helper program (helper_main.c), which scans the application's pagemap
 * from another process: one loop, shared by both. */
#ifndef MT_TRACK_PMSCAN_H
#define MT_TRACK_PMSCAN_H

#include <errno.h>
#include <stdint.h>
#include <string.h>
#include <sys/ioctl.h>

/* Debian 12's kernel headers (6.1) predate these; values from the 6.7 UAPI. */
#ifndef PAGEMAP_SCAN
struct page_region {
    uint64_t start;
    uint64_t end;
    uint64_t categories;
};
struct pm_scan_arg {
    uint64_t size;
    uint64_t flags;
    uint64_t start;
    uint64_t end;
    uint64_t walk_end;
    uint64_t vec;
    uint64_t vec_len;
    uint64_t max_pages;
    uint64_t category_inverted;
    uint64_t category_mask;
    uint64_t category_anyof_mask;
    uint64_t return_mask;
};
#define PAGEMAP_SCAN _IOWR('f', 16, struct pm_scan_arg)
#define PAGE_IS_WRITTEN (1 << 1)
#define PM_SCAN_WP_MATCHING (1 << 0)
#define PM_SCAN_CHECK_WPASYNC (1 << 1)
#endif

#define MT_SCAN_VEC 256

/* Reads and re-protects the written pages of [start, end), setting their bits
 * in `out` (bit 0 = page `start`). Loops when the region vector fills up:
 * PAGEMAP_SCAN then stops at walk_end and leaves later pages untouched. */
static inline int mti_pmscan(int pagemap_fd, uintptr_t start, uintptr_t end, unsigned shift, uint64_t *out)
{
    struct page_region vec[MT_SCAN_VEC];
    uintptr_t cur = start;
    while (cur < end) {
        struct pm_scan_arg arg;
        memset(&arg, 0, sizeof arg);
        arg.size = sizeof arg;
        arg.flags = PM_SCAN_WP_MATCHING | PM_SCAN_CHECK_WPASYNC;
        arg.start = cur;
        arg.end = end;
        arg.vec = (uint64_t)(uintptr_t)vec;
        arg.vec_len = MT_SCAN_VEC;
        arg.category_mask = PAGE_IS_WRITTEN;
        arg.return_mask = PAGE_IS_WRITTEN;
        long n = ioctl(pagemap_fd, PAGEMAP_SCAN, &arg);
        if (n < 0)
            return -errno;
        for (long i = 0; i < n; i++) {
            size_t a = (size_t)((vec[i].start - start) >> shift);
            size_t b = (size_t)((vec[i].end - start) >> shift);
            for (size_t p = a; p < b; p++)
                out[p / 64] |= 1ull << (p % 64);
        }
        if (arg.walk_end <= cur)
            break; /* no progress: nothing more to walk */
        cur = arg.walk_end;
    }
    return 0;
}

#endif
