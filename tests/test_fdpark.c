/* common/fdpark: memtrack's long-lived descriptors leave the application's
 * numbers and RLIMIT_NOFILE budget alone (src/common/fdpark.h). Also the
 * users: a trace writer's file, a uffd tracker's userfaultfd and pagemap. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/fdpark.h"
#include "memtrack/trace.h"
#include "memtrack/track.h"
#include "mt_test.h"

static rlim_t soft_limit(void)
{
    struct rlimit rl;
    getrlimit(RLIMIT_NOFILE, &rl);
    return rl.rlim_cur;
}

static void set_soft(rlim_t soft)
{
    struct rlimit rl;
    getrlimit(RLIMIT_NOFILE, &rl);
    rl.rlim_cur = soft;
    MT_CHECK(setrlimit(RLIMIT_NOFILE, &rl) == 0);
}

static int is_open(int fd) { return fcntl(fd, F_GETFD) >= 0; }

/* soft < hard: parked at or above the soft limit, which reads back as the
 * application set it; lowest-free numbering below it is the application's. */
static void above_soft(void)
{
    set_soft(64);
    int fd = open("/dev/null", O_RDONLY);
    MT_CHECK(fd >= 0 && fd < 64);
    int p = mti_fd_park(fd);
    MT_CHECK(p >= 64);
    MT_CHECK(!is_open(fd) && errno == EBADF); /* the original is closed */
    MT_CHECK(fcntl(p, F_GETFD) == FD_CLOEXEC);
    MT_CHECK_INT_EQ((long)soft_limit(), 64);
    MT_CHECK_INT_EQ(open("/dev/null", O_RDONLY), fd); /* the number is the app's again */
    close(fd);
    /* Parked already: unchanged. A second one goes next to it. */
    MT_CHECK_INT_EQ(mti_fd_park(p), p);
    int q = mti_fd_park(open("/dev/null", O_RDONLY));
    MT_CHECK(q >= 64 && q != p);
    /* Every number below the limit is the application's: it can open
     * exactly as many as without them. */
    int n = 0, fds[64];
    while ((fds[n] = open("/dev/null", O_RDONLY)) >= 0)
        n++;
    MT_CHECK(errno == EMFILE);
    for (int i = 0; i < n; i++)
        MT_CHECK(fds[i] < 64);
    for (int i = 0; i < n; i++)
        close(fds[i]);
    /* At the limit the parked ones still work. */
    MT_CHECK(is_open(p) && is_open(q));
    close(p);
    close(q);
    MT_CHECK_INT_EQ(mti_fd_park(-EBADF), -EBADF);
}

/* An flock taken before the move is still held after it (the open file
 * description is the same): a second opener of the trace still finds it
 * locked. */
static void lock_kept(void)
{
    char path[] = "/tmp/memtrack-fdpark-XXXXXX";
    int fd = mkstemp(path);
    MT_CHECK(fd >= 0);
    MT_CHECK(flock(fd, LOCK_EX | LOCK_NB) == 0);
    int p = mti_fd_park(fd);
    MT_CHECK(p != fd);
    int other = open(path, O_RDONLY);
    MT_CHECK(other >= 0);
    MT_CHECK(flock(other, LOCK_EX | LOCK_NB) != 0 && errno == EWOULDBLOCK);
    close(other);
    close(p);
    unlink(path);
}

/* soft == hard (lowering the hard limit is for good: in a child). */
static int child(rlim_t lim, int (*fn)(rlim_t))
{
    pid_t pid = fork();
    if (pid == 0) {
        struct rlimit rl = {lim, lim};
        if (setrlimit(RLIMIT_NOFILE, &rl) != 0)
            _exit(2);
        _exit(fn(lim));
    }
    int st = 0;
    MT_CHECK(waitpid(pid, &st, 0) == pid);
    return WIFEXITED(st) ? WEXITSTATUS(st) : 100 + WTERMSIG(st);
}

/* No room above a small limit: the top eighth below it, so that the low
 * numbers stay the application's (descriptor 0 closed: open() gives 0 again
 * after a park), the limit unchanged; and where the top eighth is full, the
 * descriptor stays, and works. */
static int top_eighth(rlim_t lim)
{
    close(0);
    int fd = open("/dev/null", O_RDONLY);
    if (fd != 0)
        return 1;
    int p = mti_fd_park(fd);
    struct rlimit rl;
    getrlimit(RLIMIT_NOFILE, &rl);
    if (p < (int)(lim - lim / 8) || p >= (int)lim || is_open(0) || !is_open(p) || rl.rlim_cur != lim)
        return 2;
    if (open("/dev/null", O_RDONLY) != 0)
        return 3;
    for (int n = (int)(lim - lim / 8); n < (int)lim; n++) /* fill the top eighth */
        if (!is_open(n) && dup2(0, n) != n)
            return 4;
    int fd2 = open("/dev/null", O_RDONLY);
    return fd2 > 0 && mti_fd_park(fd2) == fd2 && is_open(fd2) ? 0 : 5;
}

/* A large one has room at 1024 and up, below the limit. */
static int at_1024(rlim_t lim)
{
    int fd = open("/dev/null", O_RDONLY);
    int p = mti_fd_park(fd);
    struct rlimit rl;
    getrlimit(RLIMIT_NOFILE, &rl);
    return p >= 1024 && !is_open(fd) && is_open(p) && rl.rlim_cur == lim ? 0 : 1;
}

/* The users: a trace writer's file and a uffd tracker's descriptors. */
static void users(void)
{
    set_soft(64);
    char path[] = "/tmp/memtrack-fdpark-trace-XXXXXX";
    int fd = mkstemp(path);
    MT_CHECK(fd >= 0);
    close(fd);
    mt_trace_writer *w;
    MT_CHECK_INT_EQ(mt_trace_writer_open(path, NULL, &w), 0);
    MT_CHECK_INT_EQ(open("/dev/null", O_RDONLY), fd); /* lowest free: not taken by the writer */
    close(fd);
    MT_CHECK_INT_EQ(mt_trace_writer_close(w), 0);
    mt_trace_reader *r;
    MT_CHECK_INT_EQ(mt_trace_reader_open(path, NULL, &r), 0); /* the trace is whole */
    mt_trace_reader_close(r);
    unlink(path);

    mt_tracker_opts o = {.backend = MT_TRACK_UFFD};
    mt_tracker *t;
    int before = open("/dev/null", O_RDONLY);
    close(before);
    if (mt_tracker_create(&o, &t) == 0) {
        size_t len = 1 << 20;
        char *m = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        mt_range_id id;
        MT_CHECK_INT_EQ(mt_tracker_add(t, m, len, NULL, &id), 0);
        MT_CHECK_INT_EQ(open("/dev/null", O_RDONLY), before);
        close(before);
        m[4096] = 1; /* still tracked through the moved descriptors */
        mt_dirty_run runs[4];
        long n = mt_tracker_collect(t, id, runs, 4);
        MT_CHECK(n == 1 && runs[0].offset == 4096 && runs[0].length == 4096);
        mt_tracker_destroy(t);
        munmap(m, len);
    } else {
        puts("fdpark: no uffd backend here, its descriptors not checked");
    }
}

/* The uffd backend's probe at the descriptor limit (the first tracker of
 * an application that used every descriptor): no uffd for now, and not
 * remembered, so that a later tracker gets it. In a child: the probe's
 * answer is kept per process. */
static int probe_at_limit(void)
{
    pid_t pid = fork();
    if (pid == 0) {
        int lowest = open("/dev/null", O_RDONLY);
        close(lowest);
        struct rlimit rl, full;
        getrlimit(RLIMIT_NOFILE, &rl);
        full = rl;
        rl.rlim_cur = (rlim_t)lowest; /* no number left */
        if (setrlimit(RLIMIT_NOFILE, &rl) != 0)
            _exit(10);
        int at_limit = mt_track_backend_available(MT_TRACK_UFFD);
        if (setrlimit(RLIMIT_NOFILE, &full) != 0)
            _exit(11);
        _exit(at_limit * 2 + mt_track_backend_available(MT_TRACK_UFFD));
    }
    int st = 0;
    MT_CHECK(waitpid(pid, &st, 0) == pid && WIFEXITED(st));
    return WEXITSTATUS(st);
}

int main(void)
{
    struct rlimit rl;
    getrlimit(RLIMIT_NOFILE, &rl);
    if (rl.rlim_max <= 4096) {
        puts("fdpark: hard RLIMIT_NOFILE <= 4096, skipped");
        return 77;
    }
    int probed = probe_at_limit(); /* before this process probes */
    int uffd = mt_track_backend_available(MT_TRACK_UFFD);
    MT_CHECK_INT_EQ(probed, uffd); /* at the limit: 0; then the answer */
    if (!uffd)
        puts("fdpark: no uffd backend here: the probe at the limit proves nothing");
    lock_kept();
    MT_CHECK_INT_EQ(child(64, top_eighth), 0);
    MT_CHECK_INT_EQ(child(4096, at_1024), 0);
    above_soft();
    users();
    puts("fdpark: ok");
    return 0;
}
