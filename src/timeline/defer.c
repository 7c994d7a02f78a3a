/* Deferred reclamation: callbacks queued against a timeline value, run in
 * value order once it completes.
 *
 * The queue is a binary min-heap on (value, seq) under tl->lock, so values
 * may be queued in any order. Callbacks run outside the lock in batches. Only
 * one thread drains at a time (`draining`): with two drainers, the second
 * could run value 7 while the first is still running value 5. A poll that
 * finds a drainer at work returns at once; the drainer re-checks the heap
 * under the lock before it stops, so nothing ready is left behind. */
#include <errno.h>
#include <stdlib.h>

#include "internal.h"

enum { BATCH = 32 };

static int before(const mt_deferred *a, const mt_deferred *b)
{
    return a->value < b->value || (a->value == b->value && a->seq < b->seq);
}

static void swap(mt_deferred *a, mt_deferred *b)
{
    mt_deferred t = *a;
    *a = *b;
    *b = t;
}

static void sift_up(mt_deferred *h, size_t i)
{
    while (i > 0 && before(&h[i], &h[(i - 1) / 2])) {
        swap(&h[i], &h[(i - 1) / 2]);
        i = (i - 1) / 2;
    }
}

static void sift_down(mt_deferred *h, size_t n, size_t i)
{
    for (;;) {
        size_t l = 2 * i + 1, r = l + 1, m = i;
        if (l < n && before(&h[l], &h[m]))
            m = l;
        if (r < n && before(&h[r], &h[m]))
            m = r;
        if (m == i)
            return;
        swap(&h[i], &h[m]);
        i = m;
    }
}

/* Under lock. release: pairs with the acquire load in poll's fast path. */
static void publish_next(mt_timeline *tl)
{
    atomic_store_explicit(&tl->next_deferred, tl->nheap ? tl->heap[0].value : UINT64_MAX,
                          memory_order_release);
}

static mt_deferred pop(mt_timeline *tl)
{
    mt_deferred d = tl->heap[0];
    tl->heap[0] = tl->heap[--tl->nheap];
    sift_down(tl->heap, tl->nheap, 0);
    return d;
}

int mt_timeline_defer(mt_timeline *tl, uint64_t value, mt_timeline_fn fn, void *ctx)
{
    if (!fn)
        return -EINVAL;
    pthread_mutex_lock(&tl->lock);
    if (tl->nheap == tl->capheap) {
        size_t cap = tl->capheap ? 2 * tl->capheap : 16;
        mt_deferred *h = realloc(tl->heap, cap * sizeof *h);
        if (!h) {
            pthread_mutex_unlock(&tl->lock);
            return -ENOMEM;
        }
        tl->heap = h;
        tl->capheap = cap;
    }
    tl->heap[tl->nheap] = (mt_deferred){value, tl->next_seq++, fn, ctx};
    sift_up(tl->heap, tl->nheap++);
    publish_next(tl);
    pthread_mutex_unlock(&tl->lock);
    /* In signal mode nobody else would run a callback whose value already
     * completed until the next signal: run it now. */
    if ((tl->flags & MT_TIMELINE_CALLBACKS_ON_SIGNAL) && value <= mti_tl_completed(tl))
        mt_timeline_poll(tl);
    return 0;
}

long mt_timeline_poll(mt_timeline *tl)
{
    /* Lock-free fast path: nothing queued is ready and the device is alive. */
    if (atomic_load_explicit(&tl->next_deferred, memory_order_acquire) > mti_tl_completed(tl) &&
        !mti_tl_lost(tl))
        return 0;
    pthread_mutex_lock(&tl->lock);
    if (tl->draining) {
        pthread_mutex_unlock(&tl->lock);
        return 0;
    }
    tl->draining = 1;
    long ran = 0;
    for (;;) {
        mt_deferred batch[BATCH];
        uint64_t done = mti_tl_completed(tl);
        int lost = mti_tl_lost(tl);
        int k = 0;
        while (k < BATCH && tl->nheap && (tl->heap[0].value <= done || lost))
            batch[k++] = pop(tl);
        if (k == 0)
            break;
        publish_next(tl);
        pthread_mutex_unlock(&tl->lock);
        for (int i = 0; i < k; i++)
            batch[i].fn(batch[i].ctx, batch[i].value, batch[i].value <= done ? 0 : lost);
        ran += k;
        pthread_mutex_lock(&tl->lock);
    }
    tl->draining = 0;
    pthread_mutex_unlock(&tl->lock);
    return ran;
}

size_t mt_timeline_pending(mt_timeline *tl)
{
    pthread_mutex_lock(&tl->lock);
    size_t n = tl->nheap;
    pthread_mutex_unlock(&tl->lock);
    return n;
}

void mti_timeline_drain_all(mt_timeline *tl)
{
    uint64_t done = mti_tl_completed(tl);
    int lost = mti_tl_lost(tl);
    int status_late = lost ? lost : MT_ECANCELED;
    /* One at a time, re-reading the heap: a callback that (wrongly) queues
     * another one during destroy still gets it run, not leaked. */
    for (;;) {
        pthread_mutex_lock(&tl->lock);
        if (!tl->nheap) {
            pthread_mutex_unlock(&tl->lock);
            return;
        }
        mt_deferred d = pop(tl);
        pthread_mutex_unlock(&tl->lock);
        d.fn(d.ctx, d.value, d.value <= done ? 0 : status_late);
    }
}
