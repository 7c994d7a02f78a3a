/* mt_diff(): the driver around the compare kernels. The kernel finds runs
 * (merged, or exact when writing back); this file keeps the shadow (and the
 * write-back target) in step with them and merges runs closer than the
 * merge gap across kernel batches and candidate regions.
 *
 * Copy rule: an exact run is copied live -> shadow, then shadow -> writeback,
 * so the driver mapping receives exactly the bytes the packet (read from the
 * shadow) records. The unchanged gap inside a merged run goes to the shadow
 * only (so the packet and the shadow agree even if the live memory changed
 * meanwhile) and never to the write-back target: those bytes may hold GPU
 * writes the application's view does not know about. */
#include <errno.h>
#include <string.h>

#include "job.h"
#include "kernel.h"

#define MT_DIFF_BATCH 256 /* runs per kernel call */

/* Most runs are a few bytes: fixed-size (inlined) overlapping copies instead
 * of a libc call; dst and src never overlap (different buffers). */
static inline void copy_bytes(uint8_t *dst, const uint8_t *src, size_t n)
{
    if (n >= 8 && n <= 16) {
        memcpy(dst, src, 8);
        memcpy(dst + n - 8, src + n - 8, 8);
    } else if (n > 16 && n <= 32) {
        memcpy(dst, src, 16);
        memcpy(dst + n - 16, src + n - 16, 16);
    } else if (n < 8) {
        for (size_t i = 0; i < n; i++)
            dst[i] = src[i];
    } else {
        memcpy(dst, src, n);
    }
}

typedef struct diff_state {
    const uint8_t *live;
    uint8_t *shadow, *wb;
    size_t gap;
    mt_diff_region *out;
    size_t max, nout;
} diff_state;

/* Takes one run from the kernel. Returns 0, or 1 when the output is full and the run
 * was not taken (nothing copied for it). */
static int take_run(diff_state *s, const mt_diff_region *r)
{
    if (s->nout > 0) {
        mt_diff_region *last = &s->out[s->nout - 1];
        size_t last_end = last->offset + last->length;
        if (r->offset - last_end < s->gap) {
            copy_bytes(s->shadow + last_end, s->live + last_end, r->offset - last_end);
            last->length = r->offset + r->length - last->offset;
            goto copy;
        }
    }
    if (s->nout == s->max)
        return 1;
    s->out[s->nout++] = *r;
copy:
    copy_bytes(s->shadow + r->offset, s->live + r->offset, r->length);
    if (s->wb)
        copy_bytes(s->wb + r->offset, s->shadow + r->offset, r->length);
    return 0;
}

long mt_diff(mt_diff_job *job, const mt_diff_opts *opts, mt_diff_region *out, size_t max)
{
    int rc = mt_diff_job_check(job);
    if (rc < 0)
        return rc;
    if (!job->shadow || (!out && max > 0))
        return -EINVAL;
    diff_state s = {job->live, job->shadow, job->writeback,
                    opts && opts->merge_gap ? opts->merge_gap : MT_DIFF_DEFAULT_MERGE_GAP,
                    out, max, 0};
    mt_diff_scan_fn scan = mt_diff_kernel_get()->scan;
    /* Write-back needs exact runs (only changed bytes may reach the driver
     * mapping); otherwise the kernel merges, which is much cheaper for dense
     * changes. Either way take_run merges across batches and regions. */
    size_t kgap = s.wb ? 1 : s.gap;
    mt_diff_region whole, batch[MT_DIFF_BATCH];
    size_t nreg;
    const mt_diff_region *reg = mt_diff_job_regions(job, &whole, &nreg);

    for (size_t i = mt_diff_job_first(reg, nreg, job->cursor); i < nreg; i++) {
        size_t pos = reg[i].offset > job->cursor ? reg[i].offset : job->cursor;
        size_t end = reg[i].offset + reg[i].length;
        while (pos < end) {
            size_t stop;
            size_t n = scan(s.live, s.shadow, pos, end, kgap, batch, MT_DIFF_BATCH, &stop);
            for (size_t k = 0; k < n; k++) {
                if (take_run(&s, &batch[k])) {
                    job->cursor = batch[k].offset;
                    return (long)s.nout;
                }
            }
            pos = stop;
        }
    }
    job->cursor = job->size;
    return (long)s.nout;
}
