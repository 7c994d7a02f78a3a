/* Record decoding. The body length is checked against the chunk before
 * anything else; every field is then read inside the body, so a lying field
 * can at worst make the record MT_ECORRUPT. Values that the API narrows
 * (memory type index, flags, kinds) must fit their field. */
#include "format.h"

typedef struct body {
    const uint8_t *p, *end;
} body;

static int f64(body *b, uint64_t *v) { return mti_varint_get(&b->p, b->end, v); }

static int f32(body *b, uint32_t *v)
{
    uint64_t x;
    if (mti_varint_get(&b->p, b->end, &x) < 0 || x > UINT32_MAX)
        return -1;
    *v = (uint32_t)x;
    return 0;
}

/* The rest of the body as bytes. */
static void rest(body *b, const void **p, size_t *n)
{
    *p = b->p;
    *n = (size_t)(b->end - b->p);
    b->p = b->end;
}

/* Returns 0, or non-zero when a field is missing or out of range. Fields are
 * read in order: every multi-field case uses ||, which sequences them. */
static int decode_body(uint8_t type, body *b, mt_trace_record *r)
{
    const void *t;
    uint64_t klen;
    switch (type) {
    case MT_TRACE_META:
        if (f64(b, &klen) < 0 || klen > (uint64_t)(b->end - b->p))
            return -1;
        r->u.meta.key = (const char *)b->p;
        r->u.meta.key_len = (size_t)klen;
        b->p += klen;
        rest(b, &t, &r->u.meta.value_len);
        r->u.meta.value = t;
        return 0;
    case MT_TRACE_MEMORY:
        return f64(b, &r->u.memory.id) || f64(b, &r->u.memory.size) || f32(b, &r->u.memory.type_index) |
               f32(b, &r->u.memory.property_flags);
    case MT_TRACE_OBJECT:
        return f64(b, &r->u.object.id) || f32(b, &r->u.object.kind) || f64(b, &r->u.object.size) |
               f64(b, &r->u.object.used_size);
    case MT_TRACE_BIND:
        return f64(b, &r->u.bind.object) || f64(b, &r->u.bind.memory) || f64(b, &r->u.bind.offset);
    case MT_TRACE_MAP:
        return f64(b, &r->u.map.memory) || f64(b, &r->u.map.offset) || f64(b, &r->u.map.size);
    case MT_TRACE_UNMAP:
        return f64(b, &r->u.unmap.memory);
    case MT_TRACE_UPDATE:
        if (f64(b, &r->u.update.memory) || f64(b, &r->u.update.object) || f64(b, &r->u.update.offset))
            return -1;
        rest(b, &r->u.update.data, &r->u.update.length);
        return 0;
    case MT_TRACE_SUBMIT:
        return f64(b, &r->u.submit.index) || f64(b, &r->u.submit.queue);
    case MT_TRACE_FRAME:
        return f64(b, &r->u.frame.index);
    case MT_TRACE_DESTROY:
        return f32(b, &r->u.destroy.what) || f64(b, &r->u.destroy.id);
    case MT_TRACE_ANNOTATION:
        if (f64(b, &r->u.annotation.id) < 0)
            return -1;
        rest(b, &t, &r->u.annotation.length);
        r->u.annotation.text = t;
        return 0;
    case MT_TRACE_CONTENT_HASH:
        if (f64(b, &r->u.content_hash.memory) || f64(b, &r->u.content_hash.offset) ||
            f64(b, &r->u.content_hash.size) || b->end - b->p < 8)
            return -1;
        r->u.content_hash.hash = mti_get64(b->p);
        b->p += 8;
        return 0;
    case MT_TRACE_MODE:
        if (f64(b, &r->u.mode.memory) < 0)
            return -1;
        rest(b, &t, &r->u.mode.length);
        r->u.mode.mode = t;
        return 0;
    case MT_TRACE_MISMATCH:
        if (f64(b, &r->u.mismatch.memory) || f64(b, &r->u.mismatch.object) ||
            f64(b, &r->u.mismatch.offset) || f64(b, &r->u.mismatch.length) ||
            f32(b, &r->u.mismatch.cause) || f64(b, &r->u.mismatch.running))
            return -1;
        if (r->u.mismatch.cause < MT_TRACE_MISMATCH_HOST || r->u.mismatch.cause > MT_TRACE_MISMATCH_LOST ||
            r->u.mismatch.offset > UINT64_MAX - r->u.mismatch.length)
            return -1;
        return 0;
    }
    return -1;
}

int mti_record_get(const uint8_t **p, const uint8_t *end, mt_trace_record *rec)
{
    const uint8_t *q = *p;
    uint64_t len;
    if (q >= end)
        return MT_ECORRUPT;
    uint8_t type = *q++;
    if (type == 0 || mti_varint_get(&q, end, &len) < 0 || len > (uint64_t)(end - q))
        return MT_ECORRUPT;
    body b = {q, q + len};
    *p = q + len;
    if (type > MT_REC_LAST_KNOWN)
        return type >= MT_REC_FIRST_CRITICAL ? MT_EVERSION : 0;
    memset(rec, 0, sizeof *rec);
    rec->type = (mt_trace_rec_type)type;
    if (decode_body(type, &b, rec) != 0)
        return MT_ECORRUPT;
    return 1; /* extra body bytes (a later minor version's fields) are ignored */
}
