// model.h — architectures: configuration from metadata, weights bound by name.
//
// Floor src/model/: what a model is, on no device -- its configuration and
// weights (here), shapes for synthetic models (shape.h), one layer's recipe
// and the operations a backend gives it (layer.h), and the placement a plan
// hands the engine with the KV cache's layout (placement.h). Above numeric/.
//
// This room knows architectures and nothing about devices. Weights are views
// into the mapped GGUF file; which device later computes with them is the
// plan's business.
#ifndef SEAM_MODEL_H
#define SEAM_MODEL_H

#include <stdbool.h>
#include <stdint.h>

#include "base/common.h"
#include "format/gguf.h"

typedef enum {
    ARCH_LLAMA,
    ARCH_QWEN2,
    ARCH_QWEN3,
    ARCH_GEMMA3,
    ARCH_QWEN3MOE,
} seam_arch;

#define SEAM_MAX_LAYERS 512

typedef struct {
    seam_arch arch;
    const char *arch_name;  // "llama", "qwen2", "qwen3", "gemma3", "qwen3moe"
    int n_layers;           // block_count
    int n_embd;             // embedding_length: width of the residual stream
    int n_ff;               // feed_forward_length: width of the FFN's hidden layer
    int n_expert;           // expert_count: FFN experts per layer; 0 for a dense model
    int n_expert_used;      // expert_used_count: experts each token runs (top-k)
    int n_ff_exp;           // expert_feed_forward_length: width of one expert's hidden layer
    int n_heads;            // attention.head_count
    int n_kv_heads;         // attention.head_count_kv (grouped-query attention)
    int head_dim;           // attention.key_length (default n_embd / n_heads)
    int n_vocab;
    int n_ctx_train;        // context_length the model was trained for
    float rms_eps;          // attention.layer_norm_rms_epsilon
    float rope_base;        // rope.freq_base (of the full-attention layers)
    float rope_scale;       // 1 / rope.scaling.factor for linear scaling, else 1
    int rope_dim;           // rope.dimension_count: leading dims of a head that rotate
    bool rope_neox;         // NEOX rotates pairs (i, i + rope_dim/2); normal (2i, 2i+1)
    bool qk_norm;           // RMS norms on q and k per head (qwen3, gemma3)
    bool qkv_bias;          // biases on q, k, v (qwen2)
    bool post_norms;        // RMS norms on each block's output before the residual (gemma3)
    bool ffn_gelu;          // GELU(tanh)-gated FFN instead of SwiGLU (gemma3)
    float embd_scale;       // the embedding row is multiplied by this (gemma3: sqrt(n_embd))
    float q_scale;          // q is multiplied by this before attention (gemma3), else 1
    float kq_scale;         // the attention scores are multiplied by this (1/sqrt(head_dim), gemma3: 1)
    float logit_softcap;    // final_logit_softcapping: logits = c * tanh(logits / c); 0 = off
    int n_swa;              // attention.sliding_window: positions a sliding layer sees; 0 = none
    float rope_base_swa;    // rope.freq_base_swa: the base of the sliding layers
    bool layer_swa[SEAM_MAX_LAYERS];  // layer il attends over a sliding window
} seam_config;

// A view of one tensor: a matrix of `rows` rows of `cols` elements (a vector
// has rows == 1), stored row after row in `type`'s blocks.
typedef struct {
    const char *name;     // points into the file (not NUL-terminated: use name_len)
    int name_len;
    uint32_t type;        // ggml_type
    int64_t rows, cols;   // cols = ne[0], the row length
    uint64_t row_bytes;
    uint64_t n_bytes;
    const void *data;     // host bytes (the mapping)
} seam_tensor;

typedef struct {
    seam_tensor attn_norm;      // (n_embd) f32
    seam_tensor wq;             // (n_heads * head_dim, n_embd)
    seam_tensor wk;             // (n_kv_heads * head_dim, n_embd)
    seam_tensor wv;             // (n_kv_heads * head_dim, n_embd)
    seam_tensor bq, bk, bv;     // (n_heads * head_dim), (n_kv_heads * head_dim) x2; qwen2 only
    seam_tensor q_norm, k_norm; // (head_dim) f32; qwen3 only
    seam_tensor wo;             // (n_embd, n_heads * head_dim)
    seam_tensor attn_post_norm; // (n_embd) f32; gemma3 only
    seam_tensor ffn_norm;       // (n_embd) f32
    seam_tensor w_gate;         // (n_ff, n_embd)
    seam_tensor w_up;           // (n_ff, n_embd)
    seam_tensor w_down;         // (n_embd, n_ff)
    seam_tensor ffn_post_norm;  // (n_embd) f32; gemma3 only
    // mixture of experts (qwen3moe), instead of w_gate/w_up/w_down; expert e
    // owns rows [e * n_ff_exp, (e + 1) * n_ff_exp) of gate/up and
    // [e * n_embd, (e + 1) * n_embd) of down (tensor_rows gives the view)
    seam_tensor ffn_gate_inp;   // (n_expert, n_embd) f32: the router
    seam_tensor ffn_gate_exps;  // (n_expert * n_ff_exp, n_embd)
    seam_tensor ffn_up_exps;    // (n_expert * n_ff_exp, n_embd)
    seam_tensor ffn_down_exps;  // (n_expert * n_embd, n_ff_exp)
} seam_layer_weights;

typedef struct {
    seam_tensor tok_embd;          // (n_vocab, n_embd)
    seam_layer_weights *layers;    // [n_layers]
    seam_tensor output_norm;       // (n_embd) f32
    seam_tensor output;            // (n_vocab, n_embd); tok_embd when the file ties them
    bool tied_output;
} seam_weights;

typedef struct {
    gguf_file file;
    seam_config cfg;
    seam_weights w;
} seam_model;

// Maps the file, reads the configuration and binds every tensor the
// architecture needs, checking shapes and that seam can compute each type.
int model_load(seam_model *m, const char *path, seam_error *e);
// Same, over a file already opened (takes ownership of f on success).
int model_bind(seam_model *m, gguf_file *f, seam_error *e);
void model_free(seam_model *m);

// The view of n rows of t starting at row `first` (an expert's slice).
seam_tensor tensor_rows(const seam_tensor *t, int64_t first, int64_t n);

// Bytes of weights one decoded token reads: every layer's active bytes, the
// output norm and the head, plus one embedding row.
uint64_t model_bytes_per_token(const seam_model *m);
// The tensors of layer il (those a model lacks have data NULL): the
// MODEL_LAYER_SHARED that every token reads (attention, norms, dense FFN,
// router) and the MODEL_LAYER_ROUTED experts' gate, up and down.
enum { MODEL_LAYER_SHARED = 17, MODEL_LAYER_ROUTED = 3 };
void model_layer_tensors(const seam_model *m, int il, const seam_tensor *shared[MODEL_LAYER_SHARED],
                         const seam_tensor *routed[MODEL_LAYER_ROUTED]);
// Weight bytes of layer il: all of them, and those one token reads (the
// attention, the router and n_expert_used of the n_expert experts).
uint64_t model_layer_bytes(const seam_model *m, int il);
uint64_t model_layer_active_bytes(const seam_model *m, int il);
// Of those, the chosen experts' share (n_expert_used of the n_expert); 0 for a dense layer.
uint64_t model_layer_active_expert_bytes(const seam_model *m, int il);
// Multiply-adds of one token's matrix products in layer il: rows * cols of
// each matrix it reads there (the vectors -- norms, biases -- are not
// products), its experts' n_expert_used of n_expert. Attention's products
// with the cache depend on the position: plan_prompt_macs (placement.h).
uint64_t model_layer_macs(const seam_model *m, int il);

#endif
