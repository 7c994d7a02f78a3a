/* Content of one memory (or of the window an object occupies in it) at
 * submit N. The replayer checks the trace's rules but keeps no image; the
 * updates of that memory are applied, clipped, straight into the caller's
 * buffer, so nothing is allocated whatever sizes the file claims. */
#include <errno.h>
#include <string.h>

#include "memtrack/trace.h"

typedef struct window {
    uint64_t memory, offset; /* bytes [offset, offset + cap) of the memory go to buf */
    uint8_t *buf;
    size_t cap;
} window;

static void apply_clipped(const window *w, const mt_trace_record *rec)
{
    uint64_t s = rec->u.update.offset, e = s + rec->u.update.length; /* no overflow: replay checked */
    uint64_t ws = w->offset, we = w->offset + w->cap;
    uint64_t a = s > ws ? s : ws, b = e < we ? e : we;
    if (a < b)
        memcpy(w->buf + (a - ws), (const uint8_t *)rec->u.update.data + (a - s), (size_t)(b - a));
}

/* Replays to SUBMIT `submit`; with a window, applies that memory's updates
 * into it. Returns 0 and the replay positioned there (caller destroys it). */
static int replay_to(mt_trace_reader *r, const window *w, uint64_t submit, mt_trace_replay **out)
{
    mt_trace_replay_opts o = {.flags = MT_TRACE_REPLAY_NO_IMAGES};
    int rc = mt_trace_replay_create(r, &o, out);
    if (rc)
        return rc;
    mt_trace_record rec;
    while ((rc = mt_trace_replay_next(*out, &rec)) == 1) {
        if (rec.type == MT_TRACE_SUBMIT && rec.u.submit.index == submit)
            return 0;
        if (!w)
            continue;
        if (rec.type == MT_TRACE_MEMORY && rec.u.memory.id == w->memory && w->cap)
            memset(w->buf, 0, w->cap); /* a (re)created memory starts as zeros */
        else if (rec.type == MT_TRACE_UPDATE && rec.u.update.memory == w->memory)
            apply_clipped(w, &rec);
    }
    mt_trace_replay_destroy(*out);
    *out = NULL;
    return rc ? rc : -ENOENT;
}

int64_t mt_trace_reconstruct(mt_trace_reader *r, uint64_t memory, uint64_t submit, void *buf, size_t cap)
{
    if (!r || (!buf && cap))
        return -EINVAL;
    window w = {memory, 0, buf, cap};
    mt_trace_replay *rp;
    int rc = replay_to(r, &w, submit, &rp);
    int64_t size = rc ? rc : mt_trace_replay_memory_size(rp, memory);
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
    /* First pass: where the object lives at that submit. */
    int rc = replay_to(r, NULL, submit, &rp);
    if (rc)
        return rc;
    rc = mt_trace_replay_object(rp, object, &memory, &offset, &used);
    int64_t msize = rc ? rc : mt_trace_replay_memory_size(rp, memory);
    mt_trace_replay_destroy(rp);
    mt_trace_rewind(r);
    if (msize < 0)
        return msize;
    if (offset > (uint64_t)msize || used > (uint64_t)msize - offset)
        return MT_ECORRUPT;
    window w = {memory, offset, buf, used < cap ? (size_t)used : cap};
    if ((rc = replay_to(r, &w, submit, &rp)) == 0)
        mt_trace_replay_destroy(rp);
    mt_trace_rewind(r);
    return rc ? rc : (int64_t)used;
}
