/* The memtrack CLI: one file per subcommand, registered in commands.c.
 * Subcommands return the process exit status: 0 success, 1 failure of the
 * work itself (e.g. verify found a mismatch), 2 usage error. */
#ifndef MT_CLI_H
#define MT_CLI_H

#include <stddef.h>
#include <stdint.h>
#include <signal.h>
#include <stdio.h>
#include <sys/types.h>

typedef struct mt_cli_command {
    const char *name;
    const char *args;    /* one-line argument synopsis */
    const char *summary; /* one line for `memtrack --help` */
    int (*run)(int argc, char **argv); /* argv[0] is the subcommand name */
    void (*usage)(void);               /* detailed help, to stdout */
} mt_cli_command;

extern const mt_cli_command mt_cli_commands[]; /* NULL-terminated */

/* Prints "memtrack: <msg>" and the short usage to stderr; returns 2. */
int mt_cli_usage_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

typedef struct mt_trace_reader mt_trace_reader;
typedef struct mt_trace_replay mt_trace_replay;
/* Opens `path` and starts a replay with `flags` (MT_TRACE_REPLAY_*); on
 * failure prints "memtrack: ..." and returns 1 with nothing left open. */
int mt_cli_open_replay(const char *path, uint32_t flags, mt_trace_reader **r, mt_trace_replay **rp);

/* Writes the first n bytes of s (up to a NUL) as a JSON string. html_safe
 * also escapes '<', '>' and '&', so that "</script>" in a trace's text
 * cannot end a data block in an HTML page. */
void mt_cli_json_string(FILE *f, const char *s, size_t n, int html_safe);

/* "closed", "checkpoint", "emergency" or "scanned": how a trace ended
 * (mt_trace_info.end). */
const char *mt_cli_end_name(int end);

/* Prints the man page of `cmd` (a command, or "memtrack") to stdout:
 * 0, or 2 for an unknown command. */
int mt_cli_help(const char *cmd);

int mt_cmd_bench(int argc, char **argv);
void mt_cmd_bench_usage(void);
int mt_cmd_record(int argc, char **argv);
/* record_wait.c: after its child ended, record waits for the processes of
 * the session still writing a trace (passing on a pending signal). */
void mt_record_wait_writers(const char *status_path, const char *session, pid_t child, const char *name,
                            volatile sig_atomic_t *pending_sig, int quiet);
void mt_cmd_record_usage(void);
int mt_cmd_info(int argc, char **argv);
void mt_cmd_info_usage(void);
int mt_cmd_verify(int argc, char **argv);
void mt_cmd_verify_usage(void);
int mt_cmd_dump(int argc, char **argv);
void mt_cmd_dump_usage(void);
int mt_cmd_check(int argc, char **argv);
void mt_cmd_check_usage(void);
int mt_cmd_report(int argc, char **argv);
void mt_cmd_report_usage(void);

#endif
