/* mt_track_readable and mt_track_read_guarded: reading memory that someone
 * else guards against reads (the Vulkan layer's captures, docs/layer.md).
 *  - readable: 1 for plain memory, 0 where a page is PROT_NONE, a cached
 *    all-readable answer kept while nothing takes reads away; with the
 *    interposer an mprotect(PROT_NONE), mmap(MAP_FIXED, PROT_NONE) or
 *    mremap anywhere makes the next call look again, without it the cached
 *    answer stands (as documented);
 *  - read_guarded: copies PROT_NONE pages' bytes, span by span, leaving the
 *    rest of dst alone, with no fault reaching the process's handler and
 *    the protection unchanged; in a forked child it reads the child's
 *    memory; unmapped memory and bad arguments return errors.
 *  - read_guarded refuses (MT_EUNSUPPORTED) a mapping of an NVIDIA GPU
 *    device node split by an mprotect, whose driver would read it at the
 *    wrong offsets, and reads its first piece: checked with a file of that
 *    name in a private mount namespace (root; said and not checked
 *    elsewhere);
 *  - the descriptors of /proc/self/mem and /proc/self/maps kept open for
 *    that (procfd.c): after an application closed them and got their numbers
 *    back for files of its own (/dev/zero here), the reads still return the
 *    memory's bytes and the application's files stay open; under a seccomp
 *    filter that refuses every open, reads and the list of mappings still
 *    work, and a fork child there gets an error rather than its parent's
 *    memory; four threads reading through them while the process forks
 *    children that read their own copies get the right bytes, and one
 *    descriptor of each file is kept at the end;
 *  - aliasable: 0 for private anonymous memory (and unmapped gaps), 1 where
 *    any part is mapped shared (anonymous, memfd, System V) or backed by a
 *    file (also privately: the file's writes show through), for a range
 *    that only touches such a mapping at one end too.
 * Runs with and without the interposer (the _preload variant), and as on
 * kernels before 6.11 (the _old_kernel variant: /proc/self/maps' text
 * instead of PROCMAP_QUERY). */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <signal.h>
#include <sched.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <stddef.h>
#include <sys/prctl.h>
#include <sys/shm.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "fd_util.h"
#include "memtrack/track.h"
#include "mt_test.h"

#define PS 4096
#define NP 8

/* A fault while reading guarded memory is the failure: said, and the test
 * ends at once (never retrying the access). */
static void on_segv(int sig, siginfo_t *si, void *uc)
{
    (void)sig, (void)si, (void)uc;
    static const char msg[] = "read_guarded faulted\n";
    ssize_t r = write(2, msg, sizeof msg - 1);
    (void)r;
    _exit(99);
}

static unsigned char *fresh(void)
{
    unsigned char *p = mmap(NULL, NP * PS, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    MT_CHECK(p != MAP_FAILED);
    for (size_t i = 0; i < NP * PS; i++)
        p[i] = (unsigned char)(i * 7 + 3);
    return p;
}

static void test_readable(int hooked)
{
    unsigned char *p = fresh();
    uint64_t seen = 0;
    MT_CHECK_INT_EQ(mt_track_readable(p, NP * PS, &seen), 1);
    MT_CHECK(seen != 0);
    MT_CHECK_INT_EQ(mt_track_readable(p + 100, 5000, &seen), 1);
    /* A page taken away: a fresh look says so. */
    MT_CHECK_INT_EQ(mprotect(p + 3 * PS, PS, PROT_NONE), 0);
    uint64_t fresh_seen = 0;
    MT_CHECK_INT_EQ(mt_track_readable(p, NP * PS, &fresh_seen), 0);
    MT_CHECK_UINT_EQ(fresh_seen, 0);
    MT_CHECK_INT_EQ(mt_track_readable(p, 3 * PS, &fresh_seen), 1); /* the pages before it */
    /* The cached answer: with the interposer the mprotect moved the count. */
    MT_CHECK_INT_EQ(mt_track_readable(p, NP * PS, &seen), hooked ? 0 : 1);
    MT_CHECK_INT_EQ(mprotect(p + 3 * PS, PS, PROT_READ), 0);
    seen = 0;
    MT_CHECK_INT_EQ(mt_track_readable(p, NP * PS, &seen), 1);
    /* mmap(MAP_FIXED, PROT_NONE) over a page. */
    MT_CHECK(mmap(p + 5 * PS, PS, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0) != MAP_FAILED);
    MT_CHECK_INT_EQ(mt_track_readable(p, NP * PS, &seen), hooked ? 0 : 1);
    MT_CHECK_INT_EQ(mprotect(p + 5 * PS, PS, PROT_READ | PROT_WRITE), 0);
    seen = 0;
    MT_CHECK_INT_EQ(mt_track_readable(p, NP * PS, &seen), 1);
    /* mremap of unrelated memory moves the count too (pages of any
     * protection may arrive). */
    void *q = mmap(NULL, PS, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    MT_CHECK(q != MAP_FAILED);
    void *q2 = mremap(q, PS, 2 * PS, MREMAP_MAYMOVE);
    MT_CHECK(q2 != MAP_FAILED);
    uint64_t before = seen;
    MT_CHECK_INT_EQ(mt_track_readable(p, NP * PS, &seen), 1);
    MT_CHECK(hooked ? seen != before : seen == before);
    munmap(q2, 2 * PS);
    /* Arguments. */
    MT_CHECK_INT_EQ(mt_track_readable(NULL, PS, &seen), -EINVAL);
    MT_CHECK_INT_EQ(mt_track_readable(p, PS, NULL), -EINVAL);
    MT_CHECK_INT_EQ(mt_track_readable(p, 0, &seen), 1);
    munmap(p, NP * PS);
}

static void test_read_guarded(void)
{
    unsigned char *p = fresh();
    unsigned char want[NP * PS], got[NP * PS];
    memcpy(want, p, sizeof want);
    MT_CHECK_INT_EQ(mprotect(p + 2 * PS, 3 * PS, PROT_NONE), 0);
    struct sigaction sa = {0}, old;
    sa.sa_sigaction = on_segv;
    sa.sa_flags = SA_SIGINFO;
    sigaction(SIGSEGV, &sa, &old);
    /* The whole range, then two spans with the rest of dst left alone. */
    mt_track_span whole = {0, NP * PS};
    memset(got, 0, sizeof got);
    MT_CHECK_INT_EQ(mt_track_read_guarded(got, p, &whole, 1), 0);
    MT_CHECK(memcmp(got, want, sizeof got) == 0);
    mt_track_span two[2] = {{PS + 10, 2 * PS}, {5 * PS - 7, 100}};
    memset(got, 0xa5, sizeof got);
    MT_CHECK_INT_EQ(mt_track_read_guarded(got, p, two, 2), 0);
    for (size_t i = 0; i < sizeof got; i++) {
        int in = (i >= two[0].offset && i < two[0].offset + two[0].length) ||
                 (i >= two[1].offset && i < two[1].offset + two[1].length);
        if (got[i] != (in ? want[i] : 0xa5)) {
            fprintf(stderr, "byte %zu: %#x\n", i, got[i]);
            MT_CHECK(0);
        }
    }
    /* The protection is as it was. */
    uint64_t seen = 0;
    MT_CHECK_INT_EQ(mt_track_readable(p + 2 * PS, PS, &seen), 0);
    /* A forked child reads its own memory, not the parent's. */
    pid_t pid = fork();
    MT_CHECK(pid >= 0);
    if (pid == 0) {
        mprotect(p + 2 * PS, 3 * PS, PROT_READ | PROT_WRITE);
        memset(p + 3 * PS, 0x5a, PS);
        mprotect(p + 2 * PS, 3 * PS, PROT_NONE);
        static unsigned char c[NP * PS];
        mt_track_span s = {3 * PS, PS};
        if (mt_track_read_guarded(c, p, &s, 1) != 0)
            _exit(2);
        for (int i = 0; i < PS; i++)
            if (c[3 * PS + i] != 0x5a)
                _exit(3);
        _exit(0);
    }
    int st;
    MT_CHECK(waitpid(pid, &st, 0) == pid);
    MT_CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);
    memset(got, 0, sizeof got);
    MT_CHECK_INT_EQ(mt_track_read_guarded(got, p, &whole, 1), 0);
    MT_CHECK(memcmp(got, want, sizeof got) == 0); /* the parent's bytes are its own */
    /* Unmapped memory: an error, no fault. */
    munmap(p + 6 * PS, PS);
    MT_CHECK(mt_track_read_guarded(got, p, &whole, 1) < 0);
    sigaction(SIGSEGV, &old, NULL);
    MT_CHECK_INT_EQ(mt_track_read_guarded(NULL, p, &whole, 1), -EINVAL);
    MT_CHECK_INT_EQ(mt_track_read_guarded(got, p, NULL, 1), -EINVAL);
    MT_CHECK_INT_EQ(mt_track_read_guarded(got, p, NULL, 0), 0);
    munmap(p, NP * PS);
}

/* The numbers of this process's descriptors of /proc/PID/<file>. */
static int kept_fds(const char *file, int *out, int cap)
{
    char want[64];
    snprintf(want, sizeof want, "/proc/%d/%s", (int)getpid(), file);
    return fd_numbers_naming(want, out, cap);
}

/* Reads p's guarded page 1 and checks it holds `v`; 0 or the error. */
static int read_page1(unsigned char *p, unsigned char v)
{
    static unsigned char c[NP * PS];
    mt_track_span s = {PS, PS};
    int rc = mt_track_read_guarded(c, p, &s, 1);
    if (rc)
        return rc;
    for (int i = 0; i < PS; i++)
        if (c[PS + i] != v)
            return -EIO;
    return 0;
}

/* Every open refused with EPERM from now on, in this process (a child). */
static void refuse_opens(void)
{
    struct sock_filter f[] = {
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_openat, 2, 0),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_open, 1, 0),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | EPERM),
    };
    struct sock_fprog prog = {sizeof f / sizeof f[0], f};
    if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 || prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog) != 0)
        _exit(77);
}

static int sandbox_child(unsigned char *p)
{
    uint64_t seen = 0;
    /* Its own descriptors first, while it may open. */
    if (read_page1(p, 0x11) != 0 || mt_track_readable(p, PS, &seen) != 1)
        return 2;
    refuse_opens();
    if (open("/proc/self/maps", O_RDONLY) >= 0)
        return 3; /* the filter does not work */
    memset(p, 0x22, PS);
    mprotect(p + PS, PS, PROT_READ | PROT_WRITE);
    memset(p + PS, 0x22, PS);
    mprotect(p + PS, PS, PROT_NONE);
    if (read_page1(p, 0x22) != 0)
        return 4;
    uint64_t seen0 = 0, seen1 = 0; /* one cache per memory asked about */
    if (mt_track_readable(p, PS, &seen0) != 1 || mt_track_readable(p + PS, PS, &seen1) != 0)
        return 5;
    /* A fork child there cannot open its own: an error, never the bytes
     * of the parent's memory through the parent's descriptor. */
    pid_t pid = fork();
    if (pid == 0) {
        mprotect(p + PS, PS, PROT_READ | PROT_WRITE);
        memset(p + PS, 0x33, PS);
        mprotect(p + PS, PS, PROT_NONE);
        int rc = read_page1(p, 0x33);
        _exit(rc == -EPERM ? 0 : rc == 0 ? 7 : 8);
    }
    int st;
    if (pid < 0 || waitpid(pid, &st, 0) != pid || !WIFEXITED(st))
        return 6;
    return WEXITSTATUS(st);
}

static void test_kept_descriptors(void)
{
    unsigned char *p = fresh();
    memset(p + PS, 0x11, PS);
    MT_CHECK_INT_EQ(mprotect(p + PS, PS, PROT_NONE), 0);
    uint64_t seen = 0;
    MT_CHECK_INT_EQ(read_page1(p, 0x11), 0);
    MT_CHECK_INT_EQ(mt_track_readable(p, 2 * PS, &seen), 0);
    /* Kept: one of each. */
    int mem[4], maps[4];
    MT_CHECK_INT_EQ(kept_fds("mem", mem, 4), 1);
    MT_CHECK_INT_EQ(kept_fds("maps", maps, 4), 1);
    /* The application closes them and gets the numbers back for /dev/zero. */
    int keep[2] = {mem[0], maps[0]};
    for (int i = 0; i < 2; i++) {
        int z = open("/dev/zero", O_RDONLY);
        MT_CHECK(z >= 0);
        MT_CHECK(dup2(z, keep[i]) == keep[i]);
        close(z);
    }
    MT_CHECK_INT_EQ(read_page1(p, 0x11), 0); /* not /dev/zero's bytes */
    seen = 0;
    MT_CHECK_INT_EQ(mt_track_readable(p, PS, &seen), 1);
    seen = 0;
    MT_CHECK_INT_EQ(mt_track_readable(p + PS, PS, &seen), 0);
    char link[64], path[64];
    for (int i = 0; i < 2; i++) { /* the application's files stay open */
        snprintf(path, sizeof path, "/proc/self/fd/%d", keep[i]);
        ssize_t len = readlink(path, link, sizeof link - 1);
        MT_CHECK(len > 0);
        link[len] = 0;
        MT_CHECK(strcmp(link, "/dev/zero") == 0);
        close(keep[i]);
    }
    /* A child sandboxed after its start. */
    pid_t pid = fork();
    MT_CHECK(pid >= 0);
    if (pid == 0)
        _exit(sandbox_child(p));
    int st;
    MT_CHECK(waitpid(pid, &st, 0) == pid && WIFEXITED(st));
    if (WEXITSTATUS(st) == 77) {
        printf("kept descriptors: seccomp unavailable, the sandbox not checked\n");
    } else {
        if (WEXITSTATUS(st) != 0)
            printf("kept descriptors: sandboxed child failed at step %d\n", WEXITSTATUS(st));
        MT_CHECK(WEXITSTATUS(st) == 0);
    }
    munmap(p, NP * PS);
    printf("kept descriptors: ok\n");
}

/* Many threads reading through the kept descriptors at once, while the
 * process forks children that read their own copy: every read returns the
 * right bytes, and one descriptor of each file is kept in the end. */
typedef struct reader_arg {
    unsigned char *p;
    _Atomic int *stop;
    int bad;
} reader_arg;

static void *reader(void *arg)
{
    reader_arg *a = arg;
    while (!atomic_load(a->stop)) {
        uint64_t seen = 0;
        if (read_page1(a->p, 0x44) != 0 || mt_track_readable(a->p + PS, PS, &seen) != 0)
            a->bad++;
    }
    return NULL;
}

static void test_kept_concurrent(void)
{
    unsigned char *p = fresh();
    memset(p + PS, 0x44, PS);
    MT_CHECK_INT_EQ(mprotect(p + PS, PS, PROT_NONE), 0);
    _Atomic int stop = 0;
    enum { NT = 4 };
    reader_arg a[NT];
    pthread_t th[NT];
    for (int i = 0; i < NT; i++) {
        a[i] = (reader_arg){p, &stop, 0};
        MT_CHECK(pthread_create(&th[i], NULL, reader, &a[i]) == 0);
    }
    for (int k = 0; k < 20; k++) {
        pid_t pid = fork();
        MT_CHECK(pid >= 0);
        if (pid == 0) {
            mprotect(p + PS, PS, PROT_READ | PROT_WRITE);
            memset(p + PS, 0x55, PS);
            mprotect(p + PS, PS, PROT_NONE);
            _exit(read_page1(p, 0x55) == 0 ? 0 : 1);
        }
        int st;
        MT_CHECK(waitpid(pid, &st, 0) == pid && WIFEXITED(st) && WEXITSTATUS(st) == 0);
    }
    atomic_store(&stop, 1);
    for (int i = 0; i < NT; i++) {
        MT_CHECK(pthread_join(th[i], NULL) == 0);
        MT_CHECK_INT_EQ(a[i].bad, 0);
    }
    int fds[4];
    MT_CHECK_INT_EQ(kept_fds("mem", fds, 4), 1);
    MT_CHECK_INT_EQ(kept_fds("maps", fds, 4), 1);
    munmap(p, NP * PS);
    printf("kept descriptors, 4 threads and 20 forks: ok\n");
}

static void test_aliasable(void)
{
    unsigned char *p = fresh();
    MT_CHECK_INT_EQ(mt_track_aliasable(p, NP * PS), 0);
    MT_CHECK_INT_EQ(mt_track_aliasable(p, 0), 0);
    MT_CHECK_ERR(mt_track_aliasable(NULL, PS), -EINVAL);
    /* A shared page in the middle (MAP_FIXED over one page): only ranges
     * that reach it say so. */
    MT_CHECK(mmap(p + 3 * PS, PS, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS | MAP_FIXED, -1, 0) ==
             p + 3 * PS);
    MT_CHECK_INT_EQ(mt_track_aliasable(p, NP * PS), 1);
    MT_CHECK_INT_EQ(mt_track_aliasable(p, 3 * PS), 0);
    MT_CHECK_INT_EQ(mt_track_aliasable(p + 3 * PS + PS - 1, 1), 1);
    MT_CHECK_INT_EQ(mt_track_aliasable(p + 4 * PS, 4 * PS), 0);
    /* An unmapped gap is nothing that could change. */
    MT_CHECK_INT_EQ(munmap(p + 5 * PS, PS), 0);
    MT_CHECK_INT_EQ(mt_track_aliasable(p + 4 * PS, 4 * PS), 0);
    munmap(p, NP * PS);
    /* A memfd, shared and private; a file mapped privately (its write(2)s
     * show in pages not yet copied); System V shared memory. */
    int fd = memfd_create("aliasable", MFD_CLOEXEC);
    MT_CHECK(fd >= 0);
    MT_CHECK_INT_EQ(ftruncate(fd, 2 * PS), 0);
    void *ms = mmap(NULL, 2 * PS, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    void *mp = mmap(NULL, 2 * PS, PROT_READ | PROT_WRITE, MAP_PRIVATE, fd, 0);
    MT_CHECK(ms != MAP_FAILED && mp != MAP_FAILED);
    MT_CHECK_INT_EQ(mt_track_aliasable(ms, 2 * PS), 1);
    MT_CHECK_INT_EQ(mt_track_aliasable(mp, 2 * PS), 1);
    munmap(ms, 2 * PS);
    munmap(mp, 2 * PS);
    close(fd);
    char path[] = "/tmp/mt_aliasable_XXXXXX";
    fd = mkstemp(path);
    MT_CHECK(fd >= 0);
    unlink(path);
    MT_CHECK_INT_EQ(ftruncate(fd, PS), 0);
    mp = mmap(NULL, PS, PROT_READ | PROT_WRITE, MAP_PRIVATE, fd, 0);
    MT_CHECK(mp != MAP_FAILED);
    MT_CHECK_INT_EQ(mt_track_aliasable(mp, PS), 1);
    munmap(mp, PS);
    close(fd);
    int id = shmget(IPC_PRIVATE, PS, IPC_CREAT | 0600);
    if (id >= 0) {
        void *sv = shmat(id, NULL, 0);
        shmctl(id, IPC_RMID, NULL);
        MT_CHECK(sv != (void *)-1);
        MT_CHECK_INT_EQ(mt_track_aliasable(sv, PS), 1);
        shmdt(sv);
    } else {
        printf("aliasable: no System V shared memory here (%d), not checked\n", errno);
    }
    printf("aliasable: ok\n");
}

/* In a child with a private mount namespace and a tmpfs over /dev: a file
 * named as NVIDIA's first GPU device node, mapped from offset 0 and split by
 * an mprotect as the signal backend's arming splits the driver's mapping.
 * Exit 0 checked, 77 when the namespace cannot be had. */
static int nvidia_child(void)
{
    if (unshare(CLONE_NEWNS) != 0 || mount("none", "/", NULL, MS_REC | MS_PRIVATE, NULL) != 0 ||
        mount("memtrack-test", "/dev", "tmpfs", 0, NULL) != 0)
        return 77;
    static const char *const names[] = {"/dev/nvidia0", "/dev/nvidia12", "/dev/nvidiactl", "/dev/nvidia-uvm"};
    for (int k = 0; k < 4; k++) {
        int fd = open(names[k], O_RDWR | O_CREAT, 0600);
        if (fd < 0 || ftruncate(fd, 3 * PS) != 0)
            return 1;
        unsigned char *m = mmap(NULL, 3 * PS, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
        if (m == MAP_FAILED)
            return 1;
        for (int i = 0; i < 3 * PS; i++)
            m[i] = (unsigned char)(i / PS + 1);
        if (mprotect(m + PS, PS, PROT_NONE) != 0) /* pieces at offsets 0, 0x1000, 0x2000 */
            return 1;
        unsigned char dst[3 * PS];
        memset(dst, 0, sizeof dst);
        mt_track_span first = {0, PS}, later = {PS, PS}, last = {2 * PS, 100}, both[2] = {{0, 10}, {2 * PS, 10}};
        int gpu = k < 2;
        if (mt_track_read_guarded(dst, m, &first, 1) != 0 || dst[0] != 1 || dst[PS - 1] != 1)
            return 2; /* the unsplit start is read as ever */
        int want = gpu ? MT_EUNSUPPORTED : 0;
        if (mt_track_read_guarded(dst, m, &later, 1) != want || mt_track_read_guarded(dst, m, &last, 1) != want ||
            mt_track_read_guarded(dst, m, both, 2) != want)
            return 3;
        if (!gpu && (dst[PS] != 2 || dst[2 * PS] != 3))
            return 4; /* other nodes' pieces are read */
        munmap(m, 3 * PS);
        close(fd);
    }
    return 0;
}

static void test_nvidia_split(void)
{
    pid_t pid = fork();
    if (pid == 0)
        _exit(nvidia_child());
    int st;
    MT_CHECK(waitpid(pid, &st, 0) == pid && WIFEXITED(st));
    if (WEXITSTATUS(st) == 77) {
        printf("nvidia split: no private mount namespace here, not checked\n");
        return;
    }
    if (WEXITSTATUS(st) != 0)
        printf("nvidia split: child failed at step %d\n", WEXITSTATUS(st));
    MT_CHECK(WEXITSTATUS(st) == 0);
    printf("nvidia split: ok\n");
}

int main(void)
{
    int hooked = mt_track_preload_status() == 1;
    printf("interposer %s\n", hooked ? "attached" : "absent");
    test_readable(hooked);
    test_read_guarded();
    test_nvidia_split();
    test_kept_descriptors();
    test_kept_concurrent();
    test_aliasable();
    printf("ok\n");
    return 0;
}
