// attention_avx512.c — attention's own kernels with AVX-512 (compiled with
// -mavx512f -mavx512bw -mavx512vl; reached only after a run-time feature
// check, through cpu_kernels_fill_avx512): the f16 scores of a group of
// queries against sixteen key rows at a time (for a prompt's groups, the
// rows turned around so that a register holds sixteen rows' lane), the
// softmax of their scores, and the values of a group of queries from one
// transposed tile of V rows. Each keeps llama.cpp's non-flash float order
// bit for bit (references in src/numeric/exact.c).
#include <math.h>
#include <stddef.h>
#include <string.h>

#include "cpu/kernels.h"
#include "cpu/simd_x86.h"
#include "numeric/exact.h"

// ---------------------------------------------------------------------------
// F16 rows against f16 inputs (reference: exact_dot_f16 in src/numeric/exact.c,
// ggml's ggml_vec_dot_f16): accumulator j of the four holds elements
// 16j..16j+15 of every block of 64, one register here, and the leftovers
// past the blocks are products added one by one in double. Attention's
// scores (rows of 32-256) spend as much on the reduction of a row's four
// accumulators as on its products, and at a head of 32 all is leftovers, a
// chain of dependent double additions per row; so rows go sixteen at a time:
// their sums 0 += 2, 1 += 3, 0 += 1 folded across the lanes together by one
// transposing tree, and their leftovers' products transposed so that each
// row's double chain runs in its own lane -- each addition the reference's,
// in its order. Each block of rows serves up to 8 inputs from L1 (the
// few inputs of decode; a prompt's groups take dot_f16_rows_in_lanes,
// below). Lengths
// not a multiple of 16 or longer than F16_HOISTED, and the last rows short
// of 16, go to the AVX2 set's kernel (f16_narrow, set by
// cpu_kernels_fill_avx512 from the set it builds on).
#define F16_HOISTED 1024
static cpu_dot_fn f16_narrow;


// The 16 lanes of one accumulator folded as exact_reduce16: halves, quarters, pairs.
static inline float reduce16(__m512 a) {
    const __m256 hi = _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(a), 1));
    const __m256 t3 = _mm256_add_ps(hi, _mm512_castps512_ps256(a));
    return hsum4(_mm_add_ps(_mm256_extractf128_ps(t3, 1), _mm256_castps256_ps128(t3)));
}

// 16 rows' folded accumulators -> their 16 sums as exact_reduce16 forms
// each: halves (t3), quarters (t6), then (t6[0] + t6[2]) + (t6[1] + t6[3]),
// each level on the rows side by side.
static inline __m512 reduce16_x16(const __m512 s[16]) {
    __m512 u[8], v[4], x[2];
    for (int p = 0; p < 8; p++)  // rows 2p, 2p+1: t3 in each 256-bit half
        u[p] = _mm512_add_ps(_mm512_shuffle_f32x4(s[2 * p], s[2 * p + 1], _MM_SHUFFLE(3, 2, 3, 2)),
                             _mm512_shuffle_f32x4(s[2 * p], s[2 * p + 1], _MM_SHUFFLE(1, 0, 1, 0)));
    for (int p = 0; p < 4; p++)  // rows 4p..4p+3: t6 in each 128-bit lane
        v[p] = _mm512_add_ps(_mm512_shuffle_f32x4(u[2 * p], u[2 * p + 1], _MM_SHUFFLE(3, 1, 3, 1)),
                             _mm512_shuffle_f32x4(u[2 * p], u[2 * p + 1], _MM_SHUFFLE(2, 0, 2, 0)));
    for (int p = 0; p < 2; p++)  // lane L: rows 8p + L, 8p + 4 + L, each t6[0] + t6[2], t6[1] + t6[3]
        x[p] = _mm512_add_ps(_mm512_shuffle_ps(v[2 * p], v[2 * p + 1], _MM_SHUFFLE(1, 0, 1, 0)),
                             _mm512_shuffle_ps(v[2 * p], v[2 * p + 1], _MM_SHUFFLE(3, 2, 3, 2)));
    // lane L: rows L, 4 + L, 8 + L, 12 + L; then back in order of rows
    const __m512 z = _mm512_add_ps(_mm512_shuffle_ps(x[0], x[1], _MM_SHUFFLE(2, 0, 2, 0)),
                                   _mm512_shuffle_ps(x[0], x[1], _MM_SHUFFLE(3, 1, 3, 1)));
    return _mm512_permutexvar_ps(_mm512_setr_epi32(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15), z);
}

// One row's four accumulators over its blocks, folded 0 += 2, 1 += 3, 0 += 1.
static inline __attribute__((always_inline)) __m512 f16_row_folded(const seam_f16 *w, const float *y, int64_t n) {
    __m512 acc[4];
    for (int j = 0; j < 4; j++) acc[j] = _mm512_setzero_ps();
    for (int64_t i = 0; i < n; i += 64)
        for (int j = 0; j < 4; j++)
            acc[j] = _mm512_fmadd_ps(_mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(w + i + 16 * j))),
                                     _mm512_loadu_ps(y + i + 16 * j), acc[j]);
    return _mm512_add_ps(_mm512_add_ps(acc[0], acc[2]), _mm512_add_ps(acc[1], acc[3]));
}

// The 16 x 16 transpose: r[e] holds element e of the 16 rows afterwards.
static inline void transpose16(__m512 r[16]) {
    __m512 a[16], b[16];
    for (int i = 0; i < 8; i++) {  // lane L: rows 2i, 2i+1 of elements 4L, 4L+1 (a[2i]) and 4L+2, 4L+3
        a[2 * i] = _mm512_unpacklo_ps(r[2 * i], r[2 * i + 1]);
        a[2 * i + 1] = _mm512_unpackhi_ps(r[2 * i], r[2 * i + 1]);
    }
    for (int i = 0; i < 4; i++) {  // b[4i + m], lane L: rows 4i..4i+3 of element 4L + m
        const __m512d x0 = _mm512_castps_pd(a[4 * i]), x1 = _mm512_castps_pd(a[4 * i + 1]);
        const __m512d x2 = _mm512_castps_pd(a[4 * i + 2]), x3 = _mm512_castps_pd(a[4 * i + 3]);
        b[4 * i] = _mm512_castpd_ps(_mm512_unpacklo_pd(x0, x2));
        b[4 * i + 1] = _mm512_castpd_ps(_mm512_unpackhi_pd(x0, x2));
        b[4 * i + 2] = _mm512_castpd_ps(_mm512_unpacklo_pd(x1, x3));
        b[4 * i + 3] = _mm512_castpd_ps(_mm512_unpackhi_pd(x1, x3));
    }
    for (int m = 0; m < 4; m++) {  // element 4L + m: lane L of b[m], b[4 + m], b[8 + m], b[12 + m]
        const __m512 c0 = _mm512_shuffle_f32x4(b[m], b[4 + m], _MM_SHUFFLE(2, 0, 2, 0));
        const __m512 c1 = _mm512_shuffle_f32x4(b[m], b[4 + m], _MM_SHUFFLE(3, 1, 3, 1));
        const __m512 c2 = _mm512_shuffle_f32x4(b[8 + m], b[12 + m], _MM_SHUFFLE(2, 0, 2, 0));
        const __m512 c3 = _mm512_shuffle_f32x4(b[8 + m], b[12 + m], _MM_SHUFFLE(3, 1, 3, 1));
        r[m] = _mm512_shuffle_f32x4(c0, c2, _MM_SHUFFLE(2, 0, 2, 0));
        r[8 + m] = _mm512_shuffle_f32x4(c0, c2, _MM_SHUFFLE(3, 1, 3, 1));
        r[4 + m] = _mm512_shuffle_f32x4(c1, c3, _MM_SHUFFLE(2, 0, 2, 0));
        r[12 + m] = _mm512_shuffle_f32x4(c1, c3, _MM_SHUFFLE(3, 1, 3, 1));
    }
}

static inline __m512 f32x16_of(__m256 lo, __m256 hi) {
    return _mm512_castpd_ps(_mm512_insertf64x4(_mm512_castpd256_pd512(_mm256_castps_pd(lo)), _mm256_castps_pd(hi), 1));
}

// 16 rows' leftovers (elements n & ~63 .. n - 1, a multiple of 16 of them)
// added in double to their sums so far (rows 0-7 in lo, 8-15 in hi).
static inline __attribute__((always_inline)) void f16_leftovers_16(const seam_f16 *row, size_t step, const float *y,
                                                                   int64_t n, __m512d *lo, __m512d *hi) {
    for (int64_t i = n & ~(int64_t)63; i < n; i += 16) {
        const __m512 yv = _mm512_loadu_ps(y + i);
        __m512 p[16];
        for (int r = 0; r < 16; r++)
            p[r] = _mm512_mul_ps(_mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(row + r * step + i))), yv);
        transpose16(p);
        for (int e = 0; e < 16; e++) {
            *lo = _mm512_add_pd(*lo, _mm512_cvtps_pd(_mm512_castps512_ps256(p[e])));
            *hi = _mm512_add_pd(*hi, _mm512_cvtps_pd(_mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(p[e]), 1))));
        }
    }
}

// nj f16 inputs (act_stride bytes apart) of n elements, a multiple of 16,
// to f32 rows of y, y_len floats apart: the f16 dots' inputs, converted
// once for every row they meet.
static void f16_inputs(const uint8_t *act, size_t act_stride, int nj, int64_t n, float *y, size_t y_len) {
    for (int j = 0; j < nj; j++) {
        const seam_f16 *a = (const seam_f16 *)(act + (size_t)j * act_stride);
        for (int64_t i = 0; i < n; i += 16)
            _mm512_storeu_ps(y + j * y_len + i, _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(a + i))));
    }
}

// ---------------------------------------------------------------------------
// Many inputs against rows of 64-multiple length up to ROWS_IN_LANES_MAX
// (attention's scores for a group of queries): the rows turned around
// instead, sixteen at a time -- wt[e] holds element e of the 16 rows, in
// f32 -- so that a register is one element of sixteen rows, and each of
// the reference's 64 lanes (element l of every block of 64, one chain of
// multiply-adds) is a whole register for the sixteen rows at once. Its
// fold (0 += 2, 1 += 3, 0 += 1, then halves, quarters, pairs) is then a tree
// of plain additions between registers, with no shuffle and no conversion
// left per input: each loaded element serves ROWS_IN_LANES_Q inputs, each
// broadcast input element sixteen rows. Turning the rows around costs about
// a pass of shuffles over them, paid once for all the inputs; it pays from
// ROWS_IN_LANES_MIN inputs on. Measured with bench/attention.c, one core,
// G multiply-adds/s of scores and values together: Qwen3-0.6B's shape
// (groups of 16) at 1536-2048 with the values below 20 -> 26 against the
// rows folded; 2 queries at 4K (Qwen3 decode) 7.3-7.7 against 8.9-9.2, so
// decode keeps the folded rows; 4 of 256 (Gemma 3 on one thread) 19.2
// against 16.1-16.6.
#define ROWS_IN_LANES_MAX 256
#define ROWS_IN_LANES_MIN 4
#define ROWS_IN_LANES_Q 4

// 16 rows (step elements apart) of n f16 elements -> wt (n, 16) f32.
static void rows_turned(const seam_f16 *row, size_t step, int64_t n, float *wt) {
    for (int64_t d = 0; d < n; d += 16) {
        __m256i a[8], b[8];
        for (int r = 0; r < 8; r++) {
            a[r] = _mm256_loadu_si256((const __m256i *)(row + r * step + d));
            b[r] = _mm256_loadu_si256((const __m256i *)(row + (r + 8) * step + d));
        }
        transpose_8x16_f16(a);
        transpose_8x16_f16(b);
        for (int c = 0; c < 8; c++) {  // element d + c of rows 0-7 | 8-15, then d + 8 + c
            _mm512_storeu_ps(wt + (d + c) * 16, _mm512_cvtph_ps(_mm256_permute2x128_si256(a[c], b[c], 0x20)));
            _mm512_storeu_ps(wt + (d + 8 + c) * 16, _mm512_cvtph_ps(_mm256_permute2x128_si256(a[c], b[c], 0x31)));
        }
    }
}

// Lane l's chain (elements l, l + 64, ..) for nq inputs at once, each
// started as the reference starts it, from +0.
static inline __attribute__((always_inline)) void lanes_chain(int nq, const float *wt, const float *const *y,
                                                              int64_t n, int l, __m512 v[]) {
    const __m512 w0 = _mm512_loadu_ps(wt + l * 16);
#pragma GCC unroll 4
    for (int q = 0; q < nq; q++) v[q] = _mm512_fmadd_ps(w0, _mm512_set1_ps(y[q][l]), _mm512_setzero_ps());
    for (int64_t i = 64 + l; i < n; i += 64) {
        const __m512 w = _mm512_loadu_ps(wt + i * 16);
#pragma GCC unroll 4
        for (int q = 0; q < nq; q++) v[q] = _mm512_fmadd_ps(w, _mm512_set1_ps(y[q][i]), v[q]);
    }
}

// u_k = (lane k + lane 32 + k) + (lane 16 + k + lane 48 + k): the fold of
// the four accumulators, at lane k of the first. In rows of 64 each lane's
// chain is one product, exact in f32 (f16 times f16), so lane k + lane
// 32 + k rounds once either way and is a fused multiply-add on lane k: half
// the registers live (all 64 chains at once spilled) and half the additions.
static inline __attribute__((always_inline)) void lanes_u(int nq, const float *wt, const float *const *y, int64_t n,
                                                          int k, __m512 u[]) {
    if (n == 64) {
        const __m512 zero = _mm512_setzero_ps();
        const __m512 wa = _mm512_loadu_ps(wt + k * 16), wb = _mm512_loadu_ps(wt + (k + 32) * 16);
        const __m512 wc = _mm512_loadu_ps(wt + (k + 16) * 16), we = _mm512_loadu_ps(wt + (k + 48) * 16);
#pragma GCC unroll 4
        for (int q = 0; q < nq; q++) {
            const __m512 ab = _mm512_fmadd_ps(wb, _mm512_set1_ps(y[q][k + 32]),
                                              _mm512_fmadd_ps(wa, _mm512_set1_ps(y[q][k]), zero));
            const __m512 ce = _mm512_fmadd_ps(we, _mm512_set1_ps(y[q][k + 48]),
                                              _mm512_fmadd_ps(wc, _mm512_set1_ps(y[q][k + 16]), zero));
            u[q] = _mm512_add_ps(ab, ce);
        }
        return;
    }
    __m512 a[ROWS_IN_LANES_Q], b[ROWS_IN_LANES_Q], c[ROWS_IN_LANES_Q], e[ROWS_IN_LANES_Q];
    lanes_chain(nq, wt, y, n, k, a);
    lanes_chain(nq, wt, y, n, k + 32, b);
    lanes_chain(nq, wt, y, n, k + 16, c);
    lanes_chain(nq, wt, y, n, k + 48, e);
#pragma GCC unroll 4
    for (int q = 0; q < nq; q++) u[q] = _mm512_add_ps(_mm512_add_ps(a[q], b[q]), _mm512_add_ps(c[q], e[q]));
}

// t6_i = (u_i + u_8+i) + (u_4+i + u_12+i): exact_reduce16's halves, then quarters.
static inline __attribute__((always_inline)) void lanes_t6(int nq, const float *wt, const float *const *y, int64_t n,
                                                           int i, __m512 t6[]) {
    __m512 t3[2][ROWS_IN_LANES_Q];
    for (int h = 0; h < 2; h++) {
        __m512 lo[ROWS_IN_LANES_Q], hi[ROWS_IN_LANES_Q];
        lanes_u(nq, wt, y, n, i + 4 * h, lo);
        lanes_u(nq, wt, y, n, i + 4 * h + 8, hi);
#pragma GCC unroll 4
        for (int q = 0; q < nq; q++) t3[h][q] = _mm512_add_ps(hi[q], lo[q]);
    }
#pragma GCC unroll 4
    for (int q = 0; q < nq; q++) t6[q] = _mm512_add_ps(t3[1][q], t3[0][q]);
}

// The sums of 16 turned rows (wt) against nq inputs (y[q], f32), in
// exact_dot_f16's order: (t6_0 + t6_2) + (t6_1 + t6_3); out[q] row r in lane r.
static inline __attribute__((always_inline)) void lanes_dots(int nq, const float *wt, const float *const *y, int64_t n,
                                                             __m512 out[]) {
    __m512 t0[ROWS_IN_LANES_Q], t1[ROWS_IN_LANES_Q], t2[ROWS_IN_LANES_Q], t3[ROWS_IN_LANES_Q];
    lanes_t6(nq, wt, y, n, 0, t0);
    lanes_t6(nq, wt, y, n, 2, t2);
#pragma GCC unroll 4
    for (int q = 0; q < nq; q++) t0[q] = _mm512_add_ps(t0[q], t2[q]);
    lanes_t6(nq, wt, y, n, 1, t1);
    lanes_t6(nq, wt, y, n, 3, t3);
#pragma GCC unroll 4
    for (int q = 0; q < nq; q++) out[q] = _mm512_add_ps(t0[q], _mm512_add_ps(t1[q], t3[q]));
}

// dot_f16 with the rows in lanes: n a multiple of 64 up to
// ROWS_IN_LANES_MAX, the first `whole` rows (a multiple of 16).
static void dot_f16_rows_in_lanes(const uint8_t *base, size_t row_bytes, int64_t whole, const void *act,
                                  size_t act_stride, int n_act, int64_t n, float *out, int64_t ldo) {
    // inputs converted at once: a whole attention group (ATT_GROUP, ops.c),
    // so that its rows are turned around once
    enum { INPUTS = CPU_VALUES_GROUP };
    float y[INPUTS][ROWS_IN_LANES_MAX], wt[ROWS_IN_LANES_MAX * 16];
    const size_t used = (size_t)n * sizeof(seam_f16), step = row_bytes / sizeof(seam_f16);
    for (int j0 = 0; j0 < n_act; j0 += INPUTS) {
        const int nj = n_act - j0 < INPUTS ? n_act - j0 : INPUTS;
        f16_inputs((const uint8_t *)act + (size_t)j0 * act_stride, act_stride, nj, n, y[0], sizeof y[0] / sizeof y[0][0]);
        prefetch_start(base, whole, row_bytes, used);
        for (int64_t r0 = 0; r0 < whole; r0 += 16) {
            for (int r = 0; r < 16; r++) prefetch_row(base, r0 + r, whole, row_bytes, used);
            rows_turned((const seam_f16 *)(base + (size_t)r0 * row_bytes), step, n, wt);
            for (int q0 = 0; q0 < nj; q0 += ROWS_IN_LANES_Q) {
                const int nq = nj - q0 < ROWS_IN_LANES_Q ? nj - q0 : ROWS_IN_LANES_Q;
                const float *yq[ROWS_IN_LANES_Q];
                for (int q = 0; q < nq; q++) yq[q] = y[q0 + q];
                __m512 s[ROWS_IN_LANES_Q];
                // constant lengths and counts, so that every chain unrolls
#define DOTS(N)                                          \
    switch (nq) {                                        \
        case 4: lanes_dots(4, wt, yq, N, s); break;      \
        case 3: lanes_dots(3, wt, yq, N, s); break;      \
        case 2: lanes_dots(2, wt, yq, N, s); break;      \
        default: lanes_dots(1, wt, yq, N, s); break;     \
    }
                if (n == 64) DOTS(64)
                else if (n == 128) DOTS(128)
                else if (n == 192) DOTS(192)
                else DOTS(256)
#undef DOTS
                for (int q = 0; q < nq; q++) _mm512_storeu_ps(out + (int64_t)(j0 + q0 + q) * ldo + r0, s[q]);
            }
        }
    }
}

// dot_f16 with each row's own accumulators, sixteen rows folded together:
// the first `whole` rows (a multiple of 16), n a multiple of 16 up to F16_HOISTED.
static void dot_f16_rows_folded(const uint8_t *base, size_t row_bytes, int64_t whole, const void *act,
                                size_t act_stride, int n_act, int64_t n, float *out, int64_t ldo) {
    enum { INPUTS = 8 };  // inputs converted at once
    float y[INPUTS][F16_HOISTED];
    const size_t used = (size_t)n * sizeof(seam_f16), step = row_bytes / sizeof(seam_f16);
    for (int j0 = 0; j0 < n_act; j0 += INPUTS) {
        const int nj = n_act - j0 < INPUTS ? n_act - j0 : INPUTS;
        f16_inputs((const uint8_t *)act + (size_t)j0 * act_stride, act_stride, nj, n, y[0], sizeof y[0] / sizeof y[0][0]);
        prefetch_start(base, whole, row_bytes, used);
        for (int64_t r0 = 0; r0 < whole; r0 += 16) {
            for (int r = 0; r < 16; r++) prefetch_row(base, r0 + r, whole, row_bytes, used);
            const seam_f16 *row = (const seam_f16 *)(base + (size_t)r0 * row_bytes);
            for (int j = 0; j < nj; j++) {
                float *o = out + (int64_t)(j0 + j) * ldo + r0;
                __m512 z = _mm512_setzero_ps();
                if (n >= 64) {
                    __m512 s[16];
#pragma GCC unroll 16
                    for (int r = 0; r < 16; r++) s[r] = f16_row_folded(row + r * step, y[j], n & ~(int64_t)63);
                    z = reduce16_x16(s);
                }
                if (n % 64) {
                    __m512d lo = _mm512_cvtps_pd(_mm512_castps512_ps256(z));
                    __m512d hi = _mm512_cvtps_pd(_mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(z), 1)));
                    f16_leftovers_16(row, step, y[j], n, &lo, &hi);
                    z = f32x16_of(_mm512_cvtpd_ps(lo), _mm512_cvtpd_ps(hi));
                }
                _mm512_storeu_ps(o, z);
            }
        }
    }
}

static void dot_f16(uint32_t type, const void *w, size_t row_bytes, int64_t n_rows, const void *act,
                    size_t act_stride, int n_act, int64_t n, float *out, int64_t ldo) {
    const int64_t whole = n_rows & ~(int64_t)15;  // rows in blocks of 16
    if (n % 16 || n > F16_HOISTED || !whole) {
        f16_narrow(type, w, row_bytes, n_rows, act, act_stride, n_act, n, out, ldo);
        return;
    }
    const uint8_t *base = w;
    if (n % 64 == 0 && n <= ROWS_IN_LANES_MAX && n_act >= ROWS_IN_LANES_MIN)
        dot_f16_rows_in_lanes(base, row_bytes, whole, act, act_stride, n_act, n, out, ldo);
    else
        dot_f16_rows_folded(base, row_bytes, whole, act, act_stride, n_act, n, out, ldo);
    if (whole < n_rows)
        f16_narrow(type, base + (size_t)whole * row_bytes, row_bytes, n_rows - whole, act, act_stride, n_act, n,
                   out + whole, ldo);
}

// ---------------------------------------------------------------------------
// Attention's value sums for a group of queries (reference: exact_attention_
// values_run and _end in src/numeric/exact.c, query by query): position t feeds lane
// t % 16 of accumulator (t / 16) % 4 of every output dimension, in order of
// t. Row by row (the AVX2 kernel) a register holds 8 dimensions of one lane,
// so each query's 64 lanes x head_dim pass through memory, and each query
// converts every row itself. Here the run's rows are turned around once for
// the group -- tile[d][k] is dimension d of position base + k, f16 -- so that
// 16 positions of one dimension are one register, exactly one accumulator's
// 16 lanes: each loaded block of values serves VQ queries, each loaded
// weight VD dimensions, one of the four accumulators at a time over the
// run (values_tile_queries), and the 4 x 16 reduction runs at the query's
// last position. A position outside a query's part is masked out of its
// fused multiply-adds, as the reference never adds it.
#define VQ 4                        // queries a tile pass takes
#define VD 4                        // dimensions a tile pass takes
#define VALUES_SHORT 2              // groups of 64 positions a short run has at most

// nq queries x nd dimensions from d, nj of their four accumulators at a
// time (nj 1 or 4). The four are independent lanes, so taking them one
// after the other keeps each lane's sum in order of position while a
// register holds a (query, dimension) pair's only live accumulator -- 16
// pairs, each loaded value serving 4 multiply-adds -- but then every pair's
// four pass through memory once a run, which short runs (a prompt's first
// positions) cannot pay for: they keep all four in registers, 6 pairs, and
// reduce them there (masks[q][j][g]: query q's positions among the 16 of
// group g's accumulator j; all ones inside its part, where the masked
// multiply-add is a plain one).
static inline __attribute__((always_inline)) void values_tile_queries(int nq, int nd, int nj,
                                                                      const cpu_values_query *const *qs,
                                                                      const float *p, const bool *fresh,
                                                                      const bool *last,
                                                                      const uint16_t masks[][4][VT_W / 64],
                                                                      int n_groups, const seam_f16 *tile, int d) {
    float *accs[VQ];  // the pairs' accumulators, (dimension, 4, 16) from d, and outputs
    float *outs[VQ];
#pragma GCC unroll 4
    for (int q = 0; q < nq; q++) accs[q] = qs[q]->acc + (size_t)d * 64, outs[q] = qs[q]->out + d;
    for (int j0 = 0; j0 < 4; j0 += nj) {
        __m512 acc[VQ][VD][4];
#pragma GCC unroll 64
        for (int q = 0; q < nq; q++)
            for (int e = 0; e < nd; e++)
                for (int j = 0; j < nj; j++)
                    acc[q][e][j] = fresh[q] ? _mm512_setzero_ps()
                                            : _mm512_loadu_ps(accs[q] + (e * 4 + j0 + j) * 16);
        for (int g = 0; g < n_groups; g++)
#pragma GCC unroll 4
            for (int j = 0; j < nj; j++) {
                const int k = 64 * g + 16 * (j0 + j);
                __m512 x[VD];
#pragma GCC unroll 8
                for (int e = 0; e < nd; e++)
                    x[e] = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(tile + (size_t)(d + e) * VT_W + k)));
#pragma GCC unroll 4
                for (int q = 0; q < nq; q++) {
                    const __m512 w = _mm512_loadu_ps(p + (size_t)q * VT_W + k);
                    const __mmask16 m = masks[q][j0 + j][g];
#pragma GCC unroll 8
                    for (int e = 0; e < nd; e++) acc[q][e][j] = _mm512_mask3_fmadd_ps(x[e], w, acc[q][e][j], m);
                }
            }
#pragma GCC unroll 64
        for (int q = 0; q < nq; q++)
            for (int e = 0; e < nd; e++) {
                if (nj == 4 && last[q]) {  // 0 += 2, 1 += 3, 0 += 1, then across the lanes
                    const __m512 a02 = _mm512_add_ps(acc[q][e][0], acc[q][e][2]);
                    outs[q][e] = reduce16(_mm512_add_ps(a02, _mm512_add_ps(acc[q][e][1], acc[q][e][3])));
                } else {
                    for (int j = 0; j < nj; j++)
                        _mm512_storeu_ps(accs[q] + (e * 4 + j0 + j) * 16, acc[q][e][j]);
                }
            }
    }
    if (nj == 4) return;
#pragma GCC unroll 4
    for (int q = 0; q < nq; q++) {
        if (!last[q]) continue;
#pragma GCC unroll 8
        for (int e = 0; e < nd; e++) {
            const float *a = accs[q] + e * 64;
            const __m512 a02 = _mm512_add_ps(_mm512_loadu_ps(a), _mm512_loadu_ps(a + 32));
            outs[q][e] = reduce16(_mm512_add_ps(a02, _mm512_add_ps(_mm512_loadu_ps(a + 16), _mm512_loadu_ps(a + 48))));
        }
    }
}

// The queries q0.. (nq of them) over every dimension, NQ x ND pairs at a time
// with NJ accumulators each.
#define VALUES_PASS(NQ, ND, NJ)                                                                                      \
    do {                                                                                                           \
        int d = 0;                                                                                                 \
        for (; d + (ND) <= head_dim; d += (ND))                                                                    \
            values_tile_queries(NQ, ND, NJ, act + q0, weights + (size_t)q0 * VT_W, fresh + q0, last + q0,          \
                                masks + q0, n_groups, vt, d);                                                      \
        for (; d < head_dim; d++)                                                                                  \
            values_tile_queries(NQ, 1, NJ, act + q0, weights + (size_t)q0 * VT_W, fresh + q0, last + q0, masks + q0, \
                                n_groups, vt, d);                                                                  \
    } while (0)

static void values_group(const cpu_values_query *qs, int n, const seam_f16 *v, int c0, int c1, int head_dim,
                         int64_t stride, int ring, float *tile) {
    const int base = c0 & ~63, n_groups = (((c1 + 63) & ~63) - base) / 64;
    seam_f16 *vt = (seam_f16 *)tile, *zero = vt + (size_t)head_dim * VT_W;
    float *weights = tile + cpu_values_tile_floats(head_dim) - CPU_VALUES_GROUP * VT_W;
    memset(zero, 0, sizeof(seam_f16) * (size_t)head_dim);
    values_tile(vt, zero, v, c0, c1, head_dim, stride, ring, false);
    // the queries the run meets: their weights rounded to f16 (zero outside their part) and masks
    const cpu_values_query *act[CPU_VALUES_GROUP];
    bool fresh[CPU_VALUES_GROUP], last[CPU_VALUES_GROUP];
    uint16_t masks[CPU_VALUES_GROUP][4][VT_W / 64];
    int na = 0;
    for (int i = 0; i < n; i++) {
        const int a = c0 > qs[i].t0 ? c0 : qs[i].t0, b = c1 < qs[i].t1 ? c1 : qs[i].t1;
        if (a >= b) continue;
        float *pa = weights + (size_t)na * VT_W;
        for (int g = 0; g < n_groups; g++) {
            const int lo = a - base - 64 * g, hi = b - base - 64 * g;  // the part, within group g
            const int l = lo < 0 ? 0 : lo > 64 ? 64 : lo, h = hi < 0 ? 0 : hi > 64 ? 64 : hi;
            const uint64_t m64 = l >= h ? 0 : (h == 64 ? ~0ull : (1ull << h) - 1) & ~((1ull << l) - 1);
            for (int j = 0; j < 4; j++) {
                const __mmask16 m = masks[na][j][g] = (uint16_t)(m64 >> (16 * j));
                const __m512 x = _mm512_maskz_loadu_ps(m, qs[i].w + base + 64 * g + 16 * j);
                _mm512_storeu_ps(pa + 64 * g + 16 * j,
                                 _mm512_cvtph_ps(_mm512_cvtps_ph(x, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC)));
            }
        }
        act[na] = &qs[i], fresh[na] = a == qs[i].t0, last[na] = b == qs[i].t1;
        na++;
    }
    // runs of VALUES_SHORT groups or fewer: 3 queries x 2 dimensions with all
    // four accumulators; longer: 4 x 4, one accumulator at a time
    const bool whole = n_groups <= VALUES_SHORT;
    for (int q0 = 0; q0 < na; q0 += whole ? 3 : VQ) {
        const int nq = na - q0 < (whole ? 3 : VQ) ? na - q0 : whole ? 3 : VQ;
        if (whole) {
            if (nq == 3) VALUES_PASS(3, 2, 4);
            else if (nq == 2) VALUES_PASS(2, 2, 4);
            else VALUES_PASS(1, 2, 4);
        } else {
            if (nq == 4) VALUES_PASS(4, VD, 1);
            else if (nq == 3) VALUES_PASS(3, VD, 1);
            else if (nq == 2) VALUES_PASS(2, VD, 1);
            else VALUES_PASS(1, VD, 1);
        }
    }
}

// ---------------------------------------------------------------------------
// The softmax of a query's scores (reference: exact_softmax and exact_expf
// in src/numeric/exact.c, which transcribe llama.cpp's AVX-512
// ggml_v_expf and ggml_vec_soft_max_f32): the same fused multiply-adds and
// scalef, sixteen lanes at a time, each block's exponentials summed as
// _mm512_reduce_add_ps does (reduce16) into the double sum, in order. The
// AVX2 set takes eight lanes twice and forms scalef's power of two in two
// steps; here it is one instruction, and a block is one register.
static inline __m512 expf16(__m512 x) {
    const __m512 r = _mm512_set1_ps(EXACT_EXPF_ROUND);
    const __m512 n = _mm512_sub_ps(_mm512_fmadd_ps(x, _mm512_set1_ps(EXACT_EXPF_LOG2E), r), r);
    const __m512 b = _mm512_fnmadd_ps(n, _mm512_set1_ps(EXACT_EXPF_LN2_LO),
                                      _mm512_fnmadd_ps(n, _mm512_set1_ps(EXACT_EXPF_LN2_HI), x));
    const __m512 u = _mm512_mul_ps(b, b);
    const __m512 j = _mm512_fmadd_ps(
        _mm512_fmadd_ps(_mm512_fmadd_ps(_mm512_set1_ps(EXACT_EXPF_C5), b, _mm512_set1_ps(EXACT_EXPF_C4)), u,
                        _mm512_fmadd_ps(_mm512_set1_ps(EXACT_EXPF_C3), b, _mm512_set1_ps(EXACT_EXPF_C2))),
        u, _mm512_fmadd_ps(_mm512_set1_ps(EXACT_EXPF_C1), b, _mm512_set1_ps(1.0f)));
    // |n| > 192: 0 or infinity (a NaN n compares false and keeps scalef's NaN)
    const __mmask16 big = _mm512_cmp_ps_mask(_mm512_abs_ps(n), _mm512_set1_ps(192), _CMP_GT_OQ);
    const __mmask16 low = _mm512_cmp_ps_mask(n, _mm512_setzero_ps(), _CMP_LE_OQ);
    const __m512 alt = _mm512_mask_blend_ps(low, _mm512_set1_ps(INFINITY), _mm512_setzero_ps());
    return _mm512_mask_blend_ps(big, _mm512_scalef_ps(j, n), alt);
}

static void softmax(float *x, int t0, int t1, int n) {
    __m512 m16 = _mm512_set1_ps(-INFINITY);
    int t = t0;
    for (; t + 16 <= t1; t += 16) m16 = _mm512_max_ps(_mm512_loadu_ps(x + t), m16);  // NaN-blind, as x > max
    float max = _mm512_reduce_max_ps(m16);
    for (; t < t1; t++) max = x[t] > max ? x[t] : max;
    double sum = 0.0;
    const int n_vec = n & ~15;
    for (int c = t0 / 16 * 16; c < t1 && c < n_vec; c += 16) {
        // the block's positions in [t0, t1); the others are exp(-inf) = 0
        const int lo = t0 > c ? t0 - c : 0, hi = t1 - c < 16 ? t1 - c : 16;
        const __mmask16 in = (__mmask16)(((1u << hi) - 1) & ~((1u << lo) - 1));
        const __m512 e = _mm512_maskz_mov_ps(
            in, expf16(_mm512_sub_ps(_mm512_maskz_loadu_ps(in, x + c), _mm512_set1_ps(max))));
        _mm512_mask_storeu_ps(x + c, in, e);
        sum += (double)reduce16(e);
    }
    for (t = n_vec > t0 ? n_vec : t0; t < t1; t++) {
        x[t] = expf(x[t] - max);
        sum += (double)x[t];
    }
    const float scale = (float)(1.0 / sum);
    for (t = t0; t < t1; t++) x[t] *= scale;
}

void cpu_kernels_fill_avx512_attention(cpu_kernels *k) {
    k->softmax = softmax;
    k->values_group = values_group;
    f16_narrow = k->dot[GGML_TYPE_F16];
    k->dot[GGML_TYPE_F16] = dot_f16;
}
