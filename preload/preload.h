/* libmemtrack_preload.so internals: the real functions, the hooks track
 * attached, and the per-thread virtual signal mask. */
#ifndef MTP_PRELOAD_H
#define MTP_PRELOAD_H

#include <aio.h>
#include <dirent.h>
#include <sched.h>
#include <stdint.h>
#include <mqueue.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <sys/epoll.h>
#include <sys/mman.h>
#include <sys/msg.h>
#include <sys/resource.h>
#include <sys/select.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/wait.h>
#include <sys/sysinfo.h>
#include <sys/time.h>
#include <sys/times.h>
#include <sys/utsname.h>
#include <time.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <sys/uio.h>
#include <poll.h>

#include "preload_abi.h"

/* Wrappers are the only symbols this library exports (with the entry point). */
#define MTP_EXPORT __attribute__((visibility("default")))

/* glibc's fortified and internal entry points, not declared without
 * _FORTIFY_SOURCE. */
ssize_t __read_chk(int fd, void *buf, size_t nbytes, size_t buflen);
ssize_t __pread_chk(int fd, void *buf, size_t nbytes, off_t offset, size_t buflen);
ssize_t __pread64_chk(int fd, void *buf, size_t nbytes, off64_t offset, size_t buflen);
ssize_t __recv_chk(int fd, void *buf, size_t n, size_t buflen, int flags);
int __poll_chk(struct pollfd *fds, nfds_t n, int timeout, size_t fdslen);
int __ppoll_chk(struct pollfd *fds, nfds_t n, const struct timespec *t, const sigset_t *mask, size_t fdslen);
ssize_t __readlink_chk(const char *path, char *buf, size_t n, size_t buflen);
ssize_t __readlinkat_chk(int dirfd, const char *path, char *buf, size_t n, size_t buflen);
char *__getcwd_chk(char *buf, size_t n, size_t buflen);
ssize_t __recvfrom_chk(int fd, void *buf, size_t n, size_t buflen, int flags, struct sockaddr *addr,
                       socklen_t *addr_len);
size_t __fread_chk(void *ptr, size_t ptrlen, size_t size, size_t n, FILE *stream);
size_t __fread_unlocked_chk(void *ptr, size_t ptrlen, size_t size, size_t n, FILE *stream);
void __longjmp_chk(struct __jmp_buf_tag env[1], int val) __attribute__((noreturn));
int __open_2(const char *path, int flags);
int __open64_2(const char *path, int flags);
int __openat_2(int fd, const char *path, int flags);
int __openat64_2(int fd, const char *path, int flags);
int __sigpause(int sig_or_mask, int is_sig);
int __xpg_sigpause(int sig);
__sighandler_t __sysv_signal(int sig, __sighandler_t handler);
__sighandler_t bsd_signal(int sig, __sighandler_t handler);
/* liburing's and libaio's set-up functions (async.c), their structs as
 * pointers: the wrappers only pass them on. */
int io_uring_setup(unsigned entries, void *params);
int io_uring_queue_init(unsigned entries, void *ring, unsigned flags);
int io_uring_register(unsigned fd, unsigned opcode, const void *arg, unsigned nr);
int io_uring_register_buffers(void *ring, const void *iov, unsigned nr);
int io_uring_register_buffers_tags(void *ring, const void *iov, const void *tags, unsigned nr);
int io_uring_register_buffers_update_tag(void *ring, unsigned off, const void *iov, const void *tags,
                                         unsigned nr);
int io_uring_register_buffers_sparse(void *ring, unsigned nr);
int io_uring_queue_init_params(unsigned entries, void *ring, void *params);
int io_uring_queue_init_mem(unsigned entries, void *ring, void *params, void *buf, size_t size);
int io_setup(int maxevents, void *ctxp);
int io_queue_init(int maxevents, void *ctxp);
int epoll_pwait2(int epfd, struct epoll_event *events, int maxevents, const struct timespec *timeout,
                 const sigset_t *sigmask);

/* The next definition of every wrapped function (a sanitizer's interceptor
 * or libc), resolved with dlsym(RTLD_NEXT) in the constructor, or on first
 * use when a wrapper runs before it. NULL when libc lacks the function. */
typedef struct mtp_real {
    /* signals */
    int (*sigaction)(int, const struct sigaction *, struct sigaction *);
    int (*sigprocmask)(int, const sigset_t *, sigset_t *);
    int (*pthread_sigmask)(int, const sigset_t *, sigset_t *);
    int (*sigsuspend)(const sigset_t *);
    int (*sigpending)(sigset_t *);
    int (*pselect)(int, fd_set *, fd_set *, fd_set *, const struct timespec *, const sigset_t *);
    int (*ppoll)(struct pollfd *, nfds_t, const struct timespec *, const sigset_t *);
    int (*epoll_pwait)(int, struct epoll_event *, int, int, const sigset_t *);
    int (*epoll_pwait2)(int, struct epoll_event *, int, const struct timespec *, const sigset_t *);
    int (*pthread_create)(pthread_t *, const pthread_attr_t *, void *(*)(void *), void *);
    /* process ends */
    int (*execve)(const char *, char *const[], char *const[]);
    int (*execv)(const char *, char *const[]);
    int (*execvp)(const char *, char *const[]);
    int (*execvpe)(const char *, char *const[], char *const[]);
    int (*fexecve)(int, char *const[], char *const[]);
    void (*_exit)(int);
    void (*_Exit)(int);
    void (*siglongjmp)(sigjmp_buf, int);
    void (*longjmp)(jmp_buf, int);
    void (*_longjmp)(jmp_buf, int);
    void (*__longjmp_chk)(struct __jmp_buf_tag *, int);
    /* kernel writes */
    ssize_t (*read)(int, void *, size_t);
    ssize_t (*pread)(int, void *, size_t, off_t);
    ssize_t (*pread64)(int, void *, size_t, off64_t);
    ssize_t (*readv)(int, const struct iovec *, int);
    ssize_t (*preadv)(int, const struct iovec *, int, off_t);
    ssize_t (*preadv64)(int, const struct iovec *, int, off64_t);
    ssize_t (*preadv2)(int, const struct iovec *, int, off_t, int);
    ssize_t (*preadv64v2)(int, const struct iovec *, int, off64_t, int);
    ssize_t (*recv)(int, void *, size_t, int);
    ssize_t (*recvfrom)(int, void *, size_t, int, struct sockaddr *, socklen_t *);
    ssize_t (*recvmsg)(int, struct msghdr *, int);
    int (*recvmmsg)(int, struct mmsghdr *, unsigned int, int, struct timespec *);
    size_t (*fread)(void *, size_t, size_t, FILE *);
    size_t (*fread_unlocked)(void *, size_t, size_t, FILE *);
    ssize_t (*__read_chk)(int, void *, size_t, size_t);
    ssize_t (*__pread_chk)(int, void *, size_t, off_t, size_t);
    ssize_t (*__pread64_chk)(int, void *, size_t, off64_t, size_t);
    ssize_t (*__recv_chk)(int, void *, size_t, size_t, int);
    ssize_t (*__recvfrom_chk)(int, void *, size_t, size_t, int, struct sockaddr *, socklen_t *);
    size_t (*__fread_chk)(void *, size_t, size_t, size_t, FILE *);
    size_t (*__fread_unlocked_chk)(void *, size_t, size_t, size_t, FILE *);
    ssize_t (*process_vm_readv)(pid_t, const struct iovec *, unsigned long, const struct iovec *,
                                unsigned long, unsigned long);
    ssize_t (*process_vm_writev)(pid_t, const struct iovec *, unsigned long, const struct iovec *,
                                 unsigned long, unsigned long);
    ssize_t (*getrandom)(void *, size_t, unsigned);
    long (*syscall)(long, ...);
    int (*msgrcv)(int, void *, size_t, long, int);
    ssize_t (*mq_receive)(mqd_t, char *, size_t, unsigned *);
    ssize_t (*mq_timedreceive)(mqd_t, char *, size_t, unsigned *, const struct timespec *);
    /* less common kernel outputs (kwmisc.c) */
    int (*sigtimedwait)(const sigset_t *, siginfo_t *, const struct timespec *);
    int (*sigwaitinfo)(const sigset_t *, siginfo_t *);
    ssize_t (*getdents64)(int, void *, size_t);
    ssize_t (*getxattr)(const char *, const char *, void *, size_t);
    ssize_t (*lgetxattr)(const char *, const char *, void *, size_t);
    ssize_t (*fgetxattr)(int, const char *, void *, size_t);
    ssize_t (*listxattr)(const char *, char *, size_t);
    ssize_t (*llistxattr)(const char *, char *, size_t);
    ssize_t (*flistxattr)(int, char *, size_t);
    int (*sched_getaffinity)(pid_t, size_t, cpu_set_t *);
    int (*sched_getparam)(pid_t, struct sched_param *);
    int (*sched_rr_get_interval)(pid_t, struct timespec *);
    int (*timer_gettime)(timer_t, struct itimerspec *);
    int (*timer_settime)(timer_t, int, const struct itimerspec *, struct itimerspec *);
    int (*timerfd_gettime)(int, struct itimerspec *);
    int (*timerfd_settime)(int, int, const struct itimerspec *, struct itimerspec *);
    int (*getitimer)(__itimer_which_t, struct itimerval *);
    int (*setitimer)(__itimer_which_t, const struct itimerval *, struct itimerval *);
    int (*getrlimit)(__rlimit_resource_t, struct rlimit *);
    int (*getrlimit64)(__rlimit_resource_t, struct rlimit64 *);
    int (*prlimit)(pid_t, __rlimit_resource_t, const struct rlimit *, struct rlimit *);
    int (*prlimit64)(pid_t, __rlimit_resource_t, const struct rlimit64 *, struct rlimit64 *);
    int (*mincore)(void *, size_t, unsigned char *);
    int (*eventfd_read)(int, uint64_t *);
    int (*getentropy)(void *, size_t);
    int (*sigaltstack)(const stack_t *, stack_t *);
    int (*getresuid)(uid_t *, uid_t *, uid_t *);
    int (*getresgid)(gid_t *, gid_t *, gid_t *);
    int (*getgroups)(int, gid_t *);
    int (*prctl)(int, ...);
    int (*ttyname_r)(int, char *, size_t);
    ssize_t (*splice)(int, loff_t *, int, loff_t *, size_t, unsigned int);
    ssize_t (*sendfile)(int, int, off_t *, size_t);
    ssize_t (*sendfile64)(int, int, off64_t *, size_t);
    ssize_t (*copy_file_range)(int, loff_t *, int, loff_t *, size_t, unsigned int);
    int (*timer_create)(clockid_t, struct sigevent *, timer_t *); /* timers.c */
    /* POSIX AIO (aio.c) */
    int (*aio_read)(struct aiocb *);
    int (*aio_read64)(struct aiocb *); /* the *64 ones: same layout on LP64 (aio.c) */
    int (*lio_listio)(int, struct aiocb *const[], int, struct sigevent *);
    int (*lio_listio64)(int, struct aiocb *const[], int, struct sigevent *);
    int (*aio_error)(const struct aiocb *);
    int (*aio_error64)(const struct aiocb *);
    ssize_t (*aio_return)(struct aiocb *);
    ssize_t (*aio_return64)(struct aiocb *);
    int (*aio_suspend)(const struct aiocb *const[], int, const struct timespec *);
    int (*aio_suspend64)(const struct aiocb *const[], int, const struct timespec *);
    int (*aio_cancel)(int, struct aiocb *);
    int (*aio_cancel64)(int, struct aiocb *);
    /* small outputs of calls that change state (kwout.c) */
    int (*ioctl)(int, unsigned long, ...);
    int (*pipe)(int[2]);
    int (*pipe2)(int[2], int);
    int (*socketpair)(int, int, int, int[2]);
    int (*accept)(int, struct sockaddr *, socklen_t *);
    int (*accept4)(int, struct sockaddr *, socklen_t *, int);
    int (*getsockopt)(int, int, int, void *, socklen_t *);
    pid_t (*wait)(int *);
    pid_t (*waitpid)(pid_t, int *, int);
    pid_t (*wait3)(int *, int, struct rusage *);
    pid_t (*wait4)(pid_t, int *, int, struct rusage *);
    int (*waitid)(idtype_t, id_t, siginfo_t *, int);
    int (*poll)(struct pollfd *, nfds_t, int);
    int (*__poll_chk)(struct pollfd *, nfds_t, int, size_t);
    int (*__ppoll_chk)(struct pollfd *, nfds_t, const struct timespec *, const sigset_t *, size_t);
    int (*select)(int, fd_set *, fd_set *, fd_set *, struct timeval *);
    int (*epoll_wait)(int, struct epoll_event *, int, int);
    int (*nanosleep)(const struct timespec *, struct timespec *);
    int (*clock_nanosleep)(clockid_t, int, const struct timespec *, struct timespec *);
    ssize_t (*vmsplice)(int, const struct iovec *, size_t, unsigned);
    /* idempotent reports (idem.c) */
    int (*clock_gettime)(clockid_t, struct timespec *);
    int (*clock_getres)(clockid_t, struct timespec *);
    int (*gettimeofday)(struct timeval *, void *);
    int (*getrusage)(int, struct rusage *);
    clock_t (*times)(struct tms *);
    int (*sysinfo)(struct sysinfo *);
    int (*uname)(struct utsname *);
    int (*stat)(const char *, struct stat *);
    int (*lstat)(const char *, struct stat *);
    int (*fstat)(int, struct stat *);
    int (*fstatat)(int, const char *, struct stat *, int);
    int (*stat64)(const char *, struct stat64 *);
    int (*lstat64)(const char *, struct stat64 *);
    int (*fstat64)(int, struct stat64 *);
    int (*fstatat64)(int, const char *, struct stat64 *, int);
    int (*statx)(int, const char *, int, unsigned, struct statx *);
    /* the pre-2.33 glibc entry points old binaries call (idem.c): glibc
     * keeps them as compat versions only, found with dlvsym */
    int (*xstat)(int, const char *, struct stat *);
    int (*xstat64)(int, const char *, struct stat64 *);
    int (*lxstat)(int, const char *, struct stat *);
    int (*lxstat64)(int, const char *, struct stat64 *);
    int (*fxstat)(int, int, struct stat *);
    int (*fxstat64)(int, int, struct stat64 *);
    int (*fxstatat)(int, int, const char *, struct stat *, int);
    int (*fxstatat64)(int, int, const char *, struct stat64 *, int);
    ssize_t (*readlink)(const char *, char *, size_t);
    ssize_t (*readlinkat)(int, const char *, char *, size_t);
    char *(*getcwd)(char *, size_t);
    ssize_t (*__readlink_chk)(const char *, char *, size_t, size_t);
    ssize_t (*__readlinkat_chk)(int, const char *, char *, size_t, size_t);
    char *(*__getcwd_chk)(char *, size_t, size_t);
    int (*statfs)(const char *, struct statfs *);
    int (*fstatfs)(int, struct statfs *);
    int (*getsockname)(int, struct sockaddr *, socklen_t *);
    int (*getpeername)(int, struct sockaddr *, socklen_t *);
    /* memory */
    int (*mprotect)(void *, size_t, int);
    int (*munmap)(void *, size_t);
    int (*madvise)(void *, size_t, int);
    void *(*mremap)(void *, size_t, size_t, int, ...);
    void *(*mmap)(void *, size_t, int, int, int, off_t);
    void *(*mmap64)(void *, size_t, int, int, int, off64_t);
    /* /proc/self/mem */
    int (*open)(const char *, int, ...);
    int (*open64)(const char *, int, ...);
    int (*openat)(int, const char *, int, ...);
    int (*openat64)(int, const char *, int, ...);
    int (*__open_2)(const char *, int);
    int (*__open64_2)(const char *, int);
    int (*__openat_2)(int, const char *, int);
    int (*__openat64_2)(int, const char *, int);
    int (*dup)(int);
    int (*dup2)(int, int);
    int (*dup3)(int, int, int);
    ssize_t (*write)(int, const void *, size_t);
    ssize_t (*pwrite)(int, const void *, size_t, off_t);
    ssize_t (*pwrite64)(int, const void *, size_t, off64_t);
    ssize_t (*writev)(int, const struct iovec *, int);
    ssize_t (*pwritev)(int, const struct iovec *, int, off_t);
    ssize_t (*pwritev64)(int, const struct iovec *, int, off64_t);
    ssize_t (*pwritev2)(int, const struct iovec *, int, off_t, int);
    ssize_t (*pwritev64v2)(int, const struct iovec *, int, off64_t, int);
} mtp_real;

extern mtp_real mtp_r;
void mtp_resolve(void);

/* The real function `f`; resolves everything first if the constructor has
 * not run yet (a wrapper called by another library's constructor). */
#define REAL(f) (__builtin_expect(mtp_r.f != NULL, 1) ? mtp_r.f : (mtp_resolve(), mtp_r.f))

/* The hooks of the attached tracker, NULL when none. Wrappers read it with
 * one relaxed load: the table is a constant in track's image. */
extern const mt_preload_hooks *_Atomic mtp_hooks;

/* async.c: reports a kernel facility that writes memory unbracketed
 * (MT_PRELOAD_ASYNC_*), and what was reported so far (for attach). */
void mtp_async_note(unsigned what);
/* aio.c: drops the parent's AIO holds in a fork child. */
void mtp_aio_atfork(void);
unsigned mtp_async_seen(void);
/* runtimes.c: reports MT_PRELOAD_ASYNC_RAW when Go code is loaded. */
void mtp_runtimes_check(void);
/* kwrite.c: syscall(SYS_getrandom, buf, len, flags) bracketed like read(). */
long mtp_kw_buf_syscall(long nr, const long a[6]);
/* kwmisc.c: syscall() of read, pread64, readv, preadv, preadv2, getdents64. */
long mtp_kw_read_syscall(long nr, const long a[6]);
static inline const mt_preload_hooks *mtp_get_hooks(void)
{
    return atomic_load_explicit(&mtp_hooks, memory_order_relaxed);
}

/* Per-thread virtual mask (MT_VMASK_*) and pending bits (signals.c). */
extern __thread unsigned mtp_vmask __attribute__((tls_model("initial-exec")));
extern __thread unsigned mtp_vpend __attribute__((tls_model("initial-exec")));
unsigned mtp_vbits(const sigset_t *s);
/* sigaction() keeping the application's SIGSEGV/SIGBUS sa_mask bits virtual. */
int mtp_masked_sigaction(int sig, const struct sigaction *act, struct sigaction *old);
/* Moves SIGSEGV/SIGBUS from this thread's real mask into its virtual one. */
void mtp_import_thread_mask(void);
void mtp_signals_atfork(void);

/* lastwords.c: guards of terminating signals, installed once a tracker
 * attaches; the application's sigaction for a guardable signal: returns its
 * result (0, or -1 with errno), or -2 when it is not one (not served). */
void mtp_guard_attach(void);
int mtp_guard_sigaction(int sig, const struct sigaction *act, struct sigaction *old);

/* A spin lock taken with every signal blocked (state that signal handlers
 * reach through sigaction() and write()). */
typedef struct mtp_lock {
    _Atomic int held;
    sigset_t saved;
} mtp_lock;
void mtp_lock_take(mtp_lock *l);
void mtp_lock_drop(mtp_lock *l);

#endif
