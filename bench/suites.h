#ifndef MT_BENCH_SUITES_H
#define MT_BENCH_SUITES_H
#include "bench.h"

int mt_bench_suite_track(mt_bench_ctx *ctx);
int mt_bench_suite_diff(mt_bench_ctx *ctx);
int mt_bench_suite_trace(mt_bench_ctx *ctx);
int mt_bench_suite_alloc(mt_bench_ctx *ctx);
int mt_bench_suite_capture(mt_bench_ctx *ctx);
int mt_bench_suite_stream(mt_bench_ctx *ctx);
int mt_bench_suite_coherence(mt_bench_ctx *ctx);

#endif
