/* track: a write made before a collect is reported by that collect, even
 * while another thread's fault on the same page is in flight; and a stream
 * of faults from several threads cannot hold a collect up.
 *
 * The signal backend's fault handler makes its page writable first and sets
 * the page's bit second. A write by another thread in between raises no
 * fault; a collect that took the bits in that window reported the page one
 * collect late (memtrack-hostile submit-race in shadow mode: the device read
 * the old bytes of a page the submitting thread had just written). Here a
 * test hook makes every handler dwell in that window: thread R writes page P
 * (its handler dwells 20 ms, P already writable), thread M writes P
 * meanwhile, without a fault, and collects at once: P must be in that very
 * collect. Then three threads fault without pause on pages of their own
 * (each handler dwelling 100 us, so that some handler is nearly always in
 * flight) while M collects for 300 ms: most collects must end without
 * giving up (one does after 100 ms, reporting the whole range instead). The uffd backend has no such window (its faults
 * are the kernel's); it runs the first part too. */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "track/internal.h"
#include "track_util.h"

#define NP 64

typedef struct writer {
    volatile unsigned char *p;
    unsigned char v;
    atomic_int started;
    pthread_t t;
} writer;

static void *write_one(void *arg)
{
    writer *w = arg;
    atomic_store(&w->started, 1);
    *w->p = w->v; /* faults (signal backend): the handler dwells */
    return NULL;
}

static void sleep_us(long us)
{
    struct timespec ts = {us / 1000000, (us % 1000000) * 1000};
    while (nanosleep(&ts, &ts) != 0)
        ;
}

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static void in_flight_write(mt_track_backend b)
{
    size_t ps = tu_page();
    unsigned char *region = tu_map(NP * ps);
    mt_tracker *t;
    MT_CHECK_OK(mt_tracker_create(NULL, &t));
    mt_range_opts o = {.backend = b};
    mt_range_id id;
    MT_CHECK_OK(mt_tracker_add(t, region, NP * ps, &o, &id));
    unsigned char seen[NP];
    memset(seen, 0, sizeof seen);
    tu_collect_into(t, id, (uintptr_t)region, (uintptr_t)region, seen, NP);
    atomic_store(&mti_test_fault_dwell_ns, 20 * 1000000);
    int late = 0;
    for (int i = 0; i < 12; i++) {
        size_t p = (size_t)(i * 5) % NP;
        writer w = {.p = region + p * ps, .v = (unsigned char)(i + 1)};
        MT_CHECK(pthread_create(&w.t, NULL, write_one, &w) == 0);
        while (!atomic_load(&w.started))
            sched_yield();
        sleep_us(2000); /* R is in its handler now, P writable */
        region[p * ps + 100] = (unsigned char)(i + 2); /* no fault of its own */
        memset(seen, 0, sizeof seen);
        tu_collect_into(t, id, (uintptr_t)region, (uintptr_t)region, seen, NP);
        if (!seen[p]) {
            printf("%s: collect %d missed page %zu written before it\n", mt_track_backend_name(b), i, p);
            late++;
        }
        pthread_join(w.t, NULL);
        memset(seen, 0, sizeof seen);
        tu_collect_into(t, id, (uintptr_t)region, (uintptr_t)region, seen, NP);
    }
    atomic_store(&mti_test_fault_dwell_ns, 0);
    MT_CHECK(late == 0);
    MT_CHECK_OK(mt_tracker_remove(t, id));
    mt_tracker_destroy(t);
    munmap(region, NP * ps);
}

typedef struct streamer {
    unsigned char *base;
    size_t first, npages;
    atomic_int *stop;
    _Atomic long writes;
    pthread_t t;
} streamer;

static void *stream(void *arg)
{
    streamer *s = arg;
    size_t ps = tu_page();
    for (size_t k = 0; !atomic_load(s->stop); k++) {
        s->base[(s->first + k % s->npages) * ps + k % ps] = (unsigned char)k;
        s->writes++;
    }
    return NULL;
}

static void fault_stream(void)
{
    size_t ps = tu_page();
    unsigned char *region = tu_map(NP * ps);
    mt_tracker *t;
    MT_CHECK_OK(mt_tracker_create(NULL, &t));
    mt_range_opts o = {.backend = MT_TRACK_SIGNAL};
    mt_range_id id;
    MT_CHECK_OK(mt_tracker_add(t, region, NP * ps, &o, &id));
    atomic_store(&mti_test_fault_dwell_ns, 100 * 1000);
    atomic_int stop;
    atomic_store(&stop, 0);
    streamer s[3];
    for (int k = 0; k < 3; k++) {
        s[k] = (streamer){.base = region, .first = (size_t)k * 20, .npages = 20, .stop = &stop};
        MT_CHECK(pthread_create(&s[k].t, NULL, stream, &s[k]) == 0);
    }
    while (s[0].writes == 0 || s[1].writes == 0 || s[2].writes == 0)
        sched_yield();
    unsigned char seen[NP];
    uint64_t worst = 0, end = now_ns() + 300 * 1000000u;
    int collects = 0;
    for (; now_ns() < end; collects++) {
        uint64_t t0 = now_ns();
        memset(seen, 0, sizeof seen);
        tu_collect_into(t, id, (uintptr_t)region, (uintptr_t)region, seen, NP);
        uint64_t dt = now_ns() - t0;
        worst = dt > worst ? dt : worst;
    }
    atomic_store(&stop, 1);
    long writes = 0;
    for (int k = 0; k < 3; k++) {
        pthread_join(s[k].t, NULL);
        writes += s[k].writes;
    }
    atomic_store(&mti_test_fault_dwell_ns, 0);
    mt_range_stats st;
    MT_CHECK_OK(mt_tracker_stats(t, id, &st));
    printf("fault stream: %ld writes, %llu faults, %d collects, the slowest %.2f ms, %llu gave up\n", writes,
           (unsigned long long)st.faults, collects, (double)worst / 1e6, (unsigned long long)st.degradations);
    MT_CHECK(st.faults > 100);      /* the handlers really were in flight */
    /* A wait the stream could hold would make nearly every collect give up
     * (100 ms each); a loaded machine or a sanitizer, the odd one. */
    MT_CHECK(st.degradations * 2 < (uint64_t)collects);
    MT_CHECK_OK(mt_tracker_remove(t, id));
    mt_tracker_destroy(t);
    munmap(region, NP * ps);
}

int main(void)
{
    mt_track_backend bs[2];
    int nb = tu_backends(bs);
    for (int i = 0; i < nb; i++) {
        in_flight_write(bs[i]);
        printf("%s: every write made before a collect was in it\n", mt_track_backend_name(bs[i]));
    }
    fault_stream();
    return 0;
}
