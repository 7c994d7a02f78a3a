/* Checks shared by mt_diff() and mt_diff_hashed(): a job's candidates and
 * cursor, and where a resumed job starts. */
#ifndef MT_DIFF_JOB_H
#define MT_DIFF_JOB_H

#include "memtrack/diff.h"

/* 0 when the candidates are sorted, non-overlapping and inside [0, size) and
 * the cursor is <= size; -EINVAL otherwise. */
int mti_diff_job_check(const mt_diff_job *job);

/* The candidate list to walk: the job's, or the whole range as one region
 * (stored in *whole) when it has none. Sets *n. */
const mt_diff_region *mti_diff_job_regions(const mt_diff_job *job, mt_diff_region *whole, size_t *n);

/* Index of the first region that ends after `cursor` (binary search). */
size_t mti_diff_job_first(const mt_diff_region *r, size_t n, size_t cursor);

#endif
