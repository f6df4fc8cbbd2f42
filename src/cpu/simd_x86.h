// simd_x86.h — the SSE-level tails shared by the AVX2 and AVX-512 kernels
// (matvec_avx2.c, matvec_avx512.c): each file includes it under its own
// target flags, so these compile to that file's instruction set.
//
// A K-type dot product is an exact integer sum per block followed by the
// reference's float arithmetic (quant.c, seam_vec_dot):
//     sum += d * da * isum - dmin * da * msum        block after block
// Doing the horizontal sums and the float tail once per block costs as much
// as the integer products themselves, so the kernels reduce four blocks at a
// time: four vectors of partial sums become one vector of four block sums,
// the float expression runs across the four lanes (the same IEEE products as
// the scalar code), and only the running sum is added lane by lane, in
// block order. The result is bitwise the reference's.
#ifndef SEAM_CPU_SIMD_X86_H
#define SEAM_CPU_SIMD_X86_H

#include <immintrin.h>
#include <stdint.h>
#include <string.h>

#include "quant.h"

static inline float f16_to_f32(seam_f16 h) {
    return _cvtsh_ss(h);  // exact, as seam_f16_to_f32
}

static inline uint16_t load_u16(const void *p) {
    uint16_t v;
    memcpy(&v, p, sizeof v);
    return v;
}

// The f16 at byte offset `off` of each of four blocks, as floats.
static inline __m128 load_f16x4(const void *const blk[4], size_t off) {
    __m128i h = _mm_cvtsi32_si128(load_u16((const uint8_t *)blk[0] + off));
    h = _mm_insert_epi16(h, load_u16((const uint8_t *)blk[1] + off), 1);
    h = _mm_insert_epi16(h, load_u16((const uint8_t *)blk[2] + off), 2);
    h = _mm_insert_epi16(h, load_u16((const uint8_t *)blk[3] + off), 3);
    return _mm_cvtph_ps(h);
}

// The four horizontal sums of a, b, c, d (int32 lanes), as lanes 0..3.
static inline __m128i hsum4_epi32(__m128i a, __m128i b, __m128i c, __m128i d) {
    return _mm_hadd_epi32(_mm_hadd_epi32(a, b), _mm_hadd_epi32(c, d));
}

static inline __m128i fold_256(__m256i v) {
    return _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
}

// The running sum over `count` (1..4) K blocks whose exact integer sums are
// the lanes of isum and msum; d, dmin: the weight blocks' scales; da: the
// activation blocks' scales. The reference's expression, lane by lane.
static inline float k_blocks_accumulate(float sum, int count, __m128i isum, __m128i msum, __m128 d, __m128 dmin,
                                        __m128 da) {
    const __m128 t = _mm_sub_ps(_mm_mul_ps(_mm_mul_ps(d, da), _mm_cvtepi32_ps(isum)),
                                _mm_mul_ps(_mm_mul_ps(dmin, da), _mm_cvtepi32_ps(msum)));
    float p[4];
    _mm_storeu_ps(p, t);
    for (int k = 0; k < count; k++) sum += p[k];
    return sum;
}

// Q4_K/Q5_K scales[12] -> sixteen bytes sc0..sc7, m0..m7 (seam_q4k_scale_min
// for all eight sub-blocks; layout in quant.h). Reads 16 bytes from scales:
// the 4 past the 12 are the block's quants, ignored.
//   sc0-3 = s[0..3] & 63              m0-3 = s[4..7] & 63
//   sc4-7 = s[8..11] & 15 | (s[0..3] >> 6) << 4
//   m4-7  = s[8..11] >> 4 | (s[4..7] >> 6) << 4
static inline __m128i q4k_scales_mins(const uint8_t *scales) {
    const __m128i s = _mm_loadu_si128((const __m128i *)scales);
    const __m128i low_src = _mm_shuffle_epi8(s, _mm_setr_epi8(0, 1, 2, 3, 8, 9, 10, 11, 4, 5, 6, 7, 8, 9, 10, 11));
    const __m128i low = _mm_or_si128(
        _mm_and_si128(low_src, _mm_setr_epi8(63, 63, 63, 63, 15, 15, 15, 15, 63, 63, 63, 63, 0, 0, 0, 0)),
        _mm_and_si128(_mm_srli_epi16(low_src, 4), _mm_setr_epi8(0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 15, 15, 15, 15)));
    const __m128i high_src =
        _mm_shuffle_epi8(s, _mm_setr_epi8(-1, -1, -1, -1, 0, 1, 2, 3, -1, -1, -1, -1, 4, 5, 6, 7));
    const __m128i high = _mm_and_si128(_mm_srli_epi16(high_src, 2), _mm_set1_epi8(0x30));  // bits 6-7 -> 4-5
    return _mm_or_si128(low, high);
}

// Sixteen int16 bsums of a Q8_K block folded into the eight sums of the
// Q4_K sub-blocks (32 activations each) and weighted by the mins: the
// block's msum = the sum of the four int32 lanes.
static inline __m128i q4k_min_products(const __m128i sm, const block_q8_K *a) {
    const __m128i b0 = _mm_loadu_si128((const __m128i *)a->bsums), b1 = _mm_loadu_si128((const __m128i *)a->bsums + 1);
    const __m128i pair_sums = _mm_hadd_epi16(b0, b1);  // |sum| <= 4096: no overflow
    return _mm_madd_epi16(_mm_cvtepu8_epi16(_mm_srli_si128(sm, 8)), pair_sums);
}

// One K block's exact partial sums: isum (four int32 lanes summing to the
// block's sum_s sc[s] * q_s . a_s, the -32 offset of Q6_K included) and
// mprod (four lanes summing to its msum; zero for Q6_K).
typedef void (*k_block_fn)(const void *w, const block_q8_K *a, __m128i *isum, __m128i *mprod);

// The dot of n / QK_K K blocks of block_bytes each, four at a time (the
// header comment); dmin_off < 0: a type without mins (Q6_K).
static inline float k_dot(k_block_fn block, size_t block_bytes, int d_off, int dmin_off, const void *wv,
                          const void *av, int64_t n) {
    const uint8_t *w = wv;
    const block_q8_K *a = av;
    const int64_t nb = n / QK_K;
    float sum = 0;
    for (int64_t b = 0; b < nb; b += 4) {
        const int count = nb - b < 4 ? (int)(nb - b) : 4;
        __m128i isum[4], mprod[4];
        const void *wb[4];
        float da[4];
        for (int k = 0; k < 4; k++) {
            const int64_t i = b + (k < count ? k : count - 1);  // lanes past the row repeat its last block
            wb[k] = w + i * block_bytes;
            da[k] = a[i].d;
            block(wb[k], &a[i], &isum[k], &mprod[k]);
        }
        const __m128 dmin = dmin_off < 0 ? _mm_setzero_ps() : load_f16x4(wb, (size_t)dmin_off);
        sum = k_blocks_accumulate(sum, count, hsum4_epi32(isum[0], isum[1], isum[2], isum[3]),
                                  hsum4_epi32(mprod[0], mprod[1], mprod[2], mprod[3]), load_f16x4(wb, (size_t)d_off),
                                  dmin, _mm_loadu_ps(da));
    }
    return sum;
}

#endif
