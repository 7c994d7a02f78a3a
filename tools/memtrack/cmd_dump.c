/* memtrack dump FILE --submit N (--memory ID | --object ID) -o OUT:
 * the content the GPU saw at submit N. */
#define _GNU_SOURCE
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "memtrack/memtrack.h"

void mt_cmd_dump_usage(void)
{
    printf("usage: memtrack dump FILE --submit N (--memory ID | --object ID) -o OUT\n\n"
           "Writes the content of a memory, or of a buffer/image (its used bytes at\n"
           "its binding), as the GPU saw it at submit N, to OUT ('-' for stdout).\n"
           "'memtrack info FILE --memories' lists memory ids.\n");
}

static int parse_u64(const char *s, uint64_t *out)
{
    char *end;
    if (!s || !*s)
        return -1;
    *out = strtoull(s, &end, 0);
    return *end ? -1 : 0;
}

int mt_cmd_dump(int argc, char **argv)
{
    const char *path = NULL, *out = NULL;
    uint64_t submit = 0, id = 0;
    int have_submit = 0, is_object = -1;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *next = i + 1 < argc ? argv[i + 1] : NULL;
        if (strcmp(a, "--submit") == 0) {
            if (parse_u64(next, &submit))
                return mt_cli_usage_error("dump: --submit needs a number");
            have_submit = 1, i++;
        } else if (strcmp(a, "--memory") == 0 || strcmp(a, "--object") == 0) {
            if (is_object >= 0)
                return mt_cli_usage_error("dump: give one of --memory or --object");
            if (parse_u64(next, &id))
                return mt_cli_usage_error("dump: %s needs an id", a);
            is_object = strcmp(a, "--object") == 0, i++;
        } else if (strcmp(a, "-o") == 0) {
            if (!next)
                return mt_cli_usage_error("dump: -o needs a file");
            out = next, i++;
        } else if (a[0] == '-') {
            return mt_cli_usage_error("dump: unknown option '%s'", a);
        } else if (path) {
            return mt_cli_usage_error("dump: one trace at a time");
        } else {
            path = a;
        }
    }
    if (!path || !have_submit || is_object < 0 || !out)
        return mt_cli_usage_error("dump: need FILE, --submit N, --memory ID or --object ID, and -o OUT");

    mt_trace_reader *r;
    int rc = mt_trace_reader_open(path, NULL, &r);
    if (rc) {
        fprintf(stderr, "memtrack: %s: %s\n", path, mt_strerror(rc));
        return 1;
    }
    /* First pass learns the size, second fills the buffer. */
    int64_t size = is_object ? mt_trace_reconstruct_object(r, id, submit, NULL, 0)
                             : mt_trace_reconstruct(r, id, submit, NULL, 0);
    unsigned char *buf = NULL;
    if (size >= 0 && (buf = malloc(size ? (size_t)size : 1)) == NULL)
        size = -ENOMEM;
    if (size >= 0)
        size = is_object ? mt_trace_reconstruct_object(r, id, submit, buf, (size_t)size)
                         : mt_trace_reconstruct(r, id, submit, buf, (size_t)size);
    mt_trace_info inf;
    mt_trace_reader_info(r, &inf);
    mt_trace_reader_close(r);
    if (size < 0) {
        if (size == -ENOENT && submit >= inf.submits)
            fprintf(stderr, "memtrack: %s: no submit %" PRIu64 ": the trace has %" PRIu64
                            " submits (0..%" PRIu64 ")\n",
                    path, submit, inf.submits, inf.submits ? inf.submits - 1 : 0);
        else if (size == -ENOENT)
            fprintf(stderr, "memtrack: %s: %s %" PRIu64 " does not exist at submit %" PRIu64
                            "%s ('memtrack info %s --memories' lists memories and objects)\n",
                    path, is_object ? "object" : "memory", id, submit,
                    is_object ? " or is not bound to memory then" : "", path);
        else
            fprintf(stderr, "memtrack: %s: %s %" PRIu64 " at submit %" PRIu64 ": %s\n", path,
                    is_object ? "object" : "memory", id, submit, mt_strerror((int)size));
        free(buf);
        return 1;
    }
    FILE *f = strcmp(out, "-") == 0 ? stdout : fopen(out, "wb");
    if (!f || fwrite(buf, 1, (size_t)size, f) != (size_t)size || (f != stdout && fclose(f) != 0)) {
        perror("memtrack: writing output");
        free(buf);
        return 1;
    }
    if (f != stdout)
        fprintf(stderr, "memtrack: %" PRId64 " bytes of %s %" PRIu64 " at submit %" PRIu64 " -> %s\n",
                size, is_object ? "object" : "memory", id, submit, out);
    free(buf);
    return 0;
}
