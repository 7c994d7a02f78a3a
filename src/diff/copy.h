/* Small copies shared by the diff driver and the kernels. dst and src never
 * overlap (they are different buffers). */
#ifndef MT_DIFF_COPY_H
#define MT_DIFF_COPY_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

/* Most runs are a few bytes: fixed-size (inlined) overlapping copies instead
 * of a libc call. */
static inline void mti_copy_bytes(uint8_t *dst, const uint8_t *src, size_t n)
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

/* Copies exactly the bytes i < 64 whose bit i is set in m, run by run. The
 * write-back path relies on it never storing a byte whose bit is clear. */
static inline void mti_copy_masked(uint8_t *dst, const uint8_t *src, uint64_t m)
{
    while (m) {
        unsigned s = (unsigned)__builtin_ctzll(m);
        uint64_t rest = ~m & (~0ull << s); /* clear bits from s on */
        unsigned e = rest ? (unsigned)__builtin_ctzll(rest) : 64;
        mti_copy_bytes(dst + s, src + s, e - s);
        m = e < 64 ? m & (~0ull << e) : 0;
    }
}

#endif
