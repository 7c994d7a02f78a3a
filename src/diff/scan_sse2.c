/* SSE2 compare kernel: the x86-64 baseline, 16 bytes per compare. */
#include <emmintrin.h>

#include "kernel.h"

typedef struct scan_blk {
    __m128i v[4];
} scan_blk;

/* Written out four times: a loop here stays a loop at -O2, and keeps the
 * block in memory instead of registers. */
static inline uint64_t blk_load(const uint8_t *a, const uint8_t *b, scan_blk *v)
{
    v->v[0] = _mm_loadu_si128((const __m128i *)a);
    v->v[1] = _mm_loadu_si128((const __m128i *)(a + 16));
    v->v[2] = _mm_loadu_si128((const __m128i *)(a + 32));
    v->v[3] = _mm_loadu_si128((const __m128i *)(a + 48));
    const __m128i *y = (const __m128i *)b;
    uint64_t e0 = (uint16_t)_mm_movemask_epi8(_mm_cmpeq_epi8(v->v[0], _mm_loadu_si128(y)));
    uint64_t e1 = (uint16_t)_mm_movemask_epi8(_mm_cmpeq_epi8(v->v[1], _mm_loadu_si128(y + 1)));
    uint64_t e2 = (uint16_t)_mm_movemask_epi8(_mm_cmpeq_epi8(v->v[2], _mm_loadu_si128(y + 2)));
    uint64_t e3 = (uint16_t)_mm_movemask_epi8(_mm_cmpeq_epi8(v->v[3], _mm_loadu_si128(y + 3)));
    return ~(e0 | e1 << 16 | e2 << 32 | e3 << 48);
}

static inline void blk_store(uint8_t *dst, const scan_blk *v)
{
    _mm_storeu_si128((__m128i *)dst, v->v[0]);
    _mm_storeu_si128((__m128i *)(dst + 16), v->v[1]);
    _mm_storeu_si128((__m128i *)(dst + 32), v->v[2]);
    _mm_storeu_si128((__m128i *)(dst + 48), v->v[3]);
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

#define MT_SCAN_NAME mti_diff_scan_sse2
#define MT_SCAN_ATTR
#include "scan_impl.h"
