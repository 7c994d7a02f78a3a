#include <stddef.h>

#include "cli.h"

const mt_cli_command mt_cli_commands[] = {
    {"bench", "SUITE [--quick] [--json] | --list", "run a benchmark suite", mt_cmd_bench,
     mt_cmd_bench_usage},
    {NULL, NULL, NULL, NULL, NULL},
};
