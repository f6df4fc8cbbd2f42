// layer_ops.c — model/layer.h's operations on the CUDA device, for the GPU
// segment's layers (gpu_segment.c runs the recipe over them): each one
// kernel launch or a few, on the segment's stream (and so into its graph
// when one is being captured). A token's products are matvecs over the
// quantised weights; a batch's are cuBLAS GEMMs over the weights turned to
// f16.
#ifdef SEAM_HAVE_CUDA

#include "gpu/segment_state.h"

static int op_rmsnorm(void *be, float *out, const float *x, const seam_tensor *w, int rows, int cols, seam_error *e) {
    gpu_segment *g = be;
    return seam_cuda_rmsnorm(g->stream, out, x, w->data, rows, cols, g->model->cfg.rms_eps, e);
}

int gpu_matvec(gpu_segment *g, const seam_tensor *w, const float *x, float *out, seam_error *e) {
    return seam_cuda_matvec(g->stream, w->type, w->data, w->rows, w->cols, x, out, g->scratch, e);
}

static int op_matmul(void *be, int n_mats, const seam_tensor *const w[], const float *x, float *const out[], int n,
                     seam_error *e) {
    gpu_segment *g = be;
    if (n == 1) {
        for (int i = 0; i < n_mats; i++)
            if (gpu_matvec(g, w[i], x, out[i], e)) return -1;
        return 0;
    }
    // the batch's input in f16 once, for every matrix that shares it
    if (seam_cuda_quantize(g->stream, GGML_TYPE_F16, x, g->x16, (int64_t)n * w[0]->cols, e)) return -1;
    for (int i = 0; i < n_mats; i++)
        if (seam_cuda_matmul(g->blas, g->stream, w[i]->type, w[i]->data, w[i]->rows, w[i]->cols, g->x16, n, out[i],
                             g->w16, e))
            return -1;
    return 0;
}

static int op_add_bias(void *be, float *x, const seam_tensor *b, int n, int cols, seam_error *e) {
    return seam_cuda_add_rows(((gpu_segment *)be)->stream, x, b->data, n, cols, e);
}

static int op_add(void *be, float *x, const float *y, int n, int cols, seam_error *e) {
    return seam_cuda_add(((gpu_segment *)be)->stream, x, y, n * cols, e);
}

static int op_scale(void *be, float *x, float s, int n, int cols, seam_error *e) {
    return seam_cuda_scale(((gpu_segment *)be)->stream, x, s, n * cols, e);
}

// Row t at position step[t].pos (the step buffer, so that a graph replays
// at every position).
static int op_rope(void *be, int il, float *q, float *k, int n, seam_error *e) {
    gpu_segment *g = be;
    const seam_config *c = &g->model->cfg;
    const bool swa = c->layer_swa[il];
    const float base = swa ? c->rope_base_swa : c->rope_base, freq_scale = swa ? 1.0f : c->rope_scale;
    return seam_cuda_rope(g->stream, q, n, c->n_heads, c->head_dim, c->rope_dim, base, freq_scale, c->rope_neox,
                          g->step, e) ||
           seam_cuda_rope(g->stream, k, n, c->n_kv_heads, c->head_dim, c->rope_dim, base, freq_scale, c->rope_neox,
                          g->step, e);
}

static int op_rotate(void *be, float *x, int n, int cols, int block, seam_error *e) {
    return seam_cuda_fwht(((gpu_segment *)be)->stream, x, n * cols, block, e);
}

// Token by token: each token's keys join the cache before the next token
// attends, and each attends to the positions up to its own.
static int op_kv_append(void *be, int il, const float *k, const float *v, int n, seam_error *e) {
    gpu_segment *g = be;
    const seam_config *c = &g->model->cfg;
    const int kv_dim = c->n_kv_heads * c->head_dim;
    for (int t = 0; t < n; t++)
        if (seam_cuda_kv_append(g->stream, &g->layers[il].kv, k + (size_t)t * kv_dim, v + (size_t)t * kv_dim, kv_dim,
                                g->n_ctx, g->step + t, e))
            return -1;
    return 0;
}

static int op_attention(void *be, int il, float *out, const float *q, int n, seam_error *e) {
    gpu_segment *g = be;
    const seam_config *c = &g->model->cfg;
    const int q_dim = c->n_heads * c->head_dim;
    for (int t = 0; t < n; t++)
        if (seam_cuda_attention(g->stream, out + (size_t)t * q_dim, q + (size_t)t * q_dim, &g->layers[il].kv,
                                c->n_heads, c->n_kv_heads, c->head_dim, g->n_ctx, c->layer_swa[il] ? c->n_swa : 0,
                                c->kq_scale, g->scores, g->step + t, e))
            return -1;
    return 0;
}

static int op_glu(void *be, float *gate, const float *up, int n, int cols, bool gelu, seam_error *e) {
    gpu_segment *g = be;
    return gelu ? seam_cuda_geglu(g->stream, gate, up, n * cols, e) : seam_cuda_swiglu(g->stream, gate, up, n * cols, e);
}

// One token's experts (the segment takes an MoE layer's tokens one by one,
// gpu_segment_gemm): the router picks k experts into g->chosen and
// g->weights on the device, and each chosen expert's SwiGLU FFN runs on the
// rows of its slice, found from that index, its output weighted into out.
// Layer il's experts on the CPU: the router's logits are computed here; they
// and the experts' input cross to the host, the CPU routes and runs the
// experts over the host's copy of their weights, and their weighted sum
// crosses back into out. Each crossing is timed like the segment's own;
// the host's time inside the layer is kept apart from the GPU's.
static int host_experts(gpu_segment *g, int il, const seam_layer_weights *l, const float *x, float *out, seam_error *e) {
    const seam_config *c = &g->model->cfg;
    const size_t in_bytes = (size_t)c->n_embd * sizeof(float), router_bytes = (size_t)c->n_expert * sizeof(float);
    // the GPU's part of the layer done first, so that the host's time below is the host's alone
    if (gpu_matvec(g, &l->ffn_gate_inp, x, g->router, e) || seam_cuda_stream_synchronize(g->stream, e)) return -1;
    const double t0 = seam_now();
    if (gpu_crossing(g, CROSS_D2H, g->experts_in, x, in_bytes, il, true, g->run_token, g->run_tl, e) ||
        gpu_crossing(g, CROSS_D2H, g->experts_in + c->n_embd, g->router, router_bytes, il, true, g->run_token, g->run_tl, e))
        return -1;
    const double t1 = seam_now();
    cpu_backend_experts(g->cpu, &g->model->w.layers[il], g->experts_in, g->experts_in + c->n_embd, g->experts_out, 1);
    const double t2 = seam_now();
    if (gpu_crossing(g, CROSS_H2D, out, g->experts_out, in_bytes, il, true, g->run_token, g->run_tl, e)) return -1;
    g->experts_us[il] += 1e6 * (t2 - t1);
    g->host_us[il] += 1e6 * (seam_now() - t0);
    return 0;
}

static int op_moe(void *be, int il, const seam_layer_weights *l, const float *x, float *out, int n, seam_error *e) {
    gpu_segment *g = be;
    if (n != 1) return seam_fail(e, "the GPU's experts take one token at a time (got %d)", n);
    if (g->host_experts[il]) return host_experts(g, il, l, x, out, e);
    const seam_config *c = &g->model->cfg;
    seam_cuda_stream *s = g->stream;
    const int E = c->n_embd, F = c->n_ff_exp, n_exp = c->n_expert;
    const seam_tensor *gate = &l->ffn_gate_exps, *up = &l->ffn_up_exps, *down = &l->ffn_down_exps;
    float *hb = g->token.hb, *hb2 = g->token.hb2;
    if (gpu_matvec(g, &l->ffn_gate_inp, x, g->router, e) ||
        seam_cuda_moe_route(s, g->router, n_exp, c->n_expert_used, g->chosen, g->weights, e) ||
        seam_cuda_quantize(s, gate->type, x, g->scratch, E, e))
        return -1;
    for (int j = 0; j < c->n_expert_used; j++) {
        const int32_t *ex = g->chosen + j;
        // gate and up share the input's quantisation when their types do
        if (up->type != gate->type && seam_cuda_quantize(s, up->type, x, g->scratch_hidden, E, e)) return -1;
        const void *up_act = up->type != gate->type ? g->scratch_hidden : g->scratch;
        if (seam_cuda_matvec_expert(s, gate->type, gate->data, n_exp, F, E, ex, g->scratch, hb, e) ||
            seam_cuda_matvec_expert(s, up->type, up->data, n_exp, F, E, ex, up_act, hb2, e) ||
            seam_cuda_swiglu(s, hb, hb2, F, e) || seam_cuda_quantize(s, down->type, hb, g->scratch_hidden, F, e) ||
            seam_cuda_matvec_expert(s, down->type, down->data, n_exp, E, F, ex, g->scratch_hidden, g->expert_out, e) ||
            seam_cuda_moe_accumulate(s, out, g->expert_out, g->weights, j, E, e))
            return -1;
    }
    return 0;
}

const layer_ops gpu_layer_ops = {
    .rmsnorm = op_rmsnorm, .matmul = op_matmul,     .add_bias = op_add_bias, .add = op_add,
    .scale = op_scale,     .rope = op_rope,         .rotate = op_rotate,     .kv_append = op_kv_append,
    .attention = op_attention, .glu = op_glu,       .moe = op_moe,
};

#endif
