/* Timeline waits: immediate results, timeouts, cancellation releasing every
 * sleeping waiter, device loss releasing every waiter (and failing later
 * waits at once), and a signaller/waiter stress that also checks that data
 * written before a signal is visible after the wait (TSan checks the
 * happens-before). */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <time.h>

#include "memtrack/timeline.h"
#include "mt_test.h"

static void sleep_us(long us)
{
    struct timespec ts = {us / 1000000, (us % 1000000) * 1000};
    nanosleep(&ts, NULL);
}

typedef struct waiter {
    pthread_t t;
    mt_timeline *tl;
    uint64_t value;
    atomic_int done;
    int rc;
} waiter;

static void *wait_main(void *arg)
{
    waiter *w = arg;
    w->rc = mt_timeline_wait(w->tl, w->value, -1);
    atomic_store(&w->done, 1);
    return NULL;
}

static void start(waiter *w, mt_timeline *tl, uint64_t value)
{
    w->tl = tl;
    w->value = value;
    atomic_init(&w->done, 0);
    MT_CHECK_INT_EQ(pthread_create(&w->t, NULL, wait_main, w), 0);
}

static void basics(void)
{
    mt_timeline *tl;
    mt_timeline_opts o = {.initial = 10};
    MT_CHECK_OK(mt_timeline_create(&o, &tl));
    MT_CHECK_UINT_EQ(mt_timeline_completed(tl), 10);
    MT_CHECK_UINT_EQ(mt_timeline_completed_cb(tl), 10);
    MT_CHECK_OK(mt_timeline_wait(tl, 10, 0));
    MT_CHECK_OK(mt_timeline_wait(tl, 3, -1));
    MT_CHECK_ERR(mt_timeline_wait(tl, 11, 0), MT_ETIMEDOUT);
    MT_CHECK_ERR(mt_timeline_wait(tl, 11, 1000000), MT_ETIMEDOUT); /* sleeps 1 ms */
    MT_CHECK_OK(mt_timeline_signal(tl, 12));
    MT_CHECK_OK(mt_timeline_signal(tl, 11)); /* backwards: no-op */
    MT_CHECK_UINT_EQ(mt_timeline_completed(tl), 12);
    MT_CHECK_OK(mt_timeline_wait(tl, 11, 0));
    MT_CHECK_INT_EQ(mt_timeline_status(tl), 0);
    mt_timeline_destroy(tl);
    mt_timeline_destroy(NULL);
}

/* Cancellation: every sleeping waiter returns MT_ECANCELED. A cancel only
 * affects waits in progress, so it is repeated until all have returned. */
static void cancel(void)
{
    enum { N = 6 };
    mt_timeline *tl;
    MT_CHECK_OK(mt_timeline_create(NULL, &tl));
    waiter w[N];
    for (int i = 0; i < N; i++)
        start(&w[i], tl, 100 + (uint64_t)i);
    for (int all = 0; !all;) {
        sleep_us(2000);
        mt_timeline_cancel(tl);
        all = 1;
        for (int i = 0; i < N; i++)
            all &= atomic_load(&w[i].done);
    }
    for (int i = 0; i < N; i++) {
        pthread_join(w[i].t, NULL);
        MT_CHECK_ERR(w[i].rc, MT_ECANCELED);
    }
    /* The timeline still works afterwards. */
    MT_CHECK_OK(mt_timeline_signal(tl, 100));
    MT_CHECK_OK(mt_timeline_wait(tl, 100, -1));
    mt_timeline_destroy(tl);
}

/* Device loss: waiters for uncompleted values get the loss code (sleeping
 * ones are woken; later ones fail at once), completed values still wait OK,
 * and signals are refused. */
static void loss(void)
{
    enum { N = 8 };
    mt_timeline *tl;
    MT_CHECK_OK(mt_timeline_create(NULL, &tl));
    MT_CHECK_OK(mt_timeline_signal(tl, 4));
    waiter w[N];
    for (int i = 0; i < N; i++)
        start(&w[i], tl, 5 + (uint64_t)i * 1000);
    sleep_us(20000); /* most of them asleep by now; either way the result is fixed */
    mt_timeline_lose(tl, 0);
    for (int i = 0; i < N; i++) {
        pthread_join(w[i].t, NULL);
        MT_CHECK_ERR(w[i].rc, MT_EDEVLOST);
    }
    MT_CHECK_ERR(mt_timeline_status(tl), MT_EDEVLOST);
    MT_CHECK_ERR(mt_timeline_wait(tl, 5, -1), MT_EDEVLOST); /* no hang */
    MT_CHECK_OK(mt_timeline_wait(tl, 4, -1));              /* completed before */
    MT_CHECK_ERR(mt_timeline_signal(tl, 10), MT_EDEVLOST);
    MT_CHECK_UINT_EQ(mt_timeline_completed(tl), 4);
    mt_timeline_lose(tl, -EIO); /* first code stays */
    MT_CHECK_ERR(mt_timeline_status(tl), MT_EDEVLOST);
    mt_timeline_destroy(tl);

    /* A custom loss code is reported as given. */
    MT_CHECK_OK(mt_timeline_create(NULL, &tl));
    mt_timeline_lose(tl, -EIO);
    MT_CHECK_ERR(mt_timeline_wait(tl, 1, -1), -EIO);
    mt_timeline_destroy(tl);
}

/* Stress: one signaller walks the value up (in random steps) writing
 * data[v] = v*3 before signalling v; waiters wait for random increasing
 * targets and read data[target] without atomics: correct only if the wait
 * acquires what the signal released. */
enum { SVALUES = 20000, SWAITERS = 4 };
static uint64_t data[SVALUES + 1];

typedef struct stress {
    mt_timeline *tl;
    uint64_t seed;
    uint64_t checked;
} stress;

static void *signaller(void *arg)
{
    stress *st = arg;
    uint64_t rng = st->seed, v = 0;
    while (v < SVALUES) {
        uint64_t next = v + 1 + mt_test_below(&rng, 4);
        if (next > SVALUES)
            next = SVALUES;
        for (uint64_t i = v + 1; i <= next; i++)
            data[i] = i * 3;
        MT_CHECK_OK(mt_timeline_signal(st->tl, next));
        v = next;
        if (mt_test_below(&rng, 64) == 0)
            sleep_us(50); /* let waiters fall asleep */
    }
    return NULL;
}

static void *stress_waiter(void *arg)
{
    stress *st = arg;
    uint64_t rng = st->seed, target = 0;
    while (target < SVALUES) {
        target += 1 + mt_test_below(&rng, 40);
        if (target > SVALUES)
            target = SVALUES;
        MT_CHECK_OK(mt_timeline_wait(st->tl, target, -1));
        MT_CHECK(mt_timeline_completed(st->tl) >= target);
        MT_CHECK_UINT_EQ(data[target], target * 3);
        st->checked++;
    }
    return NULL;
}

static void stress_run(uint64_t seed)
{
    mt_timeline *tl;
    MT_CHECK_OK(mt_timeline_create(NULL, &tl));
    stress st[SWAITERS + 1];
    pthread_t t[SWAITERS + 1];
    for (int i = 0; i <= SWAITERS; i++) {
        st[i] = (stress){tl, seed + (uint64_t)i * 7919, 0};
        MT_CHECK_INT_EQ(pthread_create(&t[i], NULL, i ? stress_waiter : signaller, &st[i]), 0);
    }
    for (int i = 0; i <= SWAITERS; i++)
        pthread_join(t[i], NULL);
    for (int i = 1; i <= SWAITERS; i++)
        MT_CHECK(st[i].checked > 0);
    MT_CHECK_UINT_EQ(mt_timeline_completed(tl), SVALUES);
    mt_timeline_destroy(tl);
}

int main(int argc, char **argv)
{
    uint64_t seed = mt_test_seed(argc, argv);
    basics();
    cancel();
    loss();
    stress_run(seed);
    puts("timeline wait: ok");
    return 0;
}
