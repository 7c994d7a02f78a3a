/* System calls in which the kernel writes user memory.
 *
 * With the signal backend a tracked page is read-only, and the kernel's copy
 * into it fails with EFAULT (no signal is raised for a kernel-mode fault).
 * Each wrapper names every place the kernel will write (data, addresses,
 * control data, the msghdr fields it updates) and brackets the real call
 * with track's kw_begin/kw_end: the tracked pages are writable for the
 * call, no concurrent collect re-arms them meanwhile, and they are reported
 * dirty (track/kwrite.c explains the handshake). The call itself is the
 * application's, unchanged: same buffers, sizes and flags, so results are
 * bit-identical to a run without tracking (short reads, MSG_TRUNC, EFAULT on
 * the application's own read-only pages). A thread cancelled inside the
 * call still ends the bracket (cleanup handler). Async-signal-safe. */
#define _GNU_SOURCE
#include <errno.h>
#include <stdint.h>
#include <sys/random.h>
#include <unistd.h>

#include "kw.h"
#include "preload.h"

/* <stdio.h> may define it as a macro. */
#undef fread_unlocked

MTP_EXPORT ssize_t read(int fd, void *buf, size_t n) { return KW_BUF(buf, n, REAL(read)(fd, buf, n)); }

MTP_EXPORT ssize_t pread(int fd, void *buf, size_t n, off_t off)
{
    return KW_BUF(buf, n, REAL(pread)(fd, buf, n, off));
}

MTP_EXPORT ssize_t pread64(int fd, void *buf, size_t n, off64_t off)
{
    return KW_BUF(buf, n, REAL(pread64)(fd, buf, n, off));
}

MTP_EXPORT ssize_t readv(int fd, const struct iovec *iov, int cnt)
{
    return KW_IOV(iov, cnt, REAL(readv)(fd, iov, cnt));
}

MTP_EXPORT ssize_t preadv(int fd, const struct iovec *iov, int cnt, off_t off)
{
    return KW_IOV(iov, cnt, REAL(preadv)(fd, iov, cnt, off));
}

MTP_EXPORT ssize_t preadv64(int fd, const struct iovec *iov, int cnt, off64_t off)
{
    return KW_IOV(iov, cnt, REAL(preadv64)(fd, iov, cnt, off));
}

MTP_EXPORT ssize_t preadv2(int fd, const struct iovec *iov, int cnt, off_t off, int flags)
{
    if (!REAL(preadv2)) {
        errno = ENOSYS;
        return -1;
    }
    return KW_IOV(iov, cnt, mtp_r.preadv2(fd, iov, cnt, off, flags));
}

MTP_EXPORT ssize_t preadv64v2(int fd, const struct iovec *iov, int cnt, off64_t off, int flags)
{
    if (!REAL(preadv64v2)) {
        errno = ENOSYS;
        return -1;
    }
    return KW_IOV(iov, cnt, mtp_r.preadv64v2(fd, iov, cnt, off, flags));
}

MTP_EXPORT ssize_t recv(int fd, void *buf, size_t n, int flags)
{
    return KW_BUF(buf, n, REAL(recv)(fd, buf, n, flags));
}

/* recvfrom also writes the sender's address and its length. */
static void from_segs(struct iovec seg[3], mt_kw_segs *s, void *buf, size_t n, struct sockaddr *addr,
                      socklen_t *addrlen)
{
    seg[0] = (struct iovec){buf, n};
    seg[1] = (struct iovec){addr, addr && addrlen ? *addrlen : 0};
    seg[2] = (struct iovec){addrlen, addrlen ? sizeof *addrlen : 0};
    *s = (mt_kw_segs){.iov = seg, .niov = 1, .extra = seg + 1, .nextra = 2};
}

MTP_EXPORT ssize_t recvfrom(int fd, void *buf, size_t n, int flags, struct sockaddr *addr,
                            socklen_t *addrlen)
{
    if (!mtp_get_hooks())
        return REAL(recvfrom)(fd, buf, n, flags, addr, addrlen);
    struct iovec seg[3];
    mt_kw_segs s;
    from_segs(seg, &s, buf, n, addr, addrlen);
    return KW_CALL(&s, REAL(recvfrom)(fd, buf, n, flags, addr, addrlen));
}

/* recvmsg writes the data, the address, the control data, and msg_namelen,
 * msg_controllen and msg_flags in the msghdr itself. */
MTP_EXPORT ssize_t recvmsg(int fd, struct msghdr *msg, int flags)
{
    if (!mtp_get_hooks() || !msg)
        return REAL(recvmsg)(fd, msg, flags);
    struct iovec extra[3] = {{msg->msg_name, msg->msg_name ? msg->msg_namelen : 0},
                             {msg->msg_control, msg->msg_control ? msg->msg_controllen : 0},
                             {msg, sizeof *msg}};
    mt_kw_segs s = {.iov = msg->msg_iov, .niov = msg->msg_iov ? msg->msg_iovlen : 0,
                    .extra = extra, .nextra = 3};
    return KW_CALL(&s, REAL(recvmsg)(fd, msg, flags));
}

MTP_EXPORT int recvmmsg(int fd, struct mmsghdr *vec, unsigned int vlen, int flags, struct timespec *timeout)
{
    if (!mtp_get_hooks() || !vec || vlen == 0)
        return REAL(recvmmsg)(fd, vec, vlen, flags, timeout);
    mt_kw_segs s = {.mmsg = vec, .nmmsg = vlen};
    return KW_CALL(&s, REAL(recvmmsg)(fd, vec, vlen, flags, timeout));
}

/* fread: a large request is read(2) by libc straight into the caller's
 * buffer (internally, not through read()); small ones are copied from the
 * stream's buffer in user space (tracked as ordinary writes). */
MTP_EXPORT size_t fread(void *ptr, size_t size, size_t n, FILE *f)
{
    return KW_BUF(ptr, kw_total(size, n), REAL(fread)(ptr, size, n, f));
}

MTP_EXPORT size_t fread_unlocked(void *ptr, size_t size, size_t n, FILE *f)
{
    return KW_BUF(ptr, kw_total(size, n), REAL(fread_unlocked)(ptr, size, n, f));
}

/* _FORTIFY_SOURCE variants: same bracket, and libc's own size check. */
MTP_EXPORT ssize_t __read_chk(int fd, void *buf, size_t n, size_t buflen)
{
    return KW_BUF(buf, n <= buflen ? n : buflen, REAL(__read_chk)(fd, buf, n, buflen));
}

MTP_EXPORT ssize_t __pread_chk(int fd, void *buf, size_t n, off_t off, size_t buflen)
{
    return KW_BUF(buf, n <= buflen ? n : buflen, REAL(__pread_chk)(fd, buf, n, off, buflen));
}

MTP_EXPORT ssize_t __pread64_chk(int fd, void *buf, size_t n, off64_t off, size_t buflen)
{
    return KW_BUF(buf, n <= buflen ? n : buflen, REAL(__pread64_chk)(fd, buf, n, off, buflen));
}

MTP_EXPORT ssize_t __recv_chk(int fd, void *buf, size_t n, size_t buflen, int flags)
{
    return KW_BUF(buf, n <= buflen ? n : buflen, REAL(__recv_chk)(fd, buf, n, buflen, flags));
}

MTP_EXPORT ssize_t __recvfrom_chk(int fd, void *buf, size_t n, size_t buflen, int flags,
                                  struct sockaddr *addr, socklen_t *addrlen)
{
    if (!mtp_get_hooks())
        return REAL(__recvfrom_chk)(fd, buf, n, buflen, flags, addr, addrlen);
    struct iovec seg[3];
    mt_kw_segs s;
    from_segs(seg, &s, buf, n <= buflen ? n : buflen, addr, addrlen);
    return KW_CALL(&s, REAL(__recvfrom_chk)(fd, buf, n, buflen, flags, addr, addrlen));
}

MTP_EXPORT size_t __fread_chk(void *ptr, size_t ptrlen, size_t size, size_t n, FILE *f)
{
    size_t t = kw_total(size, n);
    return KW_BUF(ptr, t <= ptrlen ? t : ptrlen, REAL(__fread_chk)(ptr, ptrlen, size, n, f));
}

MTP_EXPORT size_t __fread_unlocked_chk(void *ptr, size_t ptrlen, size_t size, size_t n, FILE *f)
{
    size_t t = kw_total(size, n);
    return KW_BUF(ptr, t <= ptrlen ? t : ptrlen, REAL(__fread_unlocked_chk)(ptr, ptrlen, size, n, f));
}

MTP_EXPORT ssize_t getrandom(void *buf, size_t n, unsigned flags)
{
    return KW_BUF(buf, n, REAL(getrandom)(buf, n, flags));
}

long mtp_kw_buf_syscall(long nr, const long a[6])
{
    return KW_BUF((void *)a[0], (size_t)a[1], REAL(syscall)(nr, a[0], a[1], a[2]));
}

/* The local buffers of process_vm_readv are written by the kernel. */
MTP_EXPORT ssize_t process_vm_readv(pid_t pid, const struct iovec *local, unsigned long lcnt,
                                    const struct iovec *remote, unsigned long rcnt, unsigned long flags)
{
    return KW_IOV(local, (long)lcnt, REAL(process_vm_readv)(pid, local, lcnt, remote, rcnt, flags));
}

/* Writing to our own process: the "remote" buffers are ours, and the kernel
 * writes them without forcing past protections (EFAULT on armed pages). */
MTP_EXPORT ssize_t process_vm_writev(pid_t pid, const struct iovec *local, unsigned long lcnt,
                                     const struct iovec *remote, unsigned long rcnt, unsigned long flags)
{
    if (!mtp_get_hooks() || pid != getpid())
        return REAL(process_vm_writev)(pid, local, lcnt, remote, rcnt, flags);
    return KW_IOV(remote, (long)rcnt, REAL(process_vm_writev)(pid, local, lcnt, remote, rcnt, flags));
}

/* A System V message: its type (a long) and up to n bytes of text. */
MTP_EXPORT ssize_t msgrcv(int id, void *msg, size_t n, long type, int flags)
{
    size_t len = n > SIZE_MAX - sizeof(long) ? SIZE_MAX : sizeof(long) + n;
    return KW_BUF(msg, len, REAL(msgrcv)(id, msg, n, type, flags));
}

/* A POSIX message and its priority. */
MTP_EXPORT ssize_t mq_receive(mqd_t q, char *msg, size_t n, unsigned *prio)
{
    struct iovec seg[2] = {{msg, n}, {prio, prio ? sizeof *prio : 0}};
    return KW_SEGS(seg, 2, REAL(mq_receive)(q, msg, n, prio));
}

MTP_EXPORT ssize_t mq_timedreceive(mqd_t q, char *restrict msg, size_t n, unsigned *restrict prio,
                                   const struct timespec *restrict t)
{
    struct iovec seg[2] = {{msg, n}, {prio, prio ? sizeof *prio : 0}};
    return KW_SEGS(seg, 2, REAL(mq_timedreceive)(q, msg, n, prio, t));
}
