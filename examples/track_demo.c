/* mt-track-demo: map memory, write a pattern from several threads, and print
 * what the tracker saw with each backend, checked against the pages really
 * written. Usage: mt-track-demo [MiB] [threads] */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "memtrack/memtrack.h"

typedef struct {
    unsigned char *mem;
    size_t npages, page;
    int index, nthreads;
    unsigned char *written; /* reference: pages this thread wrote */
} worker;

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

/* Each thread writes a different sparse pattern: every page whose index is a
 * multiple of (index + 3), at an offset that varies within the page. */
static void *write_pattern(void *arg)
{
    worker *w = arg;
    size_t step = (size_t)w->index + 3;
    for (size_t p = (size_t)w->index; p < w->npages; p += step) {
        w->mem[p * w->page + (p * 131) % w->page] = (unsigned char)(p + 1);
        w->written[p] = 1;
    }
    return NULL;
}

static int run(mt_track_backend backend, size_t mib, int nthreads)
{
    size_t page = (size_t)sysconf(_SC_PAGESIZE);
    size_t bytes = mib << 20, npages = bytes / page;
    unsigned char *mem = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    unsigned char *ref = calloc(npages, 1), *seen = calloc(npages, 1);
    if (mem == MAP_FAILED || !ref || !seen)
        return 1;

    mt_tracker_opts opts = {.backend = backend};
    mt_tracker *t;
    int rc = mt_tracker_create(&opts, &t);
    if (rc) {
        printf("%-7s unavailable: %s\n", mt_track_backend_name(backend), mt_strerror(rc));
        return 0;
    }
    mt_range_id id;
    if ((rc = mt_tracker_add(t, mem, bytes, NULL, &id)) != 0) {
        printf("%-7s add failed: %s\n", mt_track_backend_name(backend), mt_strerror(rc));
        return 1;
    }

    pthread_t th[64];
    worker w[64];
    double t0 = now_ms();
    for (int i = 0; i < nthreads; i++) {
        w[i] = (worker){mem, npages, page, i, nthreads, calloc(npages, 1)};
        pthread_create(&th[i], NULL, write_pattern, &w[i]);
    }
    for (int i = 0; i < nthreads; i++)
        pthread_join(th[i], NULL);
    double t1 = now_ms();

    mt_dirty_run runs[256];
    long n;
    size_t nruns = 0;
    while ((n = mt_tracker_collect(t, id, runs, 256)) > 0) {
        for (long i = 0; i < n; i++)
            for (size_t off = runs[i].offset; off < runs[i].offset + runs[i].length; off += page)
                seen[off / page] = 1;
        nruns += (size_t)n;
        if (n < 256)
            break;
    }
    double t2 = now_ms();

    size_t written = 0, reported = 0, missed = 0, extra = 0;
    for (int i = 0; i < nthreads; i++) {
        for (size_t p = 0; p < npages; p++)
            ref[p] |= w[i].written[p];
        free(w[i].written);
    }
    for (size_t p = 0; p < npages; p++) {
        written += ref[p];
        reported += seen[p];
        missed += ref[p] && !seen[p];
        extra += !ref[p] && seen[p];
    }
    mt_range_stats st;
    mt_tracker_stats(t, id, &st);
    printf("%-7s %8zu %9zu %7zu %6zu %8llu %9.1f %11.2f %10.3f\n",
           mt_track_backend_name(st.backend), written, reported, missed, extra,
           (unsigned long long)st.faults, (t1 - t0) * 1e6 / (double)(written ? written : 1) / 1e3,
           t2 - t1, (t2 - t1) * 1e6 / (double)npages);
    mt_tracker_destroy(t);
    munmap(mem, bytes);
    free(ref);
    free(seen);
    return missed != 0;
}

int main(int argc, char **argv)
{
    size_t mib = argc > 1 ? strtoul(argv[1], NULL, 0) : 64;
    int nthreads = argc > 2 ? atoi(argv[2]) : 4;
    if (mib == 0 || nthreads < 1 || nthreads > 64) {
        fprintf(stderr, "usage: mt-track-demo [MiB] [threads 1..64]\n");
        return 2;
    }
    printf("memtrack %s: %zu MiB mapped, %d threads writing sparse patterns\n", mt_version_string(),
           mib, nthreads);
    printf("uffd backend (userfaultfd-wp async + PAGEMAP_SCAN) available: %s\n\n",
           mt_track_backend_available(MT_TRACK_UFFD) ? "yes" : "no");
    printf("%-7s %8s %9s %7s %6s %8s %9s %11s %10s\n", "backend", "written", "reported", "missed",
           "extra", "faults", "us/write", "collect ms", "ns/page");
    int bad = run(MT_TRACK_SIGNAL, mib, nthreads);
    if (mt_track_backend_available(MT_TRACK_UFFD))
        bad |= run(MT_TRACK_UFFD, mib, nthreads);
    printf("\n%s\n", bad ? "LOST WRITES: the tracker missed pages that were written"
                         : "every written page was reported (missed = 0)");
    return bad;
}
