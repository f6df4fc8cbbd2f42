// engine.h — runs a model token by token: the forward pass and the KV cache.
#ifndef SEAM_ENGINE_H
#define SEAM_ENGINE_H

#include "model.h"
#include "quant.h"

// The activations of one token and the KV cache: everything the forward pass
// writes. Shapes beside each buffer.
typedef struct {
    float *x;        // (n_embd) the residual stream
    float *xb;       // (max(n_embd, q_dim)) normed input of a block, then attention output
    float *xb2;      // (n_embd) a block's output before it joins the residual
    float *q;        // (n_heads * head_dim)
    float *k;        // (n_kv_heads * head_dim)
    float *v;        // (n_kv_heads * head_dim)
    float *att;      // (n_ctx) attention scores of one head
    float *hb;       // (n_ff) FFN gate, then the gated hidden layer
    float *hb2;      // (n_ff) FFN up
    float *logits;   // (n_vocab)
    void *act;       // quantised activation scratch (cpu_matvec_scratch_bytes of the widest input)
    seam_f16 *key_cache;    // (n_layers, n_ctx, n_kv_heads * head_dim)
    seam_f16 *value_cache;  // (n_layers, n_ctx, n_kv_heads * head_dim)
} seam_state;

typedef struct {
    const seam_model *model;
    int n_ctx;        // positions the KV cache holds
    seam_state s;
} seam_engine;

int engine_init(seam_engine *eng, const seam_model *m, int n_ctx, seam_error *e);
void engine_free(seam_engine *eng);

// Bytes of KV cache and of activation scratch engine_init will allocate.
uint64_t engine_kv_bytes(const seam_config *c, int n_ctx);

// Runs token at position pos (0 <= pos < n_ctx; earlier positions already in
// the cache) and returns the logits (n_vocab), valid until the next call.
int engine_forward(seam_engine *eng, int token, int pos, float **logits, seam_error *e);

#endif
