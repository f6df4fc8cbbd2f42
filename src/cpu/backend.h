// backend.h — the CPU backend: the layers the CPU runs, over host memory.
//
// It holds what those layers write -- a batch's activations and the KV
// cache -- and gives model/layer.h's recipe its operations (cpu/ops.h's
// kernels on the pool's threads). A batch of one token (decode) runs its
// per-token steps on the calling thread; a prompt's batch shares them out
// by token, and its matrix products meet every token while a grab of
// weight rows is in cache. Every token's arithmetic is its decode
// arithmetic, so a prompt's logits equal token by token's, bit for bit.
#ifndef SEAM_CPU_BACKEND_H
#define SEAM_CPU_BACKEND_H

#include "cpu/ops.h"
#include "cpu/pool.h"
#include "model/layer.h"
#include "model/placement.h"

// The KV cache (model/placement.h's seam_kv_config): per layer and KV head,
// a row of head_dim keys and one of values per position the layer holds, in
// the cache's type (f16, or q8_0 blocks of 32 of which a head holds whole
// ones); a head's positions lie one after another, so that its attention
// streams them. A full layer holds positions 0..n_ctx-1 in rows
// 0..n_ctx-1; a sliding layer a ring of rows[il] positions, position p in
// row p % rows[il] (plan_kv_rows).
typedef struct {
    seam_kv_config cfg;
    size_t k_head_row, v_head_row;  // bytes of one head's keys, values at one position
    int rot_k, rot_v;             // Walsh-Hadamard blocks of keys (and queries) and values; 0: none (plan_kv_rotation)
    int rows[SEAM_MAX_LAYERS];    // positions layer il holds
    uint8_t *k[SEAM_MAX_LAYERS];  // (n_kv_heads, rows[il], k_head_row) bytes, within mem
    uint8_t *v[SEAM_MAX_LAYERS];  // (n_kv_heads, rows[il], v_head_row) bytes, within mem
    uint8_t *mem;                 // every layer's keys and values (plan_kv_bytes of all the rows)
    uint64_t bytes;
} cpu_kv_cache;

// The MoE layers' working buffers for a batch: every (token, rank) pair of
// the batch's routing, grouped by expert so that each expert's rows are
// read once for all the pairs that chose it.
typedef struct {
    float *router;  // (SEAM_UBATCH, n_expert) the router's logits, then probabilities
    int *chosen;    // (SEAM_UBATCH, k_used) the experts each token chose, by rank
    float *weight;  // (SEAM_UBATCH, k_used) their renormalised weights
    int *pair;      // (SEAM_UBATCH * k_used) the pairs (token * k_used + rank) grouped by expert
    int *slot;      // (SEAM_UBATCH * k_used) where pair p is in that order
    int *first;     // (n_expert + 1) expert e's pairs: pair[first[e] .. first[e + 1])
    float *out;     // (SEAM_UBATCH * k_used, n_embd): each pair's expert output
} cpu_moe_work;

typedef struct {
    const seam_config *cfg;
    int n_ctx;
    seam_pool *pool;          // NULL: the calling thread alone
    layer_backend layer;      // the recipe's view: the CPU's ops, this, the rotation and the activations:
                              // SEAM_UBATCH rows each; hb, hb2: SEAM_UBATCH * k_used rows of the FFN's
                              // or one expert's width, one per (token, rank) pair in an MoE layer
    cpu_moe_work moe;
    float *rope_angles;       // (SEAM_UBATCH, 2 * rope_dim) each token's RoPE cos, sin: global layers',
                              // then sliding layers'
    void *act, *act2;         // quantised inputs: SEAM_UBATCH * k_used rows of the widest input, twice
    float *att;               // (threads, cpu_attention_scratch_floats(n_ctx, head_dim)) each thread's
                              // scores of one head and the lanes of its weighted sum of values
    cpu_kv_cache kv;
    int pos0, n;              // the batch in flight: n tokens at positions pos0..
    double attention_s;       // seconds in attention since cpu_backend_begin (the timeline's share)
} cpu_backend;

// A backend for contexts of n_ctx positions with a cache of kv's types, on
// the calling thread alone. Its buffers are resident from the start
// (seam_alloc_resident), as llama.cpp clears its KV cache, so that what the
// plan counts is what the process holds.
int cpu_backend_init(cpu_backend *b, const seam_config *c, int n_ctx, seam_kv_config kv, seam_error *e);
void cpu_backend_free(cpu_backend *b);

// Bytes cpu_backend_init allocates besides the KV cache: a batch's
// activations and working buffers, with one thread's attention scratch
// (each thread of cpu_backend_set_threads adds cpu_attention_scratch_floats).
uint64_t cpu_backend_scratch_bytes(const seam_config *c, int n_ctx);

// Runs the layers on n_threads threads (the caller and n_threads - 1
// workers; 1 = the calling thread alone).
int cpu_backend_set_threads(cpu_backend *b, int n_threads, seam_error *e);

// The next batch: n (1..SEAM_UBATCH) tokens at positions pos0.., whose
// embeddings the caller has written into layer.acts.x; their RoPE angles are
// computed here, once for every layer.
void cpu_backend_begin(cpu_backend *b, int pos0, int n);

// An MoE layer's experts for n tokens (1..SEAM_UBATCH) whose router
// logits are already computed: router (n, n_expert) logits in, routed
// (softmax, top k, renormalised: cpu_moe_route), and out (n, n_embd) = each
// token's chosen experts' SwiGLU FFNs of x (n, n_embd), weighted and summed
// in rank order. The CPU's own MoE layers and the GPU's layers whose
// experts stay in host memory (--n-cpu-moe) both run it.
void cpu_backend_experts(const cpu_backend *b, const seam_layer_weights *l, const float *x, float *router, float *out,
                         int n);

#endif
