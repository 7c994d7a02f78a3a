/* mti_fd_park: memtrack's long-lived descriptors above the application's
 * (fdpark.h). */
#define _GNU_SOURCE
#include "fdpark.h"

#include <errno.h>
#include <fcntl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

/* Above this soft limit the descriptor table that a number past it needs
 * would cost real kernel memory (8 bytes a slot): park at PARK_LOW there. */
#define PARK_MAX_SOFT 65536
#define PARK_LOW 1024
/* How far the soft limit is raised for the duplication: room for a few
 * descriptors of ours parked before this one. */
#define PARK_ROOM 64

/* prlimit64 by system call: the preload library interposes getrlimit and
 * prlimit (their output may land in tracked memory); ours never does. */
static int nofile(const struct rlimit *set, struct rlimit *get)
{
    return (int)syscall(SYS_prlimit64, 0, RLIMIT_NOFILE, set, get);
}

int mti_fd_park(int fd)
{
    if (fd < 0)
        return fd;
    struct rlimit rl;
    if (nofile(NULL, &rl) != 0)
        return fd;
    int saved = errno, nfd = -1;
    if (rl.rlim_cur < rl.rlim_max && rl.rlim_cur <= PARK_MAX_SOFT) {
        if ((rlim_t)fd >= rl.rlim_cur)
            return fd; /* parked already */
        rlim_t room = rl.rlim_max - rl.rlim_cur < PARK_ROOM ? rl.rlim_max : rl.rlim_cur + PARK_ROOM;
        struct rlimit up = {room, rl.rlim_max};
        if (nofile(&up, NULL) == 0) {
            nfd = fcntl(fd, F_DUPFD_CLOEXEC, (int)rl.rlim_cur);
            /* Put back what the application set, whatever happened. (An
             * application thread changing the limit in these few
             * microseconds would see its change undone: accepted.) */
            nofile(&rl, NULL);
        }
    } else {
        /* No room above the limit (soft == hard, or a soft limit so large
         * that numbers past it cost real memory): below it, as high as is
         * cheap. The kernel hands out the lowest free number, so a
         * descriptor in the top eighth of a small limit is met only by an
         * application that holds nearly all of it (it would be one short
         * wherever ours sat), and descriptor 0 or 3 stays the
         * application's. */
        rlim_t lim = rl.rlim_cur;
        int base = lim > 2 * PARK_LOW ? PARK_LOW : (int)(lim - lim / 8);
        if (fd < base)
            nfd = fcntl(fd, F_DUPFD_CLOEXEC, base);
    }
    if (nfd < 0) {
        errno = saved;
        return fd;
    }
    close(fd);
    errno = saved;
    return nfd;
}

/* fstat by system call: the interposer brackets libc's calls that write
 * into the caller's memory. */
int mti_fd_identity(int fd, uint64_t *dev, uint64_t *ino)
{
    struct stat st;
    if (syscall(SYS_fstat, fd, &st) != 0)
        return -errno;
    *dev = (uint64_t)st.st_dev;
    *ino = (uint64_t)st.st_ino;
    return 0;
}

int mti_fd_names(int fd, uint64_t dev, uint64_t ino)
{
    uint64_t d, i;
    return fd >= 0 && mti_fd_identity(fd, &d, &i) == 0 && d == dev && i == ino;
}
