// blas_probe.c — what OpenBLAS would give seam's CPU prefill, measured
// against seam's own kernels on the same shapes and threads. seam itself does
// not link a BLAS: this probe is the measurement behind that (README,
// bench/results), built only where pkg-config finds OpenBLAS.
//
//   seam-blas-probe [-t THREADS] [-r REPS]
//
// Prefill's matmuls, the rows of each shape against a batch of n inputs:
//   seam      cpu_matmul: the inputs quantised, the quantised rows' tiles
//             (every dot bitwise the decode's)
//   deq+sgemm the rows dequantised to f32, then cblas_sgemm: what a BLAS
//             prefill of a quantised model costs (the dequantisation timed
//             on one thread and divided by THREADS: its ideal split)
//   sgemm     cblas_sgemm alone on rows already in f32 (4-8 times the
//             memory): the bound of any dequantise-then-sgemm path
// and F32 weight rows (seam's F32 dot, input by input, against sgemm).
// Attention of one layer of the Qwen3-0.6B shape (16 query heads, 8 KV
// heads of 128) over ctx positions, for the last 96 queries of the prompt:
//   seam      cpu_attention: llama.cpp's float order without flash attention
//   sgemm     K and V converted from f16 to f32, then per query head
//             S = Q K^T (sgemm), the causal softmax, O = P V (sgemm)
// G multiply-adds per second of wall time, the median of REPS runs of at
// least 20 ms after a warm-up; OpenBLAS runs on THREADS threads as seam's pool does. Every seam
// figure is taken before OpenBLAS first runs, and seam's pool is gone before
// it does: each library's idle threads spin a while after their work, and
// would take the other's cores.
#include <cblas.h>
#include <math.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/common.h"
#include "cpu/ops.h"
#include "cpu/pool.h"
#include "numeric/quant.h"

void openblas_set_num_threads(int n);
char *openblas_get_corename(void);

static uint64_t rng = 0x9e3779b97f4a7c15ull;
static float uniform(void) {  // xorshift64*, in [-1, 1)
    rng ^= rng >> 12, rng ^= rng << 25, rng ^= rng >> 27;
    return (float)((int64_t)((rng * 0x2545f4914f6cdd1dull) >> 40) - (1 << 23)) / (1 << 23);
}

static int cmp_double(const void *a, const void *b) {
    const double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

enum { MAX_REPS = 64 };

// Seconds per call of fn(ctx): the median of reps runs of at least 20 ms
// each (long enough to ride out the moments a shared machine takes a core),
// after a warm-up.
static double median_time(void (*fn)(void *), void *ctx, int reps) {
    double t[MAX_REPS];
    fn(ctx);
    for (int r = 0; r < reps; r++) {
        const double t0 = seam_now();
        int calls = 0;
        do fn(ctx), calls++;
        while (seam_now() - t0 < 0.02);
        t[r] = (seam_now() - t0) / calls;
    }
    qsort(t, (size_t)reps, sizeof t[0], cmp_double);
    return t[reps / 2];
}

// ---------------------------------------------------------------- matmuls

typedef struct {
    seam_pool *pool;
    seam_tensor w;        // (rows, cols) of type
    float *wf;            // (rows, cols) the same rows in f32
    float *x, *out;       // (n, cols), (n, rows)
    void *scratch;        // the quantised inputs
    int n, n_threads;
} matmul_case;

static void run_seam(void *ctx) {
    matmul_case *m = ctx;
    cpu_matmul(m->pool, &m->w, m->x, m->w.cols, m->out, m->w.rows, m->n, m->scratch);
}

static void run_sgemm(void *ctx) {
    matmul_case *m = ctx;
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, m->n, (int)m->w.rows, (int)m->w.cols, 1.0f, m->x,
                (int)m->w.cols, m->wf, (int)m->w.cols, 0.0f, m->out, (int)m->w.rows);
}

static void run_dequant(void *ctx) {
    matmul_case *m = ctx;
    const seam_tensor *w = &m->w;
    for (int64_t r = 0; r < w->rows; r++)
        seam_dequantize_row(w->type, w->data + (uint64_t)r * w->row_bytes, m->wf + r * w->cols, w->cols);
}

// One shape: with a pool, seam's figure (fig[0]); without, OpenBLAS's:
// deq+sgemm (fig[1], 0 for F32) and sgemm (fig[2]). The same rows and inputs
// either way (the generator restarts per shape).
static int probe_matmul(seam_pool *pool, uint32_t type, int64_t rows, int64_t cols, int n, int threads, int reps,
                        double fig[3]) {
    rng = 0x9e3779b97f4a7c15ull;
    matmul_case m = {.pool = pool, .n = n, .n_threads = threads};
    m.w = (seam_tensor){.name = "probe", .name_len = 5, .type = type, .rows = rows, .cols = cols};
    m.w.row_bytes = ggml_row_bytes(type, (uint64_t)cols);
    m.w.n_bytes = m.w.row_bytes * (uint64_t)rows;
    uint8_t *data = malloc(m.w.n_bytes);
    m.wf = malloc(sizeof(float) * (size_t)(rows * cols));
    m.x = malloc(sizeof(float) * (size_t)(n * cols));
    m.out = malloc(sizeof(float) * (size_t)(n * rows));
    m.scratch = malloc((size_t)n * cpu_matvec_scratch_bytes(cols));
    if (!data || !m.wf || !m.x || !m.out || !m.scratch) {
        free(data), free(m.wf), free(m.x), free(m.out), free(m.scratch);
        return -1;
    }
    for (int64_t r = 0; r < rows; r++) {
        for (int64_t i = 0; i < cols; i++) m.wf[r * cols + i] = uniform();
        seam_quantize_weights(type, m.wf + r * cols, data + (uint64_t)r * m.w.row_bytes, cols);
    }
    m.w.data = data;
    for (int64_t i = 0; i < n * cols; i++) m.x[i] = uniform();
    const double macs = (double)rows * (double)cols * n / 1e9;
    if (pool) {
        fig[0] = macs / median_time(run_seam, &m, reps);
    } else {
        const double sgemm = median_time(run_sgemm, &m, reps);
        fig[1] = type == GGML_TYPE_F32 ? 0 : macs / (sgemm + median_time(run_dequant, &m, reps) / m.n_threads);
        fig[2] = macs / sgemm;
    }
    free(data), free(m.wf), free(m.x), free(m.out), free(m.scratch);
    return 0;
}

// ---------------------------------------------------------------- attention

enum { HEADS = 16, KV_HEADS = 8, HEAD_DIM = 128, QUERIES = 96 };

typedef struct {
    seam_pool *pool;
    int ctx;                 // positions in the cache; the queries are the last QUERIES of them
    seam_f16 *k, *v;         // (KV_HEADS, ctx, HEAD_DIM): head-major, as the engine's cache
    cpu_kv kv;               // over k and v
    float *kf, *vf;          // the same in f32
    float *q, *out;          // (QUERIES, HEADS * HEAD_DIM)
    float *s;                // (QUERIES, ctx) one head's scores
    float *scratch;
    size_t scratch_floats;
    int t0[QUERIES], t1[QUERIES];
} attention_case;

static void run_seam_attention(void *ctx) {
    attention_case *a = ctx;
    cpu_attention(a->pool, QUERIES, a->out, HEADS * HEAD_DIM, a->q, HEADS * HEAD_DIM, &a->kv, HEADS, KV_HEADS,
                  HEAD_DIM, a->t0, a->t1, 1.0f / sqrtf(HEAD_DIM), a->scratch, a->scratch_floats);
}

static void run_sgemm_attention(void *ctx) {
    attention_case *a = ctx;
    const int hd = HEAD_DIM;
    // the cache in f32
    for (size_t i = 0; i < (size_t)KV_HEADS * a->ctx * hd; i++)
        a->kf[i] = seam_f16_to_f32(a->k[i]), a->vf[i] = seam_f16_to_f32(a->v[i]);
    for (int h = 0; h < HEADS; h++) {
        const float *kh = a->kf + (size_t)(h / (HEADS / KV_HEADS)) * a->ctx * hd;
        const float *vh = a->vf + (size_t)(h / (HEADS / KV_HEADS)) * a->ctx * hd;
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, QUERIES, a->ctx, hd, 1.0f / sqrtf(HEAD_DIM),
                    a->q + h * hd, HEADS * hd, kh, hd, 0.0f, a->s, a->ctx);
        for (int i = 0; i < QUERIES; i++) {
            float *s = a->s + (size_t)i * a->ctx, max = -INFINITY, sum = 0;
            for (int t = 0; t < a->t1[i]; t++) max = s[t] > max ? s[t] : max;
            for (int t = 0; t < a->t1[i]; t++) sum += s[t] = expf(s[t] - max);
            for (int t = 0; t < a->ctx; t++) s[t] = t < a->t1[i] ? s[t] / sum : 0.0f;
        }
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, QUERIES, hd, a->ctx, 1.0f, a->s, a->ctx, vh, hd,
                    0.0f, a->out + h * hd, HEADS * hd);
    }
}

// Attention over ctx positions: seam's figure with a pool (fig[0]),
// OpenBLAS's without (fig[2]).
static int probe_attention(seam_pool *pool, int ctx, int threads, int reps, double fig[3]) {
    rng = 0x9e3779b97f4a7c15ull;
    attention_case a = {.pool = pool, .ctx = ctx};
    const size_t cache = (size_t)ctx * KV_HEADS * HEAD_DIM;
    a.k = malloc(sizeof(seam_f16) * cache), a.v = malloc(sizeof(seam_f16) * cache);
    a.kf = malloc(sizeof(float) * cache), a.vf = malloc(sizeof(float) * cache);
    a.q = malloc(sizeof(float) * QUERIES * HEADS * HEAD_DIM), a.out = malloc(sizeof(float) * QUERIES * HEADS * HEAD_DIM);
    a.s = malloc(sizeof(float) * QUERIES * (size_t)ctx);
    a.scratch_floats = cpu_attention_scratch_floats(ctx, HEAD_DIM);
    a.scratch = malloc(sizeof(float) * a.scratch_floats * (size_t)threads);
    if (!a.k || !a.v || !a.kf || !a.vf || !a.q || !a.out || !a.s || !a.scratch) {
        free(a.k), free(a.v), free(a.kf), free(a.vf), free(a.q), free(a.out), free(a.s), free(a.scratch);
        return -1;
    }
    for (size_t i = 0; i < cache; i++) a.k[i] = seam_f32_to_f16(uniform()), a.v[i] = seam_f32_to_f16(uniform());
    const size_t row = sizeof(seam_f16) * HEAD_DIM;
    a.kv = (cpu_kv){.k = (const uint8_t *)a.k, .v = (const uint8_t *)a.v, .k_row = row, .v_row = row,
                    .k_head = row * (size_t)ctx, .v_head = row * (size_t)ctx, .k_type = GGML_TYPE_F16,
                    .v_type = GGML_TYPE_F16, .ring = ctx};
    for (int i = 0; i < QUERIES * HEADS * HEAD_DIM; i++) a.q[i] = uniform();
    double macs = 0;  // the dots each query's scores and sums take
    for (int i = 0; i < QUERIES; i++) {
        a.t0[i] = 0, a.t1[i] = ctx - QUERIES + i + 1;
        macs += 2.0 * a.t1[i] * HEADS * HEAD_DIM / 1e9;
    }
    if (pool) fig[0] = macs / median_time(run_seam_attention, &a, reps);
    else fig[2] = macs / median_time(run_sgemm_attention, &a, reps);
    free(a.k), free(a.v), free(a.kf), free(a.vf), free(a.q), free(a.out), free(a.s), free(a.scratch);
    return 0;
}

int main(int argc, char **argv) {
    int threads = (int)sysconf(_SC_NPROCESSORS_ONLN), reps = 9;
    for (int i = 1; i < argc; i++) {
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(argv[i], "-t") && v) threads = atoi(v), i++;
        else if (!strcmp(argv[i], "-r") && v) reps = atoi(v), i++;
        else return fprintf(stderr, "usage: seam-blas-probe [-t THREADS] [-r REPS]\n"), 2;
    }
    if (threads < 1 || reps < 1 || reps > MAX_REPS)
        return fprintf(stderr, "seam-blas-probe: -t wants >= 1, -r 1..%d\n", MAX_REPS), 2;
    static const struct {
        const char *what;
        uint32_t type;
        int64_t rows, cols;  // rows 0: attention over cols positions
        int n;
    } cases[] = {
        {"Qwen3-0.6B ffn_up", GGML_TYPE_Q4_K, 3072, 1024, 96},  {"Qwen3-0.6B ffn_up", GGML_TYPE_Q4_K, 3072, 1024, 512},
        {"Qwen3-0.6B ffn_down", GGML_TYPE_Q6_K, 1024, 3072, 96}, {"Qwen3-0.6B ffn_down", GGML_TYPE_Q6_K, 1024, 3072, 512},
        {"Gemma 3 270M ffn_up", GGML_TYPE_Q5_0, 2048, 640, 96}, {"Gemma 3 270M ffn_up", GGML_TYPE_Q5_0, 2048, 640, 512},
        {"Gemma 3 270M attn_q", GGML_TYPE_Q8_0, 1024, 640, 96}, {"Gemma 3 270M attn_q", GGML_TYPE_Q8_0, 1024, 640, 512},
        {"an F32 matrix", GGML_TYPE_F32, 1024, 1024, 96},       {"an F32 matrix", GGML_TYPE_F32, 1024, 1024, 512},
        {"Qwen3-0.6B attention", GGML_TYPE_F16, 0, 512, QUERIES}, {"Qwen3-0.6B attention", GGML_TYPE_F16, 0, 2048, QUERIES},
    };
    enum { N_CASES = sizeof cases / sizeof cases[0] };
    double fig[N_CASES][3] = {{0}};
    // seam first, its pool gone before OpenBLAS starts its threads
    for (int pass = 0; pass < 2; pass++) {
        seam_error err = {{0}};
        seam_pool *pool = NULL;
        if (pass == 0 && !(pool = pool_create(threads, &err))) return fprintf(stderr, "seam-blas-probe: %s\n", err.msg), 1;
        for (int c = 0; c < N_CASES; c++) {
            const int rc = cases[c].rows
                               ? probe_matmul(pool, cases[c].type, cases[c].rows, cases[c].cols, cases[c].n, threads,
                                              reps, fig[c])
                               : probe_attention(pool, (int)cases[c].cols, threads, reps, fig[c]);
            if (rc) return fprintf(stderr, "seam-blas-probe: out of memory\n"), 1;
        }
        pool_destroy(pool);
        openblas_set_num_threads(threads);
    }
    printf("seam-blas-probe: %d threads, OpenBLAS core %s, median of %d; G multiply-adds per second\n\n", threads,
           openblas_get_corename(), reps);
    printf("| matrix | type | shape | inputs | seam | deq+sgemm | sgemm | seam / best BLAS |\n");
    printf("|---|---|---|---|---|---|---|---|\n");
    for (int c = 0; c < N_CASES; c++) {
        char shape[32], deq[16] = "-";
        if (cases[c].rows) snprintf(shape, sizeof shape, "%ld x %ld", (long)cases[c].rows, (long)cases[c].cols);
        else snprintf(shape, sizeof shape, "%ld positions", (long)cases[c].cols);
        if (fig[c][1] > 0) snprintf(deq, sizeof deq, "%.1f", fig[c][1]);
        printf("| %s | %s | %s | %d | %.1f | %s | %.1f | %.2f |\n", cases[c].what,
               cases[c].rows ? ggml_type_name(cases[c].type) : "f16 cache", shape, cases[c].n, fig[c][0], deq,
               fig[c][2], fig[c][0] / fig[c][2]);
    }
    return 0;
}
