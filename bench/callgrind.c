/* `memtrack bench SUITE --callgrind` (bench.h): the suite's measured loops
 * counted by valgrind's callgrind, which machine load does not disturb.
 *
 * The parent re-executes its own binary as `valgrind --tool=callgrind
 * --collect-atstart=no --cache-sim=yes ... memtrack bench SUITE` with
 * MEMTRACK_BENCH_CALLGRIND_CHILD=1 in the environment. Nothing is counted
 * until the child turns counting on (client request TOGGLE_COLLECT) around
 * a measured loop; after the loop it dumps the counts (DUMP_STATS_AT) with
 * a description naming the case and its operation count, which also
 * zeroes them. Callgrind writes each dump to OUT.N; the parent reads them
 * in order and hands the suite instructions and L1 data misses per dump. */
#define _GNU_SOURCE
#include "bench.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#if defined(__has_include)
#if __has_include(<valgrind/callgrind.h>)
#include <valgrind/callgrind.h>
#define MT_HAVE_CALLGRIND_H 1
#endif
#endif

#define DESC_PREFIX "memtrack-bench "

extern char **environ;

void mt_bench_cg_toggle(void)
{
#ifdef MT_HAVE_CALLGRIND_H
    CALLGRIND_TOGGLE_COLLECT;
#endif
}

void mt_bench_cg_done(const char *name, uint64_t ops)
{
#ifdef MT_HAVE_CALLGRIND_H
    char desc[160];
    snprintf(desc, sizeof desc, DESC_PREFIX "%s %llu", name, (unsigned long long)ops);
    CALLGRIND_DUMP_STATS_AT(desc);
#else
    (void)name;
    (void)ops;
#endif
}

/* Index of `want` in the "events:" line's list, or -1. */
static int event_index(const char *events, const char *want)
{
    char buf[1024];
    snprintf(buf, sizeof buf, "%s", events);
    int i = 0;
    for (char *save = NULL, *t = strtok_r(buf, " \n", &save); t; t = strtok_r(NULL, " \n", &save), i++)
        if (strcmp(t, want) == 0)
            return i;
    return -1;
}

/* The n-th value of a "summary:" line, 0 when absent (callgrind leaves
 * trailing zeros out). */
static double event_value(const char *summary, int n)
{
    if (n < 0)
        return 0;
    const char *p = summary;
    for (int i = 0; i < n && *p; i++) {
        while (*p == ' ')
            p++;
        while (*p && *p != ' ' && *p != '\n')
            p++;
    }
    return strtod(p, NULL);
}

/* Reads one dump; returns 1 with *r filled, 0 when it is not one of ours. */
static int parse_dump(const char *path, mt_bench_cg_result *r)
{
    FILE *f = fopen(path, "r");
    if (!f)
        return 0;
    char line[1024], events[1024] = "";
    int ours = 0, have = 0;
    while (fgets(line, sizeof line, f)) {
        const char *d = "desc: Trigger: Client Request: " DESC_PREFIX;
        if (strncmp(line, d, strlen(d)) == 0) {
            char name[64];
            unsigned long long ops;
            if (sscanf(line + strlen(d), "%63s %llu", name, &ops) == 2) {
                snprintf(r->name, sizeof r->name, "%s", name);
                r->ops = (double)ops;
                ours = 1;
            }
        } else if (strncmp(line, "events:", 7) == 0) {
            snprintf(events, sizeof events, "%s", line + 7);
        } else if (strncmp(line, "summary:", 8) == 0 && events[0]) {
            const char *v = line + 8;
            r->ir = event_value(v, event_index(events, "Ir"));
            r->d1_misses = event_value(v, event_index(events, "D1mr")) +
                           event_value(v, event_index(events, "D1mw"));
            have = 1;
        }
    }
    fclose(f);
    return ours && have;
}

/* Runs the child under callgrind; 0 or a negative errno. */
static int run_child(const mt_bench_ctx *ctx, const char *dir)
{
    char exe[PATH_MAX], out[PATH_MAX + 64], log[PATH_MAX + 64];
    ssize_t len = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (len <= 0)
        return -errno;
    exe[len] = '\0';
    snprintf(out, sizeof out, "--callgrind-out-file=%s/cg", dir);
    snprintf(log, sizeof log, "%s/valgrind.log", dir);
    char *argv[] = {"valgrind", "--tool=callgrind", "--collect-atstart=no", "--cache-sim=yes",
                    out, exe, "bench", (char *)mt_bench_suite_name(ctx),
                    mt_bench_quick(ctx) ? "--quick" : NULL, NULL};
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, STDOUT_FILENO, "/dev/null", O_WRONLY, 0);
    posix_spawn_file_actions_addopen(&fa, STDERR_FILENO, log, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    setenv("MEMTRACK_BENCH_CALLGRIND_CHILD", "1", 1);
    pid_t pid;
    int rc = posix_spawnp(&pid, "valgrind", &fa, NULL, argv, environ);
    unsetenv("MEMTRACK_BENCH_CALLGRIND_CHILD");
    posix_spawn_file_actions_destroy(&fa);
    if (rc != 0)
        return -rc; /* ENOENT: no valgrind */
    int st;
    while (waitpid(pid, &st, 0) < 0)
        if (errno != EINTR)
            return -errno;
    if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
        fprintf(stderr, "memtrack bench --callgrind: the run under valgrind failed; see %s\n", log);
        return -EIO;
    }
    unlink(log);
    return 0;
}

int mt_bench_cg_run(const mt_bench_ctx *ctx, mt_bench_cg_result *out, int n)
{
#ifndef MT_HAVE_CALLGRIND_H
    (void)ctx;
    (void)out;
    (void)n;
    fprintf(stderr, "memtrack bench --callgrind: built without valgrind/callgrind.h\n");
    return -ENOTSUP;
#else
    char dir[] = "/tmp/memtrack-callgrind-XXXXXX";
    if (!mkdtemp(dir))
        return -errno;
    int rc = run_child(ctx, dir);
    if (rc == -ENOENT)
        fprintf(stderr, "memtrack bench --callgrind: valgrind not found (apt-get install valgrind)\n");
    int count = 0;
    char path[sizeof dir + 32];
    /* Dumps are numbered from 1; the final one (at exit) has no number. */
    for (int i = 1; rc == 0; i++) {
        snprintf(path, sizeof path, "%s/cg.%d", dir, i);
        if (access(path, R_OK) != 0)
            break;
        if (count < n && parse_dump(path, &out[count]))
            count++;
        unlink(path);
    }
    snprintf(path, sizeof path, "%s/cg", dir);
    unlink(path);
    if (rc != 0)
        fprintf(stderr, "memtrack bench --callgrind: files left in %s\n", dir);
    else
        rmdir(dir);
    return rc ? rc : count;
#endif
}
