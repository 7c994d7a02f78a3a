/* Deferred reclamation: callbacks run once each, only after their value
 * completed, in (value, queue order), with the right status on loss and
 * destroy; then concurrently queued, signalled and polled from several
 * threads, with the ordering rule checked on every pair. */
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdlib.h>

#include "memtrack/timeline.h"
#include "mt_test.h"

/* ---- single-threaded, scripted ------------------------------------------ */

typedef struct rec {
    uint64_t value;
    int status;
    int id;
} rec;

static rec g_log[4096];
static int g_nlog;
static mt_timeline *g_tl;

static void log_cb(void *ctx, uint64_t value, int status)
{
    int id = (int)(intptr_t)ctx;
    if (status == 0)
        MT_CHECK(mt_timeline_completed(g_tl) >= value); /* never early */
    g_log[g_nlog++] = (rec){value, status, id};
}

static void scripted(uint64_t *rng)
{
    enum { N = 600 };
    MT_CHECK_OK(mt_timeline_create(NULL, &g_tl));
    uint64_t vals[N];
    for (int i = 0; i < N; i++) {
        vals[i] = 1 + mt_test_below(rng, 100); /* many ties */
        MT_CHECK_OK(mt_timeline_defer(g_tl, vals[i], log_cb, (void *)(intptr_t)i));
    }
    MT_CHECK_ERR(mt_timeline_defer(g_tl, 1, NULL, NULL), -EINVAL);
    MT_CHECK_UINT_EQ(mt_timeline_pending(g_tl), N);
    MT_CHECK_INT_EQ(mt_timeline_poll(g_tl), 0); /* nothing completed */

    /* Reference: expected run order is by (value, id). */
    int done = 0;
    for (uint64_t c = 0; c <= 100; c += 1 + mt_test_below(rng, 9)) {
        MT_CHECK_OK(mt_timeline_signal(g_tl, c));
        long ran = mt_timeline_poll(g_tl);
        int expect = 0;
        for (int i = 0; i < N; i++)
            expect += vals[i] <= c;
        MT_CHECK_INT_EQ(done + ran, expect);
        done = expect;
        MT_CHECK_INT_EQ(g_nlog, done);
    }
    MT_CHECK_OK(mt_timeline_signal(g_tl, 100));
    mt_timeline_poll(g_tl);
    MT_CHECK_INT_EQ(g_nlog, N);
    for (int k = 1; k < N; k++) {
        rec a = g_log[k - 1], b = g_log[k];
        MT_CHECK(a.value < b.value || (a.value == b.value && a.id < b.id));
    }
    int seen[N] = {0};
    for (int k = 0; k < N; k++) {
        MT_CHECK_INT_EQ(g_log[k].status, 0);
        MT_CHECK_UINT_EQ(g_log[k].value, vals[g_log[k].id]);
        MT_CHECK_INT_EQ(seen[g_log[k].id]++, 0); /* exactly once */
    }
    MT_CHECK_UINT_EQ(mt_timeline_pending(g_tl), 0);
    /* An already completed value runs at the next poll. */
    g_nlog = 0;
    MT_CHECK_OK(mt_timeline_defer(g_tl, 50, log_cb, (void *)(intptr_t)7));
    MT_CHECK_INT_EQ(mt_timeline_poll(g_tl), 1);
    MT_CHECK_INT_EQ(g_nlog, 1);
    mt_timeline_destroy(g_tl);
}

/* Loss: completed ones run with 0, the rest with the loss code, in order.
 * Destroy: the rest run with MT_ECANCELED. */
static void loss_and_destroy(void)
{
    MT_CHECK_OK(mt_timeline_create(NULL, &g_tl));
    g_nlog = 0;
    for (int i = 0; i < 10; i++)
        MT_CHECK_OK(mt_timeline_defer(g_tl, (uint64_t)(10 - i), log_cb, (void *)(intptr_t)i));
    MT_CHECK_OK(mt_timeline_signal(g_tl, 4));
    mt_timeline_lose(g_tl, MT_EDEVLOST);
    MT_CHECK_INT_EQ(mt_timeline_poll(g_tl), 10);
    for (int k = 0; k < 10; k++) {
        MT_CHECK_UINT_EQ(g_log[k].value, (uint64_t)k + 1);
        MT_CHECK_INT_EQ(g_log[k].status, k + 1 <= 4 ? 0 : MT_EDEVLOST);
    }
    /* Queued after the loss: runs at the next poll with the loss code. */
    MT_CHECK_OK(mt_timeline_defer(g_tl, 99, log_cb, NULL));
    MT_CHECK_INT_EQ(mt_timeline_poll(g_tl), 1);
    MT_CHECK_INT_EQ(g_log[10].status, MT_EDEVLOST);
    mt_timeline_destroy(g_tl);

    MT_CHECK_OK(mt_timeline_create(NULL, &g_tl));
    g_nlog = 0;
    MT_CHECK_OK(mt_timeline_defer(g_tl, 3, log_cb, NULL));
    MT_CHECK_OK(mt_timeline_defer(g_tl, 1, log_cb, NULL));
    MT_CHECK_OK(mt_timeline_defer(g_tl, 2, log_cb, NULL));
    MT_CHECK_OK(mt_timeline_signal(g_tl, 2));
    mt_timeline_destroy(g_tl); /* drains without a poll */
    MT_CHECK_INT_EQ(g_nlog, 3);
    MT_CHECK(g_log[0].value == 1 && g_log[0].status == 0);
    MT_CHECK(g_log[1].value == 2 && g_log[1].status == 0);
    MT_CHECK(g_log[2].value == 3 && g_log[2].status == MT_ECANCELED);
}

/* A callback may queue another and poll (which then returns 0: the outer
 * poll is the drainer and runs the new one too, in order). */
static int g_reentered;
static void reenter_cb(void *ctx, uint64_t value, int status)
{
    (void)ctx;
    (void)status;
    if (value == 1) {
        MT_CHECK_OK(mt_timeline_defer(g_tl, 2, reenter_cb, NULL));
        MT_CHECK_INT_EQ(mt_timeline_poll(g_tl), 0);
    }
    g_reentered++;
}

static void reentrancy(void)
{
    MT_CHECK_OK(mt_timeline_create(NULL, &g_tl));
    g_reentered = 0;
    MT_CHECK_OK(mt_timeline_defer(g_tl, 1, reenter_cb, NULL));
    MT_CHECK_OK(mt_timeline_signal(g_tl, 5));
    MT_CHECK_INT_EQ(mt_timeline_poll(g_tl), 2);
    MT_CHECK_INT_EQ(g_reentered, 2);
    mt_timeline_destroy(g_tl);
}

/* ---- concurrent --------------------------------------------------------
 * D deferring threads queue increasing values and note, right after each
 * defer, the completed value (an upper bound of it at queue time); S
 * signallers advance; P pollers poll. In MT_TIMELINE_CALLBACKS_ON_SIGNAL
 * mode the signallers run them. Checks: each ran once, only after its
 * value completed, and for a.value < b.value with b.value not yet completed
 * when a was queued, a ran before b. */
enum { D = 3, PER = 700, TOTAL = D * PER, MAXV = 3000 };

typedef struct item {
    uint64_t value;
    uint64_t completed_after_queue;
    atomic_int runs;
    int order; /* run position, written by the (single) running drainer */
} item;

static item g_items[TOTAL];
static atomic_int g_order;
/* Each deferrer's last queued value (UINT64_MAX when done): signallers stay
 * behind the slowest one, so most values are queued before they complete
 * and the ordering rule has something to check. */
static _Atomic uint64_t g_progress[D];
static mt_timeline *g_ctl;
static atomic_int g_stop;

static void item_cb(void *ctx, uint64_t value, int status)
{
    item *it = ctx;
    MT_CHECK_INT_EQ(status, 0);
    MT_CHECK(mt_timeline_completed(g_ctl) >= value);
    MT_CHECK_INT_EQ(atomic_fetch_add(&it->runs, 1), 0);
    /* Take a little while, as a real free does: a second drainer running at
     * the same time (the bug this test is for) would overtake this one. */
    sched_yield();
    it->order = atomic_fetch_add(&g_order, 1);
}

typedef struct targ {
    int idx;
    uint64_t seed;
} targ;

static void *deferrer(void *arg)
{
    targ *a = arg;
    uint64_t rng = a->seed, v = 1;
    for (int i = 0; i < PER; i++) {
        item *it = &g_items[a->idx * PER + i];
        v += mt_test_below(&rng, 3);
        it->value = v;
        MT_CHECK_OK(mt_timeline_defer(g_ctl, v, item_cb, it));
        it->completed_after_queue = mt_timeline_completed(g_ctl);
        atomic_store(&g_progress[a->idx], v);
    }
    atomic_store(&g_progress[a->idx], UINT64_MAX);
    return NULL;
}

static void *sig_thread(void *arg)
{
    targ *a = arg;
    uint64_t rng = a->seed;
    for (uint64_t v = 0; v <= MAXV; v += 1 + mt_test_below(&rng, 3)) {
        for (int d = 0; d < D; d++)
            while (atomic_load(&g_progress[d]) < v + 8)
                sched_yield();
        MT_CHECK_OK(mt_timeline_signal(g_ctl, v));
    }
    MT_CHECK_OK(mt_timeline_signal(g_ctl, MAXV));
    return NULL;
}

static void *poller(void *arg)
{
    (void)arg;
    while (!atomic_load(&g_stop))
        mt_timeline_poll(g_ctl);
    return NULL;
}

static void concurrent(uint64_t seed, uint32_t flags)
{
    mt_timeline_opts o = {.flags = flags};
    MT_CHECK_OK(mt_timeline_create(&o, &g_ctl));
    memset(g_items, 0, sizeof g_items);
    atomic_store(&g_order, 0);
    atomic_store(&g_stop, 0);
    for (int d = 0; d < D; d++)
        atomic_store(&g_progress[d], 0);
    pthread_t td[D], ts[2], tp[2];
    targ a[D + 2];
    for (int i = 0; i < D + 2; i++)
        a[i] = (targ){i, seed + (uint64_t)i * 104729};
    for (int i = 0; i < 2; i++)
        MT_CHECK_INT_EQ(pthread_create(&tp[i], NULL, poller, NULL), 0);
    for (int i = 0; i < D; i++)
        MT_CHECK_INT_EQ(pthread_create(&td[i], NULL, deferrer, &a[i]), 0);
    for (int i = 0; i < 2; i++)
        MT_CHECK_INT_EQ(pthread_create(&ts[i], NULL, sig_thread, &a[D + i]), 0);
    for (int i = 0; i < D; i++)
        pthread_join(td[i], NULL);
    for (int i = 0; i < 2; i++)
        pthread_join(ts[i], NULL);
    atomic_store(&g_stop, 1);
    for (int i = 0; i < 2; i++)
        pthread_join(tp[i], NULL);
    /* Values beyond MAXV are still queued: complete them. */
    MT_CHECK_OK(mt_timeline_signal(g_ctl, UINT64_MAX));
    mt_timeline_poll(g_ctl);
    MT_CHECK_UINT_EQ(mt_timeline_pending(g_ctl), 0);
    MT_CHECK_INT_EQ(atomic_load(&g_order), TOTAL);
    for (int i = 0; i < TOTAL; i++)
        MT_CHECK_INT_EQ(atomic_load(&g_items[i].runs), 1);
    /* The ordering rule, on every pair. It must apply to most items. */
    int queued_early = 0;
    for (int i = 0; i < TOTAL; i++)
        queued_early += g_items[i].completed_after_queue < g_items[i].value;
    printf("concurrent(flags=%u): %d of %d queued before completion\n", flags, queued_early, TOTAL);
    MT_CHECK(queued_early > TOTAL / 2);
    for (int i = 0; i < TOTAL; i++)
        for (int j = 0; j < TOTAL; j++) {
            const item *x = &g_items[i], *y = &g_items[j];
            if (x->value < y->value && x->completed_after_queue < y->value && x->order > y->order) {
                fprintf(stderr, "order: value %ju ran after %ju\n", (uintmax_t)x->value,
                        (uintmax_t)y->value);
                MT_CHECK(0);
            }
        }
    mt_timeline_destroy(g_ctl);
}

int main(int argc, char **argv)
{
    uint64_t seed = mt_test_seed(argc, argv), rng = seed;
    scripted(&rng);
    loss_and_destroy();
    reentrancy();
    concurrent(seed, 0);
    concurrent(seed + 1, MT_TIMELINE_CALLBACKS_ON_SIGNAL);
    puts("timeline defer: ok");
    return 0;
}
