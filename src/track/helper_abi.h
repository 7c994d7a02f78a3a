/* The collection helper's shared memory: the layout both sides agree on,
 * the library (helper.c) and the helper program (helper_main.c).
 *
 * The helper is a separate process that runs PAGEMAP_SCAN on the
 * application's pagemap (a descriptor the application opened, inherited
 * through exec): its threads run in their own address space, so the TLB
 * flush each scan triggers interrupts only the application's threads that
 * are running, not the scanning threads themselves (in-process, the
 * collecting threads interrupted each other once per 2 MiB with written
 * pages).
 *
 * Jobs are one window of a range (up to MTH_WINDOW_PAGES pages, the
 * collect's window). A job slot goes FREE -> POSTED (the library, under its
 * post lock) -> RUNNING (a helper thread that claimed it from the queue) ->
 * DONE or FAILED (bits final) -> FREE (the collect that consumed it). The
 * queue is a ring of slot numbers: `head` counts posts, `tail` claims; it
 * never overflows because a slot is posted once until consumed. Every word
 * two processes wait on is a shared futex (no FUTEX_PRIVATE_FLAG). */
#ifndef MT_TRACK_HELPER_ABI_H
#define MT_TRACK_HELPER_ABI_H

#include <stdatomic.h>
#include <stdint.h>

#define MTH_MAGIC 0x6d746873636e0001ull /* "mthscn" + layout version */
#define MTH_SLOTS 512u                    /* jobs in flight at once (8 GiB of 4 KiB pages) */
#define MTH_WINDOW_PAGES 4096u            /* pages per job: collect.c's window */
#define MTH_WORDS (MTH_WINDOW_PAGES / 64)
#define MTH_MAX_THREADS 64u

enum { MTH_FREE = 0, MTH_POSTED = 1, MTH_RUNNING = 2, MTH_DONE = 3, MTH_FAILED = 4 };

typedef struct mth_job {
    _Atomic uint32_t state;   /* MTH_*; a futex the collector waits on */
    _Atomic uint32_t waiting; /* a collector sleeps on `state`: wake it */
    uint32_t shift;           /* page shift */
    int32_t err;              /* MTH_FAILED: -errno of the scan */
    uint64_t start, end;      /* page-aligned addresses in the application */
    uint64_t bits[MTH_WORDS]; /* written pages, bit 0 = page `start` */
} mth_job;

typedef struct mth_shm {
    uint64_t magic;
    uint32_t nthreads;       /* scanning threads the helper starts */
    _Atomic uint32_t ready;  /* the helper's threads run (1); a futex */
    _Atomic uint32_t head;   /* jobs posted; a futex idle helper threads wait on */
    _Atomic uint32_t tail;   /* jobs claimed */
    _Atomic uint32_t idle;   /* helper threads sleeping on `head` */
    uint32_t pad;
    _Atomic uint32_t queue[MTH_SLOTS]; /* slot numbers in post order */
    mth_job jobs[MTH_SLOTS];
} mth_shm;

#endif
