/* Validation of diff jobs: callers pass tracker output or their own lists,
 * and a bad list must give -EINVAL, never an out-of-bounds compare. */
#include <errno.h>

#include "job.h"

int mti_diff_job_check(const mt_diff_job *job)
{
    if (!job || !job->live || job->cursor > job->size)
        return -EINVAL;
    if (!job->candidates)
        return job->ncandidates == 0 ? 0 : -EINVAL;
    size_t prev_end = 0;
    for (size_t i = 0; i < job->ncandidates; i++) {
        const mt_diff_region *r = &job->candidates[i];
        if (r->offset < prev_end || r->offset > job->size || r->length > job->size - r->offset)
            return -EINVAL;
        prev_end = r->offset + r->length;
    }
    return 0;
}

const mt_diff_region *mti_diff_job_regions(const mt_diff_job *job, mt_diff_region *whole, size_t *n)
{
    if (job->candidates) {
        *n = job->ncandidates;
        return job->candidates;
    }
    whole->offset = 0;
    whole->length = job->size;
    *n = 1;
    return whole;
}

size_t mti_diff_job_first(const mt_diff_region *r, size_t n, size_t cursor)
{
    size_t lo = 0, hi = n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (r[mid].offset + r[mid].length <= cursor)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}
