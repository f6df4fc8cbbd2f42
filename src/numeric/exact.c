// exact.c — llama.cpp's float order for softmax, SiLU and f16 dot products.
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

float exact_expf(float x) {
    const float r = EXACT_EXPF_ROUND;
    const float z = fmaf(x, EXACT_EXPF_LOG2E, r);
    const float n = z - r;  // round(x / ln 2)
    const float b = fmaf(-n, EXACT_EXPF_LN2_LO, fmaf(-n, EXACT_EXPF_LN2_HI, x));
    const float u = b * b;
    const float j = fmaf(fmaf(fmaf(EXACT_EXPF_C5, b, EXACT_EXPF_C4), u, fmaf(EXACT_EXPF_C3, b, EXACT_EXPF_C2)), u,
                         fmaf(EXACT_EXPF_C1, b, 1.0f));
    if (isnan(n)) return n;  // NaN in, NaN out, as _mm512_scalef_ps gives ((int)NaN is undefined)
    if (fabsf(n) > 192) return n <= 0 ? 0.0f : INFINITY;  // the vector code's blend
    return ldexpf(j, (int)n);                               // _mm512_scalef_ps
}

float exact_reduce16(const float a[16]) {
    float t3[8], t6[4];
    for (int i = 0; i < 8; i++) t3[i] = a[8 + i] + a[i];
    for (int i = 0; i < 4; i++) t6[i] = t3[4 + i] + t3[i];
    return (t6[0] + t6[2]) + (t6[1] + t6[3]);
}

// The four 16-lane accumulators of ggml's F16 dot, folded as
// GGML_F32x16_REDUCE does: 0 += 2, 1 += 3, 0 += 1, then across the lanes.
static float reduce_4x16(float acc[4][16]) {
    for (int l = 0; l < 16; l++) {
        acc[0][l] = acc[0][l] + acc[2][l];
        acc[1][l] = acc[1][l] + acc[3][l];
    }
    for (int l = 0; l < 16; l++) acc[0][l] = acc[0][l] + acc[1][l];
    return exact_reduce16(acc[0]);
}

float exact_dot_f16(const seam_f16 *x, const seam_f16 *y, int n) {
    const int np = n & ~63;
    double sum = 0.0;
    if (np) {
        float acc[4][16] = {{0}};
        for (int i = 0; i < np; i += 64)
            for (int j = 0; j < 4; j++)
                for (int l = 0; l < 16; l++) {
                    const int k = i + 16 * j + l;
                    acc[j][l] = fmaf(seam_f16_to_f32(x[k]), seam_f16_to_f32(y[k]), acc[j][l]);
                }
        sum = reduce_4x16(acc);
    }
    for (int i = np; i < n; i++) sum += (double)(seam_f16_to_f32(x[i]) * seam_f16_to_f32(y[i]));
    return (float)sum;
}

float exact_dot_f32(const float *x, const float *y, int n) {
    const int np = n & ~63;
    float sum = 0.0f;
    if (np) {
        float acc[4][16] = {{0}};
        for (int i = 0; i < np; i += 64)
            for (int j = 0; j < 4; j++)
                for (int l = 0; l < 16; l++) acc[j][l] = fmaf(x[i + 16 * j + l], y[i + 16 * j + l], acc[j][l]);
        sum = reduce_4x16(acc);
    }
    for (int i = np; i < n; i++) sum = fmaf(x[i], y[i], sum);  // vec.cpp is C++: gcc contracts x*y + sum
    return sum;
}

void exact_softmax(float *x, int t0, int t1, int n) {
    float max = -INFINITY;
    for (int t = t0; t < t1; t++) max = x[t] > max ? x[t] : max;
    double sum = 0.0;
    const int n_vec = n & ~15;
    for (int c = t0 / 16 * 16; c < t1 && c < n_vec; c += 16) {
        float lane[16];
        for (int l = 0; l < 16; l++) {
            const int t = c + l;
            lane[l] = t >= t0 && t < t1 ? exact_expf(x[t] - max) : 0.0f;  // a masked position is exp(-inf) = 0
            if (t >= t0 && t < t1) x[t] = lane[l];
        }
        sum += (double)exact_reduce16(lane);
    }
    for (int t = n_vec > t0 ? n_vec : t0; t < t1; t++) {
        x[t] = expf(x[t] - max);
        sum += (double)x[t];
    }
    const float scale = (float)(1.0 / sum);
    for (int t = t0; t < t1; t++) x[t] *= scale;
}

void exact_attention_values_run(float *acc, const float *w, const seam_f16 *v, int c0, int c1, int t0, int head_dim,
                                int64_t stride, int ring) {
    // the positions form ggml's dot of length n_kv (a multiple of 64 in
    // llama.cpp's cache): position t feeds accumulator (t / 16) % 4, lane
    // t % 16, in order of t; masked positions add exact zeros
    float(*a)[4][16] = (float(*)[4][16])acc;  // (head_dim, 4, 16)
    if (c0 == t0) memset(a, 0, (size_t)head_dim * sizeof *a);
    for (int t = c0; t < c1; t++) {
        const float p = seam_f16_to_f32(seam_f32_to_f16(w[t]));
        const seam_f16 *row = v + (int64_t)(t % ring) * stride;
        const int j = (t / 16) % 4, l = t % 16;
        for (int d = 0; d < head_dim; d++) a[d][j][l] = fmaf(seam_f16_to_f32(row[d]), p, a[d][j][l]);
    }
}

void exact_attention_values_end(float *out, float *acc, int head_dim) {
    float(*a)[4][16] = (float(*)[4][16])acc;
    for (int d = 0; d < head_dim; d++) out[d] = (float)(double)reduce_4x16(a[d]);
}

void exact_attention_values(float *out, const float *w, const seam_f16 *v, int t0, int t1, int head_dim,
                            int64_t stride, int ring, float *scratch) {
    exact_attention_values_run(scratch, w, v, t0, t1, t0, head_dim, stride, ring);
    exact_attention_values_end(out, scratch, head_dim);
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

void exact_swiglu(float *gate, const float *up, int n) {
    int i = 0;
    for (; i + 15 < n; i += 16)
        for (int l = i; l < i + 16; l++) gate[l] = gate[l] / (1.0f + exact_expf(0.0f - gate[l])) * up[l];
    for (; i < n; i++) gate[i] = gate[i] / (1.0f + expf(-gate[i])) * up[i];
}
