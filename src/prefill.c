// prefill.c — a prompt through the CPU layers a batch of tokens at a time.
//
// Decode reads every weight once per token; a prompt's tokens can share that
// read. Each layer's matrices meet all the batch's activations while a grab
// of rows is in cache (cpu_matmul), and an MoE layer runs each expert once for
// all the tokens that chose it. Every token's arithmetic is still exactly its
// decode arithmetic -- the same dots, the same per-token norms, RoPE and
// attention over the cache, the experts' outputs summed in each token's rank
// order -- so the logits are the same bit for bit as token by token.
#include "prefill.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cpu/ops.h"

#define BATCH 32  // tokens a layer takes at once: enough to turn reading weights into reuse

typedef struct {
    int n;                   // tokens in this batch
    int wide, hidden;        // max(n_embd, q_dim); the FFN (or expert) width
    float *x, *xb, *xb2;     // (BATCH, n_embd) / (BATCH, wide) / (BATCH, n_embd)
    float *q, *k, *v;        // (BATCH, q_dim), (BATCH, kv_dim) x2
    float *hb, *hb2;         // (BATCH * k_used, hidden): FFN, or every (token, expert) pair's hidden layer
    float *gx;               // (BATCH * k_used, n_embd): the inputs of the pairs an expert serves
    float *eout;             // (BATCH * k_used, n_embd): each pair's expert output
    float *router;           // (BATCH, n_expert)
    int *chosen;             // (BATCH, k_used) the experts each token chose, by rank
    float *weight;           // (BATCH, k_used) their renormalised weights
    int *pair;               // (BATCH * k_used) the pairs one expert serves (token * k_used + rank)
    void *act;               // quantised inputs: BATCH * k_used rows of the widest input
} batch;

static void batch_free(batch *b) {
    free(b->x), free(b->xb), free(b->xb2), free(b->q), free(b->k), free(b->v), free(b->hb), free(b->hb2);
    free(b->gx), free(b->eout), free(b->router), free(b->chosen), free(b->weight), free(b->pair), free(b->act);
}

static int batch_alloc(batch *b, const seam_config *c, seam_error *e) {
    memset(b, 0, sizeof *b);
    const int q_dim = c->n_heads * c->head_dim, kv_dim = c->n_kv_heads * c->head_dim;
    const int ku = c->n_expert ? c->n_expert_used : 1, rows = BATCH * ku;
    b->wide = q_dim > c->n_embd ? q_dim : c->n_embd;
    b->hidden = c->n_expert ? c->n_ff_exp : c->n_ff;
    const int widest = b->wide > b->hidden ? b->wide : b->hidden;
    b->x = malloc(sizeof(float) * BATCH * c->n_embd);
    b->xb = malloc(sizeof(float) * BATCH * b->wide);
    b->xb2 = malloc(sizeof(float) * BATCH * c->n_embd);
    b->q = malloc(sizeof(float) * BATCH * q_dim);
    b->k = malloc(sizeof(float) * BATCH * kv_dim);
    b->v = malloc(sizeof(float) * BATCH * kv_dim);
    b->hb = malloc(sizeof(float) * rows * b->hidden);
    b->hb2 = malloc(sizeof(float) * rows * b->hidden);
    b->gx = malloc(sizeof(float) * rows * c->n_embd);
    b->eout = malloc(sizeof(float) * rows * c->n_embd);
    b->router = malloc(sizeof(float) * BATCH * (c->n_expert + 1));
    b->chosen = malloc(sizeof(int) * rows);
    b->weight = malloc(sizeof(float) * rows);
    b->pair = malloc(sizeof(int) * rows);
    b->act = malloc(rows * cpu_matvec_scratch_bytes(widest));
    if (!b->x || !b->xb || !b->xb2 || !b->q || !b->k || !b->v || !b->hb || !b->hb2 || !b->gx || !b->eout ||
        !b->router || !b->chosen || !b->weight || !b->pair || !b->act) {
        batch_free(b);
        return seam_fail(e, "out of memory for a prefill batch of %d tokens", BATCH);
    }
    return 0;
}

static void add_rows(float *x, const float *y, int n, int dim) {
    for (int i = 0; i < n * dim; i++) x[i] += y[i];
}

// engine.c's attention_block, for the batch's tokens at positions pos0.. .
static void attention(seam_engine *eng, batch *b, const seam_layer_weights *l, int il, int pos0) {
    const seam_config *c = &eng->model->cfg;
    seam_state *s = &eng->s;
    const int q_dim = c->n_heads * c->head_dim, kv_dim = c->n_kv_heads * c->head_dim, n = b->n;
    const bool swa = c->layer_swa[il];
    const float base = swa ? c->rope_base_swa : c->rope_base, freq_scale = swa ? 1.0f : c->rope_scale;
    for (int t = 0; t < n; t++)
        cpu_rmsnorm(b->xb + t * b->wide, b->x + t * c->n_embd, l->attn_norm.data, c->n_embd, c->rms_eps);
    cpu_matmul(eng->pool, &l->wq, b->xb, b->wide, b->q, q_dim, n, b->act);
    cpu_matmul(eng->pool, &l->wk, b->xb, b->wide, b->k, kv_dim, n, b->act);
    cpu_matmul(eng->pool, &l->wv, b->xb, b->wide, b->v, kv_dim, n, b->act);
    seam_f16 *kc = s->key_cache + (size_t)il * eng->n_ctx * kv_dim, *vc = s->value_cache + (size_t)il * eng->n_ctx * kv_dim;
    for (int t = 0; t < n; t++) {
        float *q = b->q + t * q_dim, *k = b->k + t * kv_dim, *v = b->v + t * kv_dim;
        engine_qk_prepare(eng, l, q, k, v);
        cpu_rope(q, c->n_heads, c->head_dim, c->rope_dim, pos0 + t, base, freq_scale, c->rope_neox);
        cpu_rope(k, c->n_kv_heads, c->head_dim, c->rope_dim, pos0 + t, base, freq_scale, c->rope_neox);
        if (c->q_scale != 1.0f) cpu_scale(q, c->q_scale, q_dim);
        cpu_to_f16(kc + (size_t)(pos0 + t) * kv_dim, k, kv_dim);
        cpu_to_f16(vc + (size_t)(pos0 + t) * kv_dim, v, kv_dim);
    }
    // each token attends over the cache up to its own position
    for (int t = 0; t < n; t++) {
        const int pos = pos0 + t, t0 = swa && pos + 1 > c->n_swa ? pos + 1 - c->n_swa : 0;
        cpu_attention(eng->pool, b->xb + t * b->wide, b->q + t * q_dim, kc, vc, c->n_heads, c->n_kv_heads,
                      c->head_dim, t0, pos + 1, c->kq_scale, s->att, cpu_attention_scratch_floats(eng->n_ctx, c->head_dim));
    }
    cpu_matmul(eng->pool, &l->wo, b->xb, b->wide, b->xb2, c->n_embd, n, b->act);
    if (c->post_norms)
        for (int t = 0; t < n; t++)
            cpu_rmsnorm(b->xb2 + t * c->n_embd, b->xb2 + t * c->n_embd, l->attn_post_norm.data, c->n_embd, c->rms_eps);
    add_rows(b->x, b->xb2, n, c->n_embd);
}

// engine.c's moe_block, grouped by expert: each expert's rows are read once
// for every (token, rank) pair that chose it.
static void moe(seam_engine *eng, batch *b, const seam_layer_weights *l) {
    const seam_config *c = &eng->model->cfg;
    const int ku = c->n_expert_used, E = c->n_embd, F = c->n_ff_exp, n = b->n;
    cpu_matmul(eng->pool, &l->ffn_gate_inp, b->xb, b->wide, b->router, c->n_expert, n, b->act);
    for (int t = 0; t < n; t++)
        engine_route(c, b->router + t * c->n_expert, b->chosen + t * ku, b->weight + t * ku);
    for (int ex = 0; ex < c->n_expert; ex++) {
        int m = 0;
        for (int p = 0; p < n * ku; p++)
            if (b->chosen[p] == ex) {
                b->pair[m] = p;
                memcpy(b->gx + (size_t)m * E, b->xb + (size_t)(p / ku) * b->wide, sizeof(float) * E);
                m++;
            }
        if (!m) continue;
        const seam_tensor gate = tensor_rows(&l->ffn_gate_exps, (int64_t)ex * F, F);
        const seam_tensor up = tensor_rows(&l->ffn_up_exps, (int64_t)ex * F, F);
        const seam_tensor down = tensor_rows(&l->ffn_down_exps, (int64_t)ex * E, E);
        cpu_matmul(eng->pool, &gate, b->gx, E, b->hb, F, m, b->act);
        cpu_matmul(eng->pool, &up, b->gx, E, b->hb2, F, m, b->act);
        for (int i = 0; i < m; i++) cpu_swiglu(b->hb + (size_t)i * F, b->hb2 + (size_t)i * F, F);
        cpu_matmul(eng->pool, &down, b->hb, F, b->gx, E, m, b->act);
        for (int i = 0; i < m; i++) memcpy(b->eout + (size_t)b->pair[i] * E, b->gx + (size_t)i * E, sizeof(float) * E);
    }
    // each token's experts summed in rank order, as decode does
    for (int t = 0; t < n; t++) {
        float *x = b->x + (size_t)t * E;
        for (int i = 0; i < E; i++) {
            float sum = 0;
            for (int j = 0; j < ku; j++) {
                const float term = b->eout[((size_t)t * ku + j) * E + i] * b->weight[t * ku + j];
                sum = j ? sum + term : term;
            }
            x[i] += sum;
        }
    }
}

// engine.c's ffn_block.
static void ffn(seam_engine *eng, batch *b, const seam_layer_weights *l) {
    const seam_config *c = &eng->model->cfg;
    const int n = b->n, F = c->n_ff;
    for (int t = 0; t < n; t++)
        cpu_rmsnorm(b->xb + t * b->wide, b->x + t * c->n_embd, l->ffn_norm.data, c->n_embd, c->rms_eps);
    if (c->n_expert) {
        moe(eng, b, l);
        return;
    }
    cpu_matmul(eng->pool, &l->w_gate, b->xb, b->wide, b->hb, F, n, b->act);
    cpu_matmul(eng->pool, &l->w_up, b->xb, b->wide, b->hb2, F, n, b->act);
    for (int t = 0; t < n; t++) {
        if (c->ffn_gelu) cpu_geglu(b->hb + (size_t)t * F, b->hb2 + (size_t)t * F, F);
        else cpu_swiglu(b->hb + (size_t)t * F, b->hb2 + (size_t)t * F, F);
    }
    cpu_matmul(eng->pool, &l->w_down, b->hb, F, b->xb2, c->n_embd, n, b->act);
    if (c->post_norms)
        for (int t = 0; t < n; t++)
            cpu_rmsnorm(b->xb2 + t * c->n_embd, b->xb2 + t * c->n_embd, l->ffn_post_norm.data, c->n_embd, c->rms_eps);
    add_rows(b->x, b->xb2, n, c->n_embd);
}

int cpu_prefill(seam_engine *eng, const int *tokens, int n, int pos0, seam_error *e) {
    const seam_model *m = eng->model;
    const seam_config *c = &m->cfg;
    batch b;
    if (batch_alloc(&b, c, e)) return -1;
    for (int done = 0; done < n; done += b.n) {
        b.n = n - done < BATCH ? n - done : BATCH;
        const double t0 = seam_now();
        for (int t = 0; t < b.n; t++) engine_embed(eng, tokens[done + t], b.x + t * c->n_embd);
        for (int il = 0; il < c->n_layers; il++) {
            attention(&eng[0], &b, &m->w.layers[il], il, pos0 + done);
            ffn(eng, &b, &m->w.layers[il]);
        }
        // the batch's timeline: its time shared out over its tokens
        const double per_token = 1e6 * (seam_now() - t0) / b.n;
        for (int t = 0; t < b.n; t++) {
            seam_token_time tt = {.token = eng->n_run++, .pos = pos0 + done + t, .prefill = 1, .token_us = per_token};
            tt.segment_us[SEG_CPU] = per_token;
            if (timeline_add_token(&eng->timeline, &tt)) {
                batch_free(&b);
                return seam_fail(e, "out of memory for the timeline");
            }
        }
        if (done + b.n == n) memcpy(eng->s.x, b.x + (size_t)(b.n - 1) * c->n_embd, sizeof(float) * c->n_embd);
    }
    batch_free(&b);
    return 0;
}
