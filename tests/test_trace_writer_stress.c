/* trace writer: the hand-off between callers and the compressor threads.
 * Several threads append records concurrently with tiny chunks and short
 * queues, so every seal contends for buffers and callers stall; chunks are
 * compressed by several threads and must still reach the file in order;
 * some threads flush, checkpoint and read statistics meanwhile. Afterwards
 * every record is in the file exactly once, each thread's records in its
 * own order, and the submit numbering is dense. Then the emergency flush
 * races the appenders: the file must hold every record whose append had
 * returned before it began, in order, nothing torn. Run under TSan by CI. */
#include <pthread.h>
#include <stdatomic.h>

#include "trace_util.h"

#define THREADS 4
#define PER_THREAD 3000

static mt_trace_writer *w;
static int g_checkpoints;
static _Atomic uint64_t g_done[THREADS + 1]; /* appends returned, per thread */
static _Atomic int g_stop;

typedef struct worker {
    int id;
    uint64_t rng;
} worker;

static void *work(void *arg)
{
    worker *wk = arg;
    uint8_t data[300];
    for (uint32_t seq = 0; seq < PER_THREAD; seq++) {
        /* UPDATE records carry (thread, seq) in memory id and offset. */
        size_t len = (size_t)mt_test_below(&wk->rng, sizeof data);
        memset(data, (int)(seq & 0xff), len);
        MT_CHECK_OK(mt_trace_write_update(w, (uint64_t)wk->id, 0, seq, data, len));
        if (seq % 7 == 0)
            MT_CHECK_OK(mt_trace_write_submit(w, (uint64_t)wk->id, NULL));
        if (seq % 500 == 0 && wk->id % 2 == 0)
            MT_CHECK_OK(mt_trace_writer_flush(w));
        if (g_checkpoints && seq % 400 == 0 && wk->id == 1)
            MT_CHECK_OK(mt_trace_writer_checkpoint(w));
        if (seq % 300 == 0) {
            mt_trace_writer_stats st;
            mt_trace_writer_stats_get(w, &st);
            MT_CHECK(st.records > 0);
        }
    }
    return NULL;
}

/* Checks each thread's updates: in order from 0, none twice, content
 * intact; returns how many of thread t's were read in next[t]. */
static void read_back(const char *path, uint32_t *next, uint64_t *submits, mt_trace_info *info)
{
    mt_trace_reader *r;
    MT_CHECK_OK(mt_trace_reader_open(path, NULL, &r));
    mt_trace_reader_info(r, info);
    mt_trace_record rec;
    int rc;
    *submits = 0;
    while ((rc = mt_trace_next(r, &rec)) == 1) {
        if (rec.type == MT_TRACE_SUBMIT) {
            MT_CHECK_UINT_EQ(rec.u.submit.index, *submits);
            (*submits)++;
            continue;
        }
        MT_CHECK_INT_EQ(rec.type, MT_TRACE_UPDATE);
        uint64_t t = rec.u.update.memory;
        MT_CHECK(t >= 1 && t <= THREADS);
        MT_CHECK_UINT_EQ(rec.u.update.offset, next[t]); /* in order, none lost, none twice */
        for (size_t i = 0; i < rec.u.update.length; i++)
            MT_CHECK_UINT_EQ(((const uint8_t *)rec.u.update.data)[i], next[t] & 0xff);
        next[t]++;
    }
    MT_CHECK_INT_EQ(rc, 0);
    mt_trace_reader_close(r);
}

static void run(const char *name, const mt_trace_writer_opts *o, int checkpoints, uint64_t seed)
{
    char path[256];
    tr_tmp_path(path, sizeof path, "stress");
    g_checkpoints = checkpoints;
    MT_CHECK_OK(mt_trace_writer_open(path, o, &w));
    pthread_t th[THREADS];
    worker wk[THREADS];
    for (int i = 0; i < THREADS; i++) {
        wk[i] = (worker){i + 1, seed + (uint64_t)i};
        MT_CHECK(pthread_create(&th[i], NULL, work, &wk[i]) == 0);
    }
    for (int i = 0; i < THREADS; i++)
        pthread_join(th[i], NULL);
    MT_CHECK_OK(mt_trace_writer_flush(w)); /* then every chunk is counted */
    mt_trace_writer_stats st;
    mt_trace_writer_stats_get(w, &st);
    printf("%s: records %" PRIu64 ", chunks %" PRIu64 ", stalls %" PRIu64 "\n", name, st.records,
           st.chunks, st.stalls);
    MT_CHECK_OK(mt_trace_writer_close(w));

    uint32_t next[THREADS + 1] = {0};
    uint64_t submits;
    mt_trace_info info;
    read_back(path, next, &submits, &info);
    MT_CHECK_INT_EQ(info.end, MT_TRACE_END_CLOSED);
    for (int t = 1; t <= THREADS; t++)
        MT_CHECK_UINT_EQ(next[t], PER_THREAD);
    MT_CHECK_UINT_EQ(submits, (uint64_t)THREADS * ((PER_THREAD + 6) / 7));
    MT_CHECK_UINT_EQ(submits, info.submits);
    MT_CHECK_UINT_EQ(st.chunks, info.chunks);
    unlink(path);
}

/* ---- the emergency flush against running appenders ------------------------- */

static void *append_until_stopped(void *arg)
{
    worker *wk = arg;
    uint8_t data[200];
    for (uint32_t seq = 0; !atomic_load_explicit(&g_stop, memory_order_relaxed); seq++) {
        size_t len = 1 + (size_t)mt_test_below(&wk->rng, sizeof data - 1);
        memset(data, (int)(seq & 0xff), len);
        if (mt_trace_write_update(w, (uint64_t)wk->id, 0, seq, data, len))
            break; /* -ECANCELED once the flush took over */
        atomic_store_explicit(&g_done[wk->id], seq + 1, memory_order_release);
        if (seq % 5 == 4 && mt_trace_write_submit(w, (uint64_t)wk->id, NULL))
            break;
    }
    return NULL;
}

static void run_emergency(const mt_trace_writer_opts *o, uint64_t seed, unsigned wait_us)
{
    char path[256];
    tr_tmp_path(path, sizeof path, "emerg");
    MT_CHECK_OK(mt_trace_writer_open(path, o, &w));
    atomic_store(&g_stop, 0);
    pthread_t th[THREADS];
    worker wk[THREADS];
    for (int i = 0; i < THREADS; i++) {
        atomic_store(&g_done[i + 1], 0);
        wk[i] = (worker){i + 1, seed + (uint64_t)i};
        MT_CHECK(pthread_create(&th[i], NULL, append_until_stopped, &wk[i]) == 0);
    }
    usleep(wait_us);
    uint64_t before[THREADS + 1];
    for (int t = 1; t <= THREADS; t++) /* acquire: those appends had returned */
        before[t] = atomic_load_explicit(&g_done[t], memory_order_acquire);
    MT_CHECK_OK(mt_trace_writer_emergency_flush(w, 10000));
    atomic_store(&g_stop, 1);
    for (int i = 0; i < THREADS; i++)
        pthread_join(th[i], NULL);
    MT_CHECK_ERR(mt_trace_write_submit(w, 0, NULL), -ECANCELED);
    MT_CHECK_OK(mt_trace_writer_close(w));
    uint32_t next[THREADS + 1] = {0};
    uint64_t submits;
    mt_trace_info info;
    read_back(path, next, &submits, &info);
    MT_CHECK_INT_EQ(info.end, MT_TRACE_END_EMERGENCY);
    MT_CHECK_INT_EQ(info.tail_error, 0);
    for (int t = 1; t <= THREADS; t++)
        MT_CHECK(next[t] >= before[t]);
    unlink(path);
}

int main(int argc, char **argv)
{
    uint64_t seed = mt_test_seed(argc, argv);
    mt_trace_writer_opts one = {.chunk_size = 512, .queue_depth = 1, .threads = 1};
    run("1 thread, queue 1", &one, 0, seed);
    mt_trace_writer_opts many = {.chunk_size = 512, .queue_depth = 3, .threads = 4,
                                 .compression = MT_TRACE_COMPRESSION_FAST, .seal_interval_ms = 1};
    run("4 threads, queue 3, checkpoints", &many, 1, seed + 100);
    mt_trace_writer_opts raw = {.chunk_size = 600, .queue_depth = 8, .threads = 2,
                                .compression = MT_TRACE_COMPRESSION_NONE};
    run("raw, 2 threads", &raw, 1, seed + 200);
    for (unsigned k = 0; k < 6; k++) {
        mt_trace_writer_opts o = {.chunk_size = 512 + 700 * k, .queue_depth = 1 + k,
                                  .threads = 1 + k % 4, .compression = (mt_trace_compression)(k % 3)};
        run_emergency(&o, seed + 300 + k, 2000 + 3000 * k);
    }
    printf("emergency flush against %d appenders: 6 rounds, nothing lost or torn\n", THREADS);
    printf("ok\n");
    return 0;
}
