// exact.c — llama.cpp's float orders for softmax, SiLU and float dot products.
//
// Plain C with explicit lanes and fmaf: the lanes are what fixes the order of
// the sums, and fmaf is the single rounding of the vector FMAs. This file is
// compiled without FMA contraction (ISO C mode), so every other product and
// sum rounds on its own, as in the vector code.
#include "numeric/exact.h"

#include <math.h>
#include <string.h>

#include "format/gguf.h"

#if defined(__clang__)
#pragma STDC FP_CONTRACT OFF
#endif

const char *const exact_order_names[EXACT_ORDERS] = {"avx2", "avx512"};

static float float_of_bits(uint32_t u) {
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

static uint32_t bits_of_float(float f) {
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

float exact_expf(exact_order o, float x) {
    const float r = EXACT_EXPF_ROUND;
    const float z = fmaf(x, EXACT_EXPF_LOG2E, r);
    const float n = z - r;  // round(x / ln 2)
    const float b = fmaf(-n, EXACT_EXPF_LN2_LO, fmaf(-n, EXACT_EXPF_LN2_HI, x));
    const float u = b * b;
    const float p = fmaf(fmaf(EXACT_EXPF_C5, b, EXACT_EXPF_C4), u, fmaf(EXACT_EXPF_C3, b, EXACT_EXPF_C2));
    if (o == EXACT_ORDER_AVX512) {
        const float j = fmaf(p, u, fmaf(EXACT_EXPF_C1, b, 1.0f));
        if (isnan(n)) return n;  // NaN in, NaN out, as _mm512_scalef_ps gives ((int)NaN is undefined)
        if (fabsf(n) > 192) return n <= 0 ? 0.0f : INFINITY;  // the vector code's blend
        return ldexpf(j, (int)n);                               // _mm512_scalef_ps
    }
    // AVX2: k = 2^n from z's low bits moved into the exponent field
    const float j = fmaf(p, u, EXACT_EXPF_C1 * b);
    const uint32_t e = bits_of_float(z) << 23;
    const float k = float_of_bits(e + bits_of_float(1.0f));
    if (!(fabsf(n) > 126)) return fmaf(j, k, k);  // NaN too
    const uint32_t g = n <= 0 ? 0x82000000u : 0;
    const float s1 = float_of_bits(g + 0x7f000000u), s2 = float_of_bits(e - g);
    if (fabsf(n) > 192) return s1 * s1;
    return fmaf(s2, j, s2) * s1;
}

float exact_reduce8(const float a[8]) {
    float t[4];
    for (int i = 0; i < 4; i++) t[i] = a[4 + i] + a[i];
    return (t[0] + t[2]) + (t[1] + t[3]);
}

float exact_reduce8_hadd(const float a[8]) {
    float t[4];
    for (int i = 0; i < 4; i++) t[i] = a[i] + a[4 + i];
    return (t[0] + t[1]) + (t[2] + t[3]);
}

float exact_reduce16(const float a[16]) {
    float t3[8];
    for (int i = 0; i < 8; i++) t3[i] = a[8 + i] + a[i];
    return exact_reduce8(t3);  // quarters, then pairs, as the AVX2 softmax's
}

// The four accumulators of ggml's float dots (lanes of the build each),
// folded as GGML_F32x16_REDUCE and GGML_F32x8_REDUCE do: 0 += 2, 1 += 3,
// 0 += 1, then across the lanes.
static float reduce_4(exact_order o, float acc[4][16]) {
    for (int l = 0; l < exact_lanes(o); l++) {
        acc[0][l] = acc[0][l] + acc[2][l];
        acc[1][l] = acc[1][l] + acc[3][l];
    }
    for (int l = 0; l < exact_lanes(o); l++) acc[0][l] = acc[0][l] + acc[1][l];
    return o == EXACT_ORDER_AVX512 ? exact_reduce16(acc[0]) : exact_reduce8_hadd(acc[0]);
}

float exact_dot_f16(exact_order o, const seam_f16 *x, const seam_f16 *y, int n) {
    const int lanes = exact_lanes(o), step = 4 * lanes, np = n - n % step;
    double sum = 0.0;
    if (np) {
        float acc[4][16] = {{0}};
        for (int i = 0; i < np; i += step)
            for (int j = 0; j < 4; j++)
                for (int l = 0; l < lanes; l++) {
                    const int k = i + lanes * j + l;
                    acc[j][l] = fmaf(seam_f16_to_f32(x[k]), seam_f16_to_f32(y[k]), acc[j][l]);
                }
        sum = reduce_4(o, acc);
    }
    for (int i = np; i < n; i++) sum += (double)(seam_f16_to_f32(x[i]) * seam_f16_to_f32(y[i]));
    return (float)sum;
}

float exact_dot_f32(exact_order o, const float *x, const float *y, int n) {
    const int lanes = exact_lanes(o), step = 4 * lanes, np = n - n % step;
    float sum = 0.0f;
    if (np) {
        float acc[4][16] = {{0}};
        for (int i = 0; i < np; i += step)
            for (int j = 0; j < 4; j++)
                for (int l = 0; l < lanes; l++)
                    acc[j][l] = fmaf(x[i + lanes * j + l], y[i + lanes * j + l], acc[j][l]);
        sum = reduce_4(o, acc);
    }
    for (int i = np; i < n; i++) sum = fmaf(x[i], y[i], sum);  // vec.cpp is C++: gcc contracts x*y + sum
    return sum;
}

void exact_softmax(exact_order o, float *x, int t0, int t1, int n) {
    const int lanes = exact_lanes(o);
    float max = -INFINITY;
    for (int t = t0; t < t1; t++) max = x[t] > max ? x[t] : max;
    double sum = 0.0;
    const int n_vec = n - n % lanes;
    for (int c = t0 / lanes * lanes; c < t1 && c < n_vec; c += lanes) {
        float lane[16];
        for (int l = 0; l < lanes; l++) {
            const int t = c + l;
            lane[l] = t >= t0 && t < t1 ? exact_expf(o, x[t] - max) : 0.0f;  // a masked position is exp(-inf) = 0
            if (t >= t0 && t < t1) x[t] = lane[l];
        }
        sum += (double)(o == EXACT_ORDER_AVX512 ? exact_reduce16(lane) : exact_reduce8(lane));
    }
    for (int t = n_vec > t0 ? n_vec : t0; t < t1; t++) {
        x[t] = expf(x[t] - max);
        sum += (double)x[t];
    }
    const float scale = (float)(1.0 / sum);
    for (int t = t0; t < t1; t++) x[t] *= scale;
}

void exact_attention_values_run(exact_order o, float *acc, const float *w, const seam_f16 *v, int c0, int c1, int t0,
                                int head_dim, int64_t stride, int ring) {
    // the positions form ggml's dot of length n_kv (a multiple of 256 in
    // llama.cpp's cache): position t feeds accumulator (t / lanes) % 4, lane
    // t % lanes, in order of t; masked positions add exact zeros
    const int lanes = exact_lanes(o);
    float(*a)[4][16] = (float(*)[4][16])acc;  // (head_dim, 4, 16), lanes of 16 used
    if (c0 == t0) memset(a, 0, (size_t)head_dim * sizeof *a);
    for (int t = c0; t < c1; t++) {
        const float p = seam_f16_to_f32(seam_f32_to_f16(w[t]));
        const seam_f16 *row = v + (int64_t)(t % ring) * stride;
        const int j = (t / lanes) % 4, l = t % lanes;
        for (int d = 0; d < head_dim; d++) a[d][j][l] = fmaf(seam_f16_to_f32(row[d]), p, a[d][j][l]);
    }
}

void exact_attention_values_end(exact_order o, float *out, float *acc, int head_dim) {
    float(*a)[4][16] = (float(*)[4][16])acc;
    for (int d = 0; d < head_dim; d++) out[d] = (float)(double)reduce_4(o, a[d]);
}

void exact_attention_values(exact_order o, float *out, const float *w, const seam_f16 *v, int t0, int t1,
                            int head_dim, int64_t stride, int ring, float *scratch) {
    exact_attention_values_run(o, scratch, w, v, t0, t1, t0, head_dim, stride, ring);
    exact_attention_values_end(o, out, scratch, head_dim);
}

void exact_attention_flash_run(float *state, const float *s, const void *v, uint32_t v_type, size_t v_row, int ring,
                               int c0, int c1, int t0, int head_dim) {
    const bool f16 = v_type == GGML_TYPE_F16;
    float *acc = state + 2;                              // (head_dim) VKQ in f32
    seam_f16 *acc16 = (seam_f16 *)(state + 2 + head_dim);  // (head_dim) VKQ in f16, over an f16 V
    if (c0 == t0) {
        state[0] = -INFINITY, state[1] = 0.0f;
        for (int d = 0; d < head_dim; d++) acc[d] = 0.0f, acc16[d] = 0;
    }
    float M = state[0], S = state[1];
    for (int t = c0; t < c1; t++) {
        const uint8_t *row = (const uint8_t *)v + (size_t)(t % ring) * v_row;
        float ms = 1.0f, vs = 1.0f;
        if (s[t] > M) {
            const float m_old = M;
            M = s[t];
            ms = expf(m_old - M);
            for (int d = 0; d < head_dim; d++) {
                if (f16) acc16[d] = seam_f32_to_f16(seam_f16_to_f32(acc16[d]) * ms);
                else acc[d] = acc[d] * ms;
            }
        } else {
            vs = expf(s[t] - M);
        }
        if (f16) {
            const seam_f16 *x = (const seam_f16 *)row;
            for (int d = 0; d < head_dim; d++)
                acc16[d] = seam_f32_to_f16(fmaf(seam_f16_to_f32(x[d]), vs, seam_f16_to_f32(acc16[d])));
        } else {  // q8_0 (plan_kv_check admits no other type)
            const block_q8_0 *x = (const block_q8_0 *)row;
            for (int b = 0; b < head_dim / QK8_0; b++) {
                const float d = seam_f16_to_f32(x[b].d);
                for (int j = 0; j < QK8_0; j++) {
                    const float value = (float)x[b].qs[j] * d;  // dequantize_row_q8_0's value, rounded
                    acc[b * QK8_0 + j] = fmaf(value, vs, acc[b * QK8_0 + j]);
                }
            }
        }
        S = fmaf(S, ms, vs);
    }
    state[0] = M, state[1] = S;
}

void exact_attention_flash_end(float *out, float *state, uint32_t v_type, int head_dim) {
    float *acc = state + 2;
    const seam_f16 *acc16 = (const seam_f16 *)(state + 2 + head_dim);
    if (v_type == GGML_TYPE_F16)
        for (int d = 0; d < head_dim; d++) acc[d] = seam_f16_to_f32(acc16[d]);
    const float s_inv = state[1] == 0.0f ? 0.0f : 1.0f / state[1];
    for (int d = 0; d < head_dim; d++) out[d] = acc[d] * s_inv;
}

void exact_swiglu(exact_order o, float *gate, const float *up, int n) {
    const int lanes = exact_lanes(o);
    int i = 0;
    for (; i + lanes <= n; i += lanes)
        for (int l = i; l < i + lanes; l++) gate[l] = gate[l] / (1.0f + exact_expf(o, 0.0f - gate[l])) * up[l];
    for (; i < n; i++) gate[i] = gate[i] / (1.0f + expf(-gate[i])) * up[i];
}
