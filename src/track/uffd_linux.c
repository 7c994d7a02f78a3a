/* uffd backend (Linux >= 6.7): userfaultfd write-protect in asynchronous mode
 * and the PAGEMAP_SCAN ioctl.
 *
 * With UFFD_FEATURE_WP_ASYNC the kernel resolves a write to a protected page
 * by itself (clears the page's uffd-wp bit, no message, no signal, no
 * handler thread). PAGEMAP_SCAN with PM_SCAN_WP_MATCHING then reports the
 * pages whose bit is clear ("written") and sets it again in the same page
 * table walk, so a write racing with the scan is either reported now or left
 * for the next scan. Protection lives in page tables, not in VMAs: no VMA
 * splitting, no vm.max_map_count pressure. Kernel writes (read(2) into the
 * buffer) are resolved the same way and recorded. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <linux/userfaultfd.h>
#include <stdatomic.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "../common/fdpark.h"
#include "internal.h"
#include "pmscan.h"

/* Debian 12's kernel headers (6.1) predate these; values from the 6.7 UAPI. */
#ifndef UFFD_FEATURE_WP_UNPOPULATED
#define UFFD_FEATURE_WP_UNPOPULATED (1 << 13)
#endif
#ifndef UFFD_FEATURE_WP_ASYNC
#define UFFD_FEATURE_WP_ASYNC (1 << 15)
#endif
#ifndef UFFD_USER_MODE_ONLY
#define UFFD_USER_MODE_ONLY 1
#endif

/* Opens a userfaultfd with the features we need; -errno or MT_EUNSUPPORTED. */
static int open_uffd(void)
{
    /* UFFD_USER_MODE_ONLY lets unprivileged processes use userfaultfd when
     * vm.unprivileged_userfaultfd is 0; async WP never delivers kernel-mode
     * faults to us anyway. Older kernels reject the flag: retry without. */
    int fd = (int)syscall(SYS_userfaultfd, O_CLOEXEC | O_NONBLOCK | UFFD_USER_MODE_ONLY);
    if (fd < 0 && errno == EINVAL)
        fd = (int)syscall(SYS_userfaultfd, O_CLOEXEC | O_NONBLOCK);
    if (fd < 0)
        return errno == ENOSYS ? MT_EUNSUPPORTED : -errno;
    /* UFFDIO_API may be called once per descriptor: ask for what we need;
     * the kernel refuses unknown feature bits with EINVAL. */
    struct uffdio_api api = {.api = UFFD_API,
                             .features = UFFD_FEATURE_WP_ASYNC | UFFD_FEATURE_WP_UNPOPULATED};
    if (ioctl(fd, UFFDIO_API, &api) != 0) {
        close(fd);
        return MT_EUNSUPPORTED;
    }
    return fd;
}

/* The application may close descriptors it did not open (closefrom,
 * close_range, a dup2 onto the number) and get the number back for a file
 * of its own, even a userfaultfd of its own. memtrack's ioctls must never
 * reach that file: registering a range there would send its write faults
 * to the application's reader, unprotecting or unregistering would change
 * the application's registrations. So every register, write-protect and
 * unregister first checks that the number still names our userfaultfd;
 * where it does not, both numbers are forgotten (not closed: they are the
 * application's now) and the next range opens a new pair. Ranges armed
 * through the lost userfaultfd lose their registration once the kernel
 * releases it (their pages are no longer write-protected): their scans
 * fail from then on, so each collect reports them whole (collect.c), exact
 * and counted in degradations. Scans need no check: PAGEMAP_SCAN on any
 * other file fails (ENOTTY), and on a pagemap of the application's own it
 * reads the same page tables. */
int mti_uffd_kept(const mt_tracker *t)
{
    return t->uffd >= 0 && mti_fd_names(t->uffd, t->uffd_dev, t->uffd_ino) &&
           mti_fd_names(t->pagemap_fd, t->pagemap_dev, t->pagemap_ino);
}

int mti_uffd_open(mt_tracker *t)
{
    if (mti_uffd_kept(t))
        return 0;
    t->uffd = t->pagemap_fd = -1;
    int fd = open_uffd();
    if (fd < 0)
        return fd;
    int pm = open("/proc/self/pagemap", O_RDONLY | O_CLOEXEC);
    if (pm < 0) {
        int err = -errno;
        close(fd);
        return err;
    }
    /* Kept for the tracker's life: out of the application's numbers. */
    fd = mti_fd_park(fd);
    pm = mti_fd_park(pm);
    /* Each userfaultfd has an inode of its own (on the kernels with
     * asynchronous write protection, 6.7 and later), unlike eventfds, which
     * share one: the identity tells ours from the application's. */
    int rc = mti_fd_identity(fd, &t->uffd_dev, &t->uffd_ino);
    if (rc == 0)
        rc = mti_fd_identity(pm, &t->pagemap_dev, &t->pagemap_ino);
    if (rc != 0) {
        close(fd);
        close(pm);
        return rc;
    }
    t->uffd = fd;
    t->pagemap_fd = pm;
    return 0;
}

void mti_uffd_close(mt_tracker *t)
{
    if (mti_uffd_kept(t)) {
        close(t->uffd);
        close(t->pagemap_fd);
    }
    t->uffd = t->pagemap_fd = -1;
}

static int writeprotect(int uffd, uintptr_t start, uintptr_t end, int on)
{
    if (end <= start)
        return 0;
    struct uffdio_writeprotect wp = {
        .range = {.start = start, .len = end - start},
        .mode = on ? UFFDIO_WRITEPROTECT_MODE_WP : 0,
    };
    return ioctl(uffd, UFFDIO_WRITEPROTECT, &wp) == 0 ? 0 : -errno;
}

int mti_uffd_scan(mt_tracker *t, uintptr_t start, uintptr_t end, unsigned page_shift, uint64_t *out)
{
    return mti_pmscan(t->pagemap_fd, start, end, page_shift, out);
}

int mti_uffd_unprotect(mt_tracker *t, uintptr_t start, uintptr_t end)
{
    /* Under the read lock: the numbers are only checked here, never
     * forgotten (that needs the write lock, mti_uffd_open). */
    if (!mti_uffd_kept(t))
        return -EBADF;
    return writeprotect(t->uffd, start, end, 0);
}

int mti_uffd_peek(mt_tracker *t, uintptr_t start, uintptr_t end)
{
    /* Without PM_SCAN_WP_MATCHING the scan only reads the written state;
     * one matching page is enough (max_pages = 1). */
    struct page_region vec[1];
    struct pm_scan_arg arg;
    memset(&arg, 0, sizeof arg);
    arg.size = sizeof arg;
    arg.start = start;
    arg.end = end;
    arg.vec = (uint64_t)(uintptr_t)vec;
    arg.vec_len = 1;
    arg.max_pages = 1;
    arg.category_mask = PAGE_IS_WRITTEN;
    arg.return_mask = PAGE_IS_WRITTEN;
    long n = ioctl(t->pagemap_fd, PAGEMAP_SCAN, &arg);
    return n < 0 ? -errno : n > 0;
}

int mti_uffd_arm_range(mt_tracker *t, mt_range *r)
{
    int rc = mti_uffd_open(t);
    if (rc)
        return rc;
    struct uffdio_register reg = {
        .range = {.start = r->span_start, .len = r->span_end - r->span_start},
        .mode = UFFDIO_REGISTER_MODE_WP,
    };
    if (ioctl(t->uffd, UFFDIO_REGISTER, &reg) != 0)
        return -errno;
    /* Pages at the ends may already be tracked by a neighbouring uffd range of
     * this tracker: protecting them again would erase a write the neighbour
     * has not collected yet. Scan them (which protects them too) and hand
     * what was written to the neighbour. */
    size_t ps = (size_t)1 << r->page_shift;
    uintptr_t s = r->span_start, e = r->span_end;
    uint32_t lo = mti_track_sorted_lower(t, r->span_start);
    int first_shared = 0, last_shared = 0;
    for (uint32_t i = lo; i < t->nsorted && t->sorted[i]->start < r->span_end; i++) {
        mt_range *o = t->sorted[i];
        if (o->backend != MT_TRACK_UFFD || o == r)
            continue;
        if (o->span_end > r->span_start && o->span_start <= r->span_start)
            first_shared = 1;
        if (o->span_start < r->span_end && o->span_end >= r->span_end)
            last_shared = 1;
    }
    uintptr_t edges[2] = {s, e - ps};
    int shared[2] = {first_shared, last_shared};
    for (int k = 0; k < 2; k++) {
        if (!shared[k] || (k == 1 && edges[1] == edges[0] && shared[0]))
            continue;
        uint64_t w = 0;
        rc = mti_pmscan(t->pagemap_fd, edges[k], edges[k] + ps, r->page_shift, &w);
        if (rc)
            return rc;
        if (w)
            mti_track_share_page(t, r, edges[k]);
    }
    if (first_shared)
        s += ps;
    if (last_shared && e > s)
        e -= ps;
    rc = writeprotect(t->uffd, s, e, 1);
    if (rc) {
        struct uffdio_range ur = {.start = r->span_start, .len = r->span_end - r->span_start};
        ioctl(t->uffd, UFFDIO_UNREGISTER, &ur);
    }
    return rc;
}

void mti_uffd_disarm_range(mt_tracker *t, mt_range *r)
{
    /* In a fork child the descriptor belongs to the parent's address space
     * (fork.c closed it): there is nothing of ours to unregister. Nor where
     * the application took the number (mti_uffd_open). */
    if (atomic_load_explicit(&r->whole, memory_order_relaxed) || !mti_uffd_kept(t))
        return;
    size_t ps = (size_t)1 << r->page_shift;
    uintptr_t s = r->span_start, e = r->span_end;
    uint32_t lo = mti_track_sorted_lower(t, r->span_start);
    for (uint32_t i = lo; i < t->nsorted && t->sorted[i]->start < r->span_end; i++) {
        mt_range *o = t->sorted[i];
        if (o == r || o->backend != MT_TRACK_UFFD)
            continue;
        if (o->span_end > s && o->span_start <= s)
            s += ps;
        if (o->span_start < e && o->span_end >= e && e > s)
            e -= ps;
    }
    /* Unregistering clears the uffd-wp bits of the range's pages. Only the
     * live ones: where the application unmapped ours, the address may hold
     * someone else's mapping now. */
    for (uintptr_t a = s; a < e;) {
        while (a < e && (mti_pstate(r, mti_page_index(r, a)) & MT_PS_GONE))
            a += ps;
        uintptr_t b = a;
        while (b < e && !(mti_pstate(r, mti_page_index(r, b)) & MT_PS_GONE))
            b += ps;
        if (b > a) {
            struct uffdio_range ur = {.start = a, .len = b - a};
            ioctl(t->uffd, UFFDIO_UNREGISTER, &ur);
        }
        a = b;
    }
}

int mti_uffd_probe(void)
{
    static _Atomic int cached = -1;
    int c = atomic_load_explicit(&cached, memory_order_acquire);
    if (c >= 0)
        return c;
    /* A functional probe, not a version check: register one page, write it,
     * and expect PAGEMAP_SCAN to report exactly that page. */
    int ok = 0;
    int fd = open_uffd();
    int pm = open("/proc/self/pagemap", O_RDONLY | O_CLOEXEC);
    int pm_err = pm < 0 ? errno : 0;
    long ps = (long)mti_page_size();
    void *p = mmap(NULL, (size_t)ps * 2, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    /* Out of descriptors or memory just now (an application at its
     * RLIMIT_NOFILE when the first tracker starts): no answer, and none
     * remembered, so that the next tracker asks again. */
    int for_now = fd == -EMFILE || fd == -ENFILE || fd == -ENOMEM || pm_err == EMFILE ||
                  pm_err == ENFILE || pm_err == ENOMEM || p == MAP_FAILED;
    if (fd >= 0 && pm >= 0 && p != MAP_FAILED) {
        struct uffdio_register reg = {.range = {(uintptr_t)p, (uint64_t)ps * 2},
                                      .mode = UFFDIO_REGISTER_MODE_WP};
        if (ioctl(fd, UFFDIO_REGISTER, &reg) == 0 &&
            writeprotect(fd, (uintptr_t)p, (uintptr_t)p + (uintptr_t)ps * 2, 1) == 0) {
            ((volatile char *)p)[ps] = 1;
            uint64_t w = 0;
            if (mti_pmscan(pm, (uintptr_t)p, (uintptr_t)p + (uintptr_t)ps * 2, (unsigned)__builtin_ctzl((unsigned long)ps), &w) == 0 && w == 2)
                ok = 1;
        }
    }
    if (p != MAP_FAILED)
        munmap(p, (size_t)ps * 2);
    if (fd >= 0)
        close(fd);
    if (pm >= 0)
        close(pm);
    if (!for_now)
        atomic_store_explicit(&cached, ok, memory_order_release);
    return ok;
}
