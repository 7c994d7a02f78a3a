/* memtrack dump FILE --submit N (--memory ID | --object ID) -o OUT:
 * the content the GPU saw at submit N. */
#define _GNU_SOURCE
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "progress.h"
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

/* Replays r up to and including SUBMIT `submit`, ticking the progress line.
 * Returns 0 with *out positioned there, -ENOENT when the trace ends first,
 * or a replay error. */
static int replay_until(mt_trace_reader *r, const mt_trace_replay_opts *o, uint64_t submit,
                        mt_cli_progress *prog, mt_trace_replay **out)
{
    int rc = mt_trace_replay_create(r, o, out);
    if (rc)
        return rc;
    mt_trace_record rec;
    while ((rc = mt_trace_replay_next(*out, &rec)) == 1)
        if (rec.type == MT_TRACE_SUBMIT) {
            mt_cli_progress_tick(prog, rec.u.submit.index + 1);
            if (rec.u.submit.index == submit)
                return 0;
        }
    mt_trace_replay_destroy(*out);
    *out = NULL;
    return rc < 0 ? rc : -ENOENT;
}

/* The bytes to dump, in a new *buf: the whole memory `id`, or the window an
 * object occupies in its memory (a first pass without images finds where it
 * is bound at that submit). One replay keeps the image of that memory only,
 * so a dump costs one pass over the trace (two for an object). Returns the
 * size or a negative error. */
static int64_t locate_and_read(mt_trace_reader *r, const mt_trace_info *inf, int is_object, uint64_t id,
                               uint64_t submit, mt_cli_progress *prog, unsigned char **buf)
{
    uint64_t memory = id, offset = 0, used = 0;
    uint64_t until = submit < inf->submits ? submit + 1 : inf->submits;
    mt_cli_progress_start(prog, is_object ? "dump (locating the object)" : "dump", until, until > 1000);
    mt_trace_replay *rp;
    int rc;
    if (is_object) {
        mt_trace_replay_opts where = {.flags = MT_TRACE_REPLAY_NO_IMAGES};
        if ((rc = replay_until(r, &where, submit, prog, &rp)) != 0)
            return rc;
        rc = mt_trace_replay_object(rp, id, &memory, &offset, &used);
        mt_trace_replay_destroy(rp);
        if (rc)
            return rc;
        mt_cli_progress_end(prog);
        mt_cli_progress_start(prog, "dump", until, until > 1000);
    }
    mt_trace_replay_opts one = {.only_memory = memory};
    if ((rc = replay_until(r, &one, submit, prog, &rp)) != 0)
        return rc;
    int64_t msize = mt_trace_replay_memory_size(rp, memory);
    if (msize >= 0 && !is_object)
        used = (uint64_t)msize;
    if (msize >= 0 && (offset > (uint64_t)msize || used > (uint64_t)msize - offset))
        msize = MT_ECORRUPT; /* the binding lies outside its memory */
    if (msize >= 0 && (*buf = malloc(used ? (size_t)used : 1)) == NULL)
        msize = -ENOMEM;
    if (msize >= 0 && used)
        msize = mt_trace_replay_read(rp, memory, offset, *buf, (size_t)used);
    mt_trace_replay_destroy(rp);
    return msize < 0 ? msize : (int64_t)used;
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
    mt_trace_info inf;
    mt_trace_reader_info(r, &inf);
    mt_cli_progress prog;
    unsigned char *buf = NULL;
    int64_t size = locate_and_read(r, &inf, is_object, id, submit, &prog, &buf);
    mt_cli_progress_end(&prog);
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
