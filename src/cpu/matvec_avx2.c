// matvec_avx2.c — AVX2 + FMA + F16C dot products (compiled with -mavx2 -mfma
// -mf16c; only reached after a run-time feature check).
//
// The bound: decode reads every weight byte once per token, so a kernel has
// to turn a block into integer products faster than DRAM delivers it (on the
// order of 10 GB/s per core), not more. That leaves room to keep the scalar
// reference's arithmetic exactly:
//   - integer products are summed exactly, per block, into one int; the
//     block's float scaling and the running float sum are the reference's
//     expressions in the reference's order, so the K-type and 32-wide dots
//     return bitwise what seam_vec_dot returns;
//   - float dots (F32, F16) form each product in float as the reference does
//     and sum in four double lanes instead of one: the same double when the
//     partial sums are exact (products spanning < 29 bits of exponent), and
//     otherwise within a double rounding, far below the float result's ulp.
// The integer paths follow llama.cpp's AVX2 kernels (ggml-cpu/arch/x86/quants.c).
//
// This file is compiled with ISO C's -ffp-contract=off (gcc -std=c11): the
// scalar tails below must not be fused into FMAs, or they would round
// differently from quant.c.
#include <stddef.h>

#include "cpu/kernels.h"
#include "cpu/simd_x86.h"

// ---------------------------------------------------------------------------
// Helpers

static inline int hsum_i32(__m256i v) {
    __m128i s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
    s = _mm_add_epi32(s, _mm_shuffle_epi32(s, _MM_SHUFFLE(1, 0, 3, 2)));
    s = _mm_add_epi32(s, _mm_shuffle_epi32(s, _MM_SHUFFLE(2, 3, 0, 1)));
    return _mm_cvtsi128_si32(s);
}

// The four horizontal sums of a, b, c, d, as lanes 0..3.
static inline __m128i hsum4_i32(__m256i a, __m256i b, __m256i c, __m256i d) {
    const __m256i ab = _mm256_hadd_epi32(a, b), cd = _mm256_hadd_epi32(c, d);
    const __m256i abcd = _mm256_hadd_epi32(ab, cd);  // per 128-bit half: partial sums of a, b, c, d
    return _mm_add_epi32(_mm256_castsi256_si128(abcd), _mm256_extracti128_si256(abcd, 1));
}

static inline double hsum_f64(__m256d v) {
    __m128d s = _mm_add_pd(_mm256_castpd256_pd128(v), _mm256_extractf128_pd(v, 1));
    return _mm_cvtsd_f64(_mm_add_sd(s, _mm_unpackhi_pd(s, s)));
}

// Eight int32 lanes of signed x . signed y over 32 bytes, in pairs of four:
// maddubs wants its first operand unsigned, so move x's sign onto y.
static inline __m256i dot_i8(__m256i x, __m256i y) {
    const __m256i p16 = _mm256_maddubs_epi16(_mm256_sign_epi8(x, x), _mm256_sign_epi8(y, x));
    return _mm256_madd_epi16(p16, _mm256_set1_epi16(1));
}

// ---------------------------------------------------------------------------
// 32-wide types x Q8_0 (ggml_vec_dot_{q4_0,q5_0,q8_0}_q8_0; reference: the
// 32-wide branch of seam_vec_dot). Per block: isum exact; sum += isum * (d * da),
// one block after another. Four blocks share one horizontal reduction.

// Block b of a row as 32 signed bytes q (w = d * q), per quant.c's unpack_32.
typedef __m256i (*unpack32_fn)(const void *row, int64_t b, float *d);

// Q4_0: | d | qs[16] |, weight j in the low nibble of qs[j], j+16 in the high.
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
    const __m256i byte_of_bit = _mm256_set_epi64x(0x0303030303030303, 0x0202020202020202,
                                                  0x0101010101010101, 0x0000000000000000);
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

static inline float dot_32wide(unpack32_fn unpack, const void *w, const void *act, int64_t n) {
    const block_q8_0 *a = act;
    const int64_t nb = n / QK8_0;
    float sum = 0;
    int64_t b = 0;
    for (; b + 4 <= nb; b += 4) {
        float dw[4];
        __m256i s[4];
        for (int k = 0; k < 4; k++)
            s[k] = dot_i8(unpack(w, b + k, &dw[k]), _mm256_loadu_si256((const __m256i *)a[b + k].qs));
        const __m128i isum = hsum4_i32(s[0], s[1], s[2], s[3]);
        const __m128 dd = _mm_mul_ps(_mm_loadu_ps(dw), _mm_set_ps(f16_to_f32(a[b + 3].d), f16_to_f32(a[b + 2].d),
                                                                f16_to_f32(a[b + 1].d), f16_to_f32(a[b].d)));
        float p[4];
        _mm_storeu_ps(p, _mm_mul_ps(_mm_cvtepi32_ps(isum), dd));
        sum += p[0];
        sum += p[1];
        sum += p[2];
        sum += p[3];
    }
    for (; b < nb; b++) {
        float dw;
        const int isum = hsum_i32(dot_i8(unpack(w, b, &dw), _mm256_loadu_si256((const __m256i *)a[b].qs)));
        sum += isum * (dw * f16_to_f32(a[b].d));
    }
    return sum;
}

// One instance per type, so that each unpack inlines into its loop.
static float dot_q4_0(uint32_t type, const void *w, const void *a, int64_t n) {
    return dot_32wide(unpack_q4_0, w, a, n);
}
static float dot_q5_0(uint32_t type, const void *w, const void *a, int64_t n) {
    return dot_32wide(unpack_q5_0, w, a, n);
}
static float dot_q8_0(uint32_t type, const void *w, const void *a, int64_t n) {
    return dot_32wide(unpack_q8_0, w, a, n);
}

// ---------------------------------------------------------------------------
// K types x Q8_K (ggml_vec_dot_{q4_K,q6_K}_q8_K; reference: the K-type branch
// of seam_vec_dot): per block, exact integer sums; four blocks at a time
// through k_dot (simd_x86.h) for the horizontal sums and the float tail.

// Q4_K (layout in quant.h): chunk c of qs holds sub-block 2c in its low
// nibbles and 2c+1 in its high ones; maddubs pairs them with the activations
// into int16 (|.| <= 2 * 15 * 128), madd applies the sub-block's scale.
static void q4k_block(const void *wv, const block_q8_K *a, __m128i *isum, __m128i *mprod) {
    const block_q4_K *w = wv;
    const __m128i sm = q4k_scales_mins(w->scales);
    *mprod = q4k_min_products(sm, a);
    const __m256i sc = _mm256_broadcastsi128_si256(_mm_cvtepu8_epi16(sm));  // sc0..7 as int16, both halves
    const __m256i low4 = _mm256_set1_epi8(15);
    __m256i acc = _mm256_setzero_si256();
#pragma GCC unroll 4
    for (int c = 0; c < 4; c++) {
        const __m256i bits = _mm256_loadu_si256((const __m256i *)(w->qs + 32 * c));
        const __m256i p_lo = _mm256_maddubs_epi16(_mm256_and_si256(bits, low4),
                                                  _mm256_loadu_si256((const __m256i *)(a->qs + 64 * c)));
        const __m256i p_hi = _mm256_maddubs_epi16(_mm256_and_si256(_mm256_srli_epi16(bits, 4), low4),
                                                  _mm256_loadu_si256((const __m256i *)(a->qs + 64 * c + 32)));
        const __m256i s_lo = _mm256_shuffle_epi8(sc, _mm256_set1_epi16((short)((4 * c + 1) << 8 | 4 * c)));
        const __m256i s_hi = _mm256_shuffle_epi8(sc, _mm256_set1_epi16((short)((4 * c + 3) << 8 | (4 * c + 2))));
        acc = _mm256_add_epi32(acc, _mm256_add_epi32(_mm256_madd_epi16(s_lo, p_lo), _mm256_madd_epi16(s_hi, p_hi)));
    }
    *isum = fold_256(acc);
}

// Q6_K (layout in quant.h): per half, ql[0..63] and qh[0..31] give four runs
// of 32 weights (run r: sub-blocks 2r, 2r+1 of the half); the 2-bit parts of
// qh are moved to bits 4-5 by whole-register shifts and masked. q is used
// unsigned (0..63, maddubs' unsigned side) and the -32 comes off at once:
// the sub-blocks are the bsums' groups of 16, so it is 32 * sum_s sc[s] *
// bsums[s] (|.| < 2^24: exact).
static void q6k_block(const void *wv, const block_q8_K *a, __m128i *isum, __m128i *mprod) {
    const block_q6_K *w = wv;
    const __m256i low4 = _mm256_set1_epi8(15), bits45 = _mm256_set1_epi8(0x30);
    const __m256i sc16 = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)w->scales));
    const __m256i offset = _mm256_madd_epi16(sc16, _mm256_loadu_si256((const __m256i *)a->bsums));
    __m256i acc = _mm256_sub_epi32(_mm256_setzero_si256(), _mm256_slli_epi32(offset, 5));
#pragma GCC unroll 2
    for (int h = 0; h < 2; h++) {
        const uint8_t *ql = w->ql + 64 * h, *qh = w->qh + 32 * h;
        const __m256i l0 = _mm256_loadu_si256((const __m256i *)ql);
        const __m256i l1 = _mm256_loadu_si256((const __m256i *)(ql + 32));
        const __m256i hb = _mm256_loadu_si256((const __m256i *)qh);
        const __m256i q[4] = {
            _mm256_or_si256(_mm256_and_si256(l0, low4), _mm256_and_si256(_mm256_slli_epi16(hb, 4), bits45)),
            _mm256_or_si256(_mm256_and_si256(l1, low4), _mm256_and_si256(_mm256_slli_epi16(hb, 2), bits45)),
            _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l0, 4), low4), _mm256_and_si256(hb, bits45)),
            _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l1, 4), low4),
                            _mm256_and_si256(_mm256_srli_epi16(hb, 2), bits45)),
        };
        // this half's eight scales (int16) in both 128-bit lanes
        const __m256i sch = _mm256_permute2x128_si256(sc16, sc16, h ? 0x11 : 0x00);
#pragma GCC unroll 4
        for (int r = 0; r < 4; r++) {
            const __m256i p = _mm256_maddubs_epi16(q[r], _mm256_loadu_si256((const __m256i *)(a->qs + 128 * h + 32 * r)));
            // int16 lanes 0-7 belong to sub-block 2r of the half, lanes 8-15 to 2r + 1
            const __m256i s = _mm256_shuffle_epi8(sch, _mm256_set_m128i(_mm_set1_epi16((short)((4 * r + 3) << 8 | (4 * r + 2))),
                                                                        _mm_set1_epi16((short)((4 * r + 1) << 8 | 4 * r))));
            acc = _mm256_add_epi32(acc, _mm256_madd_epi16(s, p));
        }
    }
    *isum = fold_256(acc);
    *mprod = _mm_setzero_si128();
}

static float dot_q4_K(uint32_t type, const void *w, const void *a, int64_t n) {
    return k_dot(q4k_block, sizeof(block_q4_K), offsetof(block_q4_K, d), offsetof(block_q4_K, dmin), w, a, n);
}

static float dot_q6_K(uint32_t type, const void *w, const void *a, int64_t n) {
    return k_dot(q6k_block, sizeof(block_q6_K), offsetof(block_q6_K, d), -1, w, a, n);
}

// ---------------------------------------------------------------------------
// F32 and F16 weights (reference: the float branch of seam_vec_dot): each
// product in float, the sum in double.

static inline void acc_products(__m256d *acc, __m256 p) {
    acc[0] = _mm256_add_pd(acc[0], _mm256_cvtps_pd(_mm256_castps256_ps128(p)));
    acc[1] = _mm256_add_pd(acc[1], _mm256_cvtps_pd(_mm256_extractf128_ps(p, 1)));
}

static float dot_f32(uint32_t type, const void *wv, const void *av, int64_t n) {
    const float *w = wv, *a = av;
    __m256d acc[2] = {_mm256_setzero_pd(), _mm256_setzero_pd()};
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) acc_products(acc, _mm256_mul_ps(_mm256_loadu_ps(w + i), _mm256_loadu_ps(a + i)));
    double sum = hsum_f64(_mm256_add_pd(acc[0], acc[1]));
    for (; i < n; i++) sum += (double)(w[i] * a[i]);
    return (float)sum;
}

static float dot_f16(uint32_t type, const void *wv, const void *av, int64_t n) {
    const seam_f16 *w = wv, *a = av;
    __m256d acc[2] = {_mm256_setzero_pd(), _mm256_setzero_pd()};
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        const __m256 wf = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(w + i)));
        const __m256 af = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(a + i)));
        acc_products(acc, _mm256_mul_ps(wf, af));
    }
    double sum = hsum_f64(_mm256_add_pd(acc[0], acc[1]));
    for (; i < n; i++) sum += (double)(f16_to_f32(w[i]) * f16_to_f32(a[i]));
    return (float)sum;
}

// Attention's value sum: per element the same float product and double add
// as the reference, so the result is bitwise the reference's.
static void axpy_f16(double *acc, float a, const seam_f16 *x, int n) {
    const __m256 va = _mm256_set1_ps(a);
    int i = 0;
    for (; i + 8 <= n; i += 8) {
        const __m256 p = _mm256_mul_ps(va, _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(x + i))));
        _mm256_storeu_pd(acc + i, _mm256_add_pd(_mm256_loadu_pd(acc + i), _mm256_cvtps_pd(_mm256_castps256_ps128(p))));
        _mm256_storeu_pd(acc + i + 4,
                         _mm256_add_pd(_mm256_loadu_pd(acc + i + 4), _mm256_cvtps_pd(_mm256_extractf128_ps(p, 1))));
    }
    for (; i < n; i++) acc[i] += (double)(a * f16_to_f32(x[i]));
}

void cpu_kernels_fill_avx2(cpu_kernels *k) {
    k->name = "avx2";
    k->dot[GGML_TYPE_F32] = dot_f32;
    k->dot[GGML_TYPE_F16] = dot_f16;
    k->dot[GGML_TYPE_Q4_0] = dot_q4_0;
    k->dot[GGML_TYPE_Q5_0] = dot_q5_0;
    k->dot[GGML_TYPE_Q8_0] = dot_q8_0;
    k->dot[GGML_TYPE_Q4_K] = dot_q4_K;
    k->dot[GGML_TYPE_Q6_K] = dot_q6_K;
    k->axpy_f16 = axpy_f16;
}
