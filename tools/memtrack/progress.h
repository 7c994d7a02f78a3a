/* Progress for long runs over big traces: a line on stderr rewritten at most
 * twice a second, only when stderr is a terminal (never in a pipe or a log). */
#ifndef MT_CLI_PROGRESS_H
#define MT_CLI_PROGRESS_H

#include <stdint.h>

typedef struct mt_cli_progress {
    const char *what; /* "verify", "report", ... */
    int on;
    uint64_t last_ns, total;
} mt_cli_progress;

/* Starts a progress line out of `total` submits; on only when `want` and
 * stderr is a terminal. */
void mt_cli_progress_start(mt_cli_progress *p, const char *what, uint64_t total, int want);
void mt_cli_progress_tick(mt_cli_progress *p, uint64_t submit);
/* Clears the line, if one was drawn. */
void mt_cli_progress_end(mt_cli_progress *p);

#endif
