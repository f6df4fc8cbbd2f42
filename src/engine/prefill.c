// prefill.c — a prompt through the layers a batch of tokens at a time: the
// GPU layers' part as matrix products (gpu_segment_prefill), the CPU
// layers' here.
//
// Decode reads every weight once per token; a prompt's tokens can share that
// read. Each layer's matrices meet all the batch's activations while a grab
// of rows is in cache (cpu_matmul), and an MoE layer runs each expert once for
// all the tokens that chose it. On the CPU every token's arithmetic is still
// exactly its decode arithmetic -- the same dots, the same per-token norms,
// RoPE and attention over the cache, the experts' outputs summed in each
// token's rank order -- so the logits are the same bit for bit as token by
// token.
#include "engine/prefill.h"

#include <math.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "cpu/ops.h"

#define BATCH SEAM_UBATCH  // tokens a layer takes at once (plan.h: 96, weights reused 96 times; whole tiles of 6 and 8)

struct prefill_batch {
    int n;                   // tokens in this batch
    int wide, hidden;        // max(n_embd, q_dim); the FFN (or expert) width
    float *x, *xb, *xb2;     // (BATCH, n_embd) / (BATCH, wide) / (BATCH, n_embd)
    float *q, *k, *v;        // (BATCH, q_dim), (BATCH, kv_dim) x2
    float *hb, *hb2;         // (BATCH * k_used, hidden): FFN, or every (token, expert) pair's hidden layer
    float *eout;             // (BATCH * k_used, n_embd): each pair's expert output
    float *router;           // (BATCH, n_expert)
    int *chosen;             // (BATCH, k_used) the experts each token chose, by rank
    float *weight;           // (BATCH, k_used) their renormalised weights
    int *pair;               // (BATCH * k_used) the pairs (token * k_used + rank) grouped by expert
    int *slot;               // (BATCH * k_used) where pair p is in that order
    int *first;              // (n_expert + 1) expert e's pairs: pair[first[e] .. first[e + 1])
    float *rope_angles;      // (BATCH, 2 * rope_dim) each token's RoPE angles (engine_rope_angles)
    void *act, *act2;        // quantised inputs: BATCH * k_used rows of the widest input, twice
};
typedef struct prefill_batch batch;

enum { BATCH_BUFFERS = 18 };

// The batch's buffers and their bytes, in one list for allocating them, for
// counting them (prefill_batch_bytes) and for freeing them (bytes NULL: the
// buffers only, c unread).
static void batch_layout(batch *b, const seam_config *c, void **buf[BATCH_BUFFERS], size_t bytes[BATCH_BUFFERS]) {
    void **const fields[BATCH_BUFFERS] = {
        (void **)&b->x,      (void **)&b->xb,     (void **)&b->xb2,    (void **)&b->q,     (void **)&b->k,
        (void **)&b->v,      (void **)&b->hb,     (void **)&b->hb2,    (void **)&b->eout,  (void **)&b->router,
        (void **)&b->chosen, (void **)&b->weight, (void **)&b->pair,   (void **)&b->slot,  (void **)&b->first,
        &b->act,             &b->act2,            (void **)&b->rope_angles,
    };
    memcpy(buf, fields, sizeof fields);
    if (!bytes) return;
    const int q_dim = c->n_heads * c->head_dim, kv_dim = c->n_kv_heads * c->head_dim;
    const size_t ku = c->n_expert ? (size_t)c->n_expert_used : 1, rows = BATCH * ku, f = sizeof(float);
    b->wide = q_dim > c->n_embd ? q_dim : c->n_embd;
    b->hidden = c->n_expert ? c->n_ff_exp : c->n_ff;
    const int widest = b->wide > b->hidden ? b->wide : b->hidden;
    const size_t sizes[BATCH_BUFFERS] = {
        f * BATCH * c->n_embd, f * BATCH * b->wide, f * BATCH * c->n_embd, f * BATCH * q_dim, f * BATCH * kv_dim,
        f * BATCH * kv_dim, f * rows * b->hidden, f * rows * b->hidden, f * rows * c->n_embd,
        f * BATCH * (c->n_expert + 1), sizeof(int) * rows, f * rows, sizeof(int) * rows, sizeof(int) * rows,
        sizeof(int) * (c->n_expert + 1), rows * cpu_matvec_scratch_bytes(widest), rows * cpu_matvec_scratch_bytes(widest),
        f * BATCH * 2 * c->rope_dim,
    };
    memcpy(bytes, sizes, sizeof sizes);
}

uint64_t prefill_batch_bytes(const seam_config *c) {
    batch b;
    void **buf[BATCH_BUFFERS];
    size_t bytes[BATCH_BUFFERS];
    batch_layout(&b, c, buf, bytes);
    uint64_t sum = sizeof b;
    for (int i = 0; i < BATCH_BUFFERS; i++) sum += bytes[i];
    return sum;
}

void prefill_batch_free(batch *b) {
    if (!b) return;
    void **buf[BATCH_BUFFERS];
    batch_layout(b, NULL, buf, NULL);
    for (int i = 0; i < BATCH_BUFFERS; i++) free(*buf[i]);
    free(b);
}

batch *prefill_batch_new(const seam_config *c, seam_error *e) {
    batch *b = calloc(1, sizeof *b);
    if (!b) return seam_fail(e, "out of memory for a prefill batch"), NULL;
    void **buf[BATCH_BUFFERS];
    size_t bytes[BATCH_BUFFERS];
    batch_layout(b, c, buf, bytes);
    for (int i = 0; i < BATCH_BUFFERS; i++)
        if (!(*buf[i] = seam_alloc_resident(bytes[i]))) {
            prefill_batch_free(b);
            return seam_fail(e, "out of memory for a prefill batch of %d tokens", BATCH), NULL;
        }
    return b;
}

// A step each token of the batch takes alone -- norms, RoPE, the residual
// adds, the FFN's activation -- with the batch's tokens taken one at a time
// by the pool's threads, so that the other cores do not wait while one does
// it.
typedef void (*token_step_fn)(seam_engine *eng, batch *b, const seam_layer_weights *l, int il, int pos, int t);

typedef struct {
    token_step_fn step;
    seam_engine *eng;
    batch *b;
    const seam_layer_weights *l;
    int il, pos0;
    int n;             // the steps: tokens, or an MoE layer's (token, expert) pairs
    _Atomic int next;  // the next one to take
} token_job;

static void token_share(void *ctx, int ith, int nth) {
    (void)ith, (void)nth;
    token_job *j = ctx;
    for (int t; (t = atomic_fetch_add(&j->next, 1)) < j->n;) j->step(j->eng, j->b, j->l, j->il, j->pos0 + t, t);
}

static void each_token(token_step_fn step, seam_engine *eng, batch *b, const seam_layer_weights *l, int il, int pos0) {
    token_job job = {step, eng, b, l, il, pos0, b->n, 0};
    pool_run(eng->pool, token_share, &job);
}

// The same for each (token, expert) pair of an MoE layer, by slot (t: the
// pair's place in expert order).
static void each_pair(token_step_fn step, seam_engine *eng, batch *b, const seam_layer_weights *l) {
    token_job job = {step, eng, b, l, 0, 0, b->n * eng->model->cfg.n_expert_used, 0};
    pool_run(eng->pool, token_share, &job);
}

static void attn_norm(seam_engine *eng, batch *b, const seam_layer_weights *l, int il, int pos, int t) {
    (void)il, (void)pos;
    const seam_config *c = &eng->model->cfg;
    cpu_rmsnorm(b->xb + t * b->wide, b->x + t * c->n_embd, l->attn_norm.data, c->n_embd, c->rms_eps);
}

// q, k, v of token t made ready at its position; its k and v join the cache.
static void qkv_ready(seam_engine *eng, batch *b, const seam_layer_weights *l, int il, int pos, int t) {
    const seam_config *c = &eng->model->cfg;
    const int q_dim = c->n_heads * c->head_dim, kv_dim = c->n_kv_heads * c->head_dim;
    float *q = b->q + t * q_dim, *k = b->k + t * kv_dim, *v = b->v + t * kv_dim;
    engine_qkv_ready(eng, l, il, pos, b->rope_angles + (size_t)t * 2 * c->rope_dim, q, k, v);
}

// A block's output (xb2; gemma3 norms it) into the residual stream.
static void add_block(seam_engine *eng, batch *b, const float *post_norm, int t) {
    const seam_config *c = &eng->model->cfg;
    float *y = b->xb2 + t * c->n_embd, *x = b->x + t * c->n_embd;
    if (c->post_norms) cpu_rmsnorm(y, y, post_norm, c->n_embd, c->rms_eps);
    for (int i = 0; i < c->n_embd; i++) x[i] += y[i];
}

// The attention's output joins the residual; the FFN's input is normed.
static void attn_out_ffn_norm(seam_engine *eng, batch *b, const seam_layer_weights *l, int il, int pos, int t) {
    (void)il, (void)pos;
    const seam_config *c = &eng->model->cfg;
    add_block(eng, b, l->attn_post_norm.data, t);
    cpu_rmsnorm(b->xb + t * b->wide, b->x + t * c->n_embd, l->ffn_norm.data, c->n_embd, c->rms_eps);
}

// The attention's output turned back from a rotated V cache (engine_attention_out).
static void attn_turn_back(seam_engine *eng, batch *b, const seam_layer_weights *l, int il, int pos, int t) {
    (void)l, (void)il, (void)pos;
    engine_attention_out(eng, b->xb + (size_t)t * b->wide);
}

static void ffn_act(seam_engine *eng, batch *b, const seam_layer_weights *l, int il, int pos, int t) {
    (void)l, (void)il, (void)pos;
    const seam_config *c = &eng->model->cfg;
    float *gate = b->hb + (size_t)t * c->n_ff, *up = b->hb2 + (size_t)t * c->n_ff;
    if (c->ffn_gelu) cpu_geglu(gate, up, c->n_ff);
    else cpu_swiglu(gate, up, c->n_ff);
}

static void ffn_out(seam_engine *eng, batch *b, const seam_layer_weights *l, int il, int pos, int t) {
    (void)il, (void)pos;
    add_block(eng, b, l->ffn_post_norm.data, t);
}

// engine.c's attention_block, for the batch's tokens at positions pos0..,
// ending with the FFN's normed input in xb.
static void attention(seam_engine *eng, batch *b, const seam_layer_weights *l, int il, int pos0) {
    const seam_config *c = &eng->model->cfg;
    seam_state *s = &eng->s;
    const int q_dim = c->n_heads * c->head_dim, kv_dim = c->n_kv_heads * c->head_dim, n = b->n;
    each_token(attn_norm, eng, b, l, il, pos0);
    const seam_tensor *qkv[] = {&l->wq, &l->wk, &l->wv};
    float *const qkv_out[] = {b->q, b->k, b->v};
    cpu_matmul_parts(eng->pool, 3, qkv, b->xb, b->wide, qkv_out, (const int64_t[]){q_dim, kv_dim, kv_dim}, n, b->act);
    each_token(qkv_ready, eng, b, l, il, pos0);
    // each token attends over the cache up to its own position
    int t0[BATCH], t1[BATCH];
    for (int t = 0; t < n; t++) {
        t1[t] = pos0 + t + 1;
        t0[t] = t1[t] - plan_kv_visible(c, il, pos0 + t);
    }
    const cpu_kv kv = engine_kv_layer(eng, il);
    cpu_attention(eng->pool, n, b->xb, b->wide, b->q, q_dim, &kv, c->n_heads, c->n_kv_heads, c->head_dim, t0, t1,
                  c->kq_scale, s->att, cpu_attention_scratch_floats(eng->n_ctx, c->head_dim));
    if (s->kv.rot_v) each_token(attn_turn_back, eng, b, l, il, pos0);
    cpu_matmul(eng->pool, &l->wo, b->xb, b->wide, b->xb2, c->n_embd, n, b->act);
    each_token(attn_out_ffn_norm, eng, b, l, il, pos0);
}

// The input of the pair in slot i quantised for the experts' gate (in act)
// and, if up takes another type, for up (in act2).
static void pair_input(seam_engine *eng, batch *b, const seam_layer_weights *l, int il, int pos, int i) {
    (void)il, (void)pos;
    const seam_config *c = &eng->model->cfg;
    const float *x = b->xb + (size_t)(b->pair[i] / c->n_expert_used) * b->wide;
    const size_t at = (size_t)i * cpu_matvec_scratch_bytes(c->n_embd);
    const uint32_t gate = seam_vec_dot_type(l->ffn_gate_exps.type), up = seam_vec_dot_type(l->ffn_up_exps.type);
    cpu_quantize_input(gate, x, (uint8_t *)b->act + at, c->n_embd);
    if (up != gate) cpu_quantize_input(up, x, (uint8_t *)b->act2 + at, c->n_embd);
}

// Slot i's hidden layer activated, and quantised for the experts' down.
static void pair_hidden(seam_engine *eng, batch *b, const seam_layer_weights *l, int il, int pos, int i) {
    (void)il, (void)pos;
    const int F = eng->model->cfg.n_ff_exp;
    float *h = b->hb + (size_t)i * F;
    cpu_swiglu(h, b->hb2 + (size_t)i * F, F);
    cpu_quantize_input(seam_vec_dot_type(l->ffn_down_exps.type), h,
                       (uint8_t *)b->act2 + (size_t)i * cpu_matvec_scratch_bytes(F), F);
}

// Token t's experts' outputs, weighted and summed in rank order as decode
// sums them, into the residual stream.
static void moe_sum(seam_engine *eng, batch *b, const seam_layer_weights *l, int il, int pos, int t) {
    (void)l, (void)il, (void)pos;
    const seam_config *c = &eng->model->cfg;
    const int ku = c->n_expert_used, E = c->n_embd;
    float *x = b->x + (size_t)t * E;
    for (int i = 0; i < E; i++) {
        float sum = 0;
        for (int j = 0; j < ku; j++) {
            const float term = b->eout[(size_t)b->slot[t * ku + j] * E + i] * b->weight[t * ku + j];
            sum = j ? sum + term : term;
        }
        x[i] += sum;
    }
}

// One expert's rows (gate, up or down: which, its first row ex * rows) as
// an item of a job, against its pairs' inputs in act and outputs in out.
static cpu_matmul_item expert_item(const seam_tensor *w, int64_t rows, int ex, const batch *b, const void *act,
                                   int64_t cols, float *out, seam_tensor *slice) {
    *slice = tensor_rows(w, (int64_t)ex * rows, rows);
    const uint64_t stride = cpu_matvec_scratch_bytes(cols);
    return (cpu_matmul_item){
        .w = slice, .act = (const uint8_t *)act + (size_t)b->first[ex] * stride, .act_stride = stride,
        .n = b->first[ex + 1] - b->first[ex], .out = out + (size_t)b->first[ex] * rows, .ldo = rows,
    };
}

// engine.c's moe_block, grouped by expert: each expert's rows are read once
// for every (token, rank) pair that chose it, and every expert's gate and up,
// then every expert's down, run as one pool job.
static void moe(seam_engine *eng, batch *b, const seam_layer_weights *l) {
    const seam_config *c = &eng->model->cfg;
    const int ku = c->n_expert_used, E = c->n_embd, F = c->n_ff_exp, n = b->n, ne = c->n_expert;
    cpu_matmul(eng->pool, &l->ffn_gate_inp, b->xb, b->wide, b->router, ne, n, b->act);
    for (int t = 0; t < n; t++) engine_route(c, b->router + t * ne, b->chosen + t * ku, b->weight + t * ku);
    // the pairs in expert order (a counting sort)
    memset(b->first, 0, sizeof(int) * (ne + 1));
    for (int p = 0; p < n * ku; p++) b->first[b->chosen[p] + 1]++;
    for (int ex = 0; ex < ne; ex++) b->first[ex + 1] += b->first[ex];
    int fill[ne];
    memcpy(fill, b->first, sizeof fill);
    for (int p = 0; p < n * ku; p++) {
        b->slot[p] = fill[b->chosen[p]]++;
        b->pair[b->slot[p]] = p;
    }
    each_pair(pair_input, eng, b, l);
    const void *up_act =
        seam_vec_dot_type(l->ffn_up_exps.type) == seam_vec_dot_type(l->ffn_gate_exps.type) ? b->act : b->act2;
    cpu_matmul_item items[2 * ne];
    seam_tensor slices[2 * ne];
    int n_items = 0;
    for (int ex = 0; ex < ne; ex++)
        if (b->first[ex + 1] > b->first[ex]) {
            items[n_items] = expert_item(&l->ffn_gate_exps, F, ex, b, b->act, E, b->hb, &slices[n_items]);
            n_items++;
            items[n_items] = expert_item(&l->ffn_up_exps, F, ex, b, up_act, E, b->hb2, &slices[n_items]);
            n_items++;
        }
    cpu_matmul_items(eng->pool, n_items, items);
    each_pair(pair_hidden, eng, b, l);
    n_items = 0;
    for (int ex = 0; ex < ne; ex++)
        if (b->first[ex + 1] > b->first[ex]) {
            items[n_items] = expert_item(&l->ffn_down_exps, E, ex, b, b->act2, F, b->eout, &slices[n_items]);
            n_items++;
        }
    cpu_matmul_items(eng->pool, n_items, items);
    each_token(moe_sum, eng, b, l, 0, 0);
}

// engine.c's ffn_block, on the normed input attention() left in xb.
static void ffn(seam_engine *eng, batch *b, const seam_layer_weights *l, int il) {
    const seam_config *c = &eng->model->cfg;
    const int n = b->n, F = c->n_ff;
    if (c->n_expert) {
        moe(eng, b, l);
        return;
    }
    const seam_tensor *gate_up[] = {&l->w_gate, &l->w_up};
    float *const gate_up_out[] = {b->hb, b->hb2};
    cpu_matmul_parts(eng->pool, 2, gate_up, b->xb, b->wide, gate_up_out, (const int64_t[]){F, F}, n, b->act);
    each_token(ffn_act, eng, b, l, il, 0);
    cpu_matmul(eng->pool, &l->w_down, b->hb, F, b->xb2, c->n_embd, n, b->act);
    each_token(ffn_out, eng, b, l, il, 0);
}

int prefill_batch(seam_engine *eng, const int *tokens, int n, int pos0, bool last, float **logits, seam_error *e) {
    const seam_model *m = eng->model;
    const seam_config *c = &m->cfg;
    batch *b = eng->s.batch;
    b->n = n;
    const double t0 = seam_now();
    for (int t = 0; t < n; t++) {
        engine_embed(eng, tokens[t], b->x + t * c->n_embd);
        engine_rope_angles(c, pos0 + t, b->rope_angles + (size_t)t * 2 * c->rope_dim);
    }
    // the GPU layers (and the head, on the last batch, when it is there)
    seam_token_time gpu = {.token = eng->n_run};
    const bool gpu_head = last && eng->head_on_gpu;
    if (eng->gpu &&
        gpu_segment_prefill(eng->gpu, b->x, n, pos0, gpu_head, logits, &eng->timeline, &gpu, e))
        return -1;
    const double t_layers = seam_now();
    for (int il = eng->gpu_layers; il < c->n_layers; il++) {
        attention(eng, b, &m->w.layers[il], il, pos0);
        ffn(eng, b, &m->w.layers[il], il);
    }
    const double t_head = seam_now();
    if (last) memcpy(eng->s.x, b->x + (size_t)(n - 1) * c->n_embd, sizeof(float) * c->n_embd);
    if (last && !eng->head_on_gpu) {
        engine_head(eng);
        *logits = eng->s.logits;
    }
    // the batch's timeline: its segments' times shared out over its tokens
    const double t_end = seam_now(), share = 1e6 / n;
    for (int t = 0; t < n; t++) {
        seam_token_time tt = {.token = eng->n_run++, .pos = pos0 + t, .prefill = 1, .token_us = share * (t_end - t0)};
        tt.segment_us[SEG_GPU] = gpu.segment_us[SEG_GPU] / n;
        tt.segment_us[SEG_CPU] = share * (t_head - (eng->gpu ? t_layers : t0));
        tt.segment_us[SEG_HEAD] = share * (t_end - t_head);
        if (eng->gpu) tt.gpu_idle_us = share * (t_end - t_layers);  // one stream: the GPU waits for the CPU's part
        if (timeline_add_token(&eng->timeline, &tt)) return seam_fail(e, "out of memory for the timeline");
    }
    return 0;
}
