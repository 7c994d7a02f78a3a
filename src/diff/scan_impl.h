/* The body shared by every compare kernel, instantiated once per file with
 * that file's vector primitives and target attribute. Before including it,
 * a kernel file defines:
 *   MT_SCAN_NAME   the function's name
 *   MT_SCAN_ATTR   its attributes (e.g. the target ISA)
 *   static uint64_t block_mask64(const uint8_t *a, const uint8_t *b):
 *                  bit i set <=> a[i] != b[i], for 64 bytes
 *   static int block_equal128(const uint8_t *a, const uint8_t *b):
 *                  1 when the 128 bytes are equal
 *
 * Invariant: runs are exact (every byte of a run differs, the bytes around it
 * do not); a run is opened only while there is room to report it, so the
 * scan can stop cleanly before any run. Equal stretches are skipped 128 bytes
 * at a time; a block with differences becomes a 64-bit mask that is walked a
 * word at a time with ctz to find where runs start and end. */
#include <stddef.h>
#include <stdint.h>

#include "kernel.h"

#define MT_SCAN_NONE SIZE_MAX

/* Mask of the first len (< 64) bytes: the tail of a range. */
static inline uint64_t scan_tail_mask(const uint8_t *a, const uint8_t *b, size_t len)
{
    uint64_t m = 0;
    for (size_t i = 0; i < len; i++)
        m |= (uint64_t)(a[i] != b[i]) << i;
    return m;
}

MT_SCAN_ATTR size_t MT_SCAN_NAME(const uint8_t *a, const uint8_t *b, size_t pos, size_t end,
                                 mt_diff_region *runs, size_t max, size_t *stop)
{
    size_t n = 0, open = MT_SCAN_NONE;
    while (pos < end) {
        if (open == MT_SCAN_NONE) {
            while (end - pos >= 128 && block_equal128(a + pos, b + pos))
                pos += 128;
            if (pos >= end)
                break;
        }
        size_t len = end - pos < 64 ? end - pos : 64;
        uint64_t m = len == 64 ? block_mask64(a + pos, b + pos) : scan_tail_mask(a + pos, b + pos, len);
        if (open != MT_SCAN_NONE) {
            /* A tail's missing bits are 0 in m, so ~m is never 0 there. */
            uint64_t inv = ~m;
            if (inv == 0) {
                pos += 64;
                continue;
            }
            unsigned e = (unsigned)__builtin_ctzll(inv);
            runs[n].offset = open;
            runs[n].length = pos + e - open;
            n++;
            open = MT_SCAN_NONE;
            m &= ~0ull << e; /* e < 64: bit e of m is clear */
        }
        while (m) {
            unsigned s = (unsigned)__builtin_ctzll(m);
            if (n == max) {
                *stop = pos + s;
                return n;
            }
            uint64_t inv = ~m & (~0ull << s);
            if (inv == 0) { /* runs to the end of the block */
                open = pos + s;
                break;
            }
            unsigned e = (unsigned)__builtin_ctzll(inv);
            runs[n].offset = pos + s;
            runs[n].length = e - s;
            n++;
            m &= ~0ull << e;
        }
        pos += len;
    }
    if (open != MT_SCAN_NONE) {
        runs[n].offset = open;
        runs[n].length = end - open;
        n++;
    }
    *stop = end;
    return n;
}
