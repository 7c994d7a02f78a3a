/* track + interposer: the less common kernel outputs (preload/kwmisc.c),
 * written into tracked memory straddling a page boundary: a waited-for
 * signal's information (sigtimedwait, sigwaitinfo), directory entries
 * (getdents64), extended attribute names and values, a CPU set, scheduling
 * parameters, timers' current and previous settings (timer_*, timerfd_*,
 * itimers), resource limits, a residency vector, an eventfd's counter,
 * getentropy, the previous alternate signal stack, the real, effective and
 * saved ids, the supplementary groups, prctl's outputs, a terminal's name
 * (ttyname_r), the offsets splice, sendfile and copy_file_range advance,
 * the pre-2.33 stat entry points old binaries call (__xstat and friends),
 * and libc's syscall() for read, pread64, readv and getdents64.
 *
 * With the signal backend each of these failed with EFAULT. Checked for
 * each, with both backends: it succeeds with the result it has without
 * tracking, errno is left as it was, the two pages are reported by the next
 * collect and the next one reports nothing. Needs the interposer (77
 * without). */
#define _GNU_SOURCE
#include <dirent.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/eventfd.h>
#include <sys/prctl.h>
#include <sys/sendfile.h>
#include <sys/stat.h>
#include <sys/random.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <sys/timerfd.h>
#include <sys/uio.h>
#include <sys/xattr.h>
#include <time.h>
#include <unistd.h>

#include "kw_env.h"

static void signals(env *e)
{
    sigset_t set, old;
    sigemptyset(&set);
    sigaddset(&set, SIGUSR2);
    MT_CHECK(sigprocmask(SIG_BLOCK, &set, &old) == 0);
    siginfo_t *info = spot(e, sizeof *info);
    struct timespec zero = {0, 0};
    MT_CHECK(raise(SIGUSR2) == 0);
    errno = 4321;
    MT_CHECK(sigtimedwait(&set, info, &zero) == SIGUSR2 && info->si_signo == SIGUSR2);
    check_written(e, "sigtimedwait");
    MT_CHECK(raise(SIGUSR2) == 0);
    errno = 4321;
    MT_CHECK(sigwaitinfo(&set, info) == SIGUSR2 && info->si_signo == SIGUSR2);
    check_written(e, "sigwaitinfo");
    MT_CHECK(sigprocmask(SIG_SETMASK, &old, NULL) == 0);
    stack_t *ss = spot(e, sizeof *ss);
    errno = 4321;
    MT_CHECK(sigaltstack(NULL, ss) == 0);
    check_written(e, "sigaltstack");
}

static void files(env *e)
{
    /* "/" has more entries than fill 256 bytes, so the entries written
     * cross the page boundary 128 bytes in (uffd reports what was written) */
    enum { D = 256, N = 2048 };
    unsigned char *dents = spot(e, D);
    int d = open("/", O_RDONLY | O_DIRECTORY);
    MT_CHECK(d >= 0);
    errno = 4321;
    MT_CHECK(getdents64(d, dents, D) > D / 2);
    check_written(e, "getdents64");
    MT_CHECK(lseek(d, 0, SEEK_SET) == 0);
    errno = 4321;
    MT_CHECK(syscall(SYS_getdents64, d, dents, D) > D / 2);
    check_written(e, "syscall(getdents64)");
    close(d);
    unsigned char *buf = spot(e, N);

    /* A file holding known bytes, with a user attribute where the file
     * system takes one (the attribute calls are checked either way). */
    char path[] = "/tmp/mt-kwmisc-XXXXXX";
    int fd = mkstemp(path);
    MT_CHECK(fd >= 0);
    char data[N];
    for (int i = 0; i < N; i++)
        data[i] = (char)(i * 3 + 1);
    MT_CHECK(write(fd, data, N) == N);
    int has_attr = fsetxattr(fd, "user.mt", "value", 5, 0) == 0;
    ssize_t want = has_attr ? 5 : -1;
    errno = 4321;
    MT_CHECK(syscall(SYS_pread64, fd, buf, (size_t)N, (off_t)0) == N && memcmp(buf, data, N) == 0);
    check_written(e, "syscall(pread64)");
    MT_CHECK(lseek(fd, 0, SEEK_SET) == 0);
    errno = 4321;
    MT_CHECK(syscall(SYS_read, fd, buf, (size_t)N) == N && memcmp(buf, data, N) == 0);
    check_written(e, "syscall(read)");
    struct iovec iov[2] = {{buf, N / 2}, {buf + N / 2, N / 2}};
    MT_CHECK(lseek(fd, 0, SEEK_SET) == 0);
    errno = 4321;
    MT_CHECK(syscall(SYS_readv, fd, iov, 2) == N && memcmp(buf, data, N) == 0);
    check_written(e, "syscall(readv)");
    if (has_attr) {
        char *v = spot(e, 5);
        errno = 4321;
        MT_CHECK(getxattr(path, "user.mt", v, 5) == want && memcmp(v, "value", 5) == 0);
        check_written(e, "getxattr");
        errno = 4321;
        MT_CHECK(lgetxattr(path, "user.mt", v, 5) == want);
        check_written(e, "lgetxattr");
        errno = 4321;
        MT_CHECK(fgetxattr(fd, "user.mt", v, 5) == want);
        check_written(e, "fgetxattr");
        /* exactly "user.mt\0", straddling */
        ssize_t nl = listxattr(path, NULL, 0);
        MT_CHECK(nl >= 8);
        char *names = spot(e, (size_t)nl);
        errno = 4321;
        MT_CHECK(listxattr(path, names, (size_t)nl) == nl);
        check_written(e, "listxattr");
        errno = 4321;
        MT_CHECK(llistxattr(path, names, (size_t)nl) == nl);
        check_written(e, "llistxattr");
        errno = 4321;
        MT_CHECK(flistxattr(fd, names, (size_t)nl) == nl);
        check_written(e, "flistxattr");
    } else {
        printf("    (no user attributes on /tmp here: the attribute calls are not checked)\n");
    }
    close(fd);
    unlink(path);

    unsigned char *vec = spot(e, 8);
    errno = 4321;
    MT_CHECK(mincore(e->m, 8 * e->ps, vec) == 0);
    check_written(e, "mincore");
}

static void scheduling(env *e)
{
    cpu_set_t *cpus = spot(e, sizeof *cpus);
    errno = 4321;
    MT_CHECK(sched_getaffinity(0, sizeof *cpus, cpus) == 0 && CPU_COUNT(cpus) >= 1);
    check_written(e, "sched_getaffinity");
    struct sched_param *sp = spot(e, sizeof *sp);
    errno = 4321;
    MT_CHECK(sched_getparam(0, sp) == 0);
    check_written(e, "sched_getparam");
    struct timespec *ts = spot(e, sizeof *ts);
    errno = 4321;
    MT_CHECK(sched_rr_get_interval(0, ts) == 0);
    check_written(e, "sched_rr_get_interval");
    struct rlimit *rl = spot(e, sizeof *rl), want;
    MT_CHECK(prlimit(0, RLIMIT_NOFILE, NULL, &want) == 0);
    errno = 4321;
    MT_CHECK(getrlimit(RLIMIT_NOFILE, rl) == 0 && rl->rlim_cur == want.rlim_cur);
    check_written(e, "getrlimit");
    errno = 4321;
    MT_CHECK(prlimit(0, RLIMIT_NOFILE, NULL, rl) == 0 && rl->rlim_max == want.rlim_max);
    check_written(e, "prlimit");
}

static void timers(env *e)
{
    struct itimerspec set = {.it_value = {1000, 0}}, *its = spot(e, sizeof *its);
    struct sigevent sev = {.sigev_notify = SIGEV_NONE};
    timer_t t;
    MT_CHECK(timer_create(CLOCK_MONOTONIC, &sev, &t) == 0);
    MT_CHECK(timer_settime(t, 0, &set, NULL) == 0);
    errno = 4321;
    MT_CHECK(timer_gettime(t, its) == 0 && its->it_value.tv_sec > 900);
    check_written(e, "timer_gettime");
    errno = 4321;
    MT_CHECK(timer_settime(t, 0, &set, its) == 0 && its->it_value.tv_sec > 900);
    check_written(e, "timer_settime");
    timer_delete(t);
    int tfd = timerfd_create(CLOCK_MONOTONIC, 0);
    MT_CHECK(tfd >= 0);
    MT_CHECK(timerfd_settime(tfd, 0, &set, NULL) == 0);
    errno = 4321;
    MT_CHECK(timerfd_gettime(tfd, its) == 0 && its->it_value.tv_sec > 900);
    check_written(e, "timerfd_gettime");
    errno = 4321;
    MT_CHECK(timerfd_settime(tfd, 0, &set, its) == 0 && its->it_value.tv_sec > 900);
    check_written(e, "timerfd_settime");
    close(tfd);
    struct itimerval *iv = spot(e, sizeof *iv), off = {{0, 0}, {0, 0}};
    errno = 4321;
    MT_CHECK(getitimer(ITIMER_VIRTUAL, iv) == 0);
    check_written(e, "getitimer");
    errno = 4321;
    MT_CHECK(setitimer(ITIMER_VIRTUAL, &off, iv) == 0);
    check_written(e, "setitimer");
}

static void counters(env *e)
{
    int fd = eventfd(5, 0);
    MT_CHECK(fd >= 0);
    eventfd_t *v = spot(e, sizeof *v), got; /* straddles unaligned: read back with memcpy */
    errno = 4321;
    MT_CHECK(eventfd_read(fd, v) == 0);
    memcpy(&got, v, sizeof got);
    MT_CHECK(got == 5);
    check_written(e, "eventfd_read");
    close(fd);
    unsigned char *r = spot(e, 64);
    errno = 4321;
    MT_CHECK(getentropy(r, 64) == 0);
    check_written(e, "getentropy");
}

/* An unaligned value the kernel wrote, read back. */
static long long at(const void *p, size_t n)
{
    long long v = 0;
    memcpy(&v, p, n);
    return v;
}

static void identity(env *e)
{
    uid_t *u = spot(e, 3 * sizeof *u); /* the middle one straddles */
    errno = 4321;
    MT_CHECK(getresuid(&u[0], &u[1], &u[2]) == 0);
    MT_CHECK(at(&u[0], sizeof *u) == getuid() && at(&u[1], sizeof *u) == geteuid());
    check_written(e, "getresuid");
    gid_t *g = spot(e, 3 * sizeof *g);
    errno = 4321;
    MT_CHECK(getresgid(&g[0], &g[1], &g[2]) == 0);
    MT_CHECK(at(&g[0], sizeof *g) == getgid() && at(&g[1], sizeof *g) == getegid());
    check_written(e, "getresgid");
    int n = getgroups(0, NULL);
    MT_CHECK(n >= 0);
    if (n > 0) { /* none to write without supplementary groups */
        gid_t *list = spot(e, (size_t)n * sizeof *list < 16 ? 16 : (size_t)n * sizeof *list);
        errno = 4321;
        MT_CHECK(getgroups(n, list) == n);
        /* One group only: the spot is 16 bytes, the group within its
         * first page, reported as one run. */
        if ((uintptr_t)list / e->ps != ((uintptr_t)(list + n) - 1) / e->ps)
            check_written(e, "getgroups");
        else
            MT_CHECK(mt_tracker_collect(e->t, e->id, (mt_dirty_run[NP]){0}, NP) == 1);
    }
    char *name = spot(e, 16);
    MT_CHECK(prctl(PR_SET_NAME, "mt-kwmisc", 0, 0, 0) == 0);
    errno = 4321;
    MT_CHECK(prctl(PR_GET_NAME, name, 0, 0, 0) == 0 && strcmp(name, "mt-kwmisc") == 0);
    check_written(e, "prctl(PR_GET_NAME)");
    int *sig = spot(e, sizeof *sig);
    MT_CHECK(prctl(PR_SET_PDEATHSIG, SIGUSR2, 0, 0, 0) == 0);
    errno = 4321;
    MT_CHECK(prctl(PR_GET_PDEATHSIG, sig, 0, 0, 0) == 0 && at(sig, sizeof *sig) == SIGUSR2);
    check_written(e, "prctl(PR_GET_PDEATHSIG)");
    MT_CHECK(prctl(PR_SET_PDEATHSIG, 0, 0, 0, 0) == 0);
}

/* glibc's ttyname_r reads /proc/self/fd/N's link straight into the
 * caller's buffer. A pseudo-terminal where the machine has them. This
 * checks the result, not the bracket: without it the read fails with
 * EFAULT and glibc falls back to searching /dev/pts, which finds the same
 * name by copying in user space (slower, and an EFAULT in the
 * application's system call trace). */
static void terminal(env *e)
{
    int master = posix_openpt(O_RDWR | O_NOCTTY);
    if (master < 0 || grantpt(master) != 0 || unlockpt(master) != 0) {
        puts("  (no pseudo-terminals here: ttyname_r not checked)");
        if (master >= 0)
            close(master);
        return;
    }
    char want[64];
    MT_CHECK(ptsname_r(master, want, sizeof want) == 0);
    int slave = open(want, O_RDWR | O_NOCTTY);
    MT_CHECK(slave >= 0);
    char *buf = spot(e, 64);
    errno = 4321;
    MT_CHECK(ttyname_r(slave, buf, 64) == 0 && strcmp(buf, want) == 0);
    /* The name is shorter than the 32 bytes before the boundary: one run
     * is reported (both pages of the bracketed buffer with the wrapper,
     * the page glibc's fallback copies into without it). */
    if (strlen(want) >= 32)
        check_written(e, "ttyname_r");
    else
        MT_CHECK(mt_tracker_collect(e->t, e->id, (mt_dirty_run[NP]){0}, NP) == 1);
    close(slave);
    close(master);
}

/* The file offsets the kernel reads and writes back advanced. */
static void offsets(env *e)
{
    char path[] = "/tmp/mt-kwmisc-off-XXXXXX", data[4096];
    int f = mkstemp(path);
    MT_CHECK(f >= 0);
    unlink(path);
    memset(data, 'k', sizeof data);
    MT_CHECK(write(f, data, sizeof data) == (ssize_t)sizeof data);
    int p[2];
    MT_CHECK(pipe(p) == 0);
    off_t *off = spot(e, sizeof *off); /* 8 bytes across the boundary */
    memset(off, 0, sizeof *off);
    (void)collected(e, (unsigned char[NP]){0});
    errno = 4321;
    MT_CHECK(sendfile(p[1], f, off, 100) == 100 && at(off, sizeof *off) == 100);
    check_written(e, "sendfile");
    loff_t *lo = spot(e, sizeof *lo);
    memset(lo, 0, sizeof *lo);
    (void)collected(e, (unsigned char[NP]){0});
    errno = 4321;
    MT_CHECK(splice(p[0], NULL, f, lo, 100, 0) == 100 && at(lo, sizeof *lo) == 100);
    check_written(e, "splice");
    loff_t *two = spot(e, 2 * sizeof *two); /* in, out: one on each side */
    memset(two, 0, 2 * sizeof *two);
    (void)collected(e, (unsigned char[NP]){0});
    errno = 4321;
    two[1] = 4096;
    ssize_t n = copy_file_range(f, &two[0], f, &two[1], 512, 0);
    if (n < 0 && (errno == ENOSYS || errno == EXDEV || errno == EOPNOTSUPP)) {
        puts("  (copy_file_range refused here: not checked)");
        (void)collected(e, (unsigned char[NP]){0});
    } else {
        MT_CHECK(n == 512 && two[0] == 512 && two[1] == 4096 + 512);
        check_written(e, "copy_file_range");
    }
    close(p[0]);
    close(p[1]);
    close(f);
}

#if defined(__x86_64__) && defined(__GLIBC__) && !defined(__SANITIZE_ADDRESS__) &&                \
    !defined(__SANITIZE_THREAD__)
/* What a binary built against glibc before 2.33 calls for stat(), fstat(),
 * lstat() and fstatat(): these references bind to the same versions its
 * references do (glibc keeps them as compat versions). Not in sanitizer
 * builds: their runtimes define some of these names themselves, and the
 * executable then links to a mix the loader refuses ("unexpected PLT
 * reloc type"); the interposer, never built with sanitizers, is checked
 * by the plain build. */
int mt_old_xstat(int, const char *, struct stat *);
int mt_old_lxstat64(int, const char *, struct stat64 *);
int mt_old_fxstat(int, int, struct stat *);
int mt_old_fxstatat64(int, int, const char *, struct stat64 *, int);
__asm__(".symver mt_old_xstat, __xstat@GLIBC_2.2.5");
__asm__(".symver mt_old_lxstat64, __lxstat64@GLIBC_2.2.5");
__asm__(".symver mt_old_fxstat, __fxstat@GLIBC_2.2.5");
__asm__(".symver mt_old_fxstatat64, __fxstatat64@GLIBC_2.4");
enum { OLD_STAT_VER = 1 }; /* _STAT_VER_LINUX, what their headers passed */

static void old_stat(env *e)
{
    struct stat want, *st = spot(e, sizeof *st);
    MT_CHECK(stat("/", &want) == 0);
    errno = 4321;
    MT_CHECK(mt_old_xstat(OLD_STAT_VER, "/", st) == 0 && st->st_ino == want.st_ino);
    check_written(e, "__xstat");
    struct stat64 *st64 = spot(e, sizeof *st64);
    errno = 4321;
    MT_CHECK(mt_old_lxstat64(OLD_STAT_VER, "/", st64) == 0 && st64->st_ino == want.st_ino);
    check_written(e, "__lxstat64");
    int d = open("/", O_RDONLY | O_DIRECTORY);
    MT_CHECK(d >= 0);
    errno = 4321;
    MT_CHECK(mt_old_fxstat(OLD_STAT_VER, d, st) == 0 && st->st_ino == want.st_ino);
    check_written(e, "__fxstat");
    errno = 4321;
    MT_CHECK(mt_old_fxstatat64(OLD_STAT_VER, d, ".", st64, 0) == 0 && st64->st_ino == want.st_ino);
    check_written(e, "__fxstatat64");
    close(d);
}
#else
static void old_stat(env *e)
{
    (void)e;
}
#endif

static void run(env *e)
{
    signals(e);
    files(e);
    scheduling(e);
    timers(e);
    counters(e);
    identity(e);
    terminal(e);
    offsets(e);
    old_stat(e);
}

int main(void) { return kw_env_main(run, "track less common kernel outputs into tracked memory (interposer): ok"); }
