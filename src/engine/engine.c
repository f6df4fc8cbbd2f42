// engine.c — the forward pass of one token, top to bottom.
#include "engine/engine.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cpu/ops.h"
#include "numeric/exact.h"
#include "gpu/gpu_segment.h"
#include "engine/prefill.h"

// Lays out the cache of kv's types for n_ctx positions in one allocation,
// resident from the start (as llama.cpp clears its own).
static int kv_alloc(seam_kv_cache *kv, const seam_config *c, seam_kv_config cfg, int n_ctx, seam_error *e) {
    kv->cfg = cfg;
    kv->k_head_row = ggml_row_bytes(plan_kv_ggml_type[cfg.k], (uint64_t)c->head_dim);
    kv->v_head_row = ggml_row_bytes(plan_kv_ggml_type[cfg.v], (uint64_t)c->head_dim);
    plan_kv_rotation(c, cfg, &kv->rot_k, &kv->rot_v);
    kv->bytes = 0;
    for (int il = 0; il < c->n_layers; il++) {
        kv->rows[il] = plan_kv_rows(c, cfg, il, n_ctx);
        kv->bytes += plan_kv_bytes(c, cfg, (uint64_t)kv->rows[il]);
    }
    if (kv->bytes > SIZE_MAX || !(kv->mem = seam_alloc_resident((size_t)kv->bytes)))
        return seam_fail(e, "out of memory for the KV cache (%d positions: %.1f MiB); lower -c or use -ctk/-ctv q8_0",
                         n_ctx, (double)kv->bytes / (1 << 20));
    uint8_t *p = kv->mem;
    for (int il = 0; il < c->n_layers; il++) {
        kv->k[il] = p, p += (size_t)c->n_kv_heads * kv->rows[il] * kv->k_head_row;
        kv->v[il] = p, p += (size_t)c->n_kv_heads * kv->rows[il] * kv->v_head_row;
    }
    return 0;
}

int engine_init(seam_engine *eng, const seam_model *m, int n_ctx, seam_error *e) {
    return engine_init_kv(eng, m, n_ctx, (seam_kv_config){0}, e);
}

enum { STATE_BUFFERS = 14 };

// seam_state's buffers besides the KV cache and the batch, and their bytes:
// one list for engine_init_kv's allocations, engine_scratch_bytes and
// engine_free (bytes NULL: the buffers only, c unread).
static void state_layout(seam_state *s, const seam_config *c, int n_ctx, void **buf[STATE_BUFFERS],
                         size_t bytes[STATE_BUFFERS]) {
    void **const fields[STATE_BUFFERS] = {
        (void **)&s->x,  (void **)&s->xb,  (void **)&s->xb2,    (void **)&s->q,      (void **)&s->k,
        (void **)&s->v,  (void **)&s->att, (void **)&s->hb,     (void **)&s->hb2,    (void **)&s->router,
        (void **)&s->moe, (void **)&s->logits, (void **)&s->rope_angles, &s->act,
    };
    memcpy(buf, fields, sizeof fields);
    if (!bytes) return;
    const size_t q_dim = (size_t)c->n_heads * c->head_dim, kv_dim = (size_t)c->n_kv_heads * c->head_dim;
    const size_t wide = q_dim > (size_t)c->n_embd ? q_dim : (size_t)c->n_embd;
    // an MoE model's layers all run experts: its feed_forward_length is unused
    // (and unchecked by any tensor), so it must not size a buffer
    const size_t n_hidden = (size_t)(c->n_expert ? c->n_ff_exp : c->n_ff);
    const size_t widest = wide > n_hidden ? wide : n_hidden, f = sizeof(float);
    const size_t sizes[STATE_BUFFERS] = {
        f * c->n_embd, f * wide, f * c->n_embd, f * q_dim, f * kv_dim, f * kv_dim,
        f * cpu_attention_scratch_floats(n_ctx, c->head_dim), f * n_hidden, f * n_hidden, f * (c->n_expert + 1),
        f * c->n_embd, f * c->n_vocab, f * 2 * c->rope_dim, cpu_matvec_scratch_bytes((int64_t)widest),
    };
    memcpy(bytes, sizes, sizeof sizes);
}

uint64_t engine_scratch_bytes(const seam_config *c, int n_ctx) {
    seam_state s;
    void **buf[STATE_BUFFERS];
    size_t bytes[STATE_BUFFERS];
    state_layout(&s, c, n_ctx, buf, bytes);
    uint64_t sum = prefill_batch_bytes(c) + (uint64_t)n_ctx * sizeof(seam_token_time);
    for (int i = 0; i < STATE_BUFFERS; i++) sum += bytes[i];
    return sum;
}

int engine_init_kv(seam_engine *eng, const seam_model *m, int n_ctx, seam_kv_config kv, seam_error *e) {
    memset(eng, 0, sizeof *eng);
    const seam_config *c = &m->cfg;
    if (n_ctx < 1) return seam_fail(e, "context size must be at least 1 (got %d)", n_ctx);
    if (plan_kv_check(c, kv, e)) return -1;
    eng->model = m;
    eng->n_ctx = n_ctx;
    seam_state *s = &eng->s;
    void **buf[STATE_BUFFERS];
    size_t bytes[STATE_BUFFERS];
    state_layout(s, c, n_ctx, buf, bytes);
    for (int i = 0; i < STATE_BUFFERS; i++)
        if (!(*buf[i] = seam_alloc_resident(bytes[i]))) {
            engine_free(eng);
            return seam_fail(e, "out of memory for the activations of one token");
        }
    if (!(s->batch = prefill_batch_new(c, e)) || kv_alloc(&s->kv, c, kv, n_ctx, e)) {
        engine_free(eng);
        return -1;
    }
    if (timeline_reserve_tokens(&eng->timeline, (size_t)n_ctx)) {
        engine_free(eng);
        return seam_fail(e, "out of memory for the timeline of %d tokens", n_ctx);
    }
    return 0;
}

void engine_free(seam_engine *eng) {
    seam_state *s = &eng->s;
    void **buf[STATE_BUFFERS];
    state_layout(s, NULL, 0, buf, NULL);
    for (int i = 0; i < STATE_BUFFERS; i++) free(*buf[i]);
    prefill_batch_free(s->batch);
    free(s->kv.mem);
    pool_destroy(eng->pool);
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
    if (gpu_segment_init(&eng->gpu, eng->model, plan, eng->n_ctx, use_graph, e)) return -1;
    eng->gpu_layers = plan_gpu_computed_layers(plan);
    eng->head_on_gpu = plan->head == DEV_GPU;
    return 0;
}

int engine_set_threads(seam_engine *eng, int n_threads, seam_error *e) {
    seam_pool *pool = NULL;
    if (n_threads != 1 && !(pool = pool_create(n_threads, e))) return -1;
    // attention scratch for every thread
    const size_t att = cpu_attention_scratch_floats(eng->n_ctx, eng->model->cfg.head_dim);
    float *scratch = seam_alloc_resident(sizeof(float) * att * (size_t)n_threads);
    if (!scratch) {
        pool_destroy(pool);
        return seam_fail(e, "out of memory for the attention scratch of %d threads", n_threads);
    }
    free(eng->s.att);
    eng->s.att = scratch;
    pool_destroy(eng->pool);
    eng->pool = pool;
    return 0;
}

static void add_bias(float *x, const seam_tensor *b, int n) {
    const float *bias = b->data;
    for (int i = 0; i < n; i++) x[i] += bias[i];
}

// RMS norm of each head of vec (n_heads, head_dim) with a shared weight.
static void head_norm(float *vec, int n_heads, int head_dim, const seam_tensor *w, float eps) {
    for (int h = 0; h < n_heads; h++) {
        float *v = vec + (int64_t)h * head_dim;
        cpu_rmsnorm(v, v, w->data, head_dim, eps);
    }
}

void engine_rope_angles(const seam_config *c, int pos, float *angles) {
    const int half = c->rope_dim / 2;
    cpu_rope_angles(angles, angles + half, c->rope_dim, pos, c->rope_base, c->rope_scale);
    if (c->n_swa) cpu_rope_angles(angles + 2 * half, angles + 3 * half, c->rope_dim, pos, c->rope_base_swa, 1.0f);
}

// RoPE of q (n_heads) and k (n_kv_heads) of layer il by a position's angles.
static void rope(const seam_config *c, int il, const float *angles, float *q, float *k) {
    const int half = c->rope_dim / 2;
    const float *cos_t = angles + (c->layer_swa[il] ? 2 * half : 0);
    cpu_rope_apply(q, c->n_heads, k, c->n_kv_heads, c->head_dim, c->rope_dim, cos_t, cos_t + half, c->rope_neox);
}

void engine_qkv_ready(seam_engine *eng, const seam_layer_weights *l, int il, int pos, const float *angles, float *q,
                      float *k, float *v) {
    const seam_config *c = &eng->model->cfg;
    const int q_dim = c->n_heads * c->head_dim, kv_dim = c->n_kv_heads * c->head_dim;
    if (c->qkv_bias) {
        add_bias(q, &l->bq, q_dim);
        add_bias(k, &l->bk, kv_dim);
        add_bias(v, &l->bv, kv_dim);
    }
    if (c->qk_norm) {
        head_norm(q, c->n_heads, c->head_dim, &l->q_norm, c->rms_eps);
        head_norm(k, c->n_kv_heads, c->head_dim, &l->k_norm, c->rms_eps);
    }
    rope(c, il, angles, q, k);
    if (c->q_scale != 1.0f) cpu_scale(q, c->q_scale, q_dim);
    // in the cache's types (llama.cpp's default: f16); a q8_0 cache takes
    // them turned, as llama.cpp's does (plan_kv_rotation)
    seam_kv_cache *kv = &eng->s.kv;
    if (kv->rot_k) cpu_fwht(q, q_dim, kv->rot_k), cpu_fwht(k, kv_dim, kv->rot_k);
    if (kv->rot_v) cpu_fwht(v, kv_dim, kv->rot_v);
    const size_t row = (size_t)(pos % kv->rows[il]), rows = (size_t)kv->rows[il];
    for (int g = 0; g < c->n_kv_heads; g++) {
        const size_t at = (size_t)g * rows + row;
        cpu_kv_store(plan_kv_ggml_type[kv->cfg.k], kv->k[il] + at * kv->k_head_row, k + g * c->head_dim, c->head_dim);
        cpu_kv_store(plan_kv_ggml_type[kv->cfg.v], kv->v[il] + at * kv->v_head_row, v + g * c->head_dim, c->head_dim);
    }
}

void engine_attention_out(const seam_engine *eng, float *out) {
    const seam_config *c = &eng->model->cfg;
    if (eng->s.kv.rot_v) cpu_fwht(out, (int64_t)c->n_heads * c->head_dim, eng->s.kv.rot_v);
}

cpu_kv engine_kv_layer(const seam_engine *eng, int il) {
    const seam_kv_cache *kv = &eng->s.kv;
    const size_t rows = (size_t)kv->rows[il];
    return (cpu_kv){.k = kv->k[il], .v = kv->v[il], .k_row = kv->k_head_row, .v_row = kv->v_head_row,
                    .k_head = rows * kv->k_head_row, .v_head = rows * kv->v_head_row,
                    .k_type = plan_kv_ggml_type[kv->cfg.k], .v_type = plan_kv_ggml_type[kv->cfg.v], .ring = kv->rows[il]};
}

// Returns the seconds its attention over the cache took (the timeline's
// share of the CPU layers).
static double attention_block(seam_engine *eng, const seam_layer_weights *l, int il, int pos) {
    const seam_config *c = &eng->model->cfg;
    seam_state *s = &eng->s;

    cpu_rmsnorm(s->xb, s->x, l->attn_norm.data, c->n_embd, c->rms_eps);

    // q, k, v projections (with qwen2's biases, qwen3's per-head norms), then
    // RoPE; this position's k and v join the cache
    const seam_tensor *qkv[] = {&l->wq, &l->wk, &l->wv};
    float *const qkv_out[] = {s->q, s->k, s->v};
    cpu_matmul_parts(eng->pool, 3, qkv, s->xb, 0, qkv_out, (const int64_t[]){0, 0, 0}, 1, s->act);
    engine_qkv_ready(eng, l, il, pos, s->rope_angles, s->q, s->k, s->v);

    // each query head attends over positions t0..pos of its KV head (a sliding
    // layer sees only the last n_swa of them)
    const int t1 = pos + 1, t0 = t1 - plan_kv_visible(c, il, pos);
    const cpu_kv kv = engine_kv_layer(eng, il);
    const double t_attention = seam_now();
    cpu_attention(eng->pool, 1, s->xb, 0, s->q, 0, &kv, c->n_heads, c->n_kv_heads, c->head_dim, &t0, &t1,
                  c->kq_scale, s->att, cpu_attention_scratch_floats(eng->n_ctx, c->head_dim));
    const double attention_s = seam_now() - t_attention;
    engine_attention_out(eng, s->xb);

    // output projection (gemma3 norms it), back into the residual stream
    cpu_matvec(eng->pool, &l->wo, s->xb, s->xb2, s->act);
    if (c->post_norms) cpu_rmsnorm(s->xb2, s->xb2, l->attn_post_norm.data, c->n_embd, c->rms_eps);
    for (int i = 0; i < c->n_embd; i++) s->x[i] += s->xb2[i];
    return attention_s;
}

// The mixture of experts, as llama.cpp's build_moe_ffn with softmax gating:
// router probabilities over all experts, the top k kept and renormalised
// (their sum clamped away from 0), each chosen expert a SwiGLU FFN of which
// only its own rows are read, the outputs weighted and summed in rank order.
static void moe_block(seam_engine *eng, const seam_layer_weights *l) {
    const seam_config *c = &eng->model->cfg;
    seam_state *s = &eng->s;
    const int k = c->n_expert_used;
    cpu_matvec(eng->pool, &l->ffn_gate_inp, s->xb, s->router, s->act);
    int chosen[k];
    float weight[k];
    engine_route(c, s->router, chosen, weight);

    for (int j = 0; j < k; j++) {
        const int64_t e = chosen[j];
        const seam_tensor gate = tensor_rows(&l->ffn_gate_exps, e * c->n_ff_exp, c->n_ff_exp);
        const seam_tensor up = tensor_rows(&l->ffn_up_exps, e * c->n_ff_exp, c->n_ff_exp);
        const seam_tensor down = tensor_rows(&l->ffn_down_exps, e * c->n_embd, c->n_embd);
        const seam_tensor *gate_up[] = {&gate, &up};
        float *const gate_up_out[] = {s->hb, s->hb2};
        cpu_matmul_parts(eng->pool, 2, gate_up, s->xb, 0, gate_up_out, (const int64_t[]){0, 0}, 1, s->act);
        cpu_swiglu(s->hb, s->hb2, c->n_ff_exp);
        cpu_matvec(eng->pool, &down, s->hb, s->xb2, s->act);
        for (int i = 0; i < c->n_embd; i++) s->moe[i] = j ? s->moe[i] + s->xb2[i] * weight[j] : s->xb2[i] * weight[j];
    }
    for (int i = 0; i < c->n_embd; i++) s->x[i] += s->moe[i];
}

void engine_route(const seam_config *c, float *router, int *chosen, float *weight) {
    const int k = c->n_expert_used;
    cpu_softmax(router, c->n_expert);
    cpu_top_k(router, c->n_expert, k, chosen);
    double sum = 0.0;
    for (int j = 0; j < k; j++) sum += weight[j] = router[chosen[j]];
    const float norm = (float)(sum > EXACT_MOE_MIN_WEIGHT_SUM ? sum : EXACT_MOE_MIN_WEIGHT_SUM);
    for (int j = 0; j < k; j++) weight[j] /= norm;
}

static void ffn_block(seam_engine *eng, const seam_layer_weights *l) {
    const seam_config *c = &eng->model->cfg;
    seam_state *s = &eng->s;
    cpu_rmsnorm(s->xb, s->x, l->ffn_norm.data, c->n_embd, c->rms_eps);
    if (c->n_expert) {
        moe_block(eng, l);
        return;
    }
    const seam_tensor *gate_up[] = {&l->w_gate, &l->w_up};
    float *const gate_up_out[] = {s->hb, s->hb2};
    cpu_matmul_parts(eng->pool, 2, gate_up, s->xb, 0, gate_up_out, (const int64_t[]){0, 0}, 1, s->act);
    if (c->ffn_gelu) cpu_geglu(s->hb, s->hb2, c->n_ff);
    else cpu_swiglu(s->hb, s->hb2, c->n_ff);
    cpu_matvec(eng->pool, &l->w_down, s->hb, s->xb2, s->act);
    if (c->post_norms) cpu_rmsnorm(s->xb2, s->xb2, l->ffn_post_norm.data, c->n_embd, c->rms_eps);
    for (int i = 0; i < c->n_embd; i++) s->x[i] += s->xb2[i];
}

void engine_embed(seam_engine *eng, int token, float *x) {
    const seam_config *c = &eng->model->cfg;
    const seam_tensor *emb = &eng->model->w.tok_embd;
    seam_dequantize_row(emb->type, (const uint8_t *)emb->data + (uint64_t)token * emb->row_bytes, x, c->n_embd);
    if (c->embd_scale != 1.0f) cpu_scale(x, c->embd_scale, c->n_embd);
}

void engine_head(seam_engine *eng) {
    const seam_config *c = &eng->model->cfg;
    seam_state *s = &eng->s;
    cpu_rmsnorm(s->x, s->x, eng->model->w.output_norm.data, c->n_embd, c->rms_eps);
    cpu_matvec(eng->pool, &eng->model->w.output, s->x, s->logits, s->act);
    if (c->logit_softcap > 0.0f)
        for (int i = 0; i < c->n_vocab; i++) s->logits[i] = c->logit_softcap * tanhf(s->logits[i] / c->logit_softcap);
}

static int forward(seam_engine *eng, int token, int pos, bool prefill, float **logits, seam_error *e) {
    const seam_model *m = eng->model;
    const seam_config *c = &m->cfg;
    seam_state *s = &eng->s;
    if (token < 0 || token >= c->n_vocab)
        return seam_fail(e, "token id %d is outside the vocabulary (0..%d)", token, c->n_vocab - 1);
    if (pos < 0 || pos >= eng->n_ctx)
        return seam_fail(e, "position %d is past the context of %d tokens (raise -c)", pos, eng->n_ctx);
    seam_token_time tt = {.token = eng->n_run++, .pos = pos, .prefill = prefill};
    const double t_start = seam_now();

    engine_embed(eng, token, s->x);
    engine_rope_angles(c, pos, s->rope_angles);

    // layers 0..gpu_layers-1 on the GPU (the hidden state crosses there and
    // back, or the logits come back, pinned, when the head runs there too)
    *logits = s->logits;
    if (eng->gpu && gpu_segment_forward(eng->gpu, s->x, logits, pos, &eng->timeline, &tt, e)) return -1;

    // the rest on the CPU
    const double t_layers = seam_now();
    for (int il = eng->gpu_layers; il < c->n_layers; il++) {
        const seam_layer_weights *l = &m->w.layers[il];
        tt.cpu_attention_us += 1e6 * attention_block(eng, l, il, pos);
        ffn_block(eng, l);
    }
    const double t_head = seam_now();
    tt.segment_us[SEG_CPU] = 1e6 * (t_head - t_layers);

    // final norm and the output head
    if (!eng->head_on_gpu) engine_head(eng);
    const double t_end = seam_now();
    tt.segment_us[SEG_HEAD] = 1e6 * (t_end - t_head);
    if (eng->gpu) tt.gpu_idle_us = 1e6 * (t_end - t_layers);  // one stream: the GPU waits for the CPU's part
    tt.token_us = 1e6 * (t_end - t_start);
    if (timeline_add_token(&eng->timeline, &tt)) return seam_fail(e, "out of memory for the timeline");
    return 0;
}

int engine_forward(seam_engine *eng, int token, int pos, float **logits, seam_error *e) {
    return forward(eng, token, pos, false, logits, e);
}

int engine_prefill(seam_engine *eng, const int *tokens, int n, int pos0, float **logits, seam_error *e) {
    const seam_config *c = &eng->model->cfg;
    for (int i = 0; i < n; i++)
        if (tokens[i] < 0 || tokens[i] >= c->n_vocab)
            return seam_fail(e, "token id %d is outside the vocabulary (0..%d)", tokens[i], c->n_vocab - 1);
    if (pos0 < 0 || pos0 + n > eng->n_ctx)
        return seam_fail(e, "positions %d..%d pass the context of %d tokens (raise -c)", pos0, pos0 + n - 1, eng->n_ctx);
    for (int done = 0; done < n;) {
        const int b = n - done < SEAM_UBATCH ? n - done : SEAM_UBATCH;
        if (b > 1 && (!eng->gpu || gpu_segment_gemm(eng->gpu, b))) {
            if (prefill_batch(eng, tokens + done, b, pos0 + done, done + b == n, logits, e)) return -1;
        } else {
            for (int t = 0; t < b; t++)
                if (forward(eng, tokens[done + t], pos0 + done + t, true, logits, e)) return -1;
        }
        done += b;
    }
    return 0;
}
