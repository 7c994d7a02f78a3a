/* memtrack verify FILE [--all] [--json]: replay the update packets and compare
 * the result with the content hashes recorded at each submit (memtrack record
 * --verify), and report the mismatches the capture classified.
 *
 * At each submit the capture compared the real bytes with what it recorded
 * (MISMATCH records, docs/trace-format.md): bytes the application wrote
 * while the capture ran (a race) and device-writable bytes that device work
 * still running changed are reported, not failures: they are captured at the
 * next submit, and the submit's hash covers what was recorded. A difference
 * nothing explains is a lost write, and so is any hash that does not match
 * the replay (the trace's own bytes would be wrong).
 *
 * Exit status, so that scripts can tell the outcomes apart:
 *   0  complete and exact: the trace ends with its trailer, every hash matched
 *   1  FAILED: a lost write (a hash did not match), or the trace is unreadable
 *   3  exact but incomplete: every hash matched, but the trace ended without
 *      its trailer (the process was killed or crashed): verified up to there
 *   4  cannot verify: the trace holds no content hashes (recorded without --verify) */
#define _GNU_SOURCE
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "progress.h"
#include "memtrack/memtrack.h"

enum { V_OK = 0, V_FAILED = 1, V_INCOMPLETE = 3, V_NO_HASHES = 4 };
enum { SHOW_PER_CAUSE = 10 };

void mt_cmd_verify_usage(void)
{
    printf("usage: memtrack verify FILE [--all] [--json]\n\n"
           "Replays the trace and compares every memory's reconstructed content with\n"
           "the hash of its real content recorded at each submit (record with --verify),\n"
           "and lists the mismatches the capture found and classified:\n"
           "  host    bytes the application wrote while the capture ran (a race: captured\n"
           "          at the next submit; not a failure)\n"
           "  device  device-writable bytes changed by device work still running (captured\n"
           "          at the next submit; not a failure)\n"
           "  lost    a write the capture missed: FAILED\n\n"
           "  --all    list every mismatch (default: the first 10 of each kind)\n"
           "  --json   one JSON object on stdout instead of the text report\n\n"
           "Exit status:\n"
           "  0  complete and exact: every submit matches and the trace ended properly\n"
           "  1  FAILED: a lost write or a mismatching hash, or the trace cannot be read\n"
           "  3  exact but incomplete: every hash matched, but the trace ended without its\n"
           "     trailer (the application was killed or crashed, or the disk filled); verified\n"
           "     up to its end\n"
           "  4  cannot verify: the trace holds no content hashes\n");
}

/* Object kinds by id, to name what a mismatch's bytes belong to. */
typedef struct objkinds {
    uint64_t *id;
    uint32_t *kind;
    size_t n, cap;
} objkinds;

static void objkinds_add(objkinds *o, uint64_t id, uint32_t kind)
{
    if (o->n == o->cap) {
        size_t cap = o->cap ? 2 * o->cap : 256;
        uint64_t *ids = realloc(o->id, cap * sizeof *ids);
        if (!ids)
            return;
        o->id = ids;
        uint32_t *kinds = realloc(o->kind, cap * sizeof *kinds);
        if (!kinds)
            return;
        o->kind = kinds;
        o->cap = cap;
    }
    o->id[o->n] = id;
    o->kind[o->n++] = kind;
}

static const char *objkind_name(const objkinds *o, uint64_t id)
{
    for (size_t i = o->n; i-- > 0;) /* ids grow: recent objects last */
        if (o->id[i] == id)
            return o->kind[i] == MT_TRACE_OBJECT_IMAGE ? "image" : "buffer";
    return "object";
}

static const char *cause_name(uint32_t c)
{
    return c == MT_TRACE_MISMATCH_HOST ? "host" : c == MT_TRACE_MISMATCH_DEVICE ? "device" : "lost";
}

static void json_string(FILE *f, const char *s) { mt_cli_json_string(f, s, strlen(s), 0); }

int mt_cmd_verify(int argc, char **argv)
{
    const char *path = NULL;
    int all = 0, json = 0;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--all") == 0)
            all = 1;
        else if (strcmp(argv[i], "--json") == 0)
            json = 1;
        else if (argv[i][0] == '-')
            return mt_cli_usage_error("verify: unknown option '%s'", argv[i]);
        else if (path)
            return mt_cli_usage_error("verify: one trace at a time");
        else
            path = argv[i];
    }
    if (!path)
        return mt_cli_usage_error("verify: give a trace file");
    mt_trace_reader *r;
    mt_trace_replay *rp;
    if (mt_cli_open_replay(path, MT_TRACE_REPLAY_VERIFY, &r, &rp) != 0)
        return V_FAILED;
    mt_trace_info inf;
    mt_trace_reader_info(r, &inf);
    mt_cli_progress prog;
    mt_cli_progress_start(&prog, "verify", inf.submits, !json && inf.submits > 1000);
    FILE *out = json ? stdout : NULL;
    if (json)
        fprintf(out, "{\"file\":"), json_string(out, path), fprintf(out, ",\"mismatches\":[");

    objkinds objs = {0};
    mt_trace_record rec;
    mt_trace_replay_stats st;
    uint64_t bad_before = 0, bad_submits = 0, submit_hashes = 0, submit = 0;
    uint64_t count[4] = {0}, bytes[4] = {0};
    int printed_mismatch = 0, rc;
    while ((rc = mt_trace_replay_next(rp, &rec)) == 1) {
        switch (rec.type) {
        case MT_TRACE_OBJECT: objkinds_add(&objs, rec.u.object.id, rec.u.object.kind); break;
        case MT_TRACE_CONTENT_HASH: submit_hashes++; break;
        case MT_TRACE_MISMATCH: {
            uint32_t c = rec.u.mismatch.cause;
            int first = count[c]++ == 0;
            bytes[c] += rec.u.mismatch.length;
            if (json) {
                fprintf(out, "%s{\"submit\":%" PRIu64 ",\"memory\":%" PRIu64 ",\"object\":%" PRIu64
                             ",\"object_kind\":\"%s\",\"offset\":%" PRIu64 ",\"length\":%" PRIu64
                             ",\"cause\":\"%s\",\"running\":%" PRIu64 "}",
                        count[1] + count[2] + count[3] > 1 ? "," : "", submit, rec.u.mismatch.memory,
                        rec.u.mismatch.object,
                        rec.u.mismatch.object ? objkind_name(&objs, rec.u.mismatch.object) : "none",
                        rec.u.mismatch.offset, rec.u.mismatch.length, cause_name(c), rec.u.mismatch.running);
            } else if (all || count[c] <= SHOW_PER_CAUSE) {
                char what[64] = "";
                if (rec.u.mismatch.object)
                    snprintf(what, sizeof what, " (%s %" PRIu64 ")",
                             objkind_name(&objs, rec.u.mismatch.object), rec.u.mismatch.object);
                printf("%-12s submit %" PRIu64 ", memory %" PRIu64 "%s, bytes [%" PRIu64 ", %" PRIu64 ")",
                       c == MT_TRACE_MISMATCH_LOST ? "LOST" : c == MT_TRACE_MISMATCH_HOST ? "raced" : "in-flight",
                       submit, rec.u.mismatch.memory, what, rec.u.mismatch.offset,
                       rec.u.mismatch.offset + rec.u.mismatch.length);
                if (c == MT_TRACE_MISMATCH_HOST)
                    printf(": written by the application while the capture ran%s\n",
                           first ? " (captured at the next submit)" : "");
                else if (c == MT_TRACE_MISMATCH_DEVICE)
                    printf(": device-writable, %" PRIu64 " queue%s with work not yet waited on%s\n",
                           rec.u.mismatch.running, rec.u.mismatch.running == 1 ? "" : "s",
                           first ? " (captured at the next submit)" : "");
                else
                    printf(": the capture missed a write here\n");
                printed_mismatch = 1;
            }
            break;
        }
        case MT_TRACE_SUBMIT:
            submit = rec.u.submit.index + 1;
            mt_trace_replay_stats_get(rp, &st);
            if (st.hashes_mismatched > bad_before) {
                bad_submits++;
                if (!json && bad_submits <= SHOW_PER_CAUSE)
                    printf("MISMATCH     submit %" PRIu64 ": %" PRIu64 " of %" PRIu64
                           " memories differ from the recorded content\n",
                           rec.u.submit.index, st.hashes_mismatched - bad_before, submit_hashes);
                bad_before = st.hashes_mismatched;
            }
            submit_hashes = 0;
            mt_cli_progress_tick(&prog, submit);
            break;
        default: break;
        }
    }
    mt_cli_progress_end(&prog);
    mt_trace_replay_stats_get(rp, &st);
    int result;
    const char *text;
    if (rc < 0)
        result = V_FAILED, text = "FAILED: the trace cannot be read to its end";
    else if (st.hashes_mismatched || count[MT_TRACE_MISMATCH_LOST])
        result = V_FAILED, text = "FAILED: the capture lost writes (the trace lacks bytes the application wrote)";
    else if (st.hashes_checked == 0)
        result = V_NO_HASHES, text = "cannot verify";
    else if (!inf.complete)
        result = V_INCOMPLETE, text = "OK but incomplete: every submit in the trace matches";
    else
        result = V_OK, text = "OK: every submit matches";

    if (json) {
        fprintf(out, "],\"submits\":%" PRIu64 ",\"updates\":%" PRIu64 ",\"update_bytes\":%" PRIu64
                     ",\"hashes_checked\":%" PRIu64 ",\"hashes_mismatched\":%" PRIu64
                     ",\"raced\":%" PRIu64 ",\"in_flight\":%" PRIu64 ",\"lost\":%" PRIu64
                     ",\"complete\":%s,\"end\":\"%s\",\"tail_records\":%" PRIu64 ",\"error\":",
                st.submits, st.updates, st.update_bytes, st.hashes_checked, st.hashes_mismatched,
                count[MT_TRACE_MISMATCH_HOST], count[MT_TRACE_MISMATCH_DEVICE], count[MT_TRACE_MISMATCH_LOST],
                inf.complete ? "true" : "false", mt_cli_end_name(inf.end), inf.tail_records);
        if (rc < 0)
            json_string(out, mt_strerror(rc));
        else
            fprintf(out, "null");
        fprintf(out, ",\"result\":\"%s\",\"exit\":%d}\n",
                result == V_OK ? "ok" : result == V_INCOMPLETE ? "incomplete"
                : result == V_NO_HASHES ? "cannot-verify" : "failed", result);
    } else {
        if (printed_mismatch && !all &&
            (count[1] > SHOW_PER_CAUSE || count[2] > SHOW_PER_CAUSE || count[3] > SHOW_PER_CAUSE))
            printf("             (the first %d of each kind; --all lists every one)\n", SHOW_PER_CAUSE);
        printf("verify       %s\n", path);
        printf("submits      %" PRIu64 " replayed, %" PRIu64 " update packets (%" PRIu64 " bytes)\n",
               st.submits, st.updates, st.update_bytes);
        printf("hashes       %" PRIu64 " checked, %" PRIu64 " mismatched", st.hashes_checked,
               st.hashes_mismatched);
        if (st.hashes_mismatched)
            printf(" (first: submit %" PRIu64 ", memory %" PRIu64 "; %" PRIu64 " submits affected)",
                   st.first_mismatch_submit, st.first_mismatch_memory, bad_submits);
        printf("\n");
        if (count[1] || count[2])
            printf("races        %" PRIu64 " ranges (%" PRIu64 " bytes) written by the application and %" PRIu64
                   " (%" PRIu64 " bytes) by device work still running, while the capture ran:\n"
                   "             captured at the next submit, not failures\n",
                   count[1], bytes[1], count[2], bytes[2]);
        if (count[3])
            printf("lost         %" PRIu64 " ranges (%" PRIu64 " bytes) the capture missed\n", count[3], bytes[3]);
        if (rc < 0)
            printf("error        replay stopped: %s\n", mt_strerror(rc));
        if (result == V_NO_HASHES) {
            const char *v = mt_trace_meta_get(r, "verify");
            if (v && strcmp(v, "1") == 0)
                printf("note         recorded with --verify, but no memory was mapped at any submit or "
                       "unmap: nothing to check\n");
            else
                printf("note         no content hashes in this trace: record it with --verify\n");
        }
        if (result == V_INCOMPLETE)
            printf("note         the trace ended without its trailer (%s): verified up to submit %" PRIu64
                   "%s\n",
                   inf.end == MT_TRACE_END_EMERGENCY
                       ? "written by the emergency flush of a dying process"
                       : "the application was killed or crashed, or writing the trace failed: a full disk",
                   st.submits ? st.submits - 1 : 0,
                   inf.tail_records ? "; the records after it (a partial submit) are not verified" : "");
        printf("result       %s\n", text);
    }
    free(objs.id);
    free(objs.kind);
    mt_trace_replay_destroy(rp);
    mt_trace_reader_close(r);
    return result;
}
