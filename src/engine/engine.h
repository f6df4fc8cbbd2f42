// engine.h — runs a model: a batch of tokens (a prompt's, or one decoded
// token) through the GPU's layers, then the CPU's, then the output head,
// each token's time and every crossing recorded in the timeline.
//
// Floor src/engine/: a run, token by token -- the layers of both backends
// in order, the crossings between them, the head. Above gpu/ and cpu/; the
// planner above it hands it a placement as data.
#ifndef SEAM_ENGINE_H
#define SEAM_ENGINE_H

#include "base/timeline.h"
#include "cpu/backend.h"
#include "gpu/gpu_segment.h"
#include "model/model.h"
#include "model/placement.h"

typedef struct {
    const seam_model *model;
    int n_ctx;               // positions the KV caches hold
    cpu_backend cpu;         // the CPU's layers: a batch's activations (its embeddings go in cpu.layer.acts.x),
                             // their KV cache, the threads
    float *logits;           // (n_vocab) the CPU head's output (a GPU head's logits are the GPU segment's, pinned)
    gpu_segment *gpu;        // layers 0..gpu_layers-1 (and maybe the head) on the GPU; NULL for none
    int gpu_layers;
    bool head_on_gpu;
    seam_timeline timeline;  // every token's segments and crossings, in run order (tokens[i].token == i)
    bool time_layers;        // the timeline also takes each layer's time (engine_time_layers)
} seam_engine;

// An engine for contexts of n_ctx positions, its KV cache of kv's types
// (engine_init: f16, as llama.cpp's default), everything on the CPU on the
// calling thread. Its buffers are resident from the start.
int engine_init_kv(seam_engine *eng, const seam_model *m, int n_ctx, seam_kv_config kv, seam_error *e);
int engine_init(seam_engine *eng, const seam_model *m, int n_ctx, seam_error *e);
void engine_free(seam_engine *eng);

// Bytes of host memory engine_init allocates besides the KV cache: the CPU
// backend's (cpu_backend_scratch_bytes), the logits, and the timeline's
// records of n_ctx tokens.
uint64_t engine_scratch_bytes(const seam_config *c, int n_ctx);

// Runs the CPU layers on n_threads threads (the caller and n_threads - 1
// workers; 1, the default after engine_init, = the calling thread alone).
int engine_set_threads(seam_engine *eng, int n_threads, seam_error *e);

// Puts the plan's GPU layers (and head) on the GPU: copies their weights
// there and runs them through the GPU segment from the next token on. A plan
// with no GPU part keeps everything on the CPU. The plan's gpu_prefill says
// how a prompt's batches cross the GPU layers, and so whether the segment
// holds the GEMM's buffers. use_graph: replay the GPU segment as one CUDA
// graph (off: one launch per op, to measure the difference).
int engine_place(seam_engine *eng, const seam_plan *plan, bool use_graph, seam_error *e);

// Times every layer of every batch from the next token on (on: the CPU's
// by the host clock around each, the GPU's by CUDA events between them,
// recorded inside its graph), into the timeline's layer records.
void engine_time_layers(seam_engine *eng, bool on);

// Runs token at position pos (0 <= pos < n_ctx; earlier positions already in
// the cache) and returns the logits (n_vocab), valid until the next call.
int engine_forward(seam_engine *eng, int token, int pos, float **logits, seam_error *e);

// Runs n prompt tokens at positions pos0.. and returns the logits after the
// last; the timeline marks them as prefill. A batch of up to SEAM_UBATCH
// tokens goes through the layers at once on the CPU alone, or when the GPU
// layers take it as matrix products (gpu_segment_gemm, under the placed
// plan's gpu_prefill); else its tokens go one by one, as decode runs them.
int engine_prefill(seam_engine *eng, const int *tokens, int n, int pos0, float **logits, seam_error *e);

#endif
