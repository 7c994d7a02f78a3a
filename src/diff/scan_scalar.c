/* Portable compare kernel: 8-byte words, no vector unit. Used where neither
 * SSE2 nor AVX2 exists, and by tests as a second reference. */
#include <string.h>

#include "kernel.h"

static inline uint64_t load64(const uint8_t *p)
{
    uint64_t v;
    memcpy(&v, p, 8);
    return v;
}

/* One bit per byte of a word: 1 where the byte of x is non-zero. Folds each
 * byte onto its low bit, then a multiply gathers the 8 low bits into the top
 * byte (the partial products never overlap, so there are no carries). */
static inline unsigned word_nonzero_bytes(uint64_t x)
{
    x |= x >> 4;
    x |= x >> 2;
    x |= x >> 1;
    x &= 0x0101010101010101ull;
    return (unsigned)((x * 0x0102040810204080ull) >> 56);
}

typedef struct scan_blk {
    uint64_t w[8];
} scan_blk;

static inline uint64_t blk_load(const uint8_t *a, const uint8_t *b, scan_blk *v)
{
    uint64_t m = 0;
    for (int w = 0; w < 8; w++) {
        v->w[w] = load64(a + 8 * w);
        m |= (uint64_t)word_nonzero_bytes(v->w[w] ^ load64(b + 8 * w)) << (8 * w);
    }
    return m;
}

static inline void blk_store(uint8_t *dst, const scan_blk *v)
{
    memcpy(dst, v->w, 64);
}

static inline int block_equal128(const uint8_t *a, const uint8_t *b)
{
    uint64_t x = 0;
    for (int w = 0; w < 16; w++)
        x |= load64(a + 8 * w) ^ load64(b + 8 * w);
    return x == 0;
}

#define MT_SCAN_NAME mti_diff_scan_scalar
#define MT_SCAN_ATTR
#include "scan_impl.h"
