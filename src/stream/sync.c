/* Fences, sync (with the "is synchronised" shortcut) and work deferred until
 * the device has passed the current point. */
#include "internal.h"

int mt_stream_fence(mt_stream *s, uint64_t *value)
{
    uint64_t v = s->next_fence;
    /* The device sees only the low fence_bits bits, as hardware counters do;
     * the timeline extends them back (mt_timeline_signal_raw). */
    mt_cmd c = {.op = MT_CMD_FENCE, .a = v & s->fence_mask};
    int rc = mti_stream_put(s, &c);
    if (rc)
        return rc;
    s->next_fence = v + 1;
    s->last_fence = v;
    s->since_fence = 0;
    s->st.fences++;
    mti_ring_kick(&s->ring);
    if (value)
        *value = v;
    return 0;
}

int mt_stream_sync(mt_stream *s, int64_t timeout_ns)
{
    if (s->synchronised) {
        s->st.syncs_skipped++;
        mt_timeline_poll(s->tl);
        return 0;
    }
    /* A fence already covers everything when nothing followed it (e.g. a
     * sync that timed out after writing it): wait for that one. */
    if (s->since_fence) {
        int rc = mt_stream_fence(s, NULL);
        if (rc)
            return rc;
    }
    int rc = mt_timeline_wait(s->tl, s->last_fence, timeout_ns);
    if (rc == 0) {
        s->synchronised = 1;
        s->st.syncs++;
    }
    /* The seed's "free at the next sync": run what the device let go of. */
    mt_timeline_poll(s->tl);
    return rc;
}

int mt_stream_defer(mt_stream *s, mt_timeline_fn fn, void *ctx)
{
    /* The value covering every command written so far: the last fence if
     * nothing followed it, else the fence the next fence/sync will write. */
    uint64_t v = s->since_fence ? s->next_fence : s->last_fence;
    return mt_timeline_defer(s->tl, v, fn, ctx);
}
