/* coherence from many application threads at once: every function may be
 * called from any thread, so several threads enqueue, map, create and free
 * against one context, each checking what its commands saw against its own
 * reference copy.
 *
 * Each worker owns buffers (writes and reads of random ranges on random
 * devices, maps for reading and writing, sub-buffers, frees and new
 * buffers). All of them read one shared buffer that no one writes, on
 * every device at once (its instances are created and evicted under them).
 * Two workers of one client hand buffers to each other: the writer passes
 * the event of its write, the reader waits for it on another device. The
 * simulated devices are small, so instances are evicted while other
 * threads' commands still use theirs, and an enqueue may find no room at
 * all (MT_EDEVMEM: the instances there hold the only copy of their
 * buffers); it must then have changed nothing, which the next reads check.
 * Workers on clients of their own destroy them at the end while the others
 * go on. Each worker also writes the host memory of a tracked buffer of its
 * own directly (MT_COH_BUF_TRACK_HOST) and reads it on a device, while the
 * others collect theirs: the whole run once with the signal tracker (pages
 * tracked with the interposer, test_coherence_threads_preload; whole
 * uploads without it) and once with uffd where the kernel has it. With MT_COH_TEST_CUDA=1 two
 * devices on the first GPU join (or on the mock driver: the CTest entry
 * test_coherence_threads_mock), with as little memory as the simulated
 * ones. */
#include <pthread.h>
#include <stdio.h>
#include <unistd.h>

#include "coh_cuda_hooks.h"
#include "coh_util.h"
#include "mt_test.h"

enum { WORKERS = 4, NSIM = 3, MAXDEV = 8, NBUF = 6, BUFSZ = 64 << 10, SHARED = 256 << 10,
       DEVMEM = 768 << 10 };

static mt_coh *c;
static uint32_t dev[MAXDEV]; /* dev[0] the host device, then simulated ones, then GPUs */
static int ndev;
static int use_cuda;
static mt_coh_client *shared_client;
static mt_coh_buf shared_buf;
static uint8_t *shared_ref;
static int ops_per_worker = 1000;

/* The hand-over between workers 0 and 1 (one client): a buffer, the pattern
 * written over it, and the event of that write. */
typedef struct mailbox {
    pthread_mutex_t lock;
    pthread_cond_t cond;
    int full, closed;
    mt_coh_buf buf;
    uint64_t pattern;
    mt_coh_event *ev; /* the writer's reference, the reader's to release */
    tk_cmd *k;        /* the write's state, the reader's to free */
} mailbox;
static mailbox box;

typedef struct worker {
    int id;
    uint64_t seed;
    mt_coh_client *cl; /* shared by workers 0 and 1 */
    mt_coh_queue *q[MAXDEV];
    mt_coh_queue *sq[MAXDEV]; /* of the shared buffer's client */
    mt_coh_buf buf[NBUF];
    uint8_t *ref[NBUF];
    mt_coh_buf tracked; /* written by the host directly */
    uint8_t *tmem;
    uint64_t reads, writes, maps, handed, no_room;
} worker;

/* An enqueue's result: 0, or MT_EDEVMEM (no room on the device even after
 * eviction), counted; anything else fails the test. */
static int room(worker *w, int rc)
{
    if (rc == MT_EDEVMEM) {
        w->no_room++;
        return 0;
    }
    MT_CHECK_OK(rc);
    return 1;
}

/* One command on queue `d`, waited for: 1 and what it saw of argument 0 in
 * *seen, or 0 when there was no room for it. */
static int run1(worker *w, int d, mt_coh_arg a, uint64_t pattern, mt_coh_event *const *wait,
                uint32_t nwait, uint64_t *seen)
{
    tk_cmd k = {.nargs = 1, .access = {a.access}, .pattern = {pattern}};
    mt_coh_command cmd = {.fn = tk_run, .user = &k, .args = &a, .nargs = 1, .wait = wait,
                          .nwait = nwait};
    mt_coh_event *ev;
    if (!room(w, mt_coh_enqueue(w->q[d], &cmd, &ev)))
        return 0;
    MT_CHECK_OK(mt_coh_event_wait(ev, -1));
    mt_coh_event_release(ev);
    *seen = k.seen[0];
    return 1;
}

static void check_read(worker *w, int d, mt_coh_buf b, const uint8_t *ref, uint64_t off,
                       uint64_t size)
{
    mt_coh_arg a = {.buf = b, .offset = off, .size = size, .access = MT_COH_READ};
    uint64_t seen;
    if (!run1(w, d, a, 0, NULL, 0, &seen))
        return;
    if (seen != tk_hash(ref + off, size)) {
        fprintf(stderr, "worker %d: device %u read [%llu, +%llu) stale\n", w->id, dev[d],
                (unsigned long long)off, (unsigned long long)size);
        MT_CHECK(0);
    }
    w->reads++;
}

static void new_buffer(worker *w, int i)
{
    MT_CHECK_OK(mt_coh_buffer_create(w->cl, BUFSZ, NULL, &w->buf[i]));
    memset(w->ref[i], 0, BUFSZ); /* a new buffer reads as zero */
}

/* A random 4 KiB-aligned range of a buffer of `size` bytes. */
static void pick(uint64_t *rng, uint64_t size, uint64_t *off, uint64_t *len)
{
    uint64_t pages = size / 4096, first = mt_test_below(rng, pages);
    *off = first * 4096;
    *len = (1 + mt_test_below(rng, pages - first)) * 4096;
}

static void op_write(worker *w, uint64_t *rng)
{
    int i = (int)mt_test_below(rng, NBUF), d = (int)mt_test_below(rng, (uint64_t)ndev);
    uint64_t off, len, pattern = mt_test_rand(rng) | 1;
    pick(rng, BUFSZ, &off, &len);
    mt_coh_arg a = {.buf = w->buf[i], .offset = off, .size = len,
                    .access = mt_test_below(rng, 2) ? MT_COH_WRITE : MT_COH_RW};
    uint64_t seen;
    if (!run1(w, d, a, pattern, NULL, 0, &seen))
        return; /* nothing written */
    tk_fill(w->ref[i] + off, len, pattern);
    w->writes++;
}

static void op_map(worker *w, uint64_t *rng)
{
    int i = (int)mt_test_below(rng, NBUF), d = (int)mt_test_below(rng, (uint64_t)ndev);
    uint64_t off, len;
    pick(rng, BUFSZ, &off, &len);
    int write = (int)mt_test_below(rng, 2);
    mt_coh_arg a = {.buf = w->buf[i], .offset = off, .size = len,
                    .access = write ? MT_COH_RW : MT_COH_READ};
    void *p;
    mt_coh_event *ev;
    if (!room(w, mt_coh_map(w->q[d], &a, NULL, 0, &p, &ev)))
        return;
    MT_CHECK_OK(mt_coh_event_wait(ev, -1));
    mt_coh_event_release(ev);
    MT_CHECK_MEM_EQ(p, w->ref[i] + off, len);
    if (write) {
        uint64_t pattern = mt_test_rand(rng);
        tk_fill(p, len, pattern);
        tk_fill(w->ref[i] + off, len, pattern);
    }
    MT_CHECK_OK(mt_coh_unmap(w->q[d], p, &ev));
    MT_CHECK_OK(mt_coh_event_wait(ev, -1));
    mt_coh_event_release(ev);
    w->maps++;
}

/* A sub-buffer written on one device and read back through its parent on
 * another, then freed. */
static void op_sub(worker *w, uint64_t *rng)
{
    int i = (int)mt_test_below(rng, NBUF);
    uint64_t off, len, pattern = mt_test_rand(rng);
    pick(rng, BUFSZ, &off, &len);
    mt_coh_buf sb;
    MT_CHECK_OK(mt_coh_subbuffer_create(w->cl, w->buf[i], off, len, 0, &sb));
    mt_coh_arg a = {.buf = sb, .size = len, .access = MT_COH_WRITE};
    uint64_t seen;
    if (run1(w, (int)mt_test_below(rng, (uint64_t)ndev), a, pattern, NULL, 0, &seen))
        tk_fill(w->ref[i] + off, len, pattern);
    MT_CHECK_OK(mt_coh_buffer_free(w->cl, sb));
    check_read(w, (int)mt_test_below(rng, (uint64_t)ndev), w->buf[i], w->ref[i], 0, BUFSZ);
}

/* Worker 0 writes a buffer and hands it over with the write's event,
 * without waiting; worker 1 reads it on another device after that event. */
static void op_handover(worker *w, uint64_t *rng)
{
    if (w->id == 0) {
        mt_coh_buf b;
        MT_CHECK_OK(mt_coh_buffer_create(w->cl, BUFSZ, NULL, &b));
        uint64_t pattern = mt_test_rand(rng);
        tk_cmd *k = calloc(1, sizeof *k); /* the reader frees it once the write is done */
        *k = (tk_cmd){.nargs = 1, .access = {MT_COH_WRITE}, .pattern = {pattern}};
        mt_coh_arg a = {.buf = b, .size = BUFSZ, .access = MT_COH_WRITE};
        mt_coh_command cmd = {.fn = tk_run, .user = k, .args = &a, .nargs = 1};
        mt_coh_event *ev;
        if (!room(w, mt_coh_enqueue(w->q[1 + mt_test_below(rng, (uint64_t)ndev - 1)], &cmd, &ev))) {
            free(k);
            MT_CHECK_OK(mt_coh_buffer_free(w->cl, b));
            return;
        }
        pthread_mutex_lock(&box.lock);
        while (box.full && !box.closed)
            pthread_cond_wait(&box.cond, &box.lock);
        if (box.closed) { /* the reader is done: no one to hand it to */
            pthread_mutex_unlock(&box.lock);
            MT_CHECK_OK(mt_coh_event_wait(ev, -1));
            mt_coh_event_release(ev);
            free(k);
            MT_CHECK_OK(mt_coh_buffer_free(w->cl, b));
            return;
        }
        box.full = 1;
        box.buf = b;
        box.pattern = pattern;
        box.ev = ev;
        box.k = k;
        pthread_cond_broadcast(&box.cond);
        pthread_mutex_unlock(&box.lock);
        w->handed++;
        return;
    }
    pthread_mutex_lock(&box.lock);
    while (!box.full && !box.closed)
        pthread_cond_wait(&box.cond, &box.lock);
    if (!box.full) {
        pthread_mutex_unlock(&box.lock);
        return;
    }
    mt_coh_buf b = box.buf;
    uint64_t pattern = box.pattern;
    mt_coh_event *ev = box.ev;
    tk_cmd *k = box.k;
    box.full = 0;
    pthread_cond_broadcast(&box.cond);
    pthread_mutex_unlock(&box.lock);
    uint8_t *ref = malloc(BUFSZ);
    tk_fill(ref, BUFSZ, pattern);
    uint64_t off, len;
    pick(rng, BUFSZ, &off, &len);
    mt_coh_arg a = {.buf = b, .offset = off, .size = len, .access = MT_COH_READ};
    uint64_t seen;
    if (run1(w, (int)mt_test_below(rng, (uint64_t)ndev), a, 0, &ev, 1, &seen))
        MT_CHECK_UINT_EQ(seen, tk_hash(ref + off, len));
    else
        MT_CHECK_OK(mt_coh_event_wait(ev, -1)); /* the write must be done with k */
    mt_coh_event_release(ev);
    free(k); /* the read waited for the write, which is done with it */
    MT_CHECK_OK(mt_coh_buffer_free(w->cl, b));
    free(ref);
    w->handed++;
}

/* Host writes straight into the tracked buffer (its memory is its content:
 * the reference), then a device reads it. */
static void op_track(worker *w, uint64_t *rng)
{
    uint64_t page = (uint64_t)sysconf(_SC_PAGESIZE);
    for (int n = 1 + (int)mt_test_below(rng, 4); n > 0; n--)
        w->tmem[mt_test_below(rng, BUFSZ)] = (uint8_t)mt_test_rand(rng);
    if (mt_test_below(rng, 4) == 0) /* now and then a whole page */
        memset(w->tmem + mt_test_below(rng, BUFSZ / page) * page, (int)mt_test_below(rng, 256),
               page);
    check_read(w, (int)mt_test_below(rng, (uint64_t)ndev), w->tracked, w->tmem, 0, BUFSZ);
}

static void *work(void *arg)
{
    worker *w = arg;
    uint64_t rng = w->seed;
    for (int d = 0; d < ndev; d++) {
        MT_CHECK_OK(mt_coh_queue_create(w->cl, dev[d], &w->q[d]));
        MT_CHECK_OK(mt_coh_queue_create(shared_client, dev[d], &w->sq[d]));
    }
    for (int i = 0; i < NBUF; i++) {
        w->ref[i] = malloc(BUFSZ);
        new_buffer(w, i);
    }
    mt_coh_buffer_opts to = {.flags = MT_COH_BUF_TRACK_HOST};
    MT_CHECK_OK(mt_coh_buffer_create(w->cl, BUFSZ, &to, &w->tracked));
    mt_coh_buffer_info bi;
    MT_CHECK_OK(mt_coh_buffer_info_get(w->cl, w->tracked, &bi));
    w->tmem = bi.host;
    for (int n = 0; n < ops_per_worker; n++) {
        uint64_t r = mt_test_below(&rng, 100);
        if (r < 25)
            op_write(w, &rng);
        else if (r < 30)
            op_track(w, &rng);
        else if (r < 55) {
            int i = (int)mt_test_below(&rng, NBUF);
            uint64_t off, len;
            pick(&rng, BUFSZ, &off, &len);
            check_read(w, (int)mt_test_below(&rng, (uint64_t)ndev), w->buf[i], w->ref[i], off, len);
        } else if (r < 70) {
            uint64_t off, len;
            pick(&rng, SHARED, &off, &len);
            mt_coh_arg a = {.buf = shared_buf, .offset = off, .size = len, .access = MT_COH_READ};
            tk_cmd k = {.nargs = 1, .access = {MT_COH_READ}};
            mt_coh_command cmd = {.fn = tk_run, .user = &k, .args = &a, .nargs = 1};
            mt_coh_event *ev;
            if (!room(w, mt_coh_enqueue(w->sq[mt_test_below(&rng, (uint64_t)ndev)], &cmd, &ev)))
                continue;
            MT_CHECK_OK(mt_coh_event_wait(ev, -1));
            mt_coh_event_release(ev);
            MT_CHECK_UINT_EQ(k.seen[0], tk_hash(shared_ref + off, len));
            w->reads++;
        } else if (r < 80)
            op_map(w, &rng);
        else if (r < 87)
            op_sub(w, &rng);
        else if (r < 94 && w->id < 2)
            op_handover(w, &rng);
        else {
            int i = (int)mt_test_below(&rng, NBUF);
            MT_CHECK_OK(mt_coh_buffer_free(w->cl, w->buf[i]));
            new_buffer(w, i);
        }
    }
    if (w->id < 2) { /* either side of the hand-over leaving closes it */
        pthread_mutex_lock(&box.lock);
        box.closed = 1;
        pthread_cond_broadcast(&box.cond);
        pthread_mutex_unlock(&box.lock);
    }
    /* The end: every buffer whole, on the host device (room for them all). */
    uint64_t before = w->no_room;
    for (int i = 0; i < NBUF; i++)
        check_read(w, 0, w->buf[i], w->ref[i], 0, BUFSZ);
    check_read(w, 0, w->tracked, w->tmem, 0, BUFSZ);
    MT_CHECK_UINT_EQ(w->no_room, before);
    MT_CHECK_OK(mt_coh_buffer_free(w->cl, w->tracked));
    for (int d = 0; d < ndev; d++)
        mt_coh_queue_destroy(w->sq[d]);
    if (w->id >= 2)
        mt_coh_client_destroy(w->cl); /* its own client, while the others go on */
    return NULL;
}

static void run(mt_track_backend be, uint64_t seed)
{
    memset(&box, 0, sizeof box);
    pthread_mutex_init(&box.lock, NULL);
    pthread_cond_init(&box.cond, NULL);
    mt_coh_opts o = {.track_backend = be, .track_chunk = 16u << 10, .collect_threads = 3};
    MT_CHECK_OK(mt_coh_create(&o, &c));
    MT_CHECK_OK(mt_coh_add_host_device(c, 8u << 20, &dev[0]));
    ndev = 1;
    for (int d = 0; d < NSIM; d++) {
        /* room for a few buffers each: instances are evicted all the time */
        mt_sim_opts so = {.mem_size = DEVMEM};
        MT_CHECK_OK(mt_coh_add_sim_device(c, &so, &dev[ndev++]));
    }
    if (use_cuda) {
        mt_coh_cuda_opts co = {.repeat = 2, .max_devices = 1, .mem_limit = DEVMEM};
        uint32_t first, n;
        MT_CHECK_OK(mt_coh_add_cuda_devices(c, &co, &first, &n));
        for (uint32_t i = 0; i < n && ndev < MAXDEV; i++)
            dev[ndev++] = first + i;
    }
    MT_CHECK_OK(mt_coh_client_create(c, &shared_client));
    MT_CHECK_OK(mt_coh_buffer_create(shared_client, SHARED, NULL, &shared_buf));
    shared_ref = malloc(SHARED);
    tk_fill(shared_ref, SHARED, 0x0123456789abcdefull);
    {
        mt_coh_queue *q;
        MT_CHECK_OK(mt_coh_queue_create(shared_client, dev[1], &q));
        tk_cmd k = {.nargs = 1, .access = {MT_COH_WRITE}, .pattern = {0x0123456789abcdefull}};
        mt_coh_arg a = {.buf = shared_buf, .size = SHARED, .access = MT_COH_WRITE};
        mt_coh_command cmd = {.fn = tk_run, .user = &k, .args = &a, .nargs = 1};
        MT_CHECK_OK(mt_coh_enqueue(q, &cmd, NULL));
        MT_CHECK_OK(mt_coh_finish(q));
        mt_coh_queue_destroy(q);
    }
    mt_coh_client *pair;
    MT_CHECK_OK(mt_coh_client_create(c, &pair));
    worker w[WORKERS];
    pthread_t th[WORKERS];
    for (int i = 0; i < WORKERS; i++) {
        w[i] = (worker){.id = i, .seed = seed * 31 + (uint64_t)i};
        if (i < 2)
            w[i].cl = pair;
        else
            MT_CHECK_OK(mt_coh_client_create(c, &w[i].cl));
        MT_CHECK_INT_EQ(pthread_create(&th[i], NULL, work, &w[i]), 0);
    }
    uint64_t reads = 0, writes = 0, maps = 0, handed = 0, no_room = 0;
    for (int i = 0; i < WORKERS; i++) {
        pthread_join(th[i], NULL);
        reads += w[i].reads;
        writes += w[i].writes;
        maps += w[i].maps;
        handed += w[i].handed;
        no_room += w[i].no_room;
        for (int b = 0; b < NBUF; b++)
            free(w[i].ref[b]);
    }
    if (box.full) { /* handed over after the reader left */
        MT_CHECK_OK(mt_coh_event_wait(box.ev, -1));
        mt_coh_event_release(box.ev);
        free(box.k);
    }
    mt_coh_stats st;
    MT_CHECK_OK(mt_coh_stats_get(c, &st));
    mt_coh_client_destroy(pair);
    mt_coh_client_destroy(shared_client);
    mt_coh_destroy(c);
    free(shared_ref);
    printf("%s, %d threads, %d devices: %llu reads, %llu writes, %llu maps, %llu hand-overs checked; "
           "%llu evictions, %llu enqueues without room: ok\n",
           mt_track_backend_name(be), WORKERS, ndev, (unsigned long long)reads, (unsigned long long)writes,
           (unsigned long long)maps, (unsigned long long)handed,
           (unsigned long long)st.evictions, (unsigned long long)no_room);
    /* The run must have exercised eviction and its refusal both. */
    MT_CHECK(st.evictions > 0);
    pthread_mutex_destroy(&box.lock);
    pthread_cond_destroy(&box.cond);
}

int main(int argc, char **argv)
{
    uint64_t seed = mt_test_seed(argc, argv);
    for (int i = 1; i + 1 < argc; i++)
        if (strcmp(argv[i], "--ops") == 0)
            ops_per_worker = atoi(argv[i + 1]);
    use_cuda = tk_cuda_wanted();
    if (use_cuda < 0)
        return 77;
    run(MT_TRACK_SIGNAL, seed);
    if (mt_track_backend_available(MT_TRACK_UFFD))
        run(MT_TRACK_UFFD, seed);
    else
        puts("uffd tracker not available here: the signal one only");
    return 0;
}
