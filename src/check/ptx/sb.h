/* A growing text buffer for the instrumenter's output. Allocation failure is
 * sticky: the caller checks `oom` once at the end. */
#ifndef MT_CHECK_PTX_SB_H
#define MT_CHECK_PTX_SB_H

#include <stdarg.h>
#include <stddef.h>

typedef struct ptx_sb {
    char *p;
    size_t n, cap;
    int oom;
} ptx_sb;

void mti_ptx_sb_put(ptx_sb *b, const char *s, size_t n);
void mti_ptx_sb_puts(ptx_sb *b, const char *s);
void mti_ptx_sb_printf(ptx_sb *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#endif
