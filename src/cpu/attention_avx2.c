// attention_avx2.c — the AVX2 + FMA + F16C attention kernels (compiled with
// -mavx2 -mfma -mf16c; only reached after a run-time feature check): the
// sums of values, row by row for a query alone and turned around for a
// group of queries, flash attention's online softmax, and (in the AVX2
// order) a group's scores with the rows in lanes. The scores of a query
// alone are the F16 dot of matvec_avx2.c; the softmax is there too.
//
// Each is bitwise its reference in src/numeric/exact.c in the order of the
// set it serves (the row-by-row sums in both: the AVX-512 set takes them
// for a query alone).
#include <math.h>
#include <stddef.h>
#include <string.h>

#include "cpu/kernels.h"
#include "cpu/simd_x86.h"
#include "numeric/exact.h"

#if defined(__clang__)
#pragma STDC FP_CONTRACT OFF
#endif

static inline int step_of(bool wide) { return wide ? 64 : 32; }

// ---------------------------------------------------------------------------
// Attention's weighted sum of values (reference: exact_attention_values_run
// and _end in src/numeric/exact.c): position t feeds lane t % lanes of
// accumulator (t / lanes) % 4 of every output dimension, in order of t --
// 4 x lanes per dimension (64 in the AVX-512 order, 32 in the AVX2 one),
// lane t % (4 x lanes). Here a lane's positions for 8 dimensions run in one
// register, so a position costs a load and a fused multiply-add, not a
// round trip of the accumulators through memory; the lanes go to scratch
// (one row of head_dim floats each) once per chunk of positions, and the
// final reduction runs across d, 8 at a time, each float operation the
// reference's.
#define ATTN_CHUNK 1024  // positions whose f16-rounded weights sit on the stack at once (a multiple of 64)

// One lane's positions first, first + span, .. < end for 8 * nk dimensions:
// nk independent chains of fused multiply-adds in registers. Position t's
// row is v + (t % ring) * stride, its row index kept as it goes.
static inline __attribute__((always_inline)) void lane_values(int nk, float *acc, bool fresh, const float *p,
                                                              const seam_f16 *v, int first, int end, int span,
                                                              int64_t stride, int ring) {
    __m256 a[8];
    for (int k = 0; k < nk; k++) a[k] = fresh ? _mm256_setzero_ps() : _mm256_loadu_ps(acc + 8 * k);
    for (int t = first, r = first % ring; t < end; t += span, r = r + span < ring ? r + span : (r + span) % ring) {
        const __m256 pt = _mm256_set1_ps(p[t]);
        const seam_f16 *row = v + (int64_t)r * stride;
        for (int k = 0; k < nk; k++)
            a[k] = _mm256_fmadd_ps(_mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(row + 8 * k))), pt, a[k]);
    }
    for (int k = 0; k < nk; k++) _mm256_storeu_ps(acc + 8 * k, a[k]);
}

static inline __attribute__((always_inline)) void values_run(bool wide, float *acc, const float *w,
                                                             const seam_f16 *v, int c0, int c1, int t0, int head_dim,
                                                             int64_t stride, int ring) {
    const int vec = head_dim & ~7, span = step_of(wide);
    const size_t hd = (size_t)head_dim;
    float p[ATTN_CHUNK];
    for (int k0 = c0; k0 < c1; k0 += ATTN_CHUNK) {
        const int k1 = c1 - k0 < ATTN_CHUNK ? c1 : k0 + ATTN_CHUNK;
        for (int t = k0; t < k1; t++) p[t - k0] = f16_to_f32(to_f16_1(w[t]));
        // every lane, also one no position reaches (fewer than span
        // positions from t0), which the first chunk sets to +0
        for (int lane = 0; lane < span; lane++) {
            const int first = k0 + ((lane - k0 % span) + span) % span;
            float *a = acc + (size_t)lane * hd;
            const bool fresh = k0 == t0;
            int d = 0;
            for (; d + 64 <= vec; d += 64) lane_values(8, a + d, fresh, p - k0, v + d, first, k1, span, stride, ring);
            for (; d < vec; d += 8) lane_values(1, a + d, fresh, p - k0, v + d, first, k1, span, stride, ring);
            for (; d < head_dim; d++) {
                float x = fresh ? 0.0f : a[d];
                for (int t = first; t < k1; t += span)
                    x = fmaf(f16_to_f32(v[(int64_t)(t % ring) * stride + d]), p[t - k0], x);
                a[d] = x;
            }
        }
    }
}

// The 4 x lanes lanes of each d folded as exact.c's reduce_4: 0 += 2, 1 +=
// 3, 0 += 1 on each lane, then halves, quarters and pairs (AVX-512) or
// halves and two hadds (AVX2).
static inline __attribute__((always_inline)) void values_end(bool wide, float *out, float *acc, int head_dim) {
    const int vec = head_dim & ~7, lanes = wide ? 16 : 8;
    const size_t hd = (size_t)head_dim;
    const float *a = acc;
#define A(j, l) (a + ((j) * lanes + (l)) * hd + d)
    int d = 0;
    for (; d < vec; d += 8) {
        __m256 x[16];
        for (int l = 0; l < lanes; l++) {
            const __m256 x0 = _mm256_add_ps(_mm256_loadu_ps(A(0, l)), _mm256_loadu_ps(A(2, l)));
            const __m256 x1 = _mm256_add_ps(_mm256_loadu_ps(A(1, l)), _mm256_loadu_ps(A(3, l)));
            x[l] = _mm256_add_ps(x0, x1);
        }
        __m256 sum;
        if (wide) {
            __m256 t3[8], t6[4];
            for (int i = 0; i < 8; i++) t3[i] = _mm256_add_ps(x[8 + i], x[i]);
            for (int i = 0; i < 4; i++) t6[i] = _mm256_add_ps(t3[4 + i], t3[i]);
            sum = _mm256_add_ps(_mm256_add_ps(t6[0], t6[2]), _mm256_add_ps(t6[1], t6[3]));
        } else {
            __m256 t[4];
            for (int i = 0; i < 4; i++) t[i] = _mm256_add_ps(x[i], x[4 + i]);
            sum = _mm256_add_ps(_mm256_add_ps(t[0], t[1]), _mm256_add_ps(t[2], t[3]));
        }
        _mm256_storeu_ps(out + d, sum);
    }
    for (; d < head_dim; d++) {
        float x[16];
        for (int l = 0; l < lanes; l++) x[l] = (*A(0, l) + *A(2, l)) + (*A(1, l) + *A(3, l));
        out[d] = wide ? exact_reduce16(x) : exact_reduce8_hadd(x);
    }
#undef A
}

static void values_run_avx2(float *acc, const float *w, const seam_f16 *v, int c0, int c1, int t0, int head_dim,
                            int64_t stride, int ring) {
    values_run(false, acc, w, v, c0, c1, t0, head_dim, stride, ring);
}
static void values_run_avx512(float *acc, const float *w, const seam_f16 *v, int c0, int c1, int t0, int head_dim,
                              int64_t stride, int ring) {
    values_run(true, acc, w, v, c0, c1, t0, head_dim, stride, ring);
}
static void values_end_avx2(float *out, float *acc, int head_dim) { values_end(false, out, acc, head_dim); }
static void values_end_avx512(float *out, float *acc, int head_dim) { values_end(true, out, acc, head_dim); }

// ---------------------------------------------------------------------------
// Flash attention's online softmax and sum of values (reference:
// exact_attention_flash in src/numeric/exact.c): the same scalar steps per position
// (the running maximum and sum, libm's expf), each step's operation on the
// head_dim accumulators 8 lanes at a time -- a product or a fused
// multiply-add per element, so the lanes change no result.

// acc (n, a multiple of 8) *= ms, in f32 or through f16.
static inline void flash_scale(float *acc, seam_f16 *acc16, bool f16, int n, float ms) {
    const __m256 m = _mm256_set1_ps(ms);
    for (int d = 0; d < n; d += 8) {
        if (f16) {
            const __m256 a = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(acc16 + d)));
            _mm_storeu_si128((__m128i *)(acc16 + d), _mm256_cvtps_ph(_mm256_mul_ps(a, m), _MM_FROUND_TO_NEAREST_INT));
        } else {
            _mm256_storeu_ps(acc + d, _mm256_mul_ps(_mm256_loadu_ps(acc + d), m));
        }
    }
}

static void flash_run(float *state, const float *s, const void *v, uint32_t v_type, size_t v_row, int ring, int c0,
                      int c1, int t0, int head_dim) {
    const bool f16 = v_type == GGML_TYPE_F16;
    const int vec = head_dim & ~7;  // a q8_0 head is whole blocks of 32; an f16 one may have a tail
    float *acc = state + 2;
    seam_f16 *acc16 = (seam_f16 *)(state + 2 + head_dim);
    if (c0 == t0) {
        state[0] = -INFINITY, state[1] = 0.0f;
        for (int d = 0; d < head_dim; d++) acc[d] = 0.0f, acc16[d] = 0;
    }
    float M = state[0], S = state[1];
    for (int t = c0, r = c0 % ring; t < c1; t++, r = r + 1 < ring ? r + 1 : 0) {
        const uint8_t *row = (const uint8_t *)v + (size_t)r * v_row;
        float ms = 1.0f, vs = 1.0f;
        if (s[t] > M) {
            const float m_old = M;
            M = s[t];
            ms = expf(m_old - M);
            flash_scale(acc, acc16, f16, vec, ms);
            for (int d = vec; d < head_dim; d++) acc16[d] = to_f16_1(f16_to_f32(acc16[d]) * ms);
        } else {
            vs = expf(s[t] - M);
        }
        const __m256 w = _mm256_set1_ps(vs);
        if (f16) {
            const seam_f16 *x = (const seam_f16 *)row;
            for (int d = 0; d < vec; d += 8) {
                const __m256 xv = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(x + d)));
                const __m256 a = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(acc16 + d)));
                _mm_storeu_si128((__m128i *)(acc16 + d),
                                 _mm256_cvtps_ph(_mm256_fmadd_ps(xv, w, a), _MM_FROUND_TO_NEAREST_INT));
            }
            for (int d = vec; d < head_dim; d++) acc16[d] = to_f16_1(fmaf(f16_to_f32(x[d]), vs, f16_to_f32(acc16[d])));
        } else {
            const block_q8_0 *x = (const block_q8_0 *)row;
            for (int b = 0; b < head_dim / QK8_0; b++) {
                const __m256 d = _mm256_set1_ps(f16_to_f32(x[b].d));
                for (int j = 0; j < QK8_0; j += 8) {
                    const __m256i q = _mm256_cvtepi8_epi32(_mm_loadl_epi64((const __m128i *)(x[b].qs + j)));
                    const __m256 value = _mm256_mul_ps(_mm256_cvtepi32_ps(q), d);  // dequantised, rounded
                    float *a = acc + b * QK8_0 + j;
                    _mm256_storeu_ps(a, _mm256_fmadd_ps(value, w, _mm256_loadu_ps(a)));
                }
            }
        }
        S = fmaf(S, ms, vs);
    }
    state[0] = M, state[1] = S;
}

static void flash_end(float *out, float *state, uint32_t v_type, int head_dim) {
    const int vec = head_dim & ~7;
    float *acc = state + 2;
    const seam_f16 *acc16 = (const seam_f16 *)(state + 2 + head_dim);
    if (v_type == GGML_TYPE_F16)
        for (int d = 0; d < head_dim; d++) acc[d] = f16_to_f32(acc16[d]);
    const float s_inv = state[1] == 0.0f ? 0.0f : 1.0f / state[1];
    const __m256 sv = _mm256_set1_ps(s_inv);
    int d = 0;
    for (; d < vec; d += 8) _mm256_storeu_ps(out + d, _mm256_mul_ps(_mm256_loadu_ps(acc + d), sv));
    for (; d < head_dim; d++) out[d] = acc[d] * s_inv;
}

// ---------------------------------------------------------------------------
// Attention's value sums for a group of queries, in the AVX2 order
// (reference: exact_attention_values_run and _end, query by query):
// position t feeds lane t % 8 of accumulator (t / 8) % 4 of every output
// dimension. Row by row (values_run) each query converts every f16 row
// itself, which bounds it: a conversion costs as much as the multiply-add
// it feeds. Here the run's rows are turned around once for the group
// (values_tile, simd_x86.h), so that 8 positions of one dimension load as
// one register -- exactly one accumulator's 8 lanes -- and each converted
// register serves VQ queries, each loaded weight VD dimensions, one of the
// four accumulators at a time over the run.
//
// A query's weights are zero outside its part of the run (rounded to f16
// inside it, as the reference rounds them), so its multiply-adds there add
// x * 0 -- nothing, for a finite x: a lane never holds -0 (it starts at +0,
// and a sum that cancels rounds to +0), so even +-0 products leave it as it
// is. An infinite or NaN value would turn x * 0 into NaN where the reference
// adds nothing; a run whose rows hold one takes values_exact instead.
#define VQ 4  // queries a pass takes
#define VD 3  // dimensions a pass takes

// nq queries x nd dimensions from d, over the tile's n_groups groups of 32
// positions. A query's lanes are (head_dim, 4, 8) floats: dimension d's 32
// lanes, accumulator j's at 8 j.
static inline __attribute__((always_inline)) void values_pass(int nq, int nd, const cpu_values_query *const *qs,
                                                              const float *p, const bool *fresh, const bool *last,
                                                              int n_groups, const seam_f16 *tile, int d) {
    float *accs[VQ];
#pragma GCC unroll 4
    for (int q = 0; q < nq; q++) accs[q] = qs[q]->acc + (size_t)d * 32;
    for (int j = 0; j < 4; j++) {
        __m256 acc[VQ][VD];
#pragma GCC unroll 8
        for (int q = 0; q < nq; q++)
            for (int e = 0; e < nd; e++)
                acc[q][e] = fresh[q] ? _mm256_setzero_ps() : _mm256_loadu_ps(accs[q] + e * 32 + 8 * j);
        for (int g = 0; g < n_groups; g++) {
            const int k = 32 * g + 8 * j;
            __m256 x[VD];
#pragma GCC unroll 4
            for (int e = 0; e < nd; e++)
                x[e] = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(tile + (size_t)(d + e) * VT_W + k)));
#pragma GCC unroll 4
            for (int q = 0; q < nq; q++) {
                const __m256 w = _mm256_loadu_ps(p + (size_t)q * VT_W + k);
#pragma GCC unroll 4
                for (int e = 0; e < nd; e++) acc[q][e] = _mm256_fmadd_ps(x[e], w, acc[q][e]);
            }
        }
#pragma GCC unroll 8
        for (int q = 0; q < nq; q++)
            for (int e = 0; e < nd; e++) _mm256_storeu_ps(accs[q] + e * 32 + 8 * j, acc[q][e]);
    }
#pragma GCC unroll 4
    for (int q = 0; q < nq; q++) {
        if (!last[q]) continue;
        for (int e = 0; e < nd; e++) {  // 0 += 2, 1 += 3, 0 += 1, then halves and two hadds
            const float *a = accs[q] + e * 32;
            const __m256 x = _mm256_add_ps(_mm256_add_ps(_mm256_loadu_ps(a), _mm256_loadu_ps(a + 16)),
                                           _mm256_add_ps(_mm256_loadu_ps(a + 8), _mm256_loadu_ps(a + 24)));
            __m128 t = _mm_add_ps(_mm256_castps256_ps128(x), _mm256_extractf128_ps(x, 1));
            t = _mm_hadd_ps(t, t);
            qs[q]->out[d + e] = _mm_cvtss_f32(_mm_hadd_ps(t, t));
        }
    }
}

// The reference's steps for each query over its part [a, b) of the run, in
// the layout above: a run whose rows hold a value that is not finite.
static void values_exact(const cpu_values_query *q, int a, int b, const seam_f16 *v, int head_dim, int64_t stride,
                         int ring) {
    if (a == q->t0) memset(q->acc, 0, sizeof(float) * 32 * (size_t)head_dim);
    for (int t = a; t < b; t++) {
        const float p = f16_to_f32(to_f16_1(q->w[t]));
        const seam_f16 *row = v + (int64_t)(t % ring) * stride;
        for (int d = 0; d < head_dim; d++) {
            float *lane = q->acc + (size_t)d * 32 + t % 32;
            *lane = fmaf(f16_to_f32(row[d]), p, *lane);
        }
    }
    if (b < q->t1) return;
    for (int d = 0; d < head_dim; d++) {
        const float *a4 = q->acc + (size_t)d * 32;
        float x[8];
        for (int l = 0; l < 8; l++) x[l] = (a4[l] + a4[16 + l]) + (a4[8 + l] + a4[24 + l]);
        q->out[d] = exact_reduce8_hadd(x);
    }
}

// The queries q0.. (nq of them) over every dimension, NQ x VD pairs at a time.
#define VALUES_PASS(NQ)                                                                                           \
    do {                                                                                                        \
        int d = 0;                                                                                              \
        for (; d + VD <= head_dim; d += VD)                                                                     \
            values_pass(NQ, VD, act + q0, weights + (size_t)q0 * VT_W, fresh + q0, last + q0, n_groups, vt, d); \
        for (; d < head_dim; d++)                                                                               \
            values_pass(NQ, 1, act + q0, weights + (size_t)q0 * VT_W, fresh + q0, last + q0, n_groups, vt, d);  \
    } while (0)

static void values_group(const cpu_values_query *qs, int n, const seam_f16 *v, int c0, int c1, int head_dim,
                         int64_t stride, int ring, float *tile) {
    const int base = c0 & ~63, end = (c1 + 63) & ~63, n_groups = (end - base) / 32;
    seam_f16 *vt = (seam_f16 *)tile, *zero = vt + (size_t)head_dim * VT_W;
    float *weights = tile + cpu_values_tile_floats(head_dim) - CPU_VALUES_GROUP * VT_W;
    memset(zero, 0, sizeof(seam_f16) * (size_t)head_dim);
    const bool not_finite = values_tile(vt, zero, v, c0, c1, head_dim, stride, ring, true);
    // the queries the run meets, and their weights rounded to f16 (zero outside their part)
    const cpu_values_query *act[CPU_VALUES_GROUP];
    bool fresh[CPU_VALUES_GROUP], last[CPU_VALUES_GROUP];
    int na = 0;
    for (int i = 0; i < n; i++) {
        const int a = c0 > qs[i].t0 ? c0 : qs[i].t0, b = c1 < qs[i].t1 ? c1 : qs[i].t1;
        if (a >= b) continue;
        if (not_finite) {
            values_exact(&qs[i], a, b, v, head_dim, stride, ring);
            continue;
        }
        float *pa = weights + (size_t)na * VT_W;
        for (int k = 0; k < end - base; k += 8) {
            const __m256i pos = _mm256_add_epi32(_mm256_set1_epi32(base + k), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
            const __m256i in = _mm256_andnot_si256(_mm256_cmpgt_epi32(_mm256_set1_epi32(a), pos),
                                                   _mm256_cmpgt_epi32(_mm256_set1_epi32(b), pos));
            const __m256 x = _mm256_maskload_ps(qs[i].w + base + k, in);  // +0 outside the part
            _mm256_storeu_ps(pa + k, _mm256_cvtph_ps(_mm256_cvtps_ph(x, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC)));
        }
        act[na] = &qs[i], fresh[na] = a == qs[i].t0, last[na] = b == qs[i].t1;
        na++;
    }
    for (int q0 = 0; q0 < na; q0 += VQ) {
        const int nq = na - q0 < VQ ? na - q0 : VQ;
        if (nq == 4) VALUES_PASS(4);
        else if (nq == 3) VALUES_PASS(3);
        else if (nq == 2) VALUES_PASS(2);
        else VALUES_PASS(1);
    }
}

// ---------------------------------------------------------------------------

// ---------------------------------------------------------------------------
// A group's scores with the rows in lanes (the AVX2 order; the AVX-512 set
// has its own, attention_avx512.c): eight K rows turned around once, wt[e]
// element e of the eight rows in f32, so that a register is one element of
// eight rows and each of the reference's 32 lanes (lane l of accumulator j:
// elements 32s + 8j + l, one chain of multiply-adds from +0) is a whole
// register for the eight rows. Its fold -- accumulators 0 += 2, 1 += 3,
// 0 += 1, then the halves, then two horizontal pairs, (t0 + t1) + (t2 + t3)
// -- becomes additions between registers, no shuffle, no conversion per
// query: each loaded element serves SCORES_Q queries, each broadcast query
// element eight rows, where the F16 dot converts every row again for every
// query and folds every score alone. Rows of a multiple of 32 elements (no
// leftovers: the double sum of the reference holds one float, exactly), up
// to SCORES_MAX; from SCORES_MIN queries on, below which turning the rows
// costs more than it saves.
#define SCORES_MAX 256
#define SCORES_MIN 4
#define SCORES_Q 4
#define SCORES_Y_FLOATS 4096  // the queries converted at once: 32 of 128, 16 of 256 (16 KiB)

static cpu_dot_fn f16_narrow;  // the F16 dot this wraps: other lengths, fewer queries, the last rows

// 8 rows (step elements apart) of n f16 elements -> wt (n, 8) f32.
static void rows_turned(const seam_f16 *row, size_t step, int64_t n, float *wt) {
    for (int64_t d = 0; d < n; d += 16) {
        __m256i a[8];
        for (int r = 0; r < 8; r++) a[r] = _mm256_loadu_si256((const __m256i *)(row + r * step + d));
        transpose_8x16_f16(a);
        for (int c = 0; c < 8; c++) {  // element d + c of the 8 rows, then d + 8 + c
            _mm256_storeu_ps(wt + (d + c) * 8, _mm256_cvtph_ps(_mm256_castsi256_si128(a[c])));
            _mm256_storeu_ps(wt + (d + 8 + c) * 8, _mm256_cvtph_ps(_mm256_extracti128_si256(a[c], 1)));
        }
    }
}

// The chain of elements e, e + 32, .. for nq queries at once, each started
// as the reference starts it, from +0.
static inline __attribute__((always_inline)) void scores_chain(int nq, const float *wt, const float *const *y,
                                                               int64_t n, int e, __m256 v[]) {
    const __m256 w0 = _mm256_loadu_ps(wt + e * 8);
#pragma GCC unroll 4
    for (int q = 0; q < nq; q++) v[q] = _mm256_fmadd_ps(w0, _mm256_set1_ps(y[q][e]), _mm256_setzero_ps());
    for (int64_t i = 32 + e; i < n; i += 32) {
        const __m256 w = _mm256_loadu_ps(wt + i * 8);
#pragma GCC unroll 4
        for (int q = 0; q < nq; q++) v[q] = _mm256_fmadd_ps(w, _mm256_set1_ps(y[q][i]), v[q]);
    }
}

// x_l = (lane l of accumulator 0 + of 2) + (of 1 + of 3): the four
// accumulators' fold at lane l.
static inline __attribute__((always_inline)) void scores_x(int nq, const float *wt, const float *const *y, int64_t n,
                                                           int l, __m256 x[]) {
    __m256 a[SCORES_Q], b[SCORES_Q];
    scores_chain(nq, wt, y, n, l, a);
    scores_chain(nq, wt, y, n, 16 + l, b);
#pragma GCC unroll 4
    for (int q = 0; q < nq; q++) x[q] = _mm256_add_ps(a[q], b[q]);
    scores_chain(nq, wt, y, n, 8 + l, a);
    scores_chain(nq, wt, y, n, 24 + l, b);
#pragma GCC unroll 4
    for (int q = 0; q < nq; q++) x[q] = _mm256_add_ps(x[q], _mm256_add_ps(a[q], b[q]));
}

// The scores of 8 turned rows (wt) against nq queries (y[q], f32) in the
// reference's order: t_i = x_i + x_i+4 (the halves), then (t0 + t1) + (t2 +
// t3) (the two horizontal additions); out[q] row r in lane r. One lane's
// fold at a time, kept in xs: all eight at once would hold more registers
// than there are, and the compiler's spills cost more than these stores.
static inline __attribute__((always_inline)) void scores_8(int nq, const float *wt, const float *const *y, int64_t n,
                                                           __m256 out[]) {
    __m256 xs[8][SCORES_Q];
#pragma GCC unroll 1
    for (int l = 0; l < 8; l++) scores_x(nq, wt, y, n, l, xs[l]);
#pragma GCC unroll 4
    for (int q = 0; q < nq; q++) {
        const __m256 t0 = _mm256_add_ps(xs[0][q], xs[4][q]), t1 = _mm256_add_ps(xs[1][q], xs[5][q]);
        const __m256 t2 = _mm256_add_ps(xs[2][q], xs[6][q]), t3 = _mm256_add_ps(xs[3][q], xs[7][q]);
        out[q] = _mm256_add_ps(_mm256_add_ps(t0, t1), _mm256_add_ps(t2, t3));
    }
}

static void scores_rows_in_lanes(const uint8_t *base, size_t row_bytes, int64_t whole, const void *act,
                                 size_t act_stride, int n_act, int64_t n, float *out, int64_t ldo) {
    float y[SCORES_Y_FLOATS], wt[SCORES_MAX * 8];
    const int inputs = SCORES_Y_FLOATS / (int)n < CPU_VALUES_GROUP ? SCORES_Y_FLOATS / (int)n : CPU_VALUES_GROUP;
    const size_t used = (size_t)n * sizeof(seam_f16), step = row_bytes / sizeof(seam_f16);
    for (int j0 = 0; j0 < n_act; j0 += inputs) {
        const int nj = n_act - j0 < inputs ? n_act - j0 : inputs;
        for (int j = 0; j < nj; j++) {  // the queries in f32, once for every row they meet
            const seam_f16 *a = (const seam_f16 *)((const uint8_t *)act + (size_t)(j0 + j) * act_stride);
            for (int64_t i = 0; i < n; i += 8)
                _mm256_storeu_ps(y + j * n + i, _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(a + i))));
        }
        prefetch_start(base, whole, row_bytes, used);
        for (int64_t r0 = 0; r0 < whole; r0 += 8) {
            for (int r = 0; r < 8; r++) prefetch_row(base, r0 + r, whole, row_bytes, used);
            rows_turned((const seam_f16 *)(base + (size_t)r0 * row_bytes), step, n, wt);
            for (int q0 = 0; q0 < nj; q0 += SCORES_Q) {
                const int nq = nj - q0 < SCORES_Q ? nj - q0 : SCORES_Q;
                const float *yq[SCORES_Q];
                for (int q = 0; q < nq; q++) yq[q] = y + (q0 + q) * n;
                __m256 s[SCORES_Q];
                // constant lengths and counts, so that every chain unrolls
#define SCORES(N)                                        \
    switch (nq) {                                        \
        case 4: scores_8(4, wt, yq, N, s); break;        \
        case 3: scores_8(3, wt, yq, N, s); break;        \
        case 2: scores_8(2, wt, yq, N, s); break;        \
        default: scores_8(1, wt, yq, N, s); break;       \
    }
                if (n == 64) SCORES(64)
                else if (n == 128) SCORES(128)
                else if (n == 256) SCORES(256)
                else SCORES(n)
#undef SCORES
                for (int q = 0; q < nq; q++) _mm256_storeu_ps(out + (int64_t)(j0 + q0 + q) * ldo + r0, s[q]);
            }
        }
    }
}

static void dot_f16_scores(uint32_t type, const void *w, size_t row_bytes, int64_t n_rows, const void *act,
                           size_t act_stride, int n_act, int64_t n, float *out, int64_t ldo) {
    const int64_t whole = n_rows & ~(int64_t)7;  // rows in blocks of 8
    if (n % 32 || n > SCORES_MAX || n_act < SCORES_MIN || !whole) {
        f16_narrow(type, w, row_bytes, n_rows, act, act_stride, n_act, n, out, ldo);
        return;
    }
    scores_rows_in_lanes(w, row_bytes, whole, act, act_stride, n_act, n, out, ldo);
    if (whole < n_rows)
        f16_narrow(type, (const uint8_t *)w + (size_t)whole * row_bytes, row_bytes, n_rows - whole, act, act_stride,
                   n_act, n, out + whole, ldo);
}

void cpu_kernels_fill_avx2_attention(cpu_kernels *k, exact_order order) {
    const bool wide = order == EXACT_ORDER_AVX512;
    if (!wide) {  // the F16 dot (matvec_avx2.c, set before this) wrapped for groups
        f16_narrow = k->dot[GGML_TYPE_F16];
        k->dot[GGML_TYPE_F16] = dot_f16_scores;
    }
    k->values_run = wide ? values_run_avx512 : values_run_avx2;
    k->values_end = wide ? values_end_avx512 : values_end_avx2;
    k->values_group = wide ? NULL : values_group;  // the AVX-512 set brings its own
    k->flash_run = flash_run;
    k->flash_end = flash_end;
}
