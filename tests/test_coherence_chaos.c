/* coherence under device faults while commands are in flight, from several
 * application threads: test_coherence_faults loses and stalls devices at
 * chosen points and test_coherence_random between commands; here they
 * happen whenever they happen.
 *
 * Devices: host memory, sim1 (slow now and then, never lost: the reference),
 * sim2 (lost at a random command number), sim3 (lost by another thread at a
 * random time), sim4 (stalls at a random command until that thread unstalls
 * it, small: evictions).
 * Three workers, two of them on one client, the third on a client of its
 * own:
 *  - group A, its own buffers used on host memory and sim1 only: every
 *    command must succeed and see exactly what the worker's reference copy
 *    holds, whatever happens to the other devices;
 *  - group B, buffers shared by everyone on every device, some commands
 *    failing on purpose, some left in flight, buffers freed and replaced
 *    under the others, maps: any result the API documents for that
 *    (MT_EDEVLOST, MT_ELOSTDATA, MT_ENOBUF, MT_EDEVMEM, MT_EMAPPED, -EBUSY,
 *    the failing function's -EPROTO) but nothing else, no hang, no crash.
 * The application orders its accesses to each shared buffer with events,
 * as OpenCL asks, so the memory is never touched by two at once unless the
 * library gets it wrong (TSan watches).
 * At the end: every lost device holds no instance and no memory, every
 * group B buffer rewritten whole on sim1 reads back exactly, and the
 * context shuts down with commands still in flight. Run under ASan and TSan
 * with the rest. */
#include <pthread.h>
#include <stdio.h>
#include <unistd.h>

#include "coh_util.h"
#include "memtrack/base.h"
#include "mt_test.h"

#define NT 3
#define NA 4
#define NB 12
#define ASZ 16384
#define BSZ 8192

static mt_coh *c;
static mt_coh_client *cl[2];
static uint32_t hd, s1, s2, s3, s4;
static _Atomic mt_coh_buf hb[NB];

static int allowed(int rc)
{
    return rc == 0 || rc == MT_EDEVLOST || rc == MT_ELOSTDATA || rc == MT_ENOBUF ||
           rc == -EPROTO || rc == MT_EDEVMEM || rc == MT_EMAPPED || rc == -EBUSY;
}

#define CHECK_ALLOWED(what, rc)                                                                   \
    do {                                                                                          \
        int rc_ = (rc);                                                                           \
        if (!allowed(rc_)) {                                                                      \
            fprintf(stderr, "%s: unexpected %d (%s)\n", what, rc_, mt_strerror(rc_));             \
            MT_CHECK(0);                                                                          \
        }                                                                                         \
    } while (0)

/* The application orders every access to a shared buffer after all earlier
 * ones still listed (events of commands, maps and unmaps): direct waits
 * only, since a command whose wait failed completes at once and orders
 * nothing behind it. So any data race TSan sees is the library's. */
#define NEV 24
typedef struct slot_events {
    mt_coh_event *ev[NEV];
    int n;
} slot_events;
static slot_events se[NB];
static pthread_mutex_t se_lock = PTHREAD_MUTEX_INITIALIZER;

/* Under se_lock: the events an access to slot i waits for (appended to
 * deps); a full list is waited for first. */
static void slot_deps(int i, mt_coh_event **deps, uint32_t *nd)
{
    slot_events *e = &se[i];
    if (e->n == NEV) {
        for (int k = 0; k < e->n; k++) {
            CHECK_ALLOWED("slot wait", mt_coh_event_wait(e->ev[k], -1));
            mt_coh_event_release(e->ev[k]);
        }
        e->n = 0;
    }
    for (int k = 0; k < e->n; k++)
        deps[(*nd)++] = e->ev[k];
}

static void slot_add(int i, mt_coh_event *ev)
{
    slot_events *e = &se[i];
    if (e->n == NEV) { /* several arguments on one slot filled it */
        for (int k = 0; k < e->n; k++) {
            CHECK_ALLOWED("slot wait", mt_coh_event_wait(e->ev[k], -1));
            mt_coh_event_release(e->ev[k]);
        }
        e->n = 0;
    }
    mt_coh_event_retain(ev);
    e->ev[e->n++] = ev;
}
static _Atomic int n_ok, n_failed, n_refused;
static _Atomic int refused_by[4]; /* MT_ENOBUF, MT_ELOSTDATA, MT_EDEVLOST, other */
static uint64_t seed;
static int ops = 1000;

typedef struct worker {
    int id;
    uint64_t rng;
    mt_coh_queue *q[5]; /* host, sim1..sim4 */
    mt_coh_buf a[NA];
    uint8_t ref[NA][ASZ];
    tk_cmd *inflight[1024]; /* commands left running: freed once the context is gone */
    int ninflight;
} worker;

static uint64_t below(worker *w, uint64_t n)
{
    return mt_test_below(&w->rng, n);
}

/* Group A: exact, on host memory or sim1. */
static void exact_op(worker *w)
{
    int i = (int)below(w, NA);
    uint64_t off = below(w, ASZ), size = 1 + below(w, ASZ - off);
    uint32_t acc = 1 + (uint32_t)below(w, 3);
    tk_cmd k = {.nargs = 1, .access = {acc}, .pattern = {mt_test_rand(&w->rng)}};
    mt_coh_arg a = {.buf = w->a[i], .offset = off, .size = size, .access = acc};
    mt_coh_command cmd = {.fn = tk_run, .user = &k, .args = &a, .nargs = 1};
    mt_coh_event *ev;
    MT_CHECK_OK(mt_coh_enqueue(w->q[below(w, 2)], &cmd, &ev));
    MT_CHECK_OK(mt_coh_event_wait(ev, -1));
    mt_coh_event_release(ev);
    if (acc & MT_COH_READ)
        MT_CHECK_UINT_EQ(k.seen[0], tk_hash(w->ref[i] + off, size));
    if (acc & MT_COH_WRITE)
        tk_fill(w->ref[i] + off, size, k.pattern[0]);
    atomic_fetch_add(&n_ok, 1);
}

/* Group B: anything documented. */
static void chaos_op(worker *w)
{
    uint32_t n = 1 + (uint32_t)below(w, 3);
    mt_coh_arg args[3];
    int slot[3];
    mt_coh_event *deps[3 * NEV];
    uint32_t nd = 0;
    tk_cmd *k = calloc(1, sizeof *k);
    MT_CHECK(k != NULL);
    k->nargs = n;
    MT_CHECK(pthread_mutex_lock(&se_lock) == 0);
    for (uint32_t j = 0; j < n; j++) {
        uint64_t off = below(w, BSZ), size = 1 + below(w, BSZ - off);
        uint32_t acc = 1 + (uint32_t)below(w, 3);
        if (below(w, 4) == 0) { /* overwritten whole: lost content comes back */
            off = 0;
            size = BSZ;
            acc = MT_COH_WRITE;
        }
        slot[j] = (int)below(w, NB);
        args[j] = (mt_coh_arg){.buf = atomic_load(&hb[slot[j]]), .offset = off,
                               .size = size, .access = acc};
        k->access[j] = acc;
        k->pattern[j] = mt_test_rand(&w->rng);
    }
    if (below(w, 10) == 0)
        k->fail = -EPROTO;
    for (uint32_t j = 0; j < n; j++) {
        int dup = 0;
        for (uint32_t m = 0; m < j; m++)
            dup |= slot[m] == slot[j];
        if (!dup)
            slot_deps(slot[j], deps, &nd);
    }
    mt_coh_command cmd = {.fn = tk_run, .user = k, .args = args, .nargs = n, .wait = deps,
                          .nwait = nd};
    mt_coh_event *ev;
    int rc = mt_coh_enqueue(w->q[below(w, 5)], &cmd, &ev);
    CHECK_ALLOWED("enqueue", rc);
    for (uint32_t j = 0; j < n && !rc; j++) {
        int dup = 0;
        for (uint32_t m = 0; m < j; m++)
            dup |= slot[m] == slot[j];
        if (!dup)
            slot_add(slot[j], ev);
    }
    MT_CHECK(pthread_mutex_unlock(&se_lock) == 0);
    if (rc) {
        atomic_fetch_add(&n_refused, 1);
        atomic_fetch_add(&refused_by[rc == MT_ENOBUF ? 0 : rc == MT_ELOSTDATA ? 1 : rc == MT_EDEVLOST ? 2 : 3], 1);
        free(k);
        return;
    }
    if (below(w, 2) || w->ninflight == 1024) {
        rc = mt_coh_event_wait(ev, -1);
        CHECK_ALLOWED("wait", rc);
        atomic_fetch_add(rc ? &n_failed : &n_ok, 1);
        free(k);
    } else {
        w->inflight[w->ninflight++] = k;
    }
    mt_coh_event_release(ev);
}

static void map_op(worker *w)
{
    uint32_t acc = 1 + (uint32_t)below(w, 3);
    int i = (int)below(w, NB);
    mt_coh_event *deps[NEV];
    uint32_t nd = 0;
    MT_CHECK(pthread_mutex_lock(&se_lock) == 0);
    mt_coh_arg t = {.buf = atomic_load(&hb[i]), .offset = below(w, 4096),
                    .size = 1 + below(w, 4096), .access = acc};
    void *p;
    mt_coh_event *ev;
    slot_deps(i, deps, &nd);
    int rc = mt_coh_map(w->q[below(w, 5)], &t, deps, nd, &p, &ev);
    CHECK_ALLOWED("map", rc);
    if (!rc)
        slot_add(i, ev);
    MT_CHECK(pthread_mutex_unlock(&se_lock) == 0);
    if (rc)
        return;
    rc = mt_coh_event_wait(ev, -1);
    CHECK_ALLOWED("map wait", rc);
    mt_coh_event_release(ev);
    if (!rc && (acc & MT_COH_WRITE))
        memset(p, 0x5a, t.size);
    else if (!rc) {
        volatile uint8_t sum = 0;
        for (uint64_t b = 0; b < t.size; b++)
            sum += ((uint8_t *)p)[b];
    }
    /* Later accesses come after the unmap (the host's writes end there). */
    MT_CHECK(pthread_mutex_lock(&se_lock) == 0);
    MT_CHECK_OK(mt_coh_unmap(w->q[0], p, &ev));
    slot_add(i, ev);
    mt_coh_event_release(ev);
    MT_CHECK(pthread_mutex_unlock(&se_lock) == 0);
}

/* Frees a shared buffer and puts a new one in its place (client 0's), while
 * the others may be using the old handle (then MT_ENOBUF). */
static void replace_op(worker *w)
{
    int i = (int)below(w, NB);
    mt_coh_buf old = atomic_load(&hb[i]), nb;
    MT_CHECK_OK(mt_coh_buffer_create(cl[0], BSZ, NULL, &nb));
    if (atomic_compare_exchange_strong(&hb[i], &old, nb))
        MT_CHECK_OK(mt_coh_buffer_free(cl[0], old));
    else
        MT_CHECK_OK(mt_coh_buffer_free(cl[0], nb));
}

static void *work(void *arg)
{
    worker *w = arg;
    mt_coh_client *my = cl[w->id == NT - 1];
    uint32_t devs[5] = {hd, s1, s2, s3, s4};
    for (int i = 0; i < 5; i++) {
        int rc = mt_coh_queue_create(my, devs[i], &w->q[i]);
        if (rc == MT_EDEVLOST) /* lost before we got here: its queue is refused */
            MT_CHECK_OK(mt_coh_queue_create(my, hd, &w->q[i]));
        else
            MT_CHECK_OK(rc);
    }
    for (int i = 0; i < NA; i++)
        MT_CHECK_OK(mt_coh_buffer_create(my, ASZ, NULL, &w->a[i]));
    for (int op = 0; op < ops; op++) {
        uint64_t x = below(w, 100);
        if (x < 40)
            exact_op(w);
        else if (x < 85)
            chaos_op(w);
        else if (x < 92)
            map_op(w);
        else if (x < 96 && my == cl[0])
            replace_op(w);
        else
            for (int i = 0; i < 5; i++)
                CHECK_ALLOWED("finish", mt_coh_finish(w->q[i]));
    }
    for (int i = 0; i < NA; i++) {
        mt_coh_arg t = {.buf = w->a[i], .size = ASZ, .access = MT_COH_READ};
        void *p;
        mt_coh_event *ev;
        MT_CHECK_OK(mt_coh_map(w->q[0], &t, NULL, 0, &p, &ev));
        MT_CHECK_OK(mt_coh_event_wait(ev, -1));
        mt_coh_event_release(ev);
        MT_CHECK_MEM_EQ(p, w->ref[i], ASZ);
        MT_CHECK_OK(mt_coh_unmap(w->q[0], p, NULL));
    }
    return NULL;
}

/* Loses sim3 at a random time and releases sim4's stall whenever it comes,
 * until the workers are done. */
static _Atomic int workers_done;

static void *faults(void *arg)
{
    uint64_t *rng = arg;
    uint64_t lose_in = 5000 + mt_test_below(rng, 60000);
    for (uint64_t t = 0; !atomic_load(&workers_done); t += 2000) {
        if (t >= lose_in && t < lose_in + 2000)
            mt_sim_lose(mt_coh_device_sim(c, s3));
        usleep(2000);
        mt_sim_unstall(mt_coh_device_sim(c, s4));
    }
    return NULL;
}

int main(int argc, char **argv)
{
    seed = mt_test_seed(argc, argv);
    for (int i = 1; i + 1 < argc; i++)
        if (strcmp(argv[i], "--ops") == 0)
            ops = atoi(argv[i + 1]);
    uint64_t rng = seed;
    MT_CHECK_OK(mt_coh_create(NULL, &c));
    MT_CHECK_OK(mt_coh_add_host_device(c, 1u << 20, &hd));
    mt_sim_opts o1 = {.mem_size = 512u << 10, .faults = {.delay_every = 3, .delay_ns = 20000}};
    mt_sim_opts o2 = {.mem_size = 96u << 10, .faults = {.lose_at = 3 + mt_test_below(&rng, 15)}};
    mt_sim_opts o3 = {.mem_size = 96u << 10};
    mt_sim_opts o4 = {.mem_size = 48u << 10, .faults = {.stall_at = 5 + mt_test_below(&rng, 60)}};
    MT_CHECK_OK(mt_coh_add_sim_device(c, &o1, &s1));
    MT_CHECK_OK(mt_coh_add_sim_device(c, &o2, &s2));
    MT_CHECK_OK(mt_coh_add_sim_device(c, &o3, &s3));
    MT_CHECK_OK(mt_coh_add_sim_device(c, &o4, &s4));
    MT_CHECK_OK(mt_coh_client_create(c, &cl[0]));
    MT_CHECK_OK(mt_coh_client_create(c, &cl[1]));
    for (int i = 0; i < NB; i++) {
        mt_coh_buf b;
        MT_CHECK_OK(mt_coh_buffer_create(cl[0], BSZ, NULL, &b));
        atomic_store(&hb[i], b);
    }
    worker *w = calloc(NT, sizeof *w);
    MT_CHECK(w != NULL);
    pthread_t th[NT], ft;
    for (int t = 0; t < NT; t++) {
        w[t].id = t;
        w[t].rng = seed + 1 + (uint64_t)t * 0x9e3779b97f4a7c15ull;
        MT_CHECK(pthread_create(&th[t], NULL, work, &w[t]) == 0);
    }
    MT_CHECK(pthread_create(&ft, NULL, faults, &rng) == 0);
    for (int t = 0; t < NT; t++)
        MT_CHECK(pthread_join(th[t], NULL) == 0);
    atomic_store(&workers_done, 1);
    MT_CHECK(pthread_join(ft, NULL) == 0);
    mt_sim_lose(mt_coh_device_sim(c, s3)); /* if the workers were done first */

    /* sim3 is lost: the first command there finds out, if none did. */
    mt_coh_queue *q3, *q1;
    int rc = mt_coh_queue_create(cl[0], s3, &q3);
    if (rc == 0) {
        tk_cmd k = {0};
        mt_coh_command cmd = {.fn = tk_run, .user = &k};
        mt_coh_event *ev;
        rc = mt_coh_enqueue(q3, &cmd, &ev);
        if (rc == 0) {
            MT_CHECK_ERR(mt_coh_event_wait(ev, -1), MT_EDEVLOST);
            mt_coh_event_release(ev);
        } else
            MT_CHECK_ERR(rc, MT_EDEVLOST);
    } else
        MT_CHECK_ERR(rc, MT_EDEVLOST);
    uint32_t lost[2] = {s2, s3};
    int nlost = 0;
    for (int i = 0; i < 2; i++) {
        mt_coh_device_info di;
        MT_CHECK_OK(mt_coh_device_info_get(c, lost[i], &di));
        if (di.lost != MT_EDEVLOST) {
            MT_CHECK(i == 0); /* sim2 may not have reached its command number */
            continue;
        }
        nlost++;
        MT_CHECK_UINT_EQ(di.instances, 0);
        MT_CHECK_UINT_EQ(di.mem_used, 0);
    }
    /* What is still in flight on the shared buffers ends (or fails). */
    for (int i = 0; i < NB; i++) {
        for (int k = 0; k < se[i].n; k++) {
            CHECK_ALLOWED("final wait", mt_coh_event_wait(se[i].ev[k], -1));
            mt_coh_event_release(se[i].ev[k]);
        }
        se[i].n = 0;
    }
    /* Every shared buffer can be given content again and reads it back. */
    MT_CHECK_OK(mt_coh_queue_create(cl[0], s1, &q1));
    for (int i = 0; i < NB; i++) {
        tk_cmd k = {.nargs = 1, .access = {MT_COH_WRITE}, .pattern = {0x0123456789abcdefull + (uint64_t)i}};
        mt_coh_arg a = {.buf = atomic_load(&hb[i]), .size = BSZ, .access = MT_COH_WRITE};
        mt_coh_command cmd = {.fn = tk_run, .user = &k, .args = &a, .nargs = 1};
        mt_coh_event *ev;
        MT_CHECK_OK(mt_coh_enqueue(q1, &cmd, &ev));
        MT_CHECK_OK(mt_coh_event_wait(ev, -1));
        mt_coh_event_release(ev);
        a.access = MT_COH_READ;
        void *p;
        MT_CHECK_OK(mt_coh_map(q1, &a, NULL, 0, &p, &ev));
        MT_CHECK_OK(mt_coh_event_wait(ev, -1));
        mt_coh_event_release(ev);
        uint8_t want[BSZ];
        tk_fill(want, BSZ, k.pattern[0]);
        MT_CHECK_MEM_EQ(p, want, BSZ);
        MT_CHECK_OK(mt_coh_unmap(q1, p, NULL));
    }
    printf("chaos (seed %llu): %d commands succeeded, %d failed, %d refused (%d MT_ENOBUF, %d "
           "MT_ELOSTDATA, %d MT_EDEVLOST, %d other); %d devices lost\n",
           (unsigned long long)seed, atomic_load(&n_ok), atomic_load(&n_failed),
           atomic_load(&n_refused), atomic_load(&refused_by[0]), atomic_load(&refused_by[1]),
           atomic_load(&refused_by[2]), atomic_load(&refused_by[3]), nlost);
    /* Shut down with commands still in flight. */
    mt_coh_destroy(c);
    for (int t = 0; t < NT; t++)
        for (int i = 0; i < w[t].ninflight; i++)
            free(w[t].inflight[i]);
    free(w);
    puts("chaos: ok");
    return 0;
}
