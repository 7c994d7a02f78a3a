/* Tests: saying where a hung child process is, before it is killed.
 *
 * A test that finds a child hung (a deadlock it exists to catch, or a
 * machine too loaded for its bounds) kills it, and then only its own line
 * is left to say what happened. This prints, to stderr, each of the child's
 * threads with its kernel state and the kernel function it sleeps in (a
 * thread in D state points at the disk, not at memtrack), then every
 * thread's backtrace from gdb when gdb is installed (scripts/deps.sh
 * installs it). Call it from the parent, before the kill. */
#ifndef MT_TEST_HANG_DUMP_H
#define MT_TEST_HANG_DUMP_H

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>

/* Copies the first line of /proc/<pid>/task/<tid>/<name> into out. */
static inline void mt_hang_read_(pid_t pid, const char *tid, const char *name, char *out, size_t n)
{
    char path[320];
    snprintf(path, sizeof path, "/proc/%d/task/%s/%s", (int)pid, tid, name);
    out[0] = '\0';
    FILE *f = fopen(path, "r");
    if (!f)
        return;
    if (!fgets(out, (int)n, f))
        out[0] = '\0';
    fclose(f);
    out[strcspn(out, "\n")] = '\0';
}

static inline void mt_hang_dump(pid_t pid, const char *who)
{
    fprintf(stderr, "%s: where the hung process %d is:\n", who, (int)pid);
    char dir[64];
    snprintf(dir, sizeof dir, "/proc/%d/task", (int)pid);
    DIR *d = opendir(dir);
    if (d) {
        struct dirent *e;
        while ((e = readdir(d))) {
            if (e->d_name[0] == '.')
                continue;
            char stat[512], wchan[128];
            mt_hang_read_(pid, e->d_name, "stat", stat, sizeof stat);
            mt_hang_read_(pid, e->d_name, "wchan", wchan, sizeof wchan);
            /* stat: "tid (comm) S ..."; the comm may hold spaces, the state
             * follows its last ')'. */
            const char *close = strrchr(stat, ')');
            char state = close && close[1] == ' ' ? close[2] : '?';
            fprintf(stderr, "  thread %s: state %c, in kernel %s\n", e->d_name, state,
                    wchan[0] && strcmp(wchan, "0") != 0 ? wchan : "(running or user space)");
        }
        closedir(d);
    }
    fflush(stderr);
    char cmd[160];
    snprintf(cmd, sizeof cmd,
             "command -v gdb >/dev/null && gdb -batch -p %d -ex 'thread apply all bt' 1>&2 2>/dev/null",
             (int)pid);
    if (system(cmd) != 0)
        fprintf(stderr, "%s: no backtraces (gdb missing or could not attach)\n", who);
}

#endif
