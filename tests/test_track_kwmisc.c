/* track + interposer: the less common kernel outputs (preload/kwmisc.c),
 * written into tracked memory straddling a page boundary: a waited-for
 * signal's information (sigtimedwait, sigwaitinfo), directory entries
 * (getdents64), extended attribute names and values, a CPU set, scheduling
 * parameters, timers' current and previous settings (timer_*, timerfd_*,
 * itimers), resource limits, a residency vector, an eventfd's counter,
 * getentropy, the previous alternate signal stack, and libc's syscall() for
 * read, pread64, readv and getdents64.
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
#include <stdlib.h>
#include <sys/eventfd.h>
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

static void run(env *e)
{
    signals(e);
    files(e);
    scheduling(e);
    timers(e);
    counters(e);
}

int main(void) { return kw_env_main(run, "track less common kernel outputs into tracked memory (interposer): ok"); }
