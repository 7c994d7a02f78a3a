/* trace writer: the hand-off between callers and the compressor thread.
 * Several threads append records concurrently with tiny chunks and a queue
 * of one, so every seal contends for buffers and callers stall; some threads
 * flush and read statistics meanwhile. Afterwards every record is in the
 * file exactly once, each thread's records in its own order, and the submit
 * numbering is dense. Run under TSan by CI. */
#include <pthread.h>

#include "trace_util.h"

#define THREADS 4
#define PER_THREAD 3000

static mt_trace_writer *w;

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
        if (seq % 300 == 0) {
            mt_trace_writer_stats st;
            mt_trace_writer_stats_get(w, &st);
            MT_CHECK(st.records > 0);
        }
    }
    return NULL;
}

int main(int argc, char **argv)
{
    uint64_t seed = mt_test_seed(argc, argv);
    char path[256];
    tr_tmp_path(path, sizeof path, "stress");
    mt_trace_writer_opts o = {.chunk_size = 512, .queue_depth = 1};
    MT_CHECK_OK(mt_trace_writer_open(path, &o, &w));
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
    printf("records %" PRIu64 ", chunks %" PRIu64 ", stalls %" PRIu64 "\n", st.records, st.chunks, st.stalls);
    MT_CHECK_OK(mt_trace_writer_close(w));

    mt_trace_reader *r;
    MT_CHECK_OK(mt_trace_reader_open(path, NULL, &r));
    mt_trace_info info;
    mt_trace_reader_info(r, &info);
    MT_CHECK_INT_EQ(info.complete, 1);
    uint32_t next[THREADS + 1] = {0};
    uint64_t submits = 0, per_queue[THREADS + 1] = {0};
    mt_trace_record rec;
    int rc;
    while ((rc = mt_trace_next(r, &rec)) == 1) {
        if (rec.type == MT_TRACE_SUBMIT) {
            MT_CHECK_UINT_EQ(rec.u.submit.index, submits);
            submits++;
            MT_CHECK(rec.u.submit.queue >= 1 && rec.u.submit.queue <= THREADS);
            per_queue[rec.u.submit.queue]++;
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
    for (int t = 1; t <= THREADS; t++) {
        MT_CHECK_UINT_EQ(next[t], PER_THREAD);
        MT_CHECK_UINT_EQ(per_queue[t], (PER_THREAD + 6) / 7);
    }
    MT_CHECK_UINT_EQ(submits, info.submits);
    MT_CHECK_UINT_EQ(st.chunks, info.chunks);
    mt_trace_reader_close(r);
    unlink(path);
    printf("ok\n");
    return 0;
}
