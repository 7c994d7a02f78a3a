/* SSE2 compare kernel: the x86-64 baseline, 16 bytes per compare. */
#include <emmintrin.h>

#include "kernel.h"

static inline uint64_t block_mask64(const uint8_t *a, const uint8_t *b)
{
    uint64_t eq = 0;
    for (int i = 0; i < 4; i++) {
        __m128i x = _mm_loadu_si128((const __m128i *)(a + 16 * i));
        __m128i y = _mm_loadu_si128((const __m128i *)(b + 16 * i));
        eq |= (uint64_t)(uint16_t)_mm_movemask_epi8(_mm_cmpeq_epi8(x, y)) << (16 * i);
    }
    return ~eq;
}

static inline int block_equal128(const uint8_t *a, const uint8_t *b)
{
    __m128i acc = _mm_set1_epi8(-1);
    for (int i = 0; i < 8; i++) {
        __m128i x = _mm_loadu_si128((const __m128i *)(a + 16 * i));
        __m128i y = _mm_loadu_si128((const __m128i *)(b + 16 * i));
        acc = _mm_and_si128(acc, _mm_cmpeq_epi8(x, y));
    }
    return _mm_movemask_epi8(acc) == 0xffff;
}

#define MT_SCAN_NAME mt_diff_scan_sse2
#define MT_SCAN_ATTR
#include "scan_impl.h"
