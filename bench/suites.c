/* The registry of benchmark suites; each lives in bench/suite_<name>.c. */
#include <stddef.h>
#include "bench.h"
#include "suites.h"

const mt_bench_suite mt_bench_suites[] = {
    {"track", "first-write and collect cost: signal vs uffd backends", mt_bench_suite_track},
    {"diff", "diff vs memcmp bandwidth", mt_bench_suite_diff},
    {"trace", "trace writer MB/s per preset and thread count; seal interval cost", mt_bench_suite_trace},
    {"alloc", "region allocator and pools vs a sorted-free-list first fit", mt_bench_suite_alloc},
    {"capture", "the Vulkan layer on memtrack-sample: every workload in every mode", mt_bench_suite_capture},
    {"stream", "command ring to the simulated device: throughput, elision, wake-ups, fence latency",
     mt_bench_suite_stream},
    {"coherence", "enqueue-time planner vs whole-buffer versions; dirty-page uploads (GPU)",
     mt_bench_suite_coherence},
    {NULL, NULL, NULL},
};
