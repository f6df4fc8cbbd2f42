// test_engine.c — the forward pass is deterministic: the same tokens give
// the same logits bit for bit, run after run and whatever the thread count,
// and the context limit is an error, not a write past the KV cache.
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "engine.h"
#include "helpers.h"
#include "model.h"

static const char *tiny_model(void) {
    static char path[4096];
    snprintf(path, sizeof path, "%s", test_path("engine-tiny.gguf"));
    char cmd[8192];
    snprintf(cmd, sizeof cmd, "%s/seam-synth %s/models/tiny.shape -o %s 2>/dev/null", SEAM_BINARY_DIR, SEAM_SOURCE_DIR,
             path);
    cr_assert_eq(system(cmd), 0, "seam-synth failed: %s", cmd);
    return path;
}

// The logits after each of n tokens, with n_threads threads.
static float *run(const seam_model *m, const int *tokens, int n, int n_threads) {
    seam_engine eng;
    seam_error e = {{0}};
    cr_assert_eq(engine_init(&eng, m, n, &e), 0, "%s", e.msg);
    cr_assert_eq(engine_set_threads(&eng, n_threads, &e), 0, "%s", e.msg);
    float *all = malloc(sizeof(float) * (size_t)n * m->cfg.n_vocab), *logits;
    for (int i = 0; i < n; i++) {
        cr_assert_eq(engine_forward(&eng, tokens[i], i, &logits, &e), 0, "%s", e.msg);
        memcpy(all + (size_t)i * m->cfg.n_vocab, logits, sizeof(float) * m->cfg.n_vocab);
    }
    engine_free(&eng);
    return all;
}

Test(engine, deterministic_across_runs_and_threads) {
    seam_model m;
    seam_error e = {{0}};
    cr_assert_eq(model_load(&m, tiny_model(), &e), 0, "%s", e.msg);
    const int tokens[] = {1, 17, 300, 42, 7, 255, 99, 3, 128, 64, 511, 0, 5, 6, 7, 8};
    const int n = sizeof tokens / sizeof *tokens;
    const size_t bytes = sizeof(float) * (size_t)n * m.cfg.n_vocab;
    float *a = run(&m, tokens, n, 1), *b = run(&m, tokens, n, 1), *c = run(&m, tokens, n, 3);
    cr_assert(memcmp(a, b, bytes) == 0, "two runs differ");
    cr_assert(memcmp(a, c, bytes) == 0, "1 and 3 threads differ");
    free(a), free(b), free(c);
    model_free(&m);
}

Test(engine, context_limit_is_an_error) {
    seam_model m;
    seam_error e = {{0}};
    cr_assert_eq(model_load(&m, tiny_model(), &e), 0, "%s", e.msg);
    seam_engine eng;
    cr_assert_eq(engine_init(&eng, &m, 2, &e), 0, "%s", e.msg);
    float *logits;
    cr_assert_eq(engine_forward(&eng, 1, 0, &logits, &e), 0, "%s", e.msg);
    cr_assert_eq(engine_forward(&eng, 1, 1, &logits, &e), 0, "%s", e.msg);
    cr_assert_eq(engine_forward(&eng, 1, 2, &logits, &e), -1);
    cr_assert(strstr(e.msg, "past the context"), "%s", e.msg);
    cr_assert_eq(engine_forward(&eng, m.cfg.n_vocab, 0, &logits, &e), -1);
    cr_assert(strstr(e.msg, "outside the vocabulary"), "%s", e.msg);
    engine_free(&eng);
    model_free(&m);
}

// Batched prefill is token-by-token decode, bit for bit: the same last
// logits and the same KV cache, with a prompt of a full batch and part
// of another (prefill.c takes 96 tokens at a time), on a dense and an MoE
// model and, when it is installed, on Gemma 3 270M (GELU, post-norms, f16
// inputs of 640-wide rows).
static void prefill_matches_decode_file(const char *path, const char *name) {
    seam_model m;
    seam_error e = {{0}};
    cr_assert_eq(model_load(&m, path, &e), 0, "%s", e.msg);
    enum { N = 150 };
    int tokens[N];
    uint64_t rng = 9;
    for (int i = 0; i < N; i++) tokens[i] = (int)(test_rng_next(&rng) % (uint64_t)m.cfg.n_vocab);
    seam_engine a, b;
    cr_assert_eq(engine_init(&a, &m, N, &e), 0, "%s", e.msg);
    cr_assert_eq(engine_init(&b, &m, N, &e), 0, "%s", e.msg);
    cr_assert_eq(engine_set_threads(&b, 2, &e), 0, "%s", e.msg);
    float *la, *lb;
    for (int i = 0; i < N; i++) cr_assert_eq(engine_forward(&a, tokens[i], i, &la, &e), 0, "%s", e.msg);
    cr_assert_eq(engine_prefill(&b, tokens, N, 0, &lb, &e), 0, "%s", e.msg);
    cr_assert(memcmp(la, lb, sizeof(float) * m.cfg.n_vocab) == 0, "%s: last logits differ", name);
    const size_t kv = (size_t)m.cfg.n_layers * N * m.cfg.n_kv_heads * m.cfg.head_dim * sizeof(seam_f16);
    cr_assert(memcmp(a.s.key_cache, b.s.key_cache, kv) == 0, "%s: K caches differ", name);
    cr_assert(memcmp(a.s.value_cache, b.s.value_cache, kv) == 0, "%s: V caches differ", name);
    engine_free(&a), engine_free(&b);
    model_free(&m);
}

static void prefill_matches_decode(const char *shape) {
    static char path[4096], cmd[8192];
    snprintf(path, sizeof path, "%s", test_path(shape));
    snprintf(cmd, sizeof cmd, "%s/seam-synth %s/models/%s.shape -o %s 2>/dev/null", SEAM_BINARY_DIR, SEAM_SOURCE_DIR,
             shape, path);
    cr_assert_eq(system(cmd), 0, "seam-synth failed: %s", cmd);
    prefill_matches_decode_file(path, shape);
}

Test(engine, prefill_equals_decode_dense) { prefill_matches_decode("small"); }
Test(engine, prefill_equals_decode_moe) { prefill_matches_decode("moe-small"); }
Test(engine, prefill_equals_decode_gemma) {
    static char path[4096];
    snprintf(path, sizeof path, "%s/models/gemma-3-270m-q4_k_m.gguf", SEAM_SOURCE_DIR);
    if (access(path, R_OK))
        cr_skip_test("models/gemma-3-270m-q4_k_m.gguf is not installed (models/get-default-model.sh installs it)");
    prefill_matches_decode_file(path, "gemma-3-270m");
}
