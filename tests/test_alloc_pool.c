/* alloc pools: exact single-threaded behaviour of per-(thread, memory type)
 * pools (own frees, queued cross-pool frees carried out at the owner's next
 * allocation, fenced frees in any value order, frees from threads without a
 * pool, detach/attach, collect of detached pools, region release, every bad
 * input), then a multi-threaded stress run for TSan: threads allocate, hand
 * allocations to each other and free them (plain and fenced) while a shadow
 * of every region catches any overlap or early reuse; at the end every
 * queued free must have been carried out exactly once. --seed N replays. */
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>

#include "alloc_util.h"

#define KiB 1024ull
#define REGION (256 * KiB)
#define GRAN 256u

/* ---- callbacks: regions carry a shadow of their granules ------------------ */

typedef struct shadow {
    uint64_t size;
    uint32_t memtype;
    _Atomic uint64_t *g; /* per granule: 0 free, 1 used, 2 + V fenced at V */
} shadow;

static _Atomic uint64_t g_timeline;
static _Atomic int g_shadows; /* live region shadows: 0 at the end, or a leak */

static shadow *shadow_new(uint32_t memtype, uint64_t size)
{
    shadow *sh = calloc(1, sizeof *sh);
    MT_CHECK(sh != NULL);
    sh->size = size;
    sh->memtype = memtype;
    sh->g = calloc(size / GRAN, sizeof *sh->g);
    MT_CHECK(sh->g != NULL);
    atomic_fetch_add(&g_shadows, 1);
    return sh;
}

static int grow_cb(void *user, uint32_t memtype, uint64_t min_size, uint64_t *size,
                   void **region_user)
{
    (void)user;
    shadow *sh = shadow_new(memtype, min_size > REGION ? (min_size + GRAN - 1) / GRAN * GRAN
                                                        : REGION);
    *size = sh->size;
    *region_user = sh;
    return 0;
}

static _Atomic int g_releases;

static void release_cb(void *user, uint32_t memtype, uint64_t size, void *region_user)
{
    (void)user;
    shadow *sh = region_user;
    MT_CHECK_UINT_EQ(sh->size, size);
    MT_CHECK_UINT_EQ(sh->memtype, memtype);
    free(sh->g);
    free(sh);
    atomic_fetch_sub(&g_shadows, 1);
    atomic_fetch_add(&g_releases, 1);
}

static uint64_t completed_cb(void *user)
{
    (void)user;
    /* acquire: pairs with the test's release stores advancing the timeline. */
    return atomic_load_explicit(&g_timeline, memory_order_acquire);
}

static mt_pools *new_set(uint32_t types, uint32_t flags, int with_timeline)
{
    mt_pools_opts o = {.memory_types = types, .flags = flags, .min_align = GRAN,
                       .grow = grow_cb, .release = release_cb,
                       .completed = with_timeline ? completed_cb : NULL};
    mt_pools *s;
    MT_CHECK_OK(mt_pools_create(&o, &s));
    return s;
}

static void pool_ok(mt_pool *p)
{
    char msg[256];
    if (mt_pool_check(p, msg, sizeof msg) != 0) {
        fprintf(stderr, "mt_pool_check: %s\n", msg);
        MT_CHECK(0);
    }
}

static mt_pool_stats pstats(mt_pool *p, uint32_t memtype)
{
    mt_pool_stats st;
    MT_CHECK_OK(mt_pool_get_stats(p, memtype, &st));
    return st;
}

static mt_alloc_block palloc(mt_pool *p, uint32_t memtype, uint64_t size)
{
    mt_alloc_block b;
    MT_CHECK_OK(mt_pool_allocate(p, memtype, size, 0, MT_ALLOC_LINEAR, &b));
    return b;
}

/* ---- single-threaded, exact ---------------------------------------------- */

static void test_basic(void)
{
    mt_pools *s = new_set(2, 0, 0);
    mt_pool *p;
    MT_CHECK_OK(mt_pool_attach(s, &p));
    mt_alloc_block a0 = palloc(p, 0, 1000);
    mt_alloc_block a1 = palloc(p, 1, 1000);
    MT_CHECK(a0.region != a1.region);
    uint32_t mt;
    uint64_t size;
    void *user;
    MT_CHECK_OK(mt_pools_region_info(s, a1.region, &mt, &size, &user));
    MT_CHECK_UINT_EQ(mt, 1);
    MT_CHECK_UINT_EQ(size, REGION);
    MT_CHECK_UINT_EQ(((shadow *)user)->memtype, 1);
    MT_CHECK_UINT_EQ(a0.size, 1024);
    MT_CHECK_UINT_EQ(pstats(p, 0).alloc.allocations, 1);

    /* Own free: at once. */
    MT_CHECK_OK(mt_pool_free(p, a0.region, a0.offset));
    MT_CHECK_UINT_EQ(pstats(p, 0).alloc.allocations, 0);

    /* Bad input. */
    mt_alloc_block b;
    MT_CHECK_ERR(mt_pool_allocate(p, 2, 16, 0, MT_ALLOC_LINEAR, &b), -EINVAL);
    MT_CHECK_ERR(mt_pool_allocate(p, 0, 0, 0, MT_ALLOC_LINEAR, &b), -EINVAL);
    MT_CHECK_ERR(mt_pool_allocate(p, 0, 16, 100, MT_ALLOC_LINEAR, &b), -EINVAL);
    MT_CHECK_ERR(mt_pool_allocate(NULL, 0, 16, 0, MT_ALLOC_LINEAR, &b), -EINVAL);
    MT_CHECK_ERR(mt_pool_free(p, a0.region, a0.offset), -ENOENT);      /* double */
    MT_CHECK_ERR(mt_pool_free(p, a1.region, a1.offset + GRAN), -ENOENT); /* inside */
    MT_CHECK_ERR(mt_pool_free(p, a1.region, 8), -EINVAL);              /* off granule */
    MT_CHECK_ERR(mt_pool_free(p, 12345, 0), -ENOENT);                  /* unknown region */
    MT_CHECK_ERR(mt_pool_free(p, UINT32_MAX, 0), -ENOENT);
    MT_CHECK_ERR(mt_pool_free_fenced(p, a1.region, a1.offset, 1), -EINVAL); /* no timeline */
    MT_CHECK_ERR(mt_pools_free_fenced(s, a1.region, a1.offset, 1), -EINVAL);
    MT_CHECK_ERR(mt_pools_region_info(s, 999, NULL, NULL, NULL), -ENOENT);
    MT_CHECK_ERR(mt_pool_get_stats(p, 5, &(mt_pool_stats){0}), -EINVAL);
    /* Larger than any region can be: -ENOSPC without asking grow. */
    MT_CHECK_ERR(mt_pool_allocate(p, 0, MT_ALLOC_MAX_SIZE + 1, 0, MT_ALLOC_LINEAR, &b), -ENOSPC);
    MT_CHECK_UINT_EQ(pstats(p, 1).alloc.allocations, 1);

    /* A region added by hand gets a set-wide id of its own. */
    uint32_t rid;
    shadow *mine = shadow_new(0, 64 * KiB);
    MT_CHECK_ERR(mt_pool_add_region(p, 0, 0, mine, &rid), -EINVAL);
    MT_CHECK_OK(mt_pool_add_region(p, 0, 64 * KiB, mine, &rid));
    MT_CHECK(rid != a0.region && rid != a1.region);
    MT_CHECK_OK(mt_pools_region_info(s, rid, &mt, &size, &user));
    MT_CHECK_UINT_EQ(mt, 0);
    MT_CHECK_UINT_EQ(size, 64 * KiB);
    MT_CHECK(user == mine);
    pool_ok(p);
    mt_pool_detach(p);
    mt_pools_destroy(s); /* releases all three regions */
    MT_CHECK_INT_EQ(atomic_load(&g_shadows), 0);

    /* Bad options. */
    mt_pools_opts o = {.memory_types = 65};
    MT_CHECK_ERR(mt_pools_create(&o, &s), -EINVAL);
    o = (mt_pools_opts){.min_align = 3};
    MT_CHECK_ERR(mt_pools_create(&o, &s), -EINVAL);
    o = (mt_pools_opts){.flags = MT_ALLOC_RELEASE_EMPTY};
    MT_CHECK_ERR(mt_pools_create(&o, &s), -EINVAL);
    o = (mt_pools_opts){.flags = 0x40};
    MT_CHECK_ERR(mt_pools_create(&o, &s), -EINVAL);
    MT_CHECK_ERR(mt_pools_create(NULL, NULL), -EINVAL);
}

/* Two pools used from one thread, one after the other, stand for two threads. */
static void test_cross_pool(void)
{
    mt_pools *s = new_set(1, 0, 1);
    mt_pool *a, *b;
    MT_CHECK_OK(mt_pool_attach(s, &a));
    MT_CHECK_OK(mt_pool_attach(s, &b));
    MT_CHECK(a != b);
    mt_alloc_block x = palloc(a, 0, 4096), y = palloc(a, 0, 4096);

    /* b frees a's block: queued, a still has it until its next allocation. */
    MT_CHECK_OK(mt_pool_free(b, x.region, x.offset));
    MT_CHECK_UINT_EQ(pstats(a, 0).alloc.allocations, 2);
    MT_CHECK_UINT_EQ(pstats(a, 0).deferred_done, 0);
    mt_alloc_block z = palloc(a, 0, 4096);
    MT_CHECK_UINT_EQ(pstats(a, 0).deferred_done, 1);
    MT_CHECK_UINT_EQ(pstats(a, 0).alloc.allocations, 2); /* x gone, z new */
    MT_CHECK_UINT_EQ(z.offset, x.offset);                 /* x's place, free again */

    /* A bad cross-pool free is queued, then found and counted by the owner. */
    MT_CHECK_OK(mt_pool_free(b, x.region, x.offset + 2 * GRAN));
    MT_CHECK_INT_EQ(mt_pool_collect(a), 0); /* nothing carried out */
    MT_CHECK_UINT_EQ(pstats(a, 0).deferred_errors, 1);
    MT_CHECK_UINT_EQ(pstats(a, 0).alloc.allocations, 2);

    /* A thread with no pool. */
    MT_CHECK_OK(mt_pools_free(s, y.region, y.offset));
    MT_CHECK_INT_EQ(mt_pool_collect(a), 1);
    MT_CHECK_UINT_EQ(pstats(a, 0).alloc.allocations, 1);
    MT_CHECK_ERR(mt_pools_free(s, 4242, 0), -ENOENT);

    /* Fenced, cross-pool: moved to a's fence heap, freed once completed. */
    atomic_store(&g_timeline, 10);
    MT_CHECK_OK(mt_pool_free_fenced(b, z.region, z.offset, 12));
    MT_CHECK_INT_EQ(mt_pool_collect(a), 0);
    MT_CHECK_UINT_EQ(pstats(a, 0).fenced_pending, 1);
    MT_CHECK_UINT_EQ(pstats(a, 0).alloc.allocations, 1);
    atomic_store(&g_timeline, 11);
    MT_CHECK_INT_EQ(mt_pool_collect(a), 0);
    atomic_store(&g_timeline, 12);
    MT_CHECK_INT_EQ(mt_pool_collect(a), 1);
    MT_CHECK_UINT_EQ(pstats(a, 0).fenced_pending, 0);
    MT_CHECK_UINT_EQ(pstats(a, 0).fenced_done, 1);
    MT_CHECK_UINT_EQ(pstats(a, 0).alloc.allocations, 0);

    /* Detached pools: b's free to a detached a waits for collect_detached. */
    mt_alloc_block w = palloc(a, 0, 512);
    mt_pool_detach(a);
    MT_CHECK_OK(mt_pool_free(b, w.region, w.offset));
    MT_CHECK_INT_EQ(mt_pools_collect_detached(s), 1);
    mt_pool *again;
    MT_CHECK_OK(mt_pool_attach(s, &again));
    MT_CHECK(again == a); /* the detached pool is reused, with its state */
    MT_CHECK_UINT_EQ(pstats(a, 0).alloc.allocations, 0);
    MT_CHECK_UINT_EQ(pstats(a, 0).deferred_done, 3);
    pool_ok(a);
    pool_ok(b);

    /* Queued frees never carried out are cleaned up by destroy (ASan checks). */
    mt_alloc_block v = palloc(a, 0, 512);
    MT_CHECK_OK(mt_pools_free(s, v.region, v.offset));
    MT_CHECK_OK(mt_pools_free_fenced(s, v.region, v.offset, 1000));
    MT_CHECK_OK(mt_pool_free_fenced(b, v.region, v.offset, 1000));
    mt_pools_destroy(s);
}

/* Own fenced frees in scrambled value order, told apart by their sizes. */
static void test_fence_order(void)
{
    mt_pools *s = new_set(1, 0, 1);
    mt_pool *p;
    MT_CHECK_OK(mt_pool_attach(s, &p));
    atomic_store(&g_timeline, 0);
    static const uint64_t values[6] = {9, 3, 7, 3, 20, 1};
    mt_alloc_block blk[6];
    for (int i = 0; i < 6; i++)
        blk[i] = palloc(p, 0, GRAN << i);
    for (int i = 0; i < 6; i++)
        MT_CHECK_OK(mt_pool_free_fenced(p, blk[i].region, blk[i].offset, values[i]));
    MT_CHECK_UINT_EQ(pstats(p, 0).fenced_pending, 6);
    uint64_t used = pstats(p, 0).alloc.used_bytes;
    MT_CHECK_UINT_EQ(used, GRAN * 63);
    /* Each step of the timeline frees exactly the blocks whose value it reached. */
    static const uint64_t steps[] = {0, 1, 2, 3, 8, 9, 19, 20};
    for (size_t k = 0; k < sizeof steps / sizeof *steps; k++) {
        atomic_store(&g_timeline, steps[k]);
        /* Allocating carries them out too: allocate and free a probe. */
        mt_alloc_block probe = palloc(p, 0, GRAN);
        MT_CHECK_OK(mt_pool_free(p, probe.region, probe.offset));
        uint64_t expect = 0;
        for (int i = 0; i < 6; i++)
            if (values[i] > steps[k])
                expect += GRAN << i;
        MT_CHECK_UINT_EQ(pstats(p, 0).alloc.used_bytes, expect);
    }
    MT_CHECK_UINT_EQ(pstats(p, 0).fenced_done, 6);
    MT_CHECK_UINT_EQ(pstats(p, 0).fenced_pending, 0);
    pool_ok(p);
    mt_pools_destroy(s);
}

/* Emptied regions are released; their ids go stale everywhere. */
static void test_release(void)
{
    int rel0 = atomic_load(&g_releases);
    mt_pools *s = new_set(1, MT_ALLOC_RELEASE_EMPTY, 0);
    mt_pool *p;
    MT_CHECK_OK(mt_pool_attach(s, &p));
    mt_alloc_block x = palloc(p, 0, REGION);     /* fills region A */
    mt_alloc_block y = palloc(p, 0, REGION / 2); /* region B */
    MT_CHECK(x.region != y.region);
    MT_CHECK_OK(mt_pool_free(p, y.region, y.offset)); /* B empty: kept (only one) */
    MT_CHECK_INT_EQ(atomic_load(&g_releases), rel0);
    MT_CHECK_OK(mt_pool_free(p, x.region, x.offset)); /* A empty too: released */
    MT_CHECK_INT_EQ(atomic_load(&g_releases), rel0 + 1);
    MT_CHECK_ERR(mt_pools_region_info(s, x.region, NULL, NULL, NULL), -ENOENT);
    MT_CHECK_ERR(mt_pool_free(p, x.region, x.offset), -ENOENT);
    MT_CHECK_OK(mt_pools_region_info(s, y.region, NULL, NULL, NULL));
    /* A new region never reuses a released id. */
    mt_alloc_block big = palloc(p, 0, 2 * REGION);
    MT_CHECK(big.region != x.region && big.region != y.region);
    pool_ok(p);
    mt_pools_destroy(s);
    MT_CHECK_INT_EQ(atomic_load(&g_releases), rel0 + 3);
    MT_CHECK_INT_EQ(atomic_load(&g_shadows), 0);
}

/* ---- multi-threaded stress ----------------------------------------------- */

#define NTHREADS 4
#define INBOX 1024

typedef struct item {
    mt_alloc_block b;
    shadow *sh;
} item;

typedef struct inbox {
    pthread_mutex_t lock;
    item items[INBOX];
    int n;
} inbox;

typedef struct worker {
    int id;
    uint64_t seed;
    int iters;
    mt_pools *s;
    mt_pool *pool;
    uint64_t sent_plain, sent_fenced, own_fenced, nopool_frees;
} worker;

/* Inbox NTHREADS belongs to a thread without a pool (mt_pools_free). */
static inbox g_inbox[NTHREADS + 1];
static pthread_barrier_t g_barrier;
static worker g_workers[NTHREADS + 1];
static _Atomic int g_finished;

static void shadow_take(const item *it)
{
    uint64_t done = completed_cb(NULL);
    for (uint64_t i = it->b.offset / GRAN; i < (it->b.offset + it->b.size) / GRAN; i++) {
        /* acq_rel: sees the clear made by whoever freed it (ordered before the
         * free by the pools' release/acquire), publishes ours. */
        uint64_t old = atomic_exchange_explicit(&it->sh->g[i], 1, memory_order_acq_rel);
        if (old == 1 || (old >= 2 && old - 2 > done)) {
            fprintf(stderr, "granule %" PRIu64 " of region %u handed out while %s\n", i,
                    it->b.region, old == 1 ? "in use" : "fenced");
            MT_CHECK(0);
        }
    }
}

static void shadow_give(const item *it, uint64_t state)
{
    for (uint64_t i = it->b.offset / GRAN; i < (it->b.offset + it->b.size) / GRAN; i++)
        MT_CHECK_UINT_EQ(atomic_exchange_explicit(&it->sh->g[i], state, memory_order_acq_rel), 1);
}

static void give_away(worker *w, item it, uint64_t *rng)
{
    int to = (int)mt_test_below(rng, NTHREADS + 1);
    if (to == w->id) {
        /* Own: free now, or fenced at a value close to the timeline's. */
        if (mt_test_below(rng, 4) == 0) {
            uint64_t v = completed_cb(NULL) + mt_test_below(rng, 3);
            shadow_give(&it, 2 + v);
            MT_CHECK_OK(mt_pool_free_fenced(w->pool, it.b.region, it.b.offset, v));
            w->own_fenced++;
        } else {
            shadow_give(&it, 0);
            MT_CHECK_OK(mt_pool_free(w->pool, it.b.region, it.b.offset));
        }
        return;
    }
    inbox *ib = &g_inbox[to];
    pthread_mutex_lock(&ib->lock);
    int full = ib->n == INBOX;
    if (!full)
        ib->items[ib->n++] = it;
    pthread_mutex_unlock(&ib->lock);
    if (full) { /* no room: free it ourselves through the set */
        shadow_give(&it, 0);
        MT_CHECK_OK(mt_pools_free(w->s, it.b.region, it.b.offset));
        w->nopool_frees++;
    }
}

/* Frees what other threads handed over: other pools' blocks, so queued. */
static void empty_inbox(worker *w, uint64_t *rng)
{
    inbox *ib = &g_inbox[w->id];
    item local[INBOX];
    pthread_mutex_lock(&ib->lock);
    int n = ib->n;
    memcpy(local, ib->items, (size_t)n * sizeof *local);
    ib->n = 0;
    pthread_mutex_unlock(&ib->lock);
    for (int i = 0; i < n; i++) {
        const mt_alloc_block *b = &local[i].b;
        if (mt_test_below(rng, 3) == 0) {
            uint64_t v = completed_cb(NULL) + mt_test_below(rng, 3);
            shadow_give(&local[i], 2 + v);
            MT_CHECK_OK(w->pool ? mt_pool_free_fenced(w->pool, b->region, b->offset, v)
                                : mt_pools_free_fenced(w->s, b->region, b->offset, v));
            w->sent_fenced++;
        } else {
            shadow_give(&local[i], 0);
            MT_CHECK_OK(w->pool ? mt_pool_free(w->pool, b->region, b->offset)
                                : mt_pools_free(w->s, b->region, b->offset));
            w->sent_plain++;
        }
    }
}

/* A thread with no pool: frees what it is handed until the workers finish. */
static void *poolless_main(void *arg)
{
    worker *w = arg;
    uint64_t rng = w->seed;
    while (atomic_load(&g_finished) < NTHREADS) {
        empty_inbox(w, &rng);
        sched_yield();
    }
    pthread_barrier_wait(&g_barrier);
    empty_inbox(w, &rng);
    /* Like every thread, moves the timeline past the values it used. */
    atomic_fetch_add_explicit(&g_timeline, 1000, memory_order_release);
    pthread_barrier_wait(&g_barrier);
    return NULL;
}

static void *worker_main(void *arg)
{
    worker *w = arg;
    uint64_t rng = w->seed;
    MT_CHECK_OK(mt_pool_attach(w->s, &w->pool));
    for (int it = 0; it < w->iters; it++) {
        item x;
        uint32_t memtype = (uint32_t)mt_test_below(&rng, 2);
        uint64_t size = GRAN * (1 + mt_test_below(&rng, 64));
        MT_CHECK_OK(mt_pool_allocate(w->pool, memtype, size, 0, MT_ALLOC_LINEAR, &x.b));
        void *user;
        MT_CHECK_OK(mt_pools_region_info(w->s, x.b.region, NULL, NULL, &user));
        x.sh = user;
        shadow_take(&x);
        give_away(w, x, &rng);
        if (mt_test_below(&rng, 4) == 0)
            empty_inbox(w, &rng);
        if (mt_test_below(&rng, 16) == 0)
            /* release: pairs with completed_cb's acquire. */
            atomic_fetch_add_explicit(&g_timeline, 1, memory_order_release);
    }
    atomic_fetch_add(&g_finished, 1);
    pthread_barrier_wait(&g_barrier); /* nobody hands out any more */
    empty_inbox(w, &rng);
    atomic_fetch_add_explicit(&g_timeline, 1000, memory_order_release);
    pthread_barrier_wait(&g_barrier); /* every free is queued, every fence reached */
    mt_pool_collect(w->pool);
    pool_ok(w->pool);
    return NULL;
}

static void test_threads(uint64_t seed)
{
#ifdef MT_SANITIZER_BUILD
    const int iters = 3000;
#else
    const int iters = 30000;
#endif
    atomic_store(&g_timeline, 0);
    mt_pools *s = new_set(2, MT_ALLOC_RELEASE_EMPTY, 1);
    pthread_barrier_init(&g_barrier, NULL, NTHREADS + 1);
    atomic_store(&g_finished, 0);
    pthread_t th[NTHREADS + 1];
    for (int i = 0; i <= NTHREADS; i++) { /* all inboxes before any thread runs */
        pthread_mutex_init(&g_inbox[i].lock, NULL);
        g_inbox[i].n = 0;
    }
    for (int i = 0; i <= NTHREADS; i++) {
        g_workers[i] = (worker){.id = i, .seed = seed + 77u * (uint64_t)i, .iters = iters, .s = s};
        MT_CHECK_INT_EQ(pthread_create(&th[i], NULL, i < NTHREADS ? worker_main : poolless_main,
                                       &g_workers[i]), 0);
    }
    for (int i = 0; i <= NTHREADS; i++)
        pthread_join(th[i], NULL);
    /* Every free queued anywhere was carried out exactly once. */
    uint64_t sent_plain = 0, sent_fenced = 0, own_fenced = 0, nopool = 0;
    uint64_t done = 0, fenced = 0, errors = 0, live = 0, pending = 0;
    uint64_t pooless_plain = 0, pooless_fenced = 0;
    for (int i = 0; i <= NTHREADS; i++) {
        worker *w = &g_workers[i];
        sent_plain += w->sent_plain;
        sent_fenced += w->sent_fenced;
        own_fenced += w->own_fenced;
        nopool += w->nopool_frees;
        if (i == NTHREADS) {
            pooless_plain = w->sent_plain;
            pooless_fenced = w->sent_fenced;
            continue;
        }
        for (uint32_t t = 0; t < 2; t++) {
            mt_pool_stats st = pstats(w->pool, t);
            live += st.alloc.allocations;
            if (t == 0) { /* the queue counters are per pool */
                done += st.deferred_done;
                fenced += st.fenced_done;
                errors += st.deferred_errors;
                pending += st.fenced_pending;
            }
        }
    }
    printf("threads: %d x %d allocations; %" PRIu64 " cross-thread frees, %" PRIu64
           " fenced cross-thread, %" PRIu64 " fenced own; by the thread without a pool: %"
           PRIu64 " + %" PRIu64 " fenced; %" PRIu64 " more when an inbox was full\n",
           NTHREADS, iters, sent_plain, sent_fenced, own_fenced, pooless_plain, pooless_fenced,
           nopool);
    MT_CHECK(sent_plain > 0 && sent_fenced > 0 && own_fenced > 0);
    MT_CHECK(pooless_plain > 0 && pooless_fenced > 0);
    MT_CHECK_UINT_EQ(done, sent_plain + nopool);
    MT_CHECK_UINT_EQ(fenced, sent_fenced + own_fenced);
    MT_CHECK_UINT_EQ(errors, 0);
    MT_CHECK_UINT_EQ(pending, 0);
    MT_CHECK_UINT_EQ(live, 0);
    for (int i = 0; i <= NTHREADS; i++) {
        if (i < NTHREADS)
            mt_pool_detach(g_workers[i].pool);
        pthread_mutex_destroy(&g_inbox[i].lock);
    }
    pthread_barrier_destroy(&g_barrier);
    mt_pools_destroy(s);
}

int main(int argc, char **argv)
{
    uint64_t seed = mt_test_seed(argc, argv);
    test_basic();
    test_cross_pool();
    test_fence_order();
    test_release();
    test_threads(seed);
    MT_CHECK_INT_EQ(atomic_load(&g_shadows), 0); /* every region was released */
    puts("alloc pool: ok");
    return 0;
}
