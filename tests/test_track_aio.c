/* POSIX AIO reads into tracked memory (the interposer's aio.c): glibc reads
 * in threads of its own whenever it gets to it, so the pages must stay
 * writable from aio_read until the application learns the read ended, be
 * reported by every collect in between, and be re-armed after. An
 * application that never asks (it waits for the data itself) must still get
 * every byte: past the holds the interposer keeps, AIO becomes an
 * unbracketed writer (exact fallback) when the read is into tracked
 * memory; into memory no range covers, nothing changes. */
#define _GNU_SOURCE
#include <aio.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <unistd.h>

#include "kw_env.h"

static void wait_done(const struct aiocb *cb)
{
    const struct aiocb *l[1] = {cb};
    while (aio_error(cb) == EINPROGRESS)
        aio_suspend(l, 1, NULL);
}

/* A read from a pipe waits for data: collects in between report its pages
 * every time (a write beside it on the same page included), and once
 * aio_return has been called, once more and then never. */
static void across_collects(env *e)
{
    int p[2];
    MT_CHECK(pipe(p) == 0);
    enum { N = 64 };
    unsigned char *buf = spot(e, N);
    struct aiocb a = {.aio_fildes = p[0], .aio_buf = buf, .aio_nbytes = N};
    MT_CHECK(aio_read(&a) == 0);
    unsigned char seen[NP];
    for (int round = 0; round < 3; round++) {
        buf[-1] = (unsigned char)round; /* the app's own write beside the read */
        if (e->be == MT_TRACK_SIGNAL) /* held: writable, so reported whoever writes */
            MT_CHECK(collected(e, seen) == 2 && seen[2] && seen[3]);
        else /* uffd sees the kernel's writes itself: nothing held */
            MT_CHECK(collected(e, seen) == 1 && seen[2]);
    }
    if (e->be == MT_TRACK_SIGNAL) /* not re-armed by those collects */
        MT_CHECK(tc_real_prot(e->m + 2 * e->ps) & PROT_WRITE);
    unsigned char data[N];
    for (int i = 0; i < N; i++)
        data[i] = (unsigned char)(i * 7 + 1);
    MT_CHECK(write(p[1], data, N) == N);
    wait_done(&a);
    errno = 4321;
    MT_CHECK(aio_return(&a) == N);
    MT_CHECK(memcmp(buf, data, N) == 0);
    check_written(e, "aio_read across collects");
    close(p[0]);
    close(p[1]);
}

static int temp_file(size_t len)
{
    char path[] = "/tmp/mt-aio-XXXXXX";
    int fd = mkstemp(path);
    MT_CHECK(fd >= 0);
    unlink(path);
    unsigned char *b = malloc(len);
    MT_CHECK(b != NULL);
    for (size_t i = 0; i < len; i++)
        b[i] = (unsigned char)(i * 13 + 5);
    MT_CHECK(write(fd, b, len) == (ssize_t)len);
    free(b);
    return fd;
}

static void from_a_file(env *e)
{
    int fd = temp_file(3 * e->ps);
    size_t len = 2 * e->ps - 64;
    unsigned char *buf = (unsigned char *)e->m + 2 * e->ps + 32; /* pages 2 and 3 */
    /* aio_read, then aio_error alone (no aio_return) ends the hold */
    struct aiocb a = {.aio_fildes = fd, .aio_buf = buf, .aio_nbytes = len, .aio_offset = 3};
    MT_CHECK(aio_read(&a) == 0);
    while (aio_error(&a) == EINPROGRESS)
        usleep(100);
    MT_CHECK(aio_error(&a) == 0 && buf[0] == (unsigned char)(3 * 13 + 5));
    errno = 4321;
    check_written(e, "aio_read, aio_error");
    /* lio_listio LIO_WAIT: two reads, one into ordinary memory */
    unsigned char plain[100];
    struct aiocb l[2] = {
        {.aio_fildes = fd, .aio_lio_opcode = LIO_READ, .aio_buf = buf, .aio_nbytes = len},
        {.aio_fildes = fd, .aio_lio_opcode = LIO_READ, .aio_buf = plain, .aio_nbytes = sizeof plain},
    };
    struct aiocb *list[2] = {&l[0], &l[1]};
    MT_CHECK(lio_listio(LIO_WAIT, list, 2, NULL) == 0);
    MT_CHECK(buf[1] == 18 && plain[1] == 18);
    errno = 4321;
    check_written(e, "lio_listio");
    /* a control block queued again without asking: the first read ended */
    MT_CHECK(aio_read(&a) == 0);
    wait_done(&a);
    MT_CHECK(aio_read(&a) == 0);
    wait_done(&a);
    errno = 4321;
    MT_CHECK(aio_return(&a) == (ssize_t)len);
    check_written(e, "aio_read twice on one block");
    close(fd);
}

/* ---- stress: threads queue and reap reads while another collects ---- */

enum { ST_THREADS = 4, ST_OPS = 300, ST_LEN = 3000 };

typedef struct st_arg {
    env *e;
    int fd, idx, bad;
    _Atomic int *stop;
} st_arg;

static void *st_reader(void *p)
{
    st_arg *a = p;
    /* each thread owns a slice straddling one page boundary of pages 4..7 */
    unsigned char *buf = a->e->m + (size_t)(4 + a->idx) * a->e->ps - ST_LEN / 2;
    for (int i = 0; i < ST_OPS && !a->bad; i++) {
        off_t off = (off_t)((i * 37 + a->idx * 11) % 1000);
        struct aiocb cb = {.aio_fildes = a->fd, .aio_buf = buf, .aio_nbytes = ST_LEN, .aio_offset = off};
        if (aio_read(&cb) != 0) {
            a->bad = 1;
            break;
        }
        wait_done(&cb);
        if (aio_return(&cb) != ST_LEN)
            a->bad = 2;
        for (int k = 0; k < ST_LEN && !a->bad; k++)
            if (buf[k] != (unsigned char)((off + k) * 13 + 5))
                a->bad = 3;
    }
    return NULL;
}

static void *st_collector(void *p)
{
    st_arg *a = p;
    unsigned char seen[NP];
    while (!atomic_load(a->stop))
        collected(a->e, seen);
    return NULL;
}

static void stress(env *e)
{
    int fd = temp_file(2 * 4096);
    _Atomic int stop = 0;
    st_arg args[ST_THREADS], col = {.e = e, .stop = &stop};
    pthread_t th[ST_THREADS], ct;
    MT_CHECK(pthread_create(&ct, NULL, st_collector, &col) == 0);
    for (int i = 0; i < ST_THREADS; i++) {
        args[i] = (st_arg){.e = e, .fd = fd, .idx = i, .stop = &stop};
        MT_CHECK(pthread_create(&th[i], NULL, st_reader, &args[i]) == 0);
    }
    for (int i = 0; i < ST_THREADS; i++) {
        MT_CHECK(pthread_join(th[i], NULL) == 0);
        if (args[i].bad)
            fprintf(stderr, "stress reader %d: failure %d\n", i, args[i].bad);
        MT_CHECK(args[i].bad == 0);
    }
    atomic_store(&stop, 1);
    MT_CHECK(pthread_join(ct, NULL) == 0);
    /* every hold ended: one more collect may report, then nothing */
    unsigned char seen[NP];
    collected(e, seen);
    MT_CHECK(collected(e, seen) == 0);
    close(fd);
}

static void run(env *e)
{
    across_collects(e);
    from_a_file(e);
    stress(e);
}

/* ---- never asked: the app learns the end from the data, more reads than holds ---- */

enum { UNASKED = 300 }; /* more than the interposer's 256 holds */

/* Queues UNASKED reads of 200 bytes from a file into m (at 100 bytes into
 * page i for read i) and waits for the bytes themselves, never calling
 * aio_error or aio_return (a callback or a signal would tell as little;
 * TSan's runtime cannot run SIGEV_THREAD callbacks). Returns the file. */
static int read_unasked(unsigned char *m)
{
    size_t ps = tu_page();
    int fd = temp_file(2 * ps);
    static struct aiocb cbs[UNASKED];
    static unsigned char want[UNASKED][200];
    for (int i = 0; i < UNASKED; i++) {
        cbs[i] = (struct aiocb){.aio_fildes = fd, .aio_buf = m + (size_t)i * ps + 100, .aio_nbytes = 200,
                                .aio_offset = i};
        for (int k = 0; k < 200; k++)
            want[i][k] = (unsigned char)((i + k) * 13 + 5);
        MT_CHECK(aio_read(&cbs[i]) == 0);
    }
    for (int i = 0, spins = 0; i < UNASKED;) {
        if (memcmp(m + (size_t)i * ps + 100, want[i], 200) == 0) {
            i++;
            continue;
        }
        MT_CHECK(++spins < 20000); /* a read that failed (EFAULT) never arrives */
        usleep(1000);
    }
    return fd;
}

static void never_asked(void)
{
    size_t ps = tu_page();
    mt_tracker *t;
    mt_tracker_opts to = {.backend = MT_TRACK_SIGNAL};
    MT_CHECK_OK(mt_tracker_create(&to, &t));
    size_t pages = UNASKED + 2;
    unsigned char *m = tu_map(pages * ps);
    mt_range_opts ro = {.backend = MT_TRACK_SIGNAL};
    mt_range_id id;
    MT_CHECK_OK(mt_tracker_add(t, m, pages * ps, &ro, &id));
    int fd = read_unasked(m);
    MT_CHECK(mt_track_unbracketed_writers() & MT_TRACK_UNBRACKETED_AIO);
    /* exact from then on: every page reported on every collect */
    unsigned char *seen = calloc(pages, 1);
    MT_CHECK(tu_collect_into(t, id, (uintptr_t)m, (uintptr_t)m, seen, pages) == pages);
    free(seen);
    close(fd);
    mt_tracker_destroy(t);
}

/* The same into memory no range covers: holds run out as well, but no
 * tracked page is at stake, so AIO must not become an unbracketed writer
 * (which would stop protecting every signal-backend range). */
static void never_asked_untracked(void)
{
    size_t ps = tu_page();
    mt_tracker *t;
    mt_tracker_opts to = {.backend = MT_TRACK_SIGNAL};
    MT_CHECK_OK(mt_tracker_create(&to, &t));
    unsigned char *tracked = tu_map(4 * ps), *m = tu_map((UNASKED + 2) * ps);
    mt_range_opts ro = {.backend = MT_TRACK_SIGNAL};
    mt_range_id id;
    MT_CHECK_OK(mt_tracker_add(t, tracked, 4 * ps, &ro, &id));
    int fd = read_unasked(m);
    MT_CHECK(!(mt_track_unbracketed_writers() & MT_TRACK_UNBRACKETED_AIO));
    /* the tracked range still faults and reports precisely */
    unsigned char seen[4] = {0};
    tracked[ps + 5] = 1;
    MT_CHECK(tu_collect_into(t, id, (uintptr_t)tracked, (uintptr_t)tracked, seen, 4) == 1 && seen[1]);
    close(fd);
    mt_tracker_destroy(t);
}

int main(void)
{
    if (!tc_need_interposer())
        return 77;
    /* First: glibc's AIO does not survive a fork once its threads exist. */
    tc_expect_exit0("more reads than holds, never asked about", never_asked);
    tc_expect_exit0("as many into untracked memory: no fallback", never_asked_untracked);
    return kw_env_main(run, "track POSIX AIO reads into tracked memory (interposer): ok");
}
