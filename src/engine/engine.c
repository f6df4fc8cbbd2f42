// engine.c — a batch of tokens through the model, top to bottom: embedded,
// across to the GPU's layers and back, through the CPU's, and the head.
#include "engine/engine.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cpu/ops.h"

int engine_init(seam_engine *eng, const seam_model *m, int n_ctx, seam_error *e) {
    return engine_init_kv(eng, m, n_ctx, (seam_kv_config){0}, e);
}

uint64_t engine_scratch_bytes(const seam_config *c, int n_ctx) {
    return cpu_backend_scratch_bytes(c, n_ctx) + sizeof(float) * (uint64_t)c->n_vocab +
           (uint64_t)n_ctx * sizeof(seam_token_time);
}

int engine_init_kv(seam_engine *eng, const seam_model *m, int n_ctx, seam_kv_config kv, seam_error *e) {
    memset(eng, 0, sizeof *eng);
    const seam_config *c = &m->cfg;
    if (n_ctx < 1) return seam_fail(e, "context size must be at least 1 (got %d)", n_ctx);
    if (plan_kv_check(c, kv, e)) return -1;
    eng->model = m;
    eng->n_ctx = n_ctx;
    if (cpu_backend_init(&eng->cpu, c, n_ctx, kv, e)) return -1;
    if (!(eng->logits = seam_alloc_resident(sizeof(float) * (size_t)c->n_vocab))) {
        engine_free(eng);
        return seam_fail(e, "out of memory for the logits");
    }
    if (timeline_reserve_tokens(&eng->timeline, (size_t)n_ctx)) {
        engine_free(eng);
        return seam_fail(e, "out of memory for the timeline of %d tokens", n_ctx);
    }
    return 0;
}

void engine_free(seam_engine *eng) {
    cpu_backend_free(&eng->cpu);
    free(eng->logits);
    gpu_segment_free(eng->gpu);
    timeline_free(&eng->timeline);
    memset(eng, 0, sizeof *eng);
}

int engine_place(seam_engine *eng, const seam_plan *plan, bool use_graph, seam_error *e) {
    gpu_segment_free(eng->gpu);
    eng->gpu = NULL;
    eng->gpu_layers = 0;
    eng->head_on_gpu = false;
    if (plan_gpu_computed_layers(plan) == 0 && plan->head != DEV_GPU) return 0;
    if (gpu_segment_init(&eng->gpu, eng->model, plan, eng->n_ctx, use_graph, &eng->cpu, e)) return -1;
    eng->gpu_layers = plan_gpu_computed_layers(plan);
    eng->head_on_gpu = plan->head == DEV_GPU;
    gpu_segment_time_layers(eng->gpu, eng->time_layers);
    return 0;
}

void engine_time_layers(seam_engine *eng, bool on) {
    eng->time_layers = on;
    if (eng->gpu) gpu_segment_time_layers(eng->gpu, on);
}

// Layer il's time (the head: il = n_layers) on the CPU for a batch of n
// tokens from the timeline's token `token`, the last at position pos.
static int record_layer(seam_engine *eng, int il, int token, int n, int pos, double seconds, seam_error *e) {
    seam_layer_time lt = plan_layer_record(eng->model, eng->cpu.kv.cfg, il, pos);
    lt.token = token, lt.n = n, lt.us = 1e6 * seconds;
    return timeline_add_layer(&eng->timeline, &lt) ? seam_fail(e, "out of memory for the timeline") : 0;
}

int engine_set_threads(seam_engine *eng, int n_threads, seam_error *e) {
    return cpu_backend_set_threads(&eng->cpu, n_threads, e);
}

// x (n_embd) = the token's embedding row, dequantised (and scaled: gemma3).
static void embed(const seam_model *m, int token, float *x) {
    const seam_config *c = &m->cfg;
    const seam_tensor *emb = &m->w.tok_embd;
    seam_dequantize_row(emb->type, (const uint8_t *)emb->data + (uint64_t)token * emb->row_bytes, x, c->n_embd);
    if (c->embd_scale != 1.0f) cpu_scale(x, c->embd_scale, c->n_embd);
}

// The output norm and head on the hidden state x (n_embd, normed in place)
// into eng->logits (gemma3 caps them).
static void head(seam_engine *eng, float *x) {
    const seam_config *c = &eng->model->cfg;
    cpu_rmsnorm(x, x, eng->model->w.output_norm.data, c->n_embd, c->rms_eps);
    cpu_matvec(eng->cpu.pool, &eng->model->w.output, x, eng->logits, eng->cpu.act);
    if (c->logit_softcap > 0.0f)
        for (int i = 0; i < c->n_vocab; i++)
            eng->logits[i] = c->logit_softcap * tanhf(eng->logits[i] / c->logit_softcap);
}

// n tokens (1..SEAM_UBATCH) at positions pos0.. through every layer; with
// last, the head on the last one, *logits pointing at its logits. The
// timeline takes one record a token, the batch's times shared out.
static int run_batch(seam_engine *eng, const int *tokens, int n, int pos0, bool prefill, bool last, float **logits,
                     seam_error *e) {
    const seam_model *m = eng->model;
    const seam_config *c = &m->cfg;
    float *x = eng->cpu.layer.acts.x;  // (n, n_embd) the residual stream, on the host
    const double t_start = seam_now();
    for (int t = 0; t < n; t++) embed(m, tokens[t], x + (size_t)t * c->n_embd);
    cpu_backend_begin(&eng->cpu, pos0, n);

    // layers 0..gpu_layers-1 on the GPU: the hidden states cross there and
    // back, or the last token's logits come back, pinned, when the head
    // runs there too
    *logits = eng->logits;
    const int first = (int)eng->timeline.n_tokens;  // the batch's first token's index in the timeline
    seam_token_time gpu = {.token = first};
    if (eng->gpu && gpu_segment_run(eng->gpu, x, n, pos0, last && eng->head_on_gpu, logits, &eng->timeline, &gpu, e))
        return -1;

    // the rest on the CPU (each layer's end kept, when timed, and recorded
    // after the token's clock stops, so that the records tile the segments)
    const double t_layers = seam_now();
    double layer_end[SEAM_MAX_LAYERS];
    for (int il = eng->gpu_layers; il < c->n_layers; il++) {
        if (layer_forward(&eng->cpu.layer, c, il, &m->w.layers[il], n, e)) return -1;
        if (eng->time_layers) layer_end[il] = seam_now();
    }
    const double t_head = seam_now();

    // the final norm and the output head, on the last token
    const bool cpu_head = last && !eng->head_on_gpu;
    if (cpu_head) head(eng, x + (size_t)(n - 1) * c->n_embd);
    const double t_end = seam_now(), share = 1e6 / n;
    for (int il = eng->gpu_layers; eng->time_layers && il < c->n_layers; il++) {
        const double began = il > eng->gpu_layers ? layer_end[il - 1] : t_layers;
        if (record_layer(eng, il, first, n, pos0 + n - 1, layer_end[il] - began, e)) return -1;
    }
    if (eng->time_layers && cpu_head &&
        record_layer(eng, c->n_layers, first + n - 1, 1, pos0 + n - 1, t_end - t_head, e))
        return -1;
    if (eng->timeline.n_tokens == 0) eng->timeline.origin_s = t_start;
    for (int t = 0; t < n; t++) {
        seam_token_time tt = {.token = first + t, .pos = pos0 + t, .prefill = prefill, .batch = first, .n_batch = n};
        tt.token_us = share * (t_end - t_start);
        tt.start_us = 1e6 * (t_start - eng->timeline.origin_s) + t * tt.token_us;
        tt.segment_us[SEG_GPU] = gpu.segment_us[SEG_GPU] / n;
        tt.segment_us[SEG_CPU] = share * (t_head - t_layers) + gpu.segment_us[SEG_CPU] / n;  // and any experts
        tt.segment_us[SEG_HEAD] = share * (t_end - t_head);
        tt.cpu_attention_us = share * eng->cpu.attention_s;
        // one stream: the GPU waits for the CPU's part (and for experts it hands the CPU)
        if (eng->gpu) tt.gpu_idle_us = share * (t_end - t_layers) + gpu.segment_us[SEG_CPU] / n;
        if (timeline_add_token(&eng->timeline, &tt)) return seam_fail(e, "out of memory for the timeline");
    }
    return 0;
}

int engine_forward(seam_engine *eng, int token, int pos, float **logits, seam_error *e) {
    const seam_config *c = &eng->model->cfg;
    if (token < 0 || token >= c->n_vocab)
        return seam_fail(e, "token id %d is outside the vocabulary (0..%d)", token, c->n_vocab - 1);
    if (pos < 0 || pos >= eng->n_ctx)
        return seam_fail(e, "position %d is past the context of %d tokens (raise -c)", pos, eng->n_ctx);
    return run_batch(eng, &token, 1, pos, false, true, logits, e);
}

int engine_prefill(seam_engine *eng, const int *tokens, int n, int pos0, float **logits, seam_error *e) {
    const seam_config *c = &eng->model->cfg;
    for (int i = 0; i < n; i++)
        if (tokens[i] < 0 || tokens[i] >= c->n_vocab)
            return seam_fail(e, "token id %d is outside the vocabulary (0..%d)", tokens[i], c->n_vocab - 1);
    if (pos0 < 0 || pos0 + n > eng->n_ctx)
        return seam_fail(e, "positions %d..%d pass the context of %d tokens (raise -c)", pos0, pos0 + n - 1, eng->n_ctx);
    for (int done = 0; done < n;) {
        int b = n - done < SEAM_UBATCH ? n - done : SEAM_UBATCH;
        // GPU layers that do not take this batch as matrix products take its tokens one by one
        if (eng->gpu && !gpu_segment_gemm(eng->gpu, b)) b = 1;
        if (run_batch(eng, tokens + done, b, pos0 + done, true, done + b == n, logits, e)) return -1;
        done += b;
    }
    return 0;
}
