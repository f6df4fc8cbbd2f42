// exact.h — the arithmetic whose float order seam copies from llama.cpp.
//
// seam's logits are compared with llama.cpp's at 1e-2 of their spread. Two
// engines that differ only in the last bit of a sum differ by far more than
// that now and then: the bit decides which side of an 8-bit quantisation step
// an activation falls, or of an f16 rounding in the KV cache, and the model
// amplifies the step. So where llama.cpp's x86 build computes in a particular
// order (vector lanes, fused multiply-adds, its own exp), seam computes in the
// same order, and the functions here say which llama.cpp code they follow.
//
// llama.cpp's x86 builds do not share one order: its vector code (vec.cpp,
// simd-mappings.h) runs as wide as the widest registers it is compiled for,
// 16 float lanes in an AVX-512 build (what pip's default native build
// compiles on a Zen 4) and 8 in an AVX2 one (a Zen 3's, or any build with
// AVX-512 off), and its AVX2 exp is another polynomial step than its
// AVX-512 one. Its quantised dots are the same AVX2 code in both. So every
// function here whose order differs takes the build it follows.
#ifndef SEAM_CPU_EXACT_H
#define SEAM_CPU_EXACT_H

#include <stddef.h>
#include <stdint.h>

#include "numeric/formats.h"

// The build whose order a function follows.
typedef enum { EXACT_ORDER_AVX2, EXACT_ORDER_AVX512, EXACT_ORDERS } exact_order;
extern const char *const exact_order_names[EXACT_ORDERS];  // "avx2", "avx512"
// Float lanes of the build's vector registers.
static inline int exact_lanes(exact_order o) { return o == EXACT_ORDER_AVX512 ? 16 : 8; }

// build_moe_ffn renormalises the chosen experts' weights by their sum,
// clamped from below to 2^-14 (cpu_moe_route and the CUDA router alike).
#define EXACT_MOE_MIN_WEIGHT_SUM 6.103515625e-5

// One lane of ggml_v_expf ("adapted from arm limited optimized routine"):
// within 1.5 ulp of exp, and not the libm's. Its constants, for the vector
// kernels too: n = round(x / ln 2) by adding and taking away ROUND, b = x -
// n ln 2 in two parts (LN2_HI, LN2_LO), a polynomial in b of C1..C5, and 2^n.
// The two builds differ in the last steps:
//   AVX-512: j = 1 + C1 b + (C2 + C3 b) b^2 + (C4 + C5 b) b^4, fused from
//            the inside out, then _mm512_scalef_ps(j, n);
//   AVX2:    j = C1 b + ..., k = 2^n built in the exponent bits, k + k j in
//            one fused step; |n| > 126 through two scale factors, and
//            |n| > 192 to 0 or infinity.
#define EXACT_EXPF_ROUND 0x1.8p23f
#define EXACT_EXPF_LOG2E 0x1.715476p+0f
#define EXACT_EXPF_LN2_HI 0x1.62e4p-1f
#define EXACT_EXPF_LN2_LO 0x1.7f7d1cp-20f
#define EXACT_EXPF_C1 0x1.ffffecp-1f
#define EXACT_EXPF_C2 0x1.fffdb6p-2f
#define EXACT_EXPF_C3 0x1.555e66p-3f
#define EXACT_EXPF_C4 0x1.573e2ep-5f
#define EXACT_EXPF_C5 0x1.0e4020p-7f
float exact_expf(exact_order o, float x);

// _mm512_reduce_add_ps as gcc implements it: halves, quarters, then pairs.
float exact_reduce16(const float a[16]);
// The AVX2 build's two sums of 8 lanes, both after halves (t_i = a_i +
// a_i+4): the softmax's (movehl, movehdup) gives (t0 + t2) + (t1 + t3), the
// dot products' GGML_F32x8_REDUCE (hadd twice) (t0 + t1) + (t2 + t3).
float exact_reduce8(const float a[8]);
float exact_reduce8_hadd(const float a[8]);

// ggml_vec_dot_f16: blocks of 4 x lanes elements in four accumulators of
// fused multiply-adds, folded as GGML_F32x16_REDUCE / GGML_F32x8_REDUCE do
// (0 += 2, 1 += 3, 0 += 1, then across the lanes: exact_reduce16 or
// exact_reduce8_hadd); what is left over (n % (4 x lanes)) is added in
// double. The products are of f16 values, converted exactly.
float exact_dot_f16(exact_order o, const seam_f16 *x, const seam_f16 *y, int n);

// ggml_vec_dot_f32: the same four accumulators; the leftovers are fused
// into the float sum one by one.
float exact_dot_f32(exact_order o, const float *x, const float *y, int n);

// ggml_soft_max of a row of n values of which [t0, t1) are visible and the
// rest masked (-inf): x[t0..t1) in, probabilities out. The exponentials come
// in chunks of the build's lanes counted from 0 (ggml_vec_soft_max_f32), each
// chunk summed as exact_reduce16 or exact_reduce8 and added in double; the
// last n % lanes use libm's expf. An attention row is llama.cpp's KV cache
// length, a multiple of 256: pass any multiple of 16 at or above t1.
void exact_softmax(exact_order o, float *x, int t0, int t1, int n);

// The weighted sum of an attention head's values, as llama.cpp's
// mul_mat(V^T, softmax) with an f16 V cache: for each output dimension d, an
// exact_dot_f16 over positions of V[.][d] and the weights rounded to f16
// (zero outside [t0, t1)). v f16, position t's row at v + (t % ring) *
// stride (a ring changes where a row lives, never the order of the sums);
// w (t1) f32 probabilities; scratch holds head_dim * 64 floats.
void exact_attention_values(exact_order o, float *out, const float *w, const seam_f16 *v, int t0, int t1,
                            int head_dim, int64_t stride, int ring, float *scratch);
// The same in runs of positions, so that several queries can take each run
// of V rows while it is in cache: _run adds positions [c0, c1) of the
// query's [t0, t1) to its lanes acc (head_dim * 64 floats; the run starting
// at t0 clears them first), _end sums the lanes into out.
void exact_attention_values_run(exact_order o, float *acc, const float *w, const seam_f16 *v, int c0, int c1, int t0,
                                int head_dim, int64_t stride, int ring);
void exact_attention_values_end(exact_order o, float *out, float *acc, int head_dim);

// The online softmax and sum of values of llama.cpp's CPU flash attention
// (ggml_compute_forward_flash_attn_ext_f16_one_chunk, the path every query
// takes over a quantised cache), after its scores: for t = t0..t1-1 in order,
// with M the running maximum (from -inf) and S the running sum (from 0):
//   s[t] > M: ms = expf(M_old - s[t]), M = s[t], VKQ *= ms, vs = 1
//   else:     ms = 1, vs = expf(s[t] - M)
//   VKQ += vs * V[t];  S = S * ms + vs (one fused multiply-add, as gcc
//   contracts the C++)
// then out = VKQ * (1 / S). expf is libm's. VKQ is f32 over a q8_0 V (each
// row dequantised first, q * d rounded, then fused into VKQ), and f16 over
// an f16 V (each step rounded to f16, as ggml_vec_mad_f16 and
// ggml_vec_scale_f16 store it). v's rows: position t's at v + (t % ring) *
// v_row bytes, the head's head_dim values of v_type. s holds the scaled
// scores, indexed by position. In runs, as the values above: _run takes
// positions [c0, c1) of [t0, t1) into state (flash_state_floats(head_dim):
// M, S, then VKQ; the run starting at t0 sets it up), _end writes out.
void exact_attention_flash_run(float *state, const float *s, const void *v, uint32_t v_type, size_t v_row, int ring,
                               int c0, int c1, int t0, int head_dim);
void exact_attention_flash_end(float *out, float *state, uint32_t v_type, int head_dim);
static inline int exact_flash_state_floats(int head_dim) { return 2 + head_dim + (head_dim + 1) / 2; }

// ggml_vec_swiglu_f32: gate[i] = silu(gate[i]) * up[i], silu from
// exact_expf in chunks of the build's lanes and from libm expf in the tail.
void exact_swiglu(exact_order o, float *gate, const float *up, int n);

#endif
