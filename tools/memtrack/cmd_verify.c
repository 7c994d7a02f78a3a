/* memtrack verify FILE: replay the update packets and compare the result with
 * the content hashes recorded at each submit (memtrack record --verify).
 *
 * Exit status, so that scripts can tell the outcomes apart:
 *   0  complete and exact: the trace ends with its trailer, every hash matched
 *   1  FAILED: a hash did not match (a lost write), or the trace is unreadable
 *   3  exact but incomplete: every hash matched, but the trace ended without
 *      its trailer (the process was killed or crashed): verified up to there
 *   4  cannot verify: the trace holds no content hashes (recorded without --verify) */
#define _GNU_SOURCE
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "memtrack/memtrack.h"

enum { V_OK = 0, V_FAILED = 1, V_INCOMPLETE = 3, V_NO_HASHES = 4 };

void mt_cmd_verify_usage(void)
{
    printf("usage: memtrack verify FILE\n\n"
           "Replays the trace and compares every memory's reconstructed content with\n"
           "the hash of its real content recorded at each submit (record with --verify).\n\n"
           "Exit status:\n"
           "  0  complete and exact: every submit matches and the trace ended properly\n"
           "  1  FAILED: a mismatch (a lost write), or the trace cannot be read\n"
           "  3  exact but incomplete: every hash matched, but the trace ended without its\n"
           "     trailer (the application was killed or crashed); verified up to its end\n"
           "  4  cannot verify: the trace holds no content hashes\n");
}

int mt_cmd_verify(int argc, char **argv)
{
    if (argc != 2 || argv[1][0] == '-')
        return mt_cli_usage_error("verify: exactly one trace file");
    const char *path = argv[1];
    mt_trace_reader *r;
    mt_trace_replay *rp;
    if (mt_cli_open_replay(path, MT_TRACE_REPLAY_VERIFY, &r, &rp) != 0)
        return V_FAILED;
    int rc;
    mt_trace_info inf;
    mt_trace_reader_info(r, &inf);
    mt_trace_record rec;
    mt_trace_replay_stats st;
    uint64_t bad_before = 0, bad_submits = 0, submit_hashes = 0, after_last = 0;
    int printed = 0;
    while ((rc = mt_trace_replay_next(rp, &rec)) == 1) {
        after_last++;
        if (rec.type == MT_TRACE_CONTENT_HASH)
            submit_hashes++;
        if (rec.type != MT_TRACE_SUBMIT)
            continue;
        after_last = 0;
        mt_trace_replay_stats_get(rp, &st);
        if (st.hashes_mismatched > bad_before) {
            bad_submits++;
            if (printed++ < 10)
                printf("MISMATCH     submit %" PRIu64 ": %" PRIu64 " of %" PRIu64
                       " memories differ from the recorded content\n",
                       rec.u.submit.index, st.hashes_mismatched - bad_before, submit_hashes);
            bad_before = st.hashes_mismatched;
        }
        submit_hashes = 0;
    }
    mt_trace_replay_stats_get(rp, &st);
    printf("verify       %s\n", path);
    printf("submits      %" PRIu64 " replayed, %" PRIu64 " update packets (%" PRIu64 " bytes)\n",
           st.submits, st.updates, st.update_bytes);
    printf("hashes       %" PRIu64 " checked, %" PRIu64 " mismatched", st.hashes_checked,
           st.hashes_mismatched);
    if (st.hashes_mismatched)
        printf(" (first: submit %" PRIu64 ", memory %" PRIu64 "; %" PRIu64 " submits affected)",
               st.first_mismatch_submit, st.first_mismatch_memory, bad_submits);
    printf("\n");
    int result;
    const char *text;
    if (rc < 0) {
        printf("error        replay stopped: %s\n", mt_strerror(rc));
        result = V_FAILED, text = "FAILED: the trace cannot be read to its end";
    } else if (st.hashes_mismatched) {
        result = V_FAILED, text = "FAILED: a submit's content differs from what the trace replays";
    } else if (st.hashes_checked == 0) {
        printf("note         no content hashes in this trace: record it with --verify\n");
        result = V_NO_HASHES, text = "cannot verify";
    } else if (!inf.complete) {
        printf("note         the trace ended without its trailer (the application was killed or "
               "crashed): verified up to submit %" PRIu64 "%s\n",
               st.submits ? st.submits - 1 : 0,
               after_last ? "; the records after it (a partial submit) are not verified" : "");
        result = V_INCOMPLETE, text = "OK but incomplete: every submit in the trace matches";
    } else {
        result = V_OK, text = "OK: every submit matches";
    }
    printf("result       %s\n", text);
    mt_trace_replay_destroy(rp);
    mt_trace_reader_close(r);
    return result;
}
