/* memtrack report: what a trace holds, aggregated to a size a browser draws
 * at once whatever the trace's length (report_collect.c), then written as one
 * self-contained HTML page (report_html.c, with report/report.js and
 * report/report.css embedded at build time).
 *
 * Sizes are bounded: the bytes-per-submit series and the compression series
 * have at most RP_SERIES points, heatmaps at most RP_COLS submit columns,
 * page heatmaps RP_PAGE_ROWS rows for at most RP_GRID_MEMS memories, and the
 * tables and event lists are capped (the totals stay exact). */
#ifndef MT_CLI_REPORT_H
#define MT_CLI_REPORT_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "memtrack/trace.h"

enum {
    RP_SERIES = 720,    /* points of the per-submit and per-chunk series */
    RP_COLS = 160,      /* submit columns of the heatmaps */
    RP_PAGE_ROWS = 48,  /* page rows of one memory's page heatmap */
    RP_GRID_MEMS = 512, /* memories that get a page heatmap (the first written) */
    RP_EVENTS = 4000,   /* mode changes kept (all are counted) */
    RP_MISMATCHES = 2000,
    RP_ANNOTATIONS = 50,
};

typedef struct rp_mem {
    uint64_t id, size;
    uint32_t type, flags;
    uint64_t created, destroyed; /* submit columns; destroyed UINT64_MAX: never */
    uint64_t bytes, updates, objects, maps;
    uint32_t mode_changes;
    char mode[96];   /* the last mode record's text */
    float *row;      /* [RP_COLS] bytes written per submit column */
    float *grid;     /* [pb * RP_COLS] bytes per page row and column, or NULL */
    uint32_t pb;     /* page rows of grid */
} rp_mem;

typedef struct rp_obj {
    uint64_t id, size, used, memory, offset, bytes;
    uint32_t kind;
} rp_obj;

typedef struct rp_event { /* a memory's mode changed (or was first stated) */
    uint64_t submit, memory;
    char text[128];
} rp_event;

typedef struct rp_mismatch {
    uint64_t submit, memory, object, offset, length, running;
    uint32_t cause;
} rp_mismatch;

typedef struct rp_annotation {
    uint64_t submit, id;
    char text[240];
} rp_annotation;

typedef struct report {
    const char *path;
    mt_trace_info inf;
    uint64_t ncols_submits; /* submit columns: submits, plus one for a tail */
    uint32_t cols;          /* heatmap columns (<= RP_COLS) */
    uint32_t npoints;       /* series points (<= RP_SERIES) */
    double s_sum[RP_SERIES], s_max[RP_SERIES]; /* bytes per submit, by point */
    uint32_t s_n[RP_SERIES];                   /* submits in the point */
    uint32_t s_frames[RP_SERIES];              /* frames presented in the point */
    rp_mem *mems;
    size_t nmems, capmems, ngrids;
    rp_obj *objs;
    size_t nobjs, capobjs;
    rp_event *events;
    size_t nevents;
    uint64_t events_total;
    rp_mismatch *mis;
    size_t nmis;
    uint64_t mis_count[4], mis_bytes[4];
    rp_annotation *notes;
    size_t nnotes;
    uint64_t notes_total;
    mt_trace_chunk_info *chunks; /* inf.chunks of them */
    uint64_t records, updates, update_bytes, frames, hashes, submits_seen;
    int error; /* reading stopped early: the reader's error, or 0 */
} report;

/* Reads the whole trace into r (r->path set, the rest zeroed), showing
 * progress on stderr when `progress`. Returns 0, or a negative error when
 * the trace cannot be opened (nothing to free then); a read error later
 * only stops the reading (r->error) and what was read is reported. */
int mt_report_collect(report *r, int progress);

/* Writes the page to f. Returns 0 or -errno from the writes. */
int mt_report_write_html(const report *r, FILE *f);

void mt_report_free(report *r);

#endif
