// engine.h — runs a model token by token: the forward pass and the KV cache.
#ifndef SEAM_ENGINE_H
#define SEAM_ENGINE_H

#include "cpu/pool.h"
#include "gpu/gpu_segment.h"
#include "model/model.h"
#include "model/placement.h"
#include "numeric/quant.h"
#include "base/timeline.h"

// The KV cache (plan.h's seam_kv_config): per layer and KV head, a row of
// head_dim keys and one of values per position the layer holds, in the
// cache's type (f16, or q8_0 blocks of 32 of which a head holds whole ones);
// a head's positions lie one after another, so that its attention streams
// them. A full layer holds positions 0..n_ctx-1 in rows 0..n_ctx-1; a
// sliding layer a ring of rows[il] positions, position p in row
// p % rows[il] (plan_kv_rows).
typedef struct {
    seam_kv_config cfg;
    size_t k_head_row, v_head_row;  // bytes of one head's keys, values at one position
    int rot_k, rot_v;             // Walsh-Hadamard blocks of keys (and queries) and values; 0: none (plan_kv_rotation)
    int rows[SEAM_MAX_LAYERS];    // positions layer il holds
    uint8_t *k[SEAM_MAX_LAYERS];  // (n_kv_heads, rows[il], k_head_row) bytes, within mem
    uint8_t *v[SEAM_MAX_LAYERS];  // (n_kv_heads, rows[il], v_head_row) bytes, within mem
    uint8_t *mem;                 // every layer's keys and values (plan_kv_bytes of all the rows)
    uint64_t bytes;
} seam_kv_cache;

// The activations of one token and the KV cache: everything the forward pass
// writes. Shapes beside each buffer.
typedef struct {
    float *x;        // (n_embd) the residual stream
    float *xb;       // (max(n_embd, q_dim)) normed input of a block, then attention output
    float *xb2;      // (n_embd) a block's output before it joins the residual
    float *q;        // (n_heads * head_dim)
    float *k;        // (n_kv_heads * head_dim)
    float *v;        // (n_kv_heads * head_dim)
    float *att;      // (n_threads, cpu_attention_scratch_floats(n_ctx, head_dim)) each thread's
                     // scores of one head and the lanes of its weighted sum of values
    float *hb;       // (max(n_ff, n_ff_exp)) FFN gate, then the gated hidden layer
    float *hb2;      // (max(n_ff, n_ff_exp)) FFN up
    float *router;   // (n_expert) the router's logits, then probabilities (MoE)
    float *moe;      // (n_embd) the weighted sum of the chosen experts' outputs (MoE)
    float *logits;   // (n_vocab) the CPU head's output (a GPU head's logits are the GPU segment's, pinned)
    float *rope_angles;  // (4, rope_dim / 2) this token's RoPE cos, sin: global layers', then sliding layers'
    void *act;       // quantised activation scratch (cpu_matvec_scratch_bytes of the widest input)
    struct prefill_batch *batch;  // a prompt's SEAM_UBATCH tokens' activations (prefill.c)
    seam_kv_cache kv;
} seam_state;

typedef struct {
    const seam_model *model;
    int n_ctx;        // positions the KV cache holds
    seam_pool *pool;  // the CPU layers' threads; NULL = the calling thread alone
    seam_state s;
    gpu_segment *gpu;        // layers 0..gpu_layers-1 (and maybe the head) on the GPU; NULL for none
    int gpu_layers;
    bool head_on_gpu;
    seam_timeline timeline;  // every token's segments and crossings, in run order
    int n_run;               // tokens run so far (the timeline's token index)
} seam_engine;

// An engine for contexts of n_ctx positions, its KV cache of kv's types
// (engine_init: f16, as llama.cpp's default). Its buffers are resident from
// the start (seam_alloc_resident), as llama.cpp clears its KV cache, so
// that what the plan counts is what the process holds.
int engine_init_kv(seam_engine *eng, const seam_model *m, int n_ctx, seam_kv_config kv, seam_error *e);
int engine_init(seam_engine *eng, const seam_model *m, int n_ctx, seam_error *e);
void engine_free(seam_engine *eng);

// Bytes of host memory engine_init allocates besides the KV cache: one
// token's activations with one thread's attention scratch (each thread of
// engine_set_threads adds cpu_attention_scratch_floats), a prompt's batch,
// and the timeline's records of n_ctx tokens.
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

// Runs token at position pos (0 <= pos < n_ctx; earlier positions already in
// the cache) and returns the logits (n_vocab), valid until the next call.
int engine_forward(seam_engine *eng, int token, int pos, float **logits, seam_error *e);

// Runs n prompt tokens at positions pos0.. and returns the logits after the
// last; the timeline marks them as prefill. A batch of SEAM_UBATCH tokens
// runs through the layers at once (prefill_batch) on the CPU alone, or when
// the GPU layers take it as matrix products (gpu_segment_gemm, under the
// placed plan's gpu_prefill); else its tokens run one by one, as decode runs
// them.
int engine_prefill(seam_engine *eng, const int *tokens, int n, int pos0, float **logits, seam_error *e);

#endif
