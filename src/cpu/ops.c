// ops.c — CPU operations: the threaded matvec over the kernels of
// cpu/kernels.h, and the small per-token ops in scalar C.
#include "cpu/ops.h"

#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <string.h>

#include "cpu/kernels.h"

#if defined(__x86_64__) && defined(__GNUC__)
#include <cpuid.h>
#endif

uint64_t cpu_matvec_scratch_bytes(int64_t cols) {
    // The largest activation format per element is f32.
    return (uint64_t)cols * sizeof(float) + 64;
}

// ---------------------------------------------------------------- kernels

// The reference of the AVX2 axpy_f16: one float product, one double add.
static void axpy_f16_ref(double *acc, float a, const seam_f16 *x, int n) {
    for (int i = 0; i < n; i++) acc[i] += (double)(a * seam_f16_to_f32(x[i]));
}

static cpu_kernels scalar_kernels, best_kernels;
static pthread_once_t kernels_once = PTHREAD_ONCE_INIT;

static void kernels_init(void) {
    scalar_kernels.name = "scalar";
    for (int t = 0; t < GGML_TYPE_COUNT; t++) scalar_kernels.dot[t] = seam_vec_dot;
    scalar_kernels.axpy_f16 = axpy_f16_ref;
    best_kernels = scalar_kernels;
#if defined(__x86_64__) && defined(__GNUC__)
    // F16C is read from cpuid: clang before 16 has no "f16c" for __builtin_cpu_supports.
    unsigned eax, ebx, ecx, edx;
    const bool f16c = __get_cpuid(1, &eax, &ebx, &ecx, &edx) && (ecx & bit_F16C);
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && f16c)
        cpu_kernels_fill_avx2(&best_kernels);
#endif
}

const cpu_kernels *cpu_kernels_get(void) {
    pthread_once(&kernels_once, kernels_init);
    return &best_kernels;
}

const cpu_kernels *cpu_kernels_scalar(void) {
    pthread_once(&kernels_once, kernels_init);
    return &scalar_kernels;
}

// ---------------------------------------------------------------- matvec

// One matvec as a pool job. Rows go out in contiguous chunks (long runs for
// the hardware prefetcher): thread i starts on chunk i, then each takes the
// next free chunk, so a thread the OS delays (the cores are shared) hands
// its remaining rows to the others instead of stalling the whole token.
typedef struct {
    cpu_dot_fn dot;
    uint32_t type;
    const uint8_t *w;  // (n_rows, row_bytes)
    uint64_t row_bytes;
    int64_t n_rows, cols, chunk_rows;
    const void *act;   // x quantised
    float *out;        // (n_rows)
    _Atomic int64_t next_chunk;
} matvec_job;

static void matvec_share(void *ctx, int ith, int nth) {
    matvec_job *j = ctx;
    const int64_t n_chunks = (j->n_rows + j->chunk_rows - 1) / j->chunk_rows;
    for (int64_t c = ith; c < n_chunks; c = atomic_fetch_add(&j->next_chunk, 1)) {
        const int64_t r1 = (c + 1) * j->chunk_rows < j->n_rows ? (c + 1) * j->chunk_rows : j->n_rows;
        for (int64_t r = c * j->chunk_rows; r < r1; r++)
            j->out[r] = j->dot(j->type, j->w + (uint64_t)r * j->row_bytes, j->act, j->cols);
    }
}

void cpu_matvec(seam_pool *pool, const seam_tensor *w, const float *x, float *out, void *scratch) {
    seam_quantize_activation(seam_vec_dot_type(w->type), x, scratch, w->cols);
    // Chunks of ~64 KiB (a few microseconds of reading: the atomic that hands
    // one out is noise), but at least four per thread for the balancing.
    const int nth = pool_size(pool);
    int64_t chunk_rows = (int64_t)((64u << 10) / (w->row_bytes ? w->row_bytes : 1));
    if (chunk_rows > w->rows / (4 * nth)) chunk_rows = w->rows / (4 * nth);
    if (chunk_rows < 1) chunk_rows = 1;
    matvec_job job = {
        .dot = cpu_kernels_get()->dot[w->type], .type = w->type, .w = w->data, .row_bytes = w->row_bytes,
        .n_rows = w->rows, .cols = w->cols, .chunk_rows = chunk_rows, .act = scratch, .out = out,
        .next_chunk = nth,
    };
    pool_run(pool, matvec_share, &job);
}

void cpu_rmsnorm(float *out, const float *x, const float *weight, int n, float eps) {
    double sum = 0.0;
    for (int i = 0; i < n; i++) sum += (double)(x[i] * x[i]);
    const float mean = (float)(sum / n);
    const float scale = 1.0f / sqrtf(mean + eps);
    for (int i = 0; i < n; i++) out[i] = (x[i] * scale) * weight[i];
}

void cpu_rope(float *vec, int n_heads, int head_dim, int rope_dim, int pos, float base, float freq_scale,
              bool neox) {
    const float theta_scale = powf(base, -2.0f / (float)rope_dim);
    float cos_t[rope_dim / 2], sin_t[rope_dim / 2];
    float theta = (float)pos;
    for (int i = 0; i < rope_dim / 2; i++) {
        cos_t[i] = cosf(freq_scale * theta);
        sin_t[i] = sinf(freq_scale * theta);
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

void cpu_attention_head(float *out, const float *q, const seam_f16 *k_cache, const seam_f16 *v_cache, int t0,
                        int t1, int head_dim, int64_t stride, float scale, float *att) {
    const int n_pos = t1 - t0;
    k_cache += (int64_t)t0 * stride;
    v_cache += (int64_t)t0 * stride;
    const cpu_kernels *kern = cpu_kernels_get();
    // scores: q as f16 . each key, the F16 dot (float products, double sum)
    seam_f16 q16[head_dim];
    for (int d = 0; d < head_dim; d++) q16[d] = seam_f32_to_f16(q[d]);
    for (int t = 0; t < n_pos; t++)
        att[t] = kern->dot[GGML_TYPE_F16](GGML_TYPE_F16, k_cache + (int64_t)t * stride, q16, head_dim) * scale;
    cpu_softmax(att, n_pos);
    // out[d] = sum over t of f16(att[t]) * V[t][d], each d summed in double in t order
    double acc[head_dim];
    memset(acc, 0, sizeof acc);
    for (int t = 0; t < n_pos; t++)
        kern->axpy_f16(acc, seam_f16_to_f32(seam_f32_to_f16(att[t])), v_cache + (int64_t)t * stride, head_dim);
    for (int d = 0; d < head_dim; d++) out[d] = (float)acc[d];
}

void cpu_swiglu(float *gate, const float *up, int n) {
    for (int i = 0; i < n; i++) {
        const float g = gate[i];
        gate[i] = g / (1.0f + expf(-g)) * up[i];
    }
}

// GELU(tanh) of every f16 value, built once: ggml's table.
static seam_f16 gelu_table[1 << 16];
static pthread_once_t gelu_once = PTHREAD_ONCE_INIT;

static void gelu_table_init(void) {
    const float sqrt_2_over_pi = 0.79788456080286535587989211986876f, coef_a = 0.044715f;
    for (int i = 0; i < 1 << 16; i++) {
        const float x = seam_f16_to_f32((seam_f16)i);
        gelu_table[i] = seam_f32_to_f16(0.5f * x * (1.0f + tanhf(sqrt_2_over_pi * x * (1.0f + coef_a * x * x))));
    }
}

void cpu_geglu(float *gate, const float *up, int n) {
    pthread_once(&gelu_once, gelu_table_init);
    for (int i = 0; i < n; i++) {
        const float g = gate[i];
        if (g <= -10.0f) gate[i] = 0.0f;
        else if (g >= 10.0f) gate[i] = g * up[i];
        else gate[i] = seam_f16_to_f32(gelu_table[seam_f32_to_f16(g)]) * up[i];
    }
}

void cpu_scale(float *x, float s, int n) {
    for (int i = 0; i < n; i++) x[i] *= s;
}

void cpu_top_k(const float *x, int n, int k, int *out) {
    for (int j = 0; j < k; j++) {
        int best = -1;
        for (int i = 0; i < n; i++) {
            bool taken = false;
            for (int t = 0; t < j && !taken; t++) taken = out[t] == i;
            if (!taken && (best < 0 || x[i] > x[best])) best = i;
        }
        out[j] = best;
    }
}
