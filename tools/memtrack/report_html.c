/* memtrack report, second half: the aggregated trace as JSON inside one HTML
 * page, with the stylesheet and the script that draws it (report/report.css,
 * report/report.js, embedded at build time: the page needs nothing else,
 * no network, no external script). */
#define _GNU_SOURCE
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "memtrack/memtrack.h"
#include "report.h"

extern const char mt_asset_report_js[];
extern const char mt_asset_report_css[];

enum {
    TOP_ROWS = 64,    /* memories in the overview heatmap */
    TOP_GRIDS = 8,    /* memories with a page heatmap */
    TABLE_ROWS = 2000 /* rows of the memory and object tables */
};

/* JSON string, HTML-safe: the data sits in a <script> block. */
static void jstr(FILE *f, const char *s, size_t n) { mt_cli_json_string(f, s, n, 1); }
static void jcstr(FILE *f, const char *s) { jstr(f, s, strlen(s)); }

/* Numbers to 3 significant digits: a chart needs no more, and a heatmap of
 * 64 x 160 cells stays small. */
static void jnum(FILE *f, double v)
{
    if (v == 0)
        fputc('0', f);
    else
        fprintf(f, "%.3g", v);
}

static const report *sort_r;
static int by_bytes_desc(const void *a, const void *b)
{
    const rp_mem *x = &sort_r->mems[*(const size_t *)a], *y = &sort_r->mems[*(const size_t *)b];
    if (x->bytes != y->bytes)
        return x->bytes < y->bytes ? 1 : -1;
    return x->id < y->id ? -1 : x->id > y->id;
}
static int obj_by_bytes_desc(const void *a, const void *b)
{
    const rp_obj *x = &sort_r->objs[*(const size_t *)a], *y = &sort_r->objs[*(const size_t *)b];
    if (x->bytes != y->bytes)
        return x->bytes < y->bytes ? 1 : -1;
    return x->id < y->id ? -1 : x->id > y->id;
}

/* Submits in heatmap column c: those s with floor(s * cols / n) == c. */
static uint64_t col_submits(const report *r, uint32_t c)
{
    uint64_t n = r->ncols_submits;
    uint64_t a = ((uint64_t)c * n + r->cols - 1) / r->cols, b = ((uint64_t)(c + 1) * n + r->cols - 1) / r->cols;
    return b > a ? b - a : 1;
}

static void write_info(const report *r, FILE *f)
{
    const mt_trace_info *i = &r->inf;
    fprintf(f, "\"info\":{\"format\":\"%u.%u\",\"complete\":%s,\"end\":\"%s\",\"file_size\":%" PRIu64
               ",\"raw_bytes\":%" PRIu64 ",\"stored_bytes\":%" PRIu64 ",\"chunks\":%" PRIu64
               ",\"records\":%" PRIu64 ",\"submits\":%" PRIu64 ",\"tail_records\":%" PRIu64
               ",\"frames\":%" PRIu64 ",\"updates\":%" PRIu64 ",\"update_bytes\":%" PRIu64
               ",\"hashes\":%" PRIu64 ",\"memories\":%zu,\"objects\":%zu,\"error\":",
            i->version_major, i->version_minor, i->complete ? "true" : "false", mt_cli_end_name(i->end),
            i->file_size, i->raw_bytes, i->stored_bytes, i->chunks, r->records, i->submits,
            i->tail_records, r->frames, r->updates, r->update_bytes, r->hashes, r->nmems, r->nobjs);
    if (r->error)
        jcstr(f, mt_strerror(r->error));
    else
        fputs("null", f);
    fputs("}", f);
}

static void write_series(const report *r, FILE *f)
{
    fprintf(f, ",\"series\":{\"n\":%" PRIu64 ",\"points\":%u,\"sum\":[", r->ncols_submits, r->npoints);
    for (uint32_t p = 0; p < r->npoints; p++)
        fputs(p ? "," : "", f), jnum(f, r->s_sum[p]);
    fputs("],\"max\":[", f);
    for (uint32_t p = 0; p < r->npoints; p++)
        fputs(p ? "," : "", f), jnum(f, r->s_max[p]);
    fputs("],\"count\":[", f);
    for (uint32_t p = 0; p < r->npoints; p++)
        fprintf(f, "%s%u", p ? "," : "", r->s_n[p]);
    fputs("],\"frames\":[", f);
    for (uint32_t p = 0; p < r->npoints; p++)
        fprintf(f, "%s%u", p ? "," : "", r->s_frames[p]);
    fputs("]}", f);
}

/* Chunks, downsampled to at most RP_SERIES points: sums of raw and stored
 * bytes, and the best and worst ratio among the chunks of a point. */
static void write_chunks(const report *r, FILE *f)
{
    uint64_t n = r->chunks ? r->inf.chunks : 0;
    uint32_t pts = n < RP_SERIES ? (uint32_t)n : RP_SERIES;
    fprintf(f, ",\"chunks\":{\"n\":%" PRIu64 ",\"p\":[", n);
    for (uint32_t p = 0; p < pts; p++) {
        uint64_t a = p * n / pts, b = (p + 1) * n / pts, raw = 0, st = 0, subs = 0, recs = 0;
        double lo = 1e300, hi = 0;
        for (uint64_t i = a; i < b; i++) {
            const mt_trace_chunk_info *c = &r->chunks[i];
            raw += c->raw_bytes, st += c->stored_bytes, subs += c->submits, recs += c->records;
            double ratio = c->stored_bytes ? (double)c->raw_bytes / c->stored_bytes : 1;
            lo = ratio < lo ? ratio : lo;
            hi = ratio > hi ? ratio : hi;
        }
        fprintf(f, "%s[%" PRIu64 ",%" PRIu64 ",%" PRIu64 ",%" PRIu64 ",", p ? "," : "", a, b - a, raw, st);
        jnum(f, lo), fputc(',', f), jnum(f, hi);
        fprintf(f, ",%" PRIu64 ",%" PRIu64 ",%" PRIu64 "]", subs, recs, r->chunks[a].submits_before);
    }
    fputs("]}", f);
}

static void write_mem(const report *r, FILE *f, const rp_mem *m, int row, int grid)
{
    fprintf(f, "{\"id\":%" PRIu64 ",\"size\":%" PRIu64 ",\"type\":%u,\"flags\":%u,\"created\":%" PRIu64
               ",\"destroyed\":%" PRId64 ",\"bytes\":%" PRIu64 ",\"updates\":%" PRIu64
               ",\"objects\":%" PRIu64 ",\"maps\":%" PRIu64 ",\"changes\":%u,\"mode\":",
            m->id, m->size, m->type, m->flags, m->created,
            m->destroyed == UINT64_MAX ? (int64_t)-1 : (int64_t)m->destroyed, m->bytes, m->updates,
            m->objects, m->maps, m->mode_changes);
    jcstr(f, m->mode);
    if (row && m->row && m->size) {
        /* Density: the share of the memory written per submit, in the column. */
        fputs(",\"row\":[", f);
        for (uint32_t c = 0; c < r->cols; c++)
            fputs(c ? "," : "", f), jnum(f, m->row[c] / ((double)m->size * col_submits(r, c)));
        fputc(']', f);
    }
    if (grid && m->grid) {
        fprintf(f, ",\"pb\":%u,\"grid\":[", m->pb);
        for (uint32_t p = 0; p < m->pb; p++) {
            /* Bytes of page row p, as a share of the row, per submit. */
            double lo = (double)p * m->size / m->pb, hi = (double)(p + 1) * m->size / m->pb;
            for (uint32_t c = 0; c < r->cols; c++)
                fputs(p || c ? "," : "", f),
                    jnum(f, m->grid[(size_t)p * RP_COLS + c] / ((hi - lo) * col_submits(r, c)));
        }
        fputc(']', f);
    }
    fputc('}', f);
}

static void write_mems(const report *r, FILE *f)
{
    size_t *ix = malloc((r->nmems + 1) * sizeof *ix);
    if (!ix) {
        fputs(",\"mems\":[]", f);
        return;
    }
    for (size_t i = 0; i < r->nmems; i++)
        ix[i] = i;
    sort_r = r;
    qsort(ix, r->nmems, sizeof *ix, by_bytes_desc);
    fprintf(f, ",\"cols\":%u,\"mems\":[", r->cols);
    size_t n = r->nmems < TABLE_ROWS ? r->nmems : TABLE_ROWS;
    for (size_t k = 0, grids = 0; k < n; k++) {
        const rp_mem *m = &r->mems[ix[k]];
        int grid = m->grid && m->bytes && grids < TOP_GRIDS;
        grids += grid;
        fputs(k ? "," : "", f);
        write_mem(r, f, m, k < TOP_ROWS && m->bytes, grid);
    }
    fputs("]", f);
    free(ix);
}

static void write_objs(const report *r, FILE *f)
{
    size_t *ix = malloc((r->nobjs + 1) * sizeof *ix);
    fputs(",\"objs\":[", f);
    if (ix) {
        for (size_t i = 0; i < r->nobjs; i++)
            ix[i] = i;
        sort_r = r;
        qsort(ix, r->nobjs, sizeof *ix, obj_by_bytes_desc);
        for (size_t k = 0; k < r->nobjs && k < TABLE_ROWS; k++) {
            const rp_obj *o = &r->objs[ix[k]];
            fprintf(f, "%s[%" PRIu64 ",%u,%" PRIu64 ",%" PRIu64 ",%" PRIu64 ",%" PRIu64 ",%" PRIu64 "]",
                    k ? "," : "", o->id, o->kind, o->size, o->used, o->memory, o->offset, o->bytes);
        }
        free(ix);
    }
    fputs("]", f);
}

static void write_events(const report *r, FILE *f)
{
    fprintf(f, ",\"events_total\":%" PRIu64 ",\"events\":[", r->events_total);
    for (size_t i = 0; i < r->nevents; i++) {
        fprintf(f, "%s[%" PRIu64 ",%" PRIu64 ",", i ? "," : "", r->events[i].submit, r->events[i].memory);
        jcstr(f, r->events[i].text);
        fputc(']', f);
    }
    fprintf(f, "],\"mis_count\":[%" PRIu64 ",%" PRIu64 ",%" PRIu64 "],\"mis_bytes\":[%" PRIu64
               ",%" PRIu64 ",%" PRIu64 "],\"mis\":[",
            r->mis_count[1], r->mis_count[2], r->mis_count[3], r->mis_bytes[1], r->mis_bytes[2],
            r->mis_bytes[3]);
    for (size_t i = 0; i < r->nmis; i++) {
        const rp_mismatch *m = &r->mis[i];
        fprintf(f, "%s[%" PRIu64 ",%" PRIu64 ",%" PRIu64 ",%" PRIu64 ",%" PRIu64 ",%u,%" PRIu64 "]",
                i ? "," : "", m->submit, m->memory, m->object, m->offset, m->length, m->cause, m->running);
    }
    fprintf(f, "],\"notes_total\":%" PRIu64 ",\"notes\":[", r->notes_total);
    for (size_t i = 0; i < r->nnotes; i++) {
        fprintf(f, "%s[%" PRIu64 ",%" PRIu64 ",", i ? "," : "", r->notes[i].submit, r->notes[i].id);
        jcstr(f, r->notes[i].text);
        fputc(']', f);
    }
    fputs("]", f);
}

/* The trace's header metadata, read again (the collector did not keep it). */
static void write_meta(const report *r, FILE *f)
{
    fputs(",\"meta\":[", f);
    mt_trace_reader *rd;
    if (mt_trace_reader_open(r->path, NULL, &rd) == 0) {
        const char *k, *v;
        for (size_t i = 0; mt_trace_meta_at(rd, i, &k, &v) == 0; i++) {
            fputs(i ? ",[" : "[", f);
            jcstr(f, k);
            fputc(',', f);
            jcstr(f, v);
            fputc(']', f);
        }
        mt_trace_reader_close(rd);
    }
    fputs("]", f);
}

int mt_report_write_html(const report *r, FILE *f)
{
    const char *base = strrchr(r->path, '/');
    base = base ? base + 1 : r->path;
    fputs("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\n"
          "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n"
          "<meta name=\"generator\" content=\"memtrack " MT_VERSION_STRING "\">\n<title>memtrack report: ",
          f);
    for (const char *p = base; *p; p++) /* HTML text: escape what markup would take */
        *p == '<' ? fputs("&lt;", f) : *p == '&' ? fputs("&amp;", f) : fputc(*p, f);
    fprintf(f, "</title>\n<style>\n%s</style>\n</head><body>\n"
               "<noscript><p>This report draws its charts with JavaScript: enable it for this "
               "file (it loads nothing from the network).</p></noscript>\n"
               "<main id=\"app\"></main>\n<script type=\"application/json\" id=\"data\">{\"file\":",
            mt_asset_report_css);
    jcstr(f, base);
    fputs(",\"version\":\"" MT_VERSION_STRING "\",", f);
    write_info(r, f);
    write_meta(r, f);
    write_series(r, f);
    write_chunks(r, f);
    write_mems(r, f);
    write_objs(r, f);
    write_events(r, f);
    fprintf(f, "}</script>\n<script>\n%s</script>\n</body></html>\n", mt_asset_report_js);
    return ferror(f) ? -EIO : 0;
}
