/* memtrack check [options] -- APP ARGS...
 *
 * Runs APP with libmemtrack_check.so preloaded: its CUDA kernels are
 * instrumented as their modules load and every global, generic and local
 * access is checked against a validity map (docs/check.md). */
#define _GNU_SOURCE
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cli.h"

#define LIB_NAME "libmemtrack_check.so"

void mt_cmd_check_usage(void)
{
    printf("usage: memtrack check [options] -- APP [ARGS...]\n\n"
           "Runs the CUDA program APP with every kernel instrumented: out-of-bounds,\n"
           "misaligned, use-after-free, local-memory and uninitialised accesses are\n"
           "reported instead of faulting, and the synchronisation after them returns\n"
           "the error a native fault would (the context stays usable).\n\n"
           "  --error-exitcode N  exit status when APP succeeded but checks failed (default 1)\n"
           "  --no-init           do not check for uninitialised reads (addressability only)\n"
           "  --redzone BYTES     bytes kept unaddressable before and after each allocation\n"
           "                      (default 512)\n"
           "  --sync              wait for every launch, so reports follow the launch at once\n"
           "  --log FILE          write reports to FILE instead of stderr\n"
           "  --verbose           also list every module instrumented\n"
           "  --lib PATH          the interposer library (default: found next to memtrack)\n");
}

/* libmemtrack_check.so next to the build tree's or the installed binary. */
static int find_lib(char *out, size_t n)
{
    const char *env = getenv("MEMTRACK_CHECK_LIB");
    if (env && *env) {
        snprintf(out, n, "%s", env);
        return 0;
    }
    char exe[PATH_MAX], cand[PATH_MAX + 64];
    struct stat st;
    ssize_t len = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (len > 0) {
        exe[len] = 0;
        char *slash = strrchr(exe, '/');
        if (slash) {
            *slash = 0;
            static const char *const rel[] = {"/../lib/", "/../lib64/", "/../lib/x86_64-linux-gnu/",
                                              "/../lib/aarch64-linux-gnu/"};
            for (size_t i = 0; i < sizeof rel / sizeof rel[0]; i++) {
                snprintf(cand, sizeof cand, "%s%s" LIB_NAME, exe, rel[i]);
                if (stat(cand, &st) == 0 && strlen(cand) < n) {
                    snprintf(out, n, "%s", cand);
                    return 0;
                }
            }
        }
    }
    snprintf(out, n, LIB_NAME); /* the dynamic linker's search path */
    return 0;
}

/* Sums "errors N" over the lines the checked processes appended. */
static int64_t read_errors(const char *path)
{
    FILE *f = fopen(path, "r");
    if (!f)
        return -1;
    int64_t total = 0;
    unsigned long long e;
    char line[512];
    while (fgets(line, sizeof line, f))
        if (sscanf(line, "errors %llu", &e) == 1)
            total += (int64_t)e;
    fclose(f);
    return total;
}

int mt_cmd_check(int argc, char **argv)
{
    int error_exit = 1, i;
    char lib[PATH_MAX] = "";
    for (i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "--") == 0) {
            i++;
            break;
        } else if (strcmp(a, "--error-exitcode") == 0 && i + 1 < argc) {
            error_exit = atoi(argv[++i]);
        } else if (strcmp(a, "--no-init") == 0) {
            setenv("MEMTRACK_CHECK_INIT", "0", 1);
        } else if (strcmp(a, "--redzone") == 0 && i + 1 < argc) {
            setenv("MEMTRACK_CHECK_REDZONE", argv[++i], 1);
        } else if (strcmp(a, "--sync") == 0) {
            setenv("MEMTRACK_CHECK_SYNC", "1", 1);
        } else if (strcmp(a, "--log") == 0 && i + 1 < argc) {
            setenv("MEMTRACK_CHECK_LOG", argv[++i], 1);
        } else if (strcmp(a, "--verbose") == 0) {
            setenv("MEMTRACK_CHECK_VERBOSE", "1", 1);
        } else if (strcmp(a, "--lib") == 0 && i + 1 < argc) {
            snprintf(lib, sizeof lib, "%s", argv[++i]);
        } else {
            return mt_cli_usage_error("check: unknown option '%s'", a);
        }
    }
    if (i >= argc)
        return mt_cli_usage_error("check: no application given (memtrack check -- APP ...)");
    if (!lib[0])
        find_lib(lib, sizeof lib);
    if (access(lib, R_OK) != 0 && strchr(lib, '/')) {
        fprintf(stderr, "memtrack: check: %s: %s\n", lib, strerror(errno));
        return 1;
    }

    char preload[PATH_MAX * 2];
    const char *old = getenv("LD_PRELOAD");
    snprintf(preload, sizeof preload, "%s%s%s", lib, old && *old ? ":" : "", old && *old ? old : "");
    char result[] = "/tmp/memtrack-check-XXXXXX";
    int fd = mkstemp(result);
    if (fd < 0) {
        fprintf(stderr, "memtrack: check: %s\n", strerror(errno));
        return 1;
    }
    close(fd);

    pid_t pid = fork();
    if (pid < 0) {
        fprintf(stderr, "memtrack: check: fork: %s\n", strerror(errno));
        unlink(result);
        return 1;
    }
    if (pid == 0) {
        setenv("LD_PRELOAD", preload, 1);
        setenv("MEMTRACK_CHECK_RESULT", result, 1);
        execvp(argv[i], argv + i);
        fprintf(stderr, "memtrack: check: %s: %s\n", argv[i], strerror(errno));
        _exit(127);
    }
    /* The application gets the terminal's signals; we wait it out. */
    signal(SIGINT, SIG_IGN);
    signal(SIGQUIT, SIG_IGN);
    int status = 0;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
        ;
    int64_t errors = read_errors(result);
    unlink(result);
    if (WIFSIGNALED(status))
        return 128 + WTERMSIG(status);
    int code = WIFEXITED(status) ? WEXITSTATUS(status) : 1;
    if (code == 0 && errors > 0)
        return error_exit;
    return code;
}
