/* stream internals shared by stream.c (producer commands), sync.c (fences,
 * sync, deferred work) and control.c (consumer side, cancel, loss).
 *
 * Everything outside `ring` and `tl` is producer-private: only the producer
 * thread touches it, so it needs no atomics. */
#ifndef MT_STREAM_INTERNAL_H
#define MT_STREAM_INTERNAL_H

#include <stdint.h>

#include "hazard.h"
#include "memtrack/stream.h"
#include "ring.h"
#include "state_cache.h"

struct mt_stream {
    mt_ring ring;
    mt_timeline *tl;
    uint32_t flags;
    uint32_t state_slots;
    uint64_t fence_mask; /* low fence_bits bits: what a FENCE command carries */

    uint64_t next_fence;  /* timeline value the next fence takes */
    uint64_t last_fence;  /* value of the last fence written (0: none) */
    uint64_t since_fence; /* commands written after the last fence */
    int synchronised;     /* everything written has completed (a sync succeeded since) */

    mt_state_cache cache;
    mt_hazards hazards;
    mt_stream_stats st; /* producer-side counters; the ring keeps the rest */
};

/* Writes one command of any kind and does the producer bookkeeping. */
static inline int mti_stream_put(mt_stream *s, const mt_cmd *cmd)
{
    int rc = mti_ring_put(&s->ring, cmd);
    if (rc)
        return rc;
    s->st.commands++;
    s->since_fence++;
    s->synchronised = 0;
    return 0;
}

#endif
