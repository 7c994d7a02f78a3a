/* track: an application that takes the number of memtrack's userfaultfd
 * for a userfaultfd of its own (it closed a descriptor it did not open, or
 * dup2()ed onto the number).
 *
 * memtrack's ioctls must never reach the application's userfaultfd: a range
 * registered there in write-protect mode would send its write faults to the
 * application's reader (this one reads none, so the write would block
 * forever); unregistering would undo the application's own registrations.
 * Checked, with the uffd backend:
 *  - the range tracked before the swap loses no write: its pages come back
 *    (whole, counted in degradations) at every collect after;
 *  - a range added after the swap is armed on a new userfaultfd of
 *    memtrack's: a write there completes (it would block on the
 *    application's), and is reported alone;
 *  - removing ranges, destroying the tracker and a fork child's clean-up
 *    leave the application's userfaultfd open, with no message for it.
 * Exits 77 where the uffd backend is not available. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <linux/userfaultfd.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "fd_util.h"
#include "memtrack/track.h"
#include "mt_test.h"

#define PAGES 16

static size_t collect_pages(mt_tracker *t, mt_range_id id, size_t *first)
{
    mt_dirty_run runs[64];
    long n = mt_tracker_collect(t, id, runs, 64);
    MT_CHECK(n >= 0);
    size_t pages = 0;
    for (long i = 0; i < n; i++)
        pages += runs[i].length / (size_t)getpagesize();
    if (first)
        *first = n > 0 ? runs[0].offset / (size_t)getpagesize() : (size_t)-1;
    return pages;
}

static _Atomic int wrote;

static void *writer(void *p)
{
    ((volatile char *)p)[3 * getpagesize()] = 7;
    atomic_store(&wrote, 1);
    return NULL;
}

/* The application's userfaultfd: the plain API, nothing registered. */
static int app_uffd(void)
{
    int fd = (int)syscall(SYS_userfaultfd, O_CLOEXEC | O_NONBLOCK | 1 /* UFFD_USER_MODE_ONLY */);
    if (fd < 0)
        fd = (int)syscall(SYS_userfaultfd, O_CLOEXEC | O_NONBLOCK);
    MT_CHECK(fd >= 0);
    struct uffdio_api api = {.api = UFFD_API};
    MT_CHECK(ioctl(fd, UFFDIO_API, &api) == 0);
    return fd;
}

int main(void)
{
    mt_tracker_opts o = {.backend = MT_TRACK_UFFD};
    mt_tracker *t;
    int rc = mt_tracker_create(&o, &t);
    if (rc == MT_EUNSUPPORTED) {
        printf("SKIP: no uffd backend here\n");
        return 77;
    }
    MT_CHECK_OK(rc);
    size_t ps = (size_t)getpagesize();
    char *a = mmap(NULL, PAGES * ps, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    char *b = mmap(NULL, PAGES * ps, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    MT_CHECK(a != MAP_FAILED && b != MAP_FAILED);
    memset(a, 1, PAGES * ps);
    memset(b, 1, PAGES * ps);
    mt_range_id ida, idb;
    MT_CHECK_OK(mt_tracker_add(t, a, PAGES * ps, NULL, &ida));
    a[5 * ps] = 2;
    size_t first;
    MT_CHECK(collect_pages(t, ida, &first) == 1 && first == 5);

    int ours[4];
    MT_CHECK_INT_EQ(fd_numbers_naming("anon_inode:[userfaultfd]", ours, 4), 1);
    /* The application's userfaultfd takes the number. */
    int mine = app_uffd();
    MT_CHECK(dup2(mine, ours[0]) == ours[0]);
    close(mine);
    mine = ours[0];
    struct stat app_st;
    MT_CHECK(fstat(mine, &app_st) == 0);

    /* No write to the first range is lost: every page is reported, at every
     * collect, and said. */
    a[9 * ps] = 3;
    MT_CHECK_INT_EQ((int)collect_pages(t, ida, NULL), PAGES);
    a[2 * ps] = 3;
    MT_CHECK_INT_EQ((int)collect_pages(t, ida, NULL), PAGES);
    mt_range_stats st;
    MT_CHECK_OK(mt_tracker_stats(t, ida, &st));
    MT_CHECK(st.degradations >= 2);

    /* A new range: armed on a userfaultfd of memtrack's, not the
     * application's (a write there would wait for the application's reader,
     * forever). */
    MT_CHECK_OK(mt_tracker_add(t, b, PAGES * ps, NULL, &idb));
    MT_CHECK_OK(mt_tracker_stats(t, idb, &st));
    MT_CHECK_INT_EQ((int)st.backend, MT_TRACK_UFFD);
    pthread_t th;
    MT_CHECK(pthread_create(&th, NULL, writer, b) == 0);
    for (int i = 0; i < 300 && !atomic_load(&wrote); i++)
        nanosleep(&(struct timespec){0, 10 * 1000 * 1000}, NULL);
    if (!atomic_load(&wrote)) {
        fprintf(stderr, "FAIL: a write to a range added after the swap is blocked (registered on the application's userfaultfd)\n");
        _exit(1);
    }
    pthread_join(th, NULL);
    MT_CHECK(collect_pages(t, idb, &first) == 1 && first == 3);
    MT_CHECK_INT_EQ((int)collect_pages(t, idb, NULL), 0);
    int now[4];
    MT_CHECK_INT_EQ(fd_numbers_naming("anon_inode:[userfaultfd]", now, 4), 2);

    /* A fork child's clean-up closes memtrack's descriptors, not the
     * application's. */
    pid_t pid = fork();
    MT_CHECK(pid >= 0);
    if (pid == 0)
        _exit(fd_still_names(mine, &app_st) ? 0 : 1);
    int status;
    MT_CHECK(waitpid(pid, &status, 0) == pid);
    MT_CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);

    MT_CHECK_OK(mt_tracker_remove(t, ida));
    MT_CHECK_OK(mt_tracker_remove(t, idb));
    mt_tracker_destroy(t);
    /* The application's userfaultfd: still open, still its own, and
     * nothing was sent to it. */
    MT_CHECK(fd_still_names(mine, &app_st));
    struct uffd_msg msg;
    MT_CHECK(read(mine, &msg, sizeof msg) < 0 && errno == EAGAIN);
    MT_CHECK_INT_EQ(fd_numbers_naming("anon_inode:[userfaultfd]", now, 4), 1);
    close(mine);
    printf("ok: the application's userfaultfd at memtrack's number was never used; no write lost\n");
    return 0;
}
