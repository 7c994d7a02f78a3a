/* mt_diff(): the driver around the compare kernels. A kernel finds the runs
 * (merged), brings the shadow up to date for them and writes back their
 * changed bytes; this file walks the candidate regions, lets a region's first
 * run extend the previous region's last one, and records where to resume.
 *
 * Copy rule: changed bytes go live -> shadow, then shadow -> writeback, so
 * the driver mapping receives exactly the bytes the packet (read from the
 * shadow) records. The unchanged bytes a merged run spans are in the shadow
 * already (they compared equal), or, between two candidate regions, are
 * copied into it here (so the packet and the shadow agree), and never go to
 * the write-back target: those bytes may hold GPU writes the application's
 * view does not know about. */
#include <errno.h>

#include "copy.h"
#include "job.h"
#include "kernel.h"

static size_t run_end(const mt_diff_region *r) { return r->offset + r->length; }

long mt_diff(mt_diff_job *job, const mt_diff_opts *opts, mt_diff_region *out, size_t max)
{
    int rc = mti_diff_job_check(job);
    if (rc < 0)
        return rc;
    if (!job->shadow || (!out && max > 0))
        return -EINVAL;
    mt_diff_scan sc = {job->live, job->shadow, job->writeback,
                       opts && opts->merge_gap ? opts->merge_gap : MT_DIFF_DEFAULT_MERGE_GAP,
                       out, 0, max};
    mt_diff_scan_fn scan = mti_diff_kernel_get()->scan;
    mt_diff_region whole;
    size_t nreg;
    const mt_diff_region *reg = mti_diff_job_regions(job, &whole, &nreg);

    for (size_t i = mti_diff_job_first(reg, nreg, job->cursor); i < nreg; i++) {
        size_t pos = reg[i].offset > job->cursor ? reg[i].offset : job->cursor;
        size_t end = reg[i].offset + reg[i].length;
        if (pos >= end)
            continue;
        size_t open = sc.n, before = open ? run_end(&out[open - 1]) : 0;
        size_t stop = scan(&sc, pos, end);
        /* The open run grew into this region: the bytes between the regions
         * were not examined, so copy them as they are now. */
        if (open && run_end(&out[open - 1]) > before && before < pos)
            mti_copy_bytes(sc.shadow + before, sc.live + before, pos - before);
        if (stop < end) {
            job->cursor = stop;
            return (long)sc.n;
        }
    }
    job->cursor = job->size;
    return (long)sc.n;
}
