/* memtrack bench SUITE [--quick] [--json] [--callgrind] */
#include <stdio.h>
#include <string.h>

#include "bench.h"
#include "cli.h"

void mt_cmd_bench_usage(void)
{
    printf("usage: memtrack bench SUITE [--quick] [--json] [--callgrind]\n"
           "       memtrack bench --list\n\n"
           "Runs a benchmark suite ('all' runs every one). Each figure that has a\n"
           "baseline is measured against it in the same run.\n\n"
           "  --quick   smaller sizes and fewer repetitions (seconds, for CI smoke runs)\n"
           "  --json    one JSON object per line: suite, case, metric, value, unit,\n"
           "            and baseline_name/baseline/ratio/target/target_met where they apply\n"
           "  --callgrind  re-run the suite's measured loops under valgrind's callgrind\n"
           "            and report instructions and L1 misses per operation (suites that\n"
           "            support it: alloc, coherence); needs valgrind\n"
           "  --list    list the suites\n\nsuites:\n");
    for (const mt_bench_suite *s = mt_bench_suites; s->name; s++)
        printf("  %-10s %s\n", s->name, s->summary);
}

int mt_cmd_bench(int argc, char **argv)
{
    const char *suite = NULL;
    int quick = 0, json = 0, callgrind = 0;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--quick") == 0)
            quick = 1;
        else if (strcmp(argv[i], "--json") == 0)
            json = 1;
        else if (strcmp(argv[i], "--callgrind") == 0)
            callgrind = 1;
        else if (strcmp(argv[i], "--list") == 0) {
            for (const mt_bench_suite *s = mt_bench_suites; s->name; s++)
                printf("%s\t%s\n", s->name, s->summary);
            return 0;
        } else if (argv[i][0] == '-')
            return mt_cli_usage_error("bench: unknown option '%s'", argv[i]);
        else if (suite)
            return mt_cli_usage_error("bench: more than one suite given");
        else
            suite = argv[i];
    }
    if (!suite)
        return mt_cli_usage_error("bench: no suite given (try: memtrack bench --list)");
    return mt_bench_run(suite, quick, json, callgrind);
}
