/* memtrack record [-o FILE] [--mode M] [--verify] -- APP ARGS...
 *
 * Runs APP with the capture layer enabled through the Vulkan loader's
 * environment variables: nothing needs to be installed. */
#define _GNU_SOURCE
#include <errno.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cli.h"

#define LAYER_NAME "VK_LAYER_MEMTRACK_capture"
#define LAYER_JSON "VkLayer_memtrack.json"

void mt_cmd_record_usage(void)
{
    printf("usage: memtrack record [-o FILE] [--mode MODE] [--verify] [--quiet] -- APP [ARGS...]\n\n"
           "Runs APP with memtrack's Vulkan layer and writes what it hands the GPU\n"
           "through mapped memory to a trace (default ./memtrack.mtrace).\n\n"
           "  -o FILE        trace path\n"
           "  --mode MODE    auto (default), guard, shadow, scan or copy:\n"
           "                   guard  track the driver's mapping in place (uffd or signal)\n"
           "                   shadow give the app a tracked anonymous mapping, write back\n"
           "                          only changed bytes\n"
           "                   scan   diff all mapped memory at each submit (baseline)\n"
           "                   copy   copy all mapped memory at each submit (baseline)\n"
           "                   auto   guard or scan per memory, from the observed write density\n"
           "  --verify       also hash every mapped memory at each submit, for 'memtrack verify'\n"
           "  --quiet        no progress on stderr\n"
           "  --layer-dir D  directory holding " LAYER_JSON " (default: found next to memtrack)\n");
}

/* Where the layer manifest is: next to the build tree's binary, or installed. */
static int find_layer_dir(char *out, size_t n)
{
    const char *env = getenv("MEMTRACK_LAYER_DIR");
    char exe[PATH_MAX], cand[PATH_MAX + 128];
    struct stat st;
    if (env && *env) {
        snprintf(out, n, "%s", env);
        return 0;
    }
    ssize_t len = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (len <= 0)
        return -1;
    exe[len] = 0;
    char *slash = strrchr(exe, '/');
    if (!slash)
        return -1;
    *slash = 0; /* .../bin */
    static const char *const rel[] = {"/../layer", "/../share/vulkan/explicit_layer.d"};
    for (size_t i = 0; i < sizeof rel / sizeof rel[0]; i++) {
        snprintf(cand, sizeof cand, "%s%s/" LAYER_JSON, exe, rel[i]);
        if (stat(cand, &st) == 0 && strlen(exe) + strlen(rel[i]) < n) {
            strcpy(out, exe);
            strcat(out, rel[i]);
            return 0;
        }
    }
    return -1;
}

static void prepend_env(const char *name, const char *value, char sep)
{
    const char *old = getenv(name);
    if (!old || !*old) {
        setenv(name, value, 1);
        return;
    }
    size_t n = strlen(value) + strlen(old) + 2;
    char *v = malloc(n);
    if (!v)
        return;
    snprintf(v, n, "%s%c%s", value, sep, old);
    setenv(name, v, 1);
    free(v);
}

int mt_cmd_record(int argc, char **argv)
{
    const char *out = "memtrack.mtrace", *mode = NULL, *layer_dir = NULL;
    int verify = 0, quiet = 0, i;
    for (i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--") == 0) {
            i++;
            break;
        } else if (strcmp(argv[i], "-o") == 0 && i + 1 < argc)
            out = argv[++i];
        else if (strcmp(argv[i], "--mode") == 0 && i + 1 < argc)
            mode = argv[++i];
        else if (strcmp(argv[i], "--layer-dir") == 0 && i + 1 < argc)
            layer_dir = argv[++i];
        else if (strcmp(argv[i], "--verify") == 0)
            verify = 1;
        else if (strcmp(argv[i], "--quiet") == 0)
            quiet = 1;
        else if (argv[i][0] == '-')
            return mt_cli_usage_error("record: unknown option '%s'", argv[i]);
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
    char dir[PATH_MAX];
    if (layer_dir)
        snprintf(dir, sizeof dir, "%s", layer_dir);
    else if (find_layer_dir(dir, sizeof dir) != 0) {
        fprintf(stderr, "memtrack: cannot find the layer manifest " LAYER_JSON
                        " (use --layer-dir or MEMTRACK_LAYER_DIR)\n");
        return 1;
    }
    char abs_out[PATH_MAX];
    if (out[0] != '/' && getcwd(abs_out, sizeof abs_out - strlen(out) - 2)) {
        strcat(abs_out, "/");
        strcat(abs_out, out);
    } else {
        snprintf(abs_out, sizeof abs_out, "%s", out);
    }

    prepend_env("VK_ADD_LAYER_PATH", dir, ':');
    prepend_env("VK_INSTANCE_LAYERS", LAYER_NAME, ':'); /* first = closest to the app */
    setenv("MEMTRACK_OUTPUT", abs_out, 1);
    if (mode)
        setenv("MEMTRACK_MODE", mode, 1);
    if (verify)
        setenv("MEMTRACK_VERIFY", "1", 1);
    if (!quiet)
        setenv("MEMTRACK_PROGRESS", "1", 1);

    pid_t pid = fork();
    if (pid < 0) {
        perror("memtrack: fork");
        return 1;
    }
    if (pid == 0) {
        execvp(argv[i], argv + i);
        fprintf(stderr, "memtrack: cannot run %s: %s\n", argv[i], strerror(errno));
        _exit(127);
    }
    /* Ctrl-C goes to the application; we wait for it to finish its trace. */
    signal(SIGINT, SIG_IGN);
    int status;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
        ;
    struct stat st;
    if (stat(abs_out, &st) == 0)
        fprintf(stderr, "memtrack: trace %s (%.1f KiB)\n", abs_out, st.st_size / 1024.0);
    else
        fprintf(stderr, "memtrack: no trace was written (did the application use Vulkan?)\n");
    if (WIFSIGNALED(status)) {
        fprintf(stderr, "memtrack: %s died of signal %d\n", argv[i], WTERMSIG(status));
        return 128 + WTERMSIG(status);
    }
    return WEXITSTATUS(status);
}
