// speed.c — the in-cache kernel speeds and the pool's job cost of speed.h.
#include "cpu/speed.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cpu/ops.h"
#include "quant.h"

enum { COLS = 1024, ROWS = 256, RUNS = 31 };

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

int cpu_speed_dot(uint32_t type, const cpu_kernels *const *sets, int n_sets, double *gbs) {
    const uint64_t row_bytes = ggml_row_bytes(type, COLS), bytes = row_bytes * ROWS;
    uint8_t *w = malloc(bytes);
    void *act = malloc(cpu_matvec_scratch_bytes(COLS));
    float *out = malloc(sizeof(float) * ROWS), x[COLS];
    if (!w || !act || !out) return free(w), free(act), free(out), -1;
    uint64_t s = 42;
    // real-looking blocks: 16 rows quantised from random floats, repeated
    for (int r = 0; r < 16; r++) {
        for (int i = 0; i < COLS; i++) x[i] = uniform(&s);
        seam_quantize_weights(type, x, w + (uint64_t)r * row_bytes, COLS);
    }
    for (int r = 16; r < ROWS; r++) memcpy(w + (uint64_t)r * row_bytes, w + (uint64_t)(r % 16) * row_bytes, row_bytes);
    for (int i = 0; i < COLS; i++) x[i] = uniform(&s);
    cpu_quantize_input(seam_vec_dot_type(type), x, act, COLS);
    // the best of RUNS short runs per set, the sets taking turns, so that the
    // quiet moments of a shared machine are found and fall on every set alike
    const int iters = 50;
    for (int i = 0; i < n_sets; i++) gbs[i] = 0;
    for (int run = 0; run < RUNS; run++)
        for (int i = 0; i < n_sets; i++) {
            const double t = thread_seconds();
            for (int it = 0; it < iters; it++) sets[i]->dot[type](type, w, row_bytes, ROWS, act, 0, 1, COLS, out, 0);
            const double g = (double)bytes * iters / (thread_seconds() - t) / 1e9;
            gbs[i] = g > gbs[i] ? g : gbs[i];
        }
    free(w), free(act), free(out);
    return 0;
}

double cpu_speed_attention(void) {
    enum { POS = 512, HD = 128 };
    seam_f16 *k = malloc(sizeof(seam_f16) * POS * HD), *v = malloc(sizeof(seam_f16) * POS * HD);
    float *scratch = malloc(sizeof(float) * cpu_attention_scratch_floats(POS, HD)), q[HD], out[HD];
    if (!k || !v || !scratch) return free(k), free(v), free(scratch), 0;
    uint64_t s = 7;
    for (int i = 0; i < POS * HD; i++) k[i] = seam_f32_to_f16(uniform(&s)), v[i] = seam_f32_to_f16(uniform(&s));
    for (int i = 0; i < HD; i++) q[i] = uniform(&s);
    float *att = scratch, *acc = scratch + POS;
    const double bytes = 2.0 * POS * HD * sizeof(seam_f16);
    double best = 0;
    for (int run = 0; run < RUNS; run++) {
        const int iters = 20;
        const double t = thread_seconds();
        for (int it = 0; it < iters; it++) cpu_attention_head(out, q, k, v, 0, POS, HD, HD, 0.088f, att, acc);
        const double g = bytes * iters / (thread_seconds() - t) / 1e9;
        best = g > best ? g : best;
    }
    free(k), free(v), free(scratch);
    return best;
}

static void empty_job(void *ctx, int ith, int nth) { (void)ctx, (void)ith, (void)nth; }

static int cmp_double(const void *a, const void *b) {
    const double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

double cpu_speed_pool_job(seam_pool *pool) {
    enum { N = 2001 };
    static double us[N];
    for (int i = 0; i < 100; i++) pool_run(pool, empty_job, NULL);  // warm: workers spinning
    for (int i = 0; i < N; i++) {
        const double t = seam_now();
        pool_run(pool, empty_job, NULL);
        us[i] = 1e6 * (seam_now() - t);
    }
    qsort(us, N, sizeof us[0], cmp_double);
    return us[N / 2];
}
