/* track + interposer: system calls in which the kernel writes tracked memory.
 *
 * Every call is made twice with identical input: into an untracked reference
 * region R and into tracked memory T laid out the same way. Results must be
 * identical (return value, errno, every byte of the region, lengths and
 * flags the kernel writes back), the shadow of T updated only from reported
 * runs must equal T, and no page outside the call's destination may be
 * reported. Covered: read, pread, pread64, readv, preadv, preadv2, recv,
 * recvfrom, recvmsg (name, control data and the msghdr itself in tracked
 * memory; MSG_TRUNC), recvmmsg, fread and fread_unlocked (large: libc reads
 * straight into the buffer), the _FORTIFY_SOURCE entry points, a short read
 * into a page the application made read-only, process_vm_readv.
 *
 * Then the races: datagrams received into tracked memory while another
 * thread collects without pause (a datagram is consumed even when the copy
 * fails, so one EFAULT loses it: every datagram must arrive, in order), and
 * read() from a SIGALRM handler into tracked memory while the interrupted
 * thread collects. Both backends; needs the interposer (exit 77 without). */
#define _GNU_SOURCE
#include <fcntl.h>
#include <pthread.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/uio.h>
#include <sys/un.h>

#include "track_child.h"

ssize_t __read_chk(int fd, void *buf, size_t nbytes, size_t buflen);
ssize_t __pread_chk(int fd, void *buf, size_t nbytes, off_t offset, size_t buflen);
ssize_t __recv_chk(int fd, void *buf, size_t n, size_t buflen, int flags);
ssize_t __recvfrom_chk(int fd, void *buf, size_t n, size_t buflen, int flags, struct sockaddr *addr,
                       socklen_t *addrlen);
size_t __fread_chk(void *ptr, size_t ptrlen, size_t size, size_t n, FILE *stream);

#define NP 24
#define BASE_OFF 100 /* the range starts inside a page */

typedef struct region {
    unsigned char *map; /* NP pages */
    unsigned char *base; /* map + BASE_OFF: where the calls write */
} region;

typedef struct env {
    mt_tracker *t;
    mt_range_id id;
    region ref, trk;
    unsigned char *shadow; /* of trk.base[0 .. len) */
    size_t len;
    size_t ps;
    int file_fd;             /* a file with known content */
    int dgram[2][2];         /* [ref|trk] -> AF_UNIX datagram pair, bound addresses */
    int pipe_fd[2][2];
} env;

static unsigned char pattern(size_t i, unsigned seed) { return (unsigned char)(i * 131 + seed * 7 + 3); }

static void fill_file(env *e)
{
    char path[] = "/tmp/mt_kwrite_XXXXXX";
    e->file_fd = mkstemp(path);
    MT_CHECK(e->file_fd >= 0);
    unlink(path);
    static unsigned char buf[200000];
    for (size_t i = 0; i < sizeof buf; i++)
        buf[i] = pattern(i, 1);
    MT_CHECK_INT_EQ(write(e->file_fd, buf, sizeof buf), (long)sizeof buf);
}

static void bound_pair(int sv[2], int which)
{
    /* Bound abstract addresses, so that recvfrom/recvmsg return a name. */
    for (int k = 0; k < 2; k++) {
        sv[k] = socket(AF_UNIX, SOCK_DGRAM, 0);
        MT_CHECK(sv[k] >= 0);
        struct sockaddr_un a = {.sun_family = AF_UNIX};
        snprintf(a.sun_path + 1, sizeof a.sun_path - 1, "mt_kw_%d_%d_%d", (int)getpid(), which, k);
        MT_CHECK(bind(sv[k], (struct sockaddr *)&a, sizeof a) == 0);
    }
    for (int k = 0; k < 2; k++) {
        struct sockaddr_un a;
        socklen_t l = sizeof a;
        MT_CHECK(getsockname(sv[1 - k], (struct sockaddr *)&a, &l) == 0);
        MT_CHECK(connect(sv[k], (struct sockaddr *)&a, l) == 0);
    }
}

static void send_both(env *e, size_t n, unsigned seed, int with_fd)
{
    unsigned char buf[8192];
    for (size_t i = 0; i < n; i++)
        buf[i] = pattern(i, seed);
    for (int w = 0; w < 2; w++) {
        struct iovec iov = {buf, n};
        struct msghdr m = {.msg_iov = &iov, .msg_iovlen = 1};
        union {
            struct cmsghdr h;
            char b[CMSG_SPACE(sizeof(int))];
        } ctl;
        if (with_fd) {
            m.msg_control = ctl.b;
            m.msg_controllen = sizeof ctl.b;
            struct cmsghdr *c = CMSG_FIRSTHDR(&m);
            c->cmsg_level = SOL_SOCKET;
            c->cmsg_type = SCM_RIGHTS;
            c->cmsg_len = CMSG_LEN(sizeof(int));
            int fd = 0; /* stdin: received as some new descriptor number */
            memcpy(CMSG_DATA(c), &fd, sizeof fd);
        }
        MT_CHECK_INT_EQ(sendmsg(e->dgram[w][1], &m, 0), (long)n);
    }
}

static void feed_pipes(env *e, size_t n, unsigned seed)
{
    unsigned char buf[16384];
    for (size_t i = 0; i < n; i++)
        buf[i] = pattern(i, seed);
    for (int w = 0; w < 2; w++)
        MT_CHECK_INT_EQ(write(e->pipe_fd[w][1], buf, n), (long)n);
}

/* One call, made on region r (w = 0 reference, 1 tracked). Returns its
 * result; errno is saved in *err. */
typedef long (*call_fn)(env *e, int w, region *r, int *err);

/* Bytes of a region a call may write, as [lo, hi) offsets of its map. */
typedef struct span {
    size_t lo, hi;
} span;

static void check_call(env *e, const char *name, call_fn fn, const span *dest, int ndest)
{
    int err0 = 0, err1 = 0;
    errno = 0;
    long r0 = fn(e, 0, &e->ref, &err0);
    errno = 0;
    long r1 = fn(e, 1, &e->trk, &err1);
    if (r0 != r1 || (r0 < 0 && err0 != err1)) {
        fprintf(stderr, "%s: tracked %ld (errno %d), reference %ld (errno %d)\n", name, r1, err1, r0, err0);
        MT_CHECK(0);
    }
    MT_CHECK_MEM_EQ(e->trk.map, e->ref.map, NP * e->ps);
    /* Reported pages: all inside the destination, and the shadow catches up. */
    mt_dirty_run runs[64];
    long n;
    do {
        n = mt_tracker_collect(e->t, e->id, runs, 64);
        MT_CHECK_OK(n);
        for (long i = 0; i < n; i++) {
            size_t a = runs[i].offset, b = a + runs[i].length;
            for (size_t x = a; x < b; x++)
                e->shadow[x] = e->trk.base[x];
            for (size_t pa = (a + BASE_OFF) / e->ps * e->ps; pa < b + BASE_OFF; pa += e->ps) {
                int ok = 0;
                for (int k = 0; k < ndest; k++)
                    if (pa < dest[k].hi && pa + e->ps > dest[k].lo / e->ps * e->ps)
                        ok = 1;
                if (!ok) {
                    fprintf(stderr, "%s: page at map offset %zu reported, not a destination\n", name, pa);
                    MT_CHECK(0);
                }
            }
        }
    } while (n == 64);
    MT_CHECK_MEM_EQ(e->shadow, e->trk.base, e->len);
    printf("    %-38s %6ld ok\n", name, r1);
}

/* ---- the calls (offsets are from the start of the region's map) ---- */

#define SAVE_ERR(expr)                                                                          \
    ({                                                                                          \
        long r_ = (long)(expr);                                                                 \
        *err = errno;                                                                           \
        r_;                                                                                     \
    })
#define AT(r, off) ((void *)((r)->map + (off)))

/* Sender addresses differ between the two socket pairs by one character:
 * blank the received name once its length has been written back. */
static void blank(region *r, size_t off, size_t len) { memset(AT(r, off), 0, len); }

static long c_read(env *e, int w, region *r, int *err)
{
    return SAVE_ERR(read(e->pipe_fd[w][0], AT(r, 3000), 9000));
}

static long c_read_short(env *e, int w, region *r, int *err)
{
    return SAVE_ERR(read(e->pipe_fd[w][0], AT(r, 110), 60000)); /* more than the pipe holds */
}

static long c_pread(env *e, int w, region *r, int *err)
{
    (void)w;
    return SAVE_ERR(pread(e->file_fd, AT(r, 5000), 20000, 777));
}

static long c_pread64(env *e, int w, region *r, int *err)
{
    (void)w;
    return SAVE_ERR(pread64(e->file_fd, AT(r, 41000), 9000, 1234));
}

static long c_readv(env *e, int w, region *r, int *err)
{
    struct iovec v[3] = {{AT(r, 200), 50}, {AT(r, 8000), 5000}, {AT(r, 30000), 1000}};
    return SAVE_ERR(readv(e->pipe_fd[w][0], v, 3));
}

static long c_preadv(env *e, int w, region *r, int *err)
{
    (void)w;
    struct iovec v[2] = {{AT(r, 60000), 4000}, {AT(r, 300), 300}};
    return SAVE_ERR(preadv(e->file_fd, v, 2, 99));
}

static long c_preadv2(env *e, int w, region *r, int *err)
{
    (void)w;
    struct iovec v[2] = {{AT(r, 70000), 9000}, {AT(r, 50000), 10}};
    return SAVE_ERR(preadv2(e->file_fd, v, 2, 5000, 0));
}

static long c_recv(env *e, int w, region *r, int *err)
{
    return SAVE_ERR(recv(e->dgram[w][0], AT(r, 4090), 3000, 0));
}

static long c_recvfrom(env *e, int w, region *r, int *err)
{
    /* The address and its length live in tracked memory too. */
    socklen_t *len = AT(r, 20000);
    *len = sizeof(struct sockaddr_un);
    long n = SAVE_ERR(recvfrom(e->dgram[w][0], AT(r, 12000), 2000, 0, AT(r, 24576), len));
    blank(r, 24576, sizeof(struct sockaddr_un));
    return n;
}

static long c_recvmsg(env *e, int w, region *r, int *err)
{
    /* msghdr, iovecs, name and control buffer all in the region. */
    struct msghdr *m = AT(r, 36000);
    struct iovec *v = AT(r, 37000);
    v[0] = (struct iovec){AT(r, 38000), 700};
    v[1] = (struct iovec){AT(r, 45000), 800};
    memset(m, 0, sizeof *m);
    m->msg_iov = v;
    m->msg_iovlen = 2;
    m->msg_name = AT(r, 52000);
    m->msg_namelen = sizeof(struct sockaddr_un);
    m->msg_control = AT(r, 56000);
    m->msg_controllen = CMSG_SPACE(sizeof(int));
    long n = SAVE_ERR(recvmsg(e->dgram[w][0], m, 0));
    /* The received descriptor: close it and blank its number (differs). */
    struct cmsghdr *c = n >= 0 ? CMSG_FIRSTHDR(m) : NULL;
    if (c && c->cmsg_type == SCM_RIGHTS) {
        int fd;
        memcpy(&fd, CMSG_DATA(c), sizeof fd);
        close(fd);
        memset(CMSG_DATA(c), 0, sizeof fd);
    }
    /* Pointers into each region differ between the two: blank them. */
    m->msg_iov = NULL;
    m->msg_name = NULL;
    m->msg_control = NULL;
    memset(v, 0, 2 * sizeof *v);
    blank(r, 52000, sizeof(struct sockaddr_un));
    return n;
}

static long c_recvmsg_trunc(env *e, int w, region *r, int *err)
{
    struct msghdr m;
    memset(&m, 0, sizeof m);
    struct iovec v = {AT(r, 61000), 100}; /* the datagram is larger */
    m.msg_iov = &v;
    m.msg_iovlen = 1;
    long n = SAVE_ERR(recvmsg(e->dgram[w][0], &m, 0));
    memcpy(AT(r, 62000), &m.msg_flags, sizeof m.msg_flags); /* compared with the reference's */
    return n;
}

static long c_recvmmsg(env *e, int w, region *r, int *err)
{
    struct mmsghdr *mm = AT(r, 64000);
    struct iovec *v = AT(r, 65000);
    memset(mm, 0, 3 * sizeof *mm);
    for (int k = 0; k < 3; k++) {
        v[k] = (struct iovec){AT(r, 66000 + (size_t)k * 3000), 2500};
        mm[k].msg_hdr.msg_iov = &v[k];
        mm[k].msg_hdr.msg_iovlen = 1;
        mm[k].msg_hdr.msg_name = AT(r, 76000 + (size_t)k * 200);
        mm[k].msg_hdr.msg_namelen = sizeof(struct sockaddr_un);
    }
    long n = SAVE_ERR(recvmmsg(e->dgram[w][0], mm, 3, MSG_DONTWAIT, NULL));
    for (int k = 0; k < 3; k++) {
        mm[k].msg_hdr.msg_iov = NULL;
        mm[k].msg_hdr.msg_name = NULL;
        blank(r, 76000 + (size_t)k * 200, sizeof(struct sockaddr_un));
    }
    memset(v, 0, 3 * sizeof *v);
    return n;
}

static long c_fread(env *e, int w, region *r, int *err)
{
    (void)w;
    FILE *f = fdopen(dup(e->file_fd), "rb");
    MT_CHECK(f != NULL);
    fseek(f, 321, SEEK_SET);
    long n = SAVE_ERR(fread(AT(r, 1000), 1, 40000, f));
    fclose(f);
    return n;
}

static long c_fread_unlocked(env *e, int w, region *r, int *err)
{
    (void)w;
    FILE *f = fdopen(dup(e->file_fd), "rb");
    MT_CHECK(f != NULL);
    fseek(f, 4321, SEEK_SET);
    long n = SAVE_ERR(fread_unlocked(AT(r, 50000), 7, 4000, f));
    fclose(f);
    return n;
}

static long c_read_chk(env *e, int w, region *r, int *err)
{
    return SAVE_ERR(__read_chk(e->pipe_fd[w][0], AT(r, 7000), 5000, 6000));
}

static long c_pread_chk(env *e, int w, region *r, int *err)
{
    (void)w;
    return SAVE_ERR(__pread_chk(e->file_fd, AT(r, 20000), 9000, 10, 9000));
}

static long c_recv_chk(env *e, int w, region *r, int *err)
{
    return SAVE_ERR(__recv_chk(e->dgram[w][0], AT(r, 33000), 3000, 3000, 0));
}

static long c_recvfrom_chk(env *e, int w, region *r, int *err)
{
    socklen_t len = sizeof(struct sockaddr_un);
    struct sockaddr_un addr;
    return SAVE_ERR(__recvfrom_chk(e->dgram[w][0], AT(r, 80000), 4000, 4000, 0, (struct sockaddr *)&addr,
                                   &len));
}

static long c_fread_chk(env *e, int w, region *r, int *err)
{
    (void)w;
    FILE *f = fdopen(dup(e->file_fd), "rb");
    MT_CHECK(f != NULL);
    long n = SAVE_ERR(__fread_chk(AT(r, 103), 30000, 3, 10000, f));
    fclose(f);
    return n;
}

static long c_process_vm_readv(env *e, int w, region *r, int *err)
{
    (void)e;
    (void)w;
    static unsigned char src[20000];
    for (size_t i = 0; i < sizeof src; i++)
        src[i] = pattern(i, 9);
    struct iovec local[2] = {{AT(r, 85000), 6000}, {AT(r, 115), 100}};
    struct iovec remote = {src, 6100};
    return SAVE_ERR(process_vm_readv(getpid(), local, 2, &remote, 1, 0));
}

/* The application made a destination page read-only: the kernel copies up
 * to it and stops, as without tracking. */
static long c_read_app_readonly(env *e, int w, region *r, int *err)
{
    unsigned char *page = AT(r, 10 * e->ps);
    MT_CHECK(mprotect(page, e->ps, PROT_READ) == 0);
    long n = SAVE_ERR(read(e->pipe_fd[w][0], page - 1000, 6000));
    MT_CHECK(mprotect(page, e->ps, PROT_READ | PROT_WRITE) == 0);
    return n;
}

static void setup(env *e, mt_track_backend be)
{
    memset(e, 0, sizeof *e);
    e->ps = tu_page();
    MT_CHECK(NP * e->ps >= 90000 + BASE_OFF + 2 * e->ps);
    e->ref.map = tu_map(NP * e->ps);
    e->trk.map = tu_map(NP * e->ps);
    e->ref.base = e->ref.map + BASE_OFF;
    e->trk.base = e->trk.map + BASE_OFF;
    for (size_t i = 0; i < NP * e->ps; i++)
        e->ref.map[i] = e->trk.map[i] = pattern(i, 5);
    mt_tracker_opts o = {.backend = be};
    MT_CHECK_OK(mt_tracker_create(&o, &e->t));
    e->len = NP * e->ps - BASE_OFF - 7;
    MT_CHECK_OK(mt_tracker_add(e->t, e->trk.base, e->len, NULL, &e->id));
    e->shadow = malloc(e->len);
    MT_CHECK(e->shadow != NULL);
    memcpy(e->shadow, e->trk.base, e->len);
    fill_file(e);
    for (int w = 0; w < 2; w++) {
        bound_pair(e->dgram[w], w);
        MT_CHECK(pipe(e->pipe_fd[w]) == 0);
    }
}

static void teardown(env *e)
{
    mt_tracker_destroy(e->t);
    munmap(e->ref.map, NP * e->ps);
    munmap(e->trk.map, NP * e->ps);
    free(e->shadow);
    close(e->file_fd);
    for (int w = 0; w < 2; w++)
        for (int k = 0; k < 2; k++) {
            close(e->dgram[w][k]);
            close(e->pipe_fd[w][k]);
        }
}

static void calls(mt_track_backend be)
{
    env e;
    setup(&e, be);
    printf("  %s: each call into tracked memory = the same call into untracked memory\n",
           mt_track_backend_name(be));
#define SPAN1(a, b) (span[]){{a, b}}, 1
    size_t sun = sizeof(struct sockaddr_un);
    feed_pipes(&e, 9000, 1);
    check_call(&e, "read", c_read, SPAN1(3000, 12000));
    feed_pipes(&e, 700, 2);
    check_call(&e, "read (short)", c_read_short, SPAN1(110, 60110));
    check_call(&e, "pread", c_pread, SPAN1(5000, 25000));
    check_call(&e, "pread64", c_pread64, SPAN1(41000, 50000));
    feed_pipes(&e, 6050, 3);
    check_call(&e, "readv", c_readv, (span[]){{200, 250}, {8000, 13000}, {30000, 31000}}, 3);
    check_call(&e, "preadv", c_preadv, (span[]){{60000, 64000}, {300, 600}}, 2);
    check_call(&e, "preadv2", c_preadv2, (span[]){{70000, 79000}, {50000, 50010}}, 2);
    send_both(&e, 2500, 4, 0);
    check_call(&e, "recv", c_recv, SPAN1(4090, 7090));
    send_both(&e, 1500, 5, 0);
    check_call(&e, "recvfrom (address in tracked memory)", c_recvfrom,
               (span[]){{12000, 14000}, {24576, 24576 + sun}, {20000, 20004}}, 3);
    send_both(&e, 1400, 6, 1);
    check_call(&e, "recvmsg (msghdr, name, SCM_RIGHTS)", c_recvmsg,
               (span[]){{36000, 37100}, {38000, 38700}, {45000, 45800}, {52000, 52000 + sun}, {56000, 56100}}, 5);
    send_both(&e, 900, 7, 0);
    check_call(&e, "recvmsg (MSG_TRUNC)", c_recvmsg_trunc, (span[]){{61000, 61100}, {62000, 62004}}, 2);
    send_both(&e, 2000, 8, 0);
    send_both(&e, 100, 9, 0);
    check_call(&e, "recvmmsg (2 of 3)", c_recvmmsg, SPAN1(64000, 77000));
    check_call(&e, "fread (large)", c_fread, SPAN1(1000, 41000));
    check_call(&e, "fread_unlocked", c_fread_unlocked, SPAN1(50000, 78000));
    feed_pipes(&e, 5000, 10);
    check_call(&e, "__read_chk", c_read_chk, SPAN1(7000, 12000));
    check_call(&e, "__pread_chk", c_pread_chk, SPAN1(20000, 29000));
    send_both(&e, 3000, 11, 0);
    check_call(&e, "__recv_chk", c_recv_chk, SPAN1(33000, 36000));
    send_both(&e, 3900, 12, 0);
    check_call(&e, "__recvfrom_chk", c_recvfrom_chk, SPAN1(80000, 84000));
    check_call(&e, "__fread_chk", c_fread_chk, SPAN1(103, 30103));
    check_call(&e, "process_vm_readv", c_process_vm_readv, (span[]){{85000, 91000}, {115, 215}}, 2);
    feed_pipes(&e, 6000, 13);
    check_call(&e, "read, app's read-only page inside", c_read_app_readonly,
               SPAN1(10 * e.ps - 1000, 10 * e.ps + 5000));
    mt_range_stats st;
    MT_CHECK_OK(mt_tracker_stats(e.t, e.id, &st));
    if (be == MT_TRACK_SIGNAL)
        MT_CHECK(st.kernel_writes >= 20);
    teardown(&e);
}

/* ---- races ---- */

#define DGRAMS 20000
#define DLEN 1500

typedef struct race {
    mt_tracker *t;
    mt_range_id id;
    unsigned char *base;
    size_t len;
    int sv[2];
    _Atomic int done;
    long collects;
} race;

static void *dgram_sender(void *arg)
{
    race *r = arg;
    unsigned char buf[DLEN];
    for (uint32_t seq = 0; seq < DGRAMS; seq++) {
        memset(buf, (int)(seq & 0xff), sizeof buf);
        memcpy(buf, &seq, sizeof seq);
        MT_CHECK_INT_EQ(send(r->sv[1], buf, sizeof buf, 0), DLEN);
    }
    return NULL;
}

static void *collector(void *arg)
{
    race *r = arg;
    mt_dirty_run runs[64];
    while (!atomic_load(&r->done)) {
        MT_CHECK_OK(mt_tracker_collect(r->t, r->id, runs, 64));
        r->collects++;
    }
    return NULL;
}

static void dgram_race(mt_track_backend be)
{
    race r;
    memset(&r, 0, sizeof r);
    size_t ps = tu_page();
    r.len = 16 * ps;
    r.base = tu_map(r.len);
    mt_tracker_opts o = {.backend = be};
    MT_CHECK_OK(mt_tracker_create(&o, &r.t));
    MT_CHECK_OK(mt_tracker_add(r.t, r.base, r.len, NULL, &r.id));
    MT_CHECK(socketpair(AF_UNIX, SOCK_DGRAM, 0, r.sv) == 0);
    int big = 1 << 20;
    setsockopt(r.sv[0], SOL_SOCKET, SO_RCVBUF, &big, sizeof big);
    pthread_t snd, col;
    pthread_create(&col, NULL, collector, &r);
    pthread_create(&snd, NULL, dgram_sender, &r);
    /* Each datagram lands across a page boundary, somewhere else each time. */
    for (uint32_t seq = 0; seq < DGRAMS; seq++) {
        size_t off = ((size_t)seq * 2777) % (r.len - DLEN);
        ssize_t n = recv(r.sv[0], r.base + off, DLEN, 0);
        if (n != DLEN) {
            fprintf(stderr, "datagram %u: recv returned %zd, errno %d\n", seq, n, errno);
            MT_CHECK(0);
        }
        uint32_t got;
        memcpy(&got, r.base + off, sizeof got);
        MT_CHECK_UINT_EQ(got, seq); /* none lost */
        MT_CHECK_INT_EQ(r.base[off + DLEN - 1], (unsigned char)(seq & 0xff));
    }
    pthread_join(snd, NULL);
    atomic_store(&r.done, 1);
    pthread_join(col, NULL);
    printf("  %-6s %d datagrams received into tracked memory during %ld collects: none lost\n",
           mt_track_backend_name(be), DGRAMS, r.collects);
    close(r.sv[0]);
    close(r.sv[1]);
    mt_tracker_destroy(r.t);
    munmap(r.base, r.len);
}

static race g_sig;
static int g_sig_pipe[2];
static _Atomic long g_sig_reads, g_sig_bad;
static _Atomic unsigned g_sig_next;

/* Async-signal-safe: read(2) into tracked memory from a signal handler. */
static void on_alarm(int sig)
{
    (void)sig;
    int saved = errno;
    unsigned k = atomic_fetch_add(&g_sig_next, 1);
    unsigned char *dst = g_sig.base + ((size_t)k * 1237) % (g_sig.len - 256);
    ssize_t n = read(g_sig_pipe[0], dst, 256);
    if (n > 0)
        atomic_fetch_add(&g_sig_reads, 1);
    else if (n < 0 && errno != EAGAIN)
        atomic_fetch_add(&g_sig_bad, 1);
    errno = saved;
}

static void *pipe_feeder(void *arg)
{
    (void)arg;
    /* The timer's signal is for the collecting thread. */
    sigset_t alrm;
    sigemptyset(&alrm);
    sigaddset(&alrm, SIGALRM);
    pthread_sigmask(SIG_BLOCK, &alrm, NULL);
    unsigned char buf[4096];
    memset(buf, 0x3c, sizeof buf);
    while (!atomic_load(&g_sig.done))
        if (write(g_sig_pipe[1], buf, sizeof buf) < 0)
            sched_yield();
    return NULL;
}

static void signal_read_race(mt_track_backend be)
{
    memset((void *)&g_sig, 0, sizeof g_sig);
    atomic_store(&g_sig_reads, 0);
    atomic_store(&g_sig_bad, 0);
    size_t ps = tu_page();
    g_sig.len = 8 * ps;
    g_sig.base = tu_map(g_sig.len);
    mt_tracker_opts o = {.backend = be};
    MT_CHECK_OK(mt_tracker_create(&o, &g_sig.t));
    MT_CHECK_OK(mt_tracker_add(g_sig.t, g_sig.base, g_sig.len, NULL, &g_sig.id));
    MT_CHECK(pipe2(g_sig_pipe, O_NONBLOCK) == 0);
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_alarm;
    sigemptyset(&sa.sa_mask);
    MT_CHECK(sigaction(SIGALRM, &sa, NULL) == 0);
    pthread_t feeder;
    pthread_create(&feeder, NULL, pipe_feeder, NULL);
    struct itimerval it = {{0, 200}, {0, 200}};
    MT_CHECK(setitimer(ITIMER_REAL, &it, NULL) == 0);
    mt_dirty_run runs[64];
    long collects = 0;
#ifdef MT_SANITIZER_BUILD
    long want = 200;
#else
    long want = 2000;
#endif
    while (atomic_load(&g_sig_reads) < want && collects < 50000000) {
        MT_CHECK_OK(mt_tracker_collect(g_sig.t, g_sig.id, runs, 64));
        collects++;
    }
    struct itimerval off = {{0, 0}, {0, 0}};
    setitimer(ITIMER_REAL, &off, NULL);
    atomic_store(&g_sig.done, 1);
    pthread_join(feeder, NULL);
    MT_CHECK_INT_EQ(atomic_load(&g_sig_bad), 0);
    MT_CHECK(atomic_load(&g_sig_reads) >= want);
    printf("  %-6s %ld reads from a SIGALRM handler during %ld collects on the same thread: no EFAULT\n",
           mt_track_backend_name(be), atomic_load(&g_sig_reads), collects);
    signal(SIGALRM, SIG_DFL);
    close(g_sig_pipe[0]);
    close(g_sig_pipe[1]);
    mt_tracker_destroy(g_sig.t);
    munmap(g_sig.base, g_sig.len);
}

int main(void)
{
    if (!tc_need_interposer())
        return 77;
    mt_track_backend be[2];
    int nb = tu_backends(be);
    for (int i = 0; i < nb; i++) {
        calls(be[i]);
        dgram_race(be[i]);
        signal_read_race(be[i]);
    }
    puts("track kernel writes (interposer): ok");
    return 0;
}
