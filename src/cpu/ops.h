// ops.h — the CPU's kernels as operations on rows of activations.
//
// Floor src/cpu/: the CPU backend -- the SIMD kernels and their scalar
// twins (kernels.h), the thread pool (pool.h), these operations, the layer
// operations and buffers of the CPU's layers (backend.h), and the probes of
// its speed (speed.h, membw.h). Above model/.
//
// The arithmetic mirrors llama.cpp's CPU path (see each function), so that
// seam's logits can be compared with llama.cpp's at a tight tolerance.
#ifndef SEAM_CPU_OPS_H
#define SEAM_CPU_OPS_H

#include <stdbool.h>
#include <stdint.h>

#include "cpu/pool.h"
#include "model/model.h"
#include "numeric/quant.h"

// out (w->rows) = W (w->rows, w->cols) @ x (w->cols). x is quantised once to
// the weight type's activation format into `scratch`, which must hold
// cpu_matvec_scratch_bytes(w->cols) bytes; then each row is one dot product
// (the fastest kernel of cpu/kernels.h, bitwise seam_vec_dot), rows shared
// out over the pool's threads (NULL: the calling thread).
// Bandwidth-bound: every weight byte is read once, straight from the mapping.
void cpu_matvec(seam_pool *pool, const seam_tensor *w, const float *x, float *out, void *scratch);
uint64_t cpu_matvec_scratch_bytes(int64_t cols);

// x (cols) quantised into act (cpu_matvec_scratch_bytes(cols)) as the dot
// kernels take it (cpu/kernels.h): act_type's blocks, then the extras
// (Q8_K's sums of 32, Q8_0's scales as f32).
void cpu_quantize_input(uint32_t act_type, const float *x, void *act, int64_t cols);

// out[b] (w->rows) = W @ x[b] for b < n; x (n, ldx), out (n, ldo). Each input
// is quantised into scratch (n * cpu_matvec_scratch_bytes(w->cols)); each
// grab of weight rows then meets every input while it is in cache, so a batch
// reads the weights once. Every (row, input) dot is the matvec's own:
// cpu_matvec is n = 1.
void cpu_matmul(seam_pool *pool, const seam_tensor *w, const float *x, int64_t ldx, float *out, int64_t ldo, int n,
                void *scratch);

// x (n, ldx) quantised for a matmul (act_type: seam_vec_dot_type of its
// weights) as cpu_quantize_input leaves each input, input b at act + b *
// cpu_matvec_scratch_bytes(cols); the inputs shared out over the pool.
void cpu_quantize_inputs(seam_pool *pool, uint32_t act_type, const float *x, int64_t ldx, int n, int64_t cols,
                         void *act);

// One matrix of a job of several, against its own inputs, already quantised
// (cpu_quantize_inputs): out[b] (w->rows) = W @ input b for b < n.
typedef struct {
    const seam_tensor *w;
    const void *act;  // (n, act_stride)
    uint64_t act_stride;
    int n;
    float *out;  // (n, ldo)
    int64_t ldo;
} cpu_matmul_item;

// How a matmul's job shares its rows (cpu_matmul_items): a thread grabs
// cpu_matvec_grab(rows left in the job, rows left in the grab's matrix,
// cpu_matvec_min_rows(that matrix's row bytes), threads) rows at a time.
int64_t cpu_matvec_min_rows(uint64_t row_bytes);
int64_t cpu_matvec_grab(int64_t left, int64_t in_part, int64_t min_rows, int nth);

// Every item's rows as one pool job (an MoE layer's experts: one job for all
// of them, not one each); every (row, input) dot is the matvec's own.
void cpu_matmul_items(seam_pool *pool, int n_items, const cpu_matmul_item *items);

// Several matrices against the same inputs -- q, k and v; gate and up -- as
// one matmul: the inputs quantised once and one pool job over all their
// rows, so that a token starts and waits for one job, not one per matrix.
// Matrix i's outputs go to out[i] (n, ldo[i]). Matrices whose activation
// type or width differ (or more than 4) run one after another instead.
void cpu_matmul_parts(seam_pool *pool, int n_parts, const seam_tensor *const w[], const float *x, int64_t ldx,
                      float *const out[], const int64_t ldo[], int n, void *scratch);

// out = x / rms(x) * weight, as ggml_rms_norm then ggml_mul: the sum of
// squares in double, the scale in float.
void cpu_rmsnorm(float *out, const float *x, const float *weight, int n, float eps);
// cpu_rmsnorm of `rows` rows of n values, n apart, by the fastest kernel
// (several rows side by side); out may be x.
void cpu_rmsnorm_rows(float *out, const float *x, const float *weight, int rows, int n, float eps);

// RoPE. The angles of position pos follow ggml's rope cache: theta starts
// at pos and is multiplied by base^(-2/rope_dim) per pair; the angle used is
// freq_scale * theta (linear scaling). cpu_rope_angles writes cos and sin of
// each (rope_dim / 2 each), which every layer of the same base shares.
void cpu_rope_angles(float *cos_t, float *sin_t, int rope_dim, int pos, float base, float freq_scale);

// Rotates the first rope_dim dimensions of each of the n_heads heads of q
// and the n_kv_heads heads of k (heads of head_dim; k may be NULL with 0
// heads) by those angles: NEOX pairs (i, i + rope_dim/2), normal pairs
// (2i, 2i+1).
void cpu_rope_apply(float *q, int n_heads, float *k, int n_kv_heads, int head_dim, int rope_dim, const float *cos_t,
                    const float *sin_t, bool neox);

// One layer's KV cache as attention reads it (cpu/backend.h's cpu_kv_cache):
// KV head g's keys for position t at k + g * k_head + (t % ring) * k_row
// bytes (head_dim values of k_type: GGML_TYPE_F16 or GGML_TYPE_Q8_0), its
// values likewise. Either layout fits: a head's positions one after another
// (the engine's: k_row is one head's bytes), or a position's heads one after
// another (k_head is).
typedef struct {
    const uint8_t *k, *v;
    size_t k_row, v_row;    // bytes from a position to the next, within a head
    size_t k_head, v_head;  // bytes from a KV head to the next
    uint32_t k_type, v_type;
    int ring;  // positions the layer holds: a full layer's n_ctx, or a sliding layer's ring
} cpu_kv;

// The orthonormal Walsh-Hadamard transform of each block of `block` values
// (a power of two) of x (n, a multiple of block), in place, as ggml's
// fast transform (ggml_compute_forward_fwht): the block scaled by
// 1 / sqrtf(block) first, then butterflies (u + v, u - v) of distance 1, 2,
// 4, .. block / 2. Its own inverse. llama.cpp turns queries, keys and values
// with it before a quantised cache takes them (see model/layer.c).
void cpu_fwht(float *x, int64_t n, int block);

// x (n) into a cache row of type (f16, or q8_0 as llama.cpp's set_rows
// quantises it: the x86 quantize_row_q8_0).
void cpu_kv_store(uint32_t type, void *row, const float *x, int64_t n);

// One query head against the cached keys and values of its KV head (kv's
// k and v point at that head's values of position 0):
//   out (head_dim) = softmax(q . K[t0..t1) * scale) @ V[t0..t1)
// scratch holds scratch_floats >= cpu_attention_scratch_floats(t1, head_dim)
// floats. Two float orders, as llama.cpp's two attentions:
// - an f16 K and V: llama.cpp without flash attention (cpu/exact.h): q
//   rounded to f16 for the dot, softmax in f32, the weights rounded to f16
//   before the sum over V;
// - a q8_0 K or V: llama.cpp's flash attention (the only one it runs over a
//   quantised V cache), exact_attention_flash_run: q converted to K's dot
//   type (f16, or q8_0 blocks), each score K's dot times scale, then an
//   online softmax over the positions in order.
void cpu_attention_head(float *out, const float *q, const cpu_kv *kv, int t0, int t1, int head_dim, float scale,
                        float *scratch, size_t scratch_floats);

// Every query head of n positions (decode: n = 1): head h of query i (q + i
// * q_stride, heads of head_dim floats) attends, as cpu_attention_head and
// bitwise so, over positions [t0[i], t1[i]) of KV head h / (n_heads /
// n_kv_heads) of the layer's cache kv; the heads of its output go to out + i
// * out_stride. The queries of one KV head (its query heads, the positions'
// tokens) go in groups over the pool, each group reading the head's rows
// once for all its queries. scratch holds scratch_floats >=
// cpu_attention_scratch_floats(max t1, head_dim) floats for each thread.
void cpu_attention(seam_pool *pool, int n, float *out, int64_t out_stride, const float *q, int64_t q_stride,
                   const cpu_kv *kv, int n_heads, int n_kv_heads, int head_dim, const int *t0, const int *t1,
                   float scale, float *scratch, size_t scratch_floats);
size_t cpu_attention_scratch_floats(int n_ctx, int head_dim);
// Queries one job of cpu_attention takes (on nth threads): a KV head's jobs
// each read its rows once, for up to this many of its queries.
int cpu_attention_per_job(int n, int n_heads, int n_kv_heads, int nth);

// dst[i] = seam_f32_to_f16(src[i]), bitwise, vectorised where the CPU can.
void cpu_to_f16(seam_f16 *dst, const float *src, int64_t n);

// SwiGLU: gate[i] = silu(gate[i]) * up[i].
void cpu_swiglu(float *gate, const float *up, int n);

// GEGLU: gate[i] = gelu(gate[i]) * up[i], GELU in its tanh form looked up in
// f16 as ggml does (the input rounded to f16, the result an f16 value).
void cpu_geglu(float *gate, const float *up, int n);

// x[i] *= s
void cpu_scale(float *x, float s, int n);

// The indices of the k largest of x (n), largest first; ties go to the lower
// index.
void cpu_top_k(const float *x, int n, int k, int *out);

// Softmax in place.
void cpu_softmax(float *x, int n);

// An MoE router's choice, as llama.cpp's build_moe_ffn with softmax gating:
// router (n_expert) logits in, probabilities out; the top n_expert_used
// experts by rank, and their weights renormalised by their sum (clamped
// away from 0, EXACT_MOE_MIN_WEIGHT_SUM; the CUDA router alike).
void cpu_moe_route(const seam_config *c, float *router, int *chosen, float *weight);

#endif
