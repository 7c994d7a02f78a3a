/* memtrack verify FILE: replay the update packets and compare the result with
 * the content hashes recorded at each submit (memtrack record --verify).
 * Exit 0 only when every hash matched; a mismatch means a lost write. */
#define _GNU_SOURCE
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "memtrack/memtrack.h"

void mt_cmd_verify_usage(void)
{
    printf("usage: memtrack verify FILE\n\n"
           "Replays the trace and compares every memory's reconstructed content with\n"
           "the hash of its real content recorded at each submit. Exits 0 only when\n"
           "every submit matches (and the trace holds hashes: record with --verify).\n");
}

int mt_cmd_verify(int argc, char **argv)
{
    if (argc != 2 || argv[1][0] == '-')
        return mt_cli_usage_error("verify: exactly one trace file");
    const char *path = argv[1];
    mt_trace_reader *r;
    mt_trace_replay *rp;
    if (mt_cli_open_replay(path, MT_TRACE_REPLAY_VERIFY, &r, &rp) != 0)
        return 1;
    int rc;
    mt_trace_info inf;
    mt_trace_reader_info(r, &inf);
    mt_trace_record rec;
    mt_trace_replay_stats st;
    uint64_t bad_before = 0, bad_submits = 0, submit_hashes = 0;
    int printed = 0;
    while ((rc = mt_trace_replay_next(rp, &rec)) == 1) {
        if (rec.type == MT_TRACE_CONTENT_HASH)
            submit_hashes++;
        if (rec.type != MT_TRACE_SUBMIT)
            continue;
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
    int ok = rc == 0 && st.hashes_checked > 0 && st.hashes_mismatched == 0;
    printf("verify       %s\n", path);
    printf("submits      %" PRIu64 " replayed, %" PRIu64 " update packets (%" PRIu64 " bytes)\n",
           st.submits, st.updates, st.update_bytes);
    printf("hashes       %" PRIu64 " checked, %" PRIu64 " mismatched", st.hashes_checked,
           st.hashes_mismatched);
    if (st.hashes_mismatched)
        printf(" (first: submit %" PRIu64 ", memory %" PRIu64 "; %" PRIu64 " submits affected)",
               st.first_mismatch_submit, st.first_mismatch_memory, bad_submits);
    printf("\n");
    if (rc < 0)
        printf("error        replay stopped: %s\n", mt_strerror(rc));
    if (!inf.complete)
        printf("note         the trace is incomplete (writer did not close it): verified what is there\n");
    if (st.hashes_checked == 0 && rc == 0)
        printf("note         no content hashes in this trace: record it with --verify\n");
    printf("result       %s\n", ok ? "OK: every submit matches" : "FAILED");
    mt_trace_replay_destroy(rp);
    mt_trace_reader_close(r);
    return ok ? 0 : 1;
}
