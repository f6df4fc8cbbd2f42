// test_engine.c — the forward pass is deterministic: the same tokens give
// the same logits bit for bit, run after run and whatever the thread count,
// and the context limit is an error, not a write past the KV cache.
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/engine.h"
#include "helpers.h"
#include "model/model.h"
#include "plan/plan.h"

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
// logits and the same KV cache, with a prompt of n tokens (the engine takes
// SEAM_UBATCH at a time: PREFILL_N is a full batch and half another), on a dense and
// an MoE model and, when it is installed, on Gemma 3 270M (GELU, post-norms,
// f16 inputs of 640-wide rows); a 2K prompt with either cache type.
#define PREFILL_N (SEAM_UBATCH * 3 / 2)
static void prefill_matches_decode_file(const char *path, const char *name, int n, seam_kv_config cache) {
    seam_model m;
    seam_error e = {{0}};
    cr_assert_eq(model_load(&m, path, &e), 0, "%s", e.msg);
    int *tokens = malloc(sizeof(int) * (size_t)n);
    uint64_t rng = 9;
    for (int i = 0; i < n; i++) tokens[i] = (int)(test_rng_next(&rng) % (uint64_t)m.cfg.n_vocab);
    seam_engine a, b;
    cr_assert_eq(engine_init_kv(&a, &m, n, cache, &e), 0, "%s", e.msg);
    cr_assert_eq(engine_init_kv(&b, &m, n, cache, &e), 0, "%s", e.msg);
    cr_assert_eq(engine_set_threads(&b, 2, &e), 0, "%s", e.msg);
    float *la, *lb;
    for (int i = 0; i < n; i++) cr_assert_eq(engine_forward(&a, tokens[i], i, &la, &e), 0, "%s", e.msg);
    cr_assert_eq(engine_prefill(&b, tokens, n, 0, &lb, &e), 0, "%s", e.msg);
    cr_assert(memcmp(la, lb, sizeof(float) * m.cfg.n_vocab) == 0, "%s, %d tokens: last logits differ", name, n);
    cr_assert(a.cpu.kv.bytes == b.cpu.kv.bytes && memcmp(a.cpu.kv.mem, b.cpu.kv.mem, a.cpu.kv.bytes) == 0,
              "%s, %d tokens: KV caches differ", name, n);
    engine_free(&a), engine_free(&b);
    free(tokens);
    model_free(&m);
}

static const char *synthetic(const char *shape) {
    static char path[4096], cmd[8192];
    snprintf(path, sizeof path, "%s", test_path(shape));
    snprintf(cmd, sizeof cmd, "%s/seam-synth %s/models/%s.shape -o %s 2>/dev/null", SEAM_BINARY_DIR, SEAM_SOURCE_DIR,
             shape, path);
    cr_assert_eq(system(cmd), 0, "seam-synth failed: %s", cmd);
    return path;
}

// The default real model (test_require_input).
static const char *gemma(const char *what) {
    static const char path[] = SEAM_SOURCE_DIR "/models/gemma-3-270m-q4_k_m.gguf";
    test_require_input(path, what, "models/get-default-model.sh");
    return path;
}

static const seam_kv_config F16 = {0}, Q8_0 = {.k = KV_Q8_0, .v = KV_Q8_0};

Test(engine, prefill_equals_decode_dense) { prefill_matches_decode_file(synthetic("small"), "small", PREFILL_N, F16); }
Test(engine, prefill_equals_decode_moe) { prefill_matches_decode_file(synthetic("moe-small"), "moe-small", PREFILL_N, F16); }
Test(engine, prefill_equals_decode_gemma) {
    prefill_matches_decode_file(gemma("Gemma 3's prefill against its decode"), "gemma-3-270m", PREFILL_N, F16);
}
// (under the sanitizers 640 tokens: ten batches, the same code as 32)
Test(engine, prefill_equals_decode_2k) {
    const int n = UNDER_ASAN ? 10 * SEAM_UBATCH : 2048;
    prefill_matches_decode_file(synthetic("small"), "small", n, F16);
    prefill_matches_decode_file(synthetic("small"), "small, q8_0 cache", n, Q8_0);
}

// A sliding layer's ring of its window (gemma3's local layers, window 512)
// gives the logits of the whole cache, bit for bit, past the point where the
// ring wraps: a prompt as long as the ring in batches, then 100 decoded one
// at a time, with either cache type. Under the sanitizers, on the synthetic
// tiny Gemma 3 (window 8): the same code through the same wrap, where Gemma's
// 262144-row head takes minutes a run.
Test(engine, sliding_ring_equals_full_cache, .timeout = 600) {
    seam_model m;
    seam_error e = {{0}};
    const char *path = UNDER_ASAN ? synthetic("tiny-gemma3") : gemma("Gemma 3's sliding ring against its full cache");
    cr_assert_eq(model_load(&m, path, &e), 0, "%s", e.msg);
    cr_assert_gt(m.cfg.n_swa, 0);
    const int N_CTX = m.cfg.n_swa + SEAM_UBATCH + 100, N_PROMPT = N_CTX - 100;  // the ring: window + a batch
    int *tokens = malloc(sizeof(int) * (size_t)N_CTX);
    uint64_t rng = 21;
    for (int i = 0; i < N_CTX; i++) tokens[i] = (int)(test_rng_next(&rng) % (uint64_t)m.cfg.n_vocab);
    for (int ty = 0; ty < 2; ty++) {
        seam_kv_config ring = ty ? Q8_0 : F16, full = ring;
        full.swa_full = true;
        seam_engine a, b;
        cr_assert_eq(engine_init_kv(&a, &m, N_CTX, ring, &e), 0, "%s", e.msg);
        cr_assert_eq(engine_init_kv(&b, &m, N_CTX, full, &e), 0, "%s", e.msg);
        cr_assert(a.cpu.kv.rows[0] < N_CTX && b.cpu.kv.rows[0] == N_CTX && a.cpu.kv.bytes < b.cpu.kv.bytes,
                  "layer 0 is a sliding layer: a ring of %d positions, not %d", a.cpu.kv.rows[0], b.cpu.kv.rows[0]);
        cr_assert_eq(engine_set_threads(&a, 2, &e), 0, "%s", e.msg);
        cr_assert_eq(engine_set_threads(&b, 2, &e), 0, "%s", e.msg);
        float *la, *lb;
        cr_assert_eq(engine_prefill(&a, tokens, N_PROMPT, 0, &la, &e), 0, "%s", e.msg);
        cr_assert_eq(engine_prefill(&b, tokens, N_PROMPT, 0, &lb, &e), 0, "%s", e.msg);
        cr_assert(memcmp(la, lb, sizeof(float) * m.cfg.n_vocab) == 0, "%s: the prompt's last logits differ",
                  plan_kv_type_name[ring.k]);
        for (int p = N_PROMPT; p < N_CTX; p++) {
            cr_assert_eq(engine_forward(&a, tokens[p], p, &la, &e), 0, "%s", e.msg);
            cr_assert_eq(engine_forward(&b, tokens[p], p, &lb, &e), 0, "%s", e.msg);
            cr_assert(memcmp(la, lb, sizeof(float) * m.cfg.n_vocab) == 0, "%s: logits differ at position %d",
                      plan_kv_type_name[ring.k], p);
        }
        engine_free(&a), engine_free(&b);
    }
    free(tokens);
    model_free(&m);
}

// ---------------------------------------------------------------------------
// Layer by layer: with the engine timing its layers, every batch has one
// record a layer (and the head's on the last token), on the device that ran
// it, with the bytes it reads; each segment's records add up to its time;
// and the timing changes no logit.

// Runs a prompt of 5 tokens and `decode` more under plan (NULL: the CPU
// alone), timing layers when `timed`; checks the records and returns the
// last logits (a copy).
static float *run_timed(const seam_model *m, const seam_plan *plan, bool timed, int decode) {
    const seam_config *c = &m->cfg;
    const int prompt[5] = {3, 14, 15, 92, 65}, n_ctx = 5 + decode;
    seam_engine eng;
    seam_error e = {{0}};
    cr_assert_eq(engine_init(&eng, m, n_ctx, &e), 0, "%s", e.msg);
    if (plan) cr_assert_eq(engine_place(&eng, plan, true, &e), 0, "%s", e.msg);
    engine_time_layers(&eng, timed);
    float *logits;
    cr_assert_eq(engine_prefill(&eng, prompt, 5, 0, &logits, &e), 0, "%s", e.msg);
    for (int i = 0; i < decode; i++)
        cr_assert_eq(engine_forward(&eng, (7 * i + 1) % c->n_vocab, 5 + i, &logits, &e), 0, "%s", e.msg);
    const seam_timeline *t = &eng.timeline;
    if (!timed) cr_assert_eq(t->n_layers, 0, "layers timed without being asked");
    for (size_t k = 0; timed && k < t->n_tokens; k++) {
        const seam_token_time *tt = &t->tokens[k];
        if (tt->prefill) continue;
        double sum[SEG_COUNT] = {0};
        int next = 0;
        for (size_t i = 0; i < t->n_layers; i++) {
            const seam_layer_time *lt = &t->layers[i];
            if (lt->token != tt->token) continue;
            cr_assert_eq(lt->layer, next++, "token %d: layer %d's record out of order", tt->token, lt->layer);
            cr_assert_eq(lt->n, 1);
            cr_assert_eq(lt->on_gpu, lt->layer < eng.gpu_layers || (lt->layer == c->n_layers && eng.head_on_gpu));
            const seam_layer_time want = plan_layer_record(m, eng.cpu.kv.cfg, lt->layer, tt->pos);
            cr_assert(lt->weight_bytes == want.weight_bytes && lt->kv_bytes == want.kv_bytes && lt->pos == tt->pos,
                      "layer %d's bytes", lt->layer);
            sum[lt->on_gpu ? SEG_GPU : lt->layer == c->n_layers ? SEG_HEAD : SEG_CPU] += lt->us;
        }
        cr_assert_eq(next, c->n_layers + 1, "token %d: %d layer records, not %d and the head", tt->token, next,
                     c->n_layers);
        for (int s = 0; s < SEG_COUNT; s++)
            cr_assert(fabs(sum[s] - tt->segment_us[s]) <= 0.03 * tt->segment_us[s] + 0.5,
                      "token %d: segment %d's layers add up to %.1f us of its %.1f", tt->token, s, sum[s],
                      tt->segment_us[s]);
    }
    // the prompt's batch: one record a layer for its 5 tokens
    for (size_t i = 0; timed && !plan && i < (size_t)c->n_layers; i++)
        cr_assert(t->layers[i].n == 5 && t->layers[i].layer == (int)i && t->layers[i].token == 0,
                  "the prompt's batch: layer %zu's record", i);
    float *out = malloc(sizeof(float) * c->n_vocab);
    memcpy(out, logits, sizeof(float) * c->n_vocab);
    engine_free(&eng);
    return out;
}

Test(engine, layers_are_timed_one_by_one_and_add_up) {
    seam_model m;
    seam_error e = {{0}};
    cr_assert_eq(model_load(&m, tiny_model(), &e), 0, "%s", e.msg);
    float *a = run_timed(&m, NULL, true, 6), *b = run_timed(&m, NULL, false, 6);
    cr_assert(memcmp(a, b, sizeof(float) * m.cfg.n_vocab) == 0, "timing the layers changed the logits");
    free(a), free(b);
    model_free(&m);
}

// ---------------------------------------------------------------------------
// The GPU segment's graph: captured on the second token (the first runs op
// by op, so that every kernel has run before a capture records it) and
// replayed after, the same kernels on the same data as op by op, so the
// same logits bit for bit.

#ifdef SEAM_HAVE_CUDA
#include "seam_cuda.h"

// Every crossing of a run carries its shape's bytes: the hidden state
// (n_embd floats) each way, the logits (n_vocab) down from a head on the
// GPU, an MoE layer's experts' input and router logits down and their sum
// up. A short copy leaves the host buffer's old values in place, which the
// logits alone may not show (the split goldens passed a crossing one float
// short at 0.40 std).
static void check_crossings(const seam_model *m, const seam_plan *plan, const seam_timeline *tl) {
    const seam_config *c = &m->cfg;
    const uint64_t hidden = sizeof(float) * (uint64_t)c->n_embd, logits = sizeof(float) * (uint64_t)c->n_vocab,
                   router = sizeof(float) * (uint64_t)c->n_expert;
    int experts_down = 0, experts_routers = 0;
    for (size_t i = 0; i < tl->n_crossings; i++) {
        const seam_crossing *x = &tl->crossings[i];
        if (x->dir == CROSS_WEIGHTS) {
            cr_assert_gt(x->bytes, 0, "token %d: layer %d's weights crossed empty", x->token, x->layer);
            continue;
        }
        if (x->experts && x->dir == CROSS_D2H) {
            cr_assert(x->bytes == hidden || x->bytes == router, "token %d, layer %d: an experts' crossing of %llu "
                      "bytes, neither the input (%llu) nor the router's logits (%llu)", x->token, x->layer,
                      (unsigned long long)x->bytes, (unsigned long long)hidden, (unsigned long long)router);
            experts_down += x->bytes == hidden, experts_routers += x->bytes == router;
            continue;
        }
        const bool head_out = x->dir == CROSS_D2H && !x->experts && x->layer == c->n_layers && plan->head == DEV_GPU;
        const uint64_t want = head_out ? logits : hidden;
        cr_assert_eq(x->bytes, want, "token %d: a %s crossing before layer %d of %llu bytes, its shape %llu", x->token,
                     timeline_direction_name[x->dir], x->layer, (unsigned long long)x->bytes,
                     (unsigned long long)want);
    }
    cr_assert_eq(experts_down, experts_routers, "%d experts' inputs crossed, %d routers' logits", experts_down,
                 experts_routers);
}

// The logits after each of n tokens with layers on the GPU as req asks (its
// n_ctx: n), captured as a graph or run op by op, each crossing checked
// against its shape; *why_no_graph: the segment's capture failure, if any
// (a static copy).
static float *run_planned(const seam_model *m, seam_plan_request req, const int *tokens, int n, bool graph,
                          const char **why_no_graph) {
    static char why[512];
    seam_engine eng;
    seam_plan plan;
    seam_error e = {{0}};
    req.n_ctx = n, req.gpu_budget = 1ull << 40;
    cr_assert_eq(plan_make(&plan, m, &req, &e), 0, "%s", e.msg);
    cr_assert_eq(engine_init(&eng, m, n, &e), 0, "%s", e.msg);
    cr_assert_eq(engine_place(&eng, &plan, graph, &e), 0, "%s", e.msg);
    float *all = malloc(sizeof(float) * (size_t)n * m->cfg.n_vocab), *logits;
    for (int i = 0; i < n; i++) {
        cr_assert_eq(engine_forward(&eng, tokens[i], i, &logits, &e), 0, "token %d: %s", i, e.msg);
        memcpy(all + (size_t)i * m->cfg.n_vocab, logits, sizeof(float) * m->cfg.n_vocab);
    }
    check_crossings(m, &plan, &eng.timeline);
    const char *failure = gpu_segment_graph_failure(eng.gpu);
    snprintf(why, sizeof why, "%s", failure ? failure : "");
    *why_no_graph = failure ? why : NULL;
    engine_free(&eng);
    return all;
}

// With 2 of tiny's 4 layers on the GPU.
static float *run_gpu(const seam_model *m, const int *tokens, int n, bool graph, const char **why_no_graph) {
    return run_planned(m, (seam_plan_request){.gpu_layers = 2, .head = -1}, tokens, n, graph, why_no_graph);
}

static const int gpu_tokens[] = {1, 17, 300, 42, 7, 255};
enum { N_GPU_TOKENS = sizeof gpu_tokens / sizeof *gpu_tokens };

Test(engine, gpu_graph_replays_what_op_by_op_runs) {
    if (seam_cuda_device_count() == 0) test_no_gpu("cudaGetDeviceCount found none");
    seam_model m;
    seam_error e = {{0}};
    cr_assert_eq(model_load(&m, tiny_model(), &e), 0, "%s", e.msg);
    const char *why_a, *why_b;
    float *a = run_gpu(&m, gpu_tokens, N_GPU_TOKENS, true, &why_a), *b = run_gpu(&m, gpu_tokens, N_GPU_TOKENS, false, &why_b);
    cr_assert_null(why_a, "the capture failed: %s", why_a);
    cr_assert(memcmp(a, b, sizeof(float) * N_GPU_TOKENS * m.cfg.n_vocab) == 0, "graph and op-by-op logits differ");
    free(a), free(b);
    model_free(&m);
}

// The same with 2 of tiny's 4 layers on the GPU, the graph on: the events
// between the layers are recorded inside it, and its layers add up to the
// GPU segment.
Test(engine, gpu_layers_are_timed_inside_the_graph) {
    if (seam_cuda_device_count() == 0) test_no_gpu("cudaGetDeviceCount found none");
    seam_model m;
    seam_plan plan;
    seam_error e = {{0}};
    cr_assert_eq(model_load(&m, tiny_model(), &e), 0, "%s", e.msg);
    const seam_plan_request req = {.gpu_layers = 2, .head = -1, .n_ctx = 11, .gpu_budget = 1ull << 40};
    cr_assert_eq(plan_make(&plan, &m, &req, &e), 0, "%s", e.msg);
    float *a = run_timed(&m, &plan, true, 6), *b = run_timed(&m, &plan, false, 6);
    cr_assert(memcmp(a, b, sizeof(float) * m.cfg.n_vocab) == 0, "timing the GPU's layers changed the logits");
    free(a), free(b);
    model_free(&m);
}

// The logits of a split (n tokens, V each) against the CPU's: the CUDA
// kernels sum in their own order, so they are held to the split tolerance
// of the CPU's (0.5 of their spread, as golden::split), and the top token to
// the CPU's wherever the CPU's margin is wider.
static void expect_near_cpu(const float *cpu, const float *split, int n, int V, const char *what) {
    for (int p = 0; p < n; p++) {
        const float *a = cpu + (size_t)p * V, *b = split + (size_t)p * V;
        double mean = 0, var = 0, worst = 0;
        int best = 0, second = -1;
        for (int i = 0; i < V; i++) mean += a[i] / V;
        for (int i = 0; i < V; i++) {
            var += (a[i] - mean) * (a[i] - mean) / V, worst = fmax(worst, fabs(a[i] - b[i]));
            if (a[i] > a[best]) second = best, best = i;
            else if (second < 0 || a[i] > a[second]) second = i;
        }
        const double std = sqrt(var);
        cr_expect(worst <= 0.5 * std, "%s, token %d: max |diff| %.4g = %.3g std", what, p, worst, worst / std);
        int top = 0;
        for (int i = 1; i < V; i++) top = b[i] > b[top] ? i : top;
        if (a[best] - a[second] > 0.5 * std)
            cr_expect_eq(top, best, "%s, token %d: top token %d, the CPU's %d", what, p, top, best);
    }
}

// The overflows on the GPU (--overflow mapped: the layers past the resident
// ones read their weights over the bus; stream: copied in while earlier
// layers compute), with none and half of tiny's layers resident, the head
// on either side: within the split tolerance of the CPU's logits, every
// crossing (the streamed weights among them) of its shape.
Test(engine, mapped_and_streamed_overflow) {
    if (seam_cuda_device_count() == 0) test_no_gpu("cudaGetDeviceCount found none");
    seam_model m;
    seam_error e = {{0}};
    cr_assert_eq(model_load(&m, tiny_model(), &e), 0, "%s", e.msg);
    const int V = m.cfg.n_vocab, L = m.cfg.n_layers;
    float *cpu = run(&m, gpu_tokens, N_GPU_TOKENS, 1);
    const seam_overflow modes[] = {OVERFLOW_MAPPED, OVERFLOW_STREAM};
    for (int mi = 0; mi < 2; mi++)
        for (int resident = 0; resident <= L / 2; resident += L / 2)
            for (int head = DEV_CPU; head <= DEV_GPU; head++) {
                char what[128];
                snprintf(what, sizeof what, "--overflow %s, %d of %d layers resident, the head on the %s",
                         plan_overflow_name[modes[mi]], resident, L, head == DEV_GPU ? "GPU" : "CPU");
                const char *why;
                float *split = run_planned(
                    &m, (seam_plan_request){.gpu_layers = resident, .head = head, .overflow = modes[mi]}, gpu_tokens,
                    N_GPU_TOKENS, true, &why);
                expect_near_cpu(cpu, split, N_GPU_TOKENS, V, what);
                free(split);
            }
    free(cpu);
    model_free(&m);
}

// Experts on the CPU beside GPU layers (--n-cpu-moe): every layer of
// moe-mixed (its up experts of another type than its gate experts) on the
// GPU and the experts of the first two, then of all four, in host memory,
// run by the CPU backend on the GPU's hidden state, near the CPU's logits
// (expect_near_cpu).
Test(engine, experts_on_the_cpu_beside_gpu_layers) {
    if (seam_cuda_device_count() == 0) test_no_gpu("cudaGetDeviceCount found none");
    seam_model m;
    seam_error e = {{0}};
    cr_assert_eq(model_load(&m, synthetic("moe-mixed"), &e), 0, "%s", e.msg);
    const int V = m.cfg.n_vocab, L = m.cfg.n_layers;
    float *cpu = run(&m, gpu_tokens, N_GPU_TOKENS, 1);
    for (int kept = L / 2; kept <= L; kept += L / 2) {
        const char *why;
        float *split = run_planned(&m, (seam_plan_request){.gpu_layers = L, .head = -1, .n_cpu_moe = kept},
                                   gpu_tokens, N_GPU_TOKENS, true, &why);
        char what[96];
        snprintf(what, sizeof what, "experts of %d layers on the CPU", kept);
        expect_near_cpu(cpu, split, N_GPU_TOKENS, V, what);
        free(split);
    }
    free(cpu);
    model_free(&m);
}

// A prompt through the GPU layers as matrix products (--gpu-prefill gemm:
// f16 weights on cuBLAS) against the token path, position by position: the
// K and V rows every layer cached. The two differ by design (f16 products
// against int8 dots) by a little everywhere; a token of the batch at
// another's position (a RoPE, KV slot or attention range taken from the
// wrong token), or seeing a position it must not, moves its rows by their
// whole size, where the last token's logits alone moved 0.2 std.
static void kv_rows_of(const seam_model *m, const int *tokens, int n, seam_gpu_prefill mode, float **k, float **v) {
    const seam_config *c = &m->cfg;
    const int L = c->n_layers, kv_dim = c->n_kv_heads * c->head_dim;
    seam_engine eng;
    seam_plan plan;
    seam_error e = {{0}};
    const seam_plan_request req = {.gpu_layers = L, .head = -1, .n_ctx = n, .gpu_budget = 1ull << 40, .gpu_prefill = mode};
    cr_assert_eq(plan_make(&plan, m, &req, &e), 0, "%s", e.msg);
    cr_assert(engine_init_kv(&eng, m, n, plan.cache, &e) == 0 && engine_place(&eng, &plan, true, &e) == 0, "%s", e.msg);
    cr_assert_eq(gpu_segment_gemm(eng.gpu, n), mode == GPU_PREFILL_GEMM, "the GEMM path is %staken",
                 mode == GPU_PREFILL_GEMM ? "not " : "");
    float *logits;
    cr_assert_eq(engine_prefill(&eng, tokens, n, 0, &logits, &e), 0, "%s", e.msg);
    *k = malloc(sizeof(float) * (size_t)L * n * kv_dim), *v = malloc(sizeof(float) * (size_t)L * n * kv_dim);
    seam_f16 *kr = malloc(sizeof(seam_f16) * (size_t)n * kv_dim), *vr = malloc(sizeof(seam_f16) * (size_t)n * kv_dim);
    for (int il = 0; il < L; il++) {
        size_t row;
        cr_assert_eq(gpu_segment_kv_rows(eng.gpu, il, 0, n, kr, vr, &row, &e), 0, "%s", e.msg);
        cr_assert_eq(row, sizeof(seam_f16) * (size_t)kv_dim, "an f16 cache's rows");
        for (size_t i = 0; i < (size_t)n * kv_dim; i++)
            (*k)[(size_t)il * n * kv_dim + i] = seam_f16_to_f32(kr[i]), (*v)[(size_t)il * n * kv_dim + i] = seam_f16_to_f32(vr[i]);
    }
    free(kr), free(vr);
    engine_free(&eng);
}

// ||a - b|| / ||b|| over n values.
static double rel_error(const float *a, const float *b, int n) {
    double d = 0, r = 0;
    for (int i = 0; i < n; i++) d += (double)(a[i] - b[i]) * (a[i] - b[i]), r += (double)b[i] * b[i];
    return sqrt(d / (r > 0 ? r : 1));
}

// Rows of a layer lie this close between the two paths (measured on the
// emulated device: the worst row of any layer of small at 0.026), and a row
// of another position lies near sqrt(2) away.
#define GEMM_KV_ROW_TOL 0.1

Test(engine, gemm_prefill_writes_the_token_paths_kv_rows) {
    if (seam_cuda_device_count() == 0) test_no_gpu("cudaGetDeviceCount found none");
    seam_model m;
    seam_error e = {{0}};
    cr_assert_eq(model_load(&m, synthetic("small"), &e), 0, "%s", e.msg);
    enum { N = UNDER_ASAN ? 12 : 40 };  // the sanitizers check the same kernels on fewer rows
    int tokens[N];
    for (int i = 0; i < N; i++) tokens[i] = (i * 37 + 11) % m.cfg.n_vocab;
    float *kg, *vg, *kt, *vt;
    kv_rows_of(&m, tokens, N, GPU_PREFILL_GEMM, &kg, &vg);
    kv_rows_of(&m, tokens, N, GPU_PREFILL_TOKENS, &kt, &vt);
    const int kv_dim = m.cfg.n_kv_heads * m.cfg.head_dim;
    double worst = 0;
    for (int il = 0; il < m.cfg.n_layers; il++)
        for (int t = 0; t < N; t++) {
            const size_t at = ((size_t)il * N + t) * kv_dim;
            const double ek = rel_error(kg + at, kt + at, kv_dim), ev = rel_error(vg + at, vt + at, kv_dim);
            worst = fmax(worst, fmax(ek, ev));
            cr_expect(ek <= GEMM_KV_ROW_TOL && ev <= GEMM_KV_ROW_TOL,
                      "layer %d, position %d: the GEMM prefill's K row lies %.3g, its V row %.3g from the token path's "
                      "(tolerance %.2g)", il, t, ek, ev, GEMM_KV_ROW_TOL);
            if (t > 0)  // the tolerance tells positions apart
                cr_assert_gt(rel_error(kt + at - kv_dim, kt + at, kv_dim), 4 * GEMM_KV_ROW_TOL,
                             "layer %d: positions %d and %d have nearly the same K row", il, t - 1, t);
        }
    cr_log_info("the GEMM prefill's K and V rows: the worst lies %.3g from the token path's", worst);
    free(kg), free(vg), free(kt), free(vt);
    model_free(&m);
}

#ifdef SEAM_CUDA_EMU
#include "emu_hooks.h"

Test(engine, a_failed_capture_is_not_tried_again) {
    // every capture fails (the emulator's injection): the tokens still run,
    // op by op, after one capture, and the reason is kept for the report
    setenv("SEAM_EMU_FAIL_CAPTURE", "1", 1);
    seam_model m;
    seam_error e = {{0}};
    cr_assert_eq(model_load(&m, tiny_model(), &e), 0, "%s", e.msg);
    const char *why, *none;
    float *a = run_gpu(&m, gpu_tokens, N_GPU_TOKENS, true, &why);
    cr_assert_eq(seam_emu_captures_begun(), 1, "captures begun over %d tokens", N_GPU_TOKENS);
    cr_assert(why && strstr(why, "cudaStreamEndCapture"), "the capture's failure: %s", why ? why : "(none)");
    float *b = run_gpu(&m, gpu_tokens, N_GPU_TOKENS, false, &none);
    cr_assert(memcmp(a, b, sizeof(float) * N_GPU_TOKENS * m.cfg.n_vocab) == 0, "the fallback's logits differ");
    free(a), free(b);
    model_free(&m);
}
#endif
#endif
