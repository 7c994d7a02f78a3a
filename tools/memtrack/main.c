/* memtrack: the command-line front end. Dispatches to subcommands. */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "memtrack/memtrack.h"

static void print_usage(FILE *out)
{
    fprintf(out, "usage: memtrack [--help] [--version] <command> [args]\n\ncommands:\n");
    for (const mt_cli_command *c = mt_cli_commands; c->name; c++)
        fprintf(out, "  %-8s %-40s %s\n", c->name, c->args, c->summary);
    fprintf(out, "  %-8s %-40s %s\n", "help", "[COMMAND]", "a command's manual page");
    fprintf(out, "\n'memtrack <command> --help' gives a command's usage, 'memtrack help <command>'\n"
                 "(or 'man memtrack-<command>') its manual page.\n");
}

int mt_cli_usage_error(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "memtrack: ");
    vfprintf(stderr, fmt, ap);
    fprintf(stderr, "\n\n");
    va_end(ap);
    print_usage(stderr);
    return 2;
}

int mt_cli_open_replay(const char *path, uint32_t flags, mt_trace_reader **r, mt_trace_replay **rp)
{
    int rc = mt_trace_reader_open(path, NULL, r);
    if (rc) {
        fprintf(stderr, "memtrack: %s: %s\n", path, mt_strerror(rc));
        return 1;
    }
    mt_trace_replay_opts ro = {.flags = flags};
    if ((rc = mt_trace_replay_create(*r, &ro, rp)) != 0) {
        fprintf(stderr, "memtrack: %s: %s\n", path, mt_strerror(rc));
        mt_trace_reader_close(*r);
        return 1;
    }
    return 0;
}

int main(int argc, char **argv)
{
    if (argc < 2)
        return mt_cli_usage_error("no command given");
    const char *cmd = argv[1];
    if (strcmp(cmd, "help") == 0 && argc > 2) {
        if (argc > 3)
            return mt_cli_usage_error("help: one command at a time");
        return mt_cli_help(argv[2]);
    }
    if (strcmp(cmd, "--help") == 0 || strcmp(cmd, "-h") == 0 || strcmp(cmd, "help") == 0) {
        print_usage(stdout);
        return 0;
    }
    if (strcmp(cmd, "--version") == 0 || strcmp(cmd, "-V") == 0) {
        printf("memtrack %s (library %s)\n", MT_VERSION_STRING, mt_version_string());
        return 0;
    }
    if (cmd[0] == '-')
        return mt_cli_usage_error("unknown option '%s'", cmd);
    for (const mt_cli_command *c = mt_cli_commands; c->name; c++) {
        if (strcmp(c->name, cmd) != 0)
            continue;
        for (int i = 2; i < argc; i++) {
            if (strcmp(argv[i], "--") == 0)
                break; /* what follows belongs to the traced application */
            if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
                c->usage();
                printf("\nThe manual: memtrack help %s (man memtrack-%s).\n", c->name, c->name);
                return 0;
            }
        }
        return c->run(argc - 1, argv + 1);
    }
    return mt_cli_usage_error("unknown command '%s'", cmd);
}
