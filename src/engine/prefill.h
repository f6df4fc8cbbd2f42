// prefill.h — a prompt's batch through the layers at once (prefill.c), and
// the pieces of the forward pass that decode (engine.c) and prefill share.
#ifndef SEAM_PREFILL_H
#define SEAM_PREFILL_H

#include "cpu/ops.h"
#include "engine/engine.h"

// Runs a batch of n (2..SEAM_UBATCH) prompt tokens at positions pos0..
// through every layer, filling the KV caches: the GPU layers as matrix
// products (gpu_segment_prefill) when the engine has them, the rest on the
// CPU. On the last batch of a prompt it leaves the last token's hidden
// state in eng->s.x and points *logits at its logits.
int prefill_batch(seam_engine *eng, const int *tokens, int n, int pos0, bool last, float **logits, seam_error *e);

// The buffers of a prompt's batch of SEAM_UBATCH tokens, which an engine
// keeps (engine_init makes them): new, free, and their bytes.
struct prefill_batch *prefill_batch_new(const seam_config *c, seam_error *e);
void prefill_batch_free(struct prefill_batch *b);
uint64_t prefill_batch_bytes(const seam_config *c);

// Shared with engine.c:
// x (n_embd) = the token's embedding row, dequantised and scaled.
void engine_embed(seam_engine *eng, int token, float *x);
// RoPE's angles at position pos, computed once for all layers: angles
// (4 * rope_dim / 2) holds cos then sin for the global layers' base and
// scale, then for the sliding layers' (gemma3).
void engine_rope_angles(const seam_config *c, int pos, float *angles);
// q, k, v of layer il just projected, made ready at position pos: biases
// (qwen2), per-head norms (qwen3, gemma3), RoPE by those angles, q's scale;
// k and v then join the KV cache.
void engine_qkv_ready(seam_engine *eng, const seam_layer_weights *l, int il, int pos, const float *angles, float *q,
                      float *k, float *v);
// The attention's output of one token (n_heads * head_dim) turned back
// where the values were turned on their way into the cache.
void engine_attention_out(const seam_engine *eng, float *out);
// Layer il's KV cache as cpu_attention reads it.
cpu_kv engine_kv_layer(const seam_engine *eng, int il);
// router (n_expert) logits in, probabilities out; the top k experts by rank
// and their renormalised weights.
void engine_route(const seam_config *c, float *router, int *chosen, float *weight);
// The output norm and head on eng->s.x, into eng->s.logits.
void engine_head(seam_engine *eng);

#endif
