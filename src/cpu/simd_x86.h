// simd_x86.h — what the AVX2 and AVX-512 kernels (matvec_avx2.c,
// matvec_avx512.c) share: the float arithmetic of a quantised dot, the
// Q4_K scale unpacking and the row loop. Each file includes it under its
// own target flags, so these compile to that file's instruction set.
//
// The float arithmetic is the reference's (quant.c), which is llama.cpp's
// AVX2 kernels': each block's integer products are summed exactly into
// eight int32 lanes (lane l holding the weights w with (w % 32) / 4 == l),
// and each lane is folded into its own float accumulator with one fused
// multiply-add by the block's scale; the eight accumulators are added
// pairwise at the end. A kernel may form the integer lanes any way it likes
// (integer sums are exact); the float steps below are the only ones, so
// every kernel returns bitwise what seam_vec_dot returns.
#ifndef SEAM_CPU_SIMD_X86_H
#define SEAM_CPU_SIMD_X86_H

#include <immintrin.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "quant.h"

static inline float f16_to_f32(seam_f16 h) {
    return _cvtsh_ss(h);  // exact, as seam_f16_to_f32
}

// acc += d * lanes, lane by lane (one fused multiply-add, as fmaf).
static inline __m256 acc_lanes(__m256 acc, float d, __m256i lanes) {
    return _mm256_fmadd_ps(_mm256_set1_ps(d), _mm256_cvtepi32_ps(lanes), acc);
}

// The eight accumulators added as hsum_float_8: halves, pairs, the last two.
static inline float hsum8(__m256 acc) {
    __m128 r = _mm_add_ps(_mm256_extractf128_ps(acc, 1), _mm256_castps256_ps128(acc));
    r = _mm_add_ps(r, _mm_movehl_ps(r, r));
    return _mm_cvtss_f32(_mm_add_ss(r, _mm_movehdup_ps(r)));
}

// Four accumulators added pairwise: (m0 + m2) + (m1 + m3).
static inline float hsum4(__m128 m) {
    m = _mm_add_ps(m, _mm_movehl_ps(m, m));
    return _mm_cvtss_f32(_mm_add_ss(m, _mm_movehdup_ps(m)));
}

// Q4_K/Q5_K scales[12] -> sixteen bytes sc0..sc7, m0..m7 (seam_q4k_scale_min
// for all eight sub-blocks; layout in quant.h), for the block whose 16 bytes
// from `scales` on sit in each 128-bit lane of s (two blocks at once; the 4
// bytes past the 12 are the block's quants, ignored).
//   sc0-3 = s[0..3] & 63              m0-3 = s[4..7] & 63
//   sc4-7 = s[8..11] & 15 | (s[0..3] >> 6) << 4
//   m4-7  = s[8..11] >> 4 | (s[4..7] >> 6) << 4
static inline __m256i q4k_scales_mins(__m256i s) {
#define LANES(...) _mm256_setr_epi8(__VA_ARGS__, __VA_ARGS__)
    const __m256i low_src = _mm256_shuffle_epi8(s, LANES(0, 1, 2, 3, 8, 9, 10, 11, 4, 5, 6, 7, 8, 9, 10, 11));
    const __m256i low = _mm256_or_si256(
        _mm256_and_si256(low_src, LANES(63, 63, 63, 63, 15, 15, 15, 15, 63, 63, 63, 63, 0, 0, 0, 0)),
        _mm256_and_si256(_mm256_srli_epi16(low_src, 4), LANES(0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 15, 15, 15, 15)));
    const __m256i high_src = _mm256_shuffle_epi8(s, LANES(-1, -1, -1, -1, 0, 1, 2, 3, -1, -1, -1, -1, 4, 5, 6, 7));
#undef LANES
    const __m256i high = _mm256_and_si256(_mm256_srli_epi16(high_src, 2), _mm256_set1_epi8(0x30));  // bits 6-7 -> 4-5
    return _mm256_or_si256(low, high);
}

// The same for one block: its sixteen bytes.
static inline __m128i q4k_scales_mins1(const uint8_t *scales) {
    return _mm256_castsi256_si128(q4k_scales_mins(_mm256_castsi128_si256(_mm_loadu_si128((const __m128i *)scales))));
}

// The eight sub-block sums of a Q8_K block (32 activations each), as int16:
// its sixteen bsums added in pairs (|sum| <= 4096: no overflow).
static inline __m128i q8k_sub_block_sums(const block_q8_K *a) {
    return _mm_hadd_epi16(_mm_loadu_si128((const __m128i *)a->bsums), _mm_loadu_si128((const __m128i *)a->bsums + 1));
}

// The four lanes of a Q4_K block's mins' term: each sub-block sum times its
// min, pairs of sub-blocks added (lane k: 2k and 2k + 1).
static inline __m128i q4k_min_products(const __m128i sm, const block_q8_K *a) {
    return _mm_madd_epi16(_mm_cvtepu8_epi16(_mm_srli_si128(sm, 8)), q8k_sub_block_sums(a));
}

// One K block's exact integer lanes (eight, as the header says; Q6_K's -32
// offset included) and, for Q4_K, the four lanes of its mins' term (lane k:
// sub-blocks 2k and 2k+1).
typedef void (*k_block_fn)(const void *w, const block_q8_K *a, __m256i *lanes, __m128i *min_lanes);

// A Q4_K/Q5_K block's two float scales as the reference forms them, from
// its adjacent f16 d and dmin: [da * d, -da * dmin, 0, 0] in one conversion
// and one multiply (the same IEEE products as two scalar ones).
static inline __m128 k_scales_dmin(const void *d_dmin, float da) {
    uint32_t u;
    memcpy(&u, d_dmin, sizeof u);
    return _mm_mul_ps(_mm_cvtph_ps(_mm_cvtsi32_si128((int)u)), _mm_setr_ps(da, -da, 0.0f, 0.0f));
}

// A row of n / QK_K K blocks of block_bytes each (reference: dot_ktype in
// quant.c): per block, acc += (da * d) * lanes and, for a type with mins
// (their dmin the f16 after d), acc_m += (-da * dmin) * min_lanes; then the
// pairwise sums.
static inline __attribute__((always_inline)) float k_dot(k_block_fn block, size_t block_bytes, int d_off, bool mins,
                                                         const void *w, const void *av, int64_t n) {
    const block_q8_K *a = av;
    __m256 acc = _mm256_setzero_ps();
    __m128 acc_m = _mm_setzero_ps();
    for (int64_t b = 0; b < n / QK_K; b++) {
        const uint8_t *wb = (const uint8_t *)w + b * block_bytes;
        __m256i lanes;
        __m128i min_lanes;
        block(wb, &a[b], &lanes, &min_lanes);
        if (mins) {
            const __m128 sc = k_scales_dmin(wb + d_off, a[b].d);
            acc = _mm256_fmadd_ps(_mm256_broadcastss_ps(sc), _mm256_cvtepi32_ps(lanes), acc);
            acc_m = _mm_fmadd_ps(_mm_permute_ps(sc, 0x55), _mm_cvtepi32_ps(min_lanes), acc_m);
        } else {
            seam_f16 d;
            memcpy(&d, wb + d_off, sizeof d);
            acc = acc_lanes(acc, a[b].d * f16_to_f32(d), lanes);
        }
    }
    return hsum8(acc) + hsum4(acc_m);
}

// ---------------------------------------------------------------------------
// The row loop of every kernel.
//
// One core reads DRAM at ~10 GB/s only with many misses in flight; while a
// kernel computes on one row, the hardware streamer alone keeps too few, and
// compute and memory take turns instead of overlapping. So before each row
// the kernel prefetches the row PREFETCH_AHEAD bytes further on -- only the
// bytes a dot reads (attention's key rows are a head's slice of a longer
// cache row) and never past the rows it was given (a neighbour's rows are
// another thread's).
#define PREFETCH_AHEAD 4096

// Rows are prefetched this many rows ahead.
static inline int64_t prefetch_distance(size_t row_bytes) {
    return (int64_t)((PREFETCH_AHEAD + row_bytes - 1) / row_bytes);
}

static inline void prefetch_line_range(const uint8_t *from, size_t used) {
    for (uintptr_t line = (uintptr_t)from & ~(uintptr_t)63; line < (uintptr_t)from + used; line += 64)
        _mm_prefetch((const char *)line, _MM_HINT_T0);
}

// Before row r: the row prefetch_distance rows on, if there is one.
static inline void prefetch_row(const uint8_t *base, int64_t r, int64_t n_rows, size_t row_bytes, size_t used) {
    const int64_t ahead = r + prefetch_distance(row_bytes);
    if (ahead < n_rows) prefetch_line_range(base + (size_t)ahead * row_bytes, used);
}

// Before the first row: the rows the loop's own prefetches will not reach
// (a thread's share of a matvec often starts cold, and a grab can be short).
static inline void prefetch_start(const uint8_t *base, int64_t n_rows, size_t row_bytes, size_t used) {
    const int64_t d = prefetch_distance(row_bytes);
    for (int64_t r = 1; r < d && r < n_rows; r++) prefetch_line_range(base + (size_t)r * row_bytes, used);
}

typedef float (*row_dot_fn)(const void *w, const void *act, int64_t n);

static inline __attribute__((always_inline)) void dot_rows(row_dot_fn dot, uint32_t type, const void *w,
                                                           size_t row_bytes, int64_t n_rows, const void *act, int64_t n,
                                                           float *out) {
    const uint8_t *base = w;
    const size_t used = (size_t)ggml_row_bytes(type, (uint64_t)n);
    prefetch_start(base, n_rows, row_bytes, used);
    for (int64_t r = 0; r < n_rows; r++) {
        prefetch_row(base, r, n_rows, row_bytes, used);
        out[r] = dot(base + (size_t)r * row_bytes, act, n);
    }
}

// The cpu_dot_fn of a one-row dot.
#define ROWS_KERNEL(name, row_dot)                                                                               \
    static void name(uint32_t type, const void *w, size_t row_bytes, int64_t n_rows, const void *act, int64_t n, \
                     float *out) {                                                                               \
        dot_rows(row_dot, type, w, row_bytes, n_rows, act, n, out);                                              \
    }

#endif
