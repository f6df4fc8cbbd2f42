// gpu_segment.h — the GPU side of the split: layers 0..N-1 (and the output
// head, when the plan puts it there) run on the CUDA device, one stream, the
// whole segment captured once as a CUDA graph and replayed for every token.
//
// Floor src/gpu/: the CUDA backend's host side, over kernels/ (the CUDA
// kernels and their C API, seam_cuda.h, a floor of its own below this one).
// Above cpu/ and model/.
//
// The engine calls it between its host-side steps; every move of data
// between host and device goes through the segment's crossing function,
// which records it in the timeline.
#ifndef SEAM_GPU_SEGMENT_H
#define SEAM_GPU_SEGMENT_H

#include <stdbool.h>

#include "cpu/backend.h"
#include "model/model.h"
#include "model/placement.h"
#include "base/timeline.h"

typedef struct gpu_segment gpu_segment;

// The free memory of CUDA device 0, which bounds a plan's GPU part; 0 when
// seam was built without CUDA or there is no device.
uint64_t gpu_free_bytes(void);

// The name of CUDA device 0, or NULL without one (or without a CUDA build);
// *emulated when it is the emulated device (the SEAM_CUDA_EMU build), whose
// times are the CPU's, not a GPU's: every report must say so.
const char *gpu_device_name(bool *emulated);

// Copies the weights of the plan's GPU layers (and head) to the device and
// allocates their KV caches and the activations. A layer whose experts the
// plan keeps on the CPU (--n-cpu-moe, --cpu-moe) leaves them in host memory,
// where cpu runs them (cpu_backend_experts) when the layer reaches them.
// Fails with a message when there is no CUDA build or device, or when memory
// runs out (naming what and how much).
int gpu_segment_init(gpu_segment **out, const seam_model *m, const seam_plan *plan, int n_ctx, bool use_graph,
                     cpu_backend *cpu, seam_error *e);
void gpu_segment_free(gpu_segment *g);

// n tokens (1..SEAM_UBATCH) at positions pos0.. through the GPU layers: x
// (n, n_embd, host) crosses to the device, the layers run, and either the
// hidden states cross back into x or, when head and the head is on the GPU,
// the last token's logits cross back into the segment's pinned buffer and
// *logits points at it (n_vocab, valid until the next call). A single token
// is decode's: its own buffers, the graph, and the head whenever the segment
// has it; a batch is a prompt's, as matrix products (gpu_segment_gemm must
// take it). Records the crossings (as token tt->token) and fills tt's GPU
// segment time (CUDA events around the segment on its stream: from the GPU
// taking up its launch -- the graph's, or the first op's without graphs --
// to its last op; a batch's whole).
int gpu_segment_run(gpu_segment *g, float *x, int n, int pos0, bool head, float **logits, seam_timeline *tl,
                    seam_token_time *tt, seam_error *e);

// Times each layer from the next token on (or stops): a CUDA event after
// every layer, recorded inside the graph (which is captured again), and
// one record a layer in the timeline, the head's as layer n_layers.
void gpu_segment_time_layers(gpu_segment *g, bool on);

// Why the segment's CUDA graph could not be captured, or NULL: the segment
// then runs op by op (the first token always does, before the capture).
const char *gpu_segment_graph_failure(const gpu_segment *g);

// Layer il's cached K and V rows of positions [pos0, pos0 + n), each as its
// row of the device cache holds it (row_bytes: one row's bytes, of
// n_kv_heads * head_dim values of the cache's type), downloaded into k and
// v (n rows each): what two paths wrote, for the tests to compare.
int gpu_segment_kv_rows(const gpu_segment *g, int il, int pos0, int n, void *k, void *v, size_t *row_bytes,
                        seam_error *e);

// The batch from which --gpu-prefill auto takes the GEMM (plan.h's
// seam_gpu_prefill). Provisional, until a device measures it (bench/gpu-check.sh's pp32..pp512
// through both paths): llama.cpp's batch from which ggml-cuda takes
// dequantise + cuBLAS over its own dp4a kernels for quantised weights on an
// NVIDIA GPU with f16 tensor cores but no int8 MMA (MMQ_DP4A_MAX_BATCH_SIZE,
// ggml_cuda_should_use_mmq; from Turing on it keeps its int8 MMA kernels at
// every batch). seam's alternative is the matvec per token, which reads the
// weights once a token, so the GEMM may well win below 64.
#define GPU_GEMM_MIN_BATCH 64

// Whether a batch of n prompt tokens crosses g's layers as matrix products
// under the plan's mode (seam_plan's gpu_prefill, fixed at init with the
// buffers it needs): never for a single token, nor under tokens, nor for a
// segment with no layers or with MoE layers (their experts run token by
// token).
bool gpu_segment_gemm(const gpu_segment *g, int n);

// Device bytes the batched path adds to a segment of layers 0..n_layers-1
// under mode: SEAM_UBATCH tokens' activations, their f16 copy, and the
// largest weight matrix of those layers in f16. 0 where it does not run
// (under tokens, MoE, no layers): then gpu_segment_init makes neither these
// buffers nor a cuBLAS handle.
uint64_t gpu_segment_prefill_bytes(const seam_model *m, int n_layers, seam_gpu_prefill mode);

// Columns of the widest input each of the segment's two quantised-activation
// buffers receives, from the model's shapes alone: `scratch` the input of
// every matvec (n_embd, q_dim or the FFN's hidden width), `hidden` (MoE; 0
// otherwise) the down experts' input (n_ff_exp) and, when the up experts'
// type is not the gate experts', the up experts' own quantisation of the
// layer input (n_embd). gpu_segment_init allocates
// seam_cuda_matvec_scratch_bytes of each.
typedef struct {
    int64_t scratch, hidden;
} gpu_scratch_cols;
gpu_scratch_cols gpu_segment_scratch_cols(const seam_config *c);

#endif
