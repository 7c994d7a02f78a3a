/* memtrack report, first half: one pass over the trace's records (the public
 * reader, no replay: no memory images are kept, so a trace of any size
 * reports in bounded memory), aggregated into fixed-size bins. */
#define _GNU_SOURCE
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "progress.h"
#include "report.h"

/* Ids grow in creation order (docs/trace-format.md), so lookups are a binary
 * search and inserts almost always an append. */
#define FIND_BY_ID(arr, n, want)                                                                   \
    ({                                                                                             \
        size_t lo_ = 0, hi_ = (n);                                                                 \
        while (lo_ < hi_) {                                                                        \
            size_t mid_ = (lo_ + hi_) / 2;                                                         \
            if ((arr)[mid_].id < (want))                                                           \
                lo_ = mid_ + 1;                                                                    \
            else                                                                                   \
                hi_ = mid_;                                                                        \
        }                                                                                          \
        lo_;                                                                                       \
    })

static int grow(void **p, size_t *cap, size_t need, size_t elem)
{
    if (need <= *cap)
        return 0;
    size_t c = *cap ? *cap * 2 : 64;
    while (c < need)
        c *= 2;
    void *q = realloc(*p, c * elem);
    if (!q)
        return -ENOMEM;
    *p = q;
    *cap = c;
    return 0;
}

static rp_mem *mem_get(report *r, uint64_t id)
{
    size_t i = FIND_BY_ID(r->mems, r->nmems, id);
    return i < r->nmems && r->mems[i].id == id ? &r->mems[i] : NULL;
}

static rp_obj *obj_get(report *r, uint64_t id)
{
    size_t i = FIND_BY_ID(r->objs, r->nobjs, id);
    return i < r->nobjs && r->objs[i].id == id ? &r->objs[i] : NULL;
}

/* A memory created again after its destruction keeps one row: the report
 * is about what was written, by id. */
static rp_mem *mem_add(report *r, uint64_t id)
{
    size_t i = FIND_BY_ID(r->mems, r->nmems, id);
    if (i < r->nmems && r->mems[i].id == id)
        return &r->mems[i];
    if (grow((void **)&r->mems, &r->capmems, r->nmems + 1, sizeof *r->mems))
        return NULL;
    memmove(&r->mems[i + 1], &r->mems[i], (r->nmems - i) * sizeof *r->mems);
    r->nmems++;
    r->mems[i] = (rp_mem){.id = id, .destroyed = UINT64_MAX};
    return &r->mems[i];
}

static rp_obj *obj_add(report *r, uint64_t id)
{
    size_t i = FIND_BY_ID(r->objs, r->nobjs, id);
    if (i < r->nobjs && r->objs[i].id == id)
        return &r->objs[i];
    if (grow((void **)&r->objs, &r->capobjs, r->nobjs + 1, sizeof *r->objs))
        return NULL;
    memmove(&r->objs[i + 1], &r->objs[i], (r->nobjs - i) * sizeof *r->objs);
    r->nobjs++;
    r->objs[i] = (rp_obj){.id = id};
    return &r->objs[i];
}

/* The submit a record belongs to (records after the last SUBMIT form the
 * tail column), its heatmap column and its series point. */
static uint64_t cur_submit(const report *r)
{
    return r->submits_seen < r->ncols_submits ? r->submits_seen : r->ncols_submits - 1;
}
static uint32_t col_of(const report *r, uint64_t s) { return (uint32_t)(s * r->cols / r->ncols_submits); }
static uint32_t point_of(const report *r, uint64_t s)
{
    return (uint32_t)(s * r->npoints / r->ncols_submits);
}

static void on_update(report *r, const mt_trace_record *rec)
{
    uint64_t len = rec->u.update.length, s = cur_submit(r);
    r->updates++;
    r->update_bytes += len;
    r->s_sum[point_of(r, s)] += (double)len;
    rp_mem *m = mem_get(r, rec->u.update.memory);
    if (!m)
        return; /* the reader validates framing, not meaning: skip an unknown memory */
    m->bytes += len;
    m->updates++;
    uint32_t c = col_of(r, s);
    if (!m->row && !(m->row = calloc(RP_COLS, sizeof *m->row)))
        return;
    m->row[c] += (float)len;
    if (!m->grid && r->ngrids < RP_GRID_MEMS && m->size) {
        uint64_t pages = (m->size + 4095) / 4096;
        m->pb = pages < RP_PAGE_ROWS ? (uint32_t)pages : RP_PAGE_ROWS;
        if ((m->grid = calloc((size_t)m->pb * RP_COLS, sizeof *m->grid)) != NULL)
            r->ngrids++;
    }
    if (m->grid) {
        /* Spread the bytes over the page rows the range covers. */
        uint64_t off = rec->u.update.offset, end = off + len;
        if (end > m->size)
            end = m->size;
        while (off < end) {
            uint32_t row = (uint32_t)((__uint128_t)off * m->pb / m->size);
            uint64_t row_end = (uint64_t)(((__uint128_t)(row + 1) * m->size + m->pb - 1) / m->pb);
            uint64_t n = (row_end < end ? row_end : end) - off;
            if (n == 0)
                n = end - off;
            m->grid[(size_t)row * RP_COLS + c] += (float)n;
            off += n;
        }
    }
    rp_obj *o = rec->u.update.object ? obj_get(r, rec->u.update.object) : NULL;
    if (o)
        o->bytes += len;
}

static void on_mode(report *r, const mt_trace_record *rec)
{
    rp_mem *m = mem_get(r, rec->u.mode.memory);
    size_t len = rec->u.mode.length;
    char text[sizeof m->mode];
    snprintf(text, sizeof text, "%.*s", (int)(len < sizeof text - 1 ? len : sizeof text - 1),
             rec->u.mode.mode);
    /* A memory mapped every frame states its mode at every map ("scan
     * (auto)"), after a decision that gave the reason ("scan (auto):
     * density rose"): only a change of the mode itself is a decision. */
    size_t mode_len = strcspn(text, ":");
    if (m && strcspn(m->mode, ":") == mode_len && strncmp(m->mode, text, mode_len) == 0)
        return;
    if (m) {
        if (m->mode[0])
            m->mode_changes++;
        snprintf(m->mode, sizeof m->mode, "%s", text);
    }
    r->events_total++;
    if (r->nevents < RP_EVENTS) {
        rp_event *e = &r->events[r->nevents++];
        e->submit = cur_submit(r);
        e->memory = rec->u.mode.memory;
        snprintf(e->text, sizeof e->text, "%s", text);
    }
}

static void on_mismatch(report *r, const mt_trace_record *rec)
{
    uint32_t c = rec->u.mismatch.cause <= 3 ? rec->u.mismatch.cause : 3;
    r->mis_count[c]++;
    r->mis_bytes[c] += rec->u.mismatch.length;
    if (r->nmis < RP_MISMATCHES)
        r->mis[r->nmis++] = (rp_mismatch){cur_submit(r), rec->u.mismatch.memory, rec->u.mismatch.object,
                                          rec->u.mismatch.offset, rec->u.mismatch.length,
                                          rec->u.mismatch.running, c};
}

static void on_record(report *r, const mt_trace_record *rec)
{
    rp_mem *m;
    rp_obj *o;
    r->records++;
    switch (rec->type) {
    case MT_TRACE_MEMORY:
        if ((m = mem_add(r, rec->u.memory.id)) != NULL) {
            m->size = rec->u.memory.size;
            m->type = rec->u.memory.type_index;
            m->flags = rec->u.memory.property_flags;
            m->created = cur_submit(r);
            m->destroyed = UINT64_MAX;
        }
        break;
    case MT_TRACE_OBJECT:
        if ((o = obj_add(r, rec->u.object.id)) != NULL) {
            o->kind = rec->u.object.kind;
            o->size = rec->u.object.size;
            o->used = rec->u.object.used_size;
        }
        break;
    case MT_TRACE_BIND:
        if ((o = obj_get(r, rec->u.bind.object)) != NULL) {
            o->memory = rec->u.bind.memory;
            o->offset = rec->u.bind.offset;
            if ((m = mem_get(r, o->memory)) != NULL)
                m->objects++;
        }
        break;
    case MT_TRACE_MAP:
        if ((m = mem_get(r, rec->u.map.memory)) != NULL)
            m->maps++;
        break;
    case MT_TRACE_DESTROY:
        if (rec->u.destroy.what == MT_TRACE_DESTROY_MEMORY && (m = mem_get(r, rec->u.destroy.id)))
            m->destroyed = cur_submit(r);
        break;
    case MT_TRACE_UPDATE: on_update(r, rec); break;
    case MT_TRACE_SUBMIT: /* the point's maximum: mt_report_collect */
        r->s_n[point_of(r, cur_submit(r))]++;
        r->submits_seen++;
        break;
    case MT_TRACE_FRAME: r->frames++, r->s_frames[point_of(r, cur_submit(r))]++; break;
    case MT_TRACE_CONTENT_HASH: r->hashes++; break;
    case MT_TRACE_MODE: on_mode(r, rec); break;
    case MT_TRACE_MISMATCH: on_mismatch(r, rec); break;
    case MT_TRACE_ANNOTATION:
        r->notes_total++;
        if (r->nnotes < RP_ANNOTATIONS) {
            rp_annotation *a = &r->notes[r->nnotes++];
            a->submit = cur_submit(r);
            a->id = rec->u.annotation.id;
            size_t n = rec->u.annotation.length;
            snprintf(a->text, sizeof a->text, "%.*s", (int)(n < sizeof a->text - 1 ? n : sizeof a->text - 1),
                     rec->u.annotation.text);
        }
        break;
    default: break;
    }
}

int mt_report_collect(report *r, int progress)
{
    mt_trace_reader *rd;
    int rc = mt_trace_reader_open(r->path, NULL, &rd);
    if (rc)
        return rc;
    mt_trace_reader_info(rd, &r->inf);
    r->ncols_submits = r->inf.submits + (r->inf.tail_records || r->inf.submits == 0);
    r->cols = r->ncols_submits < RP_COLS ? (uint32_t)r->ncols_submits : RP_COLS;
    r->npoints = r->ncols_submits < RP_SERIES ? (uint32_t)r->ncols_submits : RP_SERIES;
    r->events = malloc(RP_EVENTS * sizeof *r->events);
    r->mis = malloc(RP_MISMATCHES * sizeof *r->mis);
    r->notes = malloc(RP_ANNOTATIONS * sizeof *r->notes);
    if (!r->events || !r->mis || !r->notes) {
        mt_trace_reader_close(rd);
        mt_report_free(r);
        return -ENOMEM;
    }
    mt_cli_progress prog;
    mt_cli_progress_start(&prog, "report", r->inf.submits, progress);
    mt_trace_record rec;
    uint64_t before = 0; /* update bytes before the current submit */
    while ((rc = mt_trace_next(rd, &rec)) == 1) {
        on_record(r, &rec);
        if (rec.type == MT_TRACE_SUBMIT) {
            /* The submit's own bytes, for the point's maximum. */
            uint32_t p = point_of(r, r->submits_seen - 1 < r->ncols_submits ? r->submits_seen - 1
                                                                               : r->ncols_submits - 1);
            double mine = (double)(r->update_bytes - before);
            if (mine > r->s_max[p])
                r->s_max[p] = mine;
            before = r->update_bytes;
            mt_cli_progress_tick(&prog, r->submits_seen);
        }
    }
    mt_cli_progress_end(&prog);
    if (r->update_bytes > before) { /* the tail's bytes: a submit cut short */
        uint32_t p = point_of(r, r->ncols_submits - 1);
        r->s_n[p] += r->s_n[p] == 0;
        if ((double)(r->update_bytes - before) > r->s_max[p])
            r->s_max[p] = (double)(r->update_bytes - before);
    }
    r->error = rc < 0 ? rc : 0;
    /* Chunk sizes come from the index: keep the reader's view in r. */
    r->chunks = calloc(r->inf.chunks ? r->inf.chunks : 1, sizeof *r->chunks);
    for (size_t i = 0; r->chunks && i < r->inf.chunks; i++)
        if (mt_trace_chunk_at(rd, i, &r->chunks[i]) != 0)
            break;
    mt_trace_reader_close(rd);
    return 0;
}

void mt_report_free(report *r)
{
    for (size_t i = 0; i < r->nmems; i++) {
        free(r->mems[i].row);
        free(r->mems[i].grid);
    }
    free(r->mems);
    free(r->objs);
    free(r->events);
    free(r->mis);
    free(r->notes);
    free(r->chunks);
    r->mems = NULL, r->objs = NULL, r->events = NULL, r->mis = NULL, r->notes = NULL, r->chunks = NULL;
    r->nmems = r->nobjs = 0;
}
