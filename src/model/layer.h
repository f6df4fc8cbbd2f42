// layer.h — a transformer layer, written once: the recipe (layer.c) and the
// operations it is made of, which each backend provides -- the CPU's
// (cpu/backend.c, over host memory) and the CUDA segment's
// (gpu/gpu_segment.c, over device memory).
//
// The recipe takes a batch of n tokens through one layer: decode is n = 1,
// a prompt's batch up to SEAM_UBATCH. Every buffer holds the batch's n rows
// packed, row t of an (n, cols) buffer at t * cols. An operation that can
// run as n dot products or as a matrix product (the CPU's tiles, the GPU's
// GEMM) chooses by n; the recipe does not know which.
//
// Each backend's arithmetic is its own: the CPU's is llama.cpp's, bit for
// bit; the GPU's sums in other orders (docs/gpu.md).
#ifndef SEAM_LAYER_H
#define SEAM_LAYER_H

#include <stdbool.h>

#include "model/model.h"

// The activations of a batch, in the backend's memory (n rows each; the
// backend sizes them for the largest n it takes).
typedef struct {
    float *x;         // (n, n_embd) the residual stream
    float *xb;        // (n, max(n_embd, q_dim)) a block's normed input, then the attention's output (n, q_dim)
    float *xb2;       // (n, n_embd) a block's output before it joins the residual stream
    float *q;         // (n, n_heads * head_dim)
    float *k, *v;     // (n, n_kv_heads * head_dim)
    float *hb, *hb2;  // (n, n_ff) the FFN's gate, then its gated hidden layer; its up
} layer_acts;

// The operations, each over the batch's n rows; 0 on success, -1 with a
// message in e (the GPU's launches can fail; the CPU's cannot).
typedef struct {
    // out (rows, cols) = each row of x / rms(row), times w (cols)
    int (*rmsnorm)(void *be, float *out, const float *x, const seam_tensor *w, int rows, int cols, seam_error *e);
    // out[i] (n, w[i]->rows) = x (n, cols) . w[i]^T for n_mats matrices of cols columns that share the input
    int (*matmul)(void *be, int n_mats, const seam_tensor *const w[], const float *x, float *const out[], int n,
                  seam_error *e);
    // x (n, cols) += b (cols) on every row
    int (*add_bias)(void *be, float *x, const seam_tensor *b, int n, int cols, seam_error *e);
    // x (n, cols) += y (n, cols)
    int (*add)(void *be, float *x, const float *y, int n, int cols, seam_error *e);
    // x (n, cols) *= s
    int (*scale)(void *be, float *x, float s, int n, int cols, seam_error *e);
    // RoPE of layer il (its base: a sliding layer's own) on q (n, n_heads
    // heads) and k (n, n_kv_heads heads), row t at the batch's position t
    int (*rope)(void *be, int il, float *q, float *k, int n, seam_error *e);
    // each block of `block` values of x (n, cols) turned by the orthonormal Walsh-Hadamard transform
    int (*rotate)(void *be, float *x, int n, int cols, int block, seam_error *e);
    // k and v (n, kv_dim) join layer il's KV cache, row t at the batch's position t
    int (*kv_append)(void *be, int il, const float *k, const float *v, int n, seam_error *e);
    // out (n, q_dim): token t's query heads q (n, q_dim) over layer il's cache up to its own position
    int (*attention)(void *be, int il, float *out, const float *q, int n, seam_error *e);
    // gate (n, cols) = act(gate) * up: SwiGLU, or GEGLU (tanh GELU) when gelu
    int (*glu)(void *be, float *gate, const float *up, int n, int cols, bool gelu, seam_error *e);
    // out (n, n_embd) = each token's top n_expert_used experts of layer il
    // (by the router l->ffn_gate_inp, softmax-gated, as llama.cpp's
    // build_moe_ffn), each a SwiGLU FFN of x (n, n_embd), weighted and summed
    // in rank order
    int (*moe)(void *be, int il, const seam_layer_weights *l, const float *x, float *out, int n, seam_error *e);
} layer_ops;

// A backend as the recipe sees it.
typedef struct {
    const layer_ops *ops;
    void *be;          // the backend's state, the first argument of every op
    layer_acts acts;   // the batch's activations
    int rot_k, rot_v;  // a quantised cache's rotation of keys and values (plan_kv_rotation); 0: none
} layer_backend;

// A batch of n tokens through layer il (weights l, as the backend reads
// them): attention over the KV cache, then the FFN or the experts, each
// block's output joining the residual stream acts.x.
int layer_forward(const layer_backend *b, const seam_config *c, int il, const seam_layer_weights *l, int n,
                  seam_error *e);

#endif
