// speed.c — the in-cache kernel speeds and the pool's job cost of speed.h.
#include "cpu/speed.h"

#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

#include "cpu/ops.h"
#include "quant.h"

enum { RUNS = 31 };

// CPU time of the calling thread.
static double thread_seconds(void) {
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

static uint64_t splitmix(uint64_t *s) {
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static float uniform(uint64_t *s) { return (float)((int64_t)(splitmix(s) >> 40) - (1 << 23)) / (1 << 23); }

// Real-looking blocks: 16 rows quantised from random floats (x: cols
// floats of scratch), repeated; then n_act inputs quantised from random
// floats, cpu_matvec_scratch_bytes(cols) apart.
static void random_rows_inputs(uint32_t type, int64_t cols, int rows, uint8_t *w, int n_act, uint8_t *act, float *x,
                               uint64_t *s) {
    const uint64_t row_bytes = ggml_row_bytes(type, (uint64_t)cols);
    for (int r = 0; r < 16 && r < rows; r++) {
        for (int64_t i = 0; i < cols; i++) x[i] = uniform(s);
        seam_quantize_weights(type, x, w + (uint64_t)r * row_bytes, cols);
    }
    for (int r = 16; r < rows; r++) memcpy(w + (uint64_t)r * row_bytes, w + (uint64_t)(r % 16) * row_bytes, row_bytes);
    for (int j = 0; j < n_act; j++) {
        for (int64_t i = 0; i < cols; i++) x[i] = uniform(s);
        cpu_quantize_input(seam_vec_dot_type(type), x, act + (size_t)j * cpu_matvec_scratch_bytes(cols), cols);
    }
}

int cpu_speed_dot(uint32_t type, int64_t cols, int rows, const cpu_kernels *const *sets, int n_sets, double *gbs) {
    const uint64_t row_bytes = ggml_row_bytes(type, (uint64_t)cols), bytes = row_bytes * (uint64_t)rows;
    uint8_t *w = malloc(bytes);
    void *act = malloc(cpu_matvec_scratch_bytes(cols));
    float *out = malloc(sizeof(float) * (size_t)rows), *x = malloc(sizeof(float) * (size_t)cols);
    if (!w || !act || !out || !x) return free(w), free(act), free(out), free(x), -1;
    uint64_t s = 42;
    random_rows_inputs(type, cols, rows, w, 1, act, x, &s);
    // the best of RUNS short runs per set, the sets taking turns, so that the
    // quiet moments of a shared machine are found and fall on every set alike
    const int iters = bytes < (1u << 20) ? (int)((4u << 20) / bytes) + 1 : 4;  // runs of a few MiB
    for (int i = 0; i < n_sets; i++) gbs[i] = 0;
    for (int run = 0; run < RUNS; run++)
        for (int i = 0; i < n_sets; i++) {
            const double t = thread_seconds();
            for (int it = 0; it < iters; it++) sets[i]->dot[type](type, w, row_bytes, rows, act, 0, 1, cols, out, 0);
            const double g = (double)bytes * iters / (thread_seconds() - t) / 1e9;
            gbs[i] = g > gbs[i] ? g : gbs[i];
        }
    free(w), free(act), free(out), free(x);
    return 0;
}

double cpu_speed_batch(uint32_t type, int64_t cols, int rows, int n_act) {
    const uint64_t row_bytes = ggml_row_bytes(type, (uint64_t)cols), stride = cpu_matvec_scratch_bytes(cols);
    uint8_t *w = malloc(row_bytes * (uint64_t)rows), *act = malloc(stride * (uint64_t)n_act);
    float *out = malloc(sizeof(float) * (size_t)rows * (size_t)n_act), *x = malloc(sizeof(float) * (size_t)cols);
    if (!w || !act || !out || !x) return free(w), free(act), free(out), free(x), -1;
    uint64_t s = 43;
    random_rows_inputs(type, cols, rows, w, n_act, act, x, &s);
    const cpu_kernels *k = cpu_kernels_get();
    double best = 0;
    for (int run = 0; run < 15; run++) {
        const double t = thread_seconds();
        k->dot[type](type, w, row_bytes, rows, act, stride, n_act, cols, out, rows);
        const double g = (double)rows * (double)cols * n_act / (thread_seconds() - t) / 1e9;
        best = g > best ? g : best;
    }
    free(w), free(act), free(out), free(x);
    return best;
}

double cpu_speed_attention(int head_dim) {
    // 32 layers' caches of one KV head, cycled: past the L2 as in a model,
    // where a layer's cache was last read a token ago
    enum { POS = 512, MAX_HD = 512, LAYERS = 32 };
    const int HD = head_dim < MAX_HD ? head_dim : MAX_HD;
    const size_t n = (size_t)LAYERS * POS * HD;
    seam_f16 *k = malloc(sizeof(seam_f16) * n), *v = malloc(sizeof(seam_f16) * n);
    const size_t scratch_floats = cpu_attention_scratch_floats(POS, HD);
    float *scratch = malloc(sizeof(float) * scratch_floats), q[MAX_HD], out[MAX_HD];
    if (!k || !v || !scratch) return free(k), free(v), free(scratch), 0;
    uint64_t s = 7;
    for (size_t i = 0; i < n; i++) k[i] = seam_f32_to_f16(uniform(&s)), v[i] = seam_f32_to_f16(uniform(&s));
    for (int i = 0; i < HD; i++) q[i] = uniform(&s);
    const double bytes = 2.0 * (double)n * sizeof(seam_f16);
    double best = 0;
    for (int run = 0; run < 9; run++) {
        const double t = thread_seconds();
        for (int l = 0; l < LAYERS; l++) {
            const size_t off = (size_t)l * POS * HD;
            const cpu_kv kv = {.k = (const uint8_t *)(k + off), .v = (const uint8_t *)(v + off),
                               .k_row = HD * sizeof(seam_f16), .v_row = HD * sizeof(seam_f16),
                               .k_head = (size_t)POS * HD * sizeof(seam_f16), .v_head = (size_t)POS * HD * sizeof(seam_f16),
                               .k_type = GGML_TYPE_F16, .v_type = GGML_TYPE_F16, .ring = POS};
            cpu_attention_head(out, q, &kv, 0, POS, HD, 0.088f, scratch, scratch_floats);
        }
        const double g = bytes / (thread_seconds() - t) / 1e9;
        best = g > best ? g : best;
    }
    free(k), free(v), free(scratch);
    return best;
}

static int cmp_double(const void *a, const void *b) {
    const double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

// rows of real-looking weights (16 quantised from random floats, repeated),
// in an anonymous mapping; data NULL when out of memory
static seam_tensor matrix(uint32_t type, int64_t rows, int64_t cols, uint64_t *rng) {
    seam_tensor t = {.name = "probe", .name_len = 5, .type = type, .rows = rows, .cols = cols};
    t.row_bytes = ggml_row_bytes(type, (uint64_t)cols);
    t.n_bytes = t.row_bytes * (uint64_t)rows;
    uint8_t *data = mmap(NULL, t.n_bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    float *x = malloc(sizeof(float) * (size_t)cols);
    if (data == MAP_FAILED || !x) {
        if (data != MAP_FAILED) munmap(data, t.n_bytes);
        free(x);
        return t;
    }
    for (int64_t r = 0; r < 16 && r < rows; r++) {
        for (int64_t i = 0; i < cols; i++) x[i] = uniform(rng);
        seam_quantize_weights(type, x, data + (uint64_t)r * t.row_bytes, cols);
    }
    for (int64_t r = 16; r < rows; r++) memcpy(data + (uint64_t)r * t.row_bytes, data + (uint64_t)(r % 16) * t.row_bytes, t.row_bytes);
    free(x);
    t.data = data;
    return t;
}

double cpu_speed_stream(seam_pool *pool, uint32_t type, uint64_t bytes) {
    enum { COLS = 1024 };
    uint64_t rng = 42;
    const seam_tensor w = matrix(type, (int64_t)(bytes / ggml_row_bytes(type, COLS)), COLS, &rng);
    // one matvec per MiB of rows: a layer's matrices are a few MiB, each its
    // own job whose threads start and finish together
    const int64_t chunk = (int64_t)((1u << 20) / w.row_bytes);
    float x[COLS], *out = malloc(sizeof(float) * (size_t)chunk);
    void *act = malloc(cpu_matvec_scratch_bytes(COLS));
    double gbs = -1, runs[5];
    if (w.data && out && act) {
        for (int i = 0; i < COLS; i++) x[i] = uniform(&rng);
        for (int r = -1; r < 5; r++) {  // r = -1: the warm-up
            const double t = seam_now();
            for (int64_t first = 0; first + chunk <= w.rows; first += chunk) {
                const seam_tensor part = tensor_rows(&w, first, chunk);
                cpu_matvec(pool, &part, x, out, act);
            }
            if (r >= 0) runs[r] = (double)(w.rows / chunk * chunk) * w.row_bytes / (seam_now() - t) / 1e9;
        }
        qsort(runs, 5, sizeof runs[0], cmp_double);
        gbs = runs[2];
    }
    if (w.data) munmap((void *)w.data, w.n_bytes);
    free(out), free(act);
    return gbs;
}

double cpu_speed_matvec_call(seam_pool *pool, double dot_gbs, double row_ns) {
    enum { N = 128, ROWS = 256, COLS = 256, CYCLES = 15 };
    uint64_t rng = 9;
    const seam_tensor first = matrix(GGML_TYPE_Q4_K, (int64_t)N * ROWS, COLS, &rng);
    float x[COLS], out[ROWS];
    void *act = malloc(cpu_matvec_scratch_bytes(COLS));
    if (!first.data || !act) return free(act), 0;
    for (int i = 0; i < COLS; i++) x[i] = uniform(&rng);
    double per_call[CYCLES];
    for (int c = -1; c < CYCLES; c++) {  // c = -1: the warm-up
        const double t = seam_now();
        for (int i = 0; i < N; i++) {
            const seam_tensor w = tensor_rows(&first, (int64_t)i * ROWS, ROWS);
            cpu_matvec(pool, &w, x, out, act);
        }
        if (c >= 0) per_call[c] = (seam_now() - t) / N;
    }
    qsort(per_call, CYCLES, sizeof per_call[0], cmp_double);
    munmap((void *)first.data, first.n_bytes);
    free(act);
    const double kernels = 1e-9 * (first.row_bytes * ROWS / dot_gbs + ROWS * row_ns) / (pool ? pool_size(pool) : 1);
    const double extra = per_call[CYCLES / 2] - kernels;
    return extra > 0 ? 1e6 * extra : 0;
}
