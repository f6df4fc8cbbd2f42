// test_cpu_kernels.c — the CPU backend's fast paths against their scalar
// references: every dot kernel on random blocks of several row lengths, the
// attention axpy, the threaded matvec on pools of 1..4 threads, and the pool
// itself.
//
// Tolerances: the quantised dots and the axpy keep the reference's integer
// sums and its float expressions in its order, so they must be bitwise equal.
// The F32/F16 dots sum in four double lanes instead of one: equal to the
// reference within 1e-15 of the sum of |products| (double rounding) plus half
// a float ulp of the result (where that double rounding tips the conversion
// to float), far inside the 1e-6 the golden logits need.
#include <criterion/criterion.h>
#include <math.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cpu/kernels.h"
#include "cpu/ops.h"
#include "cpu/pool.h"
#include "helpers.h"
#include "quant.h"

static uint32_t bits_of(float f) {
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

// A finite f16 scale of random sign and magnitude around 2^-8..2^0.
static seam_f16 random_scale(uint64_t *rng) {
    return seam_f32_to_f16(ldexpf(test_rng_uniform(rng), -(int)(test_rng_next(rng) % 8)));
}

static void set_f16(void *p, seam_f16 h) {
    memcpy(p, &h, sizeof h);
}

// n weights of `type` as random bytes, with every f16 scale made finite: the
// quants and packed sub-block scales take every bit pattern, including the
// extremes a quantiser rarely writes.
static void *random_weights(uint32_t type, int64_t n, uint64_t *rng) {
    const uint64_t bytes = ggml_row_bytes(type, (uint64_t)n);
    uint8_t *w = malloc(bytes);
    for (uint64_t i = 0; i < bytes; i++) w[i] = (uint8_t)test_rng_next(rng);
    switch (type) {
    case GGML_TYPE_F32:
        for (int64_t i = 0; i < n; i++) ((float *)w)[i] = test_rng_normal(rng);
        break;
    case GGML_TYPE_F16:
        for (int64_t i = 0; i < n; i++) ((seam_f16 *)w)[i] = seam_f32_to_f16(test_rng_normal(rng));
        break;
    case GGML_TYPE_BF16:
        for (int64_t i = 0; i < n; i++) ((seam_bf16 *)w)[i] = seam_f32_to_bf16(test_rng_normal(rng));
        break;
    case GGML_TYPE_Q4_0:
        for (int64_t b = 0; b < n / QK8_0; b++) set_f16(&((block_q4_0 *)w)[b].d, random_scale(rng));
        break;
    case GGML_TYPE_Q5_0:
        for (int64_t b = 0; b < n / QK8_0; b++) set_f16(&((block_q5_0 *)w)[b].d, random_scale(rng));
        break;
    case GGML_TYPE_Q8_0:
        for (int64_t b = 0; b < n / QK8_0; b++) set_f16(&((block_q8_0 *)w)[b].d, random_scale(rng));
        break;
    case GGML_TYPE_Q4_K:
        for (int64_t b = 0; b < n / QK_K; b++) {
            set_f16(&((block_q4_K *)w)[b].d, random_scale(rng));
            set_f16(&((block_q4_K *)w)[b].dmin, random_scale(rng));
        }
        break;
    case GGML_TYPE_Q5_K:
        for (int64_t b = 0; b < n / QK_K; b++) {
            set_f16(&((block_q5_K *)w)[b].d, random_scale(rng));
            set_f16(&((block_q5_K *)w)[b].dmin, random_scale(rng));
        }
        break;
    case GGML_TYPE_Q6_K:
        for (int64_t b = 0; b < n / QK_K; b++) set_f16(&((block_q6_K *)w)[b].d, random_scale(rng));
        break;
    }
    return w;
}

// n activations in `act_type`: float rows quantised by the reference, or,
// for Q8_K, raw random quants (every int8 including -128, the bsums kept
// consistent) so that the kernels see the extremes of the int16 sums.
static void *random_activations(uint32_t act_type, int64_t n, uint64_t *rng) {
    void *a = malloc(ggml_row_bytes(act_type, (uint64_t)n));
    if (act_type == GGML_TYPE_Q8_K) {
        block_q8_K *y = a;
        for (int64_t b = 0; b < n / QK_K; b++) {
            y[b].d = ldexpf(test_rng_uniform(rng), -6);
            for (int j = 0; j < QK_K; j++) y[b].qs[j] = (int8_t)test_rng_next(rng);
            for (int g = 0; g < QK_K / 16; g++) {
                int sum = 0;
                for (int l = 0; l < 16; l++) sum += y[b].qs[16 * g + l];
                y[b].bsums[g] = (int16_t)sum;
            }
        }
        return a;
    }
    float *x = malloc((size_t)n * sizeof *x);
    for (int64_t i = 0; i < n; i++) x[i] = test_rng_normal(rng);
    seam_quantize_activation(act_type, x, a, n);
    free(x);
    return a;
}

static bool is_float_type(uint32_t type) {
    return type == GGML_TYPE_F32 || type == GGML_TYPE_F16 || type == GGML_TYPE_BF16;
}

// Sum of |w_i a_i|, the scale of the float dots' rounding.
static double abs_dot(uint32_t type, const void *w, const void *a, int64_t n) {
    float *wf = malloc((size_t)n * sizeof *wf), *af = malloc((size_t)n * sizeof *af);
    seam_dequantize_row(type, w, wf, n);
    seam_dequantize_row(type, a, af, n);
    double s = 0;
    for (int64_t i = 0; i < n; i++) s += fabs((double)wf[i] * af[i]);
    free(wf), free(af);
    return s;
}

static void check_dot(uint32_t type, int64_t n, uint64_t *rng) {
    const cpu_kernels *fast = cpu_kernels_get(), *ref = cpu_kernels_scalar();
    void *w = random_weights(type, n, rng);
    void *a = random_activations(seam_vec_dot_type(type), n, rng);
    const float got = fast->dot[type](type, w, a, n), want = ref->dot[type](type, w, a, n);
    cr_assert(want == seam_vec_dot(type, w, a, n), "the scalar set is seam_vec_dot");
    if (is_float_type(type)) {
        const double tol = 1e-15 * abs_dot(type, w, a, n) + 0.5 * (nextafterf(fabsf(want), INFINITY) - fabsf(want));
        cr_assert(fabs((double)got - want) <= tol, "%s (%s) n=%ld: %.9g vs reference %.9g (tolerance %.3g)",
                  ggml_type_name(type), fast->name, (long)n, got, want, tol);
    } else {
        cr_assert(bits_of(got) == bits_of(want), "%s (%s) n=%ld: %.9g vs reference %.9g, not bitwise equal",
                  ggml_type_name(type), fast->name, (long)n, got, want);
    }
    free(w), free(a);
}

Test(kernels, k_types_bitwise) {
    static const uint32_t types[] = {GGML_TYPE_Q4_K, GGML_TYPE_Q5_K, GGML_TYPE_Q6_K};
    static const int64_t lengths[] = {256, 512, 768, 1024, 2048, 3072, 4096 + 256};
    uint64_t rng = 1;
    for (size_t t = 0; t < sizeof types / sizeof types[0]; t++)
        for (size_t l = 0; l < sizeof lengths / sizeof lengths[0]; l++)
            for (int rep = 0; rep < 20; rep++) check_dot(types[t], lengths[l], &rng);
}

Test(kernels, wide32_types_bitwise) {
    // 1..3 blocks exercise the tail alone; 5, 20 and 35 the four-block loop and its tail
    static const uint32_t types[] = {GGML_TYPE_Q4_0, GGML_TYPE_Q5_0, GGML_TYPE_Q8_0};
    static const int64_t lengths[] = {32, 64, 96, 160, 640, 1024, 1120};
    uint64_t rng = 2;
    for (size_t t = 0; t < sizeof types / sizeof types[0]; t++)
        for (size_t l = 0; l < sizeof lengths / sizeof lengths[0]; l++)
            for (int rep = 0; rep < 20; rep++) check_dot(types[t], lengths[l], &rng);
}

Test(kernels, float_types_within_tolerance) {
    static const uint32_t types[] = {GGML_TYPE_F32, GGML_TYPE_F16, GGML_TYPE_BF16};
    static const int64_t lengths[] = {1, 7, 8, 13, 64, 100, 128, 256, 1000, 4096};
    uint64_t rng = 3;
    for (size_t t = 0; t < sizeof types / sizeof types[0]; t++)
        for (size_t l = 0; l < sizeof lengths / sizeof lengths[0]; l++)
            for (int rep = 0; rep < 20; rep++) check_dot(types[t], lengths[l], &rng);
}

Test(kernels, axpy_f16_bitwise) {
    const cpu_kernels *fast = cpu_kernels_get(), *ref = cpu_kernels_scalar();
    uint64_t rng = 4;
    for (int n = 1; n <= 264; n += 7) {
        seam_f16 x[264];
        double acc_fast[264], acc_ref[264];
        for (int i = 0; i < n; i++) {
            x[i] = seam_f32_to_f16(test_rng_normal(&rng));
            acc_fast[i] = acc_ref[i] = test_rng_normal(&rng);
        }
        for (int rep = 0; rep < 4; rep++) {
            const float a = seam_f16_to_f32(seam_f32_to_f16(test_rng_uniform(&rng)));
            fast->axpy_f16(acc_fast, a, x, n);
            ref->axpy_f16(acc_ref, a, x, n);
        }
        cr_assert(memcmp(acc_fast, acc_ref, (size_t)n * sizeof(double)) == 0, "axpy_f16 (%s) n=%d differs",
                  fast->name, n);
    }
}

// cpu_attention_head against the formula written out in scalar C: scores as
// double sums of f16(q) * k, softmax, f16 weights, double sums over V.
Test(kernels, attention_head) {
    enum { head_dim = 128, n_pos = 77, stride = 2 * head_dim };
    uint64_t rng = 5;
    seam_f16 *k = malloc(sizeof(seam_f16) * n_pos * stride), *v = malloc(sizeof(seam_f16) * n_pos * stride);
    for (int i = 0; i < n_pos * stride; i++) {
        k[i] = seam_f32_to_f16(test_rng_normal(&rng));
        v[i] = seam_f32_to_f16(test_rng_normal(&rng));
    }
    float q[head_dim], out[head_dim], att[n_pos], want_att[n_pos];
    for (int d = 0; d < head_dim; d++) q[d] = test_rng_normal(&rng);
    const float scale = 1.0f / sqrtf((float)head_dim);
    const int t0 = 5;
    cpu_attention_head(out, q, k, v, t0, n_pos, head_dim, stride, scale, att);

    for (int t = t0; t < n_pos; t++) {
        double dot = 0;
        for (int d = 0; d < head_dim; d++)
            dot += (double)(seam_f16_to_f32(seam_f32_to_f16(q[d])) * seam_f16_to_f32(k[t * stride + d]));
        want_att[t - t0] = (float)dot * scale;
    }
    cpu_softmax(want_att, n_pos - t0);
    for (int d = 0; d < head_dim; d++) {
        double acc = 0;
        for (int t = t0; t < n_pos; t++)
            acc += (double)(seam_f16_to_f32(seam_f32_to_f16(want_att[t - t0])) * seam_f16_to_f32(v[t * stride + d]));
        const float want = (float)acc;
        cr_assert(fabsf(out[d] - want) <= 0.5f * (nextafterf(fabsf(want), INFINITY) - fabsf(want)),
                  "attention out[%d] = %.9g, reference %.9g", d, out[d], want);
    }
    free(k), free(v);
}

// ---------------------------------------------------------------------------
// The threaded matvec: every pool size gives bitwise the per-row reference.

static seam_tensor make_tensor(uint32_t type, int64_t rows, int64_t cols, uint64_t *rng) {
    seam_tensor t = {.name = "test", .name_len = 4, .type = type, .rows = rows, .cols = cols};
    t.row_bytes = ggml_row_bytes(type, (uint64_t)cols);
    t.n_bytes = t.row_bytes * (uint64_t)rows;
    uint8_t *data = malloc(t.n_bytes);
    for (int64_t r = 0; r < rows; r++) {
        void *row = random_weights(type, cols, rng);
        memcpy(data + r * t.row_bytes, row, t.row_bytes);
        free(row);
    }
    t.data = data;
    return t;
}

Test(matvec, pool_sizes_agree_with_reference) {
    static const struct { uint32_t type; int64_t rows, cols; } cases[] = {
        {GGML_TYPE_Q4_K, 1, 256},    {GGML_TYPE_Q4_K, 3, 512},   {GGML_TYPE_Q6_K, 17, 1024},
        {GGML_TYPE_Q4_K, 1000, 768}, {GGML_TYPE_Q6_K, 333, 256}, {GGML_TYPE_Q8_0, 129, 640},
        {GGML_TYPE_Q5_0, 64, 96},    {GGML_TYPE_F32, 50, 100},   {GGML_TYPE_F16, 40, 72},
    };
    uint64_t rng = 6;
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        seam_tensor w = make_tensor(cases[c].type, cases[c].rows, cases[c].cols, &rng);
        float *x = malloc(sizeof(float) * (size_t)w.cols), *out = malloc(sizeof(float) * (size_t)w.rows);
        for (int64_t i = 0; i < w.cols; i++) x[i] = test_rng_normal(&rng);
        void *scratch = malloc(cpu_matvec_scratch_bytes(w.cols)), *act = malloc(cpu_matvec_scratch_bytes(w.cols));
        const uint32_t act_type = seam_vec_dot_type(w.type);
        seam_quantize_activation(act_type, x, act, w.cols);
        for (int nth = 1; nth <= 4; nth++) {
            seam_error err = {{0}};
            seam_pool *pool = pool_create(nth, &err);
            cr_assert(pool, "%s", err.msg);
            for (int rep = 0; rep < 3; rep++) {
                memset(out, 0xff, sizeof(float) * (size_t)w.rows);
                cpu_matvec(pool, &w, x, out, scratch);
                for (int64_t r = 0; r < w.rows; r++) {
                    const float want = cpu_kernels_get()->dot[w.type](
                        w.type, (const uint8_t *)w.data + r * w.row_bytes, act, w.cols);
                    cr_assert(bits_of(out[r]) == bits_of(want), "%s %ldx%ld, %d threads: row %ld = %.9g, want %.9g",
                              ggml_type_name(w.type), (long)w.rows, (long)w.cols, nth, (long)r, out[r], want);
                }
            }
            pool_destroy(pool);
        }
        free(x), free(out), free(scratch), free(act), free((void *)w.data);
    }
}

// ---------------------------------------------------------------------------
// The pool

typedef struct {
    _Atomic long calls;
    _Atomic long ith_sum;
    int nth_seen[8];
    long slot[8];  // each thread's own running sum
} count_job;

static void count_share(void *ctx, int ith, int nth) {
    count_job *j = ctx;
    atomic_fetch_add(&j->calls, 1);
    atomic_fetch_add(&j->ith_sum, ith);
    j->nth_seen[ith] = nth;
    j->slot[ith] += ith + 1;
}

Test(pool, every_thread_runs_every_job_once) {
    for (int nth = 1; nth <= 4; nth++) {
        seam_error err = {{0}};
        seam_pool *pool = pool_create(nth, &err);
        cr_assert(pool, "%s", err.msg);
        cr_assert_eq(pool_size(pool), nth);
        count_job job = {0};
        const long runs = 20000;
        for (long r = 0; r < runs; r++) {
            pool_run(pool, count_share, &job);
            // the job is complete when pool_run returns: every share's writes are visible
            cr_assert_eq(atomic_load(&job.calls), (r + 1) * nth, "%d threads, run %ld", nth, r);
        }
        cr_assert_eq(atomic_load(&job.ith_sum), runs * (nth * (nth - 1) / 2));
        for (int i = 0; i < nth; i++) {
            cr_assert_eq(job.nth_seen[i], nth);
            cr_assert_eq(job.slot[i], runs * (i + 1), "thread %d of %d", i, nth);
        }
        pool_destroy(pool);
    }
}

// Gaps longer than the spin make the workers (and the caller) sleep on the
// futex; every job must still run on every thread.
Test(pool, wakes_sleeping_workers) {
    seam_error err = {{0}};
    seam_pool *pool = pool_create(3, &err);
    cr_assert(pool, "%s", err.msg);
    count_job job = {0};
    for (int r = 0; r < 20; r++) {
        usleep(3000);
        pool_run(pool, count_share, &job);
    }
    cr_assert_eq(atomic_load(&job.calls), 20 * 3);
    pool_destroy(pool);
}

Test(pool, null_pool_runs_on_the_caller) {
    count_job job = {0};
    pool_run(NULL, count_share, &job);
    cr_assert_eq(atomic_load(&job.calls), 1);
    cr_assert_eq(job.nth_seen[0], 1);
    cr_assert_eq(pool_size(NULL), 1);
}

Test(pool, rejects_zero_threads) {
    seam_error err = {{0}};
    cr_assert_null(pool_create(0, &err));
    cr_assert(strstr(err.msg, "at least 1"), "%s", err.msg);
}
