/* track: randomised multi-threaded stress, both backends.
 *
 * The check is the one a tracer depends on: a shadow copy, updated ONLY from
 * the runs collect reports, must equal the live memory once the writers
 * stop. A single lost write (a page written after its bit was taken but
 * re-armed without being reported, a fault recorded on the wrong range, ...)
 * leaves a byte of the shadow stale and fails the test. Reported pages must
 * also be pages that were really written (precision), page-granular.
 *
 * Writers write random bytes at random offsets of a region that holds
 * unaligned ranges with untracked gaps and pages shared between ranges; a
 * collector thread collects and copies concurrently. In churn mode another
 * thread removes and re-adds some ranges while they are being written.
 * The last runs track with MT_RANGE_HOT_PAGES, and with a small fault
 * budget (whole ranges opened in the signal handler while the collector
 * re-arms them).
 *
 * Usage: test_track_stress [--seed N] */
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>

#include "track_util.h"

#define NPAGES 384
#define MAXR 24
/* Sanitizer builds run the same races on a smaller budget (TSan makes every
 * access and every fault many times dearer). */
#ifdef MT_SANITIZER_BUILD
#define MIN_COLLECTS 50
#define WRITES_PER_THREAD 2000
#else
#define MIN_COLLECTS 1500
#define WRITES_PER_THREAD 60000
#endif

typedef struct range_def {
    size_t off, len; /* within the region */
    int churn;       /* removed and re-added during the run */
    _Atomic mt_range_id id;
} range_def;

typedef struct ctx {
    mt_tracker *t;
    unsigned char *live, *shadow;
    size_t ps, bytes;
    range_def r[MAXR];
    int nr;
    _Atomic unsigned char *ever_written; /* per page */
    _Atomic unsigned char *reported;     /* per page */
    _Atomic int writers_left;
    _Atomic int stop_churn;
    _Atomic long collects;
    pthread_mutex_t map_lock; /* id -> range, for the collector */
    int nthreads;
    long writes_per_thread;
    uint64_t seed;
    uint32_t range_flags; /* MT_RANGE_HOT_PAGES in the hot runs */
    uint32_t fault_budget; /* mt_range_opts.fault_budget in the budget runs */
} ctx;

typedef struct wargs {
    ctx *c;
    int index;
} wargs;

static void *writer(void *arg)
{
    wargs *w = arg;
    ctx *c = w->c;
    uint64_t rng = c->seed * 31 + (uint64_t)w->index + 1;
    /* At least writes_per_thread writes, and on until the collector has run
     * MIN_COLLECTS times, so that both backends see many re-arms. */
    for (long i = 0; i < c->writes_per_thread || atomic_load(&c->collects) < MIN_COLLECTS; i++) {
        size_t off;
        if (mt_test_below(&rng, 4) == 0) {
            /* a burst in one page, to have pages written many times */
            off = (size_t)mt_test_below(&rng, 8) * c->ps + (size_t)mt_test_below(&rng, c->ps);
        } else {
            off = (size_t)mt_test_below(&rng, c->bytes);
        }
        /* Reference first: a page is "ever written" before its write can be
         * reported, so reported-but-never-written means imprecision. */
        atomic_store_explicit(&c->ever_written[off / c->ps], 1, memory_order_relaxed);
        __atomic_store_n(&c->live[off], (unsigned char)mt_test_rand(&rng), __ATOMIC_RELAXED);
        /* Let the collector in often (2 cores, more threads than that):
         * the interesting races are writes against re-arming. */
        if (i % 512 == 511)
            sched_yield();
    }
    atomic_fetch_sub(&c->writers_left, 1);
    return NULL;
}

/* Copies live -> shadow for the runs reported, byte by byte with relaxed
 * atomics: the writers race with us by design (as the app races with a
 * tracer), and TSan must not mistake it for a bug in the tracker. */
static void apply_runs(ctx *c, const mt_dirty_run *runs, long n)
{
    pthread_mutex_lock(&c->map_lock);
    for (long i = 0; i < n; i++) {
        int k;
        for (k = 0; k < c->nr; k++)
            if (atomic_load(&c->r[k].id) == runs[i].range)
                break;
        if (k == c->nr)
            continue; /* removed meanwhile: re-baselined when re-added */
        size_t a = c->r[k].off + runs[i].offset, b = a + runs[i].length;
        MT_CHECK(runs[i].offset + runs[i].length <= c->r[k].len);
        for (size_t x = a; x < b; x++)
            c->shadow[x] = __atomic_load_n(&c->live[x], __ATOMIC_RELAXED);
        for (size_t p = a / c->ps; p <= (b - 1) / c->ps; p++)
            atomic_store_explicit(&c->reported[p], 1, memory_order_relaxed);
    }
    pthread_mutex_unlock(&c->map_lock);
}

/* One sweep: calls until one returns fewer runs than the array holds (with
 * hot pages, a sweep is a pass: it must end before the next one begins, or
 * what hot pages took since its first call waits for the pass after it). */
static void collect_everything(ctx *c)
{
    mt_dirty_run runs[32]; /* small on purpose: exercises partial collects */
    long n;
    do {
        n = mt_tracker_collect_all(c->t, runs, 32);
        MT_CHECK_OK(n);
        apply_runs(c, runs, n);
        /* Each call counts: writers that dirty 32 new runs between two
         * calls (hot pages make them fast: no faults) would otherwise keep
         * the sweep going, and the writers, waiting for MIN_COLLECTS, with it. */
        atomic_fetch_add(&c->collects, 1);
    } while (n == 32);
}

static void *collector(void *arg)
{
    ctx *c = arg;
    while (atomic_load(&c->writers_left) > 0) {
        collect_everything(c);
        /* Hot runs: several writes per pass, so that the burst pages are
         * written in consecutive passes and turn hot. */
        if (c->range_flags)
            usleep(50);
    }
    return NULL;
}

static void add_range(ctx *c, int k, mt_track_backend b)
{
    mt_range_opts o = {.backend = b, .flags = c->range_flags, .fault_budget = c->fault_budget};
    mt_range_id id;
    MT_CHECK_OK(mt_tracker_add(c->t, c->live + c->r[k].off, c->r[k].len, &o, &id));
    /* Baseline after add (the documented order): writes from now on are
     * reported, writes before are in the copy. */
    pthread_mutex_lock(&c->map_lock);
    for (size_t x = c->r[k].off; x < c->r[k].off + c->r[k].len; x++)
        c->shadow[x] = __atomic_load_n(&c->live[x], __ATOMIC_RELAXED);
    atomic_store(&c->r[k].id, id);
    pthread_mutex_unlock(&c->map_lock);
}

typedef struct churn_args {
    ctx *c;
    mt_track_backend b;
} churn_args;

static void *churner(void *arg)
{
    churn_args *ca = arg;
    ctx *c = ca->c;
    uint64_t rng = c->seed ^ 0xc0ffee;
    long cycles = 0;
    while (!atomic_load(&c->stop_churn)) {
        for (int k = 0; k < c->nr; k++) {
            if (!c->r[k].churn || mt_test_below(&rng, 2))
                continue;
            pthread_mutex_lock(&c->map_lock);
            mt_range_id id = atomic_exchange(&c->r[k].id, 0);
            pthread_mutex_unlock(&c->map_lock);
            MT_CHECK_OK(mt_tracker_remove(c->t, id));
            add_range(c, k, ca->b);
            cycles++;
        }
    }
    printf("    churn: %ld remove/add cycles while writing\n", cycles);
    return NULL;
}

/* Random layout: ranges with unaligned ends, some touching (sharing a page),
 * some separated by untracked gaps inside a page. */
static void make_layout(ctx *c, uint64_t *rng, int churn)
{
    size_t pos = (size_t)mt_test_below(rng, 200);
    c->nr = 0;
    while (c->nr < MAXR && pos < c->bytes - 64) {
        size_t len = 1 + (size_t)mt_test_below(rng, 40 * c->ps);
        if (pos + len > c->bytes)
            len = c->bytes - pos;
        range_def *d = &c->r[c->nr++];
        d->off = pos;
        d->len = len;
        d->churn = churn && mt_test_below(rng, 3) == 0;
        atomic_store(&d->id, 0);
        pos += len;
        if (mt_test_below(rng, 2))
            pos += (size_t)mt_test_below(rng, 3 * c->ps / 2); /* gap, often within a page */
    }
}

static void run_one(mt_track_backend b, int nthreads, int churn, uint64_t seed, uint32_t flags,
                    uint32_t budget)
{
    ctx c;
    memset(&c, 0, sizeof c);
    c.ps = tu_page();
    c.bytes = NPAGES * c.ps;
    c.live = tu_map(c.bytes);
    c.shadow = calloc(c.bytes, 1);
    c.ever_written = calloc(NPAGES, 1);
    c.reported = calloc(NPAGES, 1);
    c.nthreads = nthreads;
    c.writes_per_thread = WRITES_PER_THREAD;
    c.seed = seed;
    c.range_flags = flags;
    c.fault_budget = budget;
    pthread_mutex_init(&c.map_lock, NULL);
    uint64_t rng = seed;
    make_layout(&c, &rng, churn);
    mt_tracker_opts o = {.backend = b};
    MT_CHECK_OK(mt_tracker_create(&o, &c.t));
    for (int k = 0; k < c.nr; k++)
        add_range(&c, k, b);

    atomic_store(&c.writers_left, nthreads);
    pthread_t th[8], col, ch;
    wargs wa[8];
    churn_args ca = {&c, b};
    pthread_create(&col, NULL, collector, &c);
    if (churn)
        pthread_create(&ch, NULL, churner, &ca);
    for (int i = 0; i < nthreads; i++) {
        wa[i] = (wargs){&c, i};
        pthread_create(&th[i], NULL, writer, &wa[i]);
    }
    for (int i = 0; i < nthreads; i++)
        pthread_join(th[i], NULL);
    pthread_join(col, NULL);
    if (churn) {
        atomic_store(&c.stop_churn, 1);
        pthread_join(ch, NULL);
    }
    collect_everything(&c); /* writers are done: this must catch up fully */

    size_t checked = 0;
    for (int k = 0; k < c.nr; k++) {
        MT_CHECK_INT_EQ(mt_tracker_backend(c.t, atomic_load(&c.r[k].id)), b);
        for (size_t x = c.r[k].off; x < c.r[k].off + c.r[k].len; x++) {
            if (c.shadow[x] != c.live[x]) {
                fprintf(stderr, "lost write: range %d [%zu,+%zu) byte %zu (page %zu)\n", k,
                        c.r[k].off, c.r[k].len, x, x / c.ps);
                MT_CHECK(c.shadow[x] == c.live[x]);
            }
            checked++;
        }
    }
    size_t reported = 0, written = 0;
    for (size_t p = 0; p < NPAGES; p++) {
        /* (An opened range reports its unwritten pages too.) */
        if (c.reported[p] && !c.ever_written[p] && !budget) {
            fprintf(stderr, "page %zu reported but never written\n", p);
            MT_CHECK(0);
        }
        reported += c.reported[p];
        written += c.ever_written[p];
    }
    size_t hot = 0;
    uint64_t opens = 0;
    for (int k = 0; k < c.nr; k++) {
        mt_range_stats st;
        MT_CHECK_OK(mt_tracker_stats(c.t, atomic_load(&c.r[k].id), &st));
        hot += st.hot_pages;
        opens += st.budget_opens;
    }
    /* How many pages are hot depends on how writers and collector
     * interleave (a loaded machine can starve the writers between passes):
     * printed, not asserted; test_track_hot checks heat exactly. */
    mt_dirty_run runs[4];
    if (!flags) /* hot pages are reported by every pass, written or not */
        MT_CHECK_INT_EQ(mt_tracker_collect_all(c.t, runs, 4), 0);
    printf("  %-6s%s%s threads=%d churn=%d ranges=%d collects=%ld: %zu bytes exact, %zu/%zu written "
           "pages reported, %zu hot at the end, %llu budget opens\n",
           mt_track_backend_name(b), flags ? " hot" : "", budget ? " budget" : "", nthreads, churn, c.nr,
           atomic_load(&c.collects), checked, reported, written, hot, (unsigned long long)opens);
    mt_tracker_destroy(c.t);
    munmap(c.live, c.bytes);
    free(c.shadow);
    free((void *)c.ever_written);
    free((void *)c.reported);
    pthread_mutex_destroy(&c.map_lock);
}

int main(int argc, char **argv)
{
    uint64_t seed = mt_test_seed(argc, argv);
    mt_track_backend be[2];
    int nb = tu_backends(be);
    for (int i = 0; i < nb; i++) {
        run_one(be[i], 1, 0, seed, 0, 0);
        run_one(be[i], 4, 0, seed + 1, 0, 0);
        run_one(be[i], 3, 1, seed + 2, 0, 0);
        /* Hot pages: pages left writable across passes lose nothing. */
        run_one(be[i], 4, 0, seed + 3, MT_RANGE_HOT_PAGES, 0);
        run_one(be[i], 3, 1, seed + 4, MT_RANGE_HOT_PAGES, 0);
        /* Fault budgets: ranges opened whole by the handler while the
         * collector re-arms them lose nothing (uffd ignores the budget). */
        run_one(be[i], 4, 0, seed + 5, 0, 4);
        run_one(be[i], 3, 1, seed + 6, MT_RANGE_HOT_PAGES, 4);
    }
    puts("track stress: ok");
    return 0;
}
