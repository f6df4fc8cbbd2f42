// test_plan.c — the split's memory model (plan.c): where each layer's weights
// and KV cache go for the three overflow placements, what the GPU budget
// admits, and the errors that name what to do. Plans need no GPU: a budget
// plans for one this machine may not have, as `seam plan --gpu-mem` does.
// Then the KV cache's accounting (types, sliding-window rings) against what
// the engine allocates, and what the process holds against the prediction.
#include <criterion/criterion.h>
#include <malloc.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "engine/engine.h"
#include "gpu/gpu_segment.h"
#include "helpers.h"
#include "plan/memstat.h"
#include "model/model.h"
#include "plan/plan.h"

static seam_model model;

// The synthetic model of models/SHAPE.shape, written by each test's process
// to a file of its own (tests may run side by side).
static void load_synthetic(seam_model *m, const char *shape) {
    char name[64], path[4096], cmd[8192];
    snprintf(name, sizeof name, "plan-%s-%d.gguf", shape, (int)getpid());
    snprintf(path, sizeof path, "%s", test_path(name));
    snprintf(cmd, sizeof cmd, "%s/seam-synth %s/models/%s.shape -o %s 2>/dev/null", SEAM_BINARY_DIR,
             SEAM_SOURCE_DIR, shape, path);
    cr_assert_eq(system(cmd), 0, "seam-synth failed: %s", cmd);
    seam_error e = {{0}};
    cr_assert_eq(model_load(m, path, &e), 0, "%s", e.msg);
    unlink(path);  // the mapping stays
}

// The synthetic "small" model (6 layers, separate head).
static void load_small(void) { load_synthetic(&model, "small"); }

static void unload(void) { model_free(&model); }

static seam_plan plan_of(int gpu_layers, seam_overflow overflow, uint64_t budget) {
    const seam_plan_request req = {.gpu_layers = gpu_layers, .head = -1, .overflow = overflow, .n_ctx = 64,
                                   .gpu_budget = budget};
    seam_plan p;
    seam_error e = {{0}};
    cr_assert_eq(plan_make(&p, &model, &req, &e), 0, "%d GPU layers, %s: %s", gpu_layers,
                 plan_overflow_name[overflow], e.msg);
    return p;
}

TestSuite(plan, .init = load_small, .fini = unload);

// Every overflow puts the same weights in the same place -- the placements
// differ in where the rest are computed -- and the KV cache goes where a
// layer is computed.
Test(plan, overflow_placements_account_their_memory) {
    const int L = model.cfg.n_layers, n = 2;
    const uint64_t big = 1ull << 40;
    const seam_plan cpu = plan_of(n, OVERFLOW_CPU, big), mapped = plan_of(n, OVERFLOW_MAPPED, big),
                    stream = plan_of(n, OVERFLOW_STREAM, big);
    uint64_t rest = 0, largest = 0;
    for (int il = n; il < L; il++) {
        rest += model_layer_bytes(&model, il);
        largest = model_layer_bytes(&model, il) > largest ? model_layer_bytes(&model, il) : largest;
    }
    cr_assert_eq(plan_gpu_computed_layers(&cpu), n);
    cr_assert_eq(plan_gpu_computed_layers(&mapped), L);
    cr_assert_eq(plan_gpu_computed_layers(&stream), L);
    // the CPU overflow: the rest's KV on the CPU, the head with the last layer
    cr_assert_eq(cpu.kv[DEV_GPU] * (L - n), cpu.kv[DEV_CPU] * n, "KV split by layers");
    cr_assert_eq(cpu.head, DEV_CPU);
    cr_assert_eq(cpu.pinned, 0);
    // on the GPU from host memory: every layer's KV on the GPU, the head too,
    // the rest's weights pinned in host memory and not in GPU memory
    for (int k = 0; k < 2; k++) {
        const seam_plan *p = k ? &stream : &mapped;
        cr_assert_eq(p->kv[DEV_CPU], 0, "%s: KV left on the CPU", plan_overflow_name[p->overflow]);
        cr_assert_eq(p->kv[DEV_GPU], cpu.kv[DEV_GPU] + cpu.kv[DEV_CPU]);
        cr_assert_eq(p->head, DEV_GPU);
        cr_assert_eq(p->pinned, rest, "%s: pinned %llu, want %llu", plan_overflow_name[p->overflow],
                     (unsigned long long)p->pinned, (unsigned long long)rest);
        cr_assert_eq(p->weights[DEV_GPU] - cpu.weights[DEV_GPU],
                     model.w.output.n_bytes + model.w.output_norm.n_bytes, "only the head joins the GPU");
    }
    // stream: two staging buffers of the largest overflow layer
    cr_assert_eq(stream.scratch[DEV_GPU] - mapped.scratch[DEV_GPU], 2 * largest);
}

// The batched prefill's GEMM buffers (the batch's activations and the f16
// copy of the largest weight matrix) are in the GPU scratch only under the
// modes that take the GEMM, which also make them (gpu_segment_init): a
// default plan (--gpu-prefill tokens) counts none; gemm and auto count
// exactly gpu_segment_prefill_bytes; MoE layers, which take no batch, none.
Test(plan, gemm_scratch_only_where_the_prefill_takes_it) {
    const int L = model.cfg.n_layers;
    const struct {
        int n;
        seam_overflow overflow;
    } splits[] = {{1, OVERFLOW_CPU}, {L, OVERFLOW_CPU}, {0, OVERFLOW_MAPPED}, {L / 2, OVERFLOW_STREAM}};
    for (size_t si = 0; si < sizeof splits / sizeof *splits; si++) {
        seam_plan p[GPU_PREFILL_COUNT];
        for (int k = 0; k < GPU_PREFILL_COUNT; k++) {
            const seam_plan_request req = {.gpu_layers = splits[si].n, .head = -1, .overflow = splits[si].overflow,
                                           .n_ctx = 64, .gpu_budget = 1ull << 40, .gpu_prefill = (seam_gpu_prefill)k};
            seam_error e = {{0}};
            cr_assert_eq(plan_make(&p[k], &model, &req, &e), 0, "%s: %s", gpu_prefill_name[k], e.msg);
            cr_assert_eq(p[k].gpu_prefill, (seam_gpu_prefill)k, "the plan carries the mode to gpu_segment_init");
        }
        const seam_plan *tokens = &p[GPU_PREFILL_TOKENS];
        const int computed = plan_gpu_computed_layers(tokens);
        // at least the f16 copy of the widest matrix the GPU layers hold
        uint64_t largest = 0;
        for (int il = 0; il < computed; il++) {
            const seam_tensor *w = &model.w.layers[il].w_down;
            largest = (uint64_t)(w->rows * w->cols) > largest ? (uint64_t)(w->rows * w->cols) : largest;
        }
        const uint64_t gemm = gpu_segment_prefill_bytes(&model, computed, GPU_PREFILL_GEMM);
        cr_assert_geq(gemm, 2 * largest, "-ngl %d: %llu GEMM bytes hold no f16 copy of down's %llu weights",
                      splits[si].n, (unsigned long long)gemm, (unsigned long long)largest);
        cr_assert_eq(gpu_segment_prefill_bytes(&model, computed, GPU_PREFILL_TOKENS), 0);
        for (int k = GPU_PREFILL_GEMM; k < GPU_PREFILL_COUNT; k++) {
            cr_assert_eq(p[k].scratch[DEV_GPU] - tokens->scratch[DEV_GPU], gemm,
                         "-ngl %d --overflow %s --gpu-prefill %s: %llu more GPU scratch bytes than tokens, want %llu",
                         splits[si].n, plan_overflow_name[splits[si].overflow], gpu_prefill_name[k],
                         (unsigned long long)(p[k].scratch[DEV_GPU] - tokens->scratch[DEV_GPU]),
                         (unsigned long long)gemm);
            cr_assert_eq(p[k].weights[DEV_GPU], tokens->weights[DEV_GPU]);
            cr_assert_eq(p[k].kv[DEV_GPU], tokens->kv[DEV_GPU]);
        }
    }
    // no GPU part: no GPU scratch, whatever the mode
    const seam_plan_request cpu = {.head = -1, .n_ctx = 64, .gpu_budget = 1ull << 40, .gpu_prefill = GPU_PREFILL_GEMM};
    seam_plan p;
    seam_error e = {{0}};
    cr_assert_eq(plan_make(&p, &model, &cpu, &e), 0, "%s", e.msg);
    cr_assert_eq(p.scratch[DEV_GPU], 0);
    // MoE layers run their experts token by token: no GEMM buffers under gemm
    seam_model moe;
    load_synthetic(&moe, "moe-small");
    seam_plan moe_plan[2];
    for (int k = 0; k < 2; k++) {
        const seam_plan_request req = {.gpu_layers = moe.cfg.n_layers, .head = -1, .n_ctx = 64,
                                       .gpu_budget = 1ull << 40, .gpu_prefill = k ? GPU_PREFILL_GEMM : GPU_PREFILL_TOKENS};
        cr_assert_eq(plan_make(&moe_plan[k], &moe, &req, &e), 0, "%s", e.msg);
    }
    cr_assert_eq(moe_plan[1].scratch[DEV_GPU], moe_plan[0].scratch[DEV_GPU]);
    model_free(&moe);
}

// The budget: the largest count that fits is accepted, one more is refused
// with that count in the message; auto picks it; no GPU refuses GPU work.
Test(plan, budget_and_errors) {
    const seam_plan all = plan_of(model.cfg.n_layers, OVERFLOW_CPU, 1ull << 40);
    const uint64_t budget = plan_total(&all, DEV_GPU) - 1;  // everything but a byte
    const seam_plan_request fit = {.gpu_layers = -1, .head = -1, .n_ctx = 64, .gpu_budget = budget};
    const int best = plan_max_gpu_layers(&model, &fit);
    cr_assert(best < model.cfg.n_layers && best > 0, "best %d", best);
    seam_plan p;
    seam_error e = {{0}};
    cr_assert_eq(plan_make(&p, &model, &fit, &e), 0, "%s", e.msg);
    cr_assert_eq(p.gpu_layers, best);
    seam_plan_request over = fit;
    over.gpu_layers = best + 1;
    cr_assert_eq(plan_make(&p, &model, &over, &e), -1);
    char want[32];
    snprintf(want, sizeof want, "at most %d layers fit", best);
    cr_assert(strstr(e.msg, want), "%s", e.msg);
    const seam_plan_request no_gpu = {.gpu_layers = 1, .head = -1, .n_ctx = 64};
    cr_assert_eq(plan_make(&p, &model, &no_gpu, &e), -1);
    cr_assert(strstr(e.msg, "CUDA device"), "%s", e.msg);
    const seam_plan_request mapped_no_gpu = {.gpu_layers = 0, .head = -1, .overflow = OVERFLOW_MAPPED, .n_ctx = 64};
    cr_assert_eq(plan_make(&p, &model, &mapped_no_gpu, &e), -1);
    cr_assert(strstr(e.msg, "--overflow mapped"), "%s", e.msg);
    // -ngl past the model's layers is every layer, and the head, as llama.cpp's -ngl 99
    const seam_plan_request ngl_99 = {.gpu_layers = 99, .head = -1, .n_ctx = 64, .gpu_budget = 1ull << 40};
    cr_assert_eq(plan_make(&p, &model, &ngl_99, &e), 0, "%s", e.msg);
    cr_assert_eq(p.gpu_layers, model.cfg.n_layers);
    cr_assert_eq(p.head, DEV_GPU);
}

// --head gpu reads the last layer's output: with layers left to the CPU it
// is refused (it would run on a hidden state the CPU layers have not seen),
// with every layer computed on the GPU -- resident or mapped -- it is not.
Test(plan, head_on_the_gpu_needs_every_layer_there) {
    const int L = model.cfg.n_layers;
    seam_plan p;
    seam_error e = {{0}};
    for (int n = 0; n < L; n++) {
        const seam_plan_request partial = {.gpu_layers = n, .head = DEV_GPU, .n_ctx = 64, .gpu_budget = 1ull << 40};
        cr_assert_eq(plan_make(&p, &model, &partial, &e), -1, "-ngl %d --head gpu was accepted", n);
        cr_assert(strstr(e.msg, "--head gpu needs every layer"), "%s", e.msg);
    }
    const seam_plan_request all = {.gpu_layers = L, .head = DEV_GPU, .n_ctx = 64, .gpu_budget = 1ull << 40};
    cr_assert_eq(plan_make(&p, &model, &all, &e), 0, "%s", e.msg);
    cr_assert_eq(p.head, DEV_GPU);
    const seam_plan_request mapped = {.gpu_layers = 0, .head = DEV_GPU, .overflow = OVERFLOW_MAPPED, .n_ctx = 64,
                                      .gpu_budget = 1ull << 40};
    cr_assert_eq(plan_make(&p, &model, &mapped, &e), 0, "%s", e.msg);
    const seam_plan_request no_gpu = {.gpu_layers = 0, .head = DEV_GPU, .n_ctx = 64};
    cr_assert_eq(plan_make(&p, &model, &no_gpu, &e), -1);
    cr_assert(strstr(e.msg, "--head gpu needs a CUDA device"), "%s", e.msg);
}

// No flags make a plan that needs more GPU memory than its budget: -ngl
// from auto to past the layers, the head anywhere (llama.cpp's placement,
// which seam plan --hw predicts, included), each overflow, the experts of
// the first layers on the CPU, over budgets from none to all of it.
Test(plan, no_flags_plan_past_the_budget) {
    seam_model moe;
    load_synthetic(&moe, "moe-small");
    const seam_model *const models[] = {&model, &moe};
    for (int mi = 0; mi < 2; mi++) {
        const seam_model *m = models[mi];
        const int L = m->cfg.n_layers;
        seam_plan p;
        seam_error e = {{0}};
        const seam_plan_request all = {.gpu_layers = L, .head = DEV_GPU, .n_ctx = 64, .gpu_budget = 1ull << 40};
        cr_assert_eq(plan_make(&p, m, &all, &e), 0, "%s", e.msg);
        const uint64_t whole = plan_total(&p, DEV_GPU);
        int made = 0;
        for (int step = 0; step <= 17; step++) {
            const uint64_t budget = whole / 16 * (uint64_t)step;
            for (int ngl = -1; ngl <= L + 1; ngl++)
                for (int head = -1; head < DEV_COUNT; head++)
                    for (int apart = 0; apart < 2; apart++)
                        for (int ov = 0; ov < 3; ov++)
                            for (int k = 0; k < 3; k++) {
                                const seam_plan_request req = {.gpu_layers = ngl, .head = head,
                                                               .overflow = (seam_overflow)ov, .n_cpu_moe = k,
                                                               .n_ctx = 64, .gpu_budget = budget,
                                                               .head_apart = apart};
                                if (plan_make(&p, m, &req, &e)) continue;
                                made++;
                                cr_assert_leq(plan_total(&p, DEV_GPU), budget,
                                              "-ngl %d --head %d --overflow %s --n-cpu-moe %d%s: %llu bytes of a "
                                              "%llu budget", ngl, head, plan_overflow_name[ov], k,
                                              apart ? " (head apart)" : "",
                                              (unsigned long long)plan_total(&p, DEV_GPU),
                                              (unsigned long long)budget);
                            }
        }
        cr_assert_gt(made, 1000, "only %d plans were made: the sweep tests little", made);
    }
    model_free(&moe);
}

// The GPU segment's two quantised-activation buffers hold every input the
// segment quantises into them, on a model whose up experts are not of the
// gate experts' type and whose experts are narrower than the model
// (models/moe-mixed.shape): the buffer of the experts' hidden layer also
// takes the up experts' own quantisation of the n_embd-wide layer input.
Test(plan, gpu_scratch_holds_every_quantised_input) {
    seam_model mixed;
    load_synthetic(&mixed, "moe-mixed");
    const gpu_scratch_cols cols = gpu_segment_scratch_cols(&mixed.cfg);
    int mixed_layers = 0;
    for (int il = 0; il < mixed.cfg.n_layers; il++) {
        const seam_layer_weights *l = &mixed.w.layers[il];
        // every matvec's input is quantised into scratch
        const seam_tensor *matrices[] = {&l->wq, &l->wk, &l->wv, &l->wo, &l->ffn_gate_inp, &l->ffn_gate_exps,
                                         &l->ffn_up_exps, &l->ffn_down_exps};
        for (size_t i = 0; i < sizeof matrices / sizeof *matrices; i++)
            cr_assert_leq(matrices[i]->cols, cols.scratch, "layer %d: %.*s takes %lld columns, scratch holds %lld",
                          il, matrices[i]->name_len, matrices[i]->name, (long long)matrices[i]->cols,
                          (long long)cols.scratch);
        // the experts' hidden layer, and up's input when its type is not gate's
        const seam_tensor *gate = &l->ffn_gate_exps, *up = &l->ffn_up_exps, *down = &l->ffn_down_exps;
        cr_assert_leq(down->cols, cols.hidden, "layer %d: down's %lld columns", il, (long long)down->cols);
        if (up->type == gate->type) continue;
        mixed_layers++;
        cr_assert_leq(up->cols, cols.hidden, "layer %d: up (%s, gate %s) quantises %lld columns into a buffer of %lld",
                      il, ggml_type_name(up->type), ggml_type_name(gate->type), (long long)up->cols,
                      (long long)cols.hidden);
    }
    cr_assert_eq(mixed_layers, mixed.cfg.n_layers, "moe-mixed.shape's up experts are not of another type");
    cr_assert_lt(mixed.cfg.n_ff_exp, mixed.cfg.n_embd, "moe-mixed.shape's experts are not narrower than the model");
    cr_assert_leq(mixed.w.output.cols, cols.scratch);
    model_free(&mixed);
}

// The bytes the heap holds for the process, large blocks included.
static uint64_t heap_in_use(void) {
    const struct mallinfo2 mi = mallinfo2();
    return (uint64_t)mi.uordblks + (uint64_t)mi.hblkhd;
}

// The plan counts the KV cache and the scratch the engine allocates, each
// counted apart from the plan's helpers: the KV bytes by hand from the shape
// (both models' caches are 256 values a position and layer: small's 4 KV
// heads of 64, Gemma's one of 256), for every cache type, with and without
// gemma3's rings; the scratch from what the heap holds after engine_init
// beside before, every block kept in the heap's arena so that each costs at
// most its header and alignment.
#define KV_DIM 256
#define KV_ROW_F16 (2 * KV_DIM)           // f16: 2 bytes a value
#define KV_ROW_Q8_0 (KV_DIM / 32 * 34)    // q8_0: blocks of 32 values in 34 bytes
#define HEAP_SLACK (64 * (64 + 48))       // a few dozen blocks, each rounded to 64 with a header and tail
static void kv_accounting_matches_engine(const seam_model *m, const char *name, int rows_ring, int rows_full) {
    static const struct {
        seam_kv_config cache;
        uint64_t row;  // K and V bytes a position and layer
    } caches[] = {{{KV_F16, KV_F16, false}, 2 * KV_ROW_F16},
                  {{KV_Q8_0, KV_Q8_0, false}, 2 * KV_ROW_Q8_0},
                  {{KV_F16, KV_Q8_0, false}, KV_ROW_F16 + KV_ROW_Q8_0},
                  {{KV_Q8_0, KV_Q8_0, true}, 2 * KV_ROW_Q8_0}};
    cr_assert_eq(m->cfg.n_kv_heads * m->cfg.head_dim, KV_DIM, "%s: the hand counts below are for %d values", name,
                 KV_DIM);
    mallopt(M_MMAP_THRESHOLD, 1 << 30);
    for (size_t i = 0; i < sizeof caches / sizeof *caches; i++) {
        const seam_plan_request req = {.head = -1, .n_ctx = 1000, .cache = caches[i].cache};
        const uint64_t kv = caches[i].row * (uint64_t)(caches[i].cache.swa_full ? rows_full : rows_ring);
        seam_plan p;
        seam_engine eng;
        seam_error e = {{0}};
        cr_assert_eq(plan_make(&p, m, &req, &e), 0, "%s: %s", name, e.msg);
        cr_assert_eq(p.kv[DEV_CPU], kv, "%s, cache %zu: the plan counts %llu KV bytes, by hand %llu", name, i,
                     (unsigned long long)p.kv[DEV_CPU], (unsigned long long)kv);
        const uint64_t before = heap_in_use();
        cr_assert_eq(engine_init_kv(&eng, m, req.n_ctx, req.cache, &e), 0, "%s: %s", name, e.msg);
        const uint64_t held = heap_in_use() - before;
        cr_assert_eq(eng.cpu.kv.bytes, kv, "%s, cache %zu: the engine holds %llu KV bytes, by hand %llu", name, i,
                     (unsigned long long)eng.cpu.kv.bytes, (unsigned long long)kv);
        const uint64_t predicted = p.kv[DEV_CPU] + p.scratch[DEV_CPU];
        cr_assert(UNDER_ASAN || (held >= predicted && held <= predicted + HEAP_SLACK),
                  "%s, cache %zu: engine_init took %llu heap bytes, the plan counts %llu (KV %llu, scratch %llu)",
                  name, i, (unsigned long long)held, (unsigned long long)predicted,
                  (unsigned long long)p.kv[DEV_CPU], (unsigned long long)p.scratch[DEV_CPU]);
        engine_free(&eng);
    }
}

Test(plan, kv_accounting_matches_engine) {
    const int L = model.cfg.n_layers;
    kv_accounting_matches_engine(&model, "small", L * 1000, L * 1000);
}

// Gemma 3 270M: of its 18 layers the 15 sliding ones (il % 6 < 5) keep a
// ring of the window (512) and a batch (SEAM_UBATCH) of positions.
Test(plan, kv_accounting_matches_engine_with_rings) {
    static const char path[] = SEAM_SOURCE_DIR "/models/gemma-3-270m-q4_k_m.gguf";
    test_require_input(path, "the KV accounting of sliding-window rings", "models/get-default-model.sh");
    seam_model gemma;
    seam_error e = {{0}};
    cr_assert_eq(model_load(&gemma, path, &e), 0, "%s", e.msg);
    const int ring = 512 + SEAM_UBATCH;
    kv_accounting_matches_engine(&gemma, "gemma-3-270m", 3 * 1000 + 15 * ring, 18 * 1000);
    const seam_plan_request req = {.head = -1, .n_ctx = 32768};
    seam_plan p;
    cr_assert_eq(plan_make(&p, &gemma, &req, &e), 0, "%s", e.msg);
    cr_assert_eq(p.ring_layers, 15);
    cr_assert_eq(p.ring_rows, ring);
    cr_assert_eq(p.kv[DEV_CPU], 2 * KV_ROW_F16 * (3 * 32768ull + 15ull * ring));
    cr_assert_eq(p.kv_per_token[DEV_CPU], 2 * KV_ROW_F16 * 3);
    model_free(&gemma);
}

// What the process holds after engine_init is what the plan predicts, within
// 2% (the target): the engine's buffers are written through at init
// (seam_alloc_resident), so the resident set grows by what they take.
Test(plan, memory_measured_within_two_percent) {
#if defined(__SANITIZE_ADDRESS__)
    cr_skip_test("AddressSanitizer's shadow memory and redzones count in the resident set");
#endif
    const seam_plan_request req = {.head = -1, .n_ctx = 4096, .cache = {KV_Q8_0, KV_Q8_0, false}};
    seam_plan p;
    seam_error e = {{0}};
    cr_assert_eq(plan_make(&p, &model, &req, &e), 0, "%s", e.msg);
    seam_memstat before, after;
    memstat_read(&before, NULL);
    cr_assert(before.rss > 0, "/proc/self/status has no VmRSS");
    seam_engine eng;
    cr_assert_eq(engine_init_kv(&eng, &model, req.n_ctx, req.cache, &e), 0, "%s", e.msg);
    memstat_read(&after, NULL);
    const uint64_t held = after.rss_anon - before.rss_anon, predicted = p.kv[DEV_CPU] + p.scratch[DEV_CPU];
    cr_assert(fabs(memstat_error(held, predicted)) < 2.0, "the engine holds %.2f MiB, the plan predicts %.2f MiB",
              held / 1048576.0, predicted / 1048576.0);
    engine_free(&eng);
}

// And after the cache is filled, with the model's pages and two threads, as
// seam bench measures it: on the long64k shape (0.6 MiB of weights) the
// timeline's record per token and the attention scratch per thread are a
// tenth of what the process holds, so a prediction that missed either, or
// held them only as positions fill, would be off by more than 2%.
Test(plan, memory_after_filling_within_two_percent) {
#if defined(__SANITIZE_ADDRESS__)
    cr_skip_test("AddressSanitizer's shadow memory and redzones count in the resident set");
#endif
    seam_model m;
    load_synthetic(&m, "long64k");
    const seam_plan_request req = {.head = -1, .n_ctx = 8192};
    const int depth = 8000, n_threads = 2;
    seam_plan p;
    seam_error e = {{0}};
    cr_assert_eq(plan_make(&p, &m, &req, &e), 0, "%s", e.msg);
    int *tokens = malloc(sizeof(int) * depth);
    cr_assert(tokens);
    for (int i = 0; i < depth; i++) tokens[i] = (i * 7 + 1) % m.cfg.n_vocab;
    seam_memstat before, after;
    memstat_read(&before, NULL);
    seam_engine eng;
    cr_assert_eq(engine_init_kv(&eng, &m, req.n_ctx, req.cache, &e), 0, "%s", e.msg);
    cr_assert_eq(engine_set_threads(&eng, n_threads, &e), 0, "%s", e.msg);
    gguf_prefetch(&m.file);
    float *logits;
    cr_assert_eq(engine_prefill(&eng, tokens, depth, 0, &logits, &e), 0, "%s", e.msg);
    memstat_read(&after, &m.file);
    cr_assert(after.model > 0, "/proc/self/smaps shows no mapping of the model");
    const uint64_t held = memstat_host(&before, &after), predicted = memstat_predict(&p, &m, n_threads).host;
    cr_assert(fabs(memstat_error(held, predicted)) < 2.0,
              "after %d positions the run holds %.3f MiB, the plan predicts %.3f MiB", depth, held / 1048576.0,
              predicted / 1048576.0);
    engine_free(&eng);
    free(tokens);
    model_free(&m);
}

// The multiply-adds of a prompt (seam bench's share of the int8 peak is
// theirs over the time), against a count by hand from the shape files:
// every matrix once per token (the norms and biases are not products; an
// MoE layer's 4 of 16 experts), attention's 2 * heads * head_dim per
// position each token sees (a sliding layer at most its window), the head
// once.
Test(plan, a_prompts_multiply_adds_are_counted_from_the_model) {
    seam_model m;
    // tiny-gemma3: 6 layers (il 5 global, the rest windows of 8); wq, wo
    // 128 x 128, wk, wv 32 x 128, gate, up 384 x 128, down 128 x 384; the
    // head tied to the 512 x 128 embeddings
    load_synthetic(&m, "tiny-gemma3");
    const uint64_t gemma_layer = 2 * 128 * 128 + 2 * 32 * 128 + 3 * 384 * 128;
    for (int il = 0; il < 6; il++) cr_assert_eq(model_layer_macs(&m, il), gemma_layer);
    // 16 tokens from 0: sum of (p + 1) is 136, windowed 1 + .. + 8 + 8 * 8 = 100
    cr_assert_eq(plan_prompt_macs(&m, 16, 0), 16 * 6 * gemma_layer + 512 * 128 + 2 * 4 * 32 * (136 + 5 * 100));
    model_free(&m);
    // moe-small: 4 layers of wq, wo 256 x 256, wk, wv 128 x 256, the
    // router 16 x 256 and 4 of 16 experts' gate, up, down (256 x 256
    // each); its own 2048 x 256 head; 16 tokens from 4 see 5 + .. + 20 = 200
    load_synthetic(&m, "moe-small");
    const uint64_t moe_layer = 2 * 256 * 256 + 2 * 128 * 256 + 16 * 256 + 4 * 3 * 256 * 256;
    for (int il = 0; il < 4; il++) cr_assert_eq(model_layer_macs(&m, il), moe_layer);
    cr_assert_eq(plan_prompt_macs(&m, 16, 4), 16 * 4 * moe_layer + 2048 * 256 + 2 * 4 * 64 * 200 * 4);
    model_free(&m);
}
