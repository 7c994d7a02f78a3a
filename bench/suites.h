#ifndef MT_BENCH_SUITES_H
#define MT_BENCH_SUITES_H
#include "bench.h"

int mt_bench_suite_track(mt_bench_ctx *ctx);
/* The interposer's per-call cost, part of the track suite (suite_track_preload.c). */
int mt_bench_track_preload(mt_bench_ctx *ctx);
/* Reading memory someone guards, part of the track suite (suite_track_guarded.c). */
int mt_bench_track_guarded(mt_bench_ctx *ctx);
int mt_bench_suite_diff(mt_bench_ctx *ctx);
int mt_bench_suite_trace(mt_bench_ctx *ctx);
int mt_bench_suite_alloc(mt_bench_ctx *ctx);
int mt_bench_suite_capture(mt_bench_ctx *ctx);
int mt_bench_suite_stream(mt_bench_ctx *ctx);
int mt_bench_suite_coherence(mt_bench_ctx *ctx);

#endif
