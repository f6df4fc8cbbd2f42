// gpu_segment.c — layers 0..N-1 on the CUDA device, each crossing timed.
//
// The layer forward here is engine.c's, op for op, over the CUDA backend's
// C API (kernels/seam_cuda.h): the same norms, projections, RoPE, attention
// over an f16 or q8_0 KV cache and gated FFN, on device buffers. Per-token values
// (the position) live in a device step buffer, so the segment is captured
// once as a CUDA graph and replayed: launch overhead is one graph launch a
// token instead of ~15 launches a layer.
//
// A prompt's batch can instead cross the layers as matrix products
// (gpu_segment_prefill): the same ops over SEAM_UBATCH rows -- norms, RoPE
// at each row's position, elementwise ones over the whole batch -- with
// each projection one cuBLAS GEMM on the weights dequantised to f16, and
// the KV append and attention per token of the batch, each token seeing the
// positions up to its own.
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
    const int64_t hidden = c->n_expert ? c->n_ff_exp : c->n_ff;  // as engine_init sizes it
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
                     seam_error *e) {
    *out = NULL;
    return seam_fail(e, "this seam was built without CUDA: GPU layers need a CUDA build (nvcc found at configure time)");
}

void gpu_segment_free(gpu_segment *g) {}

int gpu_segment_forward(gpu_segment *g, float *x, float **logits, int pos, seam_timeline *tl, seam_token_time *tt,
                        seam_error *e) {
    return seam_fail(e, "this seam was built without CUDA");
}

bool gpu_segment_gemm(const gpu_segment *g, int n) { return false; }

const char *gpu_segment_graph_failure(const gpu_segment *g) { return NULL; }

int gpu_segment_prefill(gpu_segment *g, float *x, int n, int pos0, bool head, float **logits, seam_timeline *tl,
                        seam_token_time *tt, seam_error *e) {
    return seam_fail(e, "this seam was built without CUDA");
}

#else

#include "seam_cuda.h"

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

// A layer's weights as the device reads them: the host layer's views with
// data pointers into device memory -- its own copy (resident), the device's
// alias of its pinned host copy (mapped), or the staging buffer it is copied
// into before it runs (stream).
typedef struct {
    seam_layer_weights w;
    seam_cuda_kv kv;              // its caches: plan_kv_rows(il) rows of n_kv_heads * head_dim values
    void *host_block;             // mapped and stream: the layer's tensors, pinned, at 256-byte offsets
    uint64_t block_bytes;
} gpu_layer;

// Per streamed layer: when its copy ran, and when the GPU waited for it.
typedef struct {
    seam_cuda_event *copy_begin, *copy_end;  // on the copy stream
    seam_cuda_event *wait_begin, *wait_end;  // on the compute stream, around its wait for copy_end
    seam_cuda_event *done;                   // on the compute stream: the layer ran, its buffer is free
} stream_events;

struct gpu_segment {
    const seam_model *model;
    int n_layers;             // layers 0..n_layers-1 run here
    int resident;             // of which 0..resident-1 live in device memory; the rest run from host memory
    seam_overflow overflow;   // how: OVERFLOW_MAPPED or OVERFLOW_STREAM (the rest run on the CPU otherwise)
    bool head;                // the output norm and head run here too
    int n_ctx;
    seam_kv_config cache;     // the KV cache's types and rows, as the plan counts them
    int rot_k, rot_v;         // the rotation of a quantised cache (plan_kv_rotation)
    bool use_graph;           // capture the segment once and replay it (cleared when a capture fails)
    int decoded;              // tokens through the decode path so far: the first runs op by op, so that
                              // every kernel has run (its module loaded) before a capture records it
    char graph_failure[sizeof ((seam_error *)0)->msg];  // why a capture failed: the segment then runs op by op
    seam_gpu_prefill prefill;  // the plan's: how a prompt's batches cross (its GEMM buffers below exist only
                               // when gpu_prefill_uses_gemm)
    seam_cuda_stream *stream;
    seam_cuda_event *ev_start, *ev_end;  // around the segment's compute
    seam_cuda_event *ev_copy0, *ev_copy1;  // around a crossing's copy
    seam_cuda_graph *graph;   // the captured segment; NULL until the first token (or without graphs)
    gpu_layer *layers;        // [n_layers]
    seam_tensor output_norm, output;  // on the device when head
    seam_cuda_step *step;     // device (SEAM_UBATCH): this token's position in step[0], or a batch's, one a token
    seam_cuda_step *step_host;  // pinned host copy, one H2D a token (or a batch)
    float *x_pinned;          // (n_embd; SEAM_UBATCH rows with a batched path) pinned: hidden states crossing the bus
    float *logits_dev;        // (n_vocab) when head
    float *logits_pinned;     // (n_vocab) pinned, when head: the logits crossing the bus, handed to the engine
    float *x, *xb, *xb2, *q, *k, *v, *hb, *hb2;  // device activations, shapes as engine.h's
    float *scores;            // (n_heads, n_ctx) attention scores past the shared memory (gpu_activation_bytes)
    float *router, *moe;      // (n_expert) router logits; (n_embd) the experts' weighted sum (MoE)
    int32_t *chosen;          // (n_expert_used) the experts the router picked, by rank (MoE)
    float *weights;           // (n_expert_used) their renormalised weights (MoE)
    void *scratch;            // quantised activations of the widest input (gpu_segment_scratch_cols)
    void *scratch_hidden;     // MoE: the quantised expert FFN input (up's, when its type is not gate's)
                              // or hidden layer, while scratch holds gate's quantised input
    seam_cuda_stream *copy_stream;  // stream: the weight copies, beside the compute stream
    void *staging[2];         // stream: two device buffers the overflow layers take turns in
    stream_events *streamed;  // stream: [n_layers - resident]
    // the batched prefill (gpu_segment_prefill; NULL where prefill_sizes says it does not run: under
    // --gpu-prefill tokens, for MoE layers, with no layers)
    seam_cuda_blas *blas;     // cuBLAS on the compute stream
    float *bx, *bxb, *bxb2;   // (SEAM_UBATCH, n_embd), (SEAM_UBATCH, max(n_embd, q_dim)), (SEAM_UBATCH, n_embd)
    float *bq, *bk, *bv;      // (SEAM_UBATCH, q_dim), (SEAM_UBATCH, kv_dim) x2
    float *bhb, *bhb2;        // (SEAM_UBATCH, n_ff) FFN gate, up
    uint16_t *x16;            // (SEAM_UBATCH, widest input) a product's input in f16
    uint16_t *w16;            // the largest matrix of the segment's layers in f16
    void *blas_workspace;     // GPU_BLAS_WORKSPACE_BYTES, cuBLAS's
    void **allocations;       // every device buffer, for gpu_segment_free
    int n_allocations, cap_allocations;
};

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
    for (size_t i = 0; i < sizeof src / sizeof src[0]; i++)
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

int gpu_segment_init(gpu_segment **out, const seam_model *m, const seam_plan *plan, int n_ctx, bool use_graph,
                     seam_error *e) {
    *out = NULL;
    const seam_config *c = &m->cfg;
    if (seam_cuda_device_count() == 0) return seam_fail(e, "GPU layers need a CUDA device and there is none");
    for (int il = 0; il < plan->gpu_layers; il++)
        if (plan->experts[il] != DEV_GPU)
            return seam_fail(e, "layer %d runs on the GPU but its experts are planned on the CPU (--cpu-moe, "
                                "--n-cpu-moe): the GPU segment runs a layer's experts with it; lower -ngl to %d "
                                "or drop the flag", il, il);
    gpu_segment *g = calloc(1, sizeof *g);
    if (!g) return seam_fail(e, "out of memory");
    g->model = m;
    g->n_layers = plan_gpu_computed_layers(plan);
    g->resident = plan->gpu_layers;
    g->overflow = plan->overflow;
    g->head = plan->head == DEV_GPU;
    g->n_ctx = n_ctx;
    g->cache = plan->cache;
    g->prefill = plan->gpu_prefill;
    plan_kv_rotation(c, g->cache, &g->rot_k, &g->rot_v);
    // the streamed layers' copies and waits are two streams' work, launched op by op
    g->use_graph = use_graph && !(g->overflow == OVERFLOW_STREAM && g->resident < g->n_layers);
    g->layers = calloc((size_t)(g->n_layers > 0 ? g->n_layers : 1), sizeof *g->layers);
    const int q_dim = c->n_heads * c->head_dim, kv_dim = c->n_kv_heads * c->head_dim;
    const int hidden = c->n_expert ? c->n_ff_exp : c->n_ff;  // as engine_init sizes it
    const int wide = q_dim > c->n_embd ? q_dim : c->n_embd;
    const gpu_scratch_cols cols = gpu_segment_scratch_cols(c);
    int rc = !g->layers ? seam_fail(e, "out of memory") : 0;
    rc = rc || seam_cuda_init(0, e) || seam_cuda_stream_create(&g->stream, e) ||
         seam_cuda_event_create(&g->ev_start, e) || seam_cuda_event_create(&g->ev_end, e) ||
         seam_cuda_event_create(&g->ev_copy0, e) || seam_cuda_event_create(&g->ev_copy1, e);
    uint64_t batch_bytes[PREFILL_BUFFERS];
    const bool batched = prefill_sizes(m, g->n_layers, g->prefill, batch_bytes);
    const size_t x_rows = batched ? SEAM_UBATCH : 1;
    rc = rc || seam_cuda_host_alloc((void **)&g->step_host, SEAM_UBATCH * sizeof *g->step_host, e) ||
         seam_cuda_host_alloc((void **)&g->x_pinned, x_rows * c->n_embd * sizeof(float), e);
    rc = rc || dev_alloc(g, (void **)&g->step, SEAM_UBATCH * sizeof *g->step, "the steps", e) ||
         dev_alloc(g, (void **)&g->x, (size_t)c->n_embd * 4, "activations", e) ||
         dev_alloc(g, (void **)&g->xb, (size_t)wide * 4, "activations", e) ||
         dev_alloc(g, (void **)&g->xb2, (size_t)c->n_embd * 4, "activations", e) ||
         dev_alloc(g, (void **)&g->q, (size_t)q_dim * 4, "activations", e) ||
         dev_alloc(g, (void **)&g->k, (size_t)kv_dim * 4, "activations", e) ||
         dev_alloc(g, (void **)&g->v, (size_t)kv_dim * 4, "activations", e) ||
         dev_alloc(g, (void **)&g->hb, (size_t)hidden * 4, "activations", e) ||
         dev_alloc(g, (void **)&g->hb2, (size_t)hidden * 4, "activations", e) ||
         dev_alloc(g, (void **)&g->scores, (size_t)c->n_heads * n_ctx * 4, "attention scores", e) ||
         dev_alloc(g, &g->scratch, seam_cuda_matvec_scratch_bytes(cols.scratch), "quantised activations", e);
    if (c->n_expert)
        rc = rc || dev_alloc(g, (void **)&g->router, (size_t)c->n_expert * 4, "the router's logits", e) ||
             dev_alloc(g, (void **)&g->moe, (size_t)c->n_embd * 4, "activations", e) ||
             dev_alloc(g, (void **)&g->chosen, (size_t)c->n_expert_used * 4, "the chosen experts", e) ||
             dev_alloc(g, (void **)&g->weights, (size_t)c->n_expert_used * 4, "the experts' weights", e) ||
             dev_alloc(g, &g->scratch_hidden, seam_cuda_matvec_scratch_bytes(cols.hidden), "quantised activations", e);
    if (batched) {
        void **const batch_buf[PREFILL_BUFFERS] = {
            (void **)&g->bx, (void **)&g->bxb, (void **)&g->bxb2, (void **)&g->bq,  (void **)&g->bk,
            (void **)&g->bv, (void **)&g->bhb, (void **)&g->bhb2, (void **)&g->x16, (void **)&g->w16,
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

static int matvec(gpu_segment *g, const seam_tensor *w, const float *x, float *out, seam_error *e) {
    return seam_cuda_matvec(g->stream, w->type, w->data, w->rows, w->cols, x, out, g->scratch, e);
}

// engine.c's moe_block, on the device: the router picks k experts into
// g->chosen and g->weights, and each chosen expert's SwiGLU FFN runs on the
// rows of its slice, found from the index in device memory.
static int moe_forward(gpu_segment *g, const seam_layer_weights *l, seam_error *e) {
    const seam_config *c = &g->model->cfg;
    seam_cuda_stream *s = g->stream;
    const int E = c->n_embd, F = c->n_ff_exp, n_exp = c->n_expert;
    const seam_tensor *gate = &l->ffn_gate_exps, *up = &l->ffn_up_exps, *down = &l->ffn_down_exps;
    if (matvec(g, &l->ffn_gate_inp, g->xb, g->router, e) ||
        seam_cuda_moe_route(s, g->router, n_exp, c->n_expert_used, g->chosen, g->weights, e) ||
        seam_cuda_quantize(s, gate->type, g->xb, g->scratch, E, e))
        return -1;
    for (int j = 0; j < c->n_expert_used; j++) {
        const int32_t *ex = g->chosen + j;
        // gate and up share the input's quantisation when their types do
        if (up->type != gate->type && seam_cuda_quantize(s, up->type, g->xb, g->scratch_hidden, E, e)) return -1;
        const void *up_act = up->type != gate->type ? g->scratch_hidden : g->scratch;
        if (seam_cuda_matvec_expert(s, gate->type, gate->data, n_exp, F, E, ex, g->scratch, g->hb, e) ||
            seam_cuda_matvec_expert(s, up->type, up->data, n_exp, F, E, ex, up_act, g->hb2, e) ||
            seam_cuda_swiglu(s, g->hb, g->hb2, F, e) || seam_cuda_quantize(s, down->type, g->hb, g->scratch_hidden, F, e) ||
            seam_cuda_matvec_expert(s, down->type, down->data, n_exp, E, F, ex, g->scratch_hidden, g->xb2, e) ||
            seam_cuda_moe_accumulate(s, g->moe, g->xb2, g->weights, j, E, e))
            return -1;
    }
    return seam_cuda_add(s, g->x, g->moe, E, e);
}

// engine.c's attention_block and ffn_block, on the device.
static int layer_forward(gpu_segment *g, int il, seam_error *e) {
    const seam_config *c = &g->model->cfg;
    const gpu_layer *L = &g->layers[il];
    const seam_layer_weights *l = &L->w;
    seam_cuda_stream *s = g->stream;
    const int q_dim = c->n_heads * c->head_dim, kv_dim = c->n_kv_heads * c->head_dim;
    const bool swa = c->layer_swa[il];
    const float base = swa ? c->rope_base_swa : c->rope_base, freq_scale = swa ? 1.0f : c->rope_scale;

    if (seam_cuda_rmsnorm(s, g->xb, g->x, l->attn_norm.data, 1, c->n_embd, c->rms_eps, e) ||
        matvec(g, &l->wq, g->xb, g->q, e) || matvec(g, &l->wk, g->xb, g->k, e) || matvec(g, &l->wv, g->xb, g->v, e))
        return -1;
    if (c->qkv_bias && (seam_cuda_add(s, g->q, l->bq.data, q_dim, e) || seam_cuda_add(s, g->k, l->bk.data, kv_dim, e) ||
                        seam_cuda_add(s, g->v, l->bv.data, kv_dim, e)))
        return -1;
    if (c->qk_norm && (seam_cuda_rmsnorm(s, g->q, g->q, l->q_norm.data, c->n_heads, c->head_dim, c->rms_eps, e) ||
                       seam_cuda_rmsnorm(s, g->k, g->k, l->k_norm.data, c->n_kv_heads, c->head_dim, c->rms_eps, e)))
        return -1;
    if (seam_cuda_rope(s, g->q, 1, c->n_heads, c->head_dim, c->rope_dim, base, freq_scale, c->rope_neox, g->step, e) ||
        seam_cuda_rope(s, g->k, 1, c->n_kv_heads, c->head_dim, c->rope_dim, base, freq_scale, c->rope_neox, g->step, e))
        return -1;
    if (c->q_scale != 1.0f && seam_cuda_scale(s, g->q, c->q_scale, q_dim, e)) return -1;
    // a quantised cache takes them turned, as engine_qkv_ready does
    if (g->rot_k && (seam_cuda_fwht(s, g->q, q_dim, g->rot_k, e) || seam_cuda_fwht(s, g->k, kv_dim, g->rot_k, e)))
        return -1;
    if (g->rot_v && seam_cuda_fwht(s, g->v, kv_dim, g->rot_v, e)) return -1;
    if (seam_cuda_kv_append(s, &L->kv, g->k, g->v, kv_dim, g->n_ctx, g->step, e) ||
        seam_cuda_attention(s, g->xb, g->q, &L->kv, c->n_heads, c->n_kv_heads, c->head_dim, g->n_ctx,
                            swa ? c->n_swa : 0, c->kq_scale, g->scores, g->step, e) ||
        (g->rot_v && seam_cuda_fwht(s, g->xb, q_dim, g->rot_v, e)) || matvec(g, &l->wo, g->xb, g->xb2, e))
        return -1;
    if (c->post_norms && seam_cuda_rmsnorm(s, g->xb2, g->xb2, l->attn_post_norm.data, 1, c->n_embd, c->rms_eps, e))
        return -1;
    if (seam_cuda_add(s, g->x, g->xb2, c->n_embd, e)) return -1;

    if (seam_cuda_rmsnorm(s, g->xb, g->x, l->ffn_norm.data, 1, c->n_embd, c->rms_eps, e)) return -1;
    if (c->n_expert) return moe_forward(g, l, e);
    if (matvec(g, &l->w_gate, g->xb, g->hb, e) || matvec(g, &l->w_up, g->xb, g->hb2, e)) return -1;
    if (c->ffn_gelu ? seam_cuda_geglu(s, g->hb, g->hb2, c->n_ff, e) : seam_cuda_swiglu(s, g->hb, g->hb2, c->n_ff, e))
        return -1;
    if (matvec(g, &l->w_down, g->hb, g->xb2, e)) return -1;
    if (c->post_norms && seam_cuda_rmsnorm(s, g->xb2, g->xb2, l->ffn_post_norm.data, 1, c->n_embd, c->rms_eps, e))
        return -1;
    return seam_cuda_add(s, g->x, g->xb2, c->n_embd, e);
}

// out (n, w->rows) = the batch's x16 (n, w->cols) . W^T on cuBLAS.
static int matmul(gpu_segment *g, const seam_tensor *w, int n, float *out, seam_error *e) {
    return seam_cuda_matmul(g->blas, g->stream, w->type, w->data, w->rows, w->cols, g->x16, n, out, g->w16, e);
}

// x (n, cols) into x16, the input the next products share.
static int to_f16(gpu_segment *g, const float *x, int n, int cols, seam_error *e) {
    return seam_cuda_quantize(g->stream, GGML_TYPE_F16, x, g->x16, (int64_t)n * cols, e);
}

// layer_forward for a batch of n tokens at positions g->step[0..n-1]: the
// same ops over n rows, the projections as matrix products, the KV append
// and attention token by token (token t attends to positions up to its own).
static int layer_prefill(gpu_segment *g, int il, int n, seam_error *e) {
    const seam_config *c = &g->model->cfg;
    const gpu_layer *L = &g->layers[il];
    const seam_layer_weights *l = &L->w;
    seam_cuda_stream *s = g->stream;
    const int E = c->n_embd, F = c->n_ff, q_dim = c->n_heads * c->head_dim, kv_dim = c->n_kv_heads * c->head_dim;
    const bool swa = c->layer_swa[il];
    const float base = swa ? c->rope_base_swa : c->rope_base, freq_scale = swa ? 1.0f : c->rope_scale;

    if (seam_cuda_rmsnorm(s, g->bxb, g->bx, l->attn_norm.data, n, E, c->rms_eps, e) || to_f16(g, g->bxb, n, E, e) ||
        matmul(g, &l->wq, n, g->bq, e) || matmul(g, &l->wk, n, g->bk, e) || matmul(g, &l->wv, n, g->bv, e))
        return -1;
    if (c->qkv_bias && (seam_cuda_add_rows(s, g->bq, l->bq.data, n, q_dim, e) ||
                        seam_cuda_add_rows(s, g->bk, l->bk.data, n, kv_dim, e) ||
                        seam_cuda_add_rows(s, g->bv, l->bv.data, n, kv_dim, e)))
        return -1;
    if (c->qk_norm &&
        (seam_cuda_rmsnorm(s, g->bq, g->bq, l->q_norm.data, n * c->n_heads, c->head_dim, c->rms_eps, e) ||
         seam_cuda_rmsnorm(s, g->bk, g->bk, l->k_norm.data, n * c->n_kv_heads, c->head_dim, c->rms_eps, e)))
        return -1;
    if (seam_cuda_rope(s, g->bq, n, c->n_heads, c->head_dim, c->rope_dim, base, freq_scale, c->rope_neox, g->step, e) ||
        seam_cuda_rope(s, g->bk, n, c->n_kv_heads, c->head_dim, c->rope_dim, base, freq_scale, c->rope_neox, g->step, e))
        return -1;
    if (c->q_scale != 1.0f && seam_cuda_scale(s, g->bq, c->q_scale, n * q_dim, e)) return -1;
    if (g->rot_k && (seam_cuda_fwht(s, g->bq, n * q_dim, g->rot_k, e) || seam_cuda_fwht(s, g->bk, n * kv_dim, g->rot_k, e)))
        return -1;
    if (g->rot_v && seam_cuda_fwht(s, g->bv, n * kv_dim, g->rot_v, e)) return -1;
    for (int t = 0; t < n; t++)
        if (seam_cuda_kv_append(s, &L->kv, g->bk + (size_t)t * kv_dim, g->bv + (size_t)t * kv_dim, kv_dim, g->n_ctx,
                                g->step + t, e) ||
            seam_cuda_attention(s, g->bxb + (size_t)t * q_dim, g->bq + (size_t)t * q_dim, &L->kv, c->n_heads,
                                c->n_kv_heads, c->head_dim, g->n_ctx, swa ? c->n_swa : 0, c->kq_scale, g->scores,
                                g->step + t, e))
            return -1;
    if (g->rot_v && seam_cuda_fwht(s, g->bxb, n * q_dim, g->rot_v, e)) return -1;
    if (to_f16(g, g->bxb, n, q_dim, e) || matmul(g, &l->wo, n, g->bxb2, e)) return -1;
    if (c->post_norms && seam_cuda_rmsnorm(s, g->bxb2, g->bxb2, l->attn_post_norm.data, n, E, c->rms_eps, e)) return -1;
    if (seam_cuda_add(s, g->bx, g->bxb2, n * E, e)) return -1;

    if (seam_cuda_rmsnorm(s, g->bxb, g->bx, l->ffn_norm.data, n, E, c->rms_eps, e) || to_f16(g, g->bxb, n, E, e) ||
        matmul(g, &l->w_gate, n, g->bhb, e) || matmul(g, &l->w_up, n, g->bhb2, e))
        return -1;
    if (c->ffn_gelu ? seam_cuda_geglu(s, g->bhb, g->bhb2, n * F, e) : seam_cuda_swiglu(s, g->bhb, g->bhb2, n * F, e))
        return -1;
    if (to_f16(g, g->bhb, n, F, e) || matmul(g, &l->w_down, n, g->bxb2, e)) return -1;
    if (c->post_norms && seam_cuda_rmsnorm(s, g->bxb2, g->bxb2, l->ffn_post_norm.data, n, E, c->rms_eps, e)) return -1;
    return seam_cuda_add(s, g->bx, g->bxb2, n * E, e);
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

// Every layer of the segment, for one token (n = 0: decode's buffers) or a
// prefill batch of n, and the head (on the last token) when head. Streamed
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
        if (n ? layer_prefill(g, il, n, e) : layer_forward(g, il, e)) return -1;
        if (i >= 0 && n_streamed &&
            (seam_cuda_event_record(g->streamed[i].done, g->stream, e) || (i + 2 < n_streamed && issue_copy(g, i + 2, e))))
            return -1;
    }
    if (!head) return 0;
    float *x = n ? g->bx + (size_t)(n - 1) * c->n_embd : g->x;
    if (seam_cuda_rmsnorm(g->stream, x, x, g->output_norm.data, 1, c->n_embd, c->rms_eps, e) ||
        matvec(g, &g->output, x, g->logits_dev, e))
        return -1;
    return c->logit_softcap > 0.0f ? seam_cuda_softcap(g->stream, g->logits_dev, c->logit_softcap, c->n_vocab, e) : 0;
}

// The one door between host and device: copies, waits until the data is
// usable, and records wait (the queue draining first), copy (events around
// it) and total host time.
static int crossing(gpu_segment *g, seam_direction dir, void *dst, const void *src, size_t bytes, int layer, int token,
                    seam_timeline *tl, seam_error *e) {
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
    const seam_crossing rec = {.token = token, .layer = layer, .dir = dir, .bytes = bytes,
                               .wait_us = 1e6 * (t1 - t0), .copy_us = 1e3 * ms, .total_us = 1e6 * (seam_now() - t0)};
    return timeline_add_crossing(tl, &rec) ? seam_fail(e, "out of memory for the timeline") : 0;
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
    if (enqueue_segment(g, 0, g->head, e)) {
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

// One token (n = 0: decode's buffers, the graph) or a prefill batch of n
// (x: n rows) at positions pos0.. through the segment: x crosses to the
// device, the layers run, and either the hidden states cross back into x or,
// with head, the (last token's) logits cross back into the pinned buffer.
static int run_segment(gpu_segment *g, float *x, int n, int pos0, bool head, float **logits, seam_timeline *tl,
                       seam_token_time *tt, seam_error *e) {
    const seam_config *c = &g->model->cfg;
    const int token = tt->token, rows = n ? n : 1;
    const size_t x_bytes = (size_t)rows * c->n_embd * sizeof(float);
    float *x_dev = n ? g->bx : g->x;
    // the hidden states cross to the device, then the positions follow (the
    // steps are bookkeeping of the graph, not a crossing of the model's data:
    // their copy lands in the report's "other", not in the crossing's wait)
    memcpy(g->x_pinned, x, x_bytes);
    if (crossing(g, CROSS_H2D, x_dev, g->x_pinned, x_bytes, 0, token, tl, e)) return -1;
    for (int t = 0; t < rows; t++) g->step_host[t] = (seam_cuda_step){.token = 0, .pos = pos0 + t};  // rows looked up on the host
    if (seam_cuda_copy_h2d(g->stream, g->step, g->step_host, (size_t)rows * sizeof *g->step, e)) return -1;

    // the segment: a token's captured once, replayed after; timed from the
    // GPU taking up its launch to its last op (the report's "GPU layers")
    const bool graph = n == 0 && replay_graph(g);
    if (seam_cuda_event_record(g->ev_start, g->stream, e)) return -1;
    if (graph ? seam_cuda_graph_launch(g->graph, g->stream, e) : enqueue_segment(g, n, head, e)) return -1;
    float ms = 0;
    if (seam_cuda_event_record(g->ev_end, g->stream, e) || seam_cuda_stream_synchronize(g->stream, e) ||
        seam_cuda_event_elapsed_ms(g->ev_start, g->ev_end, &ms, e))
        return -1;
    tt->segment_us[SEG_GPU] = 1e3 * ms;
    if (record_streamed(g, tl, token, e)) return -1;

    // back to the host: the logits when the head ran here, else the hidden states
    if (head) {
        if (crossing(g, CROSS_D2H, g->logits_pinned, g->logits_dev, (size_t)c->n_vocab * sizeof(float), c->n_layers,
                     token, tl, e))
            return -1;
        *logits = g->logits_pinned;
        return 0;
    }
    if (crossing(g, CROSS_D2H, g->x_pinned, x_dev, x_bytes, g->n_layers, token, tl, e)) return -1;
    memcpy(x, g->x_pinned, x_bytes);
    return 0;
}

int gpu_segment_forward(gpu_segment *g, float *x, float **logits, int pos, seam_timeline *tl, seam_token_time *tt,
                        seam_error *e) {
    return run_segment(g, x, 0, pos, g->head, logits, tl, tt, e);
}

bool gpu_segment_gemm(const gpu_segment *g, int n) {
    if (!g->blas || n < 2 || n > SEAM_UBATCH) return false;
    return g->prefill == GPU_PREFILL_GEMM || (g->prefill == GPU_PREFILL_AUTO && n >= GPU_GEMM_MIN_BATCH);
}

int gpu_segment_prefill(gpu_segment *g, float *x, int n, int pos0, bool head, float **logits, seam_timeline *tl,
                        seam_token_time *tt, seam_error *e) {
    if (!g->blas)
        return seam_fail(e, "the GPU layers take no batch here (planned with --gpu-prefill %s): the GEMM's buffers "
                            "exist only under gemm or auto, for dense layers (MoE layers run token by token)",
                         gpu_prefill_name[g->prefill]);
    if (n < 2 || n > SEAM_UBATCH)
        return seam_fail(e, "a GPU prefill batch holds 2..%d tokens (got %d)", SEAM_UBATCH, n);
    return run_segment(g, x, n, pos0, head && g->head, logits, tl, tt, e);
}

#endif
