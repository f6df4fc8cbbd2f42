// gpu_segment.c — layers 0..N-1 on the CUDA device, each crossing timed.
//
// Each layer is model/layer.c's recipe over the CUDA backend's operations
// (gpu/layer_ops.c, on kernels/seam_cuda.h): the same norms, projections, RoPE,
// attention over an f16 or q8_0 KV cache and gated FFN or experts as the
// CPU's, on device buffers. Per-token values (the position) live in a
// device step buffer, so a decoded token's segment is captured once as a
// CUDA graph and replayed: launch overhead is one graph launch a token
// instead of ~15 launches a layer.
//
// A prompt's batch can instead cross the layers as matrix products: the
// same recipe over SEAM_UBATCH rows -- norms, RoPE at each row's position,
// elementwise ones over the whole batch -- with each projection one cuBLAS
// GEMM on the weights dequantised to f16, and the KV append and attention
// per token of the batch, each token seeing the positions up to its own.
#include "gpu/gpu_segment.h"

#include <stdlib.h>
#include <string.h>


enum { PREFILL_BUFFERS = 11 };
// cuBLAS's workspace, given to it (cublasSetWorkspace) so that the plan
// counts it: its default on Hopper, the largest it takes (cuBLAS docs).
#define GPU_BLAS_WORKSPACE_BYTES (32ull << 20)

// The batched path's device buffers (gpu_segment's bx .. w16 and cuBLAS's
// workspace, in that order): false where it does not run (mode never takes the GEMM, MoE, no
// layers).
static bool prefill_sizes(const seam_model *m, int n_layers, seam_gpu_prefill mode, uint64_t bytes[PREFILL_BUFFERS]) {
    const seam_config *c = &m->cfg;
    if (!gpu_prefill_uses_gemm(mode) || c->n_expert || n_layers <= 0) return false;
    const uint64_t U = SEAM_UBATCH, E = (uint64_t)c->n_embd, F = (uint64_t)c->n_ff;
    const uint64_t q_dim = (uint64_t)c->n_heads * c->head_dim, kv_dim = (uint64_t)c->n_kv_heads * c->head_dim;
    const uint64_t wide = q_dim > E ? q_dim : E;
    uint64_t largest = 0;  // weights of the largest matrix a product reads
    for (int il = 0; il < n_layers; il++) {
        const seam_layer_weights *l = &m->w.layers[il];
        const seam_tensor *mats[] = {&l->wq, &l->wk, &l->wv, &l->wo, &l->w_gate, &l->w_up, &l->w_down};
        for (size_t i = 0; i < sizeof mats / sizeof *mats; i++) {
            const uint64_t n = (uint64_t)mats[i]->rows * (uint64_t)mats[i]->cols;
            largest = n > largest ? n : largest;
        }
    }
    const uint64_t sizes[PREFILL_BUFFERS] = {
        4 * U * E, 4 * U * wide, 4 * U * E, 4 * U * q_dim, 4 * U * kv_dim, 4 * U * kv_dim, 4 * U * F, 4 * U * F,
        2 * U * (uint64_t)gpu_segment_scratch_cols(c).scratch, 2 * largest, GPU_BLAS_WORKSPACE_BYTES,
    };
    memcpy(bytes, sizes, sizeof sizes);
    return true;
}

uint64_t gpu_segment_prefill_bytes(const seam_model *m, int n_layers, seam_gpu_prefill mode) {
    uint64_t bytes[PREFILL_BUFFERS], sum = 0;
    if (!prefill_sizes(m, n_layers, mode, bytes)) return 0;
    for (int i = 0; i < PREFILL_BUFFERS; i++) sum += bytes[i];
    return sum;
}

gpu_scratch_cols gpu_segment_scratch_cols(const seam_config *c) {
    const int64_t q_dim = (int64_t)c->n_heads * c->head_dim;
    const int64_t hidden = c->n_expert ? c->n_ff_exp : c->n_ff;  // as the CPU backend sizes it
    const int64_t wide = q_dim > c->n_embd ? q_dim : c->n_embd;
    gpu_scratch_cols cols = {.scratch = wide > hidden ? wide : hidden, .hidden = 0};
    if (c->n_expert) cols.hidden = c->n_ff_exp > c->n_embd ? c->n_ff_exp : c->n_embd;
    return cols;
}

#ifndef SEAM_HAVE_CUDA

uint64_t gpu_free_bytes(void) { return 0; }

const char *gpu_device_name(bool *emulated) {
    *emulated = false;
    return NULL;
}

int gpu_segment_init(gpu_segment **out, const seam_model *m, const seam_plan *plan, int n_ctx, bool use_graph,
                     cpu_backend *cpu, seam_error *e) {
    *out = NULL;
    return seam_fail(e, "this seam was built without CUDA: GPU layers need a CUDA build (nvcc found at configure time)");
}

void gpu_segment_free(gpu_segment *g) {}

int gpu_segment_run(gpu_segment *g, float *x, int n, int pos0, bool head, float **logits, seam_timeline *tl,
                    seam_token_time *tt, seam_error *e) {
    return seam_fail(e, "this seam was built without CUDA");
}

bool gpu_segment_gemm(const gpu_segment *g, int n) { return false; }

void gpu_segment_time_layers(gpu_segment *g, bool on) {}

const char *gpu_segment_graph_failure(const gpu_segment *g) { return NULL; }

int gpu_segment_kv_rows(const gpu_segment *g, int il, int pos0, int n, void *k, void *v, size_t *row_bytes,
                        seam_error *e) {
    return seam_fail(e, "this seam was built without CUDA");
}

#else

#include "gpu/segment_state.h"

uint64_t gpu_free_bytes(void) {
    seam_cuda_info info;
    seam_error e;
    return seam_cuda_device_count() > 0 && seam_cuda_device_info(0, &info, &e) == 0 ? info.free_bytes : 0;
}

const char *gpu_device_name(bool *emulated) {
    static char name[sizeof ((seam_cuda_info *)0)->name];
    seam_cuda_info info;
    seam_error e;
    *emulated = false;
    if (seam_cuda_device_count() == 0 || seam_cuda_device_info(0, &info, &e)) return NULL;
    *emulated = info.emulated;
    snprintf(name, sizeof name, "%s", info.name);
    return name;
}

static int dev_alloc(gpu_segment *g, void **p, size_t bytes, const char *what, seam_error *e) {
    if (seam_cuda_malloc(p, bytes ? bytes : 16, e)) {
        char msg[sizeof e->msg];
        snprintf(msg, sizeof msg, "%s", e->msg);
        return seam_fail(e, "GPU out of memory for %s (%.1f MiB): %s", what, bytes / 1048576.0, msg);
    }
    if (g->n_allocations == g->cap_allocations) {
        g->cap_allocations = g->cap_allocations ? 2 * g->cap_allocations : 64;
        void **grown = realloc(g->allocations, (size_t)g->cap_allocations * sizeof *grown);
        if (!grown) return seam_cuda_free(*p), seam_fail(e, "out of memory");
        g->allocations = grown;
    }
    g->allocations[g->n_allocations++] = *p;
    return 0;
}

// A copy of host tensor t in device memory (an absent tensor stays absent).
static int upload(gpu_segment *g, seam_tensor *dst, const seam_tensor *t, seam_error *e) {
    *dst = *t;
    if (!t->data) return 0;
    void *p;
    char what[96];
    snprintf(what, sizeof what, "tensor %.*s", t->name_len, t->name);
    if (dev_alloc(g, &p, t->n_bytes, what, e) || seam_cuda_upload(p, t->data, t->n_bytes, e)) return -1;
    dst->data = p;
    return 0;
}

// The tensors of a layer, host side and device side, in one order.
#define LAYER_TENSORS(l)                                                                                          \
    &(l)->attn_norm, &(l)->wq, &(l)->wk, &(l)->wv, &(l)->bq, &(l)->bk, &(l)->bv, &(l)->q_norm, &(l)->k_norm,      \
        &(l)->wo, &(l)->attn_post_norm, &(l)->ffn_norm, &(l)->w_gate, &(l)->w_up, &(l)->w_down, &(l)->ffn_post_norm, \
        &(l)->ffn_gate_inp, &(l)->ffn_gate_exps, &(l)->ffn_up_exps, &(l)->ffn_down_exps

enum { LAYER_TENSOR_COUNT = 20 };

static uint64_t align256(uint64_t x) { return (x + 255) & ~(uint64_t)255; }

// A layer's tensors laid out in one block at 256-byte offsets (off[i] for
// tensor i of LAYER_TENSORS; absent ones take no room); returns its bytes.
static uint64_t layer_layout(const seam_layer_weights *h, uint64_t off[LAYER_TENSOR_COUNT]) {
    const seam_tensor *src[] = {LAYER_TENSORS(h)};
    _Static_assert(sizeof src / sizeof src[0] == LAYER_TENSOR_COUNT, "LAYER_TENSORS lists every tensor");
    uint64_t bytes = 0;
    for (int i = 0; i < LAYER_TENSOR_COUNT; i++) {
        off[i] = align256(bytes);
        if (src[i]->data) bytes = off[i] + src[i]->n_bytes;
    }
    return align256(bytes);
}

// An overflow layer (mapped or stream): its tensors copied into one pinned
// host block; the device views point at the same offsets from the block's
// device alias (mapped) or from the staging buffer it is copied into
// (stream: staging).
static int place_host_layer(gpu_segment *g, int il, void *staging, seam_error *e) {
    const seam_layer_weights *h = &g->model->w.layers[il];
    gpu_layer *L = &g->layers[il];
    seam_layer_weights *d = &L->w;
    *d = *h;
    const seam_tensor *src[] = {LAYER_TENSORS(h)};
    seam_tensor *dst[] = {LAYER_TENSORS(d)};
    uint64_t off[LAYER_TENSOR_COUNT];
    L->block_bytes = layer_layout(h, off);
    void *view = staging;
    if (seam_cuda_host_alloc(&L->host_block, L->block_bytes, e) ||
        (!view && seam_cuda_host_device_pointer(&view, L->host_block, e)))
        return -1;
    for (int i = 0; i < LAYER_TENSOR_COUNT; i++) {
        if (!src[i]->data) continue;
        memcpy((uint8_t *)L->host_block + off[i], src[i]->data, src[i]->n_bytes);
        dst[i]->data = (uint8_t *)view + off[i];
    }
    return 0;
}

static int upload_layer(gpu_segment *g, int il, seam_error *e) {
    const seam_layer_weights *h = &g->model->w.layers[il];
    seam_layer_weights *d = &g->layers[il].w;
    const seam_tensor *src[] = {LAYER_TENSORS(h)};
    seam_tensor *dst[] = {LAYER_TENSORS(d)};
    // the routed experts, last in LAYER_TENSORS, stay in host memory when the CPU runs them
    const size_t n = sizeof src / sizeof src[0] - (g->host_experts[il] ? MODEL_LAYER_ROUTED : 0);
    for (size_t i = 0; i < n; i++)
        if (upload(g, dst[i], src[i], e)) return -1;
    return 0;
}

// Layer il's weights where the plan has them, and its KV caches on the device.
static int place_layer(gpu_segment *g, int il, seam_error *e) {
    const int rc = il < g->resident              ? upload_layer(g, il, e)
                   : g->overflow == OVERFLOW_MAPPED ? place_host_layer(g, il, NULL, e)
                                                    : place_host_layer(g, il, g->staging[(il - g->resident) % 2], e);
    if (rc) return -1;
    const seam_config *c = &g->model->cfg;
    const uint64_t kv_dim = (uint64_t)c->n_kv_heads * c->head_dim;
    seam_cuda_kv *kv = &g->layers[il].kv;
    kv->k_type = plan_kv_ggml_type[g->cache.k], kv->v_type = plan_kv_ggml_type[g->cache.v];
    kv->rows = plan_kv_rows(c, g->cache, il, g->n_ctx);
    return dev_alloc(g, &kv->k, kv->rows * ggml_row_bytes(kv->k_type, kv_dim), "a layer's K cache", e) ||
           dev_alloc(g, &kv->v, kv->rows * ggml_row_bytes(kv->v_type, kv_dim), "a layer's V cache", e);
}

// The one door between host and device: copies, waits until the data is
// usable, and records wait (the queue draining first), copy (events around
// it) and total host time.
int gpu_crossing(gpu_segment *g, seam_direction dir, void *dst, const void *src, size_t bytes, int layer,
                 bool experts, int token, seam_timeline *tl, seam_error *e) {
    const double t0 = seam_now();
    if (seam_cuda_stream_synchronize(g->stream, e)) return -1;
    const double t1 = seam_now();
    int rc = seam_cuda_event_record(g->ev_copy0, g->stream, e);
    rc = rc || (dir == CROSS_H2D ? seam_cuda_copy_h2d(g->stream, dst, src, bytes, e)
                                 : seam_cuda_copy_d2h(g->stream, dst, src, bytes, e));
    rc = rc || seam_cuda_event_record(g->ev_copy1, g->stream, e) || seam_cuda_stream_synchronize(g->stream, e);
    float ms = 0;
    rc = rc || seam_cuda_event_elapsed_ms(g->ev_copy0, g->ev_copy1, &ms, e);
    if (rc) return -1;
    const seam_crossing rec = {.token = token, .layer = layer, .dir = dir, .experts = experts, .bytes = bytes,
                               .wait_us = 1e6 * (t1 - t0), .copy_us = 1e3 * ms, .total_us = 1e6 * (seam_now() - t0)};
    return timeline_add_crossing(tl, &rec) ? seam_fail(e, "out of memory for the timeline") : 0;
}

int gpu_segment_init(gpu_segment **out, const seam_model *m, const seam_plan *plan, int n_ctx, bool use_graph,
                     cpu_backend *cpu, seam_error *e) {
    *out = NULL;
    const seam_config *c = &m->cfg;
    if (seam_cuda_device_count() == 0) return seam_fail(e, "GPU layers need a CUDA device and there is none");
    gpu_segment *g = calloc(1, sizeof *g);
    if (!g) return seam_fail(e, "out of memory");
    g->cpu = cpu;
    g->model = m;
    g->n_layers = plan_gpu_computed_layers(plan);
    g->resident = plan->gpu_layers;
    g->overflow = plan->overflow;
    g->head = plan->head == DEV_GPU;
    g->n_ctx = n_ctx;
    g->cache = plan->cache;
    g->prefill = plan->gpu_prefill;
    plan_kv_rotation(c, g->cache, &g->rot_k, &g->rot_v);
    g->layers = calloc((size_t)(g->n_layers > 0 ? g->n_layers : 1), sizeof *g->layers);
    g->host_experts = calloc((size_t)(g->n_layers > 0 ? g->n_layers : 1), sizeof *g->host_experts);
    g->host_us = calloc((size_t)(g->n_layers > 0 ? g->n_layers : 1), sizeof *g->host_us);
    g->experts_us = calloc((size_t)(g->n_layers > 0 ? g->n_layers : 1), sizeof *g->experts_us);
    bool any_host_experts = false;
    for (int il = 0; c->n_expert && g->host_experts && il < g->resident; il++)
        any_host_experts |= g->host_experts[il] = plan->experts[il] == DEV_CPU;
    // the streamed layers' copies and waits are two streams' work, and the
    // host's experts stop the stream mid-layer for the CPU: launched op by op
    // (a graph per stretch between them is the alternative, for a device to
    // measure)
    g->use_graph = use_graph && !(g->overflow == OVERFLOW_STREAM && g->resident < g->n_layers) && !any_host_experts;
    const int q_dim = c->n_heads * c->head_dim, kv_dim = c->n_kv_heads * c->head_dim;
    const int hidden = c->n_expert ? c->n_ff_exp : c->n_ff;  // as the CPU backend sizes it
    const int wide = q_dim > c->n_embd ? q_dim : c->n_embd;
    const gpu_scratch_cols cols = gpu_segment_scratch_cols(c);
    int rc = !g->layers || !g->host_experts || !g->host_us || !g->experts_us ? seam_fail(e, "out of memory") : 0;
    if (any_host_experts)
        rc = rc || seam_cuda_host_alloc((void **)&g->experts_in, (size_t)(c->n_embd + c->n_expert) * 4, e) ||
             seam_cuda_host_alloc((void **)&g->experts_out, (size_t)c->n_embd * 4, e);
    rc = rc || seam_cuda_init(0, e) || seam_cuda_stream_create(&g->stream, e) ||
         seam_cuda_event_create(&g->ev_start, e) || seam_cuda_event_create(&g->ev_end, e) ||
         seam_cuda_event_create(&g->ev_copy0, e) || seam_cuda_event_create(&g->ev_copy1, e);
    uint64_t batch_bytes[PREFILL_BUFFERS];
    const bool batched = prefill_sizes(m, g->n_layers, g->prefill, batch_bytes);
    const size_t x_rows = batched ? SEAM_UBATCH : 1;
    rc = rc || seam_cuda_host_alloc((void **)&g->step_host, SEAM_UBATCH * sizeof *g->step_host, e) ||
         seam_cuda_host_alloc((void **)&g->x_pinned, x_rows * c->n_embd * sizeof(float), e);
    rc = rc || dev_alloc(g, (void **)&g->step, SEAM_UBATCH * sizeof *g->step, "the steps", e) ||
         dev_alloc(g, (void **)&g->token.x, (size_t)c->n_embd * 4, "activations", e) ||
         dev_alloc(g, (void **)&g->token.xb, (size_t)wide * 4, "activations", e) ||
         dev_alloc(g, (void **)&g->token.xb2, (size_t)c->n_embd * 4, "activations", e) ||
         dev_alloc(g, (void **)&g->token.q, (size_t)q_dim * 4, "activations", e) ||
         dev_alloc(g, (void **)&g->token.k, (size_t)kv_dim * 4, "activations", e) ||
         dev_alloc(g, (void **)&g->token.v, (size_t)kv_dim * 4, "activations", e) ||
         dev_alloc(g, (void **)&g->token.hb, (size_t)hidden * 4, "activations", e) ||
         dev_alloc(g, (void **)&g->token.hb2, (size_t)hidden * 4, "activations", e) ||
         dev_alloc(g, (void **)&g->scores, (size_t)c->n_heads * n_ctx * 4, "attention scores", e) ||
         dev_alloc(g, &g->scratch, seam_cuda_matvec_scratch_bytes(cols.scratch), "quantised activations", e);
    if (c->n_expert)
        rc = rc || dev_alloc(g, (void **)&g->router, (size_t)c->n_expert * 4, "the router's logits", e) ||
             dev_alloc(g, (void **)&g->expert_out, (size_t)c->n_embd * 4, "activations", e) ||
             dev_alloc(g, (void **)&g->chosen, (size_t)c->n_expert_used * 4, "the chosen experts", e) ||
             dev_alloc(g, (void **)&g->weights, (size_t)c->n_expert_used * 4, "the experts' weights", e) ||
             dev_alloc(g, &g->scratch_hidden, seam_cuda_matvec_scratch_bytes(cols.hidden), "quantised activations", e);
    if (batched) {
        void **const batch_buf[PREFILL_BUFFERS] = {
            (void **)&g->batch.x, (void **)&g->batch.xb, (void **)&g->batch.xb2, (void **)&g->batch.q,
            (void **)&g->batch.k, (void **)&g->batch.v,  (void **)&g->batch.hb,  (void **)&g->batch.hb2,
            (void **)&g->x16,     (void **)&g->w16,
            &g->blas_workspace,
        };
        for (int i = 0; i < PREFILL_BUFFERS; i++)
            rc = rc || dev_alloc(g, batch_buf[i], batch_bytes[i], "the batched prefill", e);
        rc = rc || seam_cuda_blas_create(&g->blas, g->stream, g->blas_workspace, GPU_BLAS_WORKSPACE_BYTES, e);
    }
    const int n_streamed = g->overflow == OVERFLOW_STREAM ? g->n_layers - g->resident : 0;
    if (!rc && n_streamed > 0) {
        uint64_t largest = 0;
        for (int il = g->resident; il < g->n_layers; il++) {
            uint64_t off[LAYER_TENSOR_COUNT];
            const uint64_t b = layer_layout(&m->w.layers[il], off);
            largest = b > largest ? b : largest;
        }
        g->streamed = calloc((size_t)n_streamed, sizeof *g->streamed);
        rc = !g->streamed ? seam_fail(e, "out of memory") : 0;
        rc = rc || seam_cuda_stream_create(&g->copy_stream, e) ||
             dev_alloc(g, &g->staging[0], largest, "a staging buffer for streamed layers", e) ||
             dev_alloc(g, &g->staging[1], largest, "a staging buffer for streamed layers", e);
        for (int i = 0; !rc && i < n_streamed; i++) {
            stream_events *se = &g->streamed[i];
            rc = seam_cuda_event_create(&se->copy_begin, e) || seam_cuda_event_create(&se->copy_end, e) ||
                 seam_cuda_event_create(&se->wait_begin, e) || seam_cuda_event_create(&se->wait_end, e) ||
                 seam_cuda_event_create(&se->done, e);
        }
    }
    g->layer_done = calloc((size_t)(g->n_layers > 0 ? g->n_layers : 1), sizeof *g->layer_done);
    rc = rc || (!g->layer_done ? seam_fail(e, "out of memory") : 0);
    for (int il = 0; !rc && il < g->n_layers; il++) rc = seam_cuda_event_create(&g->layer_done[il], e);
    g->layer = (layer_backend){.ops = &gpu_layer_ops, .be = g, .acts = g->token, .rot_k = g->rot_k, .rot_v = g->rot_v};
    for (int il = 0; !rc && il < g->n_layers; il++) rc = place_layer(g, il, e);
    if (!rc && g->head)
        rc = upload(g, &g->output_norm, &m->w.output_norm, e) || upload(g, &g->output, &m->w.output, e) ||
             dev_alloc(g, (void **)&g->logits_dev, (size_t)c->n_vocab * 4, "the logits", e) ||
             seam_cuda_host_alloc((void **)&g->logits_pinned, (size_t)c->n_vocab * 4, e);
    if (rc) {
        gpu_segment_free(g);
        return -1;
    }
    *out = g;
    return 0;
}

void gpu_segment_free(gpu_segment *g) {
    if (!g) return;
    if (g->stream) seam_cuda_stream_synchronize(g->stream, &(seam_error){{0}});  // nothing may still read
    if (g->copy_stream) seam_cuda_stream_synchronize(g->copy_stream, &(seam_error){{0}});
    if (g->graph) seam_cuda_graph_destroy(g->graph);
    for (int i = 0; g->streamed && i < g->n_layers - g->resident; i++) {
        stream_events *se = &g->streamed[i];
        seam_cuda_event_destroy(se->copy_begin), seam_cuda_event_destroy(se->copy_end);
        seam_cuda_event_destroy(se->wait_begin), seam_cuda_event_destroy(se->wait_end);
        seam_cuda_event_destroy(se->done);
    }
    free(g->streamed);
    for (int il = 0; g->layer_done && il < g->n_layers; il++) seam_cuda_event_destroy(g->layer_done[il]);
    free(g->layer_done);
    free(g->host_experts);
    free(g->host_us);
    free(g->experts_us);
    seam_cuda_host_free(g->experts_in);
    seam_cuda_host_free(g->experts_out);
    for (int il = 0; g->layers && il < g->n_layers; il++) seam_cuda_host_free(g->layers[il].host_block);
    seam_cuda_stream_destroy(g->copy_stream);
    seam_cuda_blas_destroy(g->blas);
    for (int i = 0; i < g->n_allocations; i++) seam_cuda_free(g->allocations[i]);
    free(g->allocations);
    seam_cuda_host_free(g->step_host);
    seam_cuda_host_free(g->x_pinned);
    seam_cuda_host_free(g->logits_pinned);
    seam_cuda_event_destroy(g->ev_start), seam_cuda_event_destroy(g->ev_end);
    seam_cuda_event_destroy(g->ev_copy0), seam_cuda_event_destroy(g->ev_copy1);
    seam_cuda_stream_destroy(g->stream);
    free(g->layers);
    free(g);
}

// Streamed layer i's weights into its staging buffer, on the copy stream,
// once the layer that last used the buffer (i - 2) has run.
static int issue_copy(gpu_segment *g, int i, seam_error *e) {
    const gpu_layer *L = &g->layers[g->resident + i];
    const stream_events *se = &g->streamed[i];
    return (i >= 2 && seam_cuda_stream_wait_event(g->copy_stream, g->streamed[i - 2].done, e)) ||
           seam_cuda_event_record(se->copy_begin, g->copy_stream, e) ||
           seam_cuda_copy_h2d(g->copy_stream, g->staging[i % 2], L->host_block, L->block_bytes, e) ||
           seam_cuda_event_record(se->copy_end, g->copy_stream, e);
}

// Every layer of the segment by the recipe (model/layer.c), for one token
// or a prefill batch of n (the activations g->layer holds), and the head
// (on the last token) when head. Streamed
// layers: the first two copies start with the token, under the resident
// layers' compute; each later copy waits for its buffer's previous layer,
// and each streamed layer waits for its own copy (the wait timed by events,
// so the report can show what the bus cost the GPU).
static int enqueue_segment(gpu_segment *g, int n, bool head, seam_error *e) {
    const seam_config *c = &g->model->cfg;
    const int n_streamed = g->streamed ? g->n_layers - g->resident : 0;
    for (int i = 0; i < n_streamed && i < 2; i++)
        if (issue_copy(g, i, e)) return -1;
    for (int il = 0; il < g->n_layers; il++) {
        const int i = il - g->resident;
        if (i >= 0 && n_streamed) {
            const stream_events *se = &g->streamed[i];
            if (seam_cuda_event_record(se->wait_begin, g->stream, e) ||
                seam_cuda_stream_wait_event(g->stream, se->copy_end, e) ||
                seam_cuda_event_record(se->wait_end, g->stream, e))
                return -1;
        }
        if (layer_forward(&g->layer, c, il, &g->layers[il].w, n, e) ||
            (g->time_layers && seam_cuda_event_record(g->layer_done[il], g->stream, e)))
            return -1;
        if (i >= 0 && n_streamed &&
            (seam_cuda_event_record(g->streamed[i].done, g->stream, e) || (i + 2 < n_streamed && issue_copy(g, i + 2, e))))
            return -1;
    }
    if (!head) return 0;
    float *x = g->layer.acts.x + (size_t)(n - 1) * c->n_embd;
    if (seam_cuda_rmsnorm(g->stream, x, x, g->output_norm.data, 1, c->n_embd, c->rms_eps, e) ||
        gpu_matvec(g, &g->output, x, g->logits_dev, e))
        return -1;
    return c->logit_softcap > 0.0f ? seam_cuda_softcap(g->stream, g->logits_dev, c->logit_softcap, c->n_vocab, e) : 0;
}


// The streamed layers' copies of this token as crossings of weights: the
// DMA's own time, and how long the GPU stalled waiting for it.
static int record_streamed(gpu_segment *g, seam_timeline *tl, int token, seam_error *e) {
    for (int i = 0; g->streamed && i < g->n_layers - g->resident; i++) {
        const stream_events *se = &g->streamed[i];
        float copy_ms = 0, stall_ms = 0;
        if (seam_cuda_event_elapsed_ms(se->copy_begin, se->copy_end, &copy_ms, e) ||
            seam_cuda_event_elapsed_ms(se->wait_begin, se->wait_end, &stall_ms, e))
            return -1;
        const seam_crossing rec = {.token = token, .layer = g->resident + i, .dir = CROSS_WEIGHTS,
                                   .bytes = g->layers[g->resident + i].block_bytes, .wait_us = 1e3 * stall_ms,
                                   .copy_us = 1e3 * copy_ms, .total_us = 0};
        if (timeline_add_crossing(tl, &rec)) return seam_fail(e, "out of memory for the timeline");
    }
    return 0;
}

// The segment captured as a graph, after the first token ran op by op. A
// capture that an op fails is discarded, so that the stream works again and
// the op's error is the one reported.
static int capture_segment(gpu_segment *g, seam_error *e) {
    if (seam_cuda_graph_begin(g->stream, e)) return -1;
    if (enqueue_segment(g, 1, g->head, e)) {
        seam_cuda_graph_discard(g->stream);
        return -1;
    }
    return seam_cuda_graph_end(g->stream, &g->graph, e);
}

// Whether this decoded token replays the graph (capturing it first): not
// the first token, which loads every kernel op by op, nor any token after a
// capture failed -- that failure is kept for the report, and the segment
// goes on op by op instead of capturing again at every token.
static bool replay_graph(gpu_segment *g) {
    if (!g->use_graph || g->decoded++ == 0) return false;
    if (g->graph) return true;
    seam_error why = {{0}};
    if (capture_segment(g, &why) == 0) return true;
    g->use_graph = false;
    snprintf(g->graph_failure, sizeof g->graph_failure, "%s", why.msg);
    return false;
}

const char *gpu_segment_graph_failure(const gpu_segment *g) { return g->graph_failure[0] ? g->graph_failure : NULL; }

int gpu_segment_kv_rows(const gpu_segment *g, int il, int pos0, int n, void *k, void *v, size_t *row_bytes,
                        seam_error *e) {
    if (il < 0 || il >= g->n_layers) return seam_fail(e, "layer %d is not one of the segment's %d", il, g->n_layers);
    const seam_config *c = &g->model->cfg;
    const seam_cuda_kv *kv = &g->layers[il].kv;
    const uint64_t kv_dim = (uint64_t)c->n_kv_heads * c->head_dim;
    const size_t k_row = (size_t)ggml_row_bytes(kv->k_type, kv_dim), v_row = (size_t)ggml_row_bytes(kv->v_type, kv_dim);
    if (k_row != v_row) return seam_fail(e, "K and V rows of %zu and %zu bytes: take them one type at a time", k_row, v_row);
    *row_bytes = k_row;
    if (seam_cuda_stream_synchronize(g->stream, e)) return -1;
    for (int t = pos0; t < pos0 + n; t++) {
        const size_t at = (size_t)(t % kv->rows) * k_row;
        if (seam_cuda_download((uint8_t *)k + (size_t)(t - pos0) * k_row, (const uint8_t *)kv->k + at, k_row, e) ||
            seam_cuda_download((uint8_t *)v + (size_t)(t - pos0) * v_row, (const uint8_t *)kv->v + at, v_row, e))
            return -1;
    }
    return 0;
}

void gpu_segment_time_layers(gpu_segment *g, bool on) {
    if (g->time_layers == on) return;
    g->time_layers = on;
    // the graph holds the events or not: the next decoded token captures it again
    if (g->graph) seam_cuda_graph_destroy(g->graph);
    g->graph = NULL;
}

// Each layer's time (and the head's, when it ran) for the batch just run,
// from the events between them, into the timeline.
static int record_layers(gpu_segment *g, int n, int pos0, bool head, int token, seam_timeline *tl, seam_error *e) {
    const int last = g->head && head ? g->n_layers : g->n_layers - 1;
    for (int il = 0; il <= last; il++) {
        const seam_cuda_event *from = il ? g->layer_done[il - 1] : g->ev_start;
        const seam_cuda_event *to = il < g->n_layers ? g->layer_done[il] : g->ev_end;
        float ms = 0;
        if (seam_cuda_event_elapsed_ms(from, to, &ms, e)) return -1;
        seam_layer_time lt = plan_layer_record(g->model, g->cache, il < g->n_layers ? il : g->model->cfg.n_layers,
                                               pos0 + n - 1);
        lt.token = token, lt.n = n, lt.on_gpu = 1, lt.us = 1e3 * ms;
        seam_layer_time experts = lt;  // a layer whose experts ran on the CPU: their part is the CPU's record
        if (il < g->n_layers && g->host_experts[il]) {
            const uint64_t active = model_layer_active_expert_bytes(g->model, il);
            lt.us -= g->host_us[il], lt.weight_bytes -= active;
            experts = (seam_layer_time){.token = token, .n = n, .layer = il, .on_gpu = 0, .pos = lt.pos,
                                        .us = g->experts_us[il], .weight_bytes = active};
        }
        if (timeline_add_layer(tl, &lt) || (experts.on_gpu == 0 && timeline_add_layer(tl, &experts)))
            return seam_fail(e, "out of memory for the timeline");
    }
    return 0;
}

// n tokens at positions pos0.. through the segment: one decoded token (its
// buffers, and the graph), or a prompt's batch of n as matrix products.
// x (n, n_embd) crosses to the device, the layers run, and either the hidden
// states cross back into x or, with head, the last token's logits cross back
// into the pinned buffer.
int gpu_segment_run(gpu_segment *g, float *x, int n, int pos0, bool head, float **logits, seam_timeline *tl,
                    seam_token_time *tt, seam_error *e) {
    const seam_config *c = &g->model->cfg;
    if (n > 1 && !g->blas)
        return seam_fail(e, "the GPU layers take no batch here (planned with --gpu-prefill %s): the GEMM's buffers "
                            "exist only under gemm or auto, for dense layers (MoE layers run token by token)",
                         gpu_prefill_name[g->prefill]);
    if (n < 1 || n > SEAM_UBATCH) return seam_fail(e, "a GPU batch holds 1..%d tokens (got %d)", SEAM_UBATCH, n);
    // a single token runs the head whenever the segment has it, so that one
    // captured graph serves every decoded token (and a prompt's, one by one)
    head = g->head && (head || n == 1);
    g->layer.acts = n == 1 ? g->token : g->batch;
    const int token = tt->token;
    const size_t x_bytes = (size_t)n * c->n_embd * sizeof(float);
    g->run_tl = tl, g->run_token = token;
    for (int il = 0; il < g->n_layers; il++) g->host_us[il] = g->experts_us[il] = 0;
    float *x_dev = g->layer.acts.x;
    // the hidden states cross to the device, then the positions follow (the
    // steps are bookkeeping of the graph, not a crossing of the model's data:
    // their copy lands in the report's "other", not in the crossing's wait)
    memcpy(g->x_pinned, x, x_bytes);
    if (gpu_crossing(g, CROSS_H2D, x_dev, g->x_pinned, x_bytes, 0, false, token, tl, e)) return -1;
    for (int t = 0; t < n; t++) g->step_host[t] = (seam_cuda_step){.token = 0, .pos = pos0 + t};  // rows looked up on the host
    if (seam_cuda_copy_h2d(g->stream, g->step, g->step_host, (size_t)n * sizeof *g->step, e)) return -1;

    // the segment: a token's captured once, replayed after; timed from the
    // GPU taking up its launch to its last op (the report's "GPU layers")
    const bool graph = n == 1 && replay_graph(g);
    if (seam_cuda_event_record(g->ev_start, g->stream, e)) return -1;
    if (graph ? seam_cuda_graph_launch(g->graph, g->stream, e) : enqueue_segment(g, n, head, e)) return -1;
    float ms = 0;
    if (seam_cuda_event_record(g->ev_end, g->stream, e) || seam_cuda_stream_synchronize(g->stream, e) ||
        seam_cuda_event_elapsed_ms(g->ev_start, g->ev_end, &ms, e))
        return -1;
    // the host's part inside the layers (experts kept on the CPU, their
    // crossings) is the CPU's and the crossings', not the GPU's
    double host_us = 0, experts_us = 0;
    for (int il = 0; il < g->n_layers; il++) host_us += g->host_us[il], experts_us += g->experts_us[il];
    tt->segment_us[SEG_GPU] = 1e3 * ms - host_us;
    tt->segment_us[SEG_CPU] = experts_us;
    if (record_streamed(g, tl, token, e) || (g->time_layers && record_layers(g, n, pos0, head, token, tl, e)))
        return -1;

    // back to the host: the logits when the head ran here, else the hidden states
    if (head) {
        if (gpu_crossing(g, CROSS_D2H, g->logits_pinned, g->logits_dev, (size_t)c->n_vocab * sizeof(float), c->n_layers,
                     false, token, tl, e))
            return -1;
        *logits = g->logits_pinned;
        return 0;
    }
    if (gpu_crossing(g, CROSS_D2H, g->x_pinned, x_dev, x_bytes, g->n_layers, false, token, tl, e)) return -1;
    memcpy(x, g->x_pinned, x_bytes);
    return 0;
}

bool gpu_segment_gemm(const gpu_segment *g, int n) {
    if (!g->blas || n < 2 || n > SEAM_UBATCH) return false;
    return g->prefill == GPU_PREFILL_GEMM || (g->prefill == GPU_PREFILL_AUTO && n >= GPU_GEMM_MIN_BATCH);
}

#endif
