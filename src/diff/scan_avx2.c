/* AVX2 compare kernel: 32 bytes per compare. Built with a target attribute,
 * not -mavx2, so the rest of the library stays baseline x86-64; the
 * dispatcher only calls it when the CPU reports AVX2. */
#include <immintrin.h>

#include "kernel.h"

#define MT_AVX2 __attribute__((target("avx2")))

typedef struct scan_blk {
    __m256i lo, hi;
} scan_blk;

MT_AVX2 static inline uint64_t blk_load(const uint8_t *a, const uint8_t *b, scan_blk *v)
{
    v->lo = _mm256_loadu_si256((const __m256i *)a);
    v->hi = _mm256_loadu_si256((const __m256i *)(a + 32));
    __m256i y0 = _mm256_loadu_si256((const __m256i *)b);
    __m256i y1 = _mm256_loadu_si256((const __m256i *)(b + 32));
    uint64_t lo = (uint32_t)_mm256_movemask_epi8(_mm256_cmpeq_epi8(v->lo, y0));
    uint64_t hi = (uint32_t)_mm256_movemask_epi8(_mm256_cmpeq_epi8(v->hi, y1));
    return ~(lo | hi << 32);
}

MT_AVX2 static inline void blk_store(uint8_t *dst, const scan_blk *v)
{
    _mm256_storeu_si256((__m256i *)dst, v->lo);
    _mm256_storeu_si256((__m256i *)(dst + 32), v->hi);
}

MT_AVX2 static inline int block_equal128(const uint8_t *a, const uint8_t *b)
{
    __m256i e0 = _mm256_cmpeq_epi8(_mm256_loadu_si256((const __m256i *)a),
                                   _mm256_loadu_si256((const __m256i *)b));
    __m256i e1 = _mm256_cmpeq_epi8(_mm256_loadu_si256((const __m256i *)(a + 32)),
                                   _mm256_loadu_si256((const __m256i *)(b + 32)));
    __m256i e2 = _mm256_cmpeq_epi8(_mm256_loadu_si256((const __m256i *)(a + 64)),
                                   _mm256_loadu_si256((const __m256i *)(b + 64)));
    __m256i e3 = _mm256_cmpeq_epi8(_mm256_loadu_si256((const __m256i *)(a + 96)),
                                   _mm256_loadu_si256((const __m256i *)(b + 96)));
    __m256i all = _mm256_and_si256(_mm256_and_si256(e0, e1), _mm256_and_si256(e2, e3));
    return _mm256_movemask_epi8(all) == -1;
}

#define MT_SCAN_NAME mti_diff_scan_avx2
#define MT_SCAN_ATTR MT_AVX2
#include "scan_impl.h"
