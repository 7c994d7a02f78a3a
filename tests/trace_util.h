/* Helpers shared by the trace tests: temp files, deep copies of records, a
 * field-by-field record comparison, a random record stream with a reference
 * model of memory contents, and a reference replay. */
#ifndef MT_TRACE_UTIL_H
#define MT_TRACE_UTIL_H

#include <errno.h>
#include <stdlib.h>
#include <unistd.h>

#include "memtrack/trace.h"
#include "mt_test.h"

/* A path in $TMPDIR (or /tmp) unique to this process and tag. */
static inline void tr_tmp_path(char *buf, size_t n, const char *tag)
{
    const char *dir = getenv("TMPDIR");
    snprintf(buf, n, "%s/mt-%s-%d.mtrace", dir && *dir ? dir : "/tmp", tag, (int)getpid());
}

static inline uint8_t *tr_read_file(const char *path, size_t *size)
{
    FILE *f = fopen(path, "rb");
    MT_CHECK(f);
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    uint8_t *b = malloc((size_t)n + 1);
    MT_CHECK(b && fread(b, 1, (size_t)n, f) == (size_t)n);
    fclose(f);
    *size = (size_t)n;
    return b;
}

/* A record with its own copies of the bytes it points to. */
typedef struct tr_rec {
    mt_trace_record r;
    uint8_t *owned;
} tr_rec;

static inline void tr_own(tr_rec *t, const mt_trace_record *r)
{
    t->r = *r;
    t->owned = NULL;
    const void *a = NULL, *b = NULL;
    size_t na = 0, nb = 0;
    switch (r->type) {
    case MT_TRACE_META: a = r->u.meta.key, na = r->u.meta.key_len, b = r->u.meta.value, nb = r->u.meta.value_len; break;
    case MT_TRACE_UPDATE: a = r->u.update.data, na = r->u.update.length; break;
    case MT_TRACE_ANNOTATION: a = r->u.annotation.text, na = r->u.annotation.length; break;
    case MT_TRACE_MODE: a = r->u.mode.mode, na = r->u.mode.length; break;
    default: return;
    }
    t->owned = malloc(na + nb + 1);
    MT_CHECK(t->owned);
    if (na)
        memcpy(t->owned, a, na);
    if (nb)
        memcpy(t->owned + na, b, nb);
    switch (r->type) {
    case MT_TRACE_META: t->r.u.meta.key = (char *)t->owned, t->r.u.meta.value = (char *)t->owned + na; break;
    case MT_TRACE_UPDATE: t->r.u.update.data = t->owned; break;
    case MT_TRACE_ANNOTATION: t->r.u.annotation.text = (char *)t->owned; break;
    case MT_TRACE_MODE: t->r.u.mode.mode = (char *)t->owned; break;
    default: break;
    }
}

/* A META record pointing at two C strings. */
static inline mt_trace_record tr_meta_record(const char *key, const char *value)
{
    mt_trace_record r = {.type = MT_TRACE_META};
    r.u.meta.key = key, r.u.meta.key_len = strlen(key);
    r.u.meta.value = value, r.u.meta.value_len = strlen(value);
    return r;
}

#define TR_EQ_BYTES(p, q, n) MT_CHECK((n) == 0 || memcmp((p), (q), (n)) == 0)

/* Exact equality of two records, every field of the type. */
static inline void tr_check_equal(const mt_trace_record *a, const mt_trace_record *b)
{
    MT_CHECK_INT_EQ(a->type, b->type);
    switch (a->type) {
    case MT_TRACE_META:
        MT_CHECK_UINT_EQ(a->u.meta.key_len, b->u.meta.key_len);
        MT_CHECK_UINT_EQ(a->u.meta.value_len, b->u.meta.value_len);
        TR_EQ_BYTES(a->u.meta.key, b->u.meta.key, a->u.meta.key_len);
        TR_EQ_BYTES(a->u.meta.value, b->u.meta.value, a->u.meta.value_len);
        break;
    case MT_TRACE_MEMORY:
        MT_CHECK_UINT_EQ(a->u.memory.id, b->u.memory.id);
        MT_CHECK_UINT_EQ(a->u.memory.size, b->u.memory.size);
        MT_CHECK_UINT_EQ(a->u.memory.type_index, b->u.memory.type_index);
        MT_CHECK_UINT_EQ(a->u.memory.property_flags, b->u.memory.property_flags);
        break;
    case MT_TRACE_OBJECT:
        MT_CHECK_UINT_EQ(a->u.object.id, b->u.object.id);
        MT_CHECK_UINT_EQ(a->u.object.kind, b->u.object.kind);
        MT_CHECK_UINT_EQ(a->u.object.size, b->u.object.size);
        MT_CHECK_UINT_EQ(a->u.object.used_size, b->u.object.used_size);
        break;
    case MT_TRACE_BIND:
        MT_CHECK_UINT_EQ(a->u.bind.object, b->u.bind.object);
        MT_CHECK_UINT_EQ(a->u.bind.memory, b->u.bind.memory);
        MT_CHECK_UINT_EQ(a->u.bind.offset, b->u.bind.offset);
        break;
    case MT_TRACE_MAP:
        MT_CHECK_UINT_EQ(a->u.map.memory, b->u.map.memory);
        MT_CHECK_UINT_EQ(a->u.map.offset, b->u.map.offset);
        MT_CHECK_UINT_EQ(a->u.map.size, b->u.map.size);
        break;
    case MT_TRACE_UNMAP: MT_CHECK_UINT_EQ(a->u.unmap.memory, b->u.unmap.memory); break;
    case MT_TRACE_UPDATE:
        MT_CHECK_UINT_EQ(a->u.update.memory, b->u.update.memory);
        MT_CHECK_UINT_EQ(a->u.update.object, b->u.update.object);
        MT_CHECK_UINT_EQ(a->u.update.offset, b->u.update.offset);
        MT_CHECK_UINT_EQ(a->u.update.length, b->u.update.length);
        TR_EQ_BYTES(a->u.update.data, b->u.update.data, a->u.update.length);
        break;
    case MT_TRACE_SUBMIT:
        MT_CHECK_UINT_EQ(a->u.submit.index, b->u.submit.index);
        MT_CHECK_UINT_EQ(a->u.submit.queue, b->u.submit.queue);
        break;
    case MT_TRACE_FRAME: MT_CHECK_UINT_EQ(a->u.frame.index, b->u.frame.index); break;
    case MT_TRACE_DESTROY:
        MT_CHECK_UINT_EQ(a->u.destroy.what, b->u.destroy.what);
        MT_CHECK_UINT_EQ(a->u.destroy.id, b->u.destroy.id);
        break;
    case MT_TRACE_ANNOTATION:
        MT_CHECK_UINT_EQ(a->u.annotation.id, b->u.annotation.id);
        MT_CHECK_UINT_EQ(a->u.annotation.length, b->u.annotation.length);
        TR_EQ_BYTES(a->u.annotation.text, b->u.annotation.text, a->u.annotation.length);
        break;
    case MT_TRACE_CONTENT_HASH:
        MT_CHECK_UINT_EQ(a->u.content_hash.memory, b->u.content_hash.memory);
        MT_CHECK_UINT_EQ(a->u.content_hash.offset, b->u.content_hash.offset);
        MT_CHECK_UINT_EQ(a->u.content_hash.size, b->u.content_hash.size);
        MT_CHECK_UINT_EQ(a->u.content_hash.hash, b->u.content_hash.hash);
        break;
    case MT_TRACE_MODE:
        MT_CHECK_UINT_EQ(a->u.mode.memory, b->u.mode.memory);
        MT_CHECK_UINT_EQ(a->u.mode.length, b->u.mode.length);
        TR_EQ_BYTES(a->u.mode.mode, b->u.mode.mode, a->u.mode.length);
        break;
    case MT_TRACE_MISMATCH:
        MT_CHECK_UINT_EQ(a->u.mismatch.memory, b->u.mismatch.memory);
        MT_CHECK_UINT_EQ(a->u.mismatch.object, b->u.mismatch.object);
        MT_CHECK_UINT_EQ(a->u.mismatch.offset, b->u.mismatch.offset);
        MT_CHECK_UINT_EQ(a->u.mismatch.length, b->u.mismatch.length);
        MT_CHECK_UINT_EQ(a->u.mismatch.cause, b->u.mismatch.cause);
        MT_CHECK_UINT_EQ(a->u.mismatch.running, b->u.mismatch.running);
        break;
    }
}

/* ---- a random, rule-abiding record stream with a reference model ---------- */

typedef struct tr_mem {
    uint64_t id, size;
    uint8_t *content;
    int alive;
} tr_mem;

typedef struct tr_gen {
    uint64_t rng;
    tr_mem mems[16];
    size_t nmems;
    uint64_t next_id, submits, frames, objects[32];
    size_t nobjects;
    size_t big_size; /* some updates are this large, to be split across chunks */
    uint8_t *scratch;
} tr_gen;

static inline void tr_gen_init(tr_gen *g, uint64_t seed, size_t big_size)
{
    memset(g, 0, sizeof *g);
    g->rng = seed;
    g->next_id = 1;
    g->big_size = big_size;
    g->scratch = malloc(big_size + 70000);
    MT_CHECK(g->scratch);
}

static inline void tr_gen_free(tr_gen *g)
{
    for (size_t i = 0; i < g->nmems; i++)
        free(g->mems[i].content);
    free(g->scratch);
}

static inline tr_mem *tr_gen_live_mem(tr_gen *g)
{
    size_t alive = 0;
    for (size_t i = 0; i < g->nmems; i++)
        alive += g->mems[i].alive;
    if (!alive)
        return NULL;
    size_t k = mt_test_below(&g->rng, alive);
    for (size_t i = 0; i < g->nmems; i++)
        if (g->mems[i].alive && k-- == 0)
            return &g->mems[i];
    return NULL;
}

/* Fills *r with the next record (pointing into g's scratch) and updates the
 * model. Index fields of SUBMIT/FRAME hold what the writer will assign. */
static inline void tr_gen_next(tr_gen *g, mt_trace_record *r)
{
    static const char *modes[] = {"guard", "shadow", "scan", "copy"};
    memset(r, 0, sizeof *r);
    uint64_t dice = mt_test_below(&g->rng, 100);
    tr_mem *m = tr_gen_live_mem(g);
    if (!m || (dice < 4 && g->nmems < 16)) {
        if (g->nmems == 16) { /* recycle a dead slot's storage */
            for (size_t i = 0; i < g->nmems; i++)
                if (!g->mems[i].alive) { m = &g->mems[i]; break; }
            if (!m) { m = &g->mems[0]; }
            free(m->content);
        } else {
            m = &g->mems[g->nmems++];
        }
        uint64_t size = 1 + mt_test_below(&g->rng, mt_test_below(&g->rng, 4) ? 4096 : 3 * g->big_size);
        *m = (tr_mem){g->next_id++, size, calloc(1, size), 1};
        MT_CHECK(m->content);
        r->type = MT_TRACE_MEMORY;
        r->u.memory.id = m->id;
        r->u.memory.size = size;
        r->u.memory.type_index = (uint32_t)mt_test_below(&g->rng, 32);
        r->u.memory.property_flags = (uint32_t)mt_test_rand(&g->rng);
    } else if (dice < 55) {
        uint64_t off = mt_test_below(&g->rng, m->size);
        uint64_t max = m->size - off;
        uint64_t len = mt_test_below(&g->rng, 10) == 0 ? max : 1 + mt_test_below(&g->rng, max < 600 ? max : 600);
        if (len > g->big_size + 65536)
            len = g->big_size + 65536;
        int pattern = (int)mt_test_below(&g->rng, 3);
        for (uint64_t i = 0; i < len; i++)
            g->scratch[i] = pattern == 0 ? (uint8_t)mt_test_rand(&g->rng) : pattern == 1 ? (uint8_t)(i / 16) : 0;
        memcpy(m->content + off, g->scratch, len);
        r->type = MT_TRACE_UPDATE;
        r->u.update.memory = m->id;
        r->u.update.object = g->nobjects && mt_test_below(&g->rng, 2) ? g->objects[mt_test_below(&g->rng, g->nobjects)] : 0;
        r->u.update.offset = off;
        r->u.update.data = g->scratch;
        r->u.update.length = (size_t)len;
    } else if (dice < 63) {
        r->type = MT_TRACE_CONTENT_HASH;
        r->u.content_hash.memory = m->id;
        r->u.content_hash.offset = mt_test_below(&g->rng, 2) ? 0 : mt_test_below(&g->rng, m->size + 1);
        r->u.content_hash.size = mt_test_below(&g->rng, 2) ? m->size - r->u.content_hash.offset
                                                         : mt_test_below(&g->rng, m->size - r->u.content_hash.offset + 1);
        r->u.content_hash.hash = mt_trace_hash(m->content + r->u.content_hash.offset,
                                               (size_t)r->u.content_hash.size);
    } else if (dice < 75) {
        r->type = MT_TRACE_SUBMIT;
        r->u.submit.index = g->submits++;
        r->u.submit.queue = mt_test_below(&g->rng, 3);
    } else if (dice < 78) {
        r->type = MT_TRACE_FRAME;
        r->u.frame.index = g->frames++;
    } else if (dice < 82 && g->nobjects < 32) {
        uint64_t id = g->next_id++;
        g->objects[g->nobjects++] = id;
        r->type = MT_TRACE_OBJECT;
        r->u.object.id = id;
        r->u.object.kind = 1 + (uint32_t)mt_test_below(&g->rng, 2);
        r->u.object.size = 1 + mt_test_below(&g->rng, 2048);
        r->u.object.used_size = r->u.object.size - mt_test_below(&g->rng, r->u.object.size);
    } else if (dice < 86 && g->nobjects) {
        r->type = MT_TRACE_BIND;
        r->u.bind.object = g->objects[mt_test_below(&g->rng, g->nobjects)];
        r->u.bind.memory = m->id;
        r->u.bind.offset = mt_test_below(&g->rng, m->size);
    } else if (dice < 90) {
        r->type = mt_test_below(&g->rng, 2) ? MT_TRACE_MAP : MT_TRACE_UNMAP;
        r->u.map.memory = m->id;
        if (r->type == MT_TRACE_MAP) {
            r->u.map.offset = mt_test_below(&g->rng, m->size);
            r->u.map.size = m->size - r->u.map.offset;
        }
    } else if (dice < 91) {
        r->type = MT_TRACE_MISMATCH;
        r->u.mismatch.memory = m->id;
        r->u.mismatch.object = mt_test_below(&g->rng, 2) && g->nobjects ? g->objects[0] : 0;
        r->u.mismatch.offset = mt_test_below(&g->rng, m->size);
        r->u.mismatch.length = 1 + mt_test_below(&g->rng, m->size - r->u.mismatch.offset);
        r->u.mismatch.cause = 1 + (uint32_t)mt_test_below(&g->rng, 3);
        r->u.mismatch.running = mt_test_below(&g->rng, 3);
    } else if (dice < 92) {
        r->type = MT_TRACE_MODE;
        const char *s = modes[mt_test_below(&g->rng, 4)];
        r->u.mode.memory = m->id;
        r->u.mode.mode = s;
        r->u.mode.length = strlen(s);
    } else if (dice < 98) {
        size_t n = mt_test_below(&g->rng, 200);
        for (size_t i = 0; i < n; i++)
            g->scratch[i] = (uint8_t)(' ' + mt_test_below(&g->rng, 90));
        r->type = mt_test_below(&g->rng, 2) ? MT_TRACE_ANNOTATION : MT_TRACE_META;
        if (r->type == MT_TRACE_ANNOTATION) {
            r->u.annotation.id = mt_test_below(&g->rng, 2) ? m->id : 0;
            r->u.annotation.text = (char *)g->scratch;
            r->u.annotation.length = n;
        } else {
            size_t k = n ? mt_test_below(&g->rng, n) : 0;
            r->u.meta.key = (char *)g->scratch;
            r->u.meta.key_len = k;
            r->u.meta.value = (char *)g->scratch + k;
            r->u.meta.value_len = n - k;
        }
    } else if (g->nmems > 1) {
        r->type = MT_TRACE_DESTROY;
        r->u.destroy.what = MT_TRACE_DESTROY_MEMORY;
        r->u.destroy.id = m->id;
        m->alive = 0;
    } else {
        r->type = MT_TRACE_SUBMIT;
        r->u.submit.index = g->submits++;
    }
}

/* Reference replay over an owned record list: content of memory `id` at
 * SUBMIT `submit` into out (size from the MEMORY record); returns the size,
 * or -1 when the memory is not alive then or the submit never comes. */
static inline long tr_ref_content(const tr_rec *recs, size_t n, uint64_t id, uint64_t submit, uint8_t *out)
{
    long size = -1;
    for (size_t i = 0; i < n; i++) {
        const mt_trace_record *r = &recs[i].r;
        if (r->type == MT_TRACE_MEMORY && r->u.memory.id == id) {
            size = (long)r->u.memory.size;
            memset(out, 0, (size_t)size);
        } else if (r->type == MT_TRACE_DESTROY && r->u.destroy.what == MT_TRACE_DESTROY_MEMORY &&
                   r->u.destroy.id == id) {
            size = -1;
        } else if (r->type == MT_TRACE_UPDATE && r->u.update.memory == id) {
            memcpy(out + r->u.update.offset, r->u.update.data, r->u.update.length);
        } else if (r->type == MT_TRACE_SUBMIT && r->u.submit.index == submit) {
            return size;
        }
    }
    return -1;
}

#endif
