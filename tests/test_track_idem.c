/* track + interposer: calls that only report something into a buffer the
 * application passes (clock_gettime of a CPU-time clock, clock_getres,
 * gettimeofday, getrusage, times, sysinfo, uname, the stat family, statx),
 * with that buffer in tracked memory, straddling a page boundary.
 *
 * With the signal backend the kernel's write meets a protected page and
 * fails with EFAULT; the interposer runs such a call again, bracketed
 * (preload/idem.c). Checked for each call, with both backends: it succeeds,
 * its result agrees with the same call into untracked memory, errno is left
 * as it was, both pages are reported by the next collect and the next one
 * reports nothing; a really bad pointer still fails with EFAULT. Needs the
 * interposer (exit 77 without). */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/sysinfo.h>
#include <sys/time.h>
#include <sys/times.h>
#include <sys/utsname.h>
#include <time.h>
#include <unistd.h>

#include "kw_env.h"

static void run(env *ep)
{
    env e = *ep;
    unsigned char seen[NP];

    struct timespec t0;
    MT_CHECK(clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t0) == 0);
    struct timespec *ts = spot(&e, sizeof *ts);
    errno = 4321;
    MT_CHECK(clock_gettime(CLOCK_PROCESS_CPUTIME_ID, ts) == 0);
    MT_CHECK(ts->tv_sec > t0.tv_sec || (ts->tv_sec == t0.tv_sec && ts->tv_nsec >= t0.tv_nsec));
    check_written(&e, "clock_gettime");

    struct timespec r0;
    MT_CHECK(clock_getres(CLOCK_THREAD_CPUTIME_ID, &r0) == 0);
    errno = 4321;
    MT_CHECK(clock_getres(CLOCK_THREAD_CPUTIME_ID, ts) == 0);
    MT_CHECK(ts->tv_sec == r0.tv_sec && ts->tv_nsec == r0.tv_nsec);
    check_written(&e, "clock_getres");

    struct timeval tv0, *tv = spot(&e, sizeof *tv);
    MT_CHECK(gettimeofday(&tv0, NULL) == 0);
    errno = 4321;
    MT_CHECK(gettimeofday(tv, NULL) == 0);
    MT_CHECK(tv->tv_sec >= tv0.tv_sec && tv->tv_sec <= tv0.tv_sec + 60);
    check_written(&e, "gettimeofday");

    struct rusage *ru = spot(&e, sizeof *ru);
    errno = 4321;
    MT_CHECK(getrusage(RUSAGE_SELF, ru) == 0);
    MT_CHECK(ru->ru_maxrss > 0);
    check_written(&e, "getrusage");

    struct tms *tm = spot(&e, sizeof *tm);
    errno = 4321;
    MT_CHECK(times(tm) != (clock_t)-1);
    check_written(&e, "times");

    struct sysinfo si0, *si = spot(&e, sizeof *si);
    MT_CHECK(sysinfo(&si0) == 0);
    errno = 4321;
    MT_CHECK(sysinfo(si) == 0);
    MT_CHECK(si->totalram == si0.totalram && si->mem_unit == si0.mem_unit);
    check_written(&e, "sysinfo");

    struct utsname u0, *u = spot(&e, sizeof *u);
    MT_CHECK(uname(&u0) == 0);
    errno = 4321;
    MT_CHECK(uname(u) == 0);
    MT_CHECK(memcmp(u, &u0, sizeof u0) == 0);
    check_written(&e, "uname");

    /* The stat family, on a file we made. */
    char path[] = "/tmp/mt_idem_XXXXXX";
    int fd = mkstemp(path);
    MT_CHECK(fd >= 0);
    MT_CHECK(write(fd, "memtrack", 8) == 8);
    struct stat s0, *st = spot(&e, sizeof *st);
    MT_CHECK(fstat(fd, &s0) == 0);
    errno = 4321;
    MT_CHECK(fstat(fd, st) == 0 && st->st_ino == s0.st_ino && st->st_size == 8);
    check_written(&e, "fstat");
    errno = 4321;
    MT_CHECK(stat(path, st) == 0 && st->st_ino == s0.st_ino);
    check_written(&e, "stat");
    errno = 4321;
    MT_CHECK(lstat(path, st) == 0 && st->st_ino == s0.st_ino);
    check_written(&e, "lstat");
    errno = 4321;
    MT_CHECK(fstatat(AT_FDCWD, path, st, 0) == 0 && st->st_ino == s0.st_ino);
    check_written(&e, "fstatat");
    struct stat64 *st64 = spot(&e, sizeof *st64);
    errno = 4321;
    MT_CHECK(fstat64(fd, st64) == 0 && st64->st_ino == s0.st_ino);
    check_written(&e, "fstat64");
    struct statx *sx = spot(&e, sizeof *sx);
    errno = 4321;
    int rc = statx(fd, "", AT_EMPTY_PATH, STATX_INO | STATX_SIZE, sx);
    if (rc == 0) {
        MT_CHECK(sx->stx_ino == s0.st_ino && sx->stx_size == 8);
        check_written(&e, "statx");
    } else {
        MT_CHECK(errno == ENOSYS); /* an old kernel: nothing written */
        MT_CHECK(collected(&e, seen) == 0);
    }
    /* A bad pointer is still the application's EFAULT. */
    errno = 0;
    MT_CHECK(fstat(fd, (struct stat *)(uintptr_t)16) == -1 && errno == EFAULT);
    close(fd);
    unlink(path);

}

int main(void) { return kw_env_main(run, "track idempotent reports into tracked memory (interposer): ok"); }
