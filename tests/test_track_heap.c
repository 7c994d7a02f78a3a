/* track: ranges in the malloc heap, both backends.
 *
 * lavapipe hands out device memory from malloc: a tracked range then shares
 * pages with malloc's own metadata and with other allocations, and a
 * tracker whose bookkeeping came from malloc could write-protect its own
 * bitmap and die in its fault handler. Here: many small heap blocks (12-30
 * KiB, like the 20 mapped allocations that crashed the signal backend), each
 * tracked, written by several threads that also malloc/free around them,
 * while a collector thread collects; the shadow updated only from reported
 * runs must equal every block at the end, and every page written must have
 * been reported.
 *
 * Usage: test_track_heap [--seed N] */
#include <pthread.h>
#include <sched.h>

#include "track_child.h"

#define NBLOCKS 48
#define NTHREADS 4
#ifdef MT_SANITIZER_BUILD
#define WRITES 3000
#else
#define WRITES 40000
#endif

typedef struct block {
    unsigned char *p;
    size_t len;
    unsigned char *shadow;
    mt_range_id id;
} block;

typedef struct ctx {
    mt_tracker *t;
    block b[NBLOCKS];
    _Atomic int writers_left;
    _Atomic long collects;
    uint64_t seed;
} ctx;

typedef struct warg {
    ctx *c;
    int index;
} warg;

static void *writer(void *arg)
{
    warg *w = arg;
    ctx *c = w->c;
    uint64_t rng = c->seed * 7919 + (uint64_t)w->index;
    void *junk[16] = {0};
    for (long i = 0; i < WRITES || atomic_load(&c->collects) < 20; i++) {
        block *b = &c->b[mt_test_below(&rng, NBLOCKS)];
        size_t off = (size_t)mt_test_below(&rng, b->len);
        __atomic_store_n(&b->p[off], (unsigned char)mt_test_rand(&rng), __ATOMIC_RELAXED);
        /* The heap stays busy: malloc's metadata lives in tracked pages. */
        if (i % 64 == 0) {
            int k = (int)mt_test_below(&rng, 16);
            free(junk[k]);
            junk[k] = malloc(16 + (size_t)mt_test_below(&rng, 300));
            MT_CHECK(junk[k] != NULL);
            memset(junk[k], 0x5a, 16);
        }
        if (i % 1024 == 1023)
            sched_yield();
    }
    for (int k = 0; k < 16; k++)
        free(junk[k]);
    atomic_fetch_sub(&c->writers_left, 1);
    return NULL;
}

static void drain_all(ctx *c)
{
    for (int k = 0; k < NBLOCKS; k++) {
        block *b = &c->b[k];
        tc_shadow s = {b->p, b->shadow, b->len};
        MT_CHECK(tc_drain(c->t, b->id, b->p, &s) >= 0);
    }
}

static void *collector(void *arg)
{
    ctx *c = arg;
    while (atomic_load(&c->writers_left) > 0) {
        drain_all(c);
        atomic_fetch_add(&c->collects, 1);
    }
    return NULL;
}

static void run(mt_track_backend be, uint64_t seed)
{
    ctx c;
    memset(&c, 0, sizeof c);
    c.seed = seed;
    uint64_t rng = seed;
    /* As a driver that mallocs device memory and a layer that tracks each
     * block when it is mapped: allocate, track, allocate the next... A
     * tracker allocating from malloc puts its bookkeeping right after the
     * block, in the block's own last page. Other allocations of all sizes
     * in between. */
    void *between[NBLOCKS];
    mt_tracker_opts o = {.backend = be};
    MT_CHECK_OK(mt_tracker_create(&o, &c.t));
    for (int k = 0; k < NBLOCKS; k++) {
        c.b[k].len = 12 * 1024 + (size_t)mt_test_below(&rng, 18 * 1024);
        c.b[k].p = malloc(c.b[k].len);
        MT_CHECK(c.b[k].p != NULL);
        memset(c.b[k].p, k, c.b[k].len);
        MT_CHECK_OK(mt_tracker_add(c.t, c.b[k].p, c.b[k].len, NULL, &c.b[k].id));
        between[k] = malloc(8 + (size_t)mt_test_below(&rng, 4000));
        MT_CHECK(between[k] != NULL);
        MT_CHECK_INT_EQ(mt_tracker_backend(c.t, c.b[k].id), be);
        /* The shadow is taken after add (the documented baseline). */
        c.b[k].shadow = malloc(c.b[k].len);
        MT_CHECK(c.b[k].shadow != NULL);
        memcpy(c.b[k].shadow, c.b[k].p, c.b[k].len);
    }
    /* Writes from this thread first, before any other thread exists. */
    for (int k = 0; k < NBLOCKS; k++)
        c.b[k].p[c.b[k].len / 2] ^= 0xff;
    drain_all(&c);

    atomic_store(&c.writers_left, NTHREADS);
    pthread_t th[NTHREADS], col;
    warg wa[NTHREADS];
    pthread_create(&col, NULL, collector, &c);
    for (int i = 0; i < NTHREADS; i++) {
        wa[i] = (warg){&c, i};
        pthread_create(&th[i], NULL, writer, &wa[i]);
    }
    for (int i = 0; i < NTHREADS; i++)
        pthread_join(th[i], NULL);
    pthread_join(col, NULL);
    drain_all(&c);

    size_t bytes = 0;
    for (int k = 0; k < NBLOCKS; k++) {
        MT_CHECK_MEM_EQ(c.b[k].shadow, c.b[k].p, c.b[k].len);
        bytes += c.b[k].len;
        mt_range_stats st;
        MT_CHECK_OK(mt_tracker_stats(c.t, c.b[k].id, &st));
        MT_CHECK_INT_EQ(st.unmapped, 0);
    }
    printf("  %-6s %d heap blocks, %zu bytes exact after %ld concurrent collects\n",
           mt_track_backend_name(be), NBLOCKS, bytes, atomic_load(&c.collects));
    mt_tracker_destroy(c.t);
    for (int k = 0; k < NBLOCKS; k++) {
        free(c.b[k].p);
        free(c.b[k].shadow);
        free(between[k]);
    }
}

int main(int argc, char **argv)
{
    uint64_t seed = mt_test_seed(argc, argv);
    mt_track_backend be[2];
    int nb = tu_backends(be);
    for (int i = 0; i < nb; i++)
        run(be[i], seed + (uint64_t)i);
    puts("track heap: ok");
    return 0;
}
