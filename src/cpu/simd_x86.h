// simd_x86.h — what the AVX2 and AVX-512 kernels (matvec_avx2.c,
// matvec_avx512.c) share: the float arithmetic of a quantised dot, the
// blocks' unpacking, the tiles and the one-row loop. Each file
// includes it under its own target flags, so these compile to that file's
// instruction set.
//
// The float arithmetic is the reference's (quant.c), which is llama.cpp's
// AVX2 kernels': each block's integer products are summed exactly into
// eight int32 lanes (lane l holding the weights w with (w % 32) / 4 == l),
// and each lane is folded into its own float accumulator with one fused
// multiply-add by the block's scale; the eight accumulators are added
// pairwise at the end. A kernel may form the integer lanes any way it likes
// (integer sums are exact); the float steps are the only ones, so every
// kernel returns bitwise what seam_vec_dot returns.
#ifndef SEAM_CPU_SIMD_X86_H
#define SEAM_CPU_SIMD_X86_H

#include <immintrin.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "cpu/kernels.h"
#include "numeric/quant.h"

static inline float f16_to_f32(seam_f16 h) {
    return _cvtsh_ss(h);  // exact, as seam_f16_to_f32
}

// seam_f32_to_f16 of one value: F16C rounds to nearest even as the
// reference does; a NaN takes the reference's path (F16C keeps its payload,
// seam writes the canonical quiet NaN).
static inline seam_f16 to_f16_1(float x) {
    return x != x ? seam_f32_to_f16(x) : (seam_f16)_cvtss_sh(x, _MM_FROUND_TO_NEAREST_INT);
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

// The 8 x 8 transpose: p[c] holds element c of the eight rows afterwards.
static inline void transpose8(__m256 p[8]) {
    __m256 t[8], u[8];
    for (int k = 0; k < 8; k += 2) {  // rows k, k+1 interleaved: elements 0,1 | 4,5 and 2,3 | 6,7
        t[k] = _mm256_unpacklo_ps(p[k], p[k + 1]);
        t[k + 1] = _mm256_unpackhi_ps(p[k], p[k + 1]);
    }
    for (int k = 0; k < 8; k += 4) {  // rows k..k+3: elements 0 | 4, 1 | 5, 2 | 6, 3 | 7
        u[k] = _mm256_shuffle_ps(t[k], t[k + 2], _MM_SHUFFLE(1, 0, 1, 0));
        u[k + 1] = _mm256_shuffle_ps(t[k], t[k + 2], _MM_SHUFFLE(3, 2, 3, 2));
        u[k + 2] = _mm256_shuffle_ps(t[k + 1], t[k + 3], _MM_SHUFFLE(1, 0, 1, 0));
        u[k + 3] = _mm256_shuffle_ps(t[k + 1], t[k + 3], _MM_SHUFFLE(3, 2, 3, 2));
    }
    for (int c = 0; c < 4; c++) {
        p[c] = _mm256_permute2f128_ps(u[c], u[4 + c], 0x20);
        p[c + 4] = _mm256_permute2f128_ps(u[c], u[4 + c], 0x31);
    }
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

// Q6_K (layout in quant.h), half h of a block: four runs of 32 weights as
// unsigned bytes 0..63 (run r: sub-blocks 2r, 2r + 1 of the half). The
// 2-bit parts of qh are moved to bits 4-5 by whole-register shifts and masked.
static inline __attribute__((always_inline)) void q6k_runs(const block_q6_K *w, int h, __m256i q[4]) {
    const __m256i low4 = _mm256_set1_epi8(15), bits45 = _mm256_set1_epi8(0x30);
    const uint8_t *ql = w->ql + 64 * h, *qh = w->qh + 32 * h;
    const __m256i l0 = _mm256_loadu_si256((const __m256i *)ql);
    const __m256i l1 = _mm256_loadu_si256((const __m256i *)(ql + 32));
    const __m256i hb = _mm256_loadu_si256((const __m256i *)qh);
    q[0] = _mm256_or_si256(_mm256_and_si256(l0, low4), _mm256_and_si256(_mm256_slli_epi16(hb, 4), bits45));
    q[1] = _mm256_or_si256(_mm256_and_si256(l1, low4), _mm256_and_si256(_mm256_slli_epi16(hb, 2), bits45));
    q[2] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l0, 4), low4), _mm256_and_si256(hb, bits45));
    q[3] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l1, 4), low4),
                           _mm256_and_si256(_mm256_srli_epi16(hb, 2), bits45));
}

// Half h's eight Q6_K scales (int16) in both 128-bit lanes, from all sixteen
// (sc16); the selector must be a literal for clang, so each half has its own.
static inline __m256i q6k_half_scales(__m256i sc16, int h) {
    return h ? _mm256_permute2x128_si256(sc16, sc16, 0x11) : _mm256_permute2x128_si256(sc16, sc16, 0x00);
}

// The scales of run r of a half (sch: q6k_half_scales) for its maddubs
// products: int16 lanes 0-7 belong to sub-block 2r, lanes 8-15 to 2r + 1.
static inline __m256i q6k_run_scales(__m256i sch, int r) {
    return _mm256_shuffle_epi8(sch, _mm256_set_m128i(_mm_set1_epi16((short)((4 * r + 3) << 8 | (4 * r + 2))),
                                                     _mm_set1_epi16((short)((4 * r + 1) << 8 | 4 * r))));
}

// ---------------------------------------------------------------------------
// The 32-wide types x Q8_0 (ggml_vec_dot_{q4_0,q5_0,q8_0}_q8_0; reference:
// dot_32wide in quant.c): one weight row against up to WIDE32_TILE inputs,
// each block unpacked to 32 signed bytes once for all of them. Per (block,
// input), the core forms eight int32 lanes of q . a in fours, and acc +=
// (d * da) * lanes.

// Block b of a row as 32 signed bytes q (w = d * q), per quant.c's unpack_32.
typedef __m256i (*unpack32_fn)(const void *row, int64_t b, float *d);

// Q4_0: | d | qs[16] |, weight j in the low nibble of qs[j], j+16 in the high.
// Q4_0's and Q5_0's nibbles as 32 bytes 0..15, for the AVX2 unpacks here and
// the AVX-512 micro-tiles' unsigned ones.
static inline __m256i nibbles_32(const uint8_t *qs) {
    const __m128i lo = _mm_loadu_si128((const __m128i *)qs);
    const __m256i both = _mm256_set_m128i(_mm_srli_epi16(lo, 4), lo);
    return _mm256_and_si256(both, _mm256_set1_epi8(15));
}

static inline __m256i unpack_q4_0(const void *row, int64_t b, float *d) {
    const block_q4_0 *x = (const block_q4_0 *)row + b;
    *d = f16_to_f32(x->d);
    return _mm256_sub_epi8(nibbles_32(x->qs), _mm256_set1_epi8(8));
}

// Q5_0: | d | qh[4] | qs[16] |, bit j of qh is bit 4 of weight j; q = v - 16.
// Spread bit j of qh to byte j (0xff where set), then q = nibble | (set ? 0 :
// 0xf0): the high nibble 0xf0 is the -16 of an unset fifth bit.
static inline __m256i unpack_q5_0(const void *row, int64_t b, float *d) {
    const block_q5_0 *x = (const block_q5_0 *)row + b;
    *d = f16_to_f32(x->d);
    uint32_t qh;
    memcpy(&qh, x->qh, sizeof qh);
    const __m256i byte_of_bit =
        _mm256_set_epi64x(0x0303030303030303, 0x0202020202020202, 0x0101010101010101, 0x0000000000000000);
    __m256i bits = _mm256_shuffle_epi8(_mm256_set1_epi32((int)qh), byte_of_bit);
    bits = _mm256_or_si256(bits, _mm256_set1_epi64x(0x7fbfdfeff7fbfdfe));  // all but bit j%8 set
    const __m256i set = _mm256_cmpeq_epi8(bits, _mm256_set1_epi64x(-1));
    return _mm256_or_si256(nibbles_32(x->qs), _mm256_andnot_si256(set, _mm256_set1_epi8((char)0xf0)));
}

static inline __m256i unpack_q8_0(const void *row, int64_t b, float *d) {
    const block_q8_0 *x = (const block_q8_0 *)row + b;
    *d = f16_to_f32(x->d);
    return _mm256_loadu_si256((const __m256i *)x->qs);
}

// A file's byte core: eight int32 lanes of abs_q . s in fours, where abs_q
// is |q| as unsigned bytes (<= 128) and s the activations with q's signs
// moved onto them (|s| <= 127), so that unsigned-by-signed products serve a
// signed dot.
typedef __m256i (*i8_core_fn)(__m256i abs_q, __m256i s);

// Inputs per tile: what the registers hold of the inputs' accumulators
// beside a block's quants and scales (a K block keeps 12 to 16 registers of
// them, a 32-wide block two), so each file's K kernels name their own width
// (AVX2's 16 registers: 4; the AVX-512 set runs its K types' batches through
// tiles of its own and these with one input, for decode).
#define WIDE32_TILE 8
#define TILE_MAX 8

static inline __attribute__((always_inline)) void wide32_tile(unpack32_fn unpack, i8_core_fn core, int nb,
                                                              const void *row, const uint8_t *act, size_t act_stride,
                                                              int64_t n, float *out, int64_t ldo) {
    __m256 acc[TILE_MAX];
    for (int j = 0; j < nb; j++) acc[j] = _mm256_setzero_ps();
    const float *da[TILE_MAX];  // the inputs' block scales (cpu_input_extras)
    for (int j = 0; j < nb; j++) da[j] = cpu_q8_0_scales_of(act + j * act_stride, n);
    for (int64_t b = 0; b < n / QK8_0; b++) {
        float d;
        const __m256i q = unpack(row, b, &d);
        const __m256i abs_q = _mm256_sign_epi8(q, q);
        const __m256 d8 = _mm256_set1_ps(d);
        for (int j = 0; j < nb; j++) {
            const block_q8_0 *a = (const block_q8_0 *)(act + j * act_stride) + b;
            const __m256i s = _mm256_sign_epi8(_mm256_loadu_si256((const __m256i *)a->qs), q);
            const __m256 scale = _mm256_mul_ps(d8, _mm256_broadcast_ss(&da[j][b]));  // d * da, in every lane
            acc[j] = _mm256_fmadd_ps(scale, _mm256_cvtepi32_ps(core(abs_q, s)), acc[j]);
        }
    }
    for (int j = 0; j < nb; j++) out[j * ldo] = hsum8(acc[j]);
}

// ---------------------------------------------------------------------------
// The K-type dots (ggml_vec_dot_{q4_K,q6_K}_q8_K; reference: dot_ktype in
// quant.c): one weight row against a few inputs at once.
//
// A prompt's tokens meet the same weight rows, so the work that depends only
// on the weights -- unpacking the quants to bytes, spreading the sub-block
// scales over the lanes, converting d and dmin -- is done once per block and
// row and kept in registers while every input of the tile passes over it.
// What is left per (block, input) is the integer core below -- the
// multiplies, the bound here -- and the reference's float steps. Decode is a
// tile of one input: the same code, and the fastest decode kernel measured
// too (it keeps the multiplies to the VNNI core's three per two runs).
// A block's quants as eight runs of 32 bytes (q[i]: weights 32i..32i+31,
// unsigned) against nb inputs' 256 activations (a[j]): each input's exact
// int32 lanes, added to lanes[j]. The scales are spread as the core wants:
//   by run (pairs false): s[i] holds, in each int16 word, the scale of the
//                         weight pair that word's maddubs product covers;
//   in pairs (true):      s[k] interleaves runs 2k and 2k + 1 -- word 2m the
//                         scale of run 2k's lane m, word 2m + 1 run 2k + 1's.
// The inputs go innermost: their chains of accumulates are independent, and
// side by side the out-of-order core overlaps them, where one input's chain
// alone would wait on each accumulate's latency.
typedef void (*k_core_fn)(int nb, const __m256i q[8], const __m256i s[8], const int8_t *const a[], __m256i lanes[]);

// AVX2's core (pairs false): maddubs, then madd by the scales and add --
// three instructions per run, two of them multiplies.
static inline __attribute__((always_inline)) void k_core_madd(int nb, const __m256i q[8], const __m256i s[8],
                                                              const int8_t *const a[], __m256i lanes[]) {
    for (int i = 0; i < 8; i++)
        for (int j = 0; j < nb; j++) {
            const __m256i p = _mm256_maddubs_epi16(q[i], _mm256_loadu_si256((const __m256i *)(a[j] + 32 * i)));
            lanes[j] = _mm256_add_epi32(lanes[j], _mm256_madd_epi16(p, s[i]));
        }
}

// Block b of each of a tile's nb inputs, and its quants.
static inline __attribute__((always_inline)) void tile_blocks(const uint8_t *act, size_t act_stride, int64_t b, int nb,
                                                              const block_q8_K *ab[], const int8_t *aq[]) {
    for (int j = 0; j < nb; j++) {
        ab[j] = (const block_q8_K *)(act + j * act_stride) + b;
        aq[j] = ab[j]->qs;
    }
}

// Q4_K (layout in quant.h): one row (its n / QK_K blocks) against nb inputs
// (act + j * act_stride, each with its extras): out[j * ldo] =
// seam_vec_dot. Chunk c of qs holds sub-block (run) 2c in its low nibbles
// and 2c + 1 in its high ones; per block, lanes and mins' lanes as the
// reference forms them, acc += (da * d) * lanes, acc_m += (-da * dmin) *
// min_lanes; then the pairwise sums.
static inline __attribute__((always_inline)) void q4k_dots_tile(k_core_fn core, bool pairs, int nb, const void *row,
                                                                const uint8_t *act, size_t act_stride, int64_t n,
                                                                float *out, int64_t ldo) {
    __m256 acc[TILE_MAX];
    __m128 acc_m[TILE_MAX];
    for (int j = 0; j < nb; j++) acc[j] = _mm256_setzero_ps(), acc_m[j] = _mm_setzero_ps();
    const __m256i low4 = _mm256_set1_epi8(15);
    for (int64_t b = 0; b < n / QK_K; b++) {
        const block_q4_K *w = (const block_q4_K *)row + b;
        const __m128i sm = q4k_scales_mins1(w->scales);
        const __m128i mins = _mm_cvtepu8_epi16(_mm_srli_si128(sm, 8));
        const __m256i sc = _mm256_broadcastsi128_si256(_mm_cvtepu8_epi16(sm));  // words 0-7: sc0..sc7, both halves
        __m256i q[8], s[8];
        for (int c = 0; c < 4; c++) {
            const __m256i bits = _mm256_loadu_si256((const __m256i *)(w->qs + 32 * c));
            q[2 * c] = _mm256_and_si256(bits, low4);
            q[2 * c + 1] = _mm256_and_si256(_mm256_srli_epi16(bits, 4), low4);
        }
        if (pairs)
            for (int k = 0; k < 4; k++)  // words sc[2k], sc[2k+1], alternating
                s[k] = _mm256_shuffle_epi8(sc, _mm256_set1_epi32((4 * k + 3) << 24 | (4 * k + 2) << 16 | (4 * k + 1) << 8 | 4 * k));
        else
            for (int i = 0; i < 8; i++) s[i] = _mm256_shuffle_epi8(sc, _mm256_set1_epi16((short)((2 * i + 1) << 8 | 2 * i)));
        uint32_t d_dmin;
        memcpy(&d_dmin, &w->d, sizeof d_dmin);
        // d and -dmin in every lane: times da, the reference's products (da * d, -da * dmin)
        const __m128 dd = _mm_cvtph_ps(_mm_cvtsi32_si128((int)d_dmin));
        const __m256 d8 = _mm256_broadcastss_ps(dd);
        const __m128 neg_dmin4 = _mm_xor_ps(_mm_permute_ps(dd, 0x55), _mm_set1_ps(-0.0f));
        const block_q8_K *ab[TILE_MAX];
        const int8_t *aq[TILE_MAX];
        __m256i lanes[TILE_MAX];
        tile_blocks(act, act_stride, b, nb, ab, aq);
        for (int j = 0; j < nb; j++) lanes[j] = _mm256_setzero_si256();
        core(nb, q, s, aq, lanes);
        for (int j = 0; j < nb; j++) {
            const block_q8_K *a = ab[j];
            const __m128i sums = _mm_loadu_si128((const __m128i *)(cpu_q8_K_sums_of(act + j * act_stride, n) + 8 * b));
            const __m128i min_lanes = _mm_madd_epi16(mins, sums);
            const __m256 da8 = _mm256_broadcast_ss(&a->d);
            acc[j] = _mm256_fmadd_ps(_mm256_mul_ps(d8, da8), _mm256_cvtepi32_ps(lanes[j]), acc[j]);
            acc_m[j] = _mm_fmadd_ps(_mm_mul_ps(neg_dmin4, _mm256_castps256_ps128(da8)), _mm_cvtepi32_ps(min_lanes), acc_m[j]);
        }
    }
    for (int j = 0; j < nb; j++) out[j * ldo] = hsum8(acc[j]) + hsum4(acc_m[j]);
}

// Q6_K: the same (run i is sub-blocks 2i, its low 16 bytes, and 2i + 1, its
// high 16). q is used unsigned (0..63, the unsigned side of the byte
// products) and the -32 comes off at once: the sub-blocks are the bsums'
// groups of 16, so it is 32 * sum_s sc[s] * bsums[s] (|.| < 2^24: exact).
static inline __attribute__((always_inline)) void q6k_dots_tile(k_core_fn core, bool pairs, int nb, const void *row,
                                                                const uint8_t *act, size_t act_stride, int64_t n,
                                                                float *out, int64_t ldo) {
    __m256 acc[TILE_MAX];
    for (int j = 0; j < nb; j++) acc[j] = _mm256_setzero_ps();
    for (int64_t b = 0; b < n / QK_K; b++) {
        const block_q6_K *w = (const block_q6_K *)row + b;
        const __m256i sc16 = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)w->scales));
        __m256i q[8], s[8];
        for (int h = 0; h < 2; h++) {
            q6k_runs(w, h, q + 4 * h);
            const __m256i sch = q6k_half_scales(sc16, h);
            if (pairs)  // runs 4h + 2k', 4h + 2k' + 1: low lane sc 4k', 4k'+2 of the half; high lane 4k'+1, 4k'+3
                for (int k = 0; k < 2; k++)
                    s[2 * h + k] = _mm256_shuffle_epi8(
                        sch, _mm256_set_m128i(
                                 _mm_set1_epi32((8 * k + 7) << 24 | (8 * k + 6) << 16 | (8 * k + 3) << 8 | (8 * k + 2)),
                                 _mm_set1_epi32((8 * k + 5) << 24 | (8 * k + 4) << 16 | (8 * k + 1) << 8 | 8 * k)));
            else
                for (int r = 0; r < 4; r++) s[4 * h + r] = q6k_run_scales(sch, r);
        }
        seam_f16 d16;
        memcpy(&d16, &w->d, sizeof d16);
        const float d = f16_to_f32(d16);
        const block_q8_K *ab[TILE_MAX];
        const int8_t *aq[TILE_MAX];
        __m256i lanes[TILE_MAX];
        tile_blocks(act, act_stride, b, nb, ab, aq);
        for (int j = 0; j < nb; j++) {
            const __m256i offset = _mm256_madd_epi16(sc16, _mm256_loadu_si256((const __m256i *)ab[j]->bsums));
            lanes[j] = _mm256_sub_epi32(_mm256_setzero_si256(), _mm256_slli_epi32(offset, 5));
        }
        core(nb, q, s, aq, lanes);
        for (int j = 0; j < nb; j++) acc[j] = acc_lanes(acc[j], ab[j]->d * d, lanes[j]);
    }
    // + 0: the reference's empty mins term (it turns a -0 sum into +0)
    for (int j = 0; j < nb; j++) out[j * ldo] = hsum8(acc[j]) + 0.0f;
}

// ---------------------------------------------------------------------------
// Prefetching the rows of a matvec.
//
// One core reads DRAM at ~10 GB/s only with many misses in flight; while a
// kernel computes on one row, the hardware streamer alone keeps too few, and
// compute and memory take turns instead of overlapping. So before each row
// the kernel prefetches the row PREFETCH_AHEAD bytes further on -- only the
// bytes a dot reads (attention's key rows are a head's slice of a longer
// cache row) and never past the rows it was given (a neighbour's rows are
// another thread's).
#define PREFETCH_AHEAD 2048

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

// ---------------------------------------------------------------------------
// The row loops.

// A tile of nb inputs against one row, the type and core bound.
typedef void (*tile_fn)(int nb, const void *row, const uint8_t *act, size_t act_stride, int64_t n, float *out,
                        int64_t ldo);

// The cpu_dot_fn loop over a tile: inputs `width` at a time (the last tile
// narrower, each width its own unrolled copy), each tile over every row, so
// that the tile's inputs stay in L1 while the rows stream by.
static inline __attribute__((always_inline)) void tiles_rows(tile_fn tile, int width, uint32_t type, const void *w,
                                                             size_t row_bytes, int64_t n_rows, const void *act,
                                                             size_t act_stride, int n_act, int64_t n, float *out,
                                                             int64_t ldo) {
    _Static_assert(TILE_MAX == 8, "the switch below covers widths 1..8");
    const uint8_t *base = w, *a = act;
    const size_t used = (size_t)ggml_row_bytes(type, (uint64_t)n);
    for (int j = 0; j < n_act; j += width) {
        const int nb = n_act - j < width ? n_act - j : width;
        const uint8_t *aj = a + (size_t)j * act_stride;
        float *oj = out + (int64_t)j * ldo;
        prefetch_start(base, n_rows, row_bytes, used);
        for (int64_t r = 0; r < n_rows; r++) {
            prefetch_row(base, r, n_rows, row_bytes, used);
            const void *row = base + (size_t)r * row_bytes;
            switch (nb) {
#define WIDTH(k) case k: if (k <= width) tile(k, row, aj, act_stride, n, oj + r, ldo); break;
                WIDTH(8) WIDTH(7) WIDTH(6) WIDTH(5) WIDTH(4) WIDTH(3) WIDTH(2) WIDTH(1)
#undef WIDTH
            }
        }
    }
}

// The cpu_dot_fn `name`: a tile of nb inputs against one row is `call`
// (which sees nb, row, act, act_stride, n, out and ldo), width inputs a tile.
#define TILE_KERNEL(name, width, call)                                                                              \
    static inline __attribute__((always_inline)) void name##_tile(int nb, const void *row, const uint8_t *act,    \
                                                                  size_t act_stride, int64_t n, float *out,       \
                                                                  int64_t ldo) {                                  \
        call;                                                                                                       \
    }                                                                                                               \
    static void name(uint32_t type, const void *w, size_t row_bytes, int64_t n_rows, const void *act,             \
                     size_t act_stride, int n_act, int64_t n, float *out, int64_t ldo) {                          \
        tiles_rows(name##_tile, width, type, w, row_bytes, n_rows, act, act_stride, n_act, n, out, ldo);            \
    }

// A K-type tile body with a file's core, its scales' layout and its width.
#define KTILE_KERNEL(name, tile, core, pairs, width) \
    TILE_KERNEL(name, width, tile(core, pairs, nb, row, act, act_stride, n, out, ldo))

// A 32-wide type (its unpack) with a file's byte core, width inputs a tile.
#define WIDE32_KERNEL(name, unpack, core, width) \
    TILE_KERNEL(name, width, wide32_tile(unpack, core, nb, row, act, act_stride, n, out, ldo))

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

// The cpu_dot_fn of a one-row dot: the rows for each input in turn.
#define ROWS_KERNEL(name, row_dot)                                                                                 \
    static void name(uint32_t type, const void *w, size_t row_bytes, int64_t n_rows, const void *act,             \
                     size_t act_stride, int n_act, int64_t n, float *out, int64_t ldo) {                          \
        for (int j = 0; j < n_act; j++)                                                                             \
            dot_rows(row_dot, type, w, row_bytes, n_rows, (const uint8_t *)act + (size_t)j * act_stride, n,         \
                     out + (int64_t)j * ldo);                                                                       \
    }

// ---------------------------------------------------------------------------
// The values tile of the grouped value sums (both sets' values_group): a
// run's V rows turned around, tile[d][k] dimension d of position base + k
// (f16), so that consecutive positions of one dimension load as one
// register.
#define VT_W (CPU_VALUES_RUN + 64)  // a tile row: the run from c0 rounded down to 64

// 8 rows of 16 f16 (dimensions d..d+15 of 8 positions) -> 16 columns: out[c]
// holds dimension d + c of the 8 positions in its low half (c < 8) or d + c
// - 8 in its high half, the usual 8 x 8 transpose in each 128-bit lane.
static inline void transpose_8x16_f16(__m256i a[8]) {
    __m256i b[8], c[8];
    for (int k = 0; k < 4; k++) {
        b[2 * k] = _mm256_unpacklo_epi16(a[2 * k], a[2 * k + 1]);
        b[2 * k + 1] = _mm256_unpackhi_epi16(a[2 * k], a[2 * k + 1]);
    }
    for (int k = 0; k < 2; k++) {
        c[4 * k] = _mm256_unpacklo_epi32(b[4 * k], b[4 * k + 2]);
        c[4 * k + 1] = _mm256_unpackhi_epi32(b[4 * k], b[4 * k + 2]);
        c[4 * k + 2] = _mm256_unpacklo_epi32(b[4 * k + 1], b[4 * k + 3]);
        c[4 * k + 3] = _mm256_unpackhi_epi32(b[4 * k + 1], b[4 * k + 3]);
    }
    for (int k = 0; k < 4; k++) {
        a[2 * k] = _mm256_unpacklo_epi64(c[k], c[4 + k]);
        a[2 * k + 1] = _mm256_unpackhi_epi64(c[k], c[4 + k]);
    }
}

// Positions ahead whose rows values_tile prefetches. A KV head's row is a
// slice of its position's cache row (Qwen3's 256 bytes every 2 KiB), too
// sparse for the hardware streamer: at pp2048 of the Qwen3-0.6B shape the
// tile's loads waited on memory, and prefetching 64 positions ahead took
// values_group from 0.436 to 0.405 of the Q4_K tiles' samples (perf, 3
// runs each; 128 ahead no better).
#define VT_PREFETCH 64

// Rows [c0, c1) (position t's at v + (t % ring) * stride) into the tile from
// base = c0 rounded down to 64, and around them, to the end of the last 64,
// the row of zeros `zero` (head_dim f16). With check, returns whether a
// value of the rows is infinite or NaN (false without).
static inline __attribute__((always_inline)) bool values_tile(seam_f16 *tile, const seam_f16 *zero,
                                                              const seam_f16 *v, int c0, int c1, int head_dim,
                                                              int64_t stride, int ring, bool check) {
    const int base = c0 & ~63, end = (c1 + 63) & ~63;
    const int d16 = head_dim & ~15;
    const __m256i exponent = _mm256_set1_epi16(0x7c00);
    __m256i all_ones_exponent = _mm256_setzero_si256();
    bool not_finite = false;
    for (int t8 = base; t8 < end; t8 += 8) {
        const int k = t8 - base;
        const seam_f16 *row[8];
        for (int r = 0; r < 8; r++) {
            const int t = t8 + r, ahead = t + VT_PREFETCH;
            row[r] = t >= c0 && t < c1 ? v + (int64_t)(t % ring) * stride : zero;
            if (ahead < c1)
                prefetch_line_range((const uint8_t *)(v + (int64_t)(ahead % ring) * stride),
                                    sizeof(seam_f16) * (size_t)head_dim);
        }
        for (int d = 0; d < d16; d += 16) {
            __m256i a[8];
            for (int r = 0; r < 8; r++) {
                a[r] = _mm256_loadu_si256((const __m256i *)(row[r] + d));
                if (check)
                    all_ones_exponent = _mm256_or_si256(
                        all_ones_exponent, _mm256_cmpeq_epi16(_mm256_and_si256(a[r], exponent), exponent));
            }
            transpose_8x16_f16(a);
            for (int c = 0; c < 8; c++) {
                _mm_storeu_si128((__m128i *)(tile + (size_t)(d + c) * VT_W + k), _mm256_castsi256_si128(a[c]));
                _mm_storeu_si128((__m128i *)(tile + (size_t)(d + 8 + c) * VT_W + k), _mm256_extracti128_si256(a[c], 1));
            }
        }
        for (int d = d16; d < head_dim; d++)
            for (int r = 0; r < 8; r++) {
                tile[(size_t)d * VT_W + k + r] = row[r][d];
                not_finite |= check && (row[r][d] & 0x7c00) == 0x7c00;
            }
    }
    return not_finite || !_mm256_testz_si256(all_ones_exponent, all_ones_exponent);
}


#endif
