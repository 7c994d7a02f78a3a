/* Content of one memory or one object at submit N, built on the replayer
 * with a single kept image. */
#include <errno.h>

#include "memtrack/trace.h"

/* Replays up to SUBMIT `submit` keeping the image of `memory` only (none
 * when memory is 0) and returns the replay positioned there. */
static int replay_to(mt_trace_reader *r, uint64_t memory, uint64_t submit, mt_trace_replay **out)
{
    mt_trace_replay_opts o = {.only_memory = memory, .flags = memory ? 0 : MT_TRACE_REPLAY_NO_IMAGES};
    int rc = mt_trace_replay_create(r, &o, out);
    if (rc)
        return rc;
    rc = mt_trace_replay_to_submit(*out, submit);
    if (rc) {
        mt_trace_replay_destroy(*out);
        *out = NULL;
    }
    return rc;
}

int64_t mt_trace_reconstruct(mt_trace_reader *r, uint64_t memory, uint64_t submit, void *buf, size_t cap)
{
    mt_trace_replay *rp;
    if (!r || (!buf && cap) || memory == 0)
        return -EINVAL;
    int rc = replay_to(r, memory, submit, &rp);
    if (rc)
        return rc;
    int64_t size = mt_trace_replay_memory_size(rp, memory);
    if (size >= 0) {
        size_t n = (uint64_t)size < cap ? (size_t)size : cap;
        rc = mt_trace_replay_read(rp, memory, 0, buf, n);
        if (rc)
            size = rc;
    }
    mt_trace_replay_destroy(rp);
    mt_trace_rewind(r);
    return size;
}

int64_t mt_trace_reconstruct_object(mt_trace_reader *r, uint64_t object, uint64_t submit, void *buf,
                                    size_t cap)
{
    mt_trace_replay *rp;
    uint64_t memory, offset, used;
    if (!r || (!buf && cap))
        return -EINVAL;
    /* First pass: where the object lives at that submit, keeping no image. */
    int rc = replay_to(r, 0, submit, &rp);
    if (rc)
        return rc;
    rc = mt_trace_replay_object(rp, object, &memory, &offset, &used);
    int64_t msize = rc ? rc : mt_trace_replay_memory_size(rp, memory);
    mt_trace_replay_destroy(rp);
    if (msize < 0) {
        mt_trace_rewind(r);
        return msize;
    }
    if (offset > (uint64_t)msize || used > (uint64_t)msize - offset || used > INT64_MAX) {
        mt_trace_rewind(r);
        return MT_ECORRUPT;
    }
    if ((rc = replay_to(r, memory, submit, &rp))) {
        mt_trace_rewind(r);
        return rc;
    }
    size_t n = used < cap ? (size_t)used : cap;
    rc = mt_trace_replay_read(rp, memory, offset, buf, n);
    mt_trace_replay_destroy(rp);
    mt_trace_rewind(r);
    return rc ? rc : (int64_t)used;
}
