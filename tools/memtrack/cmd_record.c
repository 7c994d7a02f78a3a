/* memtrack record [OPTIONS] -- APP ARGS...
 *
 * Runs APP with the capture layer enabled through the Vulkan loader's
 * environment variables (nothing needs to be installed) and the interposer
 * preloaded, then says what was written. Exit status: the application's when
 * it failed (128+N when it died of signal N); otherwise 1 when no trace was
 * written or capture stopped on an error, else 0. It returns once every
 * process that writes a trace has finished it (record_wait.c). */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "../../layer/config.h"
#include "cli.h"
#include "memtrack/trace.h"
#include "memtrack/track.h"

#define LAYER_NAME "VK_LAYER_MEMTRACK_capture"
#define LAYER_JSON "VkLayer_memtrack.json"
#define PRELOAD_LIB "libmemtrack_preload.so"

void mt_cmd_record_usage(void)
{
    printf("usage: memtrack record [OPTIONS] -- APP [ARGS...]\n\n"
           "Runs APP with memtrack's Vulkan layer and writes what it hands the GPU\n"
           "through mapped memory to a trace (default ./memtrack.mtrace).\n\n"
           "  -o FILE            trace path (replaced if it exists)\n"
           "  --mode MODE        auto (default), guard, shadow, scan or copy:\n"
           "                       guard  track the driver's mapping in place (uffd or signal)\n"
           "                       shadow give the app a tracked anonymous mapping, write back\n"
           "                              only changed bytes\n"
           "                       scan   diff all mapped memory at each submit (baseline)\n"
           "                       copy   copy all mapped memory at each submit (baseline)\n"
           "                       auto   guard or scan per memory, from the observed write density\n"
           "  --verify           also hash every mapped memory at each submit, for 'memtrack verify'\n"
           "  --compression C    default (zstd, fast), fast (about 3x faster, larger trace) or none\n"
           "  --backend B        tracking backend: auto (default: uffd where the kernel offers it\n"
           "                     and the mapping allows it, else signal), signal or uffd\n"
           "  --follow-children  a child process that uses Vulkan gets its own trace\n"
           "                     FILE-stem.PID.mtrace (default: children are not captured)\n"
           "  --no-preload       do not preload the interposer (" PRELOAD_LIB "): kernel writes,\n"
           "                     the app's own signal handlers and masks, mprotect/madvise and\n"
           "                     exits are then handled less well (see docs/layer.md)\n"
           "  --frames A-B       capture only frames A to B (A-: from A on; frames count from 1 at\n"
           "                     each vkQueuePresentKHR); the trace starts with the full content\n"
           "                     of every mapped memory\n"
           "  --trigger SIG      each signal SIG (e.g. USR1: kill -USR1 PID) starts or pauses\n"
           "                     capture; capture starts paused unless --frames starts at 1\n"
           "  --quiet            no progress on stderr\n"
           "  --layer-dir D      directory holding " LAYER_JSON " (default: found next to memtrack)\n"
           "Exit status: the application's if it failed, else 1 if no trace was written or\n"
           "capture stopped on an error, else 0.\n");
}

/* The directory of this executable (".../bin"), malloc'd, or NULL. */
static char *exe_dir(void)
{
    char *exe = realpath("/proc/self/exe", NULL);
    if (!exe)
        return NULL;
    char *slash = strrchr(exe, '/');
    if (slash)
        *slash = 0;
    return exe;
}

/* The first of `dir` + each of rel[] + `file` that exists, malloc'd, or NULL. */
static char *find_beside(const char *dir, const char *const *rel, size_t nrel, const char *file,
                         int want_dir)
{
    struct stat st;
    for (size_t i = 0; dir && i < nrel; i++) {
        char *p = NULL;
        if (asprintf(&p, "%s%s/%s", dir, rel[i], file) < 0)
            return NULL;
        if (stat(p, &st) == 0) {
            if (want_dir)
                *strrchr(p, '/') = 0;
            return p;
        }
        free(p);
    }
    return NULL;
}

static int prepend_env(const char *name, const char *value, char sep)
{
    const char *old = getenv(name);
    if (!old || !*old)
        return setenv(name, value, 1);
    char *v = NULL;
    if (asprintf(&v, "%s%c%s", value, sep, old) < 0)
        return -1;
    int rc = setenv(name, v, 1);
    free(v);
    return rc;
}

static int append_env(const char *name, const char *value, char sep)
{
    const char *old = getenv(name);
    if (!old || !*old)
        return setenv(name, value, 1);
    char *v = NULL;
    if (asprintf(&v, "%s%c%s", old, sep, value) < 0)
        return -1;
    int rc = setenv(name, v, 1);
    free(v);
    return rc;
}

/* The trace path made absolute (the application may change directory). */
static char *absolute(const char *path)
{
    if (path[0] == '/')
        return strdup(path);
    char *cwd = get_current_dir_name();
    char *p = NULL;
    if (cwd && asprintf(&p, "%s/%s", cwd, path) < 0)
        p = NULL;
    free(cwd);
    return p;
}

/* A path for messages: a very long one is shortened in the middle. */
static const char *shown(const char *path, char *buf, size_t n)
{
    size_t len = strlen(path);
    if (len < n)
        return path;
    snprintf(buf, n, "%.*s...%s", (int)(n / 2 - 3), path, path + len - (n / 2 - 1));
    return buf;
}

/* A trace path must be a regular file we can create: never a directory, a
 * FIFO (opening one would block), a device (/dev/full) or a socket. An
 * existing file is the previous run's: removed now, so that whatever is
 * there afterwards was written by this run. Returns 0 or prints why not. */
static int check_output(const char *full)
{
    char buf[160];
    const char *path = shown(full, buf, sizeof buf);
    struct stat st;
    if (stat(full, &st) == 0) {
        if (S_ISDIR(st.st_mode)) {
            fprintf(stderr, "memtrack: record: -o %s is a directory; give a file name\n", path);
            return -1;
        }
        if (!S_ISREG(st.st_mode)) {
            fprintf(stderr, "memtrack: record: -o %s is not a regular file (a FIFO, device or "
                            "socket); a trace must be a file\n", path);
            return -1;
        }
    }
    int fd = open(full, O_WRONLY | O_CREAT | O_NONBLOCK | O_CLOEXEC | O_NOCTTY, 0644);
    if (fd < 0) {
        fprintf(stderr, "memtrack: record: cannot create the trace %s: %s\n", path, strerror(errno));
        return -1;
    }
    close(fd);
    if (unlink(full) != 0) {
        fprintf(stderr, "memtrack: record: cannot replace %s: %s\n", path, strerror(errno));
        return -1;
    }
    return 0;
}

/* What the processes of the session said (MEMTRACK_STATUS). */
typedef struct outcome {
    int traces, errors, passive;
} outcome;

static outcome report(const char *status_path, const char *main_trace)
{
    outcome o = {0, 0, 0};
    FILE *f = fopen(status_path, "r");
    char *line = NULL;
    size_t cap = 0;
    while (f && getline(&line, &cap, f) > 0) {
        line[strcspn(line, "\n")] = 0;
        int pid = 0, n = 0;
        char word[16] = "";
        if (sscanf(line, "%d %15s %n", &pid, word, &n) < 2)
            continue;
        const char *rest = line + n;
        struct stat st;
        if (strcmp(word, "trace") == 0) {
            o.traces++;
            if (stat(rest, &st) == 0)
                fprintf(stderr, "memtrack: trace %s (%.1f KiB)%s\n", rest, st.st_size / 1024.0,
                        strcmp(rest, main_trace) == 0 ? "" : " (child process)");
        } else if (strcmp(word, "error") == 0) {
            o.errors++;
            fprintf(stderr, "memtrack: capture error in process %d: %s\n", pid, rest);
        } else if (strcmp(word, "passive") == 0) {
            o.passive++;
        }
    }
    free(line);
    if (f)
        fclose(f);
    return o;
}

static pid_t g_child;
static volatile sig_atomic_t g_pending_sig; /* for the trace writers, once the child ended */

static void forward(int sig)
{
    if (g_child > 0)
        kill(g_child, sig);
    g_pending_sig = sig;
}

int mt_cmd_record(int argc, char **argv)
{
    const char *out = "memtrack.mtrace", *mode = NULL, *layer_dir = NULL, *backend = NULL;
    const char *frames = NULL, *trigger = NULL, *compression = NULL;
    int verify = 0, quiet = 0, follow = 0, preload = 1, i;
    for (i = 1; i < argc; i++) {
        const char *a = argv[i], *next = i + 1 < argc ? argv[i + 1] : NULL;
        int takes = strcmp(a, "-o") == 0 || strcmp(a, "--mode") == 0 || strcmp(a, "--layer-dir") == 0 ||
                    strcmp(a, "--backend") == 0 || strcmp(a, "--frames") == 0 ||
                    strcmp(a, "--trigger") == 0 || strcmp(a, "--compression") == 0;
        if (takes && (!next || !*next))
            return mt_cli_usage_error("record: %s needs a value", a);
        if (strcmp(a, "--") == 0) {
            i++;
            break;
        } else if (strcmp(a, "-o") == 0)
            out = argv[++i];
        else if (strcmp(a, "--mode") == 0)
            mode = argv[++i];
        else if (strcmp(a, "--layer-dir") == 0)
            layer_dir = argv[++i];
        else if (strcmp(a, "--backend") == 0)
            backend = argv[++i];
        else if (strcmp(a, "--frames") == 0)
            frames = argv[++i];
        else if (strcmp(a, "--trigger") == 0)
            trigger = argv[++i];
        else if (strcmp(a, "--compression") == 0)
            compression = argv[++i];
        else if (strcmp(a, "--verify") == 0)
            verify = 1;
        else if (strcmp(a, "--quiet") == 0)
            quiet = 1;
        else if (strcmp(a, "--follow-children") == 0)
            follow = 1;
        else if (strcmp(a, "--no-preload") == 0)
            preload = 0;
        else if (a[0] == '-')
            return mt_cli_usage_error("record: unknown option '%s'", a);
        else
            break; /* the application, without "--" */
    }
    if (i >= argc)
        return mt_cli_usage_error("record: no application given (memtrack record -- APP ARGS...)");
    static const char *const modes[] = {"auto", "guard", "shadow", "scan", "copy"};
    if (mode) {
        int ok = 0;
        for (size_t k = 0; k < sizeof modes / sizeof modes[0]; k++)
            ok |= strcmp(mode, modes[k]) == 0;
        if (!ok)
            return mt_cli_usage_error("record: unknown mode '%s' (auto, guard, shadow, scan, copy)", mode);
    }
    uint64_t f0, f1;
    if (frames && lt_parse_frames(frames, &f0, &f1) != 0)
        return mt_cli_usage_error("record: --frames takes A-B, A- or A (frames count from 1)");
    if (trigger && lt_parse_signal(trigger) < 0)
        return mt_cli_usage_error("record: --trigger takes a signal such as USR1 (not KILL, STOP, "
                                  "SEGV or BUS)");
    mt_trace_compression comp;
    if (compression && mt_trace_compression_parse(compression, &comp) != 0)
        return mt_cli_usage_error("record: unknown compression '%s' (default, fast, none)", compression);
    if (backend && mt_track_backend_parse(backend) < 0)
        return mt_cli_usage_error("record: unknown backend '%s' (auto, signal, uffd)", backend);
    if (backend && strcmp(backend, "uffd") == 0 && !mt_track_backend_available(MT_TRACK_UFFD))
        fprintf(stderr, "memtrack: record: this kernel has no uffd-wp async (Linux >= 6.7): "
                        "the signal backend is used\n");

    char *dir = exe_dir();
    static const char *const layer_rel[] = {"/../layer", "/../share/vulkan/explicit_layer.d"};
    char *found = layer_dir ? strdup(layer_dir)
                : getenv("MEMTRACK_LAYER_DIR") && *getenv("MEMTRACK_LAYER_DIR")
                    ? strdup(getenv("MEMTRACK_LAYER_DIR"))
                    : find_beside(dir, layer_rel, 2, LAYER_JSON, 1);
    if (!found) {
        fprintf(stderr, "memtrack: cannot find the layer manifest " LAYER_JSON
                        " (use --layer-dir or MEMTRACK_LAYER_DIR)\n");
        free(dir);
        return 1;
    }
    char *preload_lib = NULL;
    if (preload) {
        char buf[PATH_MAX];
        if (mt_track_preload_path(buf, sizeof buf) > 0)
            preload_lib = strdup(buf);
        if (!preload_lib)
            fprintf(stderr, "memtrack: record: " PRELOAD_LIB " not found next to memtrack: running "
                            "without the interposer (see docs/layer.md)\n");
    }
    free(dir);
    char *abs_out = absolute(out);
    if (!abs_out || check_output(abs_out) != 0) {
        free(found);
        free(preload_lib);
        free(abs_out);
        return 1;
    }
    char status_path[] = "/tmp/memtrack-record-XXXXXX";
    int sfd = mkstemp(status_path);
    if (sfd < 0) {
        fprintf(stderr, "memtrack: record: cannot create a status file in /tmp: %s\n", strerror(errno));
        free(found);
        free(preload_lib);
        free(abs_out);
        return 1;
    }
    close(sfd);
    struct timespec now;
    clock_gettime(CLOCK_REALTIME, &now);
    char session[64];
    snprintf(session, sizeof session, "%d-%lld%09ld", (int)getpid(), (long long)now.tv_sec, now.tv_nsec);

    int env_rc = prepend_env("VK_ADD_LAYER_PATH", found, ':');
    env_rc |= prepend_env("VK_INSTANCE_LAYERS", LAYER_NAME, ':'); /* first = closest to the app */
    /* After any sanitizer runtime already there, which must come first; an
     * application linked with ASan checks that its runtime is the first
     * library loaded, which a preload breaks: tell it that is intended. */
    if (preload_lib) {
        env_rc |= append_env("LD_PRELOAD", preload_lib, ':');
        env_rc |= append_env("ASAN_OPTIONS", "verify_asan_link_order=0", ':');
    }
    env_rc |= setenv("MEMTRACK_OUTPUT", abs_out, 1);
    env_rc |= setenv("MEMTRACK_SESSION", session, 1);
    env_rc |= setenv("MEMTRACK_STATUS", status_path, 1);
    if (mode)
        env_rc |= setenv("MEMTRACK_MODE", mode, 1);
    if (backend)
        env_rc |= setenv("MEMTRACK_TRACK_BACKEND", backend, 1);
    if (frames)
        env_rc |= setenv("MEMTRACK_FRAMES", frames, 1);
    if (compression)
        env_rc |= setenv("MEMTRACK_COMPRESSION", compression, 1);
    if (trigger)
        env_rc |= setenv("MEMTRACK_TRIGGER", trigger, 1);
    if (verify)
        env_rc |= setenv("MEMTRACK_VERIFY", "1", 1);
    if (follow)
        env_rc |= setenv("MEMTRACK_FOLLOW_CHILDREN", "1", 1);
    if (!quiet)
        env_rc |= setenv("MEMTRACK_PROGRESS", "1", 1);
    free(found);
    free(preload_lib);
    if (env_rc) {
        fprintf(stderr, "memtrack: record: cannot set up the environment: %s\n", strerror(errno));
        unlink(status_path);
        free(abs_out);
        return 1;
    }

    pid_t pid = fork();
    if (pid < 0) {
        perror("memtrack: fork");
        unlink(status_path);
        free(abs_out);
        return 1;
    }
    if (pid == 0) {
        execvp(argv[i], argv + i);
        fprintf(stderr, "memtrack: cannot run %s: %s\n", argv[i], strerror(errno));
        _exit(127);
    }
    /* Ctrl-C reaches the application through the terminal; a SIGTERM or
     * SIGHUP sent to us is passed on. We wait for it to finish its trace.
     * One we were started with ignored (nohup) stays ignored: the
     * application inherited that too, and must not get a second copy of a
     * hangup sent to the whole group. */
    g_child = pid;
    signal(SIGINT, SIG_IGN);
    signal(SIGQUIT, SIG_IGN);
    if (signal(SIGTERM, forward) == SIG_IGN)
        signal(SIGTERM, SIG_IGN);
    if (signal(SIGHUP, forward) == SIG_IGN)
        signal(SIGHUP, SIG_IGN);
    int status = 0;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
        ;
    /* A SIGTERM/SIGHUP the child had goes to the writers too: they are
     * what it was meant to stop. */
    mt_record_wait_writers(status_path, session, pid, argv[i], &g_pending_sig, quiet);
    outcome o = report(status_path, abs_out);
    unlink(status_path);
    struct stat st;
    int have_trace = stat(abs_out, &st) == 0;
    int rc = 0;
    if (WIFSIGNALED(status)) {
        fprintf(stderr, "memtrack: %s died of signal %d (%s)%s\n", argv[i], WTERMSIG(status),
                strsignal(WTERMSIG(status)),
                have_trace ? ": the trace holds what was captured before" : "");
        rc = 128 + WTERMSIG(status);
    } else if (WEXITSTATUS(status) != 0) {
        rc = WEXITSTATUS(status);
    }
    if (!have_trace) {
        fprintf(stderr, "memtrack: no trace was written (%s)\n",
                o.passive ? "the processes that used Vulkan were not captured"
                          : "did the application create a Vulkan device?");
        if (rc == 0)
            rc = 1;
    } else if (o.errors && rc == 0) {
        rc = 1;
    }
    free(abs_out);
    return rc;
}
