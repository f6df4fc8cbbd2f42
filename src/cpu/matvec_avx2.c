// matvec_avx2.c — the AVX2 + FMA + F16C kernels (compiled with -mavx2 -mfma
// -mf16c; only reached after a run-time feature check): the dot products of
// every matvec and attention score, and the per-token work between the
// matvecs -- activation quantisation, f16 conversion, softmax, SwiGLU and
// attention's value sums -- which runs on one core while the others wait.
//
// The bound: decode reads every weight byte once per token, so a kernel has
// to turn blocks into products faster than DRAM delivers them (~10 GB/s per
// core here), with room to spare, or compute and memory stop overlapping.
// The arithmetic is the reference's, step for step -- the integer paths are
// llama.cpp's AVX2 kernels (ggml-cpu/arch/x86/quants.c), which both of its
// x86 builds run, the float ones its vector code in the order of either
// build (exact.h), all of which quant.c and exact.c transcribe -- so every
// result here is bitwise the reference's in the set's order.
#include <math.h>
#include <stddef.h>
#include <string.h>

#include "cpu/kernels.h"
#include "cpu/simd_x86.h"
#include "numeric/exact.h"

// Scalar float steps must round as quant.c's do: no fusing (gcc's ISO mode
// never fuses; clang does within an expression unless told not to).
#if defined(__clang__)
#pragma STDC FP_CONTRACT OFF
#endif

// ---------------------------------------------------------------------------
// 32-wide types x Q8_0 and K types x Q8_K: the tiles of simd_x86.h with
// AVX2's cores.

// Eight int32 lanes of |q| . s over 32 bytes, in fours (|q| <= 128 unsigned,
// |s| <= 127: maddubs' pairs stay below 2^15), then summed in pairs.
static inline __attribute__((always_inline)) __m256i i8_core_madd(__m256i abs_q, __m256i s) {
    return _mm256_madd_epi16(_mm256_maddubs_epi16(abs_q, s), _mm256_set1_epi16(1));
}
WIDE32_KERNEL(dot_q4_0, unpack_q4_0, i8_core_madd, WIDE32_TILE)
WIDE32_KERNEL(dot_q5_0, unpack_q5_0, i8_core_madd, WIDE32_TILE)
WIDE32_KERNEL(dot_q8_0, unpack_q8_0, i8_core_madd, WIDE32_TILE)

// Q4_K and Q6_K against nb inputs, AVX2's own tiles (the reference:
// dot_ktype in quant.c, as simd_x86.h's q4k_dots_tile and q6k_dots_tile
// form it). AVX2 has 16 vector registers: a tile that unpacked a block's
// eight runs and their scales first kept 16 of them live before the first
// input and spilled the inputs' lanes. Here two runs at a time are
// unpacked, with their scales, and met by every input before the next two,
// so they cost four registers and eight inputs' lanes stay in the rest. The
// lanes are the same int32 sums in another order of additions (exact), and
// the float steps per (block, input) are the reference's.
#define AVX2_KTILE 8  // inputs a tile
static inline __attribute__((always_inline)) void q4k_tile(int nb, const void *row, const uint8_t *act,
                                                           size_t act_stride, int64_t n, float *out, int64_t ldo) {
    __m256 acc[TILE_MAX];
    __m128 acc_m[TILE_MAX];
    for (int j = 0; j < nb; j++) acc[j] = _mm256_setzero_ps(), acc_m[j] = _mm_setzero_ps();
    const __m256i low4 = _mm256_set1_epi8(15);
    for (int64_t b = 0; b < n / QK_K; b++) {
        const block_q4_K *w = (const block_q4_K *)row + b;
        const __m128i sm = q4k_scales_mins1(w->scales);
        const __m256i sc = _mm256_broadcastsi128_si256(_mm_cvtepu8_epi16(sm));  // words 0-7: sc0..sc7, both halves
        const block_q8_K *ab[TILE_MAX];
        const int8_t *aq[TILE_MAX];
        __m256i lanes[TILE_MAX];
        tile_blocks(act, act_stride, b, nb, ab, aq);
        for (int j = 0; j < nb; j++) lanes[j] = _mm256_setzero_si256();
        for (int c = 0; c < 4; c++) {
            const __m256i bits = _mm256_loadu_si256((const __m256i *)(w->qs + 32 * c));
            const __m256i ql = _mm256_and_si256(bits, low4), qh = _mm256_and_si256(_mm256_srli_epi16(bits, 4), low4);
            const __m256i sl = _mm256_shuffle_epi8(sc, _mm256_set1_epi16((short)((4 * c + 1) << 8 | 4 * c)));
            const __m256i sh = _mm256_shuffle_epi8(sc, _mm256_set1_epi16((short)((4 * c + 3) << 8 | (4 * c + 2))));
            for (int j = 0; j < nb; j++) {
                const __m256i pl = _mm256_maddubs_epi16(ql, _mm256_loadu_si256((const __m256i *)(aq[j] + 64 * c)));
                const __m256i ph = _mm256_maddubs_epi16(qh, _mm256_loadu_si256((const __m256i *)(aq[j] + 64 * c + 32)));
                lanes[j] = _mm256_add_epi32(lanes[j], _mm256_add_epi32(_mm256_madd_epi16(pl, sl), _mm256_madd_epi16(ph, sh)));
            }
        }
        uint32_t d_dmin;
        memcpy(&d_dmin, &w->d, sizeof d_dmin);
        // (d, -dmin) times da in one product, the reference's two (da * d, -da * dmin)
        const __m128 dd = _mm_xor_ps(_mm_cvtph_ps(_mm_cvtsi32_si128((int)d_dmin)), _mm_setr_ps(0.0f, -0.0f, 0.0f, 0.0f));
        const __m128i mins = _mm_cvtepu8_epi16(_mm_srli_si128(sm, 8));
        for (int j = 0; j < nb; j++) {
            const __m128i sums = _mm_loadu_si128((const __m128i *)(cpu_q8_K_sums_of(act + j * act_stride, n) + 8 * b));
            const __m128i min_lanes = _mm_madd_epi16(mins, sums);
            const __m128 scales = _mm_mul_ps(dd, _mm_broadcast_ss(&ab[j]->d));
            acc[j] = _mm256_fmadd_ps(_mm256_broadcastss_ps(scales), _mm256_cvtepi32_ps(lanes[j]), acc[j]);
            acc_m[j] = _mm_fmadd_ps(_mm_permute_ps(scales, 0x55), _mm_cvtepi32_ps(min_lanes), acc_m[j]);
        }
    }
    for (int j = 0; j < nb; j++) out[j * ldo] = hsum8(acc[j]) + hsum4(acc_m[j]);
}
TILE_KERNEL(dot_q4_K, AVX2_KTILE, q4k_tile(nb, row, act, act_stride, n, out, ldo))

// Q6_K (q6k_runs' layout): per half, runs 0 and 2 come from the first 32
// bytes of ql and runs 1 and 3 from the next, each with its 2-bit parts
// from qh; the -32 comes off each input's lanes at once (q6k_dots_tile).
static inline __attribute__((always_inline)) void q6k_tile(int nb, const void *row, const uint8_t *act,
                                                           size_t act_stride, int64_t n, float *out, int64_t ldo) {
    __m256 acc[TILE_MAX];
    for (int j = 0; j < nb; j++) acc[j] = _mm256_setzero_ps();
    const __m256i low4 = _mm256_set1_epi8(15), bits45 = _mm256_set1_epi8(0x30);
    for (int64_t b = 0; b < n / QK_K; b++) {
        const block_q6_K *w = (const block_q6_K *)row + b;
        const __m256i sc16 = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)w->scales));
        const block_q8_K *ab[TILE_MAX];
        const int8_t *aq[TILE_MAX];
        __m256i lanes[TILE_MAX];
        tile_blocks(act, act_stride, b, nb, ab, aq);
        for (int j = 0; j < nb; j++) {
            const __m256i offset = _mm256_madd_epi16(sc16, _mm256_loadu_si256((const __m256i *)ab[j]->bsums));
            lanes[j] = _mm256_sub_epi32(_mm256_setzero_si256(), _mm256_slli_epi32(offset, 5));
        }
        for (int h = 0; h < 2; h++) {
            const __m256i sch = q6k_half_scales(sc16, h);
            const __m256i hb = _mm256_loadu_si256((const __m256i *)(w->qh + 32 * h));
            for (int k = 0; k < 2; k++) {  // runs k and k + 2 of the half
                const __m256i l = _mm256_loadu_si256((const __m256i *)(w->ql + 64 * h + 32 * k));
                const __m256i lo = _mm256_or_si256(_mm256_and_si256(l, low4),
                                                   _mm256_and_si256(_mm256_slli_epi16(hb, 4 - 2 * k), bits45));
                const __m256i hi = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l, 4), low4),
                                                   _mm256_and_si256(_mm256_srli_epi16(hb, 2 * k), bits45));
                const __m256i slo = q6k_run_scales(sch, k), shi = q6k_run_scales(sch, k + 2);
                const int at_lo = 128 * h + 32 * k, at_hi = at_lo + 64;
                for (int j = 0; j < nb; j++) {
                    const __m256i pl = _mm256_maddubs_epi16(lo, _mm256_loadu_si256((const __m256i *)(aq[j] + at_lo)));
                    const __m256i ph = _mm256_maddubs_epi16(hi, _mm256_loadu_si256((const __m256i *)(aq[j] + at_hi)));
                    lanes[j] = _mm256_add_epi32(lanes[j],
                                                _mm256_add_epi32(_mm256_madd_epi16(pl, slo), _mm256_madd_epi16(ph, shi)));
                }
            }
        }
        seam_f16 d16;
        memcpy(&d16, &w->d, sizeof d16);
        const float d = f16_to_f32(d16);
        for (int j = 0; j < nb; j++) acc[j] = acc_lanes(acc[j], ab[j]->d * d, lanes[j]);
    }
    // + 0: the reference's empty mins term (it turns a -0 sum into +0)
    for (int j = 0; j < nb; j++) out[j * ldo] = hsum8(acc[j]) + 0.0f;
}
TILE_KERNEL(dot_q6_K, AVX2_KTILE, q6k_tile(nb, row, act, act_stride, n, out, ldo))

// ---------------------------------------------------------------------------
// F32 and F16 weights (reference: exact_dot_f32/f16, src/numeric/exact.c,
// llama.cpp's ggml_vec_dot_f32/f16), in either build's order. A step is four
// accumulators of the build's lanes: the AVX2 build's 4 x 8 lanes are four
// registers here, the AVX-512 build's 4 x 16 eight (accumulator j's lanes
// 0-7 and 8-15 in acc[2j], acc[2j + 1]). `wide` picks the AVX-512 order; it
// is a constant wherever these are inlined.

static inline int step_of(bool wide) { return wide ? 64 : 32; }

// The accumulators folded as GGML_F32x16_REDUCE (0 += 2, 1 += 3, 0 += 1,
// then halves, quarters, pairs) or GGML_F32x8_REDUCE (the same folds, then
// halves and two hadds).
static inline float reduce_step(bool wide, const __m256 acc[8]) {
    if (!wide) {
        const __m256 x = _mm256_add_ps(_mm256_add_ps(acc[0], acc[2]), _mm256_add_ps(acc[1], acc[3]));
        __m128 t = _mm_add_ps(_mm256_castps256_ps128(x), _mm256_extractf128_ps(x, 1));
        t = _mm_hadd_ps(t, t);
        return _mm_cvtss_f32(_mm_hadd_ps(t, t));
    }
    const __m256 lo = _mm256_add_ps(_mm256_add_ps(acc[0], acc[4]), _mm256_add_ps(acc[2], acc[6]));
    const __m256 hi = _mm256_add_ps(_mm256_add_ps(acc[1], acc[5]), _mm256_add_ps(acc[3], acc[7]));
    const __m256 t3 = _mm256_add_ps(hi, lo);
    return hsum4(_mm_add_ps(_mm256_extractf128_ps(t3, 1), _mm256_castps256_ps128(t3)));
}

// x (n f16 or f32) . y (f32, or like x), the whole steps; returns the
// reduced sum and the count done, n - n % step (0: no steps, and no
// reduction either).
static inline __attribute__((always_inline)) float float_steps(bool wide, bool half, bool y_f32, const void *x,
                                                               const void *y, int64_t n, int64_t *done) {
    const int step = step_of(wide), nacc = step / 8;
    *done = n - n % step;
    if (!*done) return 0.0f;
    __m256 acc[8];
    for (int k = 0; k < nacc; k++) acc[k] = _mm256_setzero_ps();
    for (int64_t i = 0; i < *done; i += step)
        for (int k = 0; k < nacc; k++) {
            const int64_t e = i + 8 * k;
            const __m256 xv = half ? _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)((const seam_f16 *)x + e)))
                                   : _mm256_loadu_ps((const float *)x + e);
            const __m256 yv = half && !y_f32
                                  ? _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)((const seam_f16 *)y + e)))
                                  : _mm256_loadu_ps((const float *)y + e);
            acc[k] = _mm256_fmadd_ps(xv, yv, acc[k]);
        }
    return reduce_step(wide, acc);
}

// The leftovers fused into the float sum one by one.
static inline __attribute__((always_inline)) float f32_row(bool wide, const void *wv, const void *av, int64_t n) {
    const float *w = wv, *a = av;
    int64_t i;
    float sum = float_steps(wide, false, false, w, a, n, &i);
    for (; i < n; i++) sum = _mm_cvtss_f32(_mm_fmadd_ss(_mm_set_ss(w[i]), _mm_set_ss(a[i]), _mm_set_ss(sum)));
    return sum;
}

// The leftovers added in double, each product formed in float.
static inline __attribute__((always_inline)) float f16_row(bool wide, const void *wv, const void *av, int64_t n) {
    const seam_f16 *w = wv, *a = av;
    int64_t i;
    double sum = float_steps(wide, true, false, w, a, n, &i);
    for (; i < n; i++) sum += (double)(f16_to_f32(w[i]) * f16_to_f32(a[i]));
    return (float)sum;
}

static float f32_row_avx2(const void *w, const void *a, int64_t n) { return f32_row(false, w, a, n); }
static float f32_row_avx512(const void *w, const void *a, int64_t n) { return f32_row(true, w, a, n); }
static float f16_row_avx2(const void *w, const void *a, int64_t n) { return f16_row(false, w, a, n); }
static float f16_row_avx512(const void *w, const void *a, int64_t n) { return f16_row(true, w, a, n); }
ROWS_KERNEL(dot_f32_avx2, f32_row_avx2)
ROWS_KERNEL(dot_f32_avx512, f32_row_avx512)

// F16 rows against one f16 vector -- attention's scores, one key row per
// position against the query: the vector is converted to f32 once (exactly,
// as every conversion of an f16 is), and each row's steps take it from
// there, so a row costs one conversion per 8 elements, not two.
//
// The leftovers past the steps (all of a head of 32 in the AVX-512 order)
// are products added one by one in double, a chain of dependent additions
// as long as the leftovers -- at a head of 32 a score's whole cost, in
// latency. So rows go eight at a time: 8 x 8 products formed in rows,
// transposed so that a register holds one element of the eight rows, and
// each row's sum runs in its own double lane, in its own order (sum[r] holds
// the steps' sum; transpose8 is simd_x86.h's).
static inline void f16_leftovers_8(bool wide, const uint8_t *rows, size_t row_bytes, const float *y, int64_t n,
                                   double sum[8]) {
    const int64_t from = n - n % step_of(wide), vec = from + ((n - from) & ~(int64_t)7);
    __m256d lo = _mm256_loadu_pd(sum), hi = _mm256_loadu_pd(sum + 4);  // rows 0-3, 4-7
    for (int64_t i = from; i < vec; i += 8) {
        const __m256 yv = _mm256_loadu_ps(y + i);
        __m256 p[8];
        for (int r = 0; r < 8; r++)
            p[r] = _mm256_mul_ps(
                _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)((const seam_f16 *)(rows + r * row_bytes) + i))), yv);
        transpose8(p);
        for (int c = 0; c < 8; c++) {
            lo = _mm256_add_pd(lo, _mm256_cvtps_pd(_mm256_castps256_ps128(p[c])));
            hi = _mm256_add_pd(hi, _mm256_cvtps_pd(_mm256_extractf128_ps(p[c], 1)));
        }
    }
    _mm256_storeu_pd(sum, lo), _mm256_storeu_pd(sum + 4, hi);
    for (int r = 0; r < 8; r++)
        for (int64_t i = vec; i < n; i++)
            sum[r] += (double)(f16_to_f32(((const seam_f16 *)(rows + r * row_bytes))[i]) * y[i]);
}

static inline __attribute__((always_inline)) void dot_f16(bool wide, uint32_t type, const void *w, size_t row_bytes,
                                                          int64_t n_rows, const void *act, size_t act_stride,
                                                          int n_act, int64_t n, float *out, int64_t ldo) {
    enum { HOISTED = 1024 };  // longer vectors (F16 weight matrices) convert as they go
    const int64_t from = n - n % step_of(wide);
    for (int j = 0; j < n_act; j++) {
        const seam_f16 *a = (const seam_f16 *)((const uint8_t *)act + (size_t)j * act_stride);
        float *o = out + (int64_t)j * ldo;
        if (n > HOISTED) {
            dot_rows(wide ? f16_row_avx512 : f16_row_avx2, type, w, row_bytes, n_rows, a, n, o);
            continue;
        }
        float y[HOISTED];
        for (int64_t i = 0; i < n; i++) y[i] = f16_to_f32(a[i]);
        const uint8_t *base = w;
        const size_t used = (size_t)n * sizeof(seam_f16);
        prefetch_start(base, n_rows, row_bytes, used);
        int64_t r = 0, done;
        if (n - from >= 8)
            for (; r + 8 <= n_rows; r += 8) {
                double sum[8];
                for (int k = 0; k < 8; k++) {
                    prefetch_row(base, r + k, n_rows, row_bytes, used);
                    sum[k] = float_steps(wide, true, true, base + (size_t)(r + k) * row_bytes, y, n, &done);
                }
                f16_leftovers_8(wide, base + (size_t)r * row_bytes, row_bytes, y, n, sum);
                for (int k = 0; k < 8; k++) o[r + k] = (float)sum[k];
            }
        for (; r < n_rows; r++) {
            prefetch_row(base, r, n_rows, row_bytes, used);
            const seam_f16 *row = (const seam_f16 *)(base + (size_t)r * row_bytes);
            double sum = float_steps(wide, true, true, row, y, n, &done);
            for (int64_t i = from; i < n; i++) sum += (double)(f16_to_f32(row[i]) * y[i]);
            o[r] = (float)sum;
        }
    }
}

static void dot_f16_avx2(uint32_t type, const void *w, size_t row_bytes, int64_t n_rows, const void *act,
                         size_t act_stride, int n_act, int64_t n, float *out, int64_t ldo) {
    dot_f16(false, type, w, row_bytes, n_rows, act, act_stride, n_act, n, out, ldo);
}
static void dot_f16_avx512(uint32_t type, const void *w, size_t row_bytes, int64_t n_rows, const void *act,
                           size_t act_stride, int n_act, int64_t n, float *out, int64_t ldo) {
    dot_f16(true, type, w, row_bytes, n_rows, act, act_stride, n_act, n, out, ldo);
}

// ---------------------------------------------------------------------------
// f32 -> f16 rows (reference: seam_f32_to_f16): F16C rounds to nearest even
// as the reference does, subnormals and overflow included; only a NaN comes
// out differently (F16C keeps its payload, seam writes the canonical quiet
// NaN), so a block holding one takes the reference's path.

static void to_f16(seam_f16 *dst, const float *src, int64_t n) {
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        const __m256 x = _mm256_loadu_ps(src + i);
        if (_mm256_movemask_ps(_mm256_cmp_ps(x, x, _CMP_UNORD_Q))) {
            for (int k = 0; k < 8; k++) dst[i + k] = seam_f32_to_f16(src[i + k]);
        } else {
            _mm_storeu_si128((__m128i *)(dst + i), _mm256_cvtps_ph(x, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
        }
    }
    for (; i < n; i++) dst[i] = to_f16_1(src[i]);
}

// ---------------------------------------------------------------------------
// Q8_0 activations (reference: seam_quantize_row_q8_0, llama.cpp's x86
// quantize_row_q8_0): the largest magnitude (NaN-blind, as the reference's
// comparisons), d = amax / 127 and the multiplier 127 / amax as scalars,
// then each x * id clamped (a NaN product to 127, as fminf then fmaxf give)
// and rounded half to even, 32 at a time.
static void quantize_q8_0(const float *x, block_q8_0 *y, int64_t n) {
    const __m256 sign = _mm256_set1_ps(-0.0f);
    for (int64_t b = 0; b < n / QK8_0; b++, x += QK8_0) {
        __m256 m = _mm256_setzero_ps();
        for (int j = 0; j < QK8_0; j += 8) m = _mm256_max_ps(_mm256_andnot_ps(sign, _mm256_loadu_ps(x + j)), m);
        __m128 h = _mm_max_ps(_mm256_castps256_ps128(m), _mm256_extractf128_ps(m, 1));
        h = _mm_max_ps(h, _mm_movehl_ps(h, h));
        const float amax = _mm_cvtss_f32(_mm_max_ss(h, _mm_movehdup_ps(h)));
        const float d = amax / 127.f, id = amax != 0.0f ? 127.f / amax : 0.0f;
        y[b].d = to_f16_1(d);
        const __m256 vid = _mm256_set1_ps(id);
        __m256i q[4];
        for (int k = 0; k < 4; k++) {
            const __m256 p = _mm256_min_ps(_mm256_mul_ps(_mm256_loadu_ps(x + 8 * k), vid), _mm256_set1_ps(127.f));
            const __m256 r = _mm256_round_ps(_mm256_max_ps(p, _mm256_set1_ps(-127.f)), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
            q[k] = _mm256_cvtps_epi32(r);
        }
        // int32 -> int8 in order: packs work within 128-bit lanes, a permute puts the dwords back
        const __m256i w16 = _mm256_packs_epi16(_mm256_packs_epi32(q[0], q[1]), _mm256_packs_epi32(q[2], q[3]));
        _mm256_storeu_si256((__m256i *)y[b].qs, _mm256_permutevar8x32_epi32(w16, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7)));
    }
}

// ---------------------------------------------------------------------------
// Q8_K activations (reference: seam_quantize_row_q8_K, llama.cpp's
// quantize_row_q8_K_ref): the value of largest magnitude (the first, with
// its sign) maps to -127; each x * iscale rounds by the same 1.5 * 2^23 trick
// and is cut to int8 the same way, so every byte, sum and scale is the
// reference's, NaN inputs included.
static void quantize_q8_K(const float *x, block_q8_K *y, int64_t n) {
    const __m256 sign = _mm256_set1_ps(-0.0f);
    // byte 0 of each dword, twice per 128-bit lane: the int8 cast of 8 ints
    const __m256i low_bytes = _mm256_setr_epi8(0, 4, 8, 12, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, 0, 4, 8, 12,
                                               -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1);
    for (int64_t b = 0; b < n / QK_K; b++, x += QK_K) {
        __m256 m = _mm256_setzero_ps();
        for (int j = 0; j < QK_K; j += 8)
            m = _mm256_max_ps(_mm256_andnot_ps(sign, _mm256_loadu_ps(x + j)), m);  // NaN-blind
        __m128 h = _mm_max_ps(_mm256_castps256_ps128(m), _mm256_extractf128_ps(m, 1));
        h = _mm_max_ps(h, _mm_movehl_ps(h, h));
        const float amax = _mm_cvtss_f32(_mm_max_ss(h, _mm_movehdup_ps(h)));
        memset(&y[b], 0, sizeof y[b]);
        if (amax == 0) continue;
        // the first value of that magnitude, eight at a time (one at a time
        // was a third of this function in a Qwen3-shape prompt)
        const __m256 vamax = _mm256_set1_ps(amax);
        int first = 0, hit;
        while (!(hit = _mm256_movemask_ps(
                     _mm256_cmp_ps(_mm256_andnot_ps(sign, _mm256_loadu_ps(x + first)), vamax, _CMP_EQ_OQ))))
            first += 8;
        first += __builtin_ctz((unsigned)hit);
        const float iscale = -127.f / x[first];
        const __m256 vs = _mm256_set1_ps(iscale);
        for (int g = 0; g < QK_K / 16; g++) {
            __m256i sum = _mm256_setzero_si256();
            for (int h8 = 0; h8 < 2; h8++) {
                const int j = 16 * g + 8 * h8;
                const __m256 f = _mm256_add_ps(_mm256_mul_ps(vs, _mm256_loadu_ps(x + j)), _mm256_set1_ps(12582912.f));
                __m256i v = _mm256_sub_epi32(_mm256_and_si256(_mm256_castps_si256(f), _mm256_set1_epi32(0x007fffff)),
                                             _mm256_set1_epi32(0x00400000));
                v = _mm256_min_epi32(v, _mm256_set1_epi32(127));
                const __m256i q8 = _mm256_shuffle_epi8(v, low_bytes);
                const uint32_t lo = (uint32_t)_mm256_extract_epi32(q8, 0), hi = (uint32_t)_mm256_extract_epi32(q8, 4);
                memcpy(y[b].qs + j, &lo, 4);
                memcpy(y[b].qs + j + 4, &hi, 4);
                sum = _mm256_add_epi32(sum, _mm256_srai_epi32(_mm256_slli_epi32(v, 24), 24));  // as int8 again
            }
            __m128i s4 = _mm_add_epi32(_mm256_castsi256_si128(sum), _mm256_extracti128_si256(sum, 1));
            s4 = _mm_add_epi32(s4, _mm_shuffle_epi32(s4, _MM_SHUFFLE(1, 0, 3, 2)));
            s4 = _mm_add_epi32(s4, _mm_shuffle_epi32(s4, _MM_SHUFFLE(2, 3, 0, 1)));
            y[b].bsums[g] = (int16_t)_mm_cvtsi128_si32(s4);
        }
        y[b].d = 1 / iscale;
    }
}

// ---------------------------------------------------------------------------
// exp, softmax and SwiGLU (reference: exact_expf, exact_softmax, exact_swiglu
// in src/numeric/exact.c, which transcribe llama.cpp's two ggml_v_expf and
// the softmax and SwiGLU built on them), 8 lanes at a time in either order.

// The AVX-512 build's exp: _mm512_scalef_ps(j, n) has no AVX2 form; j * 2^n
// is formed in two exact power-of-two steps instead (|n| <= 192, j near 1:
// the first product stays normal, so only the second rounds, as scalef and
// ldexpf do).
static inline __m256 expf8_avx512(__m256 x) {
    const __m256 r = _mm256_set1_ps(EXACT_EXPF_ROUND);
    const __m256 n = _mm256_sub_ps(_mm256_fmadd_ps(x, _mm256_set1_ps(EXACT_EXPF_LOG2E), r), r);
    const __m256 b = _mm256_fnmadd_ps(n, _mm256_set1_ps(EXACT_EXPF_LN2_LO),
                                      _mm256_fnmadd_ps(n, _mm256_set1_ps(EXACT_EXPF_LN2_HI), x));
    const __m256 u = _mm256_mul_ps(b, b);
    const __m256 j = _mm256_fmadd_ps(
        _mm256_fmadd_ps(_mm256_fmadd_ps(_mm256_set1_ps(EXACT_EXPF_C5), b, _mm256_set1_ps(EXACT_EXPF_C4)), u,
                        _mm256_fmadd_ps(_mm256_set1_ps(EXACT_EXPF_C3), b, _mm256_set1_ps(EXACT_EXPF_C2))),
        u, _mm256_fmadd_ps(_mm256_set1_ps(EXACT_EXPF_C1), b, _mm256_set1_ps(1.0f)));
    const __m256i ni = _mm256_cvttps_epi32(n), n1 = _mm256_srai_epi32(ni, 1), n2 = _mm256_sub_epi32(ni, n1);
    const __m256 p1 = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(n1, _mm256_set1_epi32(127)), 23));
    const __m256 p2 = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(n2, _mm256_set1_epi32(127)), 23));
    const __m256 res = _mm256_mul_ps(_mm256_mul_ps(j, p1), p2);
    // |n| > 192: 0 or infinity; NaN: n itself
    const __m256 big = _mm256_cmp_ps(_mm256_andnot_ps(_mm256_set1_ps(-0.0f), n), _mm256_set1_ps(192), _CMP_GT_OQ);
    const __m256 alt = _mm256_blendv_ps(_mm256_set1_ps(INFINITY), _mm256_setzero_ps(),
                                        _mm256_cmp_ps(n, _mm256_setzero_ps(), _CMP_LE_OQ));
    return _mm256_blendv_ps(_mm256_blendv_ps(res, alt, big), n, _mm256_cmp_ps(n, n, _CMP_UNORD_Q));
}

// The AVX2 build's exp: 2^n as k, z's low bits moved into the exponent
// field, and exp = k + k j in one fused step; lanes with |n| > 126 (rare:
// results near the ends of the float range) through two scale factors
// s2 * s1, whose exponents each stay in range, and past 192 to 0 or
// infinity (s1 * s1).
static inline __m256 expf8_avx2(__m256 x) {
    const __m256 r = _mm256_set1_ps(EXACT_EXPF_ROUND);
    const __m256 z = _mm256_fmadd_ps(x, _mm256_set1_ps(EXACT_EXPF_LOG2E), r);
    const __m256 n = _mm256_sub_ps(z, r);
    const __m256 b = _mm256_fnmadd_ps(n, _mm256_set1_ps(EXACT_EXPF_LN2_LO),
                                      _mm256_fnmadd_ps(n, _mm256_set1_ps(EXACT_EXPF_LN2_HI), x));
    const __m256i e = _mm256_slli_epi32(_mm256_castps_si256(z), 23);
    const __m256 k = _mm256_castsi256_ps(_mm256_add_epi32(e, _mm256_castps_si256(_mm256_set1_ps(1.0f))));
    const __m256 abs_n = _mm256_andnot_ps(_mm256_set1_ps(-0.0f), n);
    const __m256 u = _mm256_mul_ps(b, b);
    const __m256 j = _mm256_fmadd_ps(
        _mm256_fmadd_ps(_mm256_fmadd_ps(_mm256_set1_ps(EXACT_EXPF_C5), b, _mm256_set1_ps(EXACT_EXPF_C4)), u,
                        _mm256_fmadd_ps(_mm256_set1_ps(EXACT_EXPF_C3), b, _mm256_set1_ps(EXACT_EXPF_C2))),
        u, _mm256_mul_ps(_mm256_set1_ps(EXACT_EXPF_C1), b));
    const __m256 fast = _mm256_fmadd_ps(j, k, k);
    const __m256 far = _mm256_cmp_ps(abs_n, _mm256_set1_ps(126), _CMP_GT_OQ);
    if (!_mm256_movemask_ps(far)) return fast;
    const __m256i g = _mm256_and_si256(_mm256_castps_si256(_mm256_cmp_ps(n, _mm256_setzero_ps(), _CMP_LE_OQ)),
                                       _mm256_set1_epi32((int)0x82000000u));
    const __m256 s1 = _mm256_castsi256_ps(_mm256_add_epi32(g, _mm256_set1_epi32(0x7f000000)));
    const __m256 s2 = _mm256_castsi256_ps(_mm256_sub_epi32(e, g));
    const __m256 scaled = _mm256_mul_ps(_mm256_fmadd_ps(s2, j, s2), s1);
    const __m256 out = _mm256_blendv_ps(fast, scaled, far);
    return _mm256_blendv_ps(out, _mm256_mul_ps(s1, s1), _mm256_cmp_ps(abs_n, _mm256_set1_ps(192), _CMP_GT_OQ));
}

static inline __m256 expf8(bool wide, __m256 x) { return wide ? expf8_avx512(x) : expf8_avx2(x); }

// The AVX2 build's softmax (the AVX-512 set has its own): chunks of 8 from
// 0, each chunk's exponentials summed as hsum8 and added in double.
static void softmax_avx2(float *x, int t0, int t1, int n) {
    __m256 m8 = _mm256_set1_ps(-INFINITY);
    int t = t0;
    for (; t + 8 <= t1; t += 8) m8 = _mm256_max_ps(_mm256_loadu_ps(x + t), m8);  // NaN-blind, as x > max
    __m128 m4 = _mm_max_ps(_mm256_extractf128_ps(m8, 1), _mm256_castps256_ps128(m8));
    m4 = _mm_max_ps(_mm_movehl_ps(m4, m4), m4);
    float max = _mm_cvtss_f32(_mm_max_ss(_mm_movehdup_ps(m4), m4));
    for (; t < t1; t++) max = x[t] > max ? x[t] : max;
    double sum = 0.0;
    const int n_vec = n & ~7;
    for (int c = t0 & ~7; c < t1 && c < n_vec; c += 8) {
        const __m256i pos = _mm256_add_epi32(_mm256_set1_epi32(c), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
        const __m256i in = _mm256_andnot_si256(_mm256_cmpgt_epi32(_mm256_set1_epi32(t0), pos),
                                               _mm256_cmpgt_epi32(_mm256_set1_epi32(t1), pos));
        const __m256 e = expf8_avx2(_mm256_sub_ps(_mm256_maskload_ps(x + c, in), _mm256_set1_ps(max)));
        const __m256 chunk = _mm256_and_ps(e, _mm256_castsi256_ps(in));  // a masked position is exp(-inf) = 0
        _mm256_maskstore_ps(x + c, in, chunk);
        sum += (double)hsum8(chunk);
    }
    for (t = n_vec > t0 ? n_vec : t0; t < t1; t++) {
        x[t] = expf(x[t] - max);
        sum += (double)x[t];
    }
    const float scale = (float)(1.0 / sum);
    for (t = t0; t < t1; t++) x[t] *= scale;
}



// cpu_rmsnorm of eight rows side by side. A row's sum of squares is a chain
// of dependent double additions in the order of its values (llama.cpp's
// ggml_float sum), so a row alone waits on the chain's latency at every
// value -- 2.4% of a Qwen3-0.6B-shaped prompt, a norm before attention and
// the FFN and one per head for q and k. Here each row's chain runs in its
// own double lane (transpose8, as the f16 leftovers above), its additions
// in its order; the values past the last eight go on row by row.
static void rmsnorm_rows(float *out, const float *x, const float *weight, int rows, int n, float eps) {
    const int vec = n & ~7;
    for (int r0 = 0; r0 < rows; r0 += 8) {
        const int nr = rows - r0 < 8 ? rows - r0 : 8;
        const float *src[8];  // a short block's missing rows: its last row again, their sums unused
        for (int r = 0; r < 8; r++) src[r] = x + (size_t)(r0 + (r < nr ? r : nr - 1)) * (size_t)n;
        __m256d lo = _mm256_setzero_pd(), hi = _mm256_setzero_pd();  // rows 0-3, 4-7
        for (int i = 0; i < vec; i += 8) {
            __m256 sq[8];
            for (int r = 0; r < 8; r++) {
                const __m256 v = _mm256_loadu_ps(src[r] + i);
                sq[r] = _mm256_mul_ps(v, v);  // x * x in float, as the reference rounds it
            }
            transpose8(sq);
            for (int c = 0; c < 8; c++) {
                lo = _mm256_add_pd(lo, _mm256_cvtps_pd(_mm256_castps256_ps128(sq[c])));
                hi = _mm256_add_pd(hi, _mm256_cvtps_pd(_mm256_extractf128_ps(sq[c], 1)));
            }
        }
        double sum[8];
        _mm256_storeu_pd(sum, lo);
        _mm256_storeu_pd(sum + 4, hi);
        for (int r = 0; r < nr; r++) {  // the sums are all taken: a row may be written over its input now
            const float *xr = x + (size_t)(r0 + r) * (size_t)n;
            for (int i = vec; i < n; i++) sum[r] += (double)(xr[i] * xr[i]);
            const float mean = (float)(sum[r] / n), scale = 1.0f / sqrtf(mean + eps);
            float *o = out + (size_t)(r0 + r) * (size_t)n;
            int i = 0;
            for (; i < vec; i += 8)
                _mm256_storeu_ps(o + i, _mm256_mul_ps(_mm256_mul_ps(_mm256_loadu_ps(xr + i), _mm256_set1_ps(scale)),
                                                      _mm256_loadu_ps(weight + i)));
            for (; i < n; i++) o[i] = (xr[i] * scale) * weight[i];
        }
    }
}

// silu(g) = g / (1 + exp(0 - g)) in chunks of the build's lanes, libm's
// expf past the last whole chunk.
static inline __attribute__((always_inline)) void swiglu(bool wide, float *gate, const float *up, int n) {
    const int lanes = wide ? 16 : 8;
    int i = 0;
    for (; i + lanes <= n; i += lanes)
        for (int h = i; h < i + lanes; h += 8) {
            const __m256 g = _mm256_loadu_ps(gate + h);
            const __m256 e = expf8(wide, _mm256_sub_ps(_mm256_setzero_ps(), g));
            _mm256_storeu_ps(gate + h, _mm256_mul_ps(_mm256_div_ps(g, _mm256_add_ps(_mm256_set1_ps(1.0f), e)),
                                                     _mm256_loadu_ps(up + h)));
        }
    for (; i < n; i++) gate[i] = gate[i] / (1.0f + expf(-gate[i])) * up[i];
}

static void swiglu_avx2(float *gate, const float *up, int n) { swiglu(false, gate, up, n); }
static void swiglu_avx512(float *gate, const float *up, int n) { swiglu(true, gate, up, n); }

// ---------------------------------------------------------------------------
// RoPE (reference: rope_ref in ops.c): 8 pairs at a time, the same fused
// multiply-adds; NEOX pairs are two contiguous halves, normal pairs (2i,
// 2i+1) are split into evens and odds and put back.
static void rope(float *v, int rope_dim, const float *cos_t, const float *sin_t, bool neox) {
    const int half = rope_dim / 2;
    int i = 0;
    for (; i + 8 <= half; i += 8) {
        const __m256 c = _mm256_loadu_ps(cos_t + i), sn = _mm256_loadu_ps(sin_t + i);
        __m256 x0, x1;
        if (neox) {
            x0 = _mm256_loadu_ps(v + i), x1 = _mm256_loadu_ps(v + i + half);
        } else {  // v[2i..2i+15] -> evens x0, odds x1 (in order, after the lane permute)
            const __m256 lo = _mm256_loadu_ps(v + 2 * i), hi = _mm256_loadu_ps(v + 2 * i + 8);
            const __m256i order = _mm256_setr_epi32(0, 1, 4, 5, 2, 3, 6, 7);
            x0 = _mm256_permutevar8x32_ps(_mm256_shuffle_ps(lo, hi, _MM_SHUFFLE(2, 0, 2, 0)), order);
            x1 = _mm256_permutevar8x32_ps(_mm256_shuffle_ps(lo, hi, _MM_SHUFFLE(3, 1, 3, 1)), order);
        }
        const __m256 ra = _mm256_fmadd_ps(x0, c, _mm256_xor_ps(_mm256_mul_ps(x1, sn), _mm256_set1_ps(-0.0f)));
        const __m256 rb = _mm256_fmadd_ps(x0, sn, _mm256_mul_ps(x1, c));
        if (neox) {
            _mm256_storeu_ps(v + i, ra), _mm256_storeu_ps(v + i + half, rb);
        } else {  // interleave back: v[2i] = ra, v[2i+1] = rb
            const __m256 l = _mm256_unpacklo_ps(ra, rb), h = _mm256_unpackhi_ps(ra, rb);
            _mm256_storeu_ps(v + 2 * i, _mm256_permute2f128_ps(l, h, 0x20));
            _mm256_storeu_ps(v + 2 * i + 8, _mm256_permute2f128_ps(l, h, 0x31));
        }
    }
    for (; i < half; i++) {
        const int a = neox ? i : 2 * i, b = neox ? i + half : 2 * i + 1;
        const float x0 = v[a], x1 = v[b];
        v[a] = fmaf(x0, cos_t[i], -(x1 * sin_t[i]));
        v[b] = fmaf(x0, sin_t[i], x1 * cos_t[i]);
    }
}

// The int8 roof (kernels.h): vpmaddubsw pairs bytes into int16 sums, and
// vpmaddwd by ones widens them into the accumulator -- how the AVX2 tiles
// take their bytes. Each chain multiplies its own accumulator's bytes, so
// that no product is the same in two chains (with one shared input the
// compiler formed one product a round for all twelve, and the probe timed
// additions: 1.6x the multiplies' roof); twelve chains of the three steps'
// latency keep both multiply ports busy.
static uint64_t int8_probe(uint64_t rounds) {
    __m256i acc[CPU_INT8_PROBE_CHAINS];
    __m256i u = _mm256_set1_epi8(3);
    const __m256i ones = _mm256_set1_epi16(1);
    for (int i = 0; i < CPU_INT8_PROBE_CHAINS; i++) acc[i] = _mm256_set1_epi8((char)(i + 1));
    for (uint64_t r = 0; r < rounds; r++) {
        __asm__ volatile("" : "+x"(u));
#pragma GCC unroll 12
        for (int i = 0; i < CPU_INT8_PROBE_CHAINS; i++)
            acc[i] = _mm256_add_epi32(acc[i], _mm256_madd_epi16(_mm256_maddubs_epi16(u, acc[i]), ones));
    }
    for (int i = 0; i < CPU_INT8_PROBE_CHAINS; i++) __asm__ volatile("" : : "x"(acc[i]));
    return rounds * CPU_INT8_PROBE_CHAINS * 32;
}

void cpu_kernels_fill_avx2(cpu_kernels *k, exact_order order) {
    const bool wide = order == EXACT_ORDER_AVX512;
    k->name = "avx2";
    k->order = order;
    k->dot[GGML_TYPE_F32] = wide ? dot_f32_avx512 : dot_f32_avx2;
    k->dot[GGML_TYPE_F16] = wide ? dot_f16_avx512 : dot_f16_avx2;
    k->dot[GGML_TYPE_Q4_0] = dot_q4_0;
    k->dot[GGML_TYPE_Q5_0] = dot_q5_0;
    k->dot[GGML_TYPE_Q8_0] = dot_q8_0;
    k->dot[GGML_TYPE_Q4_K] = dot_q4_K;
    k->dot[GGML_TYPE_Q6_K] = dot_q6_K;
    k->to_f16 = to_f16;
    k->quantize_q8_K = quantize_q8_K;
    k->quantize_q8_0 = quantize_q8_0;
    k->softmax = wide ? NULL : softmax_avx2;  // the AVX-512 set brings its own
    k->swiglu = wide ? swiglu_avx512 : swiglu_avx2;
    k->rope = rope;
    k->rmsnorm_rows = rmsnorm_rows;
    k->int8_probe = int8_probe;
    cpu_kernels_fill_avx2_attention(k, order);
}
