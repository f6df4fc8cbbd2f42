// layer.c — one transformer layer, top to bottom, for every backend and both
// phases. Where a model family differs, it says so here and nowhere else:
// qwen2's q/k/v biases, qwen3's and gemma3's per-head norms, gemma3's
// scaled queries, post-norms and GELU, qwen3moe's experts.
#include "model/layer.h"

#define TRY(op)         \
    do {                \
        if (op) return -1; \
    } while (0)

int layer_forward(const layer_backend *b, const seam_config *c, int il, const seam_layer_weights *l, int n,
                  seam_error *e) {
    const layer_ops *op = b->ops;
    void *be = b->be;
    const layer_acts *a = &b->acts;
    const int E = c->n_embd, q_dim = c->n_heads * c->head_dim, kv_dim = c->n_kv_heads * c->head_dim;

    // attention: the normed input projected to q, k and v
    TRY(op->rmsnorm(be, a->xb, a->x, &l->attn_norm, n, E, e));
    const seam_tensor *qkv[] = {&l->wq, &l->wk, &l->wv};
    TRY(op->matmul(be, 3, qkv, a->xb, (float *const[]){a->q, a->k, a->v}, n, e));
    if (c->qkv_bias) {
        TRY(op->add_bias(be, a->q, &l->bq, n, q_dim, e));
        TRY(op->add_bias(be, a->k, &l->bk, n, kv_dim, e));
        TRY(op->add_bias(be, a->v, &l->bv, n, kv_dim, e));
    }
    if (c->qk_norm) {
        TRY(op->rmsnorm(be, a->q, a->q, &l->q_norm, n * c->n_heads, c->head_dim, e));
        TRY(op->rmsnorm(be, a->k, a->k, &l->k_norm, n * c->n_kv_heads, c->head_dim, e));
    }
    TRY(op->rope(be, il, a->q, a->k, n, e));
    if (c->q_scale != 1.0f) TRY(op->scale(be, a->q, c->q_scale, n, q_dim, e));
    // a quantised cache takes keys (and so queries) and values turned, as
    // llama.cpp's does, so that an outlier spreads over its block first
    if (b->rot_k) {
        TRY(op->rotate(be, a->q, n, q_dim, b->rot_k, e));
        TRY(op->rotate(be, a->k, n, kv_dim, b->rot_k, e));
    }
    if (b->rot_v) TRY(op->rotate(be, a->v, n, kv_dim, b->rot_v, e));

    // this batch's keys and values join the cache; each token attends over
    // the positions up to its own (a sliding layer's: its window)
    TRY(op->kv_append(be, il, a->k, a->v, n, e));
    TRY(op->attention(be, il, a->xb, a->q, n, e));
    if (b->rot_v) TRY(op->rotate(be, a->xb, n, q_dim, b->rot_v, e));

    // the output projection (gemma3 norms it) joins the residual stream
    const seam_tensor *wo = &l->wo;
    TRY(op->matmul(be, 1, &wo, a->xb, &a->xb2, n, e));
    if (c->post_norms) TRY(op->rmsnorm(be, a->xb2, a->xb2, &l->attn_post_norm, n, E, e));
    TRY(op->add(be, a->x, a->xb2, n, E, e));

    // the feed-forward block: the experts (MoE), or one gated FFN
    TRY(op->rmsnorm(be, a->xb, a->x, &l->ffn_norm, n, E, e));
    if (c->n_expert) {
        TRY(op->moe(be, il, l, a->xb, a->xb2, n, e));
    } else {
        const seam_tensor *gate_up[] = {&l->w_gate, &l->w_up}, *down = &l->w_down;
        TRY(op->matmul(be, 2, gate_up, a->xb, (float *const[]){a->hb, a->hb2}, n, e));
        TRY(op->glu(be, a->hb, a->hb2, n, c->n_ff, c->ffn_gelu, e));
        TRY(op->matmul(be, 1, &down, a->hb, &a->xb2, n, e));
        if (c->post_norms) TRY(op->rmsnorm(be, a->xb2, a->xb2, &l->ffn_post_norm, n, E, e));
    }
    return op->add(be, a->x, a->xb2, n, E, e);
}
