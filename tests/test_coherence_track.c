/* coherence: tracked host memory (MT_COH_BUF_TRACK_HOST), with each tracker
 * backend the kernel offers.
 *  - After the host writes pages directly, the next upload copies exactly
 *    those pages (the tracker's report), and the device sees the content.
 *  - Pages memtrack itself downloads into the memory (a map, a relay) do not
 *    come back as host writes, also when another enqueue collects the
 *    memory while the download is still in flight (a gated device holds it
 *    there, its pages written).
 *  - A large buffer is collected in parallel and uploaded in pipelined
 *    pieces: several migrations, one command, the right content, exactly
 *    the written pages, in dense (30%) and sparse (1%) rounds.
 *  - Host writes racing with nothing else are never lost across many
 *    rounds (random pages, random devices).
 *  - On a backend that lets any thread submit, the enqueuing thread submits
 *    an upload's pieces itself while the copy engine is idle, never beside
 *    the engine's own submitter, with exact uploads; from three threads at
 *    once too.
 *  - fork: a child writing every page of the buffer (its own copy) before
 *    or after an upload changes nothing the parent uploads; the parent's
 *    writes after the fork (copy-on-write faults) are all uploaded, exactly
 *    those pages.
 * The signal backend tracks pages only with the interposer preloaded (the
 * test_coherence_track_preload variant); without it the memory is not
 * protected and uploads are whole (mt_coh_track_status 0): the application's
 * read(2) into the buffer works, every upload is exact. */
#define _GNU_SOURCE
#include <sys/wait.h>
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <sys/mman.h>
#include <unistd.h>

#include "coh_util.h"
#include "memtrack/coherence.h"
#include "mt_test.h"
#include "track_child.h"

static size_t page;
/* Threads of the collection helper process (0: collection in-process). */
static uint32_t g_helper;

typedef struct env {
    mt_coh *c;
    mt_coh_client *cl;
    uint32_t host, sim;
    mt_coh_queue *qh, *qs;
} env;

static void setup(env *e, mt_track_backend be, uint64_t chunk, uint64_t pipeline)
{
    mt_coh_opts o = {.track_backend = be, .track_chunk = chunk, .pipeline_bytes = pipeline,
                     .collect_threads = 3, .collect_helper = g_helper};
    MT_CHECK_OK(mt_coh_create(&o, &e->c));
    MT_CHECK_OK(mt_coh_add_host_device(e->c, 64u << 20, &e->host));
    mt_sim_opts so = {.mem_size = 64u << 20};
    MT_CHECK_OK(mt_coh_add_sim_device(e->c, &so, &e->sim));
    MT_CHECK_OK(mt_coh_client_create(e->c, &e->cl));
    MT_CHECK_OK(mt_coh_queue_create(e->cl, e->host, &e->qh));
    MT_CHECK_OK(mt_coh_queue_create(e->cl, e->sim, &e->qs));
}

static void teardown(env *e)
{
    mt_coh_client_destroy(e->cl);
    mt_coh_destroy(e->c);
}

/* A tracked buffer of n bytes in memory memtrack maps: its host memory. */
static uint8_t *tracked_buffer(mt_coh_client *cl, uint64_t n, mt_coh_buf *b)
{
    mt_coh_buffer_opts o = {.flags = MT_COH_BUF_TRACK_HOST};
    MT_CHECK_OK(mt_coh_buffer_create(cl, n, &o, b));
    mt_coh_buffer_info bi;
    MT_CHECK_OK(mt_coh_buffer_info_get(cl, *b, &bi));
    return bi.host;
}

/* A tracked buffer over the application's memory `mem` (n bytes), filled
 * with a pattern first. */
static void tracked_host_ptr(mt_coh_client *cl, uint8_t *mem, uint64_t n, mt_coh_buf *b)
{
    for (uint64_t i = 0; i < n; i++)
        mem[i] = (uint8_t)(i * 13 + 1);
    mt_coh_buffer_opts bo = {.flags = MT_COH_BUF_TRACK_HOST | MT_COH_BUF_USE_HOST_PTR, .host_ptr = mem};
    MT_CHECK_OK(mt_coh_buffer_create(cl, n, &bo, b));
}

/* Reads [off, off+size) on q; returns bytes moved in, checks what it saw. */
static uint64_t readq(mt_coh_queue *q, mt_coh_buf b, uint64_t off, uint64_t size,
                      const uint8_t *want, uint32_t *migrations)
{
    tk_cmd k = {.nargs = 1, .access = {MT_COH_READ}};
    mt_coh_arg a = {.buf = b, .offset = off, .size = size, .access = MT_COH_READ};
    mt_coh_command cmd = {.fn = tk_run, .user = &k, .args = &a, .nargs = 1};
    mt_coh_event *ev;
    MT_CHECK_OK(mt_coh_enqueue(q, &cmd, &ev));
    MT_CHECK_OK(mt_coh_event_wait(ev, -1));
    mt_coh_event_info info;
    MT_CHECK_OK(mt_coh_event_info_get(ev, &info));
    mt_coh_event_release(ev);
    MT_CHECK_UINT_EQ(k.seen[0], tk_hash(want + off, size));
    if (migrations)
        *migrations = info.migrations;
    return info.bytes_in;
}

static void test_dirty_pages(mt_track_backend be)
{
    env e;
    setup(&e, be, 16 * page, 0);
    size_t n = 256 * page;
    uint8_t *mem = mmap(NULL, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    uint8_t *ref = malloc(n);
    for (size_t i = 0; i < n; i++)
        mem[i] = ref[i] = (uint8_t)(i * 5);
    mt_coh_buffer_opts o = {.flags = MT_COH_BUF_USE_HOST_PTR | MT_COH_BUF_TRACK_HOST,
                            .host_ptr = mem};
    mt_coh_buf b;
    MT_CHECK_OK(mt_coh_buffer_create(e.cl, n, &o, &b));
    MT_CHECK_UINT_EQ(readq(e.qs, b, 0, n, ref, NULL), n);
    MT_CHECK_UINT_EQ(readq(e.qh, b, 0, n, ref, NULL), n);
    MT_CHECK_UINT_EQ(readq(e.qs, b, 0, n, ref, NULL), 0);
    /* The host writes 10 pages directly, one byte each. */
    size_t pages[] = {0, 3, 4, 5, 17, 100, 101, 200, 254, 255};
    for (size_t i = 0; i < sizeof pages / sizeof pages[0]; i++) {
        size_t at = pages[i] * page + (i * 97) % page;
        mem[at] = ref[at] = (uint8_t)(0xa0 + i);
    }
    mt_coh_stats st0, st1;
    MT_CHECK_OK(mt_coh_stats_get(e.c, &st0));
    MT_CHECK_UINT_EQ(readq(e.qs, b, 0, n, ref, NULL), 10 * page);
    MT_CHECK_UINT_EQ(readq(e.qh, b, 0, n, ref, NULL), 10 * page);
    MT_CHECK_OK(mt_coh_stats_get(e.c, &st1));
    MT_CHECK_UINT_EQ(st1.host_dirty_bytes - st0.host_dirty_bytes, 10 * page);
    /* Reading part of the buffer collects only the chunks it covers; the
     * rest is collected when it is needed, never lost. */
    mem[150 * page] = ref[150 * page] = 1;
    mem[2 * page] = ref[2 * page] = 2;
    MT_CHECK_UINT_EQ(readq(e.qs, b, 0, 16 * page, ref, NULL), page);
    MT_CHECK_UINT_EQ(readq(e.qs, b, 0, n, ref, NULL), page);

    /* The simulated device writes 3 pages; a map brings them to the host
     * memory: they are the device's, not host writes. */
    tk_cmd w = {.nargs = 1, .access = {MT_COH_WRITE}, .pattern = {0x1111222233334444ull}};
    mt_coh_arg wa = {.buf = b, .offset = 40 * page, .size = 3 * page, .access = MT_COH_WRITE};
    mt_coh_command cmd = {.fn = tk_run, .user = &w, .args = &wa, .nargs = 1};
    mt_coh_event *ev;
    MT_CHECK_OK(mt_coh_enqueue(e.qs, &cmd, &ev));
    MT_CHECK_OK(mt_coh_event_wait(ev, -1));
    mt_coh_event_release(ev);
    tk_fill(ref + 40 * page, 3 * page, 0x1111222233334444ull);
    mt_coh_arg ma = {.buf = b, .offset = 40 * page, .size = 3 * page, .access = MT_COH_READ};
    void *p;
    MT_CHECK_OK(mt_coh_map(e.qh, &ma, NULL, 0, &p, &ev));
    MT_CHECK_OK(mt_coh_event_wait(ev, -1));
    mt_coh_event_release(ev);
    MT_CHECK(p == mem + 40 * page);
    MT_CHECK_MEM_EQ(p, ref + 40 * page, 3 * page);
    MT_CHECK_OK(mt_coh_unmap(e.qh, p, NULL));
    /* Meanwhile the host wrote one page elsewhere in the same chunk. */
    mem[44 * page + 7] = ref[44 * page + 7] = 0x77;
    MT_CHECK_OK(mt_coh_stats_get(e.c, &st0));
    /* The sim still holds its 3 pages: it fetches only the host's page. */
    MT_CHECK_UINT_EQ(readq(e.qs, b, 0, n, ref, NULL), page);
    /* The host device fetches the 3 device pages, the host's page, and the
     * two pages the host wrote before (it has not read since). */
    MT_CHECK_UINT_EQ(readq(e.qh, b, 0, n, ref, NULL), 6 * page);
    MT_CHECK_OK(mt_coh_stats_get(e.c, &st1));
    MT_CHECK_UINT_EQ(st1.host_dirty_bytes - st0.host_dirty_bytes, page);
    MT_CHECK_OK(mt_coh_buffer_free(e.cl, b));
    teardown(&e);
    munmap(mem, n);
    free(ref);
    printf("dirty pages (%s): ok\n", mt_track_backend_name(be));
}

/* ---- a gated device: host memory seen as device memory, whose downloads
 * write their pages and then wait until the test opens the gate (and its
 * commands too, with hold_runs) ---------------------------------------------- */
typedef struct gdev {
    tk_hostmem hm;
    _Atomic int written; /* a download wrote its pages and waits */
    _Atomic int open;
    int hold_runs;
    _Atomic int running;  /* a command is held */
    _Atomic int uploads;  /* uploads done */
} gdev;

static int g_grow(void *dev, uint64_t min_size, uint64_t *base, uint64_t *size)
{
    return tk_hostmem_grow(&((gdev *)dev)->hm, min_size, base, size);
}

/* Runs the op at once; a download then holds its engine until `open`. */
static int g_submit(void *dev, int engine, mt_coh_op *op)
{
    gdev *g = dev;
    (void)engine;
    int rc = tk_host_op(op);
    if (op->kind == MT_COH_OP_UPLOAD)
        atomic_fetch_add(&g->uploads, 1);
    if (op->kind == MT_COH_OP_DOWNLOAD || (op->kind == MT_COH_OP_RUN && g->hold_runs)) {
        atomic_store(op->kind == MT_COH_OP_RUN ? &g->running : &g->written, 1);
        while (!atomic_load(&g->open))
            usleep(100);
    }
    return rc;
}

static void g_destroy(void *dev)
{
    gdev *g = dev;
    tk_hostmem_release(&g->hm);
    free(g);
}

static const mt_coh_backend gated_backend = {
    .name = "gated",
    .mem_grow = g_grow,
    .submit = g_submit,
    .destroy = g_destroy,
};

/* A relay through the tracked host memory (gated device -> host -> sim) is
 * held in flight after writing its pages; meanwhile a read on the host
 * device collects the memory. Those pages are the download's: no host
 * write is counted and the sim's copy stays valid. */
static void test_inflight_download(mt_track_backend be)
{
    env e;
    setup(&e, be, 16 * page, 0);
    gdev *g = calloc(1, sizeof *g);
    g->hm.size = 1u << 20;
    uint32_t gid;
    MT_CHECK_OK(mt_coh_device_add(e.c, &gated_backend, g, NULL, &gid));
    mt_coh_queue *qg;
    MT_CHECK_OK(mt_coh_queue_create(e.cl, gid, &qg));
    size_t n = 32 * page;
    uint8_t *mem = mmap(NULL, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    uint8_t *ref = calloc(1, n);
    mt_coh_buffer_opts o = {.flags = MT_COH_BUF_USE_HOST_PTR | MT_COH_BUF_TRACK_HOST,
                            .host_ptr = mem};
    mt_coh_buf b;
    MT_CHECK_OK(mt_coh_buffer_create(e.cl, n, &o, &b));
    /* The gated device writes the whole buffer: valid there only. */
    atomic_store(&g->open, 1);
    tk_cmd w = {.nargs = 1, .access = {MT_COH_WRITE}, .pattern = {0x5555aaaa1234ull}};
    mt_coh_arg wa = {.buf = b, .size = n, .access = MT_COH_WRITE};
    mt_coh_command cmd = {.fn = tk_run, .user = &w, .args = &wa, .nargs = 1};
    mt_coh_event *ev;
    MT_CHECK_OK(mt_coh_enqueue(qg, &cmd, &ev));
    MT_CHECK_OK(mt_coh_event_wait(ev, -1));
    mt_coh_event_release(ev);
    tk_fill(ref, n, 0x5555aaaa1234ull);
    /* The sim reads it: a relay, whose download stops after writing. */
    atomic_store(&g->open, 0);
    tk_cmd r1 = {.nargs = 1, .access = {MT_COH_READ}};
    mt_coh_arg ra = {.buf = b, .size = n, .access = MT_COH_READ};
    mt_coh_command rc1 = {.fn = tk_run, .user = &r1, .args = &ra, .nargs = 1};
    mt_coh_event *ev1;
    MT_CHECK_OK(mt_coh_enqueue(e.qs, &rc1, &ev1));
    MT_CHECK_OK(mt_coh_flush(e.qs));
    while (!atomic_load(&g->written))
        usleep(100);
    /* Collected while the download is in flight. */
    mt_coh_stats st0, st1;
    MT_CHECK_OK(mt_coh_stats_get(e.c, &st0));
    tk_cmd r2 = {.nargs = 1, .access = {MT_COH_READ}};
    mt_coh_command rc2 = {.fn = tk_run, .user = &r2, .args = &ra, .nargs = 1};
    mt_coh_event *ev2;
    MT_CHECK_OK(mt_coh_enqueue(e.qh, &rc2, &ev2));
    atomic_store(&g->open, 1);
    MT_CHECK_OK(mt_coh_event_wait(ev1, -1));
    MT_CHECK_OK(mt_coh_event_wait(ev2, -1));
    MT_CHECK_UINT_EQ(r1.seen[0], tk_hash(ref, n));
    MT_CHECK_UINT_EQ(r2.seen[0], tk_hash(ref, n));
    mt_coh_event_release(ev1);
    mt_coh_event_release(ev2);
    MT_CHECK_OK(mt_coh_stats_get(e.c, &st1));
    MT_CHECK_UINT_EQ(st1.host_dirty_bytes - st0.host_dirty_bytes, 0);
    /* The sim's copy is still valid; nothing comes back as a host write. */
    MT_CHECK_UINT_EQ(readq(e.qs, b, 0, n, ref, NULL), 0);
    MT_CHECK_OK(mt_coh_stats_get(e.c, &st0));
    MT_CHECK_UINT_EQ(st0.host_dirty_bytes - st1.host_dirty_bytes, 0);
    MT_CHECK_OK(mt_coh_buffer_free(e.cl, b));
    teardown(&e);
    munmap(mem, n);
    free(ref);
    printf("download in flight during a collection (%s): ok\n", mt_track_backend_name(be));
}

static void test_pipelined(mt_track_backend be)
{
    env e;
    /* 32 MiB in 1 MiB chunks, pieces of 1 MiB: parallel collection and
     * several migrations. Buffer memory allocated by memtrack. */
    setup(&e, be, 1u << 20, 1u << 20);
    size_t n = 32u << 20;
    mt_coh_buf b;
    uint8_t *mem = tracked_buffer(e.cl, n, &b);
    MT_CHECK(mem != NULL);
    uint8_t *ref = calloc(1, n);
    uint32_t migs;
    MT_CHECK_UINT_EQ(readq(e.qs, b, 0, n, ref, &migs), n);
    /* With the helper: once it runs, the rounds below collect through it. */
    for (int i = 0; g_helper && i < 1000 && mt_coh_collect_helper_status(e.c) == 2; i++)
        usleep(10000);
    MT_CHECK_INT_EQ(mt_coh_collect_helper_status(e.c), g_helper ? 1 : 0);
    uint64_t rng = 12345, dirty = 0;
    for (int round = 0; round < 6; round++) {
        /* 30% of the pages at random, or 1% (sparse rounds: chunks are
         * cheap to collect, the planner waits on the workers more often). */
        size_t writes = round % 2 ? n / page / 100 : n / page * 3 / 10;
        uint8_t *seen = calloc(1, n / page);
        for (size_t i = 0; i < writes; i++) {
            size_t pg = mt_test_below(&rng, n / page);
            size_t at = pg * page + mt_test_below(&rng, page);
            mem[at] = ref[at] = (uint8_t)mt_test_rand(&rng);
            dirty += !seen[pg];
            seen[pg] = 1;
        }
        free(seen);
        uint64_t in = readq(e.qs, b, 0, n, ref, &migs);
        MT_CHECK_UINT_EQ(in, dirty * page);
        MT_CHECK(migs >= (round % 2 ? 1u : 2u));
        dirty = 0;
    }
    MT_CHECK_UINT_EQ(readq(e.qh, b, 0, n, ref, NULL), n);
    MT_CHECK_INT_EQ(mt_coh_collect_helper_status(e.c), g_helper ? 1 : 0);
    MT_CHECK_OK(mt_coh_buffer_free(e.cl, b));
    teardown(&e);
    free(ref);
    printf("pipelined (%s%s): ok\n", mt_track_backend_name(be), g_helper ? ", helper" : "");
}

/* ---- the planner submitting for an idle copy engine ----------------------------
 * A device whose backend lets any thread submit for its copy engine
 * (MT_COH_CAP_SUBMIT_ANY_THREAD): the enqueuing thread submits a tracked
 * upload's pieces itself while the engine is idle. Its submit checks that
 * submits for one engine never overlap and counts those made on the
 * application's threads; the work happens in wait, on the completer thread,
 * in submission order (an in-order engine). A twin without the capability
 * must never see the application's threads. */
typedef struct adev {
    tk_hostmem hm;
    _Atomic int submitting[2];
    _Atomic uint64_t app_submits;
} adev;

static _Thread_local int on_app_thread;

static int a_grow(void *dev, uint64_t min_size, uint64_t *base, uint64_t *size)
{
    return tk_hostmem_grow(&((adev *)dev)->hm, min_size, base, size);
}

static void a_release(void *dev, uint64_t base, uint64_t size)
{
    (void)base;
    (void)size;
    tk_hostmem_release(&((adev *)dev)->hm);
}

static int a_submit(void *dev, int engine, mt_coh_op *op)
{
    adev *a = dev;
    if (atomic_fetch_add(&a->submitting[engine], 1)) {
        fprintf(stderr, "two threads submit for engine %d at once\n", engine);
        abort();
    }
    if (on_app_thread)
        atomic_fetch_add(&a->app_submits, 1);
    if (op->bytes % 3 == 0)
        usleep(20); /* now and then: a wider window for an overlap */
    atomic_fetch_sub(&a->submitting[engine], 1);
    return 1;
}

static int a_wait(void *dev, int engine, mt_coh_op *op)
{
    (void)dev;
    (void)engine;
    return tk_host_op(op);
}

static void a_destroy(void *dev)
{
    adev *a = dev;
    tk_hostmem_release(&a->hm);
    free(a);
}

#define ADEV_BACKEND(extra)                                                                     \
    {.name = "any-thread",                                                                     \
     .caps = MT_COH_CAP_ASYNC | MT_COH_CAP_HOST_MEMORY | MT_COH_CAP_IN_ORDER | (extra),        \
     .mem_grow = a_grow,                                                                       \
     .mem_release = a_release,                                                                 \
     .submit = a_submit,                                                                       \
     .wait = a_wait,                                                                           \
     .destroy = a_destroy}
static const mt_coh_backend any_thread_be = ADEV_BACKEND(MT_COH_CAP_SUBMIT_ANY_THREAD);
static const mt_coh_backend in_order_be = ADEV_BACKEND(0);

static adev *adev_add(mt_coh *c, const mt_coh_backend *be, uint32_t *id)
{
    adev *a = calloc(1, sizeof *a);
    a->hm.size = 64u << 20;
    MT_CHECK_OK(mt_coh_device_add(c, be, a, NULL, id));
    return a;
}

typedef struct direct_worker {
    mt_coh_client *cl;
    uint32_t dev;
    uint64_t seed;
} direct_worker;

/* Rounds of host writes and uploads on a buffer of its own, beside the
 * other workers: the planner's submits meet the engine's own. */
static void *direct_rounds(void *arg)
{
    direct_worker *w = arg;
    size_t n = 256 * page;
    mt_coh_queue *q;
    MT_CHECK_OK(mt_coh_queue_create(w->cl, w->dev, &q));
    mt_coh_buf b;
    uint8_t *mem = tracked_buffer(w->cl, n, &b), *ref = calloc(1, n), *seen = malloc(n / page);
    MT_CHECK_UINT_EQ(readq(q, b, 0, n, ref, NULL), n);
    uint64_t rng = w->seed;
    for (int round = 0; round < 40; round++) {
        memset(seen, 0, n / page);
        uint64_t dirty = 0;
        for (size_t i = 0; i < n / page / 8; i++) {
            size_t pg = mt_test_below(&rng, n / page), at = pg * page + mt_test_below(&rng, page);
            mem[at] = ref[at] = (uint8_t)mt_test_rand(&rng);
            dirty += !seen[pg];
            seen[pg] = 1;
        }
        MT_CHECK_UINT_EQ(readq(q, b, 0, n, ref, NULL), dirty * page);
    }
    MT_CHECK_OK(mt_coh_buffer_free(w->cl, b));
    free(ref);
    free(seen);
    return NULL;
}

static void test_direct_submit(mt_track_backend be)
{
    mt_coh_opts o = {.track_backend = be, .track_chunk = 16 * page, .pipeline_bytes = 64 * page,
                     .collect_threads = 3, .collect_helper = g_helper};
    mt_coh *c;
    MT_CHECK_OK(mt_coh_create(&o, &c));
    uint32_t da, db;
    adev *a = adev_add(c, &any_thread_be, &da), *bdev = adev_add(c, &in_order_be, &db);
    mt_coh_client *cl;
    MT_CHECK_OK(mt_coh_client_create(c, &cl));
    mt_coh_queue *qa, *qb;
    MT_CHECK_OK(mt_coh_queue_create(cl, da, &qa));
    MT_CHECK_OK(mt_coh_queue_create(cl, db, &qb));
    on_app_thread = 1;
    /* One thread: every upload exact, on both devices. */
    size_t n = 1024 * page;
    mt_coh_buf b;
    uint8_t *mem = tracked_buffer(cl, n, &b), *ref = calloc(1, n), *seen = malloc(n / page);
    MT_CHECK_UINT_EQ(readq(qa, b, 0, n, ref, NULL), n);
    MT_CHECK_UINT_EQ(readq(qb, b, 0, n, ref, NULL), n);
    uint64_t rng = 777;
    for (int round = 0; round < 20; round++) {
        memset(seen, 0, n / page);
        uint64_t dirty = 0;
        for (size_t i = 0; i < n / page / 10; i++) {
            size_t pg = mt_test_below(&rng, n / page), at = pg * page + mt_test_below(&rng, page);
            mem[at] = ref[at] = (uint8_t)mt_test_rand(&rng);
            dirty += !seen[pg];
            seen[pg] = 1;
        }
        MT_CHECK_UINT_EQ(readq(qa, b, 0, n, ref, NULL), dirty * page);
        MT_CHECK_UINT_EQ(readq(qb, b, 0, n, ref, NULL), dirty * page);
    }
    uint64_t direct = atomic_load(&a->app_submits);
    MT_CHECK(direct > 0);
    MT_CHECK_UINT_EQ(atomic_load(&bdev->app_submits), 0);
    MT_CHECK_OK(mt_coh_buffer_free(cl, b));
    free(ref);
    free(seen);
    /* Three threads at once on the device that lets them submit. */
    pthread_t th[3];
    direct_worker dw[3];
    for (int i = 0; i < 3; i++) {
        dw[i] = (direct_worker){cl, da, 1000 + (uint64_t)i};
        MT_CHECK_INT_EQ(pthread_create(&th[i], NULL, direct_rounds, &dw[i]), 0);
    }
    for (int i = 0; i < 3; i++)
        pthread_join(th[i], NULL);
    on_app_thread = 0;
    mt_coh_client_destroy(cl);
    mt_coh_destroy(c);
    printf("planner submits for an idle copy engine (%s%s): ok, %llu of its submits\n",
           mt_track_backend_name(be), g_helper ? ", helper" : "", (unsigned long long)direct);
}

/* A child that writes every page of the buffer and exits. */
static void child_writes(uint8_t *mem, size_t n)
{
    pid_t p = fork();
    MT_CHECK(p >= 0);
    if (p == 0) {
        for (size_t i = 0; i < n; i += page)
            mem[i] ^= 0x5a;
        _exit(0);
    }
    int st = 0;
    MT_CHECK_INT_EQ(waitpid(p, &st, 0), p);
    MT_CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);
}

static void test_fork(mt_track_backend be)
{
    env e;
    setup(&e, be, 16 * page, 0);
    size_t n = 256 * page;
    mt_coh_buf b;
    uint8_t *mem = tracked_buffer(e.cl, n, &b), *seen = malloc(n / page);
    MT_CHECK_UINT_EQ(readq(e.qs, b, 0, n, mem, NULL), n);
    uint64_t rng = 4242;
    for (int round = 0; round < 6; round++) {
        if (round % 2)
            child_writes(mem, n); /* before the parent writes */
        memset(seen, 0, n / page);
        uint64_t dirty = 0;
        for (int i = 0; i < 12; i++) {
            size_t pg = mt_test_below(&rng, n / page);
            mem[pg * page + mt_test_below(&rng, page)] = (uint8_t)mt_test_rand(&rng);
            dirty += !seen[pg];
            seen[pg] = 1;
        }
        if (!(round % 2))
            child_writes(mem, n); /* after, before the upload */
        MT_CHECK_UINT_EQ(readq(e.qs, b, 0, n, mem, NULL), dirty * page);
        child_writes(mem, n); /* after the upload: nothing to upload next */
        MT_CHECK_UINT_EQ(readq(e.qs, b, 0, n, mem, NULL), 0);
    }
    MT_CHECK_OK(mt_coh_buffer_free(e.cl, b));
    free(seen);
    teardown(&e);
    printf("fork (%s): ok\n", mt_track_backend_name(be));
}

/* With the interposer: the application maps new memory over part of a
 * tracked USE_HOST_PTR buffer (MAP_FIXED) and writes it. The chunk is not
 * tracked any more (MT_EUNMAPPED): from then on it is uploaded whole, and
 * the device sees the new memory. */
static void test_remap(mt_track_backend be)
{
    env e;
    setup(&e, be, 16 * page, 0);
    size_t n = 64 * page;
    uint8_t *mem = mmap(NULL, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    MT_CHECK(mem != MAP_FAILED);
    mt_coh_buf b;
    tracked_host_ptr(e.cl, mem, n, &b);
    MT_CHECK_UINT_EQ(readq(e.qs, b, 0, n, mem, NULL), n);
    MT_CHECK_INT_EQ(mt_coh_track_status(e.c), 1);
    uint8_t *at = mem + 20 * page;
    MT_CHECK(mmap(at, 3 * page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED,
                  -1, 0) == at);
    at[page + 7] = 0x42;
    mem[50 * page] ^= 1; /* and a tracked write in another chunk */
    /* chunk 1 (16 pages) whole, chunk 3's one page */
    MT_CHECK_UINT_EQ(readq(e.qs, b, 0, n, mem, NULL), 16 * page + page);
    MT_CHECK_INT_EQ(mt_coh_track_status(e.c), 0);
    at[2 * page] = 0x24;
    MT_CHECK_UINT_EQ(readq(e.qs, b, 0, n, mem, NULL), 16 * page); /* whole from now on */
    MT_CHECK_OK(mt_coh_buffer_free(e.cl, b));
    teardown(&e); /* released before the memory goes */
    munmap(mem, n);
    printf("memory remapped under a tracked buffer (%s): ok\n", mt_track_backend_name(be));
}

/* A tracked USE_HOST_PTR buffer on shared memory (a memfd mapped twice)
 * with a private part beside it in another chunk: the shared chunks also
 * change through the other mapping, through write(2) to the memfd and from
 * a forked child, none of which a tracker sees. They are uploaded whole at
 * every sync; the private chunk keeps its page tracking. */
static void test_shared_memory(mt_track_backend be)
{
    env e;
    setup(&e, be, 16 * page, 0);
    size_t n = 64 * page;
    uint8_t *mem = mmap(NULL, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    MT_CHECK(mem != MAP_FAILED);
    int fd = memfd_create("coh-shared", MFD_CLOEXEC);
    MT_CHECK(fd >= 0);
    MT_CHECK_INT_EQ(ftruncate(fd, (off_t)(32 * page)), 0);
    /* Chunks 2 and 3 shared; 0 and 1 private. */
    uint8_t *sh = mmap(mem + 32 * page, 32 * page, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED, fd, 0);
    uint8_t *alias = mmap(NULL, 32 * page, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    MT_CHECK(sh == mem + 32 * page && alias != MAP_FAILED);
    mt_coh_buf b;
    tracked_host_ptr(e.cl, mem, n, &b);
    MT_CHECK_INT_EQ(mt_coh_track_status(e.c), 0);
    MT_CHECK_UINT_EQ(readq(e.qs, b, 0, n, mem, NULL), n);
    /* Nothing written: the shared chunks still go whole, the private ones
     * (page-tracked where the backend can) not at all. */
    int paged = be == MT_TRACK_UFFD || mt_track_preload_status() == 1;
    MT_CHECK_UINT_EQ(readq(e.qs, b, 0, n, mem, NULL), paged ? 32 * page : n);
    alias[5 * page + 3] ^= 0x5a;               /* through the other mapping */
    MT_CHECK_UINT_EQ(readq(e.qs, b, 0, n, mem, NULL), paged ? 32 * page : n);
    uint8_t x = 0x77;
    MT_CHECK_INT_EQ(pwrite(fd, &x, 1, (off_t)(20 * page + 9)), 1); /* write(2) to the memfd */
    mem[3 * page] ^= 1;                        /* and a tracked page */
    MT_CHECK_UINT_EQ(readq(e.qs, b, 0, n, mem, NULL), paged ? 33 * page : n);
    pid_t pid = fork();
    if (pid == 0) {
        mem[40 * page + 1] ^= 0xff; /* a forked child: the same memory */
        _exit(0);
    }
    int st;
    MT_CHECK_INT_EQ(waitpid(pid, &st, 0), pid);
    MT_CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);
    MT_CHECK_UINT_EQ(readq(e.qs, b, 0, n, mem, NULL), paged ? 32 * page : n);
    MT_CHECK_OK(mt_coh_buffer_free(e.cl, b));
    teardown(&e);
    munmap(alias, 32 * page);
    munmap(mem, n);
    close(fd);
    printf("shared memory under a tracked buffer (%s): ok\n", mt_track_backend_name(be));
}

/* The signal backend without the interposer: nothing protected, whole
 * uploads, nothing the application does with the memory breaks. */
static void test_signal_fallback(void)
{
    env e;
    setup(&e, MT_TRACK_SIGNAL, 16 * page, 0);
    size_t n = 64 * page;
    mt_coh_buf b;
    uint8_t *mem = tracked_buffer(e.cl, n, &b);
    MT_CHECK_INT_EQ(mt_coh_track_status(e.c), 0);
    MT_CHECK_UINT_EQ(readq(e.qs, b, 0, n, mem, NULL), n);
    for (int round = 0; round < 4; round++) {
        int p[2];
        MT_CHECK_INT_EQ(pipe(p), 0);
        MT_CHECK_INT_EQ(write(p[1], "tracked", 7), 7);
        /* a kernel write into the memory: EFAULT if it were protected */
        MT_CHECK_INT_EQ(read(p[0], mem + (size_t)round * 5 * page + 100, 7), 7);
        close(p[0]);
        close(p[1]);
        mem[(size_t)round * 9 * page] ^= 0xff;
        MT_CHECK_UINT_EQ(readq(e.qs, b, 0, n, mem, NULL), n); /* whole, exact */
    }
    /* A device writes part of it: those bytes are newer than the host's, so
     * a sync that takes the chunks whole must not count them as host writes
     * (another device reads the device's bytes, not the host's old ones). */
    uint8_t *ref = malloc(n);
    memcpy(ref, mem, n);
    tk_cmd w = {.nargs = 1, .access = {MT_COH_WRITE}, .pattern = {0x1122334455667788ull}};
    mt_coh_arg wa = {.buf = b, .offset = 3 * page, .size = 20 * page, .access = MT_COH_WRITE};
    mt_coh_command wc = {.fn = tk_run, .user = &w, .args = &wa, .nargs = 1};
    MT_CHECK_OK(mt_coh_enqueue(e.qs, &wc, NULL));
    MT_CHECK_OK(mt_coh_finish(e.qs));
    tk_fill(ref + 3 * page, 20 * page, 0x1122334455667788ull);
    MT_CHECK_UINT_EQ(readq(e.qh, b, 0, n, ref, NULL), n); /* host part and device part */
    MT_CHECK_UINT_EQ(readq(e.qs, b, 0, n, ref, NULL), n - 20 * page);
    /* Two arguments on the memory, in one command: its chunks count as
     * written once. A second take at the second argument would undo what
     * the first one's fetch made valid and copy the same bytes again. */
    tk_cmd two = {.nargs = 2, .access = {MT_COH_READ, MT_COH_READ}};
    mt_coh_arg ta[2] = {{.buf = b, .offset = 0, .size = 40 * page, .access = MT_COH_READ},
                        {.buf = b, .offset = 30 * page, .size = 34 * page, .access = MT_COH_READ}};
    mt_coh_command tc = {.fn = tk_run, .user = &two, .args = ta, .nargs = 2};
    mt_coh_event *ev;
    MT_CHECK_OK(mt_coh_enqueue(e.qs, &tc, &ev));
    MT_CHECK_OK(mt_coh_event_wait(ev, -1));
    mt_coh_event_info info;
    MT_CHECK_OK(mt_coh_event_info_get(ev, &info));
    mt_coh_event_release(ev);
    MT_CHECK_UINT_EQ(two.seen[0], tk_hash(ref, 40 * page));
    MT_CHECK_UINT_EQ(two.seen[1], tk_hash(ref + 30 * page, 34 * page));
    MT_CHECK_UINT_EQ(info.bytes_in, n - 20 * page); /* what the host holds, once */
    free(ref);
    MT_CHECK_OK(mt_coh_buffer_free(e.cl, b));
    teardown(&e);
    puts("signal backend without the interposer: whole uploads, kernel writes work: ok");
}

/* Without page tracking a sync counts the memory as written wherever the
 * host holds it: also bytes a device holds and a command there still reads,
 * which the next upload then rewrites (the same bytes). That upload must wait
 * for the command: a command held on the gated device reads the buffer, a
 * second one on another queue of that device reads it too, and no upload
 * may happen until the first one is let go. */
static void test_whole_users(void)
{
    env e;
    setup(&e, MT_TRACK_SIGNAL, 16 * page, 0);
    gdev *g = calloc(1, sizeof *g);
    g->hm.size = 1u << 20;
    g->hold_runs = 1;
    uint32_t gid;
    MT_CHECK_OK(mt_coh_device_add(e.c, &gated_backend, g, NULL, &gid));
    mt_coh_queue *q1, *q2;
    MT_CHECK_OK(mt_coh_queue_create(e.cl, gid, &q1));
    MT_CHECK_OK(mt_coh_queue_create(e.cl, gid, &q2));
    size_t n = 32 * page;
    mt_coh_buf b;
    uint8_t *mem = tracked_buffer(e.cl, n, &b);
    MT_CHECK_INT_EQ(mt_coh_track_status(e.c), 0);
    for (size_t i = 0; i < n; i++)
        mem[i] = (uint8_t)(i * 7);
    tk_cmd r1 = {.nargs = 1, .access = {MT_COH_READ}}, r2 = r1;
    mt_coh_arg ra = {.buf = b, .size = n, .access = MT_COH_READ};
    mt_coh_command c1 = {.fn = tk_run, .user = &r1, .args = &ra, .nargs = 1};
    mt_coh_command c2 = {.fn = tk_run, .user = &r2, .args = &ra, .nargs = 1};
    mt_coh_event *ev1, *ev2;
    MT_CHECK_OK(mt_coh_enqueue(q1, &c1, &ev1));
    MT_CHECK_OK(mt_coh_flush(q1));
    while (!atomic_load(&g->running))
        usleep(100);
    int up = atomic_load(&g->uploads);
    MT_CHECK(up > 0);
    MT_CHECK_OK(mt_coh_enqueue(q2, &c2, &ev2));
    MT_CHECK_OK(mt_coh_flush(q2));
    usleep(100 * 1000); /* time for an upload that would not wait */
    MT_CHECK_INT_EQ(atomic_load(&g->uploads), up);
    atomic_store(&g->open, 1);
    MT_CHECK_OK(mt_coh_event_wait(ev1, -1));
    MT_CHECK_OK(mt_coh_event_wait(ev2, -1));
    MT_CHECK(atomic_load(&g->uploads) > up);
    MT_CHECK_UINT_EQ(r1.seen[0], tk_hash(mem, n));
    MT_CHECK_UINT_EQ(r2.seen[0], tk_hash(mem, n));
    mt_coh_event_release(ev1);
    mt_coh_event_release(ev2);
    MT_CHECK_OK(mt_coh_buffer_free(e.cl, b));
    teardown(&e);
    puts("signal backend without the interposer: an upload waits for the commands reading: ok");
}

int main(void)
{
    page = (size_t)sysconf(_SC_PAGESIZE);
    mt_track_backend bes[] = {MT_TRACK_SIGNAL, MT_TRACK_UFFD};
    for (int i = 0; i < 2; i++) {
        if (!mt_track_backend_available(bes[i])) {
            printf("%s backend not available here: skipped\n", mt_track_backend_name(bes[i]));
            continue;
        }
        if (bes[i] == MT_TRACK_SIGNAL) {
            /* A tracker first: the interposer attaches when one is created. */
            mt_tracker *t;
            MT_CHECK_OK(mt_tracker_create(NULL, &t));
            int pre = tc_preloaded();
            mt_tracker_destroy(t);
            if (!pre) {
                test_signal_fallback();
                test_whole_users();
                test_shared_memory(bes[i]);
                continue;
            }
        }
        test_dirty_pages(bes[i]);
        test_inflight_download(bes[i]);
        test_pipelined(bes[i]);
        test_direct_submit(bes[i]);
        test_fork(bes[i]);
        test_shared_memory(bes[i]);
        if (mt_track_preload_status() == 1)
            test_remap(bes[i]);
    }
    /* uffd with the collection helper process: the same exact counts. */
    if (mt_track_backend_available(MT_TRACK_UFFD)) {
        g_helper = 3;
        test_dirty_pages(MT_TRACK_UFFD);
        test_inflight_download(MT_TRACK_UFFD);
        test_pipelined(MT_TRACK_UFFD);
        test_direct_submit(MT_TRACK_UFFD);
    }
    return 0;
}
