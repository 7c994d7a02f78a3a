#include <stddef.h>

#include "cli.h"

const mt_cli_command mt_cli_commands[] = {
    {"record", "[-o FILE] [--mode M] [--verify] [...] -- APP", "capture what APP hands the GPU",
     mt_cmd_record, mt_cmd_record_usage},
    {"info", "FILE [--memories]", "summarise a trace", mt_cmd_info, mt_cmd_info_usage},
    {"verify", "FILE", "replay a trace and check its content hashes", mt_cmd_verify,
     mt_cmd_verify_usage},
    {"dump", "FILE --submit N (--memory|--object) ID -o OUT", "content the GPU saw at submit N",
     mt_cmd_dump, mt_cmd_dump_usage},
    {"report", "FILE [-o OUT]", "charts of a trace in one HTML page", mt_cmd_report,
     mt_cmd_report_usage},
    {"bench", "SUITE [--quick] [--json] [--callgrind] | --list", "run a benchmark suite", mt_cmd_bench,
     mt_cmd_bench_usage},
    {"check", "[--no-init] [--sync] -- APP ...", "run a CUDA program with every access checked",
     mt_cmd_check, mt_cmd_check_usage},
    {NULL, NULL, NULL, NULL, NULL},
};
