/* Calls that only report something into the application's buffer (a time,
 * a stat, a socket's address, a link's target): the kernel writes the buffer, which fails with
 * EFAULT on a page the signal backend protects. They are idempotent, so
 * they run as they are, with nothing added on the usual path, and only a
 * call that failed with EFAULT while a tracker is attached runs again,
 * bracketed like read() (kwrite.c): the pages are made writable for it and
 * reported. A buffer that is really bad fails the same way twice; a retry
 * that succeeds leaves errno as it was before the call.
 *
 * clock_gettime reaches the kernel only for clocks the vDSO does not serve
 * (the CPU-time clocks; every clock where the clock source has no vDSO
 * path): the vDSO's own store is a user write, which faults and is tracked
 * like any other. The pre-2.33 glibc entry points of the stat family
 * (__xstat and friends), which binaries built against an older glibc
 * still call, are here too. Not here: calls that change state (accept's
 * address: the connection is taken, and getsockopt: SO_ERROR clears what
 * it reports; they are bracketed before the call, kwout.c; recv is in
 * kwrite.c). */
#define _GNU_SOURCE
#include <errno.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/sysinfo.h>
#include <sys/time.h>
#include <sys/times.h>
#include <sys/utsname.h>
#include <time.h>

#include "kw.h"
#include "preload.h"

/* `ok` is the success test of the call's result ri_; the retry is
 * bracketed over the n segments of seg. */
#define IDEM(type, call, ok, seg, n)                                                                \
    do {                                                                                            \
        int e0_ = errno;                                                                            \
        type ri_ = (call);                                                                          \
        if (!(ok) && errno == EFAULT && mtp_get_hooks()) {                                          \
            struct iovec *v_ = (seg);                                                               \
            ri_ = KW_IOV(v_, (n), (call));                                                          \
            if (ok)                                                                                 \
                errno = e0_;                                                                        \
        }                                                                                           \
        return ri_;                                                                                 \
    } while (0)

/* A NULL or bad buffer needs no case of its own: nothing of it is tracked,
 * the retry runs unbracketed and fails as the first call did. */
#define ONE(p, len) ((struct iovec[1]){{(void *)(p), (len)}})

MTP_EXPORT int clock_gettime(clockid_t clk, struct timespec *ts)
{
    IDEM(int, REAL(clock_gettime)(clk, ts), ri_ == 0, ONE(ts, sizeof *ts), 1);
}

MTP_EXPORT int clock_getres(clockid_t clk, struct timespec *res)
{
    IDEM(int, REAL(clock_getres)(clk, res), ri_ == 0, ONE(res, sizeof *res), 1);
}

MTP_EXPORT int gettimeofday(struct timeval *restrict tv, void *restrict tz)
{
    IDEM(int, REAL(gettimeofday)(tv, tz), ri_ == 0,
         ((struct iovec[2]){{tv, sizeof *tv}, {tz, sizeof(struct timezone)}}), 2);
}

MTP_EXPORT int getrusage(int who, struct rusage *ru)
{
    IDEM(int, REAL(getrusage)(who, ru), ri_ == 0, ONE(ru, sizeof *ru), 1);
}

MTP_EXPORT clock_t times(struct tms *buf)
{
    IDEM(clock_t, REAL(times)(buf), ri_ != (clock_t)-1, ONE(buf, sizeof *buf), 1);
}

MTP_EXPORT int sysinfo(struct sysinfo *info)
{
    IDEM(int, REAL(sysinfo)(info), ri_ == 0, ONE(info, sizeof *info), 1);
}

MTP_EXPORT int uname(struct utsname *buf)
{
    IDEM(int, REAL(uname)(buf), ri_ == 0, ONE(buf, sizeof *buf), 1);
}

MTP_EXPORT int stat(const char *restrict path, struct stat *restrict st)
{
    IDEM(int, REAL(stat)(path, st), ri_ == 0, ONE(st, sizeof *st), 1);
}

MTP_EXPORT int lstat(const char *restrict path, struct stat *restrict st)
{
    IDEM(int, REAL(lstat)(path, st), ri_ == 0, ONE(st, sizeof *st), 1);
}

MTP_EXPORT int fstat(int fd, struct stat *st)
{
    IDEM(int, REAL(fstat)(fd, st), ri_ == 0, ONE(st, sizeof *st), 1);
}

MTP_EXPORT int fstatat(int dirfd, const char *restrict path, struct stat *restrict st, int flags)
{
    IDEM(int, REAL(fstatat)(dirfd, path, st, flags), ri_ == 0, ONE(st, sizeof *st), 1);
}

MTP_EXPORT int stat64(const char *restrict path, struct stat64 *restrict st)
{
    IDEM(int, REAL(stat64)(path, st), ri_ == 0, ONE(st, sizeof *st), 1);
}

MTP_EXPORT int lstat64(const char *restrict path, struct stat64 *restrict st)
{
    IDEM(int, REAL(lstat64)(path, st), ri_ == 0, ONE(st, sizeof *st), 1);
}

MTP_EXPORT int fstat64(int fd, struct stat64 *st)
{
    IDEM(int, REAL(fstat64)(fd, st), ri_ == 0, ONE(st, sizeof *st), 1);
}

MTP_EXPORT int fstatat64(int dirfd, const char *restrict path, struct stat64 *restrict st, int flags)
{
    IDEM(int, REAL(fstatat64)(dirfd, path, st, flags), ri_ == 0, ONE(st, sizeof *st), 1);
}

MTP_EXPORT int statx(int dirfd, const char *restrict path, int flags, unsigned mask,
                     struct statx *restrict st)
{
    IDEM(int, REAL(statx)(dirfd, path, flags, mask, st), ri_ == 0, ONE(st, sizeof *st), 1);
}

/* The link's target, at most n bytes; the call returns how many. */
MTP_EXPORT ssize_t readlink(const char *restrict path, char *restrict buf, size_t n)
{
    IDEM(ssize_t, REAL(readlink)(path, buf, n), ri_ >= 0, ONE(buf, n), 1);
}

MTP_EXPORT ssize_t readlinkat(int dirfd, const char *restrict path, char *restrict buf, size_t n)
{
    IDEM(ssize_t, REAL(readlinkat)(dirfd, path, buf, n), ri_ >= 0, ONE(buf, n), 1);
}

MTP_EXPORT ssize_t __readlink_chk(const char *path, char *buf, size_t n, size_t buflen)
{
    IDEM(ssize_t, REAL(__readlink_chk)(path, buf, n, buflen), ri_ >= 0,
         ONE(buf, n <= buflen ? n : buflen), 1);
}

MTP_EXPORT ssize_t __readlinkat_chk(int dirfd, const char *path, char *buf, size_t n, size_t buflen)
{
    IDEM(ssize_t, REAL(__readlinkat_chk)(dirfd, path, buf, n, buflen), ri_ >= 0,
         ONE(buf, n <= buflen ? n : buflen), 1);
}

MTP_EXPORT char *__getcwd_chk(char *buf, size_t n, size_t buflen)
{
    IDEM(char *, REAL(__getcwd_chk)(buf, n, buflen), ri_ != NULL,
         ONE(buf, buf ? (n <= buflen ? n : buflen) : 0), 1);
}

/* With no buffer libc allocates one: nothing of the application's written. */
MTP_EXPORT char *getcwd(char *buf, size_t n)
{
    IDEM(char *, REAL(getcwd)(buf, n), ri_ != NULL, ONE(buf, buf ? n : 0), 1);
}

MTP_EXPORT int statfs(const char *path, struct statfs *st)
{
    IDEM(int, REAL(statfs)(path, st), ri_ == 0, ONE(st, sizeof *st), 1);
}

MTP_EXPORT int fstatfs(int fd, struct statfs *st)
{
    IDEM(int, REAL(fstatfs)(fd, st), ri_ == 0, ONE(st, sizeof *st), 1);
}

/* The address's length is read (without faulting: kw.h) only for the run
 * again, after the first one failed with EFAULT. */
#define ADDR_SEGS(addr, len) kw_addr_iov((struct iovec[2]){{0}}, (addr), (len))

MTP_EXPORT int getsockname(int fd, struct sockaddr *restrict addr, socklen_t *restrict len)
{
    IDEM(int, REAL(getsockname)(fd, addr, len), ri_ == 0, ADDR_SEGS(addr, len), 2);
}

MTP_EXPORT int getpeername(int fd, struct sockaddr *restrict addr, socklen_t *restrict len)
{
    IDEM(int, REAL(getpeername)(fd, addr, len), ri_ == 0, ADDR_SEGS(addr, len), 2);
}

/* The pre-2.33 stat entry points (`ver` is the structure's version, which
 * glibc checks). An old binary's reference to __xstat@GLIBC_2.2.5 binds to
 * these unversioned definitions, found first in the preload. Without the
 * compat version (another C library) they fail as an unknown call would. */
#define OLD_STAT(f, call, st)                                                                       \
    do {                                                                                            \
        if (!mtp_r.f)                                                                               \
            mtp_resolve();                                                                          \
        if (!mtp_r.f) {                                                                             \
            errno = ENOSYS;                                                                         \
            return -1;                                                                              \
        }                                                                                           \
        IDEM(int, call, ri_ == 0, ONE(st, sizeof *(st)), 1);                                        \
    } while (0)

MTP_EXPORT int __xstat(int ver, const char *path, struct stat *st);
MTP_EXPORT int __xstat64(int ver, const char *path, struct stat64 *st);
MTP_EXPORT int __lxstat(int ver, const char *path, struct stat *st);
MTP_EXPORT int __lxstat64(int ver, const char *path, struct stat64 *st);
MTP_EXPORT int __fxstat(int ver, int fd, struct stat *st);
MTP_EXPORT int __fxstat64(int ver, int fd, struct stat64 *st);
MTP_EXPORT int __fxstatat(int ver, int dirfd, const char *path, struct stat *st, int flags);
MTP_EXPORT int __fxstatat64(int ver, int dirfd, const char *path, struct stat64 *st, int flags);

MTP_EXPORT int __xstat(int ver, const char *path, struct stat *st)
{
    OLD_STAT(xstat, mtp_r.xstat(ver, path, st), st);
}

MTP_EXPORT int __xstat64(int ver, const char *path, struct stat64 *st)
{
    OLD_STAT(xstat64, mtp_r.xstat64(ver, path, st), st);
}

MTP_EXPORT int __lxstat(int ver, const char *path, struct stat *st)
{
    OLD_STAT(lxstat, mtp_r.lxstat(ver, path, st), st);
}

MTP_EXPORT int __lxstat64(int ver, const char *path, struct stat64 *st)
{
    OLD_STAT(lxstat64, mtp_r.lxstat64(ver, path, st), st);
}

MTP_EXPORT int __fxstat(int ver, int fd, struct stat *st)
{
    OLD_STAT(fxstat, mtp_r.fxstat(ver, fd, st), st);
}

MTP_EXPORT int __fxstat64(int ver, int fd, struct stat64 *st)
{
    OLD_STAT(fxstat64, mtp_r.fxstat64(ver, fd, st), st);
}

MTP_EXPORT int __fxstatat(int ver, int dirfd, const char *path, struct stat *st, int flags)
{
    OLD_STAT(fxstatat, mtp_r.fxstatat(ver, dirfd, path, st, flags), st);
}

MTP_EXPORT int __fxstatat64(int ver, int dirfd, const char *path, struct stat64 *st, int flags)
{
    OLD_STAT(fxstatat64, mtp_r.fxstatat64(ver, dirfd, path, st, flags), st);
}
