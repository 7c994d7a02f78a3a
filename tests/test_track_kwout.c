/* track + interposer: the small outputs of system calls that change state,
 * written by the kernel into tracked memory straddling a page boundary:
 * descriptors (pipe, pipe2, socketpair), a peer's address and its length
 * (accept, accept4), socket options (getsockopt, SO_ERROR included), exit
 * statuses (wait, waitpid, wait4, waitid), ready events (poll, ppoll,
 * select, pselect, epoll_wait, epoll_pwait), an interrupted sleep's time
 * left (nanosleep, clock_nanosleep), ioctl results (encoded _IOR and a
 * legacy number), vmsplice from a pipe, System V and POSIX messages; and
 * the reports that run again after EFAULT (getsockname, getpeername,
 * readlink, readlinkat, getcwd, statfs, fstatfs), and the _FORTIFY_SOURCE
 * entry points of poll, readlink and getcwd.
 *
 * With the signal backend the kernel's write meets a protected page and
 * fails with EFAULT (preload/kwout.c, kwrite.c and idem.c bracket them).
 * Checked for each call, with both backends: it succeeds with the result
 * the same call has without tracking, errno is left as it was, the two
 * pages are reported by the next collect and the next one reports nothing;
 * bad pointers still fail with EFAULT. Needs the interposer (exit 77
 * without). */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <linux/random.h>
#include <mqueue.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/msg.h>
#include <sys/resource.h>
#include <sys/select.h>
#include <sys/socket.h>
#include <sys/statfs.h>
#include <sys/uio.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "kw_env.h"

#define SANITIZED TU_SANITIZED

/* glibc's entry points for programs built with _FORTIFY_SOURCE. */
int __poll_chk(struct pollfd *fds, nfds_t n, int timeout, size_t fdslen);
ssize_t __readlink_chk(const char *path, char *buf, size_t n, size_t buflen);
char *__getcwd_chk(char *buf, size_t n, size_t buflen);

static int rd_int(const void *p)
{
    int v;
    memcpy(&v, p, sizeof v);
    return v;
}

static void descriptors(env *e)
{
    int *fds = spot(e, 2 * sizeof(int));
    errno = 4321;
    MT_CHECK(pipe(fds) == 0);
    check_written(e, "pipe");
    int p[2] = {fds[0], fds[1]};
    MT_CHECK(write(p[1], "x", 1) == 1);
    char c;
    MT_CHECK(read(p[0], &c, 1) == 1 && c == 'x');
    close(p[0]);
    close(p[1]);
    errno = 4321;
    MT_CHECK(pipe2(fds, O_CLOEXEC) == 0);
    check_written(e, "pipe2");
    MT_CHECK(fcntl(fds[0], F_GETFD) == FD_CLOEXEC);
    close(fds[0]);
    close(fds[1]);
    errno = 4321;
    MT_CHECK(socketpair(AF_UNIX, SOCK_STREAM, 0, fds) == 0);
    check_written(e, "socketpair");
    MT_CHECK(write(fds[0], "y", 1) == 1 && read(fds[1], &c, 1) == 1 && c == 'y');
    close(fds[0]);
    close(fds[1]);
}

/* A listening unix socket at a fresh abstract name, and a client of it. */
static int listener(struct sockaddr_un *a, socklen_t *alen)
{
    memset(a, 0, sizeof *a);
    a->sun_family = AF_UNIX;
    int n = snprintf(a->sun_path + 1, sizeof a->sun_path - 1, "mt-kwout-%d", (int)getpid());
    *alen = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + (size_t)n);
    int l = socket(AF_UNIX, SOCK_STREAM, 0);
    MT_CHECK(l >= 0);
    MT_CHECK(bind(l, (struct sockaddr *)a, *alen) == 0);
    MT_CHECK(listen(l, 4) == 0);
    return l;
}

static int client(const struct sockaddr_un *a, socklen_t alen)
{
    int c = socket(AF_UNIX, SOCK_STREAM, 0);
    MT_CHECK(c >= 0);
    MT_CHECK(connect(c, (const struct sockaddr *)a, alen) == 0);
    return c;
}

static void sockets(env *e)
{
    struct sockaddr_un a;
    socklen_t alen;
    int l = listener(&a, &alen);
    /* The address and its length both in tracked memory, the length on
     * page 2 and the address from the last byte of page 2 on (an unbound
     * peer's address is its family alone: two bytes). Read back with
     * memcpy: the address is unaligned. */
    socklen_t *len = (socklen_t *)(e->m + 3 * e->ps - 64);
    struct sockaddr_un *peer = (struct sockaddr_un *)(e->m + 3 * e->ps - 1);
    sa_family_t fam;
    int c = client(&a, alen);
    *len = sizeof *peer;
    (void)collected(e, (unsigned char[NP]){0});
    errno = 4321;
    int s = accept(l, (struct sockaddr *)peer, len);
    MT_CHECK(s >= 0);
    memcpy(&fam, peer, sizeof fam);
    MT_CHECK(fam == AF_UNIX && *len >= sizeof(sa_family_t));
    check_written(e, "accept");
    close(s);
    close(c);
    c = client(&a, alen);
    *len = sizeof *peer;
    (void)collected(e, (unsigned char[NP]){0});
    errno = 4321;
    s = accept4(l, (struct sockaddr *)peer, len, SOCK_CLOEXEC);
    MT_CHECK(s >= 0 && fcntl(s, F_GETFD) == FD_CLOEXEC);
    check_written(e, "accept4");

    /* getsockname on the listener: its own abstract name. */
    *len = sizeof *peer;
    (void)collected(e, (unsigned char[NP]){0});
    errno = 4321;
    MT_CHECK(getsockname(l, (struct sockaddr *)peer, len) == 0);
    MT_CHECK(*len == alen && memcmp(peer, &a, alen) == 0);
    check_written(e, "getsockname");
    *len = sizeof *peer;
    (void)collected(e, (unsigned char[NP]){0});
    errno = 4321;
    MT_CHECK(getpeername(c, (struct sockaddr *)peer, len) == 0);
    MT_CHECK(*len == alen && memcmp(peer, &a, alen) == 0);
    check_written(e, "getpeername");

    int *val = spot(e, sizeof(int));
    *len = sizeof(int);
    (void)collected(e, (unsigned char[NP]){0});
    errno = 4321;
    MT_CHECK(getsockopt(s, SOL_SOCKET, SO_TYPE, val, len) == 0);
    MT_CHECK(rd_int(val) == SOCK_STREAM && *len == sizeof(int));
    check_written(e, "getsockopt(SO_TYPE)");
    *len = sizeof(int);
    (void)collected(e, (unsigned char[NP]){0});
    errno = 4321;
    MT_CHECK(getsockopt(s, SOL_SOCKET, SO_ERROR, val, len) == 0 && rd_int(val) == 0);
    check_written(e, "getsockopt(SO_ERROR)");
    /* Bad pointers: the application's EFAULT, nothing crashes first. The
     * sanitizers' own wrappers of these calls read the length themselves
     * before the call, and crash on a bad one. */
    if (!SANITIZED) {
        int v;
        errno = 0;
        MT_CHECK(getsockopt(s, SOL_SOCKET, SO_TYPE, &v, (socklen_t *)(uintptr_t)16) == -1 &&
                 errno == EFAULT);
        errno = 0;
        MT_CHECK(getsockname(l, (struct sockaddr *)&a, (socklen_t *)(uintptr_t)16) == -1 &&
                 errno == EFAULT);
        MT_CHECK(collected(e, (unsigned char[NP]){0}) == 0);
    }
    close(s);
    close(c);
    close(l);
}

static pid_t child(int code)
{
    pid_t p = fork();
    MT_CHECK(p >= 0);
    if (p == 0)
        _exit(code);
    return p;
}

static void statuses(env *e)
{
    int *st = spot(e, sizeof(int));
    pid_t p = child(7);
    errno = 4321;
    MT_CHECK(waitpid(p, st, 0) == p && WIFEXITED(rd_int(st)) && WEXITSTATUS(rd_int(st)) == 7);
    check_written(e, "waitpid");
    p = child(8);
    errno = 4321;
    MT_CHECK(wait(st) == p && WEXITSTATUS(rd_int(st)) == 8);
    check_written(e, "wait");
    p = child(9);
    struct rusage ru;
    errno = 4321;
    MT_CHECK(wait4(p, st, 0, &ru) == p && WEXITSTATUS(rd_int(st)) == 9);
    check_written(e, "wait4");
    p = child(10);
    /* The kernel writes the first fields only (signo to status). */
    siginfo_t *si = (siginfo_t *)(e->m + 3 * e->ps - 8);
    errno = 4321;
    MT_CHECK(waitid(P_PID, (id_t)p, si, WEXITED) == 0 && si->si_pid == p && si->si_status == 10);
    check_written(e, "waitid");
}

static void events(env *e)
{
    int fds[2];
    MT_CHECK(pipe(fds) == 0);
    MT_CHECK(write(fds[1], "z", 1) == 1);
    struct pollfd *pf = spot(e, 2 * sizeof *pf);
    pf[0] = (struct pollfd){.fd = fds[0], .events = POLLIN};
    pf[1] = (struct pollfd){.fd = fds[1], .events = POLLOUT};
    (void)collected(e, (unsigned char[NP]){0});
    errno = 4321;
    MT_CHECK(poll(pf, 2, 1000) == 2 && (pf[0].revents & POLLIN) && (pf[1].revents & POLLOUT));
    check_written(e, "poll");
    pf[0].revents = pf[1].revents = 0;
    (void)collected(e, (unsigned char[NP]){0});
    struct timespec ts = {1, 0};
    sigset_t none;
    sigemptyset(&none);
    errno = 4321;
    MT_CHECK(ppoll(pf, 2, &ts, &none) == 2 && (pf[0].revents & POLLIN));
    check_written(e, "ppoll");
    /* The entry point of programs built with _FORTIFY_SOURCE. */
    pf[0].revents = pf[1].revents = 0;
    (void)collected(e, (unsigned char[NP]){0});
    errno = 4321;
    MT_CHECK(__poll_chk(pf, 2, 1000, 2 * sizeof *pf) == 2 && (pf[0].revents & POLLIN));
    check_written(e, "__poll_chk");

    /* fd_set: the kernel writes as many longs as cover n descriptors
     * (clipped to the descriptor table). A descriptor at 100 makes that two
     * longs, the set aligned across the boundary: the second on page 3. */
    int hi = 100;
    MT_CHECK(dup2(fds[0], hi) == hi);
    fd_set *r = (fd_set *)(void *)(e->m + 3 * e->ps - 8);
    for (int k = 0; k < 2; k++) {
        FD_ZERO(r);
        FD_SET(hi, r);
        (void)collected(e, (unsigned char[NP]){0});
        struct timeval tv = {1, 0};
        errno = 4321;
        if (k == 0)
            MT_CHECK(select(hi + 1, r, NULL, NULL, &tv) == 1 && FD_ISSET(hi, r));
        else
            MT_CHECK(pselect(hi + 1, r, NULL, NULL, &ts, &none) == 1 && FD_ISSET(hi, r));
        check_written(e, k ? "pselect" : "select");
    }
    close(hi);

    int ep = epoll_create1(0);
    MT_CHECK(ep >= 0);
    struct epoll_event add = {.events = EPOLLIN, .data.u64 = 0x1234};
    MT_CHECK(epoll_ctl(ep, EPOLL_CTL_ADD, fds[0], &add) == 0);
    struct epoll_event *ev = (struct epoll_event *)(e->m + 3 * e->ps - 8); /* one event */
    errno = 4321;
    MT_CHECK(epoll_wait(ep, ev, 2, 1000) == 1 && ev[0].data.u64 == 0x1234);
    check_written(e, "epoll_wait");
    errno = 4321;
    MT_CHECK(epoll_pwait(ep, ev, 2, 1000, &none) == 1 && ev[0].data.u64 == 0x1234);
    check_written(e, "epoll_pwait");
    close(ep);
    close(fds[0]);
    close(fds[1]);
}

static void on_usr1(int sig) { (void)sig; }

static void *poke(void *arg)
{
    struct timespec d = {0, 30 * 1000 * 1000};
    nanosleep(&d, NULL);
    pthread_kill(*(pthread_t *)arg, SIGUSR1);
    return NULL;
}

/* The time left is written only when a signal interrupts the sleep. */
static void sleeps(env *e)
{
    struct sigaction sa = {.sa_handler = on_usr1}, old;
    MT_CHECK(sigaction(SIGUSR1, &sa, &old) == 0); /* no SA_RESTART */
    struct timespec *rem = spot(e, sizeof *rem);
    for (int clk = 0; clk < 2; clk++) {
        pthread_t self = pthread_self(), th;
        MT_CHECK(pthread_create(&th, NULL, poke, &self) == 0);
        struct timespec d = {10, 0};
        errno = 4321;
        if (clk == 0) {
            MT_CHECK(nanosleep(&d, rem) == -1 && errno == EINTR);
            errno = 4321;
        } else {
            MT_CHECK(clock_nanosleep(CLOCK_MONOTONIC, 0, &d, rem) == EINTR);
        }
        MT_CHECK(rem->tv_sec > 0 && rem->tv_sec < 10);
        check_written(e, clk ? "clock_nanosleep" : "nanosleep");
        pthread_join(th, NULL);
    }
    sigaction(SIGUSR1, &old, NULL);
}

static void ioctls(env *e)
{
    /* A legacy number (FIONREAD, no size encoded) and an encoded _IOR. */
    int fds[2];
    MT_CHECK(pipe(fds) == 0);
    MT_CHECK(write(fds[1], "hello", 5) == 5);
    int *n = spot(e, sizeof(int));
    errno = 4321;
    MT_CHECK(ioctl(fds[0], FIONREAD, n) == 0 && rd_int(n) == 5);
    check_written(e, "ioctl(FIONREAD)");
    int u = open("/dev/urandom", O_RDONLY);
    if (u >= 0) {
        int plain;
        MT_CHECK(ioctl(u, RNDGETENTCNT, &plain) == 0);
        errno = 4321;
        MT_CHECK(ioctl(u, RNDGETENTCNT, n) == 0 && rd_int(n) >= 0);
        check_written(e, "ioctl(RNDGETENTCNT)");
        close(u);
    }

    /* vmsplice from the read end copies the pipe's data out. */
    char *buf = spot(e, 5);
    struct iovec iov = {buf, 5};
    errno = 4321;
    MT_CHECK(vmsplice(fds[0], &iov, 1, 0) == 5 && memcmp(buf, "hello", 5) == 0);
    check_written(e, "vmsplice");
    /* From a buffer to the write end the kernel only reads it. */
    MT_CHECK(vmsplice(fds[1], &iov, 1, 0) == 5);
    MT_CHECK(collected(e, (unsigned char[NP]){0}) == 0);
    close(fds[0]);
    close(fds[1]);
}

static void messages(env *e)
{
    int q = msgget(IPC_PRIVATE, IPC_CREAT | 0600);
    if (q >= 0) {
        struct {
            long type;
            char text[16];
        } out = {3, "message"}, *in = spot(e, sizeof out);
        MT_CHECK(msgsnd(q, &out, sizeof out.text, 0) == 0);
        errno = 4321;
        MT_CHECK(msgrcv(q, in, sizeof in->text, 0, 0) == (ssize_t)sizeof out.text);
        MT_CHECK(in->type == 3 && strcmp(in->text, "message") == 0);
        check_written(e, "msgrcv");
        msgctl(q, IPC_RMID, NULL);
    } else {
        printf("    (no System V message queues here: %s)\n", strerror(errno));
    }
    char name[64];
    snprintf(name, sizeof name, "/mt-kwout-%d", (int)getpid());
    struct mq_attr at = {.mq_maxmsg = 2, .mq_msgsize = 64};
    mqd_t mq = mq_open(name, O_RDWR | O_CREAT | O_EXCL, 0600, &at);
    if (mq != (mqd_t)-1) {
        mq_unlink(name);
        MT_CHECK(mq_send(mq, "posix", 6, 5) == 0);
        char *in = (char *)e->m + 3 * e->ps - 3; /* the 6 bytes straddle */
        unsigned prio = 0;
        errno = 4321;
        MT_CHECK(mq_receive(mq, in, 64, &prio) == 6 && prio == 5 && strcmp(in, "posix") == 0);
        check_written(e, "mq_receive");
        mq_close(mq);
    } else {
        printf("    (no POSIX message queues here: %s)\n", strerror(errno));
    }
}

static void reports(env *e)
{
    /* Buffers exactly as long as what is written, so that it straddles. */
    char want[4096];
    ssize_t n = readlink("/proc/self/exe", want, sizeof want);
    MT_CHECK(n > 1);
    char *buf = spot(e, (size_t)n);
    errno = 4321;
    MT_CHECK(readlink("/proc/self/exe", buf, (size_t)n) == n && memcmp(buf, want, (size_t)n) == 0);
    check_written(e, "readlink");
    errno = 4321;
    MT_CHECK(readlinkat(AT_FDCWD, "/proc/self/exe", buf, (size_t)n) == n);
    check_written(e, "readlinkat");
    errno = 4321;
    MT_CHECK(__readlink_chk("/proc/self/exe", buf, (size_t)n, (size_t)n) == n);
    check_written(e, "__readlink_chk");
    MT_CHECK(getcwd(want, sizeof want) != NULL);
    size_t cl = strlen(want) + 1;
    char *where = spot(e, cl < 2 ? 2 : cl);
    errno = 4321;
    MT_CHECK(getcwd(where, cl < 2 ? 2 : cl) == where && strcmp(where, want) == 0);
    check_written(e, "getcwd");
    errno = 4321;
    MT_CHECK(__getcwd_chk(where, cl < 2 ? 2 : cl, cl < 2 ? 2 : cl) == where);
    check_written(e, "__getcwd_chk");
    struct statfs s0, *sf = spot(e, sizeof *sf);
    MT_CHECK(statfs("/", &s0) == 0);
    errno = 4321;
    MT_CHECK(statfs("/", sf) == 0 && sf->f_type == s0.f_type && sf->f_bsize == s0.f_bsize);
    check_written(e, "statfs");
    int fd = open("/", O_RDONLY | O_DIRECTORY);
    MT_CHECK(fd >= 0);
    errno = 4321;
    MT_CHECK(fstatfs(fd, sf) == 0 && sf->f_type == s0.f_type);
    check_written(e, "fstatfs");
    close(fd);
}

static void run(env *e)
{
    descriptors(e);
    sockets(e);
    statuses(e);
    events(e);
    sleeps(e);
    ioctls(e);
    messages(e);
    reports(e);
}

int main(void) { return kw_env_main(run, "track small kernel outputs into tracked memory (interposer): ok"); }
