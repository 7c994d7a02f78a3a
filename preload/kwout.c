/* System calls whose kernel output is small and lands where the application
 * points: descriptors (pipe, pipe2, socketpair), a peer's address (accept,
 * accept4), a socket option (getsockopt), an exit status (the wait family),
 * ready events (poll, select, epoll_wait; the variants with a signal mask
 * are in signals.c), the time left of an interrupted sleep, an ioctl's
 * result, and vmsplice from a pipe.
 *
 * With the signal backend a tracked page is read-only and the kernel's
 * write fails with EFAULT. Each of these calls changes state before it
 * writes (a connection or a child is taken, descriptors are made, a
 * pending socket error is cleared), so unlike idem.c they cannot simply run
 * again after an EFAULT: they are bracketed before the call, like read()
 * (kwrite.c), whenever a tracker is attached. A call that names no tracked
 * memory only pins it (in case it becomes tracked before the call returns);
 * no protection changes. Async-signal-safe (no locks, no allocation). */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <sys/ioctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include "kw.h"
#include "preload.h"

/* An ioctl number that encodes no direction and no size is a legacy one
 * (FIONREAD, TCGETS, TIOCGWINSZ, SIOCGIFADDR ...): whether and how much it
 * writes is known only to its driver. The bracket then covers this much at
 * its argument, more than any of the legacy outputs (struct termios2 44
 * bytes, ifreq 40, serial_struct 72); an argument that is a number, not a
 * pointer, names no tracked memory. */
#define LEGACY_IOCTL_OUT 256

/* The bytes the kernel may write at an ioctl's argument. */
static size_t ioctl_out(unsigned long req)
{
    unsigned dir = _IOC_DIR(req);
    if (dir & _IOC_READ)
        return _IOC_SIZE(req);
    if (dir == _IOC_NONE && _IOC_SIZE(req) == 0)
        return LEGACY_IOCTL_OUT;
    return 0; /* _IOC_WRITE alone: the kernel only reads */
}

/* The structure the argument points to is bracketed; what it points to in
 * turn (a driver's arrays of results behind pointers inside it) is not. */
MTP_EXPORT int ioctl(int fd, unsigned long req, ...)
{
    va_list ap;
    va_start(ap, req);
    void *arg = va_arg(ap, void *);
    va_end(ap);
    return KW_BUF(arg, ioctl_out(req), REAL(ioctl)(fd, req, arg));
}

MTP_EXPORT int pipe(int fds[2]) { return KW_BUF(fds, 2 * sizeof(int), REAL(pipe)(fds)); }

MTP_EXPORT int pipe2(int fds[2], int flags) { return KW_BUF(fds, 2 * sizeof(int), REAL(pipe2)(fds, flags)); }

MTP_EXPORT int socketpair(int domain, int type, int proto, int sv[2])
{
    return KW_BUF(sv, 2 * sizeof(int), REAL(socketpair)(domain, type, proto, sv));
}

static void addr_segs(struct iovec seg[2], mt_kw_segs *s, void *addr, socklen_t *len)
{
    *s = (mt_kw_segs){.iov = kw_addr_iov(seg, addr, len), .niov = 2};
}

MTP_EXPORT int accept(int fd, struct sockaddr *addr, socklen_t *len)
{
    if (!mtp_get_hooks() || !len)
        return REAL(accept)(fd, addr, len);
    struct iovec seg[2];
    mt_kw_segs s;
    addr_segs(seg, &s, addr, len);
    return KW_CALL(&s, REAL(accept)(fd, addr, len));
}

MTP_EXPORT int accept4(int fd, struct sockaddr *addr, socklen_t *len, int flags)
{
    if (!mtp_get_hooks() || !len)
        return REAL(accept4)(fd, addr, len, flags);
    struct iovec seg[2];
    mt_kw_segs s;
    addr_segs(seg, &s, addr, len);
    return KW_CALL(&s, REAL(accept4)(fd, addr, len, flags));
}

/* Not run again after an EFAULT: SO_ERROR clears the error it reports. */
MTP_EXPORT int getsockopt(int fd, int level, int name, void *val, socklen_t *len)
{
    if (!mtp_get_hooks() || !len)
        return REAL(getsockopt)(fd, level, name, val, len);
    struct iovec seg[2];
    mt_kw_segs s;
    addr_segs(seg, &s, val, len);
    return KW_CALL(&s, REAL(getsockopt)(fd, level, name, val, len));
}

MTP_EXPORT pid_t wait(int *status) { return KW_BUF(status, sizeof *status, REAL(wait)(status)); }

MTP_EXPORT pid_t waitpid(pid_t pid, int *status, int options)
{
    return KW_BUF(status, sizeof *status, REAL(waitpid)(pid, status, options));
}

MTP_EXPORT pid_t wait3(int *status, int options, struct rusage *ru)
{
    struct iovec seg[2] = {{status, status ? sizeof *status : 0}, {ru, ru ? sizeof *ru : 0}};
    return KW_SEGS(seg, 2, REAL(wait3)(status, options, ru));
}

MTP_EXPORT pid_t wait4(pid_t pid, int *status, int options, struct rusage *ru)
{
    struct iovec seg[2] = {{status, status ? sizeof *status : 0}, {ru, ru ? sizeof *ru : 0}};
    return KW_SEGS(seg, 2, REAL(wait4)(pid, status, options, ru));
}

MTP_EXPORT int waitid(idtype_t type, id_t id, siginfo_t *info, int options)
{
    return KW_BUF(info, sizeof *info, REAL(waitid)(type, id, info, options));
}

MTP_EXPORT int poll(struct pollfd *fds, nfds_t n, int timeout)
{
    return KW_BUF(fds, kw_total(n, sizeof *fds), REAL(poll)(fds, n, timeout));
}

/* _FORTIFY_SOURCE's poll: libc's own size check, then poll without our
 * wrapper (an internal call): bracketed here. */
MTP_EXPORT int __poll_chk(struct pollfd *fds, nfds_t n, int timeout, size_t fdslen)
{
    return KW_BUF(fds, kw_total(n, sizeof *fds), REAL(__poll_chk)(fds, n, timeout, fdslen));
}

MTP_EXPORT int select(int n, fd_set *r, fd_set *w, fd_set *x, struct timeval *t)
{
    if (!mtp_get_hooks())
        return REAL(select)(n, r, w, x, t);
    struct iovec seg[4];
    mt_kw_segs s;
    kw_select_segs(seg, &s, n, r, w, x, t, t ? sizeof *t : 0);
    return KW_CALL(&s, REAL(select)(n, r, w, x, t));
}

MTP_EXPORT int epoll_wait(int fd, struct epoll_event *ev, int max, int timeout)
{
    return KW_BUF(ev, max > 0 ? kw_total((size_t)max, sizeof *ev) : 0,
                  REAL(epoll_wait)(fd, ev, max, timeout));
}

/* The time left is written when a signal interrupts the sleep. */
MTP_EXPORT int nanosleep(const struct timespec *req, struct timespec *rem)
{
    return KW_BUF(rem, rem ? sizeof *rem : 0, REAL(nanosleep)(req, rem));
}

MTP_EXPORT int clock_nanosleep(clockid_t clk, int flags, const struct timespec *req, struct timespec *rem)
{
    return KW_BUF(rem, rem ? sizeof *rem : 0, REAL(clock_nanosleep)(clk, flags, req, rem));
}

/* vmsplice on a pipe's read end copies the pipe's data into the buffers
 * (on its write end it only reads them: not bracketed, nothing reported). */
MTP_EXPORT ssize_t vmsplice(int fd, const struct iovec *iov, size_t n, unsigned flags)
{
    if (!mtp_get_hooks())
        return REAL(vmsplice)(fd, iov, n, flags);
    int e = errno, fl = fcntl(fd, F_GETFL);
    errno = e;
    if (fl < 0 || (fl & O_ACCMODE) != O_RDONLY)
        return REAL(vmsplice)(fd, iov, n, flags);
    return KW_IOV(iov, (long)n, REAL(vmsplice)(fd, iov, n, flags));
}
