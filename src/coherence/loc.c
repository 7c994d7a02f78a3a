/* Locations: sequence numbers per memory location and the timeline behind
 * deferred reclamation.
 *
 * Commands using an instance at a location take increasing numbers there at
 * enqueue time but complete in any order (two engines, dependencies). The
 * ring of completion flags turns that into a watermark: every number up to
 * `wm` has completed. The watermark is the location's timeline value, so
 * releasing an instance after its last user is mt_timeline_defer(tl,
 * last_seq, release) and "is this instance idle?" is last_seq <= completed. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

int mti_coh_loc_create(coh_loc **out)
{
    coh_loc *l = calloc(1, sizeof *l);
    if (!l)
        return -ENOMEM;
    l->cap = 256;
    l->done = calloc(l->cap, 1);
    /* Callbacks run where the watermark moves (engine threads, or the
     * planner): they only free memory under the device's mem_lock. */
    mt_timeline_opts to = {.flags = MT_TIMELINE_CALLBACKS_ON_SIGNAL};
    int rc = l->done ? mt_timeline_create(&to, &l->tl) : -ENOMEM;
    if (rc) {
        free(l->done);
        free(l);
        return rc;
    }
    pthread_mutex_init(&l->lock, NULL);
    *out = l;
    return 0;
}

void mti_coh_loc_destroy(coh_loc *l)
{
    if (!l)
        return;
    mt_timeline_destroy(l->tl); /* runs what is still deferred */
    pthread_mutex_destroy(&l->lock);
    free(l->done);
    free(l);
}

/* Doubles the ring, keeping the flags of (wm, next]. Caller holds lock. */
static int grow(coh_loc *l)
{
    uint64_t cap = l->cap * 2, next = atomic_load_explicit(&l->next, memory_order_relaxed);
    uint8_t *d = calloc(cap, 1);
    if (!d)
        return -ENOMEM;
    for (uint64_t s = atomic_load_explicit(&l->wm, memory_order_relaxed) + 1; s <= next; s++)
        d[s & (cap - 1)] = l->done[s & (l->cap - 1)];
    free(l->done);
    l->done = d;
    l->cap = cap;
    return 0;
}

uint64_t mti_coh_loc_take_slow(coh_loc *l)
{
    /* The ring is full: grow it (the planner's alone; completions read cap
     * and done under lock). A stale, smaller wm only makes it grow early. */
    uint64_t next = atomic_load_explicit(&l->next, memory_order_relaxed) + 1;
    pthread_mutex_lock(&l->lock);
    int rc = next - atomic_load_explicit(&l->wm, memory_order_relaxed) > l->cap ? grow(l) : 0;
    pthread_mutex_unlock(&l->lock);
    if (rc)
        return 0;
    /* release: a completion that sees the number sees the ring it fits in. */
    atomic_store_explicit(&l->next, next, memory_order_release);
    return next;
}

void mti_coh_loc_done(coh_loc *l, uint64_t s)
{
    pthread_mutex_lock(&l->lock);
    l->done[s & (l->cap - 1)] = 1;
    uint64_t wm = atomic_load_explicit(&l->wm, memory_order_relaxed);
    uint64_t old = wm, next = atomic_load_explicit(&l->next, memory_order_acquire);
    while (wm < next && l->done[(wm + 1) & (l->cap - 1)]) {
        wm++;
        l->done[wm & (l->cap - 1)] = 0;
    }
    int moved = wm != old;
    /* release: the planner skips dependencies on commands below wm
     * (mti_coh_depend_write); it must see their completion, fixup queued. */
    atomic_store_explicit(&l->wm, wm, memory_order_release);
    pthread_mutex_unlock(&l->lock);
    /* Outside the lock: the timeline runs release callbacks. Watermarks only
     * grow and signal ignores a lower value, so racing signals are fine. */
    if (moved)
        mt_timeline_signal(l->tl, wm);
}
