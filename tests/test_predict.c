// test_predict.c — the speed model (predict.c) on cases computed by hand,
// the hardware profile parser (hw.c) on bad input, and the model of a shape
// file (shape.c) against the file seam-synth writes from it.
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "helpers.h"
#include "plan/fit.h"
#include "plan/hw.h"
#include "model/model.h"
#include "plan/plan.h"
#include "plan/predict.h"
#include "model/shape.h"

// ---------------------------------------------------------------- profiles

static void expect_bad(const char *text, const char *needle) {
    hw_profile hw;
    seam_error e = {{0}};
    cr_assert_neq(hw_parse(&hw, text, "t.hw", &e), 0, "accepted:\n%s", text);
    cr_expect(strstr(e.msg, needle), "message '%s' lacks '%s'", e.msg, needle);
    cr_expect(!strncmp(e.msg, "t.hw", 4), "message '%s' does not name the file", e.msg);
}

#define GPU_KEYS                                                                                       \
    "gpu_mem_gib = 12 # published: x\ngpu_peak_gbs = 360 # published: x\ngpu_efficiency = 0.5 # derived: x\n" \
    "gpu_kernel_us = 1 # published: x\nlaunch_us = 3 # published: x\npcie_gbs = 8 # published: x\n"     \
    "pcie_us = 2 # published: x\n"

Test(hw, parses_a_profile_with_its_sources) {
    hw_profile hw;
    seam_error e = {{0}};
    const char *text = "# a comment line\nname = box\ncpu_read_gbs = 20.5   # measured: seam-membw\n"
                       "cpu_dot_gbs.q4_k = 22 # measured: seam-matvec\n" GPU_KEYS;
    cr_assert_eq(hw_parse(&hw, text, "t.hw", &e), 0, "%s", e.msg);
    cr_expect_str_eq(hw.name, "box");
    cr_expect(hw.has_cpu && hw.has_gpu);
    cr_expect_eq(hw.v[HW_CPU_READ_GBS], 20.5);
    cr_expect_str_eq(hw.source[HW_CPU_READ_GBS], "measured: seam-membw");
    cr_expect_eq(hw.cpu_dot_gbs[GGML_TYPE_Q4_K], 22);
    cr_expect_eq(hw.v[HW_GPU_EFFICIENCY], 0.5);
    // a figure measured below what its probe resolves is written as a floor, and read back as one
    const char *floor = "name = box\ncpu_read_gbs = 20 # measured: x\ncpu_call_us = 0.01 # floor: measured -0.2\n";
    cr_assert_eq(hw_parse(&hw, floor, "t.hw", &e), 0, "%s", e.msg);
    cr_expect_str_eq(hw.source[HW_CPU_CALL_US], "floor: measured -0.2");
}

Test(hw, refuses_bad_profiles) {
    expect_bad("cpu_read_gbs = 20 # measured: x\n", "missing key 'name'");
    expect_bad("name = a\ncpu_read_gbs = -3 # measured: x\n", "must be positive");
    expect_bad("name = a\ncpu_read_gbs = 0 # measured: x\n", "must be positive");
    expect_bad("name = a\ncpu_read_gbs = fast # measured: x\n", "wants a number");
    expect_bad("name = a\ncpu_read_gbs = 20\n", "no source");
    expect_bad("name = a\ncpu_read_gbs = 20 # guessed\n", "no source");
    expect_bad("name = a\ncpu_reed_gbs = 20 # measured: x\n", "unknown key 'cpu_reed_gbs'");
    expect_bad("name = a\ncpu_dot_gbs.Q9_Z = 20 # measured: x\n", "unknown weight type");
    expect_bad("name = a\ncpu_read_gbs = 20 # measured: x\ncpu_read_gbs = 21 # measured: x\n", "given twice");
    expect_bad("name = a\ncpu_read_gbs 20 # measured: x\n", "expected 'key = value");
    expect_bad("name = a\n", "neither a CPU nor a GPU");
    expect_bad("name = a\ncpu_threads = 2 # measured: x\n", "missing key 'cpu_read_gbs'");
    expect_bad("name = a\ncpu_read_gbs = 20 # measured: x\ncpu_threads = 2.5 # measured: x\n", "whole number");
    // a GPU group without one of its keys, and an efficiency above 1
    expect_bad("name = a\ngpu_peak_gbs = 360 # published: x\n", "missing key 'gpu_mem_gib'");
    expect_bad("name = a\ngpu_mem_gib = 12 # published: x\ngpu_peak_gbs = 360 # published: x\n"
               "gpu_efficiency = 1.5 # derived: x\n",
               "at most 1");
    expect_bad("name = a\ncpu_read_gbs = 20 # measured: x\ncpu_read_gbs_1 = 90 # measured: x\n", "never read slower");
}

Test(hw, a_missing_file_is_named) {
    hw_profile hw;
    seam_error e = {{0}};
    cr_assert_neq(hw_load(&hw, "no-such-profile", &e), 0);
    cr_expect(strstr(e.msg, "no-such-profile") && strstr(e.msg, "models/hw"), "%s", e.msg);
}

// The profiles in the repository parse, and what they print reads back.
Test(hw, the_shipped_profiles_parse_and_round_trip) {
    static const char *const NAMES[] = {"rtx3060-seed", "rtx4090", "h200"};
    for (size_t i = 0; i < sizeof NAMES / sizeof *NAMES; i++) {
        char path[4096];
        snprintf(path, sizeof path, "%s/models/hw/%s.hw", SEAM_SOURCE_DIR, NAMES[i]);
        hw_profile hw, back;
        seam_error e = {{0}};
        cr_assert_eq(hw_load(&hw, path, &e), 0, "%s", e.msg);
        char *text = NULL;
        size_t len = 0;
        FILE *f = open_memstream(&text, &len);
        hw_write(&hw, f);
        fclose(f);
        cr_assert_eq(hw_parse(&back, text, "written", &e), 0, "%s\n%s", e.msg, text);
        for (int k = 0; k < HW_KEYS; k++) cr_expect(back.set[k] == hw.set[k] && fabs(back.v[k] - hw.v[k]) <= 1e-9 * hw.v[k]);
        free(text);
    }
}

// ---------------------------------------------------------------- the model by hand

// A model every byte of which can be counted: llama, n_embd 256, one head of
// 256, FFN 256, vocabulary 256, everything Q8_0 (a row of 256 = 8 blocks of
// 34 bytes = 272 bytes; a 256 x 256 matrix 69632 bytes). Per layer: q, k, v,
// o, gate, up, down (7 x 69632) and two norms (2 x 1024 F32): 489472 bytes.
// The head: output 69632 + its norm 1024 = 70656. The KV cache: K and V of
// one head of 256 in f16, 1024 bytes a position a layer.
static seam_model counted;

// heads query heads sharing kv_heads KV heads, of 256 / heads values
static void load_heads(int layers, int heads, int kv_heads) {
    char path[4096], text[1024];
    snprintf(path, sizeof path, "%s", test_path("counted.shape"));
    snprintf(text, sizeof text,
             "general.architecture = llama\nllama.block_count = %d\nllama.embedding_length = 256\n"
             "llama.feed_forward_length = 256\nllama.attention.head_count = %d\n"
             "llama.attention.head_count_kv = %d\nvocab_size = 256\nftype = Q8_0\n",
             layers, heads, kv_heads);
    cr_assert_eq(test_write_file(path, text, strlen(text)), 0);
    seam_error e = {{0}};
    cr_assert_eq(shape_model(path, &counted, &e), 0, "%s", e.msg);
}

static void load_counted(int layers) {
    load_heads(layers, 1, 1);
    cr_assert_eq(model_layer_active_bytes(&counted, 0), 489472);
}

static hw_profile profile(bool gpu) {
    hw_profile hw;
    seam_error e = {{0}};
    // 1 GB/s = one byte a nanosecond: bytes / 1000 = microseconds
    const char *cpu = "name = counted\ncpu_read_gbs = 1 # measured: by hand\n";
    const char *with_gpu = "name = counted\ncpu_read_gbs = 1 # measured: by hand\n"
                           "gpu_mem_gib = 1 # published: x\ngpu_peak_gbs = 2 # published: x\n"
                           "gpu_efficiency = 0.5 # derived: x\ngpu_kernel_us = 1 # published: x\n"
                           "gpu_kernels_per_layer = 10 # derived: x\nlaunch_us = 3 # published: x\n"
                           "pcie_gbs = 0.5 # published: x\npcie_us = 2 # published: x\n";
    cr_assert_eq(hw_parse(&hw, gpu ? with_gpu : cpu, "counted.hw", &e), 0, "%s", e.msg);
    return hw;
}

static seam_prediction predict_on(int gpu_layers, int head, seam_overflow overflow, const hw_profile *hw, int threads) {
    const seam_plan_request req = {.gpu_layers = gpu_layers, .head = head, .overflow = overflow, .n_ctx = 100,
                                   .gpu_budget = hw->has_gpu ? 1ull << 30 : 0};
    seam_plan p;
    seam_prediction pr;
    seam_error e = {{0}};
    cr_assert_eq(plan_make(&p, &counted, &req, &e), 0, "%s", e.msg);
    cr_assert_eq(predict_token(&counted, &p, hw, threads, 100, &pr, &e), 0, "%s", e.msg);
    return pr;
}

static seam_prediction predict(int gpu_layers, int head, seam_overflow overflow, const hw_profile *hw) {
    return predict_on(gpu_layers, head, overflow, hw, 1);
}

#define NEAR(a, b) cr_expect(fabs((a) - (b)) < 1e-6, "%s = %.6f, expected %.6f", #a, (double)(a), (double)(b))

Test(predict, cpu_only_token_is_bytes_over_bandwidth) {
    load_counted(1);
    const hw_profile hw = profile(false);
    const seam_prediction pr = predict(0, -1, OVERFLOW_CPU, &hw);
    // embedding row 272 B; the layer 489472 B of weights + 100 positions x
    // 1024 B of KV; the head 70656 B; all at one byte a nanosecond
    NEAR(pr.part_us[PART_EMBED], 0.272);
    NEAR(pr.part_us[PART_CPU_LAYERS], 489.472 + 102.4);
    NEAR(pr.part_us[PART_HEAD], 70.656);
    NEAR(pr.token_us, 0.272 + 591.872 + 70.656);
    NEAR(pr.tok_s, 1e6 / 662.8);
    NEAR(pr.gpu_idle_us, 0);
    model_free(&counted);
}

Test(predict, all_on_the_gpu) {
    load_counted(1);
    const hw_profile hw = profile(true);
    const seam_prediction pr = predict(1, -1, OVERFLOW_CPU, &hw);
    // the GPU reads at 2 x 0.5 = 1 GB/s; a crossing is 2 us + bytes at 0.5 GB/s
    const double h2d = 2 + 1024 / 500.0, layer = 591.872 + 10 * 1, head = 70.656 + 3 * 1, logits = 2 + 1024 / 500.0;
    NEAR(pr.part_us[PART_LAUNCH], 3);
    NEAR(pr.part_us[PART_GPU_LAYERS], layer);
    NEAR(pr.part_us[PART_HEAD], head);
    NEAR(pr.part_us[PART_CROSSING], h2d + logits);
    NEAR(pr.token_us, 0.272 + 3 + h2d + layer + head + logits);
    NEAR(pr.gpu_busy_us, layer + head);
    NEAR(pr.gpu_idle_us, 0.272 + 3 + h2d + logits);
    model_free(&counted);
}

Test(predict, a_split_crosses_twice_and_idles_the_gpu) {
    load_counted(2);
    const hw_profile hw = profile(true);
    const seam_prediction pr = predict(1, -1, OVERFLOW_CPU, &hw);
    // layer 0 on the GPU, layer 1 and the head on the CPU
    const double cross = 2 + 1024 / 500.0, gpu = 591.872 + 10, cpu = 591.872, head = 70.656;
    NEAR(pr.part_us[PART_GPU_LAYERS], gpu);
    NEAR(pr.part_us[PART_CPU_LAYERS], cpu);
    NEAR(pr.part_us[PART_HEAD], head);
    NEAR(pr.part_us[PART_CROSSING], 2 * cross);
    NEAR(pr.token_us, 0.272 + 3 + 2 * cross + gpu + cpu + head);
    NEAR(pr.gpu_idle_us, pr.token_us - gpu);
    // the steps run in the data flow's order
    static const predict_lane lanes[] = {LANE_CPU, LANE_CPU, LANE_BUS, LANE_GPU, LANE_BUS, LANE_CPU, LANE_CPU};
    cr_assert_eq(pr.n_steps, 7);
    for (int i = 0; i < 7; i++) cr_expect_eq(pr.step[i].lane, lanes[i], "step %d (%s)", i, pr.step[i].what);
    // mapped: layer 1 runs on the GPU reading its weights at the bus's 0.5 GB/s
    const seam_prediction mapped = predict(1, -1, OVERFLOW_MAPPED, &hw);
    NEAR(mapped.part_us[PART_GPU_LAYERS], gpu + 489472 / 500.0 + 102.4 + 10);
    NEAR(mapped.part_us[PART_CPU_LAYERS], 0);
    model_free(&counted);
}

// A profile of two cards: a budget that one card holds (--gpu-mem, a run's
// one device) plans on one card, no crossing between cards; a larger one
// splits the layers over both, the hidden state through the host between
// them. The prediction reads the budget from the plan, so that every caller
// (plan, run, bench, the fit) predicts the same cards.
Test(predict, a_budget_of_one_card_plans_one_card) {
    load_counted(2);
    hw_profile hw = profile(true);
    hw.v[HW_GPU_COUNT] = 2, hw.set[HW_GPU_COUNT] = true;
    cr_assert_eq(hw_gpu_bytes(&hw), 2ull << 30);
    const double cross = 2 + 1024 / 500.0;
    seam_prediction pr[2];
    for (int cards = 1; cards <= 2; cards++) {
        const seam_plan_request req = {.gpu_layers = 2, .head = DEV_GPU, .n_ctx = 100,
                                       .gpu_budget = (uint64_t)cards << 30};
        cr_assert_eq(hw_cards_for_budget(&hw, req.gpu_budget), cards);
        seam_plan p;
        seam_error e = {{0}};
        cr_assert_eq(plan_make(&p, &counted, &req, &e), 0, "%s", e.msg);
        cr_assert_eq(predict_token(&counted, &p, &hw, 1, 100, &pr[cards - 1], &e), 0, "%s", e.msg);
    }
    NEAR(pr[0].part_us[PART_CROSSING], 2 * cross);  // H2D in, the logits out
    NEAR(pr[1].part_us[PART_CROSSING], 4 * cross);  // and layer 1's card: out of the first, into the second
    NEAR(pr[1].token_us - pr[0].token_us, 2 * cross);
    model_free(&counted);
}

static hw_profile parsed(const char *text) {
    hw_profile hw;
    seam_error e = {{0}};
    cr_assert_eq(hw_parse(&hw, text, "t.hw", &e), 0, "%s", e.msg);
    return hw;
}

// Attention as cpu_attention shares it: 4 query heads of 64 on 2 KV heads
// take one job per KV head (its 2 queries together) on 1 and on 2 threads.
Test(predict, attention_jobs_of_grouped_queries_over_the_threads) {
    load_heads(1, 4, 2);
    const hw_profile hw = parsed("name = attn\ncpu_read_gbs = 1 # measured: x\ncpu_attn_read_gbs = 1 # measured: x\n"
                                 "cpu_attn_gbs = 1 # measured: x\ncpu_attn_pos_ns = 1 # measured: x\n"
                                 "cpu_job_us = 2 # measured: x\ncpu_wake_us = 1 # measured: x\n");
    // a KV head's position: K and V of 64 f16 values, 256 B, read once (256
    // ns) and for each of its 2 queries (256 + 1 ns): 770 ns; 100 positions
    const double job = 100 * 770e-3, weights = model_layer_active_bytes(&counted, 0) * 1e-3;
    // one thread: the two jobs one after the other, no pool
    NEAR(predict_on(0, -1, OVERFLOW_CPU, &hw, 1).part_us[PART_CPU_LAYERS], weights + 2 * job);
    // two: the weights' 4 jobs and attention's one at the pool's 2 us each,
    // the caller's attention job from 0, the worker's from 1 us
    NEAR(predict_on(0, -1, OVERFLOW_CPU, &hw, 2).part_us[PART_CPU_LAYERS], weights + 4 * 2 + 2 + 1 + job);
    model_free(&counted);
}

// Weights in the last cache: each matmul a pool job whose row grabs
// (cpu_matvec_grab) go to the thread free first. The head: 256 rows of 272
// bytes at 1 us a row (728 ns + 272 B at 1 GB/s); a grab is at least 60
// rows (16 KiB).
Test(predict, small_matrices_in_cache_are_jobs_of_row_grabs) {
    load_counted(1);
    const hw_profile hw = parsed("name = jobs\ncpu_read_gbs = 1 # measured: x\ncpu_llc_mib = 64 # measured: x\n"
                                 "cpu_call_us = 5 # measured: x\ncpu_job_us = 2 # measured: x\n"
                                 "cpu_wake_us = 1 # measured: x\ncpu_dot_gbs.Q8_0 = 1 # measured: x\n"
                                 "cpu_dot_row_ns.Q8_0 = 728 # measured: x\n");
    // one thread: the call and its 256 rows
    NEAR(predict_on(0, -1, OVERFLOW_CPU, &hw, 1).part_us[PART_HEAD], 5 + 256);
    // two: grabs of 64, 60, 60, 60 and 12 rows; the caller takes 64 (0..64)
    // and 60 (64..124), the worker, from 1 us, 60 (..61), 60 (..121) and 12
    // (..133); the call, the job and 133 us
    NEAR(predict_on(0, -1, OVERFLOW_CPU, &hw, 2).part_us[PART_HEAD], 5 + 2 + 133);
    model_free(&counted);
}

// Weights streamed from memory (no last-cache figure): bytes at the
// kernels' streaming speed, and each matmul job's fixed cost on top.
Test(predict, streamed_weights_pay_each_jobs_fixed_cost) {
    load_counted(1);
    const hw_profile hw = parsed("name = streamed\ncpu_read_gbs = 1 # measured: x\ncpu_stream_gbs.Q8_0 = 2 # measured: x\n"
                                 "cpu_call_us = 5 # measured: x\ncpu_job_us = 2 # measured: x\n");
    // the layer: 7 x 69632 B of Q8_0 at 2 GB/s, its two F32 norms (2048 B)
    // at the read bandwidth, 100 positions of KV (102400 B); its 4 jobs
    // (q/k/v, o, gate/up, down). The head: 69632 B of Q8_0 and its norm
    // (1024 B), one job.
    const double layer = 487.424 / 2 + 2.048 + 102.4, head = 69.632 / 2 + 1.024;
    const seam_prediction one = predict_on(0, -1, OVERFLOW_CPU, &hw, 1), two = predict_on(0, -1, OVERFLOW_CPU, &hw, 2);
    NEAR(one.part_us[PART_CPU_LAYERS], layer + 4 * 5);
    NEAR(one.part_us[PART_HEAD], head + 5);
    // on two threads each job also pays the pool's 2 us
    NEAR(two.part_us[PART_CPU_LAYERS], layer + 4 * (5 + 2));
    NEAR(two.part_us[PART_HEAD], head + 5 + 2);
    model_free(&counted);
}

Test(hw, attention_figures_come_together) {
    expect_bad("name = a\ncpu_read_gbs = 20 # measured: x\ncpu_attn_gbs = 20 # measured: x\n", "go together");
    expect_bad("name = a\ncpu_read_gbs = 20 # measured: x\ncpu_attn_llc_pos_ns = 2 # measured: x\n", "go together");
}

// A model whose weights and cache fit the last-level cache attends at the
// figures measured over a cache that stays there; one that does not, at
// those measured past it.
Test(predict, attention_in_the_last_cache_takes_its_own_figures) {
    load_heads(1, 4, 2);
    static const char *const figures = "name = attn\ncpu_read_gbs = 1 # measured: x\ncpu_attn_read_gbs = 1 # measured: x\n"
                                       "cpu_attn_gbs = 1 # measured: x\ncpu_attn_pos_ns = 1 # measured: x\n"
                                       "cpu_attn_llc_read_gbs = 2 # measured: x\ncpu_attn_llc_gbs = 2 # measured: x\n"
                                       "cpu_attn_llc_pos_ns = 2 # measured: x\n";
    char in_cache[1024], past_it[1024];
    snprintf(in_cache, sizeof in_cache, "%scpu_llc_mib = 64 # measured: x\n", figures);
    snprintf(past_it, sizeof past_it, "%scpu_llc_mib = 0.01 # measured: x\n", figures);
    const hw_profile fits = parsed(in_cache), spills = parsed(past_it);
    // one thread, two jobs (a KV head and its 2 queries each) over 100
    // positions of 256 B of K and V: 256 / 2 + 2 * (256 / 2 + 2) = 388 ns a
    // position in the cache, 256 + 2 * (256 + 1) = 770 past it
    NEAR(predict_on(0, -1, OVERFLOW_CPU, &fits, 1).cpu_attention_us, 2 * 100 * 388e-3);
    NEAR(predict_on(0, -1, OVERFLOW_CPU, &spills, 1).cpu_attention_us, 2 * 100 * 770e-3);
    model_free(&counted);
}

Test(predict, refuses_what_the_profile_cannot_answer) {
    load_counted(1);
    hw_profile hw;
    seam_error e = {{0}};
    cr_assert_eq(hw_parse(&hw, "name = g\n" GPU_KEYS, "g.hw", &e), 0, "%s", e.msg);
    const seam_plan_request req = {.gpu_layers = 0, .head = -1, .n_ctx = 8, .gpu_budget = 1ull << 30};
    seam_plan p;
    seam_prediction pr;
    cr_assert_eq(plan_make(&p, &counted, &req, &e), 0, "%s", e.msg);
    cr_expect_neq(predict_token(&counted, &p, &hw, 1, 8, &pr, &e), 0);
    cr_expect(strstr(e.msg, "no CPU figures"), "%s", e.msg);
    const hw_profile cpu = profile(false);
    const seam_plan_request on_gpu = {.gpu_layers = 1, .head = -1, .n_ctx = 8, .gpu_budget = 1ull << 30};
    cr_assert_eq(plan_make(&p, &counted, &on_gpu, &e), 0, "%s", e.msg);
    cr_expect_neq(predict_token(&counted, &p, &cpu, 1, 8, &pr, &e), 0);
    cr_expect(strstr(e.msg, "has no GPU"), "%s", e.msg);
    model_free(&counted);
}

// ---------------------------------------------------------------- the fit

static const fit_open ALL_OPEN = {.head = true, .overflow = true, .experts = true};

// Every placement the fit keeps fits the budget, the chosen one is the
// fastest of them, and the fullest layer split is the memory rule's count.
static void check_ranked(const fit_result *r, const seam_model *m, const seam_plan_request *base) {
    const uint64_t budget = base->gpu_budget;
    for (int i = 0; i < r->n; i++) {
        cr_assert_leq(r->c[i].gpu_bytes, budget, "placement %d needs %llu bytes of a %llu budget", i,
                      (unsigned long long)r->c[i].gpu_bytes, (unsigned long long)budget);
        cr_assert_geq(r->c[r->chosen].tok_s, r->c[i].tok_s - 0.005);  // ranked at the printed 0.01 tok/s
    }
    cr_assert_eq(r->c[r->fullest].gpu_layers, plan_max_gpu_layers(m, base));
}

// The fit of the counted model on hw, its ranking checked.
static fit_result fit_counted(const hw_profile *hw, uint64_t budget) {
    const seam_plan_request base = {.gpu_layers = -1, .head = -1, .n_ctx = 100, .gpu_budget = budget};
    fit_result r;
    seam_error e = {{0}};
    cr_assert_eq(fit_search(&counted, &base, ALL_OPEN, hw, 1, FIT_SPEED, &r, &e), 0, "%s", e.msg);
    check_ranked(&r, &counted, &base);
    return r;
}

// A GPU whose every kernel costs a millisecond: the CPU alone is fastest,
// though every layer fits.
Test(fit, launch_cost_makes_the_cpu_fastest) {
    load_counted(2);
    hw_profile hw = profile(true);
    hw.v[HW_GPU_KERNEL_US] = 1000;
    fit_result r = fit_counted(&hw, 1ull << 30);
    cr_assert_eq(r.c[r.fullest].gpu_layers, 2);
    cr_assert_eq(r.c[r.chosen].gpu_layers, 0, "chose -ngl %d", r.c[r.chosen].gpu_layers);
    cr_assert_eq(r.c[r.chosen].overflow, OVERFLOW_CPU);
    cr_assert_eq(r.c[r.chosen].head, DEV_CPU);
    // a profile without a GPU cannot rank GPU placements: refused, not -ngl 0
    const hw_profile cpu_only = profile(false);
    const seam_plan_request base = {.gpu_layers = -1, .head = -1, .n_ctx = 100, .gpu_budget = 1ull << 30};
    fit_result none;
    seam_error e = {{0}};
    cr_assert_neq(fit_search(&counted, &base, ALL_OPEN, &cpu_only, 1, FIT_SPEED, &none, &e), 0);
    cr_assert(strstr(e.msg, "has no GPU figures"), "%s", e.msg);
    // with kernels that cost nothing, every layer on the GPU is
    hw.v[HW_GPU_KERNEL_US] = 0, hw.v[HW_GPU_PEAK_GBS] = 100;
    fit_free(&r);
    r = fit_counted(&hw, 1ull << 30);
    cr_assert_eq(r.c[r.chosen].gpu_layers, 2);
    cr_assert_eq(r.chosen, r.fullest);
    fit_free(&r);
    model_free(&counted);
}

// A head of 65536 rows, 36 times a layer, on a CPU that reads 10 MB/s and
// a budget one byte short of every layer and the head: the memory rule
// keeps one layer and the head on the CPU; the fit keeps the head on the
// GPU, the second layer's weights read over the bus (mapped) or streamed.
Test(fit, the_heads_placement_decides) {
    char path[4096];
    snprintf(path, sizeof path, "%s", test_path("big-head.shape"));
    const char *text = "general.architecture = llama\nllama.block_count = 2\nllama.embedding_length = 256\n"
                       "llama.feed_forward_length = 256\nllama.attention.head_count = 1\n"
                       "llama.attention.head_count_kv = 1\nvocab_size = 65536\nftype = Q8_0\n";
    cr_assert_eq(test_write_file(path, text, strlen(text)), 0);
    seam_error e = {{0}};
    cr_assert_eq(shape_model(path, &counted, &e), 0, "%s", e.msg);
    hw_profile hw = profile(true);
    hw.v[HW_CPU_READ_GBS] = 0.01, hw.v[HW_GPU_PEAK_GBS] = 100, hw.v[HW_PCIE_GBS] = 10;
    const seam_plan_request all = {.gpu_layers = 2, .head = DEV_GPU, .n_ctx = 100, .gpu_budget = 1ull << 40};
    seam_plan p;
    cr_assert_eq(plan_make(&p, &counted, &all, &e), 0, "%s", e.msg);
    const uint64_t budget = plan_total(&p, DEV_GPU) - 1;
    fit_result r = fit_counted(&hw, budget);
    const fit_candidate *c = &r.c[r.chosen], *full = &r.c[r.fullest];
    cr_assert_eq(full->gpu_layers, 1);
    cr_assert_eq(full->head, DEV_CPU);
    cr_assert_eq(c->head, DEV_GPU, "the head stayed on the CPU (-ngl %d)", c->gpu_layers);
    cr_assert_eq(c->gpu_layers, 1);
    cr_assert_neq(c->overflow, OVERFLOW_CPU);
    cr_assert_gt(c->tok_s, 5 * full->tok_s, "%.2f against %.2f tok/s", c->tok_s, full->tok_s);
    fit_free(&r);
    model_free(&counted);
}

// The article's 12 GB card under Qwen3-30B-A3B: 34 whole layers fit, and
// all 48 with the experts of 16 on the CPU, which the speed model puts a
// third faster -- the expert split llama.cpp users reach for by hand.
Test(fit, the_expert_split_wins_on_a_12_gb_card) {
    seam_model m;
    hw_profile hw;
    seam_error e = {{0}};
    cr_assert_eq(shape_model(SEAM_SOURCE_DIR "/models/qwen3-30b-a3b.shape", &m, &e), 0, "%s", e.msg);
    cr_assert_eq(hw_load(&hw, SEAM_SOURCE_DIR "/models/hw/rtx3060-seed.hw", &e), 0, "%s", e.msg);
    const uint64_t budget = 12ull << 30;
    const seam_plan_request base = {.gpu_layers = -1, .head = -1, .n_ctx = 512, .gpu_budget = budget};
    fit_result r;
    cr_assert_eq(fit_search(&m, &base, ALL_OPEN, &hw, 0, FIT_SPEED, &r, &e), 0, "%s", e.msg);
    check_ranked(&r, &m, &base);
    const fit_candidate *c = &r.c[r.chosen], *full = &r.c[r.fullest];
    cr_assert_eq(full->gpu_layers, 34);
    cr_assert_eq(full->n_cpu_moe, 0);
    cr_assert_eq(c->gpu_layers, 48);
    cr_assert(c->n_cpu_moe > 0 && c->n_cpu_moe < 48, "--n-cpu-moe %d", c->n_cpu_moe);
    cr_assert_gt(c->tok_s, 1.2 * full->tok_s, "%.2f against %.2f tok/s", c->tok_s, full->tok_s);
    // llama.cpp's --fit: every layer on the GPU and the fewest layers' experts on the CPU that leave its margin
    cr_assert_geq(r.llamacpp, 0);
    const fit_candidate *l = &r.c[r.llamacpp];
    cr_assert(l->gpu_layers == 48 && l->head == DEV_GPU && l->overflow == OVERFLOW_CPU);
    cr_assert_leq(l->gpu_bytes, budget - FIT_LLAMACPP_MARGIN);
    for (int i = 0; i < r.n; i++)
        if (r.c[i].gpu_layers == 48 && r.c[i].head == DEV_GPU && r.c[i].overflow == OVERFLOW_CPU &&
            r.c[i].n_cpu_moe == l->n_cpu_moe - 1)
            cr_assert_gt(r.c[i].gpu_bytes, budget - FIT_LLAMACPP_MARGIN, "one layer's experts fewer also leaves it");
    cr_assert_gt(l->n_cpu_moe, c->n_cpu_moe, "the margin costs llama.cpp's placement layers' experts");
    // what the user fixes stays: no experts moved, the best is a layer split
    const fit_open fixed_experts = {.head = true, .overflow = true, .experts = false};
    fit_free(&r);
    cr_assert_eq(fit_search(&m, &base, fixed_experts, &hw, 0, FIT_SPEED, &r, &e), 0, "%s", e.msg);
    for (int i = 0; i < r.n; i++) cr_assert_eq(r.c[i].n_cpu_moe, 0);
    // a long context with --fit-cache: the q8_0 cache, half the bytes, frees room for experts
    fit_free(&r);
    const fit_open with_cache = {.head = true, .overflow = true, .experts = true, .cache = true};
    seam_plan_request longer = base;
    longer.n_ctx = 32768;
    cr_assert_eq(fit_search(&m, &longer, with_cache, &hw, 0, FIT_SPEED, &r, &e), 0, "%s", e.msg);
    check_ranked(&r, &m, &longer);
    cr_assert(r.c[r.chosen].cache.k == KV_Q8_0 && r.c[r.chosen].cache.v == KV_Q8_0, "the chosen cache is %s/%s",
              plan_kv_type_name[r.c[r.chosen].cache.k], plan_kv_type_name[r.c[r.chosen].cache.v]);
    cr_assert_eq(r.c[r.fullest].cache.k, KV_F16, "the fullest layer split keeps the cache asked for");
    cr_assert_eq(r.c[r.llamacpp].cache.k, KV_F16, "so does llama.cpp's --fit");
    // and the memory rule chooses the fullest layer split
    fit_free(&r);
    cr_assert_eq(fit_search(&m, &base, ALL_OPEN, &hw, 0, FIT_MEMORY, &r, &e), 0, "%s", e.msg);
    cr_assert_eq(r.chosen, r.fullest);
    char flags[96];
    fit_flags(&r.c[r.chosen], flags, sizeof flags);
    cr_assert_str_eq(flags, "-ngl 34 --head cpu");
    fit_free(&r);
    model_free(&m);
}

// ---------------------------------------------------------------- shape files

// seam plan --shape binds the same tensor table seam-synth writes.
Test(shape, the_model_of_a_shape_file_is_the_synthesised_file) {
    static const char *const SHAPES[] = {"tiny", "moe-small"};
    for (size_t s = 0; s < sizeof SHAPES / sizeof *SHAPES; s++) {
        char shape[4096], gguf[4096], cmd[12288];
        snprintf(shape, sizeof shape, "%s/models/%s.shape", SEAM_SOURCE_DIR, SHAPES[s]);
        snprintf(gguf, sizeof gguf, "%s", test_path("shape-check.gguf"));
        snprintf(cmd, sizeof cmd, "%s/seam-synth %s -o %s 2>/dev/null", SEAM_BINARY_DIR, shape, gguf);
        cr_assert_eq(system(cmd), 0, "seam-synth failed: %s", cmd);
        seam_model from_shape, from_file;
        seam_error e = {{0}};
        cr_assert_eq(shape_model(shape, &from_shape, &e), 0, "%s", e.msg);
        cr_assert_eq(model_load(&from_file, gguf, &e), 0, "%s", e.msg);
        cr_expect_eq(from_shape.file.n_tensors, from_file.file.n_tensors);
        // the same data section (seam-synth's header also holds the vocabulary)
        const uint64_t data_a = from_shape.file.size - from_shape.file.data_offset,
                       data_b = from_file.file.size - from_file.file.data_offset;
        cr_expect_eq(data_a, data_b, "the shape's data is %llu bytes, seam-synth's %llu", (unsigned long long)data_a,
                     (unsigned long long)data_b);
        for (uint64_t i = 0; i < from_file.file.n_tensors; i++) {
            const gguf_tensor *a = &from_shape.file.tensors[i], *b = &from_file.file.tensors[i];
            cr_expect(a->type == b->type && a->n_bytes == b->n_bytes && a->offset == b->offset &&
                          a->name.len == b->name.len && !memcmp(a->name.ptr, b->name.ptr, a->name.len),
                      "%s: tensor %llu differs", SHAPES[s], (unsigned long long)i);
        }
        cr_expect_eq(model_bytes_per_token(&from_shape), model_bytes_per_token(&from_file));
        model_free(&from_shape);
        model_free(&from_file);
    }
}

Test(shape, a_bad_shape_file_is_refused) {
    char path[4096];
    snprintf(path, sizeof path, "%s", test_path("bad.shape"));
    const char *text = "general.architecture = llama\nllama.block_count = 2\n";
    cr_assert_eq(test_write_file(path, text, strlen(text)), 0);
    seam_model m;
    seam_error e = {{0}};
    cr_assert_neq(shape_model(path, &m, &e), 0);
    cr_expect(strstr(e.msg, "missing key 'embedding_length'"), "%s", e.msg);
}
