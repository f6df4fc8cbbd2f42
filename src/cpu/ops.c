// ops.c — scalar CPU operations.
#include "cpu/ops.h"

#include <math.h>
#include <string.h>

uint64_t cpu_matvec_scratch_bytes(int64_t cols) {
    // The largest activation format per element is f32.
    return (uint64_t)cols * sizeof(float) + 64;
}

void cpu_matvec(const seam_tensor *w, const float *x, float *out, void *scratch) {
    const uint32_t act_type = seam_vec_dot_type(w->type);
    seam_quantize_activation(act_type, x, scratch, w->cols);
    const uint8_t *row = w->data;
    for (int64_t r = 0; r < w->rows; r++, row += w->row_bytes) {
        out[r] = seam_vec_dot(w->type, row, scratch, w->cols);
    }
}

void cpu_rmsnorm(float *out, const float *x, const float *weight, int n, float eps) {
    double sum = 0.0;
    for (int i = 0; i < n; i++) sum += (double)(x[i] * x[i]);
    const float mean = (float)(sum / n);
    const float scale = 1.0f / sqrtf(mean + eps);
    for (int i = 0; i < n; i++) out[i] = (x[i] * scale) * weight[i];
}

void cpu_rope(float *vec, int n_heads, int head_dim, int rope_dim, int pos, float base, bool neox) {
    const float theta_scale = powf(base, -2.0f / (float)rope_dim);
    float cos_t[rope_dim / 2], sin_t[rope_dim / 2];
    float theta = (float)pos;
    for (int i = 0; i < rope_dim / 2; i++) {
        cos_t[i] = cosf(theta);
        sin_t[i] = sinf(theta);
        theta *= theta_scale;
    }
    const int half = rope_dim / 2;
    for (int h = 0; h < n_heads; h++) {
        float *v = vec + (int64_t)h * head_dim;
        for (int i = 0; i < half; i++) {
            const int a = neox ? i : 2 * i;
            const int b = neox ? i + half : 2 * i + 1;
            const float x0 = v[a], x1 = v[b];
            v[a] = x0 * cos_t[i] - x1 * sin_t[i];
            v[b] = x0 * sin_t[i] + x1 * cos_t[i];
        }
    }
}

void cpu_softmax(float *x, int n) {
    float max = -INFINITY;
    for (int i = 0; i < n; i++) max = x[i] > max ? x[i] : max;
    double sum = 0.0;
    for (int i = 0; i < n; i++) {
        x[i] = expf(x[i] - max);
        sum += x[i];
    }
    const float inv = (float)(1.0 / sum);
    for (int i = 0; i < n; i++) x[i] *= inv;
}

void cpu_attention_head(float *out, const float *q, const seam_f16 *k_cache, const seam_f16 *v_cache,
                        int n_pos, int head_dim, int64_t stride, float scale, float *att) {
    float q16[head_dim];
    for (int d = 0; d < head_dim; d++) q16[d] = seam_f16_to_f32(seam_f32_to_f16(q[d]));
    for (int t = 0; t < n_pos; t++) {
        const seam_f16 *k = k_cache + (int64_t)t * stride;
        double dot = 0.0;
        for (int d = 0; d < head_dim; d++) dot += (double)(q16[d] * seam_f16_to_f32(k[d]));
        att[t] = (float)dot * scale;
    }
    cpu_softmax(att, n_pos);
    for (int t = 0; t < n_pos; t++) att[t] = seam_f16_to_f32(seam_f32_to_f16(att[t]));
    for (int d = 0; d < head_dim; d++) {
        double acc = 0.0;
        for (int t = 0; t < n_pos; t++)
            acc += (double)(att[t] * seam_f16_to_f32(v_cache[(int64_t)t * stride + d]));
        out[d] = (float)acc;
    }
}

void cpu_swiglu(float *gate, const float *up, int n) {
    for (int i = 0; i < n; i++) {
        const float g = gate[i];
        gate[i] = g / (1.0f + expf(-g)) * up[i];
    }
}
