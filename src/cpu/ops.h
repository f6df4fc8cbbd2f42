// ops.h — the CPU backend's operations on one token's activations.
//
// The arithmetic mirrors llama.cpp's CPU path (see each function), so that
// seam's logits can be compared with llama.cpp's at a tight tolerance.
#ifndef SEAM_CPU_OPS_H
#define SEAM_CPU_OPS_H

#include <stdbool.h>
#include <stdint.h>

#include "model.h"
#include "quant.h"

// out (w->rows) = W (w->rows, w->cols) @ x (w->cols). x is quantised once to
// the weight type's activation format into `scratch`, which must hold
// cpu_matvec_scratch_bytes(w->cols) bytes; then each row is one seam_vec_dot.
// Bandwidth-bound: every weight byte is read once.
void cpu_matvec(const seam_tensor *w, const float *x, float *out, void *scratch);
uint64_t cpu_matvec_scratch_bytes(int64_t cols);

// out = x / rms(x) * weight, as ggml_rms_norm then ggml_mul: the sum of
// squares in double, the scale in float.
void cpu_rmsnorm(float *out, const float *x, const float *weight, int n, float eps);

// Rotates the first rope_dim dimensions of each of n_heads heads of vec
// (n_heads, head_dim) for position pos. Angles follow ggml's rope cache:
// theta starts at pos and is multiplied by base^(-2/rope_dim) per pair.
// NEOX pairs (i, i + rope_dim/2); normal pairs (2i, 2i+1).
void cpu_rope(float *vec, int n_heads, int head_dim, int rope_dim, int pos, float base, bool neox);

// One query head against the cached keys and values of its KV head:
//   out (head_dim) = softmax(q . K[0..n_pos) * scale) @ V[0..n_pos)
// K and V are f16 rows (n_pos, stride); att (n_pos) is scratch. As llama.cpp's
// attention without flash attention: q rounded to f16 for the dot, softmax in
// f32, the weights rounded to f16 before the weighted sum of V.
void cpu_attention_head(float *out, const float *q, const seam_f16 *k_cache, const seam_f16 *v_cache,
                        int n_pos, int head_dim, int64_t stride, float scale, float *att);

// SwiGLU: gate[i] = silu(gate[i]) * up[i].
void cpu_swiglu(float *gate, const float *up, int n);

// Softmax in place.
void cpu_softmax(float *x, int n);

#endif
