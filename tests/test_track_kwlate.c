/* track + interposer: a kernel write already in flight when the memory it
 * writes starts being tracked.
 *
 * A call that reads into memory nobody tracks yet may still be blocked in
 * the kernel when a range over that memory is added (the layer's auto mode
 * moves a memory it scanned to guard at a submit; coherence starts tracking
 * a host buffer). With the signal backend, arming its pages then would make
 * the kernel's copy fail with EFAULT and the application's call fail. The
 * add must leave those pages writable and reported until the call ends.
 * Checked with both backends:
 *  - read(2) from a pipe, blocked in another thread while the range is
 *    added: the destination stays writable, every collect meanwhile reports
 *    it, the read returns all its bytes, and after it the pages are armed
 *    again like any other;
 *  - a POSIX aio_read queued before the add (glibc reads in a thread of its
 *    own, later);
 *  - the same read(2) when 4096 other calls are blocked at once (every pin
 *    slot taken): the read is still covered, and the slots' owners end
 *    normally (not under the sanitizers: 4,100 threads);
 *  - churn: two threads read(2) pieces from pipes into memory that another
 *    thread adds, collects and removes without pause: every read whole and
 *    right.
 * Needs the interposer (exit 77 without). */
#define _GNU_SOURCE
#include <aio.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "track_child.h"
#include "track_util.h"

#define NP 8

typedef struct reader {
    int fd;
    unsigned char *dst;
    size_t n;
    ssize_t got;
    int err;
    _Atomic pid_t tid;
} reader;

static void *read_once(void *arg)
{
    reader *r = arg;
    atomic_store(&r->tid, (pid_t)syscall(SYS_gettid));
    r->got = read(r->fd, r->dst, r->n);
    r->err = errno;
    return NULL;
}

/* Until thread `tid` is blocked in read(2): its /proc syscall file names
 * the call it is in. 0 when the file cannot tell (then a pause stands in). */
static int in_read(pid_t tid)
{
    char path[64];
    snprintf(path, sizeof path, "/proc/self/task/%d/syscall", (int)tid);
    FILE *f = fopen(path, "r");
    if (!f)
        return -1;
    long nr = -1;
    int ok = fscanf(f, "%ld", &nr) == 1;
    fclose(f);
    return ok ? nr == SYS_read : -1;
}

static void wait_blocked(reader *r)
{
    while (atomic_load(&r->tid) == 0)
        usleep(100);
    for (int i = 0; i < 100000; i++) { /* 20 s: thousands of threads start on a loaded machine */
        int s = in_read(atomic_load(&r->tid));
        if (s == 1)
            return;
        if (s < 0) {
            usleep(50000);
            return;
        }
        usleep(200);
    }
    MT_CHECK(!"the reader never blocked in read(2)");
}

static size_t collected(mt_tracker *t, mt_range_id id, unsigned char *m, unsigned char *seen)
{
    memset(seen, 0, NP);
    return tu_collect_into(t, id, (uintptr_t)m, (uintptr_t)m, seen, NP);
}

static void pattern(unsigned char *b, size_t n, unsigned seed)
{
    for (size_t i = 0; i < n; i++)
        b[i] = (unsigned char)(i * 29 + seed);
}

/* The destination straddles pages 2 and 3 of m. After the range is added
 * with the call in flight: pages 2 and 3 writable (signal) and reported by
 * each collect; the others armed and quiet. */
static void check_late(mt_tracker *t, mt_range_id id, mt_track_backend be, unsigned char *m)
{
    size_t ps = tu_page();
    unsigned char seen[NP];
    for (int round = 0; round < 3; round++) {
        size_t got = collected(t, id, m, seen);
        if (be == MT_TRACK_SIGNAL) {
            /* pinned: reported by each collect, never armed meanwhile */
            if (got != 2 || !seen[2] || !seen[3])
                fprintf(stderr, "round %d: %zu pages reported\n", round, got);
            MT_CHECK(got == 2 && seen[2] && seen[3]);
            MT_CHECK(tc_real_prot(m + 2 * ps) & PROT_WRITE);
            MT_CHECK(tc_real_prot(m + 3 * ps) & PROT_WRITE);
            MT_CHECK(!(tc_real_prot(m + 5 * ps) & PROT_WRITE));
        } else {
            MT_CHECK(got == 0); /* uffd: the kernel has not written yet */
        }
    }
}

/* After the call ended: its pages once more (`only`: those alone), then
 * armed and quiet; an application write there is seen again. */
static void check_after(mt_tracker *t, mt_range_id id, mt_track_backend be, unsigned char *m, int only)
{
    size_t ps = tu_page();
    unsigned char seen[NP];
    size_t got = collected(t, id, m, seen);
    MT_CHECK(seen[2] && seen[3] && (!only || got == 2));
    MT_CHECK(collected(t, id, m, seen) == 0);
    if (be == MT_TRACK_SIGNAL)
        MT_CHECK(!(tc_real_prot(m + 2 * ps) & PROT_WRITE));
    m[2 * ps + 7] = 1;
    MT_CHECK(collected(t, id, m, seen) == 1 && seen[2]);
}

typedef struct fixture {
    mt_tracker *t;
    unsigned char *m;
    size_t ps, n;
    unsigned char *dst;
    int p[2];
    unsigned char data[3000];
} fixture;

static void fixture_open(fixture *f, mt_track_backend be)
{
    f->ps = tu_page();
    mt_tracker_opts to = {.backend = be};
    MT_CHECK_OK(mt_tracker_create(&to, &f->t));
    f->m = tu_map(NP * f->ps);
    f->n = sizeof f->data;
    f->dst = f->m + 3 * f->ps - f->n / 2; /* pages 2 and 3 */
    MT_CHECK(pipe(f->p) == 0);
    pattern(f->data, f->n, (unsigned)be * 3 + 1);
}

static mt_range_id fixture_track(fixture *f, mt_track_backend be)
{
    mt_range_opts ro = {.backend = be};
    mt_range_id id;
    MT_CHECK_OK(mt_tracker_add(f->t, f->m, NP * f->ps, &ro, &id));
    return id;
}

static void fixture_close(fixture *f, mt_range_id id)
{
    MT_CHECK(memcmp(f->dst, f->data, f->n) == 0);
    MT_CHECK_OK(mt_tracker_remove(f->t, id));
    mt_tracker_destroy(f->t);
    munmap(f->m, NP * f->ps);
    close(f->p[0]);
    close(f->p[1]);
}

static void late_read(mt_track_backend be)
{
    fixture f;
    fixture_open(&f, be);
    reader r = {.fd = f.p[0], .dst = f.dst, .n = f.n};
    pthread_t th;
    MT_CHECK(pthread_create(&th, NULL, read_once, &r) == 0);
    wait_blocked(&r);
    mt_range_id id = fixture_track(&f, be);
    check_late(f.t, id, be, f.m);
    MT_CHECK(write(f.p[1], f.data, f.n) == (ssize_t)f.n);
    pthread_join(th, NULL);
    if (r.got != (ssize_t)f.n)
        fprintf(stderr, "read returned %zd (%s)\n", r.got, strerror(r.err));
    MT_CHECK(r.got == (ssize_t)f.n);
    check_after(f.t, id, be, f.m, 1);
    fixture_close(&f, id);
    printf("  %-6s read(2) blocked when its memory was added: all bytes, pages pinned then armed\n",
           mt_track_backend_name(be));
}

static void late_aio(mt_track_backend be)
{
    fixture f;
    fixture_open(&f, be);
    struct aiocb a = {.aio_fildes = f.p[0], .aio_buf = f.dst, .aio_nbytes = f.n};
    MT_CHECK(aio_read(&a) == 0);
    usleep(20000); /* glibc's thread reaches its read (it blocks on the pipe) */
    mt_range_id id = fixture_track(&f, be);
    check_late(f.t, id, be, f.m);
    MT_CHECK(write(f.p[1], f.data, f.n) == (ssize_t)f.n);
    const struct aiocb *l[1] = {&a};
    while (aio_error(&a) == EINPROGRESS)
        aio_suspend(l, 1, NULL);
    if (aio_error(&a) != 0)
        fprintf(stderr, "aio_read: %s\n", strerror(aio_error(&a)));
    MT_CHECK(aio_return(&a) == (ssize_t)f.n);
    check_after(f.t, id, be, f.m, 1);
    fixture_close(&f, id);
    printf("  %-6s aio_read queued before its memory was added: all bytes, pages pinned then armed\n",
           mt_track_backend_name(be));
}

/* 4096 pin slots: with all of them held by blocked calls, one more call is
 * counted instead of pinned, and every re-arm meanwhile treats every page
 * as pinned: the late read is still covered. */
enum { FILLERS = 4096 };

static void slots_full(mt_track_backend be)
{
#ifdef MT_SANITIZER_BUILD
    printf("  %-6s all pin slots taken: skipped under the sanitizers (4,100 threads)\n",
           mt_track_backend_name(be));
    return;
#endif
    fixture f; /* the tracker first: without one the interposer pins nothing */
    fixture_open(&f, be);
    int fp[2];
    MT_CHECK(pipe(fp) == 0);
    static reader fill[FILLERS];
    static unsigned char byte[FILLERS];
    static pthread_t th[FILLERS];
    pthread_attr_t at;
    pthread_attr_init(&at);
    pthread_attr_setstacksize(&at, 64 * 1024);
    int made = 0;
    for (; made < FILLERS; made++) {
        fill[made] = (reader){.fd = fp[0], .dst = &byte[made], .n = 1};
        if (pthread_create(&th[made], &at, read_once, &fill[made]) != 0)
            break;
    }
    mt_range_id id = 0;
    if (made == FILLERS) {
        for (int i = 0; i < FILLERS; i++)
            wait_blocked(&fill[i]);
        reader r = {.fd = f.p[0], .dst = f.dst, .n = f.n};
        pthread_t late;
        MT_CHECK(pthread_create(&late, &at, read_once, &r) == 0);
        wait_blocked(&r);
        id = fixture_track(&f, be);
        if (be == MT_TRACK_SIGNAL) {
            /* every page counts as pinned: all writable and reported */
            unsigned char seen[NP];
            MT_CHECK(tc_real_prot(f.dst) & PROT_WRITE);
            MT_CHECK(collected(f.t, id, f.m, seen) == NP);
        }
        MT_CHECK(write(f.p[1], f.data, f.n) == (ssize_t)f.n);
        pthread_join(late, NULL);
        MT_CHECK(r.got == (ssize_t)f.n);
    }
    unsigned char ones[FILLERS];
    memset(ones, 0x5a, sizeof ones);
    MT_CHECK(write(fp[1], ones, (size_t)made) == (ssize_t)made);
    for (int i = 0; i < made; i++)
        pthread_join(th[i], NULL);
    for (int i = 0; i < made; i++)
        MT_CHECK(fill[i].got == 1 && byte[i] == 0x5a);
    if (made == FILLERS) {
        /* the slots free again: precise pins, armed pages */
        check_after(f.t, id, be, f.m, be != MT_TRACK_SIGNAL);
        fixture_close(&f, id);
        printf("  %-6s all 4096 pin slots taken: a late read still covered, then precise again\n",
               mt_track_backend_name(be));
    } else {
        mt_tracker_destroy(f.t);
        munmap(f.m, NP * f.ps);
        close(f.p[0]);
        close(f.p[1]);
        printf("  %-6s all pin slots taken: skipped (only %d threads could be made)\n",
               mt_track_backend_name(be), made);
    }
    pthread_attr_destroy(&at);
    close(fp[0]);
    close(fp[1]);
}

/* Churn: reader threads read(2) from pipes into memory that a third
 * thread tracks and untracks without pause (add, collect, remove), while
 * a feeder writes the pipes. Every read must return its bytes, right: one
 * that met pages armed by an add that missed its pin fails with EFAULT. */
enum { CHURN_READERS = 2, CHURN_LEN = 5000 };

typedef struct churn {
    unsigned char *m;
    int p[CHURN_READERS][2];
    _Atomic int done;
    _Atomic long reads, bad;
} churn;

typedef struct churn_reader {
    churn *c;
    int k;
} churn_reader;

static void *churn_read(void *arg)
{
    churn_reader *r = arg;
    churn *c = r->c;
    size_t ps = tu_page();
    unsigned char *dst = c->m + (size_t)(1 + 3 * r->k) * ps - 700; /* across two pages */
    unsigned char want[CHURN_LEN];
    for (unsigned round = 0; !atomic_load(&c->done); round++) {
        pattern(want, CHURN_LEN, round * 2 + (unsigned)r->k);
        size_t got = 0;
        while (got < CHURN_LEN) {
            ssize_t n = read(c->p[r->k][0], dst + got, CHURN_LEN - got);
            if (n == 0)
                return NULL; /* the end: the feeder stopped */
            if (n < 0) {
                fprintf(stderr, "churn read: %s\n", strerror(errno));
                atomic_fetch_add(&c->bad, 1);
                return NULL;
            }
            got += (size_t)n;
        }
        if (memcmp(dst, want, CHURN_LEN) != 0)
            atomic_fetch_add(&c->bad, 1);
        atomic_fetch_add(&c->reads, 1);
    }
    return NULL;
}

static void *churn_feed(void *arg)
{
    churn *c = arg;
    unsigned char data[CHURN_LEN];
    for (unsigned round = 0;; round++)
        for (int k = 0; k < CHURN_READERS; k++) {
            pattern(data, CHURN_LEN, round * 2 + (unsigned)k);
            /* in pieces, so that reads block in the middle of a round; the
             * pipe does not block (a reader may have stopped) */
            for (size_t at = 0; at < CHURN_LEN;) {
                if (atomic_load(&c->done))
                    return NULL;
                ssize_t n = write(c->p[k][1], data + at, 1250);
                if (n > 0)
                    at += (size_t)n;
                else
                    usleep(100);
            }
        }
}

static void churn_adds(mt_track_backend be)
{
    size_t ps = tu_page();
    mt_tracker *t;
    mt_tracker_opts to = {.backend = be};
    MT_CHECK_OK(mt_tracker_create(&to, &t));
    churn c = {.m = tu_map(NP * ps)};
    for (int k = 0; k < CHURN_READERS; k++) {
        MT_CHECK(pipe(c.p[k]) == 0);
        MT_CHECK(fcntl(c.p[k][1], F_SETFL, O_NONBLOCK) == 0);
    }
    pthread_t rd[CHURN_READERS], fd;
    churn_reader rr[CHURN_READERS];
    for (int k = 0; k < CHURN_READERS; k++) {
        rr[k] = (churn_reader){&c, k};
        MT_CHECK(pthread_create(&rd[k], NULL, churn_read, &rr[k]) == 0);
    }
    MT_CHECK(pthread_create(&fd, NULL, churn_feed, &c) == 0);
#ifdef MT_SANITIZER_BUILD
    long want = 200;
#else
    long want = 3000;
#endif
    long adds = 0;
    unsigned char seen[NP];
    while (atomic_load(&c.reads) < want && !atomic_load(&c.bad) && adds < 2000000) {
        mt_range_opts ro = {.backend = be};
        mt_range_id id;
        MT_CHECK_OK(mt_tracker_add(t, c.m, NP * ps, &ro, &id));
        for (int i = 0; i < 3; i++)
            collected(t, id, c.m, seen);
        MT_CHECK_OK(mt_tracker_remove(t, id));
        adds++;
    }
    atomic_store(&c.done, 1);
    pthread_join(fd, NULL);
    for (int k = 0; k < CHURN_READERS; k++)
        close(c.p[k][1]); /* readers still waiting see the end */
    for (int k = 0; k < CHURN_READERS; k++) {
        pthread_join(rd[k], NULL);
        close(c.p[k][0]);
    }
    long bad = atomic_load(&c.bad), reads = atomic_load(&c.reads);
    MT_CHECK_INT_EQ(bad, 0);
    MT_CHECK(reads >= want);
    mt_tracker_destroy(t);
    munmap(c.m, NP * ps);
    printf("  %-6s %ld reads into memory added and removed %ld times meanwhile: every byte right\n",
           mt_track_backend_name(be), reads, adds);
}

int main(void)
{
    if (!tc_need_interposer())
        return 77;
    mt_track_backend be[2];
    int nb = tu_backends(be);
    for (int i = 0; i < nb; i++) {
        late_read(be[i]);
        late_aio(be[i]);
        slots_full(be[i]);
        churn_adds(be[i]);
    }
    puts("track kernel writes in flight when their memory is added (interposer): ok");
    return 0;
}
