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
#include <stdlib.h>

#include "copy.h"
#include "job.h"
#include "kernel.h"

static size_t run_end(const mt_diff_region *r) { return r->offset + r->length; }

/* MT_DIFF_LIVE_WC: live is read a stretch at a time into a buffer of this
 * size (L2-sized: the compare reads it back at once). */
#define WC_STRETCH ((size_t)64 << 10)

long mt_diff(mt_diff_job *job, const mt_diff_opts *opts, mt_diff_region *out, size_t max)
{
    int rc = mti_diff_job_check(job);
    if (rc < 0)
        return rc;
    if (!job->shadow || (!out && max > 0))
        return -EINVAL;
    const uint8_t *live = job->live;
    mt_diff_scan sc = {live, job->shadow, job->writeback,
                       opts && opts->merge_gap ? opts->merge_gap : MT_DIFF_DEFAULT_MERGE_GAP,
                       out, 0, max};
    mt_diff_scan_fn scan = mti_diff_kernel_get()->scan;
    /* Without the buffer (no memory) live is read in place: slower, exact. */
    uint8_t *wc = opts && (opts->flags & MT_DIFF_LIVE_WC) ? malloc(WC_STRETCH) : NULL;
    mt_diff_region whole;
    size_t nreg;
    const mt_diff_region *reg = mti_diff_job_regions(job, &whole, &nreg);

    for (size_t i = mti_diff_job_first(reg, nreg, job->cursor); i < nreg; i++) {
        size_t pos = reg[i].offset > job->cursor ? reg[i].offset : job->cursor;
        size_t end = reg[i].offset + reg[i].length;
        if (pos >= end)
            continue;
        size_t open = sc.n, before = open ? run_end(&out[open - 1]) : 0;
        size_t stop = end;
        /* The kernel addresses live by offset: with the buffer, sc.live is
         * set so that live offsets of the stretch land in it (the kernel
         * reads nothing outside [at, to)). Stretches of one region are
         * adjacent: a run open at the end of one goes on in the next. */
        for (size_t at = pos; at < end && stop == end;) {
            size_t to = wc && end - at > WC_STRETCH ? at + WC_STRETCH : end;
            if (wc) {
                mt_diff_read_wc(wc, live + at, to - at);
                sc.live = (const uint8_t *)((uintptr_t)wc - at);
            }
            size_t s = scan(&sc, at, to);
            if (s < to)
                stop = s;
            at = to;
        }
        /* The open run grew into this region: the bytes between the regions
         * were not examined, so copy them as they are now. */
        if (open && run_end(&out[open - 1]) > before && before < pos)
            mti_copy_bytes(sc.shadow + before, live + before, pos - before);
        if (stop < end) {
            job->cursor = stop;
            free(wc);
            return (long)sc.n;
        }
    }
    free(wc);
    job->cursor = job->size;
    return (long)sc.n;
}
