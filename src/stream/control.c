/* The consumer's side of a stream and the any-thread controls (cancel, loss). */
#include "internal.h"

long mt_stream_consume(mt_stream *s, const mt_cmd **cmds)
{
    return mti_ring_consume(&s->ring, cmds);
}

void mt_stream_consumed(mt_stream *s, size_t n)
{
    mti_ring_consumed(&s->ring, n);
}

void mt_stream_wake_consumer(mt_stream *s)
{
    mti_ring_wake_consumer(&s->ring);
}

void mt_stream_cancel(mt_stream *s)
{
    mti_ring_cancel(&s->ring);
    mt_timeline_cancel(s->tl);
}

void mt_stream_lose(mt_stream *s, int code)
{
    if (code >= 0)
        code = MT_EDEVLOST;
    /* Ring first: a thread that sees the timeline lost (a sync returning
     * the loss code) must then find every producer call failing too. A
     * producer woken from the ring that goes on to wait on the timeline is
     * released by the timeline's loss right after. */
    mti_ring_lose(&s->ring, code);
    mt_timeline_lose(s->tl, code);
}

int mt_stream_status(const mt_stream *s)
{
    return atomic_load_explicit(&((mt_stream *)s)->ring.lost, memory_order_acquire);
}
