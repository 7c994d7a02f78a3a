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
 * Invariant: a run starts and ends on a differing byte and holds no stretch
 * of `gap` or more equal bytes (gap 1: exact runs); a run is started only
 * while there is room to report it, so the scan can stop cleanly before any
 * run. Equal stretches are skipped 128 bytes
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

/* Blocks with changes cost mispredicted branches, which throw away the loads
 * the CPU had issued ahead; explicit prefetches keep both streams coming
 * from memory regardless (a prefetch never faults, even past the end). */
#define MT_SCAN_AHEAD 1024
static inline void scan_prefetch(const uint8_t *a, const uint8_t *b, size_t pos)
{
    __builtin_prefetch(a + pos + MT_SCAN_AHEAD);
    __builtin_prefetch(b + pos + MT_SCAN_AHEAD);
}

MT_SCAN_ATTR size_t MT_SCAN_NAME(const uint8_t *a, const uint8_t *b, size_t pos, size_t end,
                                 size_t gap, mt_diff_region *runs, size_t max, size_t *stop)
{
    /* ps/pe: the pending (merged) run, reported when the next change is gap
     * or more bytes away; `open`: an exact run reaches past the last block. */
    size_t n = 0, ps = MT_SCAN_NONE, pe = 0;
    int open = 0, dense = 0;
    while (pos < end) {
        /* The 128-byte skip pays off in clean memory; right after a block
         * with changes it mostly fails, so go block by block until one is
         * clean again. */
        if (!open && !dense) {
            while (end - pos >= 128 && block_equal128(a + pos, b + pos)) {
                scan_prefetch(a, b, pos + 64);
                pos += 128;
            }
            if (pos >= end)
                break;
        }
        scan_prefetch(a, b, pos);
        size_t len = end - pos < 64 ? end - pos : 64;
        uint64_t m = len == 64 ? block_mask64(a + pos, b + pos) : scan_tail_mask(a + pos, b + pos, len);
        dense = m != 0;
        if (open) {
            /* A tail's missing bits are 0 in m, so ~m is never 0 there. */
            uint64_t inv = ~m;
            if (inv == 0) {
                pos += 64;
                continue;
            }
            unsigned e = (unsigned)__builtin_ctzll(inv);
            pe = pos + e;
            open = 0;
            m &= ~0ull << e; /* e < 64: bit e of m is clear */
        }
        while (m) {
            unsigned s = (unsigned)__builtin_ctzll(m);
            size_t at = pos + s;
            if (ps == MT_SCAN_NONE || at - pe >= gap) {
                /* Invariant: a pending run exists only while n < max. */
                if (ps != MT_SCAN_NONE)
                    runs[n++] = (mt_diff_region){ps, pe - ps};
                if (n == max) {
                    *stop = at;
                    return n;
                }
                ps = at;
            }
            uint64_t inv = ~m & (~0ull << s);
            if (inv == 0) { /* runs to the end of the block */
                open = 1;
                break;
            }
            unsigned e = (unsigned)__builtin_ctzll(inv);
            pe = pos + e;
            m &= ~0ull << e;
        }
        pos += len;
    }
    if (open)
        pe = end;
    if (ps != MT_SCAN_NONE)
        runs[n++] = (mt_diff_region){ps, pe - ps};
    *stop = end;
    return n;
}
