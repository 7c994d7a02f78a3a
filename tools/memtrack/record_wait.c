/* `memtrack record` waits for every process that still writes a trace, not
 * only for the program it started.
 *
 * The program record starts is often a launcher (xvfb-run, a shell script,
 * a game's wrapper) and the process that captures is a descendant of it.
 * When the launcher ends first (killed, or it put the application in the
 * background) record used to return while that descendant was still
 * writing: its summary counted a trace in the middle of a write, and a
 * `memtrack verify` right after read an unfinished trace. Now, after its
 * child ends, record waits for every process that said "trace" in the
 * session's status file and neither said "closed" nor ended (polling: they
 * are not its children), passing on the SIGTERM/SIGHUP it receives to them
 * as well. record does not make itself their sub-reaper: an orphan would
 * then see record, not init, as its parent, and a program that waits for
 * getppid() to become 1 would wait for ever. A pid counts
 * only while its environment carries this session's MEMTRACK_SESSION: a
 * writer killed and reaped by its parent frees its pid, which an unrelated
 * process may get. */
#define _GNU_SOURCE
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"

#define MAX_WRITERS 256

/* Alive and not a zombie (a zombie stays one until its parent reaps it, but
 * writes nothing any more). */
static int alive(pid_t pid)
{
    if (kill(pid, 0) != 0 && errno == ESRCH)
        return 0;
    char path[64], buf[512];
    snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
    FILE *f = fopen(path, "r");
    if (!f)
        return 0;
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = 0;
    const char *close_paren = strrchr(buf, ')');
    return close_paren && close_paren[1] == ' ' && close_paren[2] != 'Z' && close_paren[2] != 'X';
}

/* Whether pid's environment (as it was at its exec) names this session. */
static int of_session(pid_t pid, const char *session)
{
    char path[64], want[96];
    snprintf(path, sizeof path, "/proc/%d/environ", (int)pid);
    int n = snprintf(want, sizeof want, "MEMTRACK_SESSION=%s", session);
    FILE *f = fopen(path, "r");
    if (!f)
        return 0;
    char *var = NULL;
    size_t cap = 0;
    int found = 0;
    while (!found && getdelim(&var, &cap, '\0', f) > 0)
        found = strncmp(var, want, (size_t)n) == 0 && var[n] == 0;
    free(var);
    fclose(f);
    return found;
}

/* The pids that opened a trace and did not close it, other than `except`. */
static size_t open_writers(const char *status_path, pid_t except, pid_t *pids, size_t max)
{
    FILE *f = fopen(status_path, "r");
    if (!f)
        return 0;
    size_t n = 0;
    char *line = NULL;
    size_t cap = 0;
    while (getline(&line, &cap, f) > 0) {
        int pid = 0;
        char word[16] = "";
        if (sscanf(line, "%d %15s", &pid, word) < 2 || pid <= 0 || pid == except)
            continue;
        size_t k = 0;
        while (k < n && pids[k] != pid)
            k++;
        if (strcmp(word, "trace") == 0 && k == n && n < max)
            pids[n++] = pid;
        else if (strcmp(word, "closed") == 0 && k < n)
            pids[k] = pids[--n];
    }
    free(line);
    fclose(f);
    return n;
}

void mt_record_wait_writers(const char *status_path, const char *session, pid_t child, const char *name,
                            volatile sig_atomic_t *pending_sig, int quiet)
{
    pid_t pids[MAX_WRITERS];
    int said = 0;
    for (;;) {
        size_t n = open_writers(status_path, child, pids, MAX_WRITERS), live = 0;
        for (size_t k = 0; k < n; k++)
            if (alive(pids[k]) && of_session(pids[k], session))
                pids[live++] = pids[k];
        if (live == 0)
            return;
        int sig = *pending_sig;
        if (sig) {
            *pending_sig = 0;
            for (size_t k = 0; k < live; k++)
                kill(pids[k], sig);
        }
        if (!said && !quiet) {
            fprintf(stderr, "memtrack: %s ended; waiting for process %d%s, which still write%s a "
                            "trace\n", name, (int)pids[0], live > 1 ? " and others" : "", live > 1 ? "" : "s");
            said = 1;
        }
        struct timespec d = {0, 20 * 1000 * 1000};
        nanosleep(&d, NULL);
    }
}
