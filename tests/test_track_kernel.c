/* track: writes done by the kernel into tracked memory (read(2) into a
 * tracked buffer). The signal backend cannot see them: the page is
 * read-only, so the kernel's copy fails and read() returns EFAULT (no
 * signal is raised for kernel-mode faults). mt_tracker_prepare_write()
 * is the way around it. The uffd backend lets the kernel write and records
 * the pages exactly. */
#include <fcntl.h>

#include "track_util.h"

static void fill_pipe(int fd, size_t n, unsigned char seed)
{
    unsigned char buf[16384];
    for (size_t i = 0; i < n; i++)
        buf[i] = (unsigned char)(seed + i * 7);
    MT_CHECK_INT_EQ(write(fd, buf, n), (long)n);
}

static void test_signal_efault(void)
{
    size_t ps = tu_page();
    unsigned char *m = tu_map(8 * ps);
    mt_tracker_opts o = {.backend = MT_TRACK_SIGNAL};
    mt_tracker *t;
    MT_CHECK_OK(mt_tracker_create(&o, &t));
    mt_range_id id;
    MT_CHECK_OK(mt_tracker_add(t, m, 8 * ps, NULL, &id));
    int p[2];
    MT_CHECK(pipe(p) == 0);
    fill_pipe(p[1], 100, 1);
    errno = 0;
    MT_CHECK_INT_EQ(read(p[0], m + 2 * ps + 10, 100), -1);
    MT_CHECK_INT_EQ(errno, EFAULT);
    mt_dirty_run runs[4];
    MT_CHECK_INT_EQ(mt_tracker_collect(t, id, runs, 4), 0); /* nothing was written */

    /* prepare_write makes the kernel write possible and reports the page. */
    MT_CHECK_OK(mt_tracker_prepare_write(t, id, m + 2 * ps + 10, 100));
    MT_CHECK_INT_EQ(read(p[0], m + 2 * ps + 10, 100), 100);
    MT_CHECK_INT_EQ(m[2 * ps + 10], 1);
    MT_CHECK_INT_EQ(m[2 * ps + 11], 8);
    MT_CHECK_INT_EQ(mt_tracker_collect(t, id, runs, 4), 1);
    MT_CHECK_UINT_EQ(runs[0].offset, 2 * ps);
    MT_CHECK_UINT_EQ(runs[0].length, ps);

    /* Kernel *reads* of tracked memory (write(2) from it) always work. */
    MT_CHECK_INT_EQ(write(p[1], m, 64), 64);
    close(p[0]);
    close(p[1]);
    mt_tracker_destroy(t);
    munmap(m, 8 * ps);
    printf("  signal: read(2) into tracked memory -> EFAULT; prepare_write fixes it\n");
}

static void test_uffd_kernel_write(void)
{
    size_t ps = tu_page();
    unsigned char *m = tu_map(8 * ps);
    mt_tracker_opts o = {.backend = MT_TRACK_UFFD};
    mt_tracker *t;
    MT_CHECK_OK(mt_tracker_create(&o, &t));
    mt_range_id id;
    MT_CHECK_OK(mt_tracker_add(t, m, 8 * ps, NULL, &id));
    int p[2];
    MT_CHECK(pipe(p) == 0);
    /* 6000 bytes from the middle of page 2: pages 2, 3 and 4 are written. */
    size_t off = 2 * ps + ps / 2;
    size_t n = 2 * ps + 100;
    MT_CHECK(n <= 16384);
    fill_pipe(p[1], n, 3);
    MT_CHECK_INT_EQ(read(p[0], m + off, n), (long)n);
    for (size_t i = 0; i < n; i++)
        MT_CHECK_INT_EQ(m[off + i], (unsigned char)(3 + i * 7));
    mt_dirty_run runs[4];
    MT_CHECK_INT_EQ(mt_tracker_collect(t, id, runs, 4), 1);
    MT_CHECK_UINT_EQ(runs[0].offset, 2 * ps);
    MT_CHECK_UINT_EQ(runs[0].length, 3 * ps);
    MT_CHECK_INT_EQ(mt_tracker_collect(t, id, runs, 4), 0);

    /* pread from a file, into a page boundary. */
    char path[] = "/tmp/mt_kw_XXXXXX";
    int fd = mkstemp(path);
    MT_CHECK(fd >= 0);
    unlink(path);
    MT_CHECK_INT_EQ(write(fd, "memtrack", 8), 8);
    MT_CHECK_INT_EQ(pread(fd, m + 7 * ps - 4, 8, 0), 8);
    MT_CHECK_INT_EQ(mt_tracker_collect(t, id, runs, 4), 1);
    MT_CHECK_UINT_EQ(runs[0].offset, 6 * ps);
    MT_CHECK_UINT_EQ(runs[0].length, 2 * ps);
    close(fd);
    close(p[0]);
    close(p[1]);
    mt_tracker_destroy(t);
    munmap(m, 8 * ps);
    printf("  uffd: read(2)/pread(2) into tracked memory succeed and are recorded exactly\n");
}

int main(void)
{
    test_signal_efault();
    if (mt_track_backend_available(MT_TRACK_UFFD))
        test_uffd_kernel_write();
    else
        printf("note: uffd unavailable, kernel-write recording not tested\n");
    puts("track kernel writes: ok");
    return 0;
}
