/* memtrack help [CMD]: the command's man page as text. The pages in
 * man/man1 are rendered by groff at build time and embedded
 * (tools/CMakeLists.txt), so the manual and `help` never disagree. */
#include <stdio.h>
#include <string.h>

#include "cli.h"

extern const char mt_man_memtrack[], mt_man_memtrack_record[], mt_man_memtrack_info[],
    mt_man_memtrack_verify[], mt_man_memtrack_dump[], mt_man_memtrack_report[],
    mt_man_memtrack_bench[], mt_man_memtrack_check[];

static const struct {
    const char *name, *text;
} pages[] = {
    {"memtrack", mt_man_memtrack},     {"record", mt_man_memtrack_record},
    {"info", mt_man_memtrack_info},    {"verify", mt_man_memtrack_verify},
    {"dump", mt_man_memtrack_dump},    {"report", mt_man_memtrack_report},
    {"bench", mt_man_memtrack_bench},  {"check", mt_man_memtrack_check},
    {"help", mt_man_memtrack},
};

int mt_cli_help(const char *cmd)
{
    if (strncmp(cmd, "memtrack-", 9) == 0) /* as man names it */
        cmd += 9;
    for (size_t i = 0; i < sizeof pages / sizeof pages[0]; i++)
        if (strcmp(pages[i].name, cmd) == 0) {
            fputs(pages[i].text, stdout);
            return 0;
        }
    return mt_cli_usage_error("help: no command '%s'", cmd);
}
