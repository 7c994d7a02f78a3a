/* Replay: applies UPDATE records to zero-initialised memory images, keeps
 * the object bindings, and (MT_TRACE_REPLAY_VERIFY) checks CONTENT_HASH
 * records against the images. Records that break the trace's rules
 * (docs/trace-format.md) are MT_ECORRUPT. Images are allocated lazily and
 * within opts.max_bytes, whatever sizes the file claims. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "idmap.h"
#include "reader.h"

#define MT_REPLAY_DEFAULT_BUDGET (4ull << 30)

typedef struct rmem {
    uint64_t id, size;
    uint8_t *img; /* NULL: all zeros so far */
    int alive;
} rmem;

typedef struct robj {
    uint64_t id, memory, offset, used_size;
    int alive, bound;
} robj;

struct mt_trace_replay {
    mt_trace_reader *r;
    mt_trace_replay_opts opts;
    mt_idmap mem_ids, obj_ids;
    rmem *mems;
    robj *objs;
    size_t nmems, mems_cap, nobjs, objs_cap;
    uint64_t next_submit;
    mt_trace_replay_stats st;
};

static void *grow_array(void *p, size_t *cap, size_t n, size_t elem)
{
    if (n < *cap)
        return p;
    size_t ncap = *cap ? 2 * *cap : 16;
    void *q = realloc(p, ncap * elem);
    if (q)
        *cap = ncap;
    return q;
}

static rmem *find_mem(mt_trace_replay *rp, uint64_t id)
{
    long i = mti_idmap_get(&rp->mem_ids, id);
    return i >= 0 && rp->mems[i].alive ? &rp->mems[i] : NULL;
}

static robj *find_obj(mt_trace_replay *rp, uint64_t id)
{
    long i = mti_idmap_get(&rp->obj_ids, id);
    return i >= 0 && rp->objs[i].alive ? &rp->objs[i] : NULL;
}

static int kept(const mt_trace_replay *rp, uint64_t id)
{
    if (rp->opts.flags & MT_TRACE_REPLAY_NO_IMAGES)
        return 0;
    return rp->opts.only_memory == 0 || rp->opts.only_memory == id;
}

/* Allocates m's image (zeros) within the budget. */
static int image(mt_trace_replay *rp, rmem *m)
{
    if (m->img || m->size == 0)
        return 0;
    if (m->size > SIZE_MAX || m->size > rp->opts.max_bytes - rp->st.image_bytes)
        return -ENOMEM;
    m->img = calloc(1, (size_t)m->size);
    if (!m->img)
        return -ENOMEM;
    rp->st.image_bytes += m->size;
    return 0;
}

static void drop_image(mt_trace_replay *rp, rmem *m)
{
    if (m->img)
        rp->st.image_bytes -= m->size;
    free(m->img);
    m->img = NULL;
}

static int on_memory(mt_trace_replay *rp, const mt_trace_record *rec)
{
    uint64_t id = rec->u.memory.id;
    long i = mti_idmap_get(&rp->mem_ids, id);
    if (i >= 0) {
        if (rp->mems[i].alive)
            return MT_ECORRUPT;
        rp->mems[i] = (rmem){id, rec->u.memory.size, NULL, 1};
        return 0;
    }
    rmem *n = grow_array(rp->mems, &rp->mems_cap, rp->nmems, sizeof *n);
    if (!n)
        return -ENOMEM;
    rp->mems = n;
    if (mti_idmap_put(&rp->mem_ids, id, (uint32_t)rp->nmems) < 0)
        return -ENOMEM;
    rp->mems[rp->nmems++] = (rmem){id, rec->u.memory.size, NULL, 1};
    return 0;
}

static int on_object(mt_trace_replay *rp, const mt_trace_record *rec)
{
    uint64_t id = rec->u.object.id;
    robj o = {id, 0, 0, rec->u.object.used_size, 1, 0};
    long i = mti_idmap_get(&rp->obj_ids, id);
    if (i >= 0) {
        if (rp->objs[i].alive)
            return MT_ECORRUPT;
        rp->objs[i] = o;
        return 0;
    }
    robj *n = grow_array(rp->objs, &rp->objs_cap, rp->nobjs, sizeof *n);
    if (!n)
        return -ENOMEM;
    rp->objs = n;
    if (mti_idmap_put(&rp->obj_ids, id, (uint32_t)rp->nobjs) < 0)
        return -ENOMEM;
    rp->objs[rp->nobjs++] = o;
    return 0;
}

static int on_update(mt_trace_replay *rp, const mt_trace_record *rec)
{
    rmem *m = find_mem(rp, rec->u.update.memory);
    uint64_t off = rec->u.update.offset, len = rec->u.update.length;
    if (!m || off > m->size || len > m->size - off)
        return MT_ECORRUPT;
    rp->st.updates++;
    rp->st.update_bytes += len;
    if (!kept(rp, m->id) || len == 0)
        return 0;
    int rc = image(rp, m);
    if (rc)
        return rc;
    memcpy(m->img + off, rec->u.update.data, (size_t)len);
    return 0;
}

static int on_hash(mt_trace_replay *rp, const mt_trace_record *rec)
{
    rmem *m = find_mem(rp, rec->u.content_hash.memory);
    uint64_t off = rec->u.content_hash.offset, len = rec->u.content_hash.size;
    if (!m || off > m->size || len > m->size - off)
        return MT_ECORRUPT;
    if (!(rp->opts.flags & MT_TRACE_REPLAY_VERIFY) || !kept(rp, m->id))
        return 0;
    int rc = image(rp, m);
    if (rc)
        return rc;
    uint64_t h = mt_trace_hash(m->img + off, (size_t)len);
    rp->st.hashes_checked++;
    if (h != rec->u.content_hash.hash && rp->st.hashes_mismatched++ == 0) {
        rp->st.first_mismatch_submit = rp->next_submit;
        rp->st.first_mismatch_memory = m->id;
    }
    return 0;
}

static int on_destroy(mt_trace_replay *rp, const mt_trace_record *rec)
{
    if (rec->u.destroy.what == MT_TRACE_DESTROY_MEMORY) {
        rmem *m = find_mem(rp, rec->u.destroy.id);
        if (!m)
            return MT_ECORRUPT;
        drop_image(rp, m);
        m->alive = 0;
        return 0;
    }
    robj *o = find_obj(rp, rec->u.destroy.id);
    if (rec->u.destroy.what != MT_TRACE_DESTROY_OBJECT || !o)
        return MT_ECORRUPT;
    o->alive = 0;
    return 0;
}

static int apply(mt_trace_replay *rp, const mt_trace_record *rec)
{
    robj *o;
    switch (rec->type) {
    case MT_TRACE_MEMORY: return on_memory(rp, rec);
    case MT_TRACE_OBJECT: return on_object(rp, rec);
    case MT_TRACE_UPDATE: return on_update(rp, rec);
    case MT_TRACE_CONTENT_HASH: return on_hash(rp, rec);
    case MT_TRACE_DESTROY: return on_destroy(rp, rec);
    case MT_TRACE_BIND:
        if (!(o = find_obj(rp, rec->u.bind.object)) || !find_mem(rp, rec->u.bind.memory))
            return MT_ECORRUPT;
        o->memory = rec->u.bind.memory;
        o->offset = rec->u.bind.offset;
        o->bound = 1;
        return 0;
    case MT_TRACE_SUBMIT:
        if (rec->u.submit.index != rp->next_submit)
            return MT_ECORRUPT;
        rp->next_submit++;
        rp->st.submits++;
        return 0;
    default: return 0; /* map, unmap, frame, annotation, mode, meta: no effect on content */
    }
}

int mt_trace_replay_next(mt_trace_replay *rp, mt_trace_record *rec)
{
    mt_trace_record local;
    if (!rp)
        return -EINVAL;
    if (!rec)
        rec = &local;
    int rc = mt_trace_next(rp->r, rec);
    if (rc <= 0)
        return rc;
    rp->st.records++;
    rc = apply(rp, rec);
    return rc ? rc : 1;
}

int mt_trace_replay_to_submit(mt_trace_replay *rp, uint64_t n)
{
    if (!rp)
        return -EINVAL;
    if (n < rp->next_submit)
        return -ENOENT;
    mt_trace_record rec;
    for (;;) {
        int rc = mt_trace_replay_next(rp, &rec);
        if (rc <= 0)
            return rc ? rc : -ENOENT;
        if (rec.type == MT_TRACE_SUBMIT && rec.u.submit.index == n)
            return 0;
    }
}

int mt_trace_replay_read(mt_trace_replay *rp, uint64_t id, uint64_t offset, void *buf, size_t len)
{
    rmem *m = rp ? find_mem(rp, id) : NULL;
    if (!m || !kept(rp, id))
        return -ENOENT;
    if (offset > m->size || len > m->size - offset || (!buf && len))
        return -EINVAL;
    if (len == 0)
        return 0;
    if (m->img)
        memcpy(buf, m->img + offset, len);
    else
        memset(buf, 0, len);
    return 0;
}

int64_t mt_trace_replay_memory_size(mt_trace_replay *rp, uint64_t id)
{
    rmem *m = rp ? find_mem(rp, id) : NULL;
    return m ? (int64_t)(m->size > INT64_MAX ? INT64_MAX : m->size) : -ENOENT;
}

int mt_trace_replay_object(mt_trace_replay *rp, uint64_t id, uint64_t *memory, uint64_t *offset,
                           uint64_t *used_size)
{
    robj *o = rp ? find_obj(rp, id) : NULL;
    if (!o || !o->bound || !find_mem(rp, o->memory))
        return -ENOENT;
    *memory = o->memory;
    *offset = o->offset;
    *used_size = o->used_size;
    return 0;
}

void mt_trace_replay_stats_get(const mt_trace_replay *rp, mt_trace_replay_stats *out) { *out = rp->st; }

int mt_trace_replay_create(mt_trace_reader *r, const mt_trace_replay_opts *opts, mt_trace_replay **out)
{
    if (!r || !out)
        return -EINVAL;
    mt_trace_replay *rp = calloc(1, sizeof *rp);
    if (!rp)
        return -ENOMEM;
    rp->r = r;
    if (opts)
        rp->opts = *opts;
    if (rp->opts.max_bytes == 0)
        rp->opts.max_bytes = MT_REPLAY_DEFAULT_BUDGET;
    mt_trace_rewind(r);
    *out = rp;
    return 0;
}

void mt_trace_replay_destroy(mt_trace_replay *rp)
{
    if (!rp)
        return;
    for (size_t i = 0; i < rp->nmems; i++)
        free(rp->mems[i].img);
    free(rp->mems);
    free(rp->objs);
    mti_idmap_free(&rp->mem_ids);
    mti_idmap_free(&rp->obj_ids);
    free(rp);
}
