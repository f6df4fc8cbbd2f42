// attention_avx512.c — attention's own kernels with AVX-512 (compiled with
// -mavx512f -mavx512bw -mavx512vl; reached only after a run-time feature
// check, through cpu_kernels_fill_avx512): the f16 scores of a group of
// queries against sixteen key rows at a time, and the values of a group of
// queries from one transposed tile of V rows. Each keeps llama.cpp's
// non-flash float order bit for bit (references in src/exact.c).
#include <stddef.h>
#include <string.h>

#include "cpu/kernels.h"
#include "cpu/simd_x86.h"

// ---------------------------------------------------------------------------
// F16 rows against f16 inputs (reference: exact_dot_f16 in src/exact.c,
// ggml's ggml_vec_dot_f16): accumulator j of the four holds elements
// 16j..16j+15 of every block of 64, one register here, and the leftovers
// past the blocks are products added one by one in double. Attention's
// scores (rows of 32-256) spend as much on the reduction of a row's four
// accumulators as on its products, and at a head of 32 all is leftovers, a
// chain of dependent double additions per row; so rows go sixteen at a time:
// their sums 0 += 2, 1 += 3, 0 += 1 folded across the lanes together by one
// transposing tree, and their leftovers' products transposed so that each
// row's double chain runs in its own lane -- each addition the reference's,
// in its order. Each block of rows serves up to 8 inputs from L1. Lengths
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

static void dot_f16(uint32_t type, const void *w, size_t row_bytes, int64_t n_rows, const void *act,
                    size_t act_stride, int n_act, int64_t n, float *out, int64_t ldo) {
    const int64_t whole = n_rows & ~(int64_t)15;  // rows in blocks of 16
    if (n % 16 || n > F16_HOISTED || !whole) {
        f16_narrow(type, w, row_bytes, n_rows, act, act_stride, n_act, n, out, ldo);
        return;
    }
    enum { INPUTS = 8 };  // inputs converted at once
    float y[INPUTS][F16_HOISTED];
    const uint8_t *base = w;
    const size_t used = (size_t)n * sizeof(seam_f16), step = row_bytes / sizeof(seam_f16);
    for (int j0 = 0; j0 < n_act; j0 += INPUTS) {
        const int nj = n_act - j0 < INPUTS ? n_act - j0 : INPUTS;
        for (int j = 0; j < nj; j++) {
            const seam_f16 *a = (const seam_f16 *)((const uint8_t *)act + (size_t)(j0 + j) * act_stride);
            for (int64_t i = 0; i < n; i += 16)
                _mm512_storeu_ps(y[j] + i, _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(a + i))));
        }
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
    if (whole < n_rows)
        f16_narrow(type, base + (size_t)whole * row_bytes, row_bytes, n_rows - whole, act, act_stride, n_act, n,
                   out + whole, ldo);
}

// ---------------------------------------------------------------------------
// Attention's value sums for a group of queries (reference: exact_attention_
// values_run and _end in src/exact.c, query by query): position t feeds lane
// t % 16 of accumulator (t / 16) % 4 of every output dimension, in order of
// t. Row by row (the AVX2 kernel) a register holds 8 dimensions of one lane,
// so each query's 64 lanes x head_dim pass through memory, and each query
// converts every row itself. Here the run's rows are turned around once for
// the group -- tile[d][k] is dimension d of position base + k, f16 -- so that
// 16 positions of one dimension are one register, exactly one accumulator's
// 16 lanes: each loaded block of values serves the group's queries (three
// at a time, two dimensions at a time), their four accumulators stay in
// registers over the whole run, and the 4 x 16 reduction runs in registers
// at the query's last position. A position outside a query's part is
// masked out of its fused multiply-adds, as the reference never adds it.
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

// Rows [c0, c1) (position t's at v + (t % ring) * stride) into the tile from
// base = c0 rounded down to 64, and around them, to the end of the last 64,
// the row of zeros `zero` (head_dim f16).
static void values_tile(seam_f16 *tile, const seam_f16 *zero, const seam_f16 *v, int c0, int c1, int head_dim,
                        int64_t stride, int ring) {
    const int base = c0 & ~63, end = (c1 + 63) & ~63;
    const int d16 = head_dim & ~15;
    for (int t8 = base; t8 < end; t8 += 8) {
        const int k = t8 - base;
        const seam_f16 *row[8];
        for (int r = 0; r < 8; r++) {
            const int t = t8 + r;
            row[r] = t >= c0 && t < c1 ? v + (int64_t)(t % ring) * stride : zero;
        }
        for (int d = 0; d < d16; d += 16) {
            __m256i a[8];
            for (int r = 0; r < 8; r++) a[r] = _mm256_loadu_si256((const __m256i *)(row[r] + d));
            transpose_8x16_f16(a);
            for (int c = 0; c < 8; c++) {
                _mm_storeu_si128((__m128i *)(tile + (size_t)(d + c) * VT_W + k), _mm256_castsi256_si128(a[c]));
                _mm_storeu_si128((__m128i *)(tile + (size_t)(d + 8 + c) * VT_W + k), _mm256_extracti128_si256(a[c], 1));
            }
        }
        for (int d = d16; d < head_dim; d++)
            for (int r = 0; r < 8; r++) tile[(size_t)d * VT_W + k + r] = row[r][d];
    }
}

// nq queries x nd dimensions from d: their accumulators in registers over
// the run's 64-position groups (masks[q][g]: the positions of group g in
// query q's part; all ones inside it, where the masked multiply-add is a
// plain one).
static inline __attribute__((always_inline)) void values_tile_queries(int nq, int nd, const cpu_values_query *const *qs,
                                                                      const float *const *p, const bool *fresh,
                                                                      const bool *last, const uint64_t masks[][VT_W / 64],
                                                                      int n_groups, const seam_f16 *tile, int d) {
    __m512 acc[3][2][4];
#pragma GCC unroll 24
    for (int q = 0; q < nq; q++)
        for (int e = 0; e < nd; e++)
            for (int j = 0; j < 4; j++)
                acc[q][e][j] = fresh[q] ? _mm512_setzero_ps() : _mm512_loadu_ps(qs[q]->acc + ((size_t)(d + e) * 4 + j) * 16);
    for (int g = 0; g < n_groups; g++) {
        uint64_t m[3];
#pragma GCC unroll 3
        for (int q = 0; q < nq; q++) m[q] = masks[q][g];
#pragma GCC unroll 4
        for (int j = 0; j < 4; j++) {
            const int k = 64 * g + 16 * j;
            __m512 x[2];
#pragma GCC unroll 2
            for (int e = 0; e < nd; e++)
                x[e] = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(tile + (size_t)(d + e) * VT_W + k)));
#pragma GCC unroll 3
            for (int q = 0; q < nq; q++) {
                const __m512 w = _mm512_loadu_ps(p[q] + k);
                const __mmask16 mj = (__mmask16)(m[q] >> (16 * j));
#pragma GCC unroll 2
                for (int e = 0; e < nd; e++) acc[q][e][j] = _mm512_mask3_fmadd_ps(x[e], w, acc[q][e][j], mj);
            }
        }
    }
#pragma GCC unroll 3
    for (int q = 0; q < nq; q++)
#pragma GCC unroll 2
        for (int e = 0; e < nd; e++) {
            if (last[q]) {  // 0 += 2, 1 += 3, 0 += 1, then across the lanes
                const __m512 a02 = _mm512_add_ps(acc[q][e][0], acc[q][e][2]);
                qs[q]->out[d + e] = reduce16(_mm512_add_ps(a02, _mm512_add_ps(acc[q][e][1], acc[q][e][3])));
            } else {
                for (int j = 0; j < 4; j++) _mm512_storeu_ps(qs[q]->acc + ((size_t)(d + e) * 4 + j) * 16, acc[q][e][j]);
            }
        }
}

static void values_group(const cpu_values_query *qs, int n, const seam_f16 *v, int c0, int c1, int head_dim,
                         int64_t stride, int ring, float *tile) {
    const int base = c0 & ~63, n_groups = (((c1 + 63) & ~63) - base) / 64;
    seam_f16 *vt = (seam_f16 *)tile, *zero = vt + (size_t)head_dim * VT_W;
    float *weights = tile + cpu_values_tile_floats(head_dim) - CPU_VALUES_GROUP * VT_W;
    memset(zero, 0, sizeof(seam_f16) * (size_t)head_dim);
    values_tile(vt, zero, v, c0, c1, head_dim, stride, ring);
    // the queries the run meets: their weights rounded to f16 (zero outside their part) and masks
    const cpu_values_query *act[CPU_VALUES_GROUP];
    const float *p[CPU_VALUES_GROUP];
    bool fresh[CPU_VALUES_GROUP], last[CPU_VALUES_GROUP];
    uint64_t masks[CPU_VALUES_GROUP][VT_W / 64];
    int na = 0;
    for (int i = 0; i < n; i++) {
        const int a = c0 > qs[i].t0 ? c0 : qs[i].t0, b = c1 < qs[i].t1 ? c1 : qs[i].t1;
        if (a >= b) continue;
        float *pa = weights + (size_t)na * VT_W;
        for (int g = 0; g < n_groups; g++) {
            const int lo = a - base - 64 * g, hi = b - base - 64 * g;  // the part, within group g
            const int l = lo < 0 ? 0 : lo > 64 ? 64 : lo, h = hi < 0 ? 0 : hi > 64 ? 64 : hi;
            masks[na][g] = l >= h ? 0 : (h == 64 ? ~0ull : (1ull << h) - 1) & ~((1ull << l) - 1);
            for (int j = 0; j < 4; j++) {
                const __mmask16 m = (__mmask16)(masks[na][g] >> (16 * j));
                const __m512 x = _mm512_maskz_loadu_ps(m, qs[i].w + base + 64 * g + 16 * j);
                _mm512_storeu_ps(pa + 64 * g + 16 * j,
                                 _mm512_cvtph_ps(_mm512_cvtps_ph(x, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC)));
            }
        }
        act[na] = &qs[i], p[na] = pa, fresh[na] = a == qs[i].t0, last[na] = b == qs[i].t1;
        na++;
    }
    // the queries three at a time, the dimensions two at a time
    for (int q0 = 0; q0 < na; q0 += 3) {
        const int nq = na - q0 < 3 ? na - q0 : 3;
        int d = 0;
#define TILE(NQ, ND) values_tile_queries(NQ, ND, act + q0, p + q0, fresh + q0, last + q0, masks + q0, n_groups, vt, d)
        for (; d + 2 <= head_dim; d += 2) {
            if (nq == 3) TILE(3, 2);
            else if (nq == 2) TILE(2, 2);
            else TILE(1, 2);
        }
        for (; d < head_dim; d++) {
            if (nq == 3) TILE(3, 1);
            else if (nq == 2) TILE(2, 1);
            else TILE(1, 1);
        }
#undef TILE
    }
}

void cpu_kernels_fill_avx512_attention(cpu_kernels *k) {
    k->values_group = values_group;
    f16_narrow = k->dot[GGML_TYPE_F16];
    k->dot[GGML_TYPE_F16] = dot_f16;
}
