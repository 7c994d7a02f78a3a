#include "progress.h"

#include <inttypes.h>
#include <stdio.h>
#include <time.h>
#include <unistd.h>

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

void mt_cli_progress_start(mt_cli_progress *p, const char *what, uint64_t total, int want)
{
    *p = (mt_cli_progress){what, want && isatty(STDERR_FILENO), 0, total};
    /* The first line waits half a second too: short runs draw nothing. */
    if (p->on)
        p->last_ns = now_ns();
}

void mt_cli_progress_tick(mt_cli_progress *p, uint64_t submit)
{
    if (!p->on)
        return;
    uint64_t t = now_ns();
    if (t - p->last_ns < 500000000ull)
        return;
    p->last_ns = t;
    p->on = 2; /* a line is on the screen */
    fprintf(stderr, "\r%s: submit %" PRIu64 " of %" PRIu64 " (%d%%) ", p->what, submit, p->total,
            p->total ? (int)(100 * submit / p->total) : 0);
}

void mt_cli_progress_end(mt_cli_progress *p)
{
    if (p->on == 2)
        fprintf(stderr, "\r%60s\r", "");
    p->on = 0;
}
