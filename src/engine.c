// engine.c — the forward pass of one token, top to bottom.
#include "engine.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cpu/ops.h"

uint64_t engine_kv_bytes(const seam_config *c, int n_ctx) {
    return 2ull * (uint64_t)c->n_layers * (uint64_t)n_ctx * (uint64_t)c->n_kv_heads *
           (uint64_t)c->head_dim * sizeof(seam_f16);
}

int engine_init(seam_engine *eng, const seam_model *m, int n_ctx, seam_error *e) {
    memset(eng, 0, sizeof *eng);
    const seam_config *c = &m->cfg;
    if (n_ctx < 1) return seam_fail(e, "context size must be at least 1 (got %d)", n_ctx);
    eng->model = m;
    eng->n_ctx = n_ctx;
    const int q_dim = c->n_heads * c->head_dim;
    const int kv_dim = c->n_kv_heads * c->head_dim;
    const int wide = q_dim > c->n_embd ? q_dim : c->n_embd;
    const int widest = wide > c->n_ff ? wide : c->n_ff;
    const size_t kv_elems = (size_t)c->n_layers * (size_t)n_ctx * (size_t)kv_dim;
    seam_state *s = &eng->s;
    s->x = calloc((size_t)c->n_embd, sizeof(float));
    s->xb = calloc((size_t)wide, sizeof(float));
    s->xb2 = calloc((size_t)c->n_embd, sizeof(float));
    s->q = calloc((size_t)q_dim, sizeof(float));
    s->k = calloc((size_t)kv_dim, sizeof(float));
    s->v = calloc((size_t)kv_dim, sizeof(float));
    s->att = calloc((size_t)n_ctx, sizeof(float));
    s->hb = calloc((size_t)c->n_ff, sizeof(float));
    s->hb2 = calloc((size_t)c->n_ff, sizeof(float));
    s->logits = calloc((size_t)c->n_vocab, sizeof(float));
    s->act = malloc(cpu_matvec_scratch_bytes(widest));
    s->key_cache = calloc(kv_elems, sizeof(seam_f16));
    s->value_cache = calloc(kv_elems, sizeof(seam_f16));
    if (!s->x || !s->xb || !s->xb2 || !s->q || !s->k || !s->v || !s->att || !s->hb || !s->hb2 ||
        !s->logits || !s->act || !s->key_cache || !s->value_cache) {
        engine_free(eng);
        return seam_fail(e, "out of memory: the KV cache for %d positions needs %.1f MiB", n_ctx,
                         (double)engine_kv_bytes(c, n_ctx) / (1 << 20));
    }
    return 0;
}

void engine_free(seam_engine *eng) {
    seam_state *s = &eng->s;
    free(s->x), free(s->xb), free(s->xb2), free(s->q), free(s->k), free(s->v), free(s->att);
    free(s->hb), free(s->hb2), free(s->logits), free(s->act);
    free(s->key_cache), free(s->value_cache);
    memset(eng, 0, sizeof *eng);
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

static void attention_block(seam_engine *eng, const seam_layer_weights *l, int il, int pos) {
    const seam_config *c = &eng->model->cfg;
    seam_state *s = &eng->s;
    const int kv_dim = c->n_kv_heads * c->head_dim;
    const int group = c->n_heads / c->n_kv_heads;

    cpu_rmsnorm(s->xb, s->x, l->attn_norm.data, c->n_embd, c->rms_eps);

    // q, k, v projections (with qwen2's biases, qwen3's per-head norms), then RoPE
    cpu_matvec(&l->wq, s->xb, s->q, s->act);
    cpu_matvec(&l->wk, s->xb, s->k, s->act);
    cpu_matvec(&l->wv, s->xb, s->v, s->act);
    if (c->qkv_bias) {
        add_bias(s->q, &l->bq, c->n_heads * c->head_dim);
        add_bias(s->k, &l->bk, kv_dim);
        add_bias(s->v, &l->bv, kv_dim);
    }
    if (c->qk_norm) {
        head_norm(s->q, c->n_heads, c->head_dim, &l->q_norm, c->rms_eps);
        head_norm(s->k, c->n_kv_heads, c->head_dim, &l->k_norm, c->rms_eps);
    }
    cpu_rope(s->q, c->n_heads, c->head_dim, c->rope_dim, pos, c->rope_base, c->rope_neox);
    cpu_rope(s->k, c->n_kv_heads, c->head_dim, c->rope_dim, pos, c->rope_base, c->rope_neox);

    // this position's k and v join the cache (as f16, like llama.cpp's default cache type)
    const size_t layer_off = (size_t)il * eng->n_ctx * kv_dim;
    seam_f16 *kc = s->key_cache + layer_off;
    seam_f16 *vc = s->value_cache + layer_off;
    for (int i = 0; i < kv_dim; i++) {
        kc[(size_t)pos * kv_dim + i] = seam_f32_to_f16(s->k[i]);
        vc[(size_t)pos * kv_dim + i] = seam_f32_to_f16(s->v[i]);
    }

    // each query head attends over positions 0..pos of its KV head
    const float scale = 1.0f / sqrtf((float)c->head_dim);
    for (int h = 0; h < c->n_heads; h++) {
        const int kvh = h / group;
        cpu_attention_head(s->xb + (size_t)h * c->head_dim, s->q + (size_t)h * c->head_dim,
                           kc + (size_t)kvh * c->head_dim, vc + (size_t)kvh * c->head_dim, pos + 1,
                           c->head_dim, kv_dim, scale, s->att);
    }

    // output projection, back into the residual stream
    cpu_matvec(&l->wo, s->xb, s->xb2, s->act);
    for (int i = 0; i < c->n_embd; i++) s->x[i] += s->xb2[i];
}

static void ffn_block(seam_engine *eng, const seam_layer_weights *l) {
    const seam_config *c = &eng->model->cfg;
    seam_state *s = &eng->s;
    cpu_rmsnorm(s->xb, s->x, l->ffn_norm.data, c->n_embd, c->rms_eps);
    cpu_matvec(&l->w_gate, s->xb, s->hb, s->act);
    cpu_matvec(&l->w_up, s->xb, s->hb2, s->act);
    cpu_swiglu(s->hb, s->hb2, c->n_ff);
    cpu_matvec(&l->w_down, s->hb, s->xb2, s->act);
    for (int i = 0; i < c->n_embd; i++) s->x[i] += s->xb2[i];
}

int engine_forward(seam_engine *eng, int token, int pos, float **logits, seam_error *e) {
    const seam_model *m = eng->model;
    const seam_config *c = &m->cfg;
    seam_state *s = &eng->s;
    if (token < 0 || token >= c->n_vocab)
        return seam_fail(e, "token id %d is outside the vocabulary (0..%d)", token, c->n_vocab - 1);
    if (pos < 0 || pos >= eng->n_ctx)
        return seam_fail(e, "position %d is past the context of %d tokens (raise -c)", pos, eng->n_ctx);

    // the token's embedding row, dequantised
    const seam_tensor *emb = &m->w.tok_embd;
    seam_dequantize_row(emb->type, (const uint8_t *)emb->data + (uint64_t)token * emb->row_bytes,
                        s->x, c->n_embd);

    for (int il = 0; il < c->n_layers; il++) {
        const seam_layer_weights *l = &m->w.layers[il];
        attention_block(eng, l, il, pos);
        ffn_block(eng, l);
    }

    // final norm and the output head
    cpu_rmsnorm(s->x, s->x, m->w.output_norm.data, c->n_embd, c->rms_eps);
    cpu_matvec(&m->w.output, s->x, s->logits, s->act);
    *logits = s->logits;
    return 0;
}
