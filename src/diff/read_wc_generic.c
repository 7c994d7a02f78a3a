/* mt_diff_read_wc without x86 streaming loads: a plain copy. */
#include <string.h>

#include "read_wc.h"

void mt_diff_read_wc(void *dst, const void *src, size_t n) { memcpy(dst, src, n); }
