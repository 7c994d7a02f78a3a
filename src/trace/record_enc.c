/* Record encoding: every record type reduced to one layout (varint fields,
 * then optional "mid" bytes, an optional fixed u64, then "tail" bytes), so
 * sizing and writing share one description per type. */
#include "format.h"

typedef struct rec_layout {
    uint8_t type;
    unsigned nf;
    uint64_t f[6];
    const void *mid, *tail;
    size_t mid_len, tail_len;
    int has_fixed;
    uint64_t fixed;
} rec_layout;

static int text_ok(const void *p, size_t n) { return (p || n == 0) && n <= MT_TRACE_MAX_TEXT; }

#define F(...)                                                                                     \
    do {                                                                                           \
        const uint64_t v_[] = {__VA_ARGS__};                                                       \
        L->nf = sizeof v_ / sizeof v_[0];                                                          \
        memcpy(L->f, v_, sizeof v_);                                                               \
    } while (0)

static int layout(const mt_trace_record *r, rec_layout *L)
{
    memset(L, 0, sizeof *L);
    L->type = (uint8_t)r->type;
    switch (r->type) {
    case MT_TRACE_META:
        if (!text_ok(r->u.meta.key, r->u.meta.key_len) || !text_ok(r->u.meta.value, r->u.meta.value_len))
            return -1;
        F(r->u.meta.key_len);
        L->mid = r->u.meta.key, L->mid_len = r->u.meta.key_len;
        L->tail = r->u.meta.value, L->tail_len = r->u.meta.value_len;
        return 0;
    case MT_TRACE_MEMORY:
        F(r->u.memory.id, r->u.memory.size, r->u.memory.type_index, r->u.memory.property_flags);
        return 0;
    case MT_TRACE_OBJECT:
        F(r->u.object.id, r->u.object.kind, r->u.object.size, r->u.object.used_size);
        return 0;
    case MT_TRACE_BIND: F(r->u.bind.object, r->u.bind.memory, r->u.bind.offset); return 0;
    case MT_TRACE_MAP: F(r->u.map.memory, r->u.map.offset, r->u.map.size); return 0;
    case MT_TRACE_UNMAP: F(r->u.unmap.memory); return 0;
    case MT_TRACE_UPDATE:
        if (!r->u.update.data && r->u.update.length)
            return -1;
        F(r->u.update.memory, r->u.update.object, r->u.update.offset);
        L->tail = r->u.update.data, L->tail_len = r->u.update.length;
        return 0;
    case MT_TRACE_SUBMIT: F(r->u.submit.index, r->u.submit.queue); return 0;
    case MT_TRACE_FRAME: F(r->u.frame.index); return 0;
    case MT_TRACE_DESTROY: F(r->u.destroy.what, r->u.destroy.id); return 0;
    case MT_TRACE_ANNOTATION:
        if (!text_ok(r->u.annotation.text, r->u.annotation.length))
            return -1;
        F(r->u.annotation.id);
        L->tail = r->u.annotation.text, L->tail_len = r->u.annotation.length;
        return 0;
    case MT_TRACE_CONTENT_HASH:
        F(r->u.content_hash.memory, r->u.content_hash.offset, r->u.content_hash.size);
        L->has_fixed = 1, L->fixed = r->u.content_hash.hash;
        return 0;
    case MT_TRACE_MODE:
        if (!text_ok(r->u.mode.mode, r->u.mode.length))
            return -1;
        F(r->u.mode.memory);
        L->tail = r->u.mode.mode, L->tail_len = r->u.mode.length;
        return 0;
    case MT_TRACE_MISMATCH:
        if (r->u.mismatch.cause < MT_TRACE_MISMATCH_HOST || r->u.mismatch.cause > MT_TRACE_MISMATCH_LOST ||
            r->u.mismatch.offset > UINT64_MAX - r->u.mismatch.length)
            return -1;
        F(r->u.mismatch.memory, r->u.mismatch.object, r->u.mismatch.offset, r->u.mismatch.length,
          r->u.mismatch.cause, r->u.mismatch.running);
        return 0;
    }
    return -1;
}

static size_t body_size(const rec_layout *L)
{
    size_t n = L->mid_len + L->tail_len + (L->has_fixed ? 8 : 0);
    for (unsigned i = 0; i < L->nf; i++)
        n += mti_varint_len(L->f[i]);
    return n;
}

size_t mti_record_size(const mt_trace_record *rec)
{
    rec_layout L;
    if (!rec || layout(rec, &L) < 0)
        return 0;
    size_t body = body_size(&L);
    return 1 + mti_varint_len(body) + body;
}

size_t mti_record_put(uint8_t *out, const mt_trace_record *rec)
{
    rec_layout L;
    if (layout(rec, &L) < 0)
        return 0;
    uint8_t *p = out;
    *p++ = L.type;
    p += mti_varint_put(p, body_size(&L));
    for (unsigned i = 0; i < L.nf; i++)
        p += mti_varint_put(p, L.f[i]);
    if (L.mid_len)
        memcpy(p, L.mid, L.mid_len), p += L.mid_len;
    if (L.has_fixed)
        mti_put64(p, L.fixed), p += 8;
    if (L.tail_len)
        memcpy(p, L.tail, L.tail_len), p += L.tail_len;
    return (size_t)(p - out);
}
