/* mt_diff_read_wc (public, diff.h), per architecture: read_wc_x86.c,
 * read_wc_generic.c. */
#ifndef MT_DIFF_READ_WC_H
#define MT_DIFF_READ_WC_H

#include "memtrack/diff.h"

#endif
