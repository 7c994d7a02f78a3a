/* Benchmark framework: row formatting (table and JSON lines), timing helpers. */
#define _GNU_SOURCE
#include "bench.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

struct mt_bench_ctx {
    const char *suite;
    int quick;
    int json;
    int header_done;
    int callgrind; /* MT_BENCH_CG_* */
};

uint64_t mt_bench_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

double mt_bench_median(double *v, int n)
{
    if (n <= 0)
        return NAN;
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

int mt_bench_quick(const mt_bench_ctx *ctx) { return ctx->quick; }
int mt_bench_callgrind(const mt_bench_ctx *ctx) { return ctx->callgrind; }
const char *mt_bench_suite_name(const mt_bench_ctx *ctx) { return ctx->suite; }

/* JSON string escaping for the few characters that can appear in our names. */
static void json_str(const char *s)
{
    putchar('"');
    for (; *s; s++) {
        if (*s == '"' || *s == '\\')
            printf("\\%c", *s);
        else if ((unsigned char)*s < 0x20)
            printf("\\u%04x", *s);
        else
            putchar(*s);
    }
    putchar('"');
}

static void json_num(double v)
{
    if (isfinite(v))
        printf("%.6g", v);
    else
        printf("null"); /* JSON has no NaN/Inf */
}

static void emit_json(const mt_bench_ctx *ctx, const mt_bench_row *r)
{
    printf("{\"suite\":");
    json_str(ctx->suite);
    printf(",\"case\":");
    json_str(r->case_name);
    printf(",\"metric\":");
    json_str(r->metric);
    printf(",\"value\":");
    json_num(r->value);
    printf(",\"unit\":");
    json_str(r->unit ? r->unit : "");
    if (r->baseline_name) {
        printf(",\"baseline_name\":");
        json_str(r->baseline_name);
        printf(",\"baseline\":");
        json_num(r->baseline);
    }
    if (!isnan(r->ratio)) {
        printf(",\"ratio\":");
        json_num(r->ratio);
    }
    if (r->target) {
        printf(",\"target\":");
        json_str(r->target);
        printf(",\"target_met\":%s", r->target_met == 1 ? "true" : "false");
    }
    printf(",\"quick\":%s}\n", ctx->quick ? "true" : "false");
}

static void emit_table(mt_bench_ctx *ctx, const mt_bench_row *r)
{
    if (!ctx->header_done) {
        printf("\n== suite %s%s ==\n", ctx->suite, ctx->quick ? " (quick)" : "");
        printf("%-34s %-16s %12s %-8s %-14s %12s %8s  %s\n", "case", "metric", "value", "unit",
               "baseline", "base value", "ratio", "target");
        ctx->header_done = 1;
    }
    char ratio[32] = "-", base[32] = "-", target[96] = "";
    if (!isnan(r->ratio))
        snprintf(ratio, sizeof ratio, "%.3f", r->ratio);
    if (r->baseline_name)
        snprintf(base, sizeof base, "%.4g", r->baseline);
    if (r->target)
        snprintf(target, sizeof target, "%s [%s]", r->target, r->target_met == 1 ? "met" : "MISSED");
    printf("%-34s %-16s %12.4g %-8s %-14s %12s %8s  %s\n", r->case_name, r->metric, r->value,
           r->unit ? r->unit : "", r->baseline_name ? r->baseline_name : "-", base, ratio, target);
    fflush(stdout);
}

void mt_bench_emit(mt_bench_ctx *ctx, const mt_bench_row *row)
{
    if (ctx->json)
        emit_json(ctx, row);
    else
        emit_table(ctx, row);
    fflush(stdout);
}

void mt_bench_emit_value(mt_bench_ctx *ctx, const char *case_name, const char *metric,
                         double value, const char *unit)
{
    mt_bench_row r = {case_name, metric, value, unit, NULL, NAN, NAN, NULL, -1};
    mt_bench_emit(ctx, &r);
}

void mt_bench_note(mt_bench_ctx *ctx, const char *fmt, ...)
{
    if (ctx->json)
        return;
    va_list ap;
    va_start(ap, fmt);
    printf("  # ");
    vprintf(fmt, ap);
    printf("\n");
    va_end(ap);
    fflush(stdout);
}

int mt_bench_run(const char *suite, int quick, int json, int callgrind)
{
    /* The child of --callgrind (callgrind.c) is told so by its environment. */
    const char *child = getenv("MEMTRACK_BENCH_CALLGRIND_CHILD");
    if (child && strcmp(child, "1") == 0)
        callgrind = MT_BENCH_CG_CHILD;
    else if (callgrind)
        callgrind = MT_BENCH_CG_PARENT;
    int found = 0;
    for (const mt_bench_suite *s = mt_bench_suites; s->name; s++) {
        if (strcmp(suite, "all") != 0 && strcmp(suite, s->name) != 0)
            continue;
        found = 1;
        mt_bench_ctx ctx = {s->name, quick, json, 0, callgrind};
        int rc = s->run(&ctx);
        if (rc != 0) {
            fprintf(stderr, "memtrack bench: suite %s failed (%d)\n", s->name, rc);
            return 1;
        }
    }
    if (!found) {
        fprintf(stderr, "memtrack bench: unknown suite '%s' (try: memtrack bench --list)\n", suite);
        return 2;
    }
    return 0;
}
