// segment_state.h — the GPU segment's state, shared by the segment
// (gpu_segment.c: its buffers, streams, graph and crossings) and its layer
// operations (layer_ops.c); not part of the segment's API (gpu_segment.h).
#ifndef SEAM_GPU_SEGMENT_STATE_H
#define SEAM_GPU_SEGMENT_STATE_H

#include <stdbool.h>

#include "base/timeline.h"
#include "cpu/backend.h"
#include "model/layer.h"
#include "model/placement.h"
#include "seam_cuda.h"

typedef struct gpu_segment gpu_segment;  // gpu_segment.h's

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
    bool time_layers;         // record layer_done, and each layer's time in the timeline
    // layers whose experts stay in host memory (--n-cpu-moe): the router runs here, its logits and the
    // experts' input cross to the host, the CPU runs the experts, their sum crosses back
    bool *host_experts;       // [n_layers]
    cpu_backend *cpu;         // runs them
    float *experts_in;        // (n_embd + n_expert) pinned: the experts' input, then the router's logits
    float *experts_out;       // (n_embd) pinned: their weighted sum
    double *host_us;          // [n_layers] this run's host time inside a layer: its crossings and experts
    double *experts_us;       // [n_layers] of which the CPU's time on its experts
    seam_timeline *run_tl;    // the run in flight, whose crossings the experts' path records
    int run_token;
    seam_cuda_event **layer_done;  // [n_layers] recorded after each layer (time_layers)
    seam_cuda_graph *graph;   // the captured segment; NULL until the first token (or without graphs)
    gpu_layer *layers;        // [n_layers]
    seam_tensor output_norm, output;  // on the device when head
    seam_cuda_step *step;     // device (SEAM_UBATCH): this token's position in step[0], or a batch's, one a token
    seam_cuda_step *step_host;  // pinned host copy, one H2D a token (or a batch)
    float *x_pinned;          // (n_embd; SEAM_UBATCH rows with a batched path) pinned: hidden states crossing the bus
    float *logits_dev;        // (n_vocab) when head
    float *logits_pinned;     // (n_vocab) pinned, when head: the logits crossing the bus, handed to the engine
    layer_backend layer;      // the recipe's view (model/layer.h): the CUDA ops, this segment, the cache's
                              // rotation, and the activations of what runs: `token`'s or `batch`'s
    layer_acts token;         // one decoded token's activations on the device (one row each)
    float *scores;            // (n_heads, n_ctx) attention scores past the shared memory (gpu_activation_bytes)
    float *router;            // (n_expert) router logits (MoE)
    float *expert_out;        // (n_embd) one chosen expert's output, before it joins the weighted sum (MoE)
    int32_t *chosen;          // (n_expert_used) the experts the router picked, by rank (MoE)
    float *weights;           // (n_expert_used) their renormalised weights (MoE)
    void *scratch;            // quantised activations of the widest input (gpu_segment_scratch_cols)
    void *scratch_hidden;     // MoE: the quantised expert FFN input (up's, when its type is not gate's)
                              // or hidden layer, while scratch holds gate's quantised input
    seam_cuda_stream *copy_stream;  // stream: the weight copies, beside the compute stream
    void *staging[2];         // stream: two device buffers the overflow layers take turns in
    stream_events *streamed;  // stream: [n_layers - resident]
    // the batched prefill (NULL where prefill_sizes says it does not run: under
    // --gpu-prefill tokens, for MoE layers, with no layers)
    seam_cuda_blas *blas;     // cuBLAS on the compute stream
    layer_acts batch;         // SEAM_UBATCH rows each
    uint16_t *x16;            // (SEAM_UBATCH, widest input) a product's input in f16
    uint16_t *w16;            // the largest matrix of the segment's layers in f16
    void *blas_workspace;     // GPU_BLAS_WORKSPACE_BYTES, cuBLAS's
    void **allocations;       // every device buffer, for gpu_segment_free
    int n_allocations, cap_allocations;
};

// The one door between host and device (gpu_segment.c): the copy of bytes
// in direction dir, recorded in tl as token's crossing before (or, for an
// MoE layer's experts, within) layer `layer`.
int gpu_crossing(gpu_segment *g, seam_direction dir, void *dst, const void *src, size_t bytes, int layer,
                 bool experts, int token, seam_timeline *tl, seam_error *e);

// out (w->rows) = W @ x (w->cols) on the segment's stream (layer_ops.c).
int gpu_matvec(gpu_segment *g, const seam_tensor *w, const float *x, float *out, seam_error *e);

// The CUDA backend's layer operations (layer_ops.c), the recipe's be = the segment.
extern const layer_ops gpu_layer_ops;

#endif
