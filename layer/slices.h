/* Cutting one big diff into slices for several threads (slices.c). Pure:
 * no Vulkan, no layer state. */
#ifndef LT_SLICES_H
#define LT_SLICES_H

#include <stddef.h>

#include "memtrack/diff.h"

/* A stretch [base, base+size) of the window, and its candidates: cand[first
 * .. first+n) of the output array, relative to base (n == 0 when the
 * input had no candidates: the whole stretch). */
typedef struct lt_slice {
    size_t base, size;
    size_t first, n;
} lt_slice;

/* The most slices and output candidates lt_slices_cut may produce for
 * `total` bytes to diff in `nc` candidates (0: the whole window). */
size_t lt_slices_max(size_t total, size_t slice_bytes);
size_t lt_slices_max_cands(size_t total, size_t nc, size_t slice_bytes);

/* Cuts the diff of a window of `size` bytes over the sorted, disjoint
 * candidates c[0..nc) (nc == 0: all of it) into slices of about
 * slice_bytes candidate bytes each: every slice starts on a page boundary
 * (page_size, a power of two) and no two slices share a page, so that
 * each page's changes are counted once; together their candidates are
 * exactly the input's. out and out_cands hold lt_slices_max(...) and
 * lt_slices_max_cands(...) entries. Returns the number of slices. */
size_t lt_slices_cut(size_t size, const mt_diff_region *c, size_t nc, size_t page_size,
                     size_t slice_bytes, lt_slice *out, mt_diff_region *out_cands);

#endif
