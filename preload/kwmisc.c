/* Less common system calls whose kernel output lands where the application
 * points: a waited-for signal's information, directory entries, extended
 * attributes, a CPU set, timers' current and previous settings, resource
 * limits, residency vectors, an eventfd's counter read by libc itself,
 * getentropy's bytes, the previous alternate signal stack, the real,
 * effective and saved ids and the supplementary groups, prctl's outputs
 * (a thread's name, the parent-death signal, ...), a terminal's name
 * (ttyname_r: glibc reads the link straight into the caller's buffer), the
 * file offsets that splice, sendfile and copy_file_range advance, and libc's
 * syscall() for the reading system calls (read, pread64, readv, preadv,
 * getdents64).
 *
 * Bracketed before the call, like kwout.c's: several change state (a
 * waited-for signal is consumed, a directory offset advances, a timer is
 * re-set) and the rest are rare enough that a bracket costs nothing anyone
 * sees. With the signal backend each failed with EFAULT when its output was
 * in a tracked page. libc functions that fill the application's buffer by
 * copying in user space (sigwait, readdir, gethostname, realpath ...) fault
 * like any other write and need nothing. Async-signal-safe. */
#define _GNU_SOURCE
#include <errno.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/sendfile.h>
#include <sys/random.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <sys/timerfd.h>
#include <sys/xattr.h>
#include <time.h>
#include <unistd.h>

#include "kw.h"
#include "preload.h"

MTP_EXPORT int sigtimedwait(const sigset_t *set, siginfo_t *info, const struct timespec *t)
{
    return KW_BUF(info, info ? sizeof *info : 0, REAL(sigtimedwait)(set, info, t));
}

MTP_EXPORT int sigwaitinfo(const sigset_t *set, siginfo_t *info)
{
    return KW_BUF(info, info ? sizeof *info : 0, REAL(sigwaitinfo)(set, info));
}

MTP_EXPORT ssize_t getdents64(int fd, void *buf, size_t n)
{
    return KW_BUF(buf, n, REAL(getdents64)(fd, buf, n));
}

MTP_EXPORT ssize_t getxattr(const char *path, const char *name, void *value, size_t n)
{
    return KW_BUF(value, value ? n : 0, REAL(getxattr)(path, name, value, n));
}

MTP_EXPORT ssize_t lgetxattr(const char *path, const char *name, void *value, size_t n)
{
    return KW_BUF(value, value ? n : 0, REAL(lgetxattr)(path, name, value, n));
}

MTP_EXPORT ssize_t fgetxattr(int fd, const char *name, void *value, size_t n)
{
    return KW_BUF(value, value ? n : 0, REAL(fgetxattr)(fd, name, value, n));
}

MTP_EXPORT ssize_t listxattr(const char *path, char *list, size_t n)
{
    return KW_BUF(list, list ? n : 0, REAL(listxattr)(path, list, n));
}

MTP_EXPORT ssize_t llistxattr(const char *path, char *list, size_t n)
{
    return KW_BUF(list, list ? n : 0, REAL(llistxattr)(path, list, n));
}

MTP_EXPORT ssize_t flistxattr(int fd, char *list, size_t n)
{
    return KW_BUF(list, list ? n : 0, REAL(flistxattr)(fd, list, n));
}

MTP_EXPORT int sched_getaffinity(pid_t pid, size_t n, cpu_set_t *set)
{
    return KW_BUF(set, set ? n : 0, REAL(sched_getaffinity)(pid, n, set));
}

MTP_EXPORT int sched_getparam(pid_t pid, struct sched_param *p)
{
    return KW_BUF(p, p ? sizeof *p : 0, REAL(sched_getparam)(pid, p));
}

MTP_EXPORT int sched_rr_get_interval(pid_t pid, struct timespec *t)
{
    return KW_BUF(t, t ? sizeof *t : 0, REAL(sched_rr_get_interval)(pid, t));
}

MTP_EXPORT int timer_gettime(timer_t id, struct itimerspec *cur)
{
    return KW_BUF(cur, cur ? sizeof *cur : 0, REAL(timer_gettime)(id, cur));
}

MTP_EXPORT int timer_settime(timer_t id, int flags, const struct itimerspec *v, struct itimerspec *old)
{
    return KW_BUF(old, old ? sizeof *old : 0, REAL(timer_settime)(id, flags, v, old));
}

MTP_EXPORT int timerfd_gettime(int fd, struct itimerspec *cur)
{
    return KW_BUF(cur, cur ? sizeof *cur : 0, REAL(timerfd_gettime)(fd, cur));
}

MTP_EXPORT int timerfd_settime(int fd, int flags, const struct itimerspec *v, struct itimerspec *old)
{
    return KW_BUF(old, old ? sizeof *old : 0, REAL(timerfd_settime)(fd, flags, v, old));
}

MTP_EXPORT int getitimer(__itimer_which_t which, struct itimerval *cur)
{
    return KW_BUF(cur, cur ? sizeof *cur : 0, REAL(getitimer)(which, cur));
}

MTP_EXPORT int setitimer(__itimer_which_t which, const struct itimerval *v, struct itimerval *old)
{
    return KW_BUF(old, old ? sizeof *old : 0, REAL(setitimer)(which, v, old));
}

MTP_EXPORT int getrlimit(__rlimit_resource_t r, struct rlimit *l)
{
    return KW_BUF(l, sizeof *l, REAL(getrlimit)(r, l)); /* nonnull in libc's prototype */
}

MTP_EXPORT int getrlimit64(__rlimit_resource_t r, struct rlimit64 *l)
{
    return KW_BUF(l, sizeof *l, REAL(getrlimit64)(r, l));
}

MTP_EXPORT int prlimit(pid_t pid, __rlimit_resource_t r, const struct rlimit *v, struct rlimit *old)
{
    return KW_BUF(old, old ? sizeof *old : 0, REAL(prlimit)(pid, r, v, old));
}

MTP_EXPORT int prlimit64(pid_t pid, __rlimit_resource_t r, const struct rlimit64 *v, struct rlimit64 *old)
{
    return KW_BUF(old, old ? sizeof *old : 0, REAL(prlimit64)(pid, r, v, old));
}

/* One byte per page of [addr, addr+len). */
MTP_EXPORT int mincore(void *addr, size_t len, unsigned char *vec)
{
    size_t ps = (size_t)sysconf(_SC_PAGESIZE), n = len / ps + (len % ps != 0);
    return KW_BUF(vec, vec ? n : 0, REAL(mincore)(addr, len, vec));
}

/* libc reads the counter with its internal read(). */
MTP_EXPORT int eventfd_read(int fd, eventfd_t *value)
{
    return KW_BUF(value, value ? sizeof *value : 0, REAL(eventfd_read)(fd, value));
}

/* libc calls getrandom internally. */
MTP_EXPORT int getentropy(void *buf, size_t n) { return KW_BUF(buf, n, REAL(getentropy)(buf, n)); }

MTP_EXPORT int sigaltstack(const stack_t *ss, stack_t *old)
{
    return KW_BUF(old, old ? sizeof *old : 0, REAL(sigaltstack)(ss, old));
}

MTP_EXPORT int getresuid(uid_t *r, uid_t *e, uid_t *s)
{
    struct iovec seg[3] = {{r, sizeof *r}, {e, sizeof *e}, {s, sizeof *s}};
    return KW_SEGS(seg, 3, REAL(getresuid)(r, e, s));
}

MTP_EXPORT int getresgid(gid_t *r, gid_t *e, gid_t *s)
{
    struct iovec seg[3] = {{r, sizeof *r}, {e, sizeof *e}, {s, sizeof *s}};
    return KW_SEGS(seg, 3, REAL(getresgid)(r, e, s));
}

/* n 0 asks for the count and writes nothing. */
MTP_EXPORT int getgroups(int n, gid_t *list)
{
    return KW_BUF(list, n > 0 && list ? (size_t)n * sizeof *list : 0, REAL(getgroups)(n, list));
}

/* The prctl options whose second argument points at an output: a name of
 * 16 bytes, a tid address (a pointer), or an int. Every other option
 * writes nothing there (or passes a value). */
static size_t prctl_out(int option)
{
    switch (option) {
    case PR_GET_NAME:
        return 16;
    case PR_GET_TID_ADDRESS:
        return sizeof(int *);
    case PR_GET_PDEATHSIG:
    case PR_GET_CHILD_SUBREAPER:
    case PR_GET_ENDIAN:
    case PR_GET_FPEMU:
    case PR_GET_FPEXC:
    case PR_GET_TSC:
    case PR_GET_UNALIGN:
        return sizeof(int);
    default:
        return 0;
    }
}

MTP_EXPORT int prctl(int option, ...)
{
    va_list ap;
    va_start(ap, option);
    unsigned long a2 = va_arg(ap, unsigned long), a3 = va_arg(ap, unsigned long);
    unsigned long a4 = va_arg(ap, unsigned long), a5 = va_arg(ap, unsigned long);
    va_end(ap);
    return KW_BUF((void *)a2, a2 ? prctl_out(option) : 0, REAL(prctl)(option, a2, a3, a4, a5));
}

MTP_EXPORT int ttyname_r(int fd, char *buf, size_t n)
{
    return KW_BUF(buf, n, REAL(ttyname_r)(fd, buf, n)); /* nonnull in libc's prototype */
}

/* The kernel reads the offsets and writes them back advanced. */
MTP_EXPORT ssize_t splice(int in, loff_t *off_in, int out, loff_t *off_out, size_t len, unsigned int fl)
{
    struct iovec seg[2] = {{off_in, off_in ? sizeof *off_in : 0}, {off_out, off_out ? sizeof *off_out : 0}};
    return KW_SEGS(seg, 2, REAL(splice)(in, off_in, out, off_out, len, fl));
}

MTP_EXPORT ssize_t copy_file_range(int in, loff_t *off_in, int out, loff_t *off_out, size_t len,
                                   unsigned int fl)
{
    struct iovec seg[2] = {{off_in, off_in ? sizeof *off_in : 0}, {off_out, off_out ? sizeof *off_out : 0}};
    return KW_SEGS(seg, 2, REAL(copy_file_range)(in, off_in, out, off_out, len, fl));
}

MTP_EXPORT ssize_t sendfile(int out, int in, off_t *off, size_t n)
{
    return KW_BUF(off, off ? sizeof *off : 0, REAL(sendfile)(out, in, off, n));
}

MTP_EXPORT ssize_t sendfile64(int out, int in, off64_t *off, size_t n)
{
    return KW_BUF(off, off ? sizeof *off : 0, REAL(sendfile64)(out, in, off, n));
}

/* syscall() for the reading system calls: a buffer (read, pread64,
 * getdents64) or an iovec array (readv, preadv, preadv2). */
long mtp_kw_read_syscall(long nr, const long a[6])
{
    long (*real)(long, ...) = REAL(syscall);
    if (nr == SYS_readv || nr == SYS_preadv || nr == SYS_preadv2)
        return KW_IOV((const struct iovec *)a[1], (int)a[2], real(nr, a[0], a[1], a[2], a[3], a[4], a[5]));
    return KW_BUF((void *)a[1], (size_t)a[2], real(nr, a[0], a[1], a[2], a[3], a[4], a[5]));
}
