/* Benchmark framework behind `memtrack bench SUITE [--quick] [--json]`.
 *
 * A suite is a function that measures cases and emits one row per figure.
 * Rows print as a table for people, or as one JSON object per line with
 * --json. A row that compares against a baseline measured in the same run
 * carries the baseline's value and the ratio; a row with a target says
 * whether it met it. Benchmarks never fail the build: targets are reported,
 * not asserted (tests assert behaviour, never time). */
#ifndef MT_BENCH_H
#define MT_BENCH_H

#include <math.h>
#include <stdint.h>

typedef struct mt_bench_ctx mt_bench_ctx;

typedef struct mt_bench_row {
    const char *case_name;     /* e.g. "first-write/seq/uffd" */
    const char *metric;        /* e.g. "ns_per_page" */
    double value;
    const char *unit;          /* e.g. "ns" */
    const char *baseline_name; /* NULL when there is no baseline */
    double baseline;           /* baseline's value of the same metric */
    double ratio;              /* value/baseline or as the suite defines; NAN if none */
    const char *target;        /* e.g. "ratio <= 1.0"; NULL if none */
    int target_met;            /* 1 met, 0 missed, -1 no target */
} mt_bench_row;

typedef int (*mt_bench_suite_fn)(mt_bench_ctx *ctx);

typedef struct mt_bench_suite {
    const char *name;
    const char *summary;
    mt_bench_suite_fn run;
} mt_bench_suite;

/* The registry (bench/suites.c): NULL-terminated. */
extern const mt_bench_suite mt_bench_suites[];

/* Runs one suite ("all" runs every one). callgrind: --callgrind (below).
 * Returns 0, 1 when a suite failed, or 2 for an unknown suite. */
int mt_bench_run(const char *suite, int quick, int json, int callgrind);

/* A row with no baseline and no target. */
void mt_bench_emit_value(mt_bench_ctx *ctx, const char *case_name, const char *metric,
                         double value, const char *unit);
/* The general form; fields left 0/NULL in `row` mean "none". Set ratio NAN for none. */
void mt_bench_emit(mt_bench_ctx *ctx, const mt_bench_row *row);
/* Free-form note for people (table mode only; ignored with --json). */
void mt_bench_note(mt_bench_ctx *ctx, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

int mt_bench_quick(const mt_bench_ctx *ctx);

/* ---- --callgrind: instruction counts of measured loops (bench/callgrind.c) --
 * A suite that supports it re-executes `memtrack bench SUITE` under
 * valgrind's callgrind (mt_bench_cg_run, in the parent), where only the
 * measured loops are counted: the child brackets each with
 * mt_bench_cg_toggle() and ends it with mt_bench_cg_done(name, ops), which
 * dumps the counts. The parent reads the dumps and emits rows. Suites
 * without support ignore the flag. */
enum { MT_BENCH_CG_OFF = 0, MT_BENCH_CG_PARENT = 1, MT_BENCH_CG_CHILD = 2 };
int mt_bench_callgrind(const mt_bench_ctx *ctx);
void mt_bench_cg_toggle(void);
void mt_bench_cg_done(const char *name, uint64_t ops);

typedef struct mt_bench_cg_result {
    char name[64];
    double ops;       /* as given to mt_bench_cg_done */
    double ir;        /* instructions executed */
    double d1_misses; /* L1 data misses (reads + writes), callgrind's cache model */
} mt_bench_cg_result;

/* Parent: runs the suite again under callgrind and fills up to n results in
 * the order the child dumped them. Returns their count, or a negative
 * errno (-ENOENT: valgrind is not installed, -ENOTSUP: built without
 * valgrind/callgrind.h). */
int mt_bench_cg_run(const mt_bench_ctx *ctx, mt_bench_cg_result *out, int n);
const char *mt_bench_suite_name(const mt_bench_ctx *ctx);

/* Monotonic clock in nanoseconds. */
uint64_t mt_bench_now_ns(void);

/* Median of n doubles (sorts in place). */
double mt_bench_median(double *v, int n);

#endif
