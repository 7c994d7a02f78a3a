/* trace: what survives each kind of exit (docs/trace-format.md, "Crash
 * safety"). Writers run in forked children that die by kill -9 at random
 * moments, by fatal signals whose handler calls the emergency flush (a real
 * SIGSEGV, SIGTERM delivered to a thread in the middle of appending, SIGINT,
 * SIGABRT), by _exit after an emergency flush, and by exec after a
 * checkpoint. Every file must read back without error as an exact prefix of
 * the stream the child wrote (regenerated here from the same seed), with the
 * documented end state; where the child got to flush, the whole stream.
 * Also: checkpoints in one process, the seal interval, abandon in a forked
 * child, and opening (lock, FIFO, directory, devices, unwritable paths). */
#define _GNU_SOURCE
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>

#include "hang_dump.h"
#include "trace_util.h"

#define CHUNK 8192
#define BIG 200
#define EMERGENCY_MS 10000 /* sanitizer builds are slow; a deadlock still shows */

static uint64_t rng;

/* ---- the stream and its check ----------------------------------------------- */

/* Appends record i of gen's stream. Returns the writer's result. */
static int put_next(mt_trace_writer *w, tr_gen *g)
{
    mt_trace_record r;
    tr_gen_next(g, &r);
    return mt_trace_write(w, &r);
}

typedef struct readback {
    mt_trace_info info;
    size_t records;  /* matched the stream, in order */
    uint64_t submits;
} readback;

/* Reads the trace: it must open, read to its end without error, and be a
 * prefix of gen(seed)'s stream; tail_records must count what follows the
 * last SUBMIT; a replay of the whole of it must succeed. */
static readback check_prefix(const char *path, uint64_t seed)
{
    readback rb = {0};
    mt_trace_reader *r;
    MT_CHECK_OK(mt_trace_reader_open(path, NULL, &r));
    mt_trace_reader_info(r, &rb.info);
    tr_gen g;
    tr_gen_init(&g, seed, BIG);
    mt_trace_record got, exp;
    uint64_t after_submit = 0;
    int rc;
    while ((rc = mt_trace_next(r, &got)) == 1) {
        tr_gen_next(&g, &exp);
        tr_check_equal(&exp, &got);
        rb.records++;
        after_submit = got.type == MT_TRACE_SUBMIT ? 0 : after_submit + 1;
        rb.submits += got.type == MT_TRACE_SUBMIT;
    }
    MT_CHECK_INT_EQ(rc, 0);
    MT_CHECK_UINT_EQ(rb.records, rb.info.records);
    MT_CHECK_UINT_EQ(rb.submits, rb.info.submits);
    MT_CHECK_UINT_EQ(after_submit, rb.info.tail_records);
    MT_CHECK_INT_EQ(rb.info.complete, rb.info.end != MT_TRACE_END_SCANNED);
    mt_trace_replay *rp;
    MT_CHECK_OK(mt_trace_replay_create(r, NULL, &rp));
    while ((rc = mt_trace_replay_next(rp, NULL)) == 1)
        ;
    MT_CHECK_INT_EQ(rc, 0);
    mt_trace_replay_destroy(rp);
    mt_trace_reader_close(r);
    tr_gen_free(&g);
    return rb;
}

static pid_t fork_child(void)
{
    fflush(stdout);
    fflush(stderr);
    pid_t pid = fork();
    MT_CHECK(pid >= 0);
    return pid;
}

static void sleep_us(long us)
{
    struct timespec t = {us / 1000000, (us % 1000000) * 1000};
    nanosleep(&t, NULL);
}

/* Waits for a child, at most CHILD_WAIT_S seconds: a child that hangs (a
 * deadlock in the emergency flush, which this test exists to find) is
 * killed and the wait that hung named, instead of holding the whole run
 * until CTest's timeout, which says nothing about where. */
#define CHILD_WAIT_S 120
static int wait_child_at(pid_t pid, int line)
{
    int st;
    for (long ms = 0; ms < CHILD_WAIT_S * 1000L; ms += 10) {
        pid_t got = waitpid(pid, &st, WNOHANG);
        MT_CHECK(got == pid || got == 0);
        if (got == pid)
            return st;
        sleep_us(10000);
    }
    fprintf(stderr, "trace crash: the child waited for at line %d hung for %d s: killed\n", line,
            CHILD_WAIT_S);
    mt_hang_dump(pid, "trace crash");
    kill(pid, SIGKILL);
    MT_CHECK(waitpid(pid, &st, 0) == pid);
    MT_CHECK(0);
    return st;
}
#define wait_child(pid) wait_child_at((pid), __LINE__)

/* A page both processes see: the child's handler reports through it. */
static _Atomic int *shared_page(void)
{
    void *p = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    MT_CHECK(p != MAP_FAILED);
    memset(p, 0, 4096);
    return p;
}

/* ---- kill -9 at random moments ---------------------------------------------- */

/* The child writes the stream until killed (or until a cap, then waits),
 * with a checkpoint now and then in some rounds; it reports through the
 * pipe once it is under way. */
static void kill9_child(const char *path, const mt_trace_writer_opts *o, uint64_t seed, int checkpoints,
                        int fd)
{
    mt_trace_writer *w;
    if (mt_trace_writer_open(path, o, &w))
        _exit(3);
    tr_gen g;
    tr_gen_init(&g, seed, BIG);
    /* Rounds with checkpoints stop sooner, after one: some are killed
     * while waiting there, and must read back as complete. */
    size_t cap = checkpoints ? 6000 : 200000;
    for (size_t i = 0; i < cap; i++) {
        if (put_next(w, &g))
            _exit(4);
        if (i == 300 && write(fd, "x", 1) != 1)
            _exit(5);
        if (checkpoints && i % 700 == 699 && mt_trace_writer_checkpoint(w))
            _exit(6);
    }
    if (checkpoints && mt_trace_writer_checkpoint(w))
        _exit(6);
    for (;;)
        pause();
}

static void test_kill9(int rounds)
{
    char path[256];
    tr_tmp_path(path, sizeof path, "kill9");
    size_t total = 0, ended[4] = {0};
    for (int k = 0; k < rounds; k++) {
        uint64_t seed = rng + (uint64_t)k;
        mt_trace_writer_opts o = {.chunk_size = CHUNK, .queue_depth = 1 + (unsigned)(k % 5),
                                  .threads = 1 + (unsigned)(k % 4),
                                  .compression = (mt_trace_compression)(k % 3),
                                  .seal_interval_ms = (unsigned)(k % 2)};
        int p[2];
        MT_CHECK(pipe(p) == 0);
        pid_t pid = fork_child();
        if (pid == 0) {
            close(p[0]);
            kill9_child(path, &o, seed, k % 3 == 0, p[1]);
        }
        close(p[1]);
        char c;
        MT_CHECK(read(p[0], &c, 1) == 1);
        close(p[0]);
        sleep_us((long)mt_test_below(&rng, 30000));
        kill(pid, SIGKILL);
        int st = wait_child(pid);
        MT_CHECK(WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL);
        readback rb = check_prefix(path, seed);
        MT_CHECK(rb.info.end == MT_TRACE_END_SCANNED || rb.info.end == MT_TRACE_END_CHECKPOINT);
        MT_CHECK(rb.info.tail_error == 0 || rb.info.tail_error == MT_ETRUNCATED);
        total += rb.records;
        ended[rb.info.end]++;
    }
    printf("kill -9: %d rounds, %zu records read back, %zu ended scanned, %zu at a checkpoint\n",
           rounds, total, ended[MT_TRACE_END_SCANNED], ended[MT_TRACE_END_CHECKPOINT]);
    unlink(path);
}

/* ---- the seal interval ------------------------------------------------------ */

static uint64_t chunks_written(mt_trace_writer *w)
{
    mt_trace_writer_stats st;
    mt_trace_writer_stats_get(w, &st);
    return st.chunks;
}

static void test_seal_interval(void)
{
    char path[256];
    tr_tmp_path(path, sizeof path, "seal");
    uint8_t data[100] = {7};
    for (unsigned interval = 0; interval <= 1; interval++) {
        mt_trace_writer_opts o = {.seal_interval_ms = interval}; /* 1 MiB chunks: never full here */
        mt_trace_writer *w;
        MT_CHECK_OK(mt_trace_writer_open(path, &o, &w));
        MT_CHECK_OK(mt_trace_write_memory(w, 1, 4096, 0, 0));
        MT_CHECK_OK(mt_trace_write_update(w, 1, 0, 0, data, sizeof data));
        MT_CHECK_OK(mt_trace_write_submit(w, 0, NULL));
        sleep_us(3000);
        MT_CHECK_OK(mt_trace_write_submit(w, 0, NULL)); /* >= 1 ms after the last seal */
        if (interval == 0) {
            sleep_us(50000);
            MT_CHECK_UINT_EQ(chunks_written(w), 0); /* only full chunks seal */
        } else {
            /* Sealed by the SUBMIT; a compressor writes it soon, unasked. */
            uint64_t submits = 0;
            for (int i = 0; i < 10000 && submits < 2; i++) {
                mt_trace_reader *r;
                MT_CHECK_OK(mt_trace_reader_open(path, NULL, &r));
                mt_trace_info info;
                mt_trace_reader_info(r, &info);
                submits = info.submits;
                MT_CHECK_INT_EQ(info.end, MT_TRACE_END_SCANNED);
                mt_trace_reader_close(r);
                if (submits < 2)
                    sleep_us(1000);
            }
            MT_CHECK_UINT_EQ(submits, 2);
        }
        MT_CHECK_OK(mt_trace_writer_close(w));
    }
    unlink(path);
}

/* A child killed without a flush keeps what the interval sealed: each submit
 * comes 2 ms after the previous, so every one seals its chunk. */
static void test_seal_interval_kill9(void)
{
    char path[256];
    tr_tmp_path(path, sizeof path, "sealkill");
    int p[2];
    MT_CHECK(pipe(p) == 0);
    pid_t pid = fork_child();
    if (pid == 0) {
        close(p[0]);
        mt_trace_writer_opts o = {.seal_interval_ms = 1};
        mt_trace_writer *w;
        if (mt_trace_writer_open(path, &o, &w))
            _exit(3);
        uint8_t data[64] = {1};
        mt_trace_write_memory(w, 1, 4096, 0, 0);
        for (int s = 0; s < 20; s++) {
            sleep_us(2000);
            mt_trace_write_update(w, 1, 0, (uint64_t)s * 64, data, sizeof data);
            if (mt_trace_write_submit(w, 0, NULL))
                _exit(4);
        }
        if (write(p[1], "x", 1) != 1)
            _exit(5);
        for (;;)
            pause();
    }
    close(p[1]);
    char c;
    MT_CHECK(read(p[0], &c, 1) == 1);
    close(p[0]);
    uint64_t submits = 0;
    for (int i = 0; i < 10000 && submits < 20; i++) { /* no flush was asked for */
        mt_trace_reader *r;
        if (mt_trace_reader_open(path, NULL, &r) == 0) {
            mt_trace_info info;
            mt_trace_reader_info(r, &info);
            submits = info.submits;
            mt_trace_reader_close(r);
        }
        if (submits < 20)
            sleep_us(1000);
    }
    kill(pid, SIGKILL);
    wait_child(pid);
    MT_CHECK_UINT_EQ(submits, 20);
    mt_trace_reader *r;
    MT_CHECK_OK(mt_trace_reader_open(path, NULL, &r));
    mt_trace_info info;
    mt_trace_reader_info(r, &info);
    MT_CHECK_UINT_EQ(info.submits, 20);
    MT_CHECK_UINT_EQ(info.tail_records, 0);
    mt_trace_reader_close(r);
    unlink(path);
}

/* ---- fatal signals and the emergency flush ---------------------------------- */

static mt_trace_writer *g_w;
static _Atomic int *g_page; /* [0] handler ran, [1] its result, [2..3] progress snapshot,
                              [4..5] an appender's failure before the signal
                              (or the open's) */
static _Atomic uint64_t g_progress[2];

static void on_fatal(int sig)
{
    /* Appends that returned before this moment must be in the file. */
    atomic_store(&g_page[2], (int)atomic_load(&g_progress[0]));
    atomic_store(&g_page[3], (int)atomic_load(&g_progress[1]));
    atomic_store(&g_page[1], mt_trace_writer_emergency_flush(g_w, EMERGENCY_MS));
    atomic_store(&g_page[0], 1);
    signal(sig, SIG_DFL);
    raise(sig);
}

static void install(int sig)
{
    struct sigaction sa = {.sa_handler = on_fatal};
    sigemptyset(&sa.sa_mask);
    MT_CHECK(sigaction(sig, &sa, NULL) == 0);
}

enum { DIE_SEGV, DIE_TERM, DIE_INT, DIE_ABRT, DIE_EXIT, DIE_EXEC };

/* The child writes n records of the stream without flushing (chunks queued,
 * one half filled), then dies as `how` says. */
static void fatal_child(const char *path, uint64_t seed, size_t n, int how, int fd)
{
    mt_trace_writer_opts o = {.chunk_size = CHUNK, .queue_depth = 3, .threads = 2};
    if (mt_trace_writer_open(path, &o, &g_w))
        _exit(3);
    static const int sigs[] = {SIGSEGV, SIGTERM, SIGINT, SIGABRT};
    if (how <= DIE_ABRT)
        install(sigs[how]);
    tr_gen g;
    tr_gen_init(&g, seed, BIG);
    for (size_t i = 0; i < n; i++)
        if (put_next(g_w, &g))
            _exit(4);
    switch (how) {
    case DIE_SEGV: {
        volatile uint8_t *guard = mmap(NULL, 4096, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        guard[0] = 1; /* a real fault */
        break;
    }
    case DIE_ABRT:
        abort();
    case DIE_EXIT: /* what an _exit wrapper does */
        atomic_store(&g_page[1], mt_trace_writer_emergency_flush(g_w, EMERGENCY_MS));
        atomic_store(&g_page[0], 1);
        _exit(0);
    case DIE_EXEC: /* what an exec wrapper does */
        atomic_store(&g_page[1], mt_trace_writer_checkpoint(g_w));
        atomic_store(&g_page[0], 1);
        execl("/bin/true", "true", (char *)NULL);
        _exit(7);
    default: /* SIGTERM or SIGINT from the parent */
        if (write(fd, "x", 1) != 1)
            _exit(5);
        for (;;)
            pause();
    }
    _exit(6);
}

static void test_fatal(int how, size_t n)
{
    static const char *const names[] = {"SIGSEGV", "SIGTERM", "SIGINT", "SIGABRT", "_exit", "exec"};
    char path[256];
    tr_tmp_path(path, sizeof path, "fatal");
    uint64_t seed = rng ^ (uint64_t)how;
    g_page = shared_page();
    int p[2];
    MT_CHECK(pipe(p) == 0);
    pid_t pid = fork_child();
    if (pid == 0) {
        close(p[0]);
        fatal_child(path, seed, n, how, p[1]);
    }
    close(p[1]);
    if (how == DIE_TERM || how == DIE_INT) {
        char c;
        MT_CHECK(read(p[0], &c, 1) == 1);
        kill(pid, how == DIE_TERM ? SIGTERM : SIGINT);
    }
    close(p[0]);
    int st = wait_child(pid);
    static const int sigs[] = {SIGSEGV, SIGTERM, SIGINT, SIGABRT};
    if (how <= DIE_ABRT)
        MT_CHECK(WIFSIGNALED(st) && WTERMSIG(st) == sigs[how]);
    else
        MT_CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);
    MT_CHECK_INT_EQ(atomic_load(&g_page[0]), 1);
    MT_CHECK_INT_EQ(atomic_load(&g_page[1]), 0);
    readback rb = check_prefix(path, seed);
    MT_CHECK_UINT_EQ(rb.records, n); /* everything appended before it died */
    MT_CHECK_INT_EQ(rb.info.end, how == DIE_EXEC ? MT_TRACE_END_CHECKPOINT : MT_TRACE_END_EMERGENCY);
    MT_CHECK_INT_EQ(rb.info.tail_error, 0);
    printf("%s: %zu records, %" PRIu64 " submits, %" PRIu64 " after the last, all read back\n",
           names[how], rb.records, rb.info.submits, rb.info.tail_records);
    munmap((void *)g_page, 4096);
    unlink(path);
}

/* Two threads append tagged updates; SIGTERM is delivered to one of them,
 * most likely while it holds the writer's lock in the middle of an append:
 * the flush must not need that lock. Each thread's records must be in the
 * file in order, without a gap, at least up to what had returned before
 * the signal. */
static void *tagged_appender(void *arg)
{
    uint64_t t = (uint64_t)(uintptr_t)arg;
    uint8_t data[48];
    /* Bounded: on a loaded machine the thread that sends the signal may not
     * run for seconds, while two appenders fill the disk at tens of MB/s
     * (a run left 285 MB). Past the cap a thread waits for the signal. */
    for (uint64_t seq = 0; seq < 100000; seq++) {
        memset(data, (int)(seq & 0xff), sizeof data);
        int rc = mt_trace_write_update(g_w, t + 1, 0, seq, data, sizeof data);
        if (rc == 0 && seq % 5 == 4)
            rc = mt_trace_write_submit(g_w, t, NULL);
        if (rc) {
            /* -ECANCELED once the emergency flush took the writer; anything
             * before the signal is a failure the child reports, instead of
             * waiting for this thread's progress forever. */
            if (atomic_load(&g_page[0]) == 0 && rc != -ECANCELED)
                atomic_store(&g_page[4 + t], rc);
            break;
        }
        atomic_store(&g_progress[t], seq + 1);
    }
    for (;;)
        sleep_us(1000);
    return NULL;
}

/* The first of errs[0, n) that says the file system has no room for the
 * trace (a negated errno), or 0. */
static int no_space(const int *errs, int n)
{
    for (int i = 0; i < n; i++)
        if (errs[i] == -ENOSPC || errs[i] == -EDQUOT || errs[i] == -EFBIG)
            return errs[i];
    return 0;
}

static void test_signal_while_appending(int rounds)
{
    int no_space_retries = 0;
    char path[256];
    tr_tmp_path(path, sizeof path, "busy");
    g_page = shared_page();
    for (int k = 0; k < rounds; k++) {
        for (int i = 0; i < 6; i++)
            atomic_store(&g_page[i], 0);
        pid_t pid = fork_child();
        if (pid == 0) {
            mt_trace_writer_opts o = {.chunk_size = 2048, .queue_depth = 2,
                                      .threads = 1 + (unsigned)(k % 3)};
            int orc = mt_trace_writer_open(path, &o, &g_w);
            if (orc) {
                atomic_store(&g_page[4], orc);
                _exit(3);
            }
            install(SIGTERM);
            pthread_t th[2];
            for (uintptr_t t = 0; t < 2; t++)
                pthread_create(&th[t], NULL, tagged_appender, (void *)t);
            while (atomic_load(&g_progress[0]) < 2000 || atomic_load(&g_progress[1]) < 2000) {
                if (atomic_load(&g_page[4]) || atomic_load(&g_page[5]))
                    _exit(8);
                sleep_us(100);
            }
            /* An appender that fails after the loop waits for the signal
             * like one past its cap, but its failure is the round's
             * result: keep looking. */
            pthread_kill(th[k % 2], SIGTERM);
            for (;;) {
                if (atomic_load(&g_page[0]) == 0 && (atomic_load(&g_page[4]) || atomic_load(&g_page[5])))
                    _exit(8);
                sleep_us(1000);
            }
        }
        int st = wait_child(pid);
        int errs[3] = {atomic_load(&g_page[4]), atomic_load(&g_page[5]), atomic_load(&g_page[1])};
        if (!WIFSIGNALED(st))
            fprintf(stderr, "trace crash: round %d: exit %d, the appenders' errors %d and %d\n", k,
                    WEXITSTATUS(st), errs[0], errs[1]);
        /* A full file system (the CI's disk is shared) is not the writer's
         * fault: the round runs again, a few times, after a pause. */
        int full = no_space(errs, 3);
        if (full && no_space_retries < 10) {
            fprintf(stderr, "trace crash: round %d: no room for the trace (%s): again in 1 s\n", k,
                    strerror(-full));
            no_space_retries++;
            sleep_us(1000000);
            k--;
            continue;
        }
        MT_CHECK(WIFSIGNALED(st) && WTERMSIG(st) == SIGTERM);
        MT_CHECK_INT_EQ(atomic_load(&g_page[0]), 1);
        MT_CHECK_INT_EQ(atomic_load(&g_page[1]), 0);
        mt_trace_reader *r;
        MT_CHECK_OK(mt_trace_reader_open(path, NULL, &r));
        mt_trace_info info;
        mt_trace_reader_info(r, &info);
        MT_CHECK_INT_EQ(info.end, MT_TRACE_END_EMERGENCY);
        uint64_t next[2] = {0, 0};
        mt_trace_record rec;
        int rc;
        while ((rc = mt_trace_next(r, &rec)) == 1) {
            if (rec.type != MT_TRACE_UPDATE)
                continue;
            uint64_t t = rec.u.update.memory - 1;
            MT_CHECK(t < 2);
            MT_CHECK_UINT_EQ(rec.u.update.offset, next[t]);
            MT_CHECK_UINT_EQ(((const uint8_t *)rec.u.update.data)[47], next[t] & 0xff);
            next[t]++;
        }
        MT_CHECK_INT_EQ(rc, 0);
        for (int t = 0; t < 2; t++)
            MT_CHECK(next[t] >= (uint64_t)atomic_load(&g_page[2 + t]));
        mt_trace_reader_close(r);
    }
    printf("SIGTERM to an appending thread: %d rounds, all read back in order\n", rounds);
    munmap((void *)g_page, 4096);
    unlink(path);
}

/* ---- checkpoints in one process --------------------------------------------- */

static void test_checkpoint(void)
{
    char path[256];
    tr_tmp_path(path, sizeof path, "ckpt");
    uint64_t seed = rng ^ 0xc0ffee;
    mt_trace_writer_opts o = {.chunk_size = CHUNK, .threads = 3};
    mt_trace_writer *w;
    MT_CHECK_OK(mt_trace_writer_open(path, &o, &w));
    tr_gen g;
    tr_gen_init(&g, seed, BIG);
    size_t n = 0;
    for (int round = 0; round < 4; round++) {
        for (size_t i = 0; i < 1500; i++, n++)
            MT_CHECK_OK(put_next(w, &g));
        MT_CHECK_OK(mt_trace_writer_checkpoint(w));
        readback rb = check_prefix(path, seed);
        MT_CHECK_UINT_EQ(rb.records, n);
        MT_CHECK_INT_EQ(rb.info.end, MT_TRACE_END_CHECKPOINT);
        MT_CHECK_INT_EQ(rb.info.indexed, 1);
        /* Twice in a row: the same index written again in place. */
        MT_CHECK_OK(mt_trace_writer_checkpoint(w));
        MT_CHECK_UINT_EQ(check_prefix(path, seed).records, n);
        /* Appending goes on over the index: flushed, it reads as a scan. */
        for (size_t i = 0; i < 700; i++, n++)
            MT_CHECK_OK(put_next(w, &g));
        MT_CHECK_OK(mt_trace_writer_flush(w));
        rb = check_prefix(path, seed);
        MT_CHECK_UINT_EQ(rb.records, n);
        MT_CHECK_INT_EQ(rb.info.end, MT_TRACE_END_SCANNED);
        MT_CHECK_INT_EQ(rb.info.index_error, MT_ETRUNCATED); /* no trailer: cut off, not damaged */
    }
    /* A checkpoint with nothing new, then close. */
    MT_CHECK_OK(mt_trace_writer_checkpoint(w));
    MT_CHECK_OK(mt_trace_writer_close(w));
    readback rb = check_prefix(path, seed);
    MT_CHECK_UINT_EQ(rb.records, n);
    MT_CHECK_INT_EQ(rb.info.end, MT_TRACE_END_CLOSED);
    tr_gen_free(&g);

    /* An empty trace: checkpoint and close give a valid, empty, complete trace. */
    MT_CHECK_OK(mt_trace_writer_open(path, NULL, &w));
    MT_CHECK_OK(mt_trace_writer_checkpoint(w));
    mt_trace_reader *r;
    MT_CHECK_OK(mt_trace_reader_open(path, NULL, &r));
    mt_trace_info info;
    mt_trace_reader_info(r, &info);
    MT_CHECK_INT_EQ(info.end, MT_TRACE_END_CHECKPOINT);
    MT_CHECK_UINT_EQ(info.records, 0);
    mt_trace_reader_close(r);
    /* Emergency flush in the same process, from a normal thread: then the
     * writer takes nothing more, and close only frees it. */
    MT_CHECK_OK(mt_trace_write_submit(w, 0, NULL));
    MT_CHECK_OK(mt_trace_writer_emergency_flush(w, EMERGENCY_MS));
    MT_CHECK_OK(mt_trace_writer_emergency_flush(w, EMERGENCY_MS)); /* the first one's result */
    MT_CHECK_ERR(mt_trace_write_submit(w, 0, NULL), -ECANCELED);
    MT_CHECK_ERR(mt_trace_writer_checkpoint(w), -ECANCELED);
    MT_CHECK_OK(mt_trace_writer_close(w));
    MT_CHECK_OK(mt_trace_reader_open(path, NULL, &r));
    mt_trace_reader_info(r, &info);
    MT_CHECK_INT_EQ(info.end, MT_TRACE_END_EMERGENCY);
    MT_CHECK_UINT_EQ(info.submits, 1);
    mt_trace_reader_close(r);
    unlink(path);
}

/* ---- fork: abandon, and one trace per file ---------------------------------- */

static void test_abandon(void)
{
    char path[256];
    tr_tmp_path(path, sizeof path, "fork");
    uint64_t seed = rng ^ 0xf0f0;
    mt_trace_writer_opts o = {.chunk_size = CHUNK, .threads = 2};
    mt_trace_writer *w;
    MT_CHECK_OK(mt_trace_writer_open(path, &o, &w));
    tr_gen g;
    tr_gen_init(&g, seed, BIG);
    size_t n = 0;
    for (; n < 1000; n++)
        MT_CHECK_OK(put_next(w, &g));
    /* Forked while records sit in the chunk being filled and in the queue. */
    pid_t pid = fork_child();
    if (pid == 0) {
        mt_trace_writer *w2;
        /* Another open of the same file is refused: it is being written. */
        int rc = mt_trace_writer_open(path, NULL, &w2);
        mt_trace_writer_abandon(w);
        _exit(rc == -EBUSY ? 0 : 10);
    }
    MT_CHECK_INT_EQ(wait_child(pid), 0);
    /* A child that forgets to abandon and appends, flushes and closes gets
     * -ECHILD instead of waiting forever for threads it does not have, or
     * on locks and condition variables they left behind. */
    pid = fork_child();
    if (pid == 0) {
        tr_gen g2;
        tr_gen_init(&g2, 99, BIG);
        int rc = 0;
        for (int i = 0; i < 20000 && rc == 0; i++) /* enough to need a buffer */
            rc = put_next(w, &g2);
        int frc = mt_trace_writer_flush(w);
        int crc = mt_trace_writer_close(w);
        int ckrc = mt_trace_writer_checkpoint(w);
        if (mt_trace_writer_emergency_flush(w, 100) != -ECHILD) /* never into the parent's file */
            _exit(12);
        _exit(rc == -ECHILD && frc == -ECHILD && ckrc == -ECHILD && crc == -ECHILD ? 0 : 11);
    }
    MT_CHECK_INT_EQ(wait_child(pid), 0);
    /* So is a second writer in this process, and the trace is untouched. */
    mt_trace_writer *w2;
    MT_CHECK_ERR(mt_trace_writer_open(path, NULL, &w2), -EBUSY);
    for (; n < 2500; n++)
        MT_CHECK_OK(put_next(w, &g));
    MT_CHECK_OK(mt_trace_writer_close(w));
    readback rb = check_prefix(path, seed);
    MT_CHECK_UINT_EQ(rb.records, n);
    MT_CHECK_INT_EQ(rb.info.end, MT_TRACE_END_CLOSED);
    tr_gen_free(&g);
    /* Closed, the lock is gone: the path can be written again. */
    MT_CHECK_OK(mt_trace_writer_open(path, NULL, &w));
    MT_CHECK_OK(mt_trace_writer_close(w));
    mt_trace_writer_abandon(NULL);
    unlink(path);
}

/* ---- opening ---------------------------------------------------------------- */

static void test_open_errors(void)
{
    char dir[256], path[300];
    tr_tmp_path(dir, sizeof dir, "dir");
    MT_CHECK(mkdir(dir, 0755) == 0);
    mt_trace_writer *w;
    MT_CHECK_ERR(mt_trace_writer_open(dir, NULL, &w), -EISDIR);
    snprintf(path, sizeof path, "%s/fifo", dir);
    MT_CHECK(mkfifo(path, 0644) == 0);
    MT_CHECK_ERR(mt_trace_writer_open(path, NULL, &w), -ESPIPE); /* no reader: never blocks */
    int rd = open(path, O_RDONLY | O_NONBLOCK);
    MT_CHECK(rd >= 0);
    MT_CHECK_ERR(mt_trace_writer_open(path, NULL, &w), -ESPIPE); /* a reader: still not a file */
    close(rd);
    unlink(path);
    MT_CHECK_ERR(mt_trace_writer_open("/dev/full", NULL, &w), -ESPIPE);
    /* Unwritable, also for root: sysfs refuses new files (EACCES, or EROFS
     * where it is mounted read-only); procfs files take no trace. */
    int rc = mt_trace_writer_open("/sys/x.mtrace", NULL, &w);
    MT_CHECK(rc == -EACCES || rc == -EROFS);
    MT_CHECK(mt_trace_writer_open("/proc/version", NULL, &w) < 0);
    snprintf(path, sizeof path, "%s/missing/x.mtrace", dir);
    MT_CHECK_ERR(mt_trace_writer_open(path, NULL, &w), -ENOENT);
    mt_trace_writer_opts bad = {.compression = (mt_trace_compression)3};
    snprintf(path, sizeof path, "%s/untouched", dir);
    MT_CHECK_ERR(mt_trace_writer_open(path, &bad, &w), -EINVAL);
    struct stat st;
    MT_CHECK(stat(path, &st) < 0 && errno == ENOENT); /* bad options: no file created */
    rmdir(dir);

    /* A full disk (through open_fd: /dev/full is no regular file): the
     * emergency flush reports the error that stopped the writer. */
    int fd = open("/dev/full", O_WRONLY);
    if (fd >= 0 && mt_trace_writer_open_fd(fd, NULL, &w) == 0) {
        uint8_t data[4096] = {1};
        rc = 0;
        for (int i = 0; i < 1000 && rc == 0; i++)
            rc = mt_trace_write_update(w, 1, 0, 0, data, sizeof data);
        if (rc == 0)
            rc = mt_trace_writer_flush(w);
        MT_CHECK_INT_EQ(rc, -ENOSPC);
        MT_CHECK_ERR(mt_trace_writer_checkpoint(w), -ENOSPC);
        MT_CHECK_ERR(mt_trace_writer_emergency_flush(w, 100), -ENOSPC);
        MT_CHECK_ERR(mt_trace_writer_close(w), -ENOSPC);
    }

    mt_trace_compression c;
    MT_CHECK_OK(mt_trace_compression_parse("fast", &c));
    MT_CHECK_INT_EQ(c, MT_TRACE_COMPRESSION_FAST);
    MT_CHECK_OK(mt_trace_compression_parse("none", &c));
    MT_CHECK_INT_EQ(c, MT_TRACE_COMPRESSION_NONE);
    MT_CHECK_OK(mt_trace_compression_parse("default", &c));
    MT_CHECK_INT_EQ(c, MT_TRACE_COMPRESSION_DEFAULT);
    MT_CHECK_ERR(mt_trace_compression_parse("lz4", &c), -EINVAL);
    MT_CHECK_ERR(mt_trace_compression_parse(NULL, &c), -EINVAL);
    MT_CHECK(strcmp(mt_trace_compression_name(MT_TRACE_COMPRESSION_FAST), "fast") == 0);
}

/* Each step is named before it runs, line-buffered: a run that hangs and is
 * killed by CTest's timeout then shows where (its output is a pipe, which
 * would otherwise hold everything in the buffer that the kill loses). */
#define STEP(call)                                                                                 \
    do {                                                                                           \
        printf("step: %s\n", #call);                                                               \
        call;                                                                                      \
    } while (0)

int main(int argc, char **argv)
{
    setvbuf(stdout, NULL, _IOLBF, 0);
    rng = mt_test_seed(argc, argv);
    STEP(test_open_errors());
    STEP(test_checkpoint());
    STEP(test_abandon());
    STEP(test_seal_interval());
    STEP(test_seal_interval_kill9());
    for (int how = DIE_SEGV; how <= DIE_EXEC; how++)
        STEP(test_fatal(how, 2000 + (size_t)mt_test_below(&rng, 2000)));
    STEP(test_signal_while_appending(6));
    STEP(test_kill9(40));
    printf("ok\n");
    return 0;
}
