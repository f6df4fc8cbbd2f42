// attention.c — the workbench of prefill attention on the CPU: one layer's
// cpu_attention over a batch of prompt tokens against an f16 cache, as a
// prompt's layer meets it, in G multiply-adds per second.
//
//   seam-attention [-t THREADS] [-p POS0] [-b BATCH] [-d HEAD_DIM] [-H HEADS] [-K KV_HEADS] [-r REPS]
//
// The batch's tokens sit at positions POS0 .. POS0 + BATCH - 1, each seeing
// the cache from 0 to itself (causal); the multiply-adds are a query's
// scores and values, 2 x HEAD_DIM per position it sees, for every head.
// The defaults are the Qwen3-0.6B shape (16 heads over 8 KV heads of 128)
// at the last batch of a 2048-token prompt. Random keys, values and
// queries; the figure is the median of REPS runs, with the best beside it.
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/common.h"
#include "cpu/ops.h"
#include "cpu/pool.h"
#include "numeric/formats.h"

static int cmp_double(const void *a, const void *b) {
    const double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static float frand(uint64_t *s) {
    *s = *s * 6364136223846793005ull + 1442695040888963407ull;
    return (float)((*s >> 40) & 0xffffff) / (float)(1 << 24) - 0.5f;
}

int main(int argc, char **argv) {
    int threads = (int)sysconf(_SC_NPROCESSORS_ONLN), pos0 = 1536, batch = 512, hd = 128, heads = 16, kv_heads = 8,
        reps = 9;
    for (int i = 1; i < argc; i++) {
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        int *opt = !strcmp(argv[i], "-t")   ? &threads
                   : !strcmp(argv[i], "-p") ? &pos0
                   : !strcmp(argv[i], "-b") ? &batch
                   : !strcmp(argv[i], "-d") ? &hd
                   : !strcmp(argv[i], "-H") ? &heads
                   : !strcmp(argv[i], "-K") ? &kv_heads
                   : !strcmp(argv[i], "-r") ? &reps
                                            : NULL;
        if (!opt || !v || (*opt = atoi(v)) < (opt == &pos0 ? 0 : 1) || (i++, 0)) {
            fprintf(stderr,
                    "usage: seam-attention [-t THREADS] [-p POS0] [-b BATCH] [-d HEAD_DIM] [-H HEADS] [-K KV_HEADS] "
                    "[-r REPS]\n");
            return 2;
        }
    }
    if (heads % kv_heads || hd % 16) return fprintf(stderr, "seam-attention: heads %% kv heads, head dim %% 16\n"), 2;
    const int n_ctx = pos0 + batch;
    seam_error err = {{0}};
    seam_pool *pool = pool_create(threads, &err);
    if (!pool) return fprintf(stderr, "seam-attention: %s\n", err.msg), 1;

    // the cache: rows of one position, all KV heads side by side (as a layer's)
    const size_t row = (size_t)kv_heads * hd;
    seam_f16 *k = malloc(sizeof(seam_f16) * row * n_ctx), *v = malloc(sizeof(seam_f16) * row * n_ctx);
    float *q = malloc(sizeof(float) * (size_t)batch * heads * hd), *out = malloc(sizeof(float) * (size_t)batch * heads * hd);
    int *t0 = malloc(sizeof(int) * batch), *t1 = malloc(sizeof(int) * batch);
    const size_t scratch_floats = cpu_attention_scratch_floats(n_ctx, hd);
    float *scratch = malloc(sizeof(float) * scratch_floats * threads);
    if (!k || !v || !q || !out || !t0 || !t1 || !scratch) return fprintf(stderr, "seam-attention: out of memory\n"), 1;
    uint64_t s = 1;
    for (size_t i = 0; i < row * n_ctx; i++) k[i] = seam_f32_to_f16(frand(&s)), v[i] = seam_f32_to_f16(frand(&s));
    for (size_t i = 0; i < (size_t)batch * heads * hd; i++) q[i] = frand(&s);
    for (int i = 0; i < batch; i++) t0[i] = 0, t1[i] = pos0 + i + 1;
    const cpu_kv kv = {.k = (const uint8_t *)k, .v = (const uint8_t *)v, .k_row = row * sizeof(seam_f16),
                       .v_row = row * sizeof(seam_f16), .k_head = hd * sizeof(seam_f16),
                       .v_head = hd * sizeof(seam_f16), .k_type = GGML_TYPE_F16, .v_type = GGML_TYPE_F16,
                       .ring = n_ctx};

    double macs = 0;
    for (int i = 0; i < batch; i++) macs += 2.0 * hd * heads * (t1[i] - t0[i]);
    double *sec = malloc(sizeof(double) * reps);
    for (int r = -1; r < reps; r++) {  // one warm-up
        const double a = seam_now();
        cpu_attention(pool, batch, out, (int64_t)heads * hd, q, (int64_t)heads * hd, &kv, heads, kv_heads, hd, t0, t1,
                      0.088f, scratch, scratch_floats);
        if (r >= 0) sec[r] = seam_now() - a;
    }
    qsort(sec, reps, sizeof *sec, cmp_double);
    printf("seam-attention: %d heads / %d KV heads of %d, batch %d at %d, %d threads: median %.2f ms, %.1f G MAC/s "
           "(best %.1f), %.2f G MAC/s a thread\n",
           heads, kv_heads, hd, batch, pos0, threads, 1e3 * sec[reps / 2], macs / sec[reps / 2] / 1e9,
           macs / sec[0] / 1e9, macs / sec[reps / 2] / 1e9 / threads);
    free(sec), free(scratch), free(t1), free(t0), free(out), free(q), free(v), free(k);
    pool_destroy(pool);
    return 0;
}
