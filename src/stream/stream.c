/* Stream lifecycle and the producer's commands: emit with lazy barriers,
 * elided state, explicit barriers, reset, flush, stats. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

static int is_pow2(uint64_t x) { return x && !(x & (x - 1)); }

/* Fills defaults into *o and checks it. */
static int check_opts(mt_stream_opts *o)
{
    if (!o->slots)
        o->slots = 512;
    if (!o->ping_interval)
        o->ping_interval = o->slots / 4 ? o->slots / 4 : 1;
    if (!o->fence_bits)
        o->fence_bits = 64;
    if (!o->state_slots)
        o->state_slots = 16;
    if (!o->resources)
        o->resources = 256;
    if (!is_pow2(o->slots) || o->slots < 4 || o->slots > (1u << 24))
        return -EINVAL;
    if (!is_pow2(o->ping_interval) || o->ping_interval > o->slots)
        return -EINVAL;
    if (o->fence_bits > 64 || o->state_slots > 64 || o->resources > (1u << 24))
        return -EINVAL;
    /* Every fence in flight holds a slot, so at most `slots` are in flight;
     * extension needs fewer than 2^(fence_bits-1). */
    if (o->fence_bits < 64 && o->slots >= (1ull << (o->fence_bits - 1)))
        return -EINVAL;
    return 0;
}

int mt_stream_create(const mt_stream_opts *opts, mt_stream **out)
{
    mt_stream_opts o = {0};
    if (opts)
        o = *opts;
    if (!out || check_opts(&o))
        return -EINVAL;
    mt_stream *s = aligned_alloc(64, sizeof *s);
    if (!s)
        return -ENOMEM;
    memset(s, 0, sizeof *s);
    s->flags = o.flags;
    s->state_slots = o.state_slots;
    s->fence_mask = o.fence_bits == 64 ? ~0ull : (1ull << o.fence_bits) - 1;
    s->next_fence = 1;
    s->synchronised = 1; /* nothing written yet */
    mt_timeline_opts to = {.counter_bits = o.fence_bits};
    int rc = mt_timeline_create(&to, &s->tl);
    if (rc)
        goto fail;
    if ((rc = mti_hazards_init(&s->hazards, o.resources)) != 0)
        goto fail_tl;
    uint64_t spin = (o.flags & MT_STREAM_NO_SPIN) ? 0 : o.spin_ns ? o.spin_ns : 50000;
    if ((rc = mti_ring_init(&s->ring, o.slots, o.ping_interval, spin)) != 0)
        goto fail_hz;
    *out = s;
    return 0;
fail_hz:
    mti_hazards_fini(&s->hazards);
fail_tl:
    mt_timeline_destroy(s->tl);
fail:
    free(s);
    return rc;
}

void mt_stream_destroy(mt_stream *s)
{
    if (!s)
        return;
    mt_timeline_destroy(s->tl);
    mti_ring_fini(&s->ring);
    mti_hazards_fini(&s->hazards);
    free(s);
}

static int write_barrier(mt_stream *s)
{
    mt_cmd c = {.op = MT_CMD_BARRIER};
    int rc = mti_stream_put(s, &c);
    if (rc)
        return rc;
    mti_hazards_clear(&s->hazards);
    s->st.barriers++;
    return 0;
}

int mt_stream_emit(mt_stream *s, const mt_cmd *cmd, const mt_stream_access *acc)
{
    if (!cmd || (cmd->op != MT_CMD_NOP && cmd->op < MT_CMD_USER))
        return -EINVAL; /* the stream's own ops go through their functions */
    if (acc) {
        int need = mti_hazards_check(&s->hazards, acc);
        if (need < 0)
            return need;
        if (need) {
            int rc = write_barrier(s);
            if (rc)
                return rc;
        }
    }
    int rc = mti_stream_put(s, cmd);
    if (rc)
        return rc;
    if (acc)
        mti_hazards_note_writes(&s->hazards, acc);
    s->st.emitted++;
    return 0;
}

int mt_stream_set_state(mt_stream *s, uint32_t slot, uint64_t value)
{
    if (slot >= s->state_slots)
        return -EINVAL;
    if (!(s->flags & MT_STREAM_NO_ELISION) && mti_state_cache_hit(&s->cache, slot, value)) {
        s->st.state_elided++;
        return 0;
    }
    mt_cmd c = {.op = MT_CMD_STATE, .arg = slot, .a = value};
    int rc = mti_stream_put(s, &c);
    if (rc)
        return rc;
    mti_state_cache_note(&s->cache, slot, value);
    s->st.state_written++;
    return 1;
}

int mt_stream_barrier(mt_stream *s)
{
    return write_barrier(s);
}

int mt_stream_reset(mt_stream *s)
{
    /* Forget first: if the RESET fails to go out the cache is only
     * conservative, never stale (state_cache.h). */
    mti_state_cache_forget(&s->cache);
    mt_cmd c = {.op = MT_CMD_RESET};
    int rc = mti_stream_put(s, &c);
    if (rc)
        return rc;
    mti_hazards_clear(&s->hazards); /* a reset drains the device's writes */
    s->st.resets++;
    return 0;
}

int mt_stream_flush(mt_stream *s)
{
    int lost = mt_stream_status(s);
    if (lost)
        return lost;
    mti_ring_kick(&s->ring);
    return 0;
}

mt_timeline *mt_stream_timeline(mt_stream *s)
{
    return s->tl;
}

void mt_stream_stats_get(mt_stream *s, mt_stream_stats *out)
{
    *out = s->st;
    out->producer_sleeps = s->ring.producer_sleeps;
    out->consumer_wakeups = s->ring.consumer_wakeups;
    out->producer_wakeups = atomic_load_explicit(&s->ring.producer_wakeups, memory_order_relaxed);
    out->progress_reports = atomic_load_explicit(&s->ring.progress_reports, memory_order_relaxed);
    out->consumer_sleeps = atomic_load_explicit(&s->ring.consumer_sleeps, memory_order_relaxed);
}
