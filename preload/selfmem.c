/* Writes through /proc/self/mem.
 *
 * The kernel writes the target pages with FOLL_FORCE: past read-only
 * protections, without a fault, so neither backend's page-protection
 * machinery sees them reliably. The interposer remembers which descriptors
 * were opened on this process's mem file (open/openat and their fortified
 * forms, dup/dup2/dup3) and brackets a write through one of them like a
 * kernel write (the file offset is the address): writable first, reported
 * after.
 *
 * A remembered descriptor is checked again (same process, same file) before
 * it is trusted, so a number reused after close() (which is not wrapped:
 * libc closes descriptors internally too) is never mistaken for it; a
 * descriptor inherited by a fork child refers to the parent's memory and is
 * not the child's. Reads of /proc/self/mem into tracked memory are ordinary
 * kernel writes (kwrite.c). */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "preload.h"

#define MAX_SELFMEM 64

static struct {
    int fd; /* -1: free */
    pid_t pid;
    dev_t dev;
    ino_t ino;
} g_fds[MAX_SELFMEM];
static _Atomic int g_count; /* entries in use: 0 makes every check one load */
static mtp_lock g_lock;

static int parse_uint(const char **p, long *out)
{
    const char *s = *p;
    long v = 0;
    if (*s < '0' || *s > '9')
        return 0;
    while (*s >= '0' && *s <= '9')
        v = v * 10 + (*s++ - '0');
    *p = s;
    *out = v;
    return 1;
}

/* "/proc/self/mem", "/proc/thread-self/mem", "/proc/PID/mem",
 * "/proc/{self,PID}/task/TID/mem" with PID this process. */
static int is_selfmem_path(const char *path)
{
    if (!path || strncmp(path, "/proc/", 6) != 0)
        return 0;
    const char *p = path + 6;
    if (strcmp(p, "thread-self/mem") == 0)
        return 1;
    if (strncmp(p, "self/", 5) == 0) {
        p += 5;
    } else {
        long pid;
        if (!parse_uint(&p, &pid) || pid != (long)getpid() || *p++ != '/')
            return 0;
    }
    if (strncmp(p, "task/", 5) == 0) {
        long tid;
        p += 5;
        if (!parse_uint(&p, &tid) || *p++ != '/')
            return 0;
    }
    return strcmp(p, "mem") == 0;
}

static void forget_locked(int fd)
{
    for (int i = 0; i < MAX_SELFMEM; i++)
        if (g_fds[i].fd == fd) {
            g_fds[i].fd = -1;
            atomic_fetch_sub_explicit(&g_count, 1, memory_order_relaxed);
        }
}

static void remember_locked(int fd, pid_t pid, dev_t dev, ino_t ino)
{
    forget_locked(fd);
    for (int i = 0; i < MAX_SELFMEM; i++)
        if (g_fds[i].fd < 0 || atomic_load_explicit(&g_count, memory_order_relaxed) == 0) {
            g_fds[i].fd = fd;
            g_fds[i].pid = pid;
            g_fds[i].dev = dev;
            g_fds[i].ino = ino;
            atomic_fetch_add_explicit(&g_count, 1, memory_order_relaxed);
            return;
        }
}

__attribute__((constructor)) static void init_table(void)
{
    for (int i = 0; i < MAX_SELFMEM; i++)
        g_fds[i].fd = -1;
}

/* After a successful open of `path` as fd. */
static void note_open(int fd, const char *path)
{
    int mine = is_selfmem_path(path);
    if (!mine && atomic_load_explicit(&g_count, memory_order_relaxed) == 0)
        return;
    struct stat st;
    if (mine && fstat(fd, &st) != 0)
        mine = 0;
    mtp_lock_take(&g_lock);
    if (mine)
        remember_locked(fd, getpid(), st.st_dev, st.st_ino);
    else
        forget_locked(fd);
    mtp_lock_drop(&g_lock);
}

static void note_dup(int oldfd, int newfd)
{
    if (newfd < 0 || atomic_load_explicit(&g_count, memory_order_relaxed) == 0)
        return;
    mtp_lock_take(&g_lock);
    int k = -1;
    for (int i = 0; i < MAX_SELFMEM; i++)
        if (g_fds[i].fd == oldfd)
            k = i;
    if (k >= 0)
        remember_locked(newfd, g_fds[k].pid, g_fds[k].dev, g_fds[k].ino);
    else
        forget_locked(newfd);
    mtp_lock_drop(&g_lock);
}

/* 1 when a write through fd writes this process's memory. Async-signal-safe. */
static int selfmem(int fd)
{
    if (atomic_load_explicit(&g_count, memory_order_relaxed) == 0 || !mtp_get_hooks())
        return 0;
    int found = 0;
    pid_t pid = 0;
    dev_t dev = 0;
    ino_t ino = 0;
    mtp_lock_take(&g_lock);
    for (int i = 0; i < MAX_SELFMEM; i++)
        if (g_fds[i].fd == fd) {
            found = 1;
            pid = g_fds[i].pid;
            dev = g_fds[i].dev;
            ino = g_fds[i].ino;
        }
    mtp_lock_drop(&g_lock);
    struct stat st;
    return found && pid == getpid() && fstat(fd, &st) == 0 && st.st_dev == dev && st.st_ino == ino;
}

static void report(off_t addr, ssize_t n)
{
    const mt_preload_hooks *h = mtp_get_hooks();
    if (h && n > 0 && addr >= 0)
        h->written((uintptr_t)addr, (size_t)n);
}

/* ---- open ------------------------------------------------------------------- */

#define OPEN_MODE(flags)                                                                        \
    mode_t mode = 0;                                                                            \
    if (__OPEN_NEEDS_MODE(flags)) {                                                             \
        va_list ap;                                                                             \
        va_start(ap, flags);                                                                    \
        mode = va_arg(ap, mode_t);                                                              \
        va_end(ap);                                                                             \
    }

#define NOTED(fd, path)                                                                         \
    ({                                                                                          \
        int fd_ = (fd);                                                                         \
        if (fd_ >= 0) {                                                                         \
            int e_ = errno;                                                                     \
            note_open(fd_, path);                                                               \
            errno = e_;                                                                         \
        }                                                                                       \
        fd_;                                                                                    \
    })

MTP_EXPORT int open(const char *path, int flags, ...)
{
    OPEN_MODE(flags);
    return NOTED(REAL(open)(path, flags, mode), path);
}

MTP_EXPORT int open64(const char *path, int flags, ...)
{
    OPEN_MODE(flags);
    return NOTED(REAL(open64)(path, flags, mode), path);
}

MTP_EXPORT int openat(int dirfd, const char *path, int flags, ...)
{
    OPEN_MODE(flags);
    return NOTED(REAL(openat)(dirfd, path, flags, mode), path);
}

MTP_EXPORT int openat64(int dirfd, const char *path, int flags, ...)
{
    OPEN_MODE(flags);
    return NOTED(REAL(openat64)(dirfd, path, flags, mode), path);
}

MTP_EXPORT int __open_2(const char *path, int flags) { return NOTED(REAL(__open_2)(path, flags), path); }

MTP_EXPORT int __open64_2(const char *path, int flags)
{
    return NOTED(REAL(__open64_2)(path, flags), path);
}

MTP_EXPORT int __openat_2(int dirfd, const char *path, int flags)
{
    return NOTED(REAL(__openat_2)(dirfd, path, flags), path);
}

MTP_EXPORT int __openat64_2(int dirfd, const char *path, int flags)
{
    return NOTED(REAL(__openat64_2)(dirfd, path, flags), path);
}

MTP_EXPORT int dup(int fd)
{
    int r = REAL(dup)(fd);
    int e = errno;
    note_dup(fd, r);
    errno = e;
    return r;
}

MTP_EXPORT int dup2(int fd, int fd2)
{
    int r = REAL(dup2)(fd, fd2);
    int e = errno;
    if (r >= 0 && r != fd)
        note_dup(fd, r);
    errno = e;
    return r;
}

MTP_EXPORT int dup3(int fd, int fd2, int flags)
{
    int r = REAL(dup3)(fd, fd2, flags);
    int e = errno;
    note_dup(fd, r);
    errno = e;
    return r;
}

/* ---- write ------------------------------------------------------------------ */

/* The file offset before a write(2) without one: the address written. */
static off_t position(int fd) { return lseek(fd, 0, SEEK_CUR); }

/* Bytes a vector write writes at most (saturating). */
static size_t iov_total(const struct iovec *iov, int cnt)
{
    size_t n = 0;
    for (int i = 0; i < cnt; i++)
        n = iov[i].iov_len > SIZE_MAX - n ? SIZE_MAX : n + iov[i].iov_len;
    return n;
}

/* A write through the mem file, bracketed like a kernel write: the tracked
 * target pages are made writable (and kept so) first, so that the kernel
 * writes through an ordinary writable mapping. Writing a page memtrack
 * protected would take the kernel's forced-write path instead, which some
 * drivers' mappings do not implement exactly (measured on NVIDIA's: the
 * bytes landed at the page's start). Afterwards the pages are reported. */
#define SELFMEM_WRITE(fd, off_expr, len_expr, call)                                             \
    ({                                                                                          \
        __typeof__(call) r_;                                                                    \
        if (!selfmem(fd)) {                                                                     \
            r_ = (call);                                                                        \
        } else {                                                                                \
            off_t at_ = (off_expr);                                                             \
            const mt_preload_hooks *h_ = mtp_get_hooks();                                       \
            struct iovec target_ = {(void *)(uintptr_t)at_, (len_expr)};                        \
            mt_kw_segs segs_ = {.iov = &target_, .niov = 1};                                    \
            int tok_ = h_ && at_ >= 0 && target_.iov_len ? h_->kw_begin(&segs_) : -1;           \
            r_ = (call);                                                                        \
            int e_ = errno;                                                                     \
            if (tok_ >= 0)                                                                      \
                h_->kw_end(tok_, &segs_);                                                       \
            report(at_, (ssize_t)r_);                                                           \
            errno = e_;                                                                         \
        }                                                                                       \
        r_;                                                                                     \
    })

MTP_EXPORT ssize_t write(int fd, const void *buf, size_t n)
{
    return SELFMEM_WRITE(fd, position(fd), n, REAL(write)(fd, buf, n));
}

MTP_EXPORT ssize_t pwrite(int fd, const void *buf, size_t n, off_t off)
{
    return SELFMEM_WRITE(fd, off, n, REAL(pwrite)(fd, buf, n, off));
}

MTP_EXPORT ssize_t pwrite64(int fd, const void *buf, size_t n, off64_t off)
{
    return SELFMEM_WRITE(fd, (off_t)off, n, REAL(pwrite64)(fd, buf, n, off));
}

MTP_EXPORT ssize_t writev(int fd, const struct iovec *iov, int cnt)
{
    return SELFMEM_WRITE(fd, position(fd), iov_total(iov, cnt), REAL(writev)(fd, iov, cnt));
}

MTP_EXPORT ssize_t pwritev(int fd, const struct iovec *iov, int cnt, off_t off)
{
    return SELFMEM_WRITE(fd, off, iov_total(iov, cnt), REAL(pwritev)(fd, iov, cnt, off));
}

MTP_EXPORT ssize_t pwritev64(int fd, const struct iovec *iov, int cnt, off64_t off)
{
    return SELFMEM_WRITE(fd, (off_t)off, iov_total(iov, cnt), REAL(pwritev64)(fd, iov, cnt, off));
}

MTP_EXPORT ssize_t pwritev2(int fd, const struct iovec *iov, int cnt, off_t off, int flags)
{
    if (!REAL(pwritev2)) {
        errno = ENOSYS;
        return -1;
    }
    return SELFMEM_WRITE(fd, off == -1 ? position(fd) : off, iov_total(iov, cnt),
                         mtp_r.pwritev2(fd, iov, cnt, off, flags));
}

MTP_EXPORT ssize_t pwritev64v2(int fd, const struct iovec *iov, int cnt, off64_t off, int flags)
{
    if (!REAL(pwritev64v2)) {
        errno = ENOSYS;
        return -1;
    }
    return SELFMEM_WRITE(fd, off == -1 ? position(fd) : (off_t)off, iov_total(iov, cnt),
                         mtp_r.pwritev64v2(fd, iov, cnt, off, flags));
}
