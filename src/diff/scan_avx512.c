/* AVX-512 compare kernel: one 64-byte block per compare, straight into a
 * mask register. Built with a target attribute, not -mavx512bw, so the rest
 * of the library stays baseline x86-64; the dispatcher only calls it when
 * the CPU (and OS) support AVX512BW.
 *
 * Why a kernel of its own: at 1% scattered changes the dense loop is bound
 * by its instruction count, not by memory (docs/diff.md, "Kernels"). Here a
 * block's mask costs a load, a compare and a move, and the dense loop stores
 * only the changed bytes (a masked store), so a clean block stores nothing
 * and needs no spill buffer. BMI and LZCNT (on every AVX-512 CPU) shorten
 * the bit counts. */
#include <immintrin.h>

#include "kernel.h"

#define MT_AVX512 __attribute__((target("avx512f,avx512bw,bmi,bmi2,lzcnt")))

typedef struct scan_blk {
    __m512i v;
} scan_blk;

MT_AVX512 static inline uint64_t blk_load(const uint8_t *a, const uint8_t *b, scan_blk *v)
{
    v->v = _mm512_loadu_si512((const void *)a);
    return _mm512_cmpneq_epi8_mask(v->v, _mm512_loadu_si512((const void *)b));
}

MT_AVX512 static inline void blk_store(uint8_t *dst, const scan_blk *v)
{
    _mm512_storeu_si512((void *)dst, v->v);
}

/* The bytes of v whose bit is set in m: the unchanged ones hold what dst
 * holds already, so this equals storing the block whole. */
MT_AVX512 static inline void blk_store_changed(uint8_t *dst, const scan_blk *v, uint64_t m)
{
    _mm512_mask_storeu_epi8((void *)dst, m, v->v);
}

MT_AVX512 static inline int block_equal128(const uint8_t *a, const uint8_t *b)
{
    __mmask64 m0 = _mm512_cmpneq_epi8_mask(_mm512_loadu_si512((const void *)a),
                                           _mm512_loadu_si512((const void *)b));
    __mmask64 m1 = _mm512_cmpneq_epi8_mask(_mm512_loadu_si512((const void *)(a + 64)),
                                           _mm512_loadu_si512((const void *)(b + 64)));
    return (m0 | m1) == 0;
}

#define MT_SCAN_STORE_CHANGED 1
#define MT_SCAN_NAME mti_diff_scan_avx512
#define MT_SCAN_ATTR MT_AVX512
#include "scan_impl.h"
