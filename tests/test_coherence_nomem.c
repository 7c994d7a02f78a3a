/* coherence: an allocation that fails inside mt_coh_enqueue or mt_coh_map
 * loses nothing.
 *
 * Host allocations fail on demand (nomem_util.h): before an enqueue or a
 * map the test makes the k-th allocation of its own thread (the planner's:
 * engine threads are never failed) fail with ENOMEM. Whatever k hits (validation, the
 * instances, the pooled commands, a migration's segments, a dependency
 * list, a fixup, the map record), the call either succeeds or returns
 * -ENOMEM, and:
 *  - a call that failed ran nothing of its own: the command's function
 *    never runs, a map gives no pointer, an unmap leaves the map (and a
 *    second unmap ends it);
 *  - every command that succeeded saw exactly the latest content (the hash
 *    of what it read against the model), and its writes landed;
 *  - after every step, every buffer still reads back whole and equal to the
 *    model (no byte lost: no MT_ELOSTDATA, no stale byte), through a map
 *    made with nothing armed.
 * Buffer and sub-buffer creation fail the same way until they succeed. A
 * buffer freed while a command reading it still runs, with no memory to
 * defer the release, keeps its device memory until the command is done.
 * Host, host-memory and simulated devices, 1-3 arguments of random ranges
 * and accesses, sub-buffers, reading and writing maps.
 * Usage: test_coherence_nomem [--seed N] [--steps N]. */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "coh_util.h"
#include "memtrack/coherence.h"
#include "mt_test.h"
#include "nomem_util.h"

/* ---- the program and its model -------------------------------------------------------- */

enum { NDEV = 4, NBUF = 4, BUFSZ = 64 << 10, NSUB = 2 };

static mt_coh *c;
static mt_coh_client *cl;
static mt_coh_queue *q[NDEV + 1]; /* by device id (1..NDEV) */
static mt_coh_buf buf[NBUF];
static mt_coh_buf sub[NBUF][NSUB]; /* two sub-buffers of each: [0, half), [quarter, end) */
static uint64_t sub_off[NSUB] = {0, BUFSZ / 4};
static uint64_t sub_size[NSUB] = {BUFSZ / 2, BUFSZ - BUFSZ / 4};
static uint8_t model[NBUF][BUFSZ];
static uint64_t rng;
static unsigned n_fired, n_ok_fired, n_enomem, n_devmem, n_maps_failed, n_unmaps_failed,
    n_creates_failed, n_free_fired, n_steps;

static void check_all(const char *when)
{
    for (int b = 0; b < NBUF; b++) {
        mt_coh_arg a = {.buf = buf[b], .size = BUFSZ, .access = MT_COH_READ};
        void *p;
        mt_coh_event *ev;
        int rc = mt_coh_map(q[1], &a, NULL, 0, &p, &ev);
        if (rc) {
            fprintf(stderr, "step %u (%s): buffer %d no longer maps: %s\n", n_steps, when, b,
                    mt_strerror(rc));
            MT_CHECK(0);
        }
        MT_CHECK_OK(mt_coh_event_wait(ev, -1));
        mt_coh_event_release(ev);
        if (memcmp(p, model[b], BUFSZ) != 0) {
            size_t i = 0;
            while (((uint8_t *)p)[i] == model[b][i])
                i++;
            fprintf(stderr, "step %u (%s): buffer %d differs from the model at byte %zu\n", n_steps,
                    when, b, i);
            MT_CHECK(0);
        }
        MT_CHECK_OK(mt_coh_unmap(q[1], p, NULL));
    }
}

/* A random argument: a whole buffer or a sub-buffer, a random range of it. */
static void pick(mt_coh_arg *a, int *root, uint64_t *root_off, int taken[NBUF])
{
    int b;
    do
        b = (int)mt_test_below(&rng, NBUF);
    while (taken[b]);
    taken[b] = 1;
    *root = b;
    int s = (int)mt_test_below(&rng, NSUB + 1) - 1; /* -1: the buffer itself */
    uint64_t base = s < 0 ? 0 : sub_off[s], size = s < 0 ? BUFSZ : sub_size[s];
    uint64_t off = mt_test_below(&rng, size), len = 1 + mt_test_below(&rng, size - off);
    if (mt_test_below(&rng, 2)) { /* page-aligned half the time */
        off &= ~(uint64_t)4095;
        len = ((len + 4095) & ~(uint64_t)4095);
        if (off + len > size)
            len = size - off;
    }
    *a = (mt_coh_arg){.buf = s < 0 ? buf[b] : sub[b][s], .offset = off, .size = len};
    *root_off = base + off;
}

static void step_enqueue(void)
{
    mt_coh_arg a[3];
    int root[3], taken[NBUF] = {0};
    uint64_t roff[3];
    tk_cmd k = {.nargs = 1 + (uint32_t)mt_test_below(&rng, 3)};
    for (uint32_t i = 0; i < k.nargs; i++) {
        pick(&a[i], &root[i], &roff[i], taken);
        uint32_t r = (uint32_t)mt_test_below(&rng, 3);
        a[i].access = r == 0 ? MT_COH_READ : r == 1 ? MT_COH_WRITE : MT_COH_RW;
        k.access[i] = a[i].access;
        k.pattern[i] = mt_test_rand(&rng);
    }
    uint32_t dev = (uint32_t)mt_test_below(&rng, NDEV) + 1;
    mt_coh_command cmd = {.fn = tk_run, .user = &k, .args = a, .nargs = k.nargs};
    mt_coh_event *ev = NULL;
    int armed = mt_test_below(&rng, 5) != 0; /* most steps fail an allocation */
    nomem_arm(armed ? 1 + (long)mt_test_below(&rng, 4) : 0, 0);
    int rc = mt_coh_enqueue(q[dev], &cmd, &ev);
    int fired = nomem_disarm();
    n_fired += (unsigned)fired;
    if (rc) {
        /* MT_EDEVMEM: no room on the device even after eviction (what is
         * there is valid nowhere else); refused before anything changed. */
        if (rc != MT_EDEVMEM && (rc != -ENOMEM || !fired)) {
            fprintf(stderr, "step %u: enqueue failed with %s (%s)\n", n_steps, mt_strerror(rc),
                    fired ? "an allocation had failed" : "no allocation failed");
            MT_CHECK(0);
        }
        n_enomem += rc == -ENOMEM;
        n_devmem += rc == MT_EDEVMEM;
        MT_CHECK(ev == NULL);
        MT_CHECK_OK(mt_coh_finish(q[dev]));
        MT_CHECK(!atomic_load(&k.ran)); /* nothing of it ran */
        return;
    }
    n_ok_fired += (unsigned)fired;
    MT_CHECK_OK(mt_coh_event_wait(ev, -1));
    mt_coh_event_release(ev);
    MT_CHECK(atomic_load(&k.ran));
    for (uint32_t i = 0; i < k.nargs; i++)
        if (a[i].access & MT_COH_READ)
            MT_CHECK(k.seen[i] == tk_hash(model[root[i]] + roff[i], a[i].size));
    for (uint32_t i = 0; i < k.nargs; i++)
        if (a[i].access & MT_COH_WRITE)
            tk_fill(model[root[i]] + roff[i], a[i].size, k.pattern[i]);
}

static void step_map(void)
{
    mt_coh_arg a;
    int root, taken[NBUF] = {0};
    uint64_t roff;
    pick(&a, &root, &roff, taken);
    a.access = mt_test_below(&rng, 2) ? MT_COH_READ : MT_COH_RW;
    void *p = NULL;
    mt_coh_event *ev = NULL;
    uint32_t dev = (uint32_t)mt_test_below(&rng, NDEV) + 1;
    nomem_arm(1 + (long)mt_test_below(&rng, 4), 0);
    int rc = mt_coh_map(q[dev], &a, NULL, 0, &p, &ev);
    int fired = nomem_disarm();
    n_fired += (unsigned)fired;
    if (rc) {
        if (rc != MT_EDEVMEM && (rc != -ENOMEM || !fired)) {
            fprintf(stderr, "step %u: map failed with %s\n", n_steps, mt_strerror(rc));
            MT_CHECK(0);
        }
        n_maps_failed++;
        MT_CHECK(ev == NULL);
        return;
    }
    MT_CHECK_OK(mt_coh_event_wait(ev, -1));
    mt_coh_event_release(ev);
    MT_CHECK(memcmp(p, model[root] + roff, a.size) == 0);
    if (a.access & MT_COH_WRITE) {
        tk_fill(p, a.size, mt_test_rand(&rng));
        memcpy(model[root] + roff, p, a.size);
    }
    /* The unmap too: one that fails leaves the map as it was. (It rarely
     * allocates: its marker comes from the command pool.) */
    nomem_arm(1 + (long)mt_test_below(&rng, 2), 0);
    rc = mt_coh_unmap(q[dev], p, NULL);
    fired = nomem_disarm();
    if (rc) {
        MT_CHECK(rc == -ENOMEM && fired);
        n_unmaps_failed++;
        MT_CHECK_OK(mt_coh_unmap(q[dev], p, NULL));
    }
}

/* Writes `size` bytes of buffer b on the host (a writing map on q), filled
 * with `pattern`; `copy` (if not NULL) gets them. */
static void write_whole(mt_coh_queue *wq, mt_coh_buf b, uint64_t size, uint64_t pattern,
                        uint8_t *copy)
{
    mt_coh_arg a = {.buf = b, .size = size, .access = MT_COH_WRITE};
    void *p;
    mt_coh_event *ev;
    MT_CHECK_OK(mt_coh_map(wq, &a, NULL, 0, &p, &ev));
    MT_CHECK_OK(mt_coh_event_wait(ev, -1));
    mt_coh_event_release(ev);
    tk_fill(p, size, pattern);
    if (copy)
        memcpy(copy, p, size);
    MT_CHECK_OK(mt_coh_unmap(wq, p, NULL));
}

/* A fresh buffer (and sub-buffers) in slot b, with known content: its
 * instances are made again, on the devices the next commands use. */
static void make_buffer(int b)
{
    /* Creation runs out of memory too, until it succeeds: each failure
     * must leave nothing behind (LeakSanitizer in the sanitizer build). */
    int rc;
    long k = 1; /* the first allocation fails, then the second, ... */
    do {
        nomem_arm(k++, 0);
        rc = mt_coh_buffer_create(cl, BUFSZ, NULL, &buf[b]);
        MT_CHECK(rc == 0 || (rc == -ENOMEM && nomem_disarm()));
        n_creates_failed += rc != 0;
    } while (rc);
    nomem_disarm();
    for (int s = 0; s < NSUB; s++) {
        k = 1;
        do {
            nomem_arm(k++, 0);
            rc = mt_coh_subbuffer_create(cl, buf[b], sub_off[s], sub_size[s], 0, &sub[b][s]);
            MT_CHECK(rc == 0 || (rc == -ENOMEM && nomem_disarm()));
            n_creates_failed += rc != 0;
        } while (rc);
        nomem_disarm();
    }
    write_whole(q[1], buf[b], BUFSZ, mt_test_rand(&rng), model[b]);
}

static void free_buffer(int b)
{
    for (int s = 0; s < NSUB; s++)
        MT_CHECK_OK(mt_coh_buffer_free(cl, sub[b][s]));
    MT_CHECK_OK(mt_coh_buffer_free(cl, buf[b]));
}

/* A kernel that sleeps before it reads its argument: it is still running
 * when the test frees the buffer. */
typedef struct slow_read {
    uint64_t seen;
} slow_read;

static int slow_read_run(void *user, const mt_coh_exec *ex)
{
    struct timespec t = {0, 30 * 1000 * 1000};
    nanosleep(&t, NULL);
    ((slow_read *)user)->seen = tk_hash((const uint8_t *)(uintptr_t)ex->addr[0], ex->size[0]);
    return 0;
}

/* A buffer freed while a command that reads it still runs, with no host
 * memory to defer its device memory's release: the memory must not go back
 * before the command is done. The next buffer of the same size would get
 * it, and its upload (on the copy engine, beside the running command)
 * would overwrite what the command is about to read. */
static void free_in_flight(uint32_t hostdev, int rounds)
{
    enum { SZ = 256 << 10 };
    uint8_t *want = malloc(SZ);
    MT_CHECK(want != NULL);
    for (int round = 0; round < rounds; round++) {
        mt_coh_buf x, y;
        MT_CHECK_OK(mt_coh_buffer_create(cl, SZ, NULL, &x));
        write_whole(q[hostdev], x, SZ, 0x1111111111111111ull * (uint64_t)(round % 15 + 1), want);
        slow_read k = {0};
        mt_coh_arg a = {.buf = x, .size = SZ, .access = MT_COH_READ};
        mt_coh_command cmd = {.fn = slow_read_run, .user = &k, .args = &a, .nargs = 1};
        mt_coh_event *run;
        MT_CHECK_OK(mt_coh_enqueue(q[hostdev], &cmd, &run));
        MT_CHECK_OK(mt_coh_flush(q[hostdev]));
        nomem_arm(1, 1);
        int rc = mt_coh_buffer_free(cl, x);
        int fired = nomem_disarm();
        MT_CHECK_OK(rc);
        n_free_fired += (unsigned)fired;
        /* The next buffer, written on the host and read on the device. */
        MT_CHECK_OK(mt_coh_buffer_create(cl, SZ, NULL, &y));
        write_whole(q[hostdev], y, SZ, 0xdeadbeefcafef00dull, NULL);
        tk_cmd k2 = {.nargs = 1, .access = {MT_COH_READ}};
        mt_coh_arg b = {.buf = y, .size = SZ, .access = MT_COH_READ};
        mt_coh_command cmd2 = {.fn = tk_run, .user = &k2, .args = &b, .nargs = 1};
        MT_CHECK_OK(mt_coh_enqueue(q[hostdev], &cmd2, NULL));
        MT_CHECK_OK(mt_coh_event_wait(run, -1));
        mt_coh_event_release(run);
        MT_CHECK_OK(mt_coh_finish(q[hostdev]));
        if (k.seen != tk_hash(want, SZ)) {
            fprintf(stderr, "round %d: a command read memory released under it\n", round);
            MT_CHECK(0);
        }
        MT_CHECK_OK(mt_coh_buffer_free(cl, y));
    }
    free(want);
}

int main(int argc, char **argv)
{
    rng = mt_test_seed(argc, argv);
    unsigned steps = 3000;
    for (int i = 1; i + 1 < argc; i++)
        if (strcmp(argv[i], "--steps") == 0)
            steps = (unsigned)atoi(argv[i + 1]);
    MT_CHECK_OK(mt_coh_create(NULL, &c));
    uint32_t id, hostdev;
    MT_CHECK_OK(mt_coh_add_host_device(c, 1u << 20, &hostdev));
    for (uint32_t d = 0; d < NDEV - 1; d++) {
        /* Room for three of the four buffers: enqueues evict too. */
        mt_sim_opts so = {.mem_size = 3 * BUFSZ + (64u << 10), .base = MT_SIM_DEFAULT_BASE * (d + 1)};
        MT_CHECK_OK(mt_coh_add_sim_device(c, &so, &id));
    }
    MT_CHECK_OK(mt_coh_client_create(c, &cl));
    for (uint32_t d = 1; d <= NDEV; d++)
        MT_CHECK_OK(mt_coh_queue_create(cl, d, &q[d]));
    for (int b = 0; b < NBUF; b++)
        make_buffer(b);
    free_in_flight(hostdev, 8);
    MT_CHECK(n_free_fired > 0); /* the release had to be deferred and could not */
    for (n_steps = 0; n_steps < steps; n_steps++) {
        if (mt_test_below(&rng, 16) == 0) { /* new instances, new runs */
            int b = (int)mt_test_below(&rng, NBUF);
            free_buffer(b);
            make_buffer(b);
        }
        if (mt_test_below(&rng, 4) == 0)
            step_map();
        else
            step_enqueue();
        check_all(n_enomem || n_maps_failed ? "after a failed allocation" : "");
    }
    printf("nomem: %u steps, %u failed allocations: %u enqueues refused with ENOMEM, %u maps, "
           "%u unmaps, %u buffer creations; %u calls succeeded all the same; %u enqueues "
           "without room; %u frees in flight without memory to defer\n",
           steps, n_fired, n_enomem, n_maps_failed, n_unmaps_failed, n_creates_failed, n_ok_fired,
           n_devmem, n_free_fired);
    /* Failures must have hit enqueues and maps, or the test checked little. */
    MT_CHECK(n_enomem > 10 && n_maps_failed > 10);
    mt_coh_destroy(c);
    puts("nomem: ok");
    return 0;
}
