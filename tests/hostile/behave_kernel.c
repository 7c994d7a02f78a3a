/* Behaviours: the kernel writes into mapped memory (assets streamed straight
 * into staging buffers). With page protection, such a write faults in kernel
 * mode, raises no signal and fails with EFAULT unless the capture arranges
 * for it. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <aio.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/random.h>
#include <sys/sendfile.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../uring_util.h"
#include "hv.h"

#define FILE_BYTES (3u << 20) /* larger than stdio's buffer: fread goes straight to read(2) */

/* A temporary file holding hv_pattern(seed 77), unlinked at once. */
static int pattern_file(unsigned char **content)
{
    char path[] = "/tmp/memtrack-hostile-XXXXXX";
    int fd = mkstemp(path);
    if (fd < 0)
        hv_die("mkstemp: %s", strerror(errno));
    unlink(path);
    unsigned char *buf = malloc(FILE_BYTES);
    if (!buf)
        hv_die("out of memory");
    hv_pattern(buf, FILE_BYTES, 77);
    if (write(fd, buf, FILE_BYTES) != (ssize_t)FILE_BYTES)
        hv_die("write: %s", strerror(errno));
    *content = buf;
    return fd;
}

static int expect(ssize_t got, size_t want, const char *call)
{
    if (got == (ssize_t)want)
        return 0;
    fprintf(stderr, "%s: %s returned %zd (%s), expected %zu\n", hv_argv0, call, got,
            got < 0 ? strerror(errno) : "short", want);
    return 1;
}

/* read, pread, readv, preadv into the mapping at unaligned offsets that
 * cross pages, every frame at a new place. */
static int kernel_read(hv *h, int argc, char **argv)
{
    (void)argc, (void)argv;
    int rc = hv_init(h, NULL);
    if (rc)
        return rc;
    unsigned char *file;
    int fd = pattern_file(&file);
    hv_mem src, rb;
    hv_alloc(h, &src, 8u << 20, HV_SRC);
    hv_alloc(h, &rb, 8u << 20, HV_DST);
    int bad = 0;
    for (int f = 0; f < h->frames && !bad; f++) {
        size_t base = 100 + (size_t)f * 1237, len = 200000 + (size_t)f * 4099;
        size_t foff = (size_t)f * 3001;
        /* read */
        bad |= expect(pread(fd, NULL, 0, 0), 0, "pread(0)");
        lseek(fd, (off_t)foff, SEEK_SET);
        bad |= expect(read(fd, src.ptr + base, len), len, "read");
        memcpy(src.model + base, file + foff, len);
        /* pread */
        size_t b2 = base + len + 77;
        bad |= expect(pread(fd, src.ptr + b2, len, (off_t)foff + 5), len, "pread");
        memcpy(src.model + b2, file + foff + 5, len);
        /* readv: three pieces, one of them in ordinary memory */
        size_t b3 = b2 + len + 4096 * 3 + 11;
        unsigned char scratch[1000];
        struct iovec iov[3] = {{src.ptr + b3, 5000}, {scratch, sizeof scratch},
                               {src.ptr + b3 + 9000, 70000}};
        lseek(fd, 17, SEEK_SET);
        bad |= expect(readv(fd, iov, 3), 5000 + sizeof scratch + 70000, "readv");
        memcpy(src.model + b3, file + 17, 5000);
        memcpy(src.model + b3 + 9000, file + 17 + 5000 + sizeof scratch, 70000);
        bad |= hv_compare(scratch, file + 17 + 5000, sizeof scratch, "readv scratch piece");
        /* preadv */
        size_t b4 = b3 + 90000;
        struct iovec iov2[2] = {{src.ptr + b4, 123456}, {src.ptr + b4 + 200000, 4096}};
        bad |= expect(preadv(fd, iov2, 2, 999), 123456 + 4096, "preadv");
        memcpy(src.model + b4, file + 999, 123456);
        memcpy(src.model + b4 + 200000, file + 999 + 123456, 4096);
        bad |= hv_gpu_check(h, &src, &rb, "kernel-read: GPU copy of the staging memory");
    }
    close(fd);
    free(file);
    hv_free(h, &src);
    hv_free(h, &rb);
    hv_fini(h);
    return bad;
}

/* fread: a large one (glibc reads straight into the user buffer) and a few
 * small ones (through stdio's buffer). */
static int kernel_fread(hv *h, int argc, char **argv)
{
    (void)argc, (void)argv;
    int rc = hv_init(h, NULL);
    if (rc)
        return rc;
    unsigned char *file;
    int fd = pattern_file(&file);
    FILE *fp = fdopen(fd, "rb");
    if (!fp)
        hv_die("fdopen: %s", strerror(errno));
    hv_mem src, rb;
    hv_alloc(h, &src, 4u << 20, HV_SRC);
    hv_alloc(h, &rb, 4u << 20, HV_DST);
    int bad = 0;
    for (int f = 0; f < h->frames && !bad; f++) {
        rewind(fp);
        size_t off = 333 + (size_t)f * 8191, len = (2u << 20) + 12345;
        size_t got = fread(src.ptr + off, 1, len, fp);
        if (got != len) {
            fprintf(stderr, "%s: fread returned %zu of %zu (%s)\n", hv_argv0, got, len,
                    ferror(fp) ? strerror(errno) : "eof");
            bad = 1;
            break;
        }
        memcpy(src.model + off, file, len);
        size_t at = off + len + 1;
        for (int k = 0; k < 5; k++, at += 777) {
            if (fread(src.ptr + at, 1, 777, fp) != 777)
                bad = 1;
            memcpy(src.model + at, file + len + (size_t)k * 777, 777);
        }
        bad |= hv_gpu_check(h, &src, &rb, "kernel-fread: GPU copy of the staging memory");
    }
    fclose(fp);
    free(file);
    hv_free(h, &src);
    hv_free(h, &rb);
    hv_fini(h);
    return bad;
}

typedef struct sender {
    int fd;
    const unsigned char *data;
    size_t len;
    int datagrams;
} sender;

static void *send_all(void *arg)
{
    sender *s = arg;
    if (s->datagrams) {
        for (size_t at = 0; at < s->len; at += 1000)
            if (send(s->fd, s->data + at, s->len - at < 1000 ? s->len - at : 1000, 0) < 0)
                break;
    } else {
        for (size_t at = 0; at < s->len;) {
            ssize_t k = send(s->fd, s->data + at, s->len - at, 0);
            if (k <= 0)
                break;
            at += (size_t)k;
        }
    }
    return NULL;
}

/* Stream sockets (recv, recvfrom, recvmsg until full) and datagram sockets
 * (recv, recvmsg, recvmmsg: a datagram that hit EFAULT would be lost). */
static int kernel_recv(hv *h, int argc, char **argv)
{
    (void)argc, (void)argv;
    int rc = hv_init(h, NULL);
    if (rc)
        return rc;
    hv_mem src, rb;
    hv_alloc(h, &src, 2u << 20, HV_SRC);
    hv_alloc(h, &rb, 2u << 20, HV_DST);
    size_t total = 600000;
    unsigned char *data = malloc(total);
    if (!data)
        hv_die("out of memory");
    int bad = 0;
    for (int f = 0; f < h->frames && !bad; f++) {
        hv_pattern(data, total, 1000 + (uint64_t)f);
        /* stream */
        int sv[2];
        if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv) != 0)
            hv_die("socketpair: %s", strerror(errno));
        sender s = {sv[0], data, total, 0};
        pthread_t th;
        pthread_create(&th, NULL, send_all, &s);
        size_t off = 4000 + (size_t)f * 13, got = 0;
        int step = 0;
        while (got < total) {
            ssize_t k;
            unsigned char *dst = src.ptr + off + got;
            size_t want = total - got;
            if (step % 3 == 0) {
                k = recv(sv[1], dst, want, 0);
            } else if (step % 3 == 1) {
                k = recvfrom(sv[1], dst, want, 0, NULL, NULL);
            } else {
                struct iovec iov = {dst, want};
                struct msghdr mh = {.msg_iov = &iov, .msg_iovlen = 1};
                k = recvmsg(sv[1], &mh, 0);
            }
            step++;
            if (k <= 0) {
                fprintf(stderr, "%s: stream receive failed at %zu of %zu: %s\n", hv_argv0, got, total,
                        k < 0 ? strerror(errno) : "eof");
                bad = 1;
                break;
            }
            got += (size_t)k;
        }
        pthread_join(th, NULL);
        close(sv[0]);
        close(sv[1]);
        memcpy(src.model + off, data, total);
        /* datagrams: 1000 B each; count them: none may be lost */
        if (socketpair(AF_UNIX, SOCK_DGRAM, 0, sv) != 0)
            hv_die("socketpair: %s", strerror(errno));
        size_t dlen = 60000, doff = off + total + 5;
        sender d = {sv[0], data, dlen, 1};
        pthread_create(&th, NULL, send_all, &d);
        size_t n = 0, at = 0;
        while (at < dlen && !bad) {
            ssize_t k;
            if (n % 3 == 2 && dlen - at >= 2000) {
                struct iovec iov[2] = {{src.ptr + doff + at, 1000}, {src.ptr + doff + at + 1000, 1000}};
                struct mmsghdr mm[2] = {{.msg_hdr = {.msg_iov = &iov[0], .msg_iovlen = 1}},
                                        {.msg_hdr = {.msg_iov = &iov[1], .msg_iovlen = 1}}};
                int m = recvmmsg(sv[1], mm, 2, MSG_WAITFORONE, NULL);
                k = m < 0 ? -1 : (ssize_t)(mm[0].msg_len + (m > 1 ? mm[1].msg_len : 0));
                n += m > 0 ? (size_t)m : 0;
            } else if (n % 3 == 1) {
                struct iovec iov = {src.ptr + doff + at, 1000};
                struct msghdr mh = {.msg_iov = &iov, .msg_iovlen = 1};
                k = recvmsg(sv[1], &mh, 0);
                n++;
            } else {
                k = recv(sv[1], src.ptr + doff + at, 1000, 0);
                n++;
            }
            if (k <= 0) {
                fprintf(stderr, "%s: datagram receive failed at %zu: %s\n", hv_argv0, at,
                        k < 0 ? strerror(errno) : "empty");
                bad = 1;
            }
            at += k > 0 ? (size_t)k : 0;
        }
        pthread_join(th, NULL);
        close(sv[0]);
        close(sv[1]);
        memcpy(src.model + doff, data, dlen);
        if (!bad)
            bad |= hv_gpu_check(h, &src, &rb, "kernel-recv: GPU copy of the staging memory");
    }
    free(data);
    hv_free(h, &src);
    hv_free(h, &rb);
    hv_fini(h);
    return bad;
}

/* ---- io_uring: the kernel writes with no system call of the application
 * around it (a kernel worker, or the submitting io_uring_enter: nothing the
 * application's read() interposition sees). The ring: tests/uring_util.h. */

/* Submits n queued reads and waits for all; each must have read its length
 * (lens[tag]). Returns the number of bad completions. */
static int ring_run(ur_ring *r, unsigned n, const unsigned *lens)
{
    if (ur_enter(r, n, n) < 0)
        hv_die("io_uring_enter: %s", strerror(errno));
    int bad = 0;
    for (unsigned done = 0; done < n;) {
        uint64_t tag;
        int res;
        if (!ur_reap(r, &tag, &res)) {
            if (ur_enter(r, 0, 1) < 0 && errno != EINTR)
                hv_die("io_uring_enter: %s", strerror(errno));
            continue;
        }
        if (res != (int)lens[tag]) {
            fprintf(stderr, "%s: io_uring read %llu returned %d (%s), expected %u\n", hv_argv0,
                    (unsigned long long)tag, res, res < 0 ? strerror(-res) : "short", lens[tag]);
            bad++;
        }
        done++;
    }
    return bad;
}

/* getrandom() into the mapping every frame; from the second frame on (the
 * memory is tracked by then), io_uring reads straight into it: the ring is
 * set up while the capture already watches the memory. */
static int kernel_uring(hv *h, int argc, char **argv)
{
    (void)argc, (void)argv;
    ur_ring r = {.fd = -1};
    int rc = hv_init(h, NULL);
    if (rc)
        return rc;
    unsigned char *file;
    int fd = pattern_file(&file);
    hv_mem src, rb;
    hv_alloc(h, &src, 8u << 20, HV_SRC);
    hv_alloc(h, &rb, 8u << 20, HV_DST);
    int bad = 0;
    for (int f = 0; f < h->frames && !bad; f++) {
        if (r.fd < 0 && (f == 1 || h->frames == 1)) {
            rc = ur_open(&r, 16);
            if (rc) {
                fprintf(stderr, "%s: io_uring not available here (%s): skipped\n", hv_argv0,
                        strerror(-rc));
                bad = HV_SKIP;
                break;
            }
        }
        unsigned lens[4];
        size_t at[4];
        uint64_t foff[4];
        for (unsigned k = 0; k < 4 && r.fd >= 0; k++) {
            lens[k] = 4096 * (k + 1) * 17 + 333 * k + (unsigned)f;
            at[k] = 1000 + (size_t)k * 1900000 + (size_t)f * 4099;
            foff[k] = (uint64_t)k * 5001 + (uint64_t)f * 77;
            ur_queue_read(&r, fd, src.ptr + at[k], lens[k], foff[k], k);
            memcpy(src.model + at[k], file + foff[k], lens[k]);
        }
        if (r.fd >= 0)
            bad |= ring_run(&r, 4, lens);
        /* getrandom: another kernel write the application makes directly. */
        size_t gat = 7800000 + (size_t)f * 13, glen = 200000;
        if (getrandom(src.ptr + gat, glen, 0) != (ssize_t)glen) {
            fprintf(stderr, "%s: getrandom into the mapping: %s\n", hv_argv0, strerror(errno));
            bad = 1;
        }
        memcpy(src.model + gat, src.ptr + gat, glen);
        if (!bad)
            bad |= hv_gpu_check(h, &src, &rb, "kernel-uring: GPU copy of the staging memory");
    }
    close(fd);
    if (r.fd >= 0)
        close(r.fd);
    free(file);
    hv_free(h, &src);
    hv_free(h, &rb);
    hv_fini(h);
    return bad;
}

/* The small outputs of calls that change state, straight into the mapping
 * at places that move every frame and cross pages: a pipe's descriptors,
 * poll's ready events, a child's exit status, an ioctl's result, a socket
 * option, and the data vmsplice takes out of a pipe. Each value is checked
 * where it landed, then the GPU must see it. */
static int kernel_outputs(hv *h, int argc, char **argv)
{
    (void)argc, (void)argv;
    int rc = hv_init(h, NULL);
    if (rc)
        return rc;
    hv_mem src, rb;
    hv_alloc(h, &src, 8u << 20, HV_SRC);
    hv_alloc(h, &rb, 8u << 20, HV_DST);
    int bad = 0;
    for (int f = 0; f < h->frames && !bad; f++) {
        unsigned char *base = src.ptr + 4096 * (size_t)(3 + 37 * f) - 6;
        int *fds = (int *)(void *)(((uintptr_t)base + 3) & ~(uintptr_t)3); /* ints stay aligned */
        if (pipe2(fds, O_CLOEXEC) != 0) {
            fprintf(stderr, "%s: pipe2 into the mapping: %s\n", hv_argv0, strerror(errno));
            bad = 1;
            break;
        }
        int p[2] = {fds[0], fds[1]};
        unsigned char msg[3000];
        hv_pattern(msg, sizeof msg, 500 + (unsigned)f);
        bad |= expect(write(p[1], msg, sizeof msg), sizeof msg, "write to the pipe");

        struct pollfd *pf = (struct pollfd *)(void *)(fds + 2);
        pf[0] = (struct pollfd){.fd = p[0], .events = POLLIN};
        pf[1] = (struct pollfd){.fd = p[1], .events = POLLOUT};
        if (poll(pf, 2, 1000) != 2 || !(pf[0].revents & POLLIN) || !(pf[1].revents & POLLOUT)) {
            fprintf(stderr, "%s: poll into the mapping: %s\n", hv_argv0, strerror(errno));
            bad = 1;
        }
        int *nread = (int *)(void *)(pf + 2);
        if (ioctl(p[0], FIONREAD, nread) != 0 || *nread != (int)sizeof msg) {
            fprintf(stderr, "%s: ioctl(FIONREAD) into the mapping: %s\n", hv_argv0, strerror(errno));
            bad = 1;
        }
        int *type = nread + 1;
        socklen_t *tlen = (socklen_t *)(type + 1);
        int sv[2];
        if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv) == 0) {
            *tlen = sizeof *type;
            if (getsockopt(sv[0], SOL_SOCKET, SO_TYPE, type, tlen) != 0 || *type != SOCK_STREAM) {
                fprintf(stderr, "%s: getsockopt into the mapping: %s\n", hv_argv0, strerror(errno));
                bad = 1;
            }
            close(sv[0]);
            close(sv[1]);
        }
        int *status = (int *)(tlen + 1);
        pid_t c = fork();
        if (c == 0)
            _exit(40 + f % 50);
        if (c < 0 || waitpid(c, status, 0) != c || !WIFEXITED(*status) ||
            WEXITSTATUS(*status) != 40 + f % 50) {
            fprintf(stderr, "%s: waitpid into the mapping: %s\n", hv_argv0, strerror(errno));
            bad = 1;
        }
        /* The pipe's data, across the next pages. */
        unsigned char *data = (unsigned char *)(status + 1) + 4090;
        struct iovec iov = {data, sizeof msg};
        if (vmsplice(p[0], &iov, 1, 0) != (ssize_t)sizeof msg || memcmp(data, msg, sizeof msg) != 0) {
            fprintf(stderr, "%s: vmsplice into the mapping: %s\n", hv_argv0, strerror(errno));
            bad = 1;
        }
        close(p[0]);
        close(p[1]);
        size_t from = (size_t)((unsigned char *)fds - src.ptr), to = (size_t)(data - src.ptr) + sizeof msg;
        memcpy(src.model + from, src.ptr + from, to - from);
        /* Less common outputs (preload/kwmisc.c), straddling a page
         * boundary further on: the thread's name, the ids, a sendfile
         * offset. */
        unsigned char *more = src.ptr + 4096 * (size_t)(1200 + 3 * f) - 8;
        char *name = (char *)more;
        uid_t *ids = (uid_t *)(void *)(more + 16);
        off_t *off = (off_t *)(void *)(more + 32);
        char want[16];
        snprintf(want, sizeof want, "mt-frame-%d", f % 1000);
        if (prctl(PR_SET_NAME, want, 0, 0, 0) != 0 || prctl(PR_GET_NAME, name, 0, 0, 0) != 0 ||
            strcmp(name, want) != 0) {
            fprintf(stderr, "%s: prctl(PR_GET_NAME) into the mapping: %s\n", hv_argv0, strerror(errno));
            bad = 1;
        }
        if (getresuid(&ids[0], &ids[1], &ids[2]) != 0 || ids[0] != getuid()) {
            fprintf(stderr, "%s: getresuid into the mapping: %s\n", hv_argv0, strerror(errno));
            bad = 1;
        }
        int sf = open("/proc/self/exe", O_RDONLY), sp[2];
        *off = 64;
        if (sf < 0 || pipe(sp) != 0 || sendfile(sp[1], sf, off, 100) != 100 || *off != 164) {
            fprintf(stderr, "%s: sendfile's offset in the mapping: %s\n", hv_argv0, strerror(errno));
            bad = 1;
        } else {
            close(sp[0]);
            close(sp[1]);
        }
        if (sf >= 0)
            close(sf);
        memcpy(src.model + (more - src.ptr), more, 40);
        if (!bad)
            bad |= hv_gpu_check(h, &src, &rb, "kernel-outputs: GPU copy of the staging memory");
    }
    hv_free(h, &src);
    hv_free(h, &rb);
    hv_fini(h);
    return bad;
}


static int aio_across_submit(hv *h, hv_mem *src, hv_mem *rb, size_t at)
{
    int p[2];
    if (pipe(p) != 0)
        hv_die("pipe: %s", strerror(errno));
    enum { N = 10000 };
    struct aiocb a = {.aio_fildes = p[0], .aio_buf = src->ptr + at, .aio_nbytes = N};
    if (aio_read(&a) != 0)
        hv_die("aio_read (pipe): %s", strerror(errno));
    hv_write(src, at - 100, 90, 4242);   /* the read's first page */
    hv_write(src, at + N + 7, 300, 4343); /* its last page */
    int bad = hv_gpu_check(h, src, rb, "kernel-aio: writes beside a read in flight");
    unsigned char data[N];
    hv_pattern(data, N, 99);
    if (write(p[1], data, N) != N)
        hv_die("write (pipe): %s", strerror(errno));
    const struct aiocb *wait1[1] = {&a};
    while (aio_error(&a) == EINPROGRESS)
        aio_suspend(wait1, 1, NULL);
    if (aio_error(&a) != 0)
        fprintf(stderr, "%s: aio_read from a pipe failed: %s\n", hv_argv0, strerror(aio_error(&a)));
    bad |= expect(aio_return(&a), N, "aio_read from a pipe");
    memcpy(src->model + at, data, N);
    close(p[0]);
    close(p[1]);
    if (!bad)
        bad |= hv_gpu_check(h, src, rb, "kernel-aio: a read that spanned a submit");
    return bad;
}

static int aio_unasked(hv *h, hv_mem *src, hv_mem *rb, int fd, const unsigned char *file)
{
    enum { N = 300, LEN = 5000 };
    static struct aiocb cbs[N];
    for (int i = 0; i < N; i++) {
        size_t at = 4096 + (size_t)i * 9001;
        cbs[i] = (struct aiocb){.aio_fildes = fd, .aio_buf = src->ptr + at, .aio_nbytes = LEN,
                                .aio_offset = (off_t)i * 17};
        if (aio_read(&cbs[i]) != 0)
            hv_die("aio_read #%d: %s", i, strerror(errno));
        memcpy(src->model + at, file + (size_t)i * 17, LEN);
    }
    /* The app waits for the bytes themselves (as little as a completion
     * callback tells; TSan's runtime cannot run SIGEV_THREAD functions). */
    for (int i = 0, spins = 0; i < N;) {
        size_t at = 4096 + (size_t)i * 9001;
        if (memcmp(src->ptr + at, src->model + at, LEN) == 0) {
            i++;
            continue;
        }
        if (++spins > 20000)
            hv_die("aio: read %d of %d not there after 20 s", i, N);
        usleep(1000);
    }
    return hv_gpu_check(h, src, rb, "kernel-aio: reads the app never asked about");
}

/* POSIX AIO: glibc's aio_read and lio_listio read in threads of their own
 * through its internal pread, which no interposer sees, and the read lands
 * whenever that thread runs. aio_suspend, aio_error and aio_return then see
 * what the application would see without the capture. */
static int kernel_aio(hv *h, int argc, char **argv)
{
    (void)argc, (void)argv;
    int rc = hv_init(h, NULL);
    if (rc)
        return rc;
    unsigned char *file;
    int fd = pattern_file(&file);
    hv_mem src, rb;
    hv_alloc(h, &src, 8u << 20, HV_SRC);
    hv_alloc(h, &rb, 8u << 20, HV_DST);
    int bad = 0;
    for (int f = 0; f < h->frames && !bad; f++) {
        /* one aio_read, waited for with aio_suspend */
        size_t base = 333 + (size_t)f * 5003, len = 300000 + (size_t)f * 811;
        off_t foff = (off_t)f * 2999;
        struct aiocb a = {.aio_fildes = fd, .aio_buf = src.ptr + base, .aio_nbytes = len,
                          .aio_offset = foff};
        if (aio_read(&a) != 0)
            hv_die("aio_read: %s", strerror(errno));
        const struct aiocb *wait1[1] = {&a};
        while (aio_error(&a) == EINPROGRESS)
            aio_suspend(wait1, 1, NULL);
        if (aio_error(&a) != 0)
            fprintf(stderr, "%s: aio_read failed: %s\n", hv_argv0, strerror(aio_error(&a)));
        bad |= expect(aio_return(&a), len, "aio_read");
        memcpy(src.model + base, file + foff, len);
        /* lio_listio: three reads at once, one of them into ordinary memory */
        size_t b2 = base + len + 4096 * 2 + 5;
        static unsigned char scratch[50000];
        struct aiocb l[3] = {
            {.aio_fildes = fd, .aio_lio_opcode = LIO_READ, .aio_buf = src.ptr + b2,
             .aio_nbytes = 70000, .aio_offset = 11},
            {.aio_fildes = fd, .aio_lio_opcode = LIO_READ, .aio_buf = scratch,
             .aio_nbytes = sizeof scratch, .aio_offset = 12345},
            {.aio_fildes = fd, .aio_lio_opcode = LIO_READ, .aio_buf = src.ptr + b2 + 100000,
             .aio_nbytes = 1000000, .aio_offset = 4096},
        };
        struct aiocb *list[3] = {&l[0], &l[1], &l[2]};
        if (lio_listio(LIO_WAIT, list, 3, NULL) != 0)
            fprintf(stderr, "%s: lio_listio: %s\n", hv_argv0, strerror(errno));
        for (int i = 0; i < 3; i++)
            bad |= expect(aio_return(&l[i]), l[i].aio_nbytes, "lio_listio read");
        memcpy(src.model + b2, file + 11, 70000);
        memcpy(src.model + b2 + 100000, file + 4096, 1000000);
        bad |= hv_compare(scratch, file + 12345, sizeof scratch, "lio_listio scratch read");
        if (!bad)
            bad |= hv_gpu_check(h, &src, &rb, "kernel-aio: GPU copy of the staging memory");
        /* A read still in flight across a submit: from a pipe, so it waits
         * for data. The app meanwhile writes the same pages around it and
         * submits; those writes must reach the device. */
        if (!bad)
            bad |= aio_across_submit(h, &src, &rb, base + len + 1500000 + (size_t)f * 64);
    }
    /* Reads whose end the app learns only from the data, more of them than
     * a capture can follow one by one. */
    if (!bad)
        bad |= aio_unasked(h, &src, &rb, fd, file);
    close(fd);
    free(file);
    hv_free(h, &src);
    hv_free(h, &rb);
    hv_fini(h);
    return bad;
}

const hv_behaviour hv_kernel_behaviours[] = {
    {"kernel-read", "read/pread/readv/preadv straight into mapped memory", kernel_read},
    {"kernel-fread", "a large fread (stdio bypasses its buffer) and small ones", kernel_fread},
    {"kernel-recv", "recv/recvfrom/recvmsg/recvmmsg from stream and datagram sockets", kernel_recv},
    {"kernel-uring", "io_uring reads and getrandom() straight into mapped memory", kernel_uring},
    {"kernel-outputs",
     "pipe2, poll, ioctl, getsockopt, waitpid, vmsplice, prctl, getresuid, sendfile output into mapped memory",
     kernel_outputs},
    {"kernel-aio", "POSIX AIO (aio_read, lio_listio) straight into mapped memory", kernel_aio},
    {NULL, NULL, NULL},
};
