/* memtrack report TRACE [-o OUT]: one self-contained HTML page of charts
 * about a trace (report.h). */
#define _GNU_SOURCE
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cli.h"
#include "memtrack/memtrack.h"
#include "report.h"

void mt_cmd_report_usage(void)
{
    printf("usage: memtrack report TRACE [-o OUT]\n\n"
           "Writes one self-contained HTML page (no network, no external script) with\n"
           "charts of the trace: bytes changed per submit, a heatmap of written pages\n"
           "per memory across submits, the capture mode of each memory and why it\n"
           "changed, compression per chunk, the memories and objects, and any\n"
           "mismatch records. Open it in a browser.\n"
           "  -o OUT   the page (default: TRACE's name with .html for .mtrace, in the\n"
           "           current directory; '-' for stdout)\n");
}

/* "dir/app.mtrace" -> "app.html". */
static char *default_out(const char *trace)
{
    const char *base = strrchr(trace, '/');
    base = base ? base + 1 : trace;
    size_t n = strlen(base);
    if (n > 7 && strcmp(base + n - 7, ".mtrace") == 0)
        n -= 7;
    char *out = NULL;
    return asprintf(&out, "%.*s.html", (int)n, base) < 0 ? NULL : out;
}

int mt_cmd_report(int argc, char **argv)
{
    const char *path = NULL, *out = NULL;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "-o") == 0) {
            if (i + 1 >= argc)
                return mt_cli_usage_error("report: -o needs a value");
            out = argv[++i];
        } else if (argv[i][0] == '-' && argv[i][1])
            return mt_cli_usage_error("report: unknown option '%s'", argv[i]);
        else if (path)
            return mt_cli_usage_error("report: one trace at a time");
        else
            path = argv[i];
    }
    if (!path)
        return mt_cli_usage_error("report: no trace given");
    char *def = out ? NULL : default_out(path);
    if (!out && !(out = def)) {
        fprintf(stderr, "memtrack: report: out of memory\n");
        return 1;
    }
    report r = {.path = path};
    int rc = mt_report_collect(&r, 1);
    if (rc) {
        fprintf(stderr, "memtrack: report: %s: %s%s\n", path, mt_strerror(rc),
                rc == -ENOENT ? ": check the path" : rc == -ENOMEM ? "" :
                ": is it a memtrack trace? ('memtrack info' tells what part of it is readable)");
        free(def);
        return 1;
    }
    if (r.error)
        fprintf(stderr, "memtrack: report: %s: reading stopped early (%s): the report covers the "
                        "records before it ('memtrack verify %s' tells more)\n",
                path, mt_strerror(r.error), path);
    int to_stdout = strcmp(out, "-") == 0;
    FILE *f = to_stdout ? stdout : fopen(out, "w");
    if (!f) {
        fprintf(stderr, "memtrack: report: cannot create %s: %s: choose another path with -o\n", out,
                strerror(errno));
        mt_report_free(&r);
        free(def);
        return 1;
    }
    rc = mt_report_write_html(&r, f);
    if ((to_stdout ? fflush(f) : fclose(f)) != 0 && !rc)
        rc = -errno;
    if (rc) {
        fprintf(stderr, "memtrack: report: writing %s: %s: check the free space, or choose another "
                        "path with -o\n", out, strerror(-rc));
    } else if (!to_stdout) {
        struct stat st;
        fprintf(stderr, "memtrack: report of %s (%" PRIu64 " submits) -> %s (%lld KiB)\n", path,
                r.inf.submits, out, stat(out, &st) == 0 ? (long long)st.st_size / 1024 : 0LL);
    }
    mt_report_free(&r);
    free(def);
    return rc ? 1 : 0;
}
