// quant.h — block formats and the scalar reference arithmetic.
//
// Floor src/numeric/: numbers as GGUF stores them and llama.cpp computes
// them -- the 16-bit floats and block layouts (formats.h), llama.cpp's float
// orders (exact.h) and the scalar reference every fast kernel is checked
// against (here). Above format/.
//
// Every fast kernel in seam (AVX2 in src/cpu, CUDA in kernels/) is checked
// against the functions here. The dot products follow llama.cpp's reference
// arithmetic: the weight row stays quantised, the activation row is quantised
// once to the weight type's partner format (Q8_K for the K types, Q8_0 for
// the 32-wide types), integer products are summed exactly per sub-block and
// scaled in float.
//
// The block layouts themselves, and the per-block helpers shared with the
// CUDA kernels, are numeric/formats.h's.
#ifndef SEAM_QUANT_H
#define SEAM_QUANT_H

#include <stdbool.h>
#include <stdint.h>

#include "format/gguf.h"
#include "numeric/exact.h"
#include "numeric/formats.h"

#ifdef __cplusplus
extern "C" {
#endif

// ---------------------------------------------------------------------------
// Scalar reference.

// True for the weight types seam computes with (F32, F16, BF16, Q4_0, Q5_0,
// Q8_0, Q4_K, Q5_K, Q6_K).
bool seam_type_supported(uint32_t type);

// The activation format a weight type's dot product consumes:
// Q8_K for Q4_K/Q5_K/Q6_K, Q8_0 for Q4_0/Q5_0/Q8_0, F16 for F16, BF16 for
// BF16, F32 for F32 (as llama.cpp's vec_dot_type); GGML_TYPE_COUNT for a
// type seam does not support.
uint32_t seam_vec_dot_type(uint32_t weight_type);

// Dequantises n elements (a multiple of the type's block size) of src.
// Returns -1 for a type without a reference decoder.
int seam_dequantize_row(uint32_t type, const void *src, float *dst, int64_t n);
// The same values rounded to f16 (seam_f32_to_f16): the weights of the GPU
// prefill's cuBLAS path, whose kernel (seam_cuda_dequantize_f16) must equal
// this bit for bit. -1 as seam_dequantize_row.
int seam_dequantize_row_f16(uint32_t type, const void *src, seam_f16 *dst, int64_t n);

// Quantises n activations into the given format (one of the vec_dot types):
// dst must hold ggml_row_bytes(type, n) bytes. Q8_K and Q8_0 round as
// llama.cpp's reference quantisers do.
int seam_quantize_activation(uint32_t type, const float *x, void *dst, int64_t n);
void seam_quantize_row_q8_K(const float *x, block_q8_K *y, int64_t n);
void seam_quantize_row_q8_0(const float *x, block_q8_0 *y, int64_t n);

// Weight quantisers (the synthesiser): n a multiple of the block size.
// Returns -1 for a type it cannot produce.
int seam_quantize_weights(uint32_t type, const float *x, void *dst, int64_t n);

// Dot product of n weights (type) with n activations already quantised to
// seam_vec_dot_type(type), in the order of build o (only F32 and F16 rows
// differ between llama.cpp's builds; its quantised dots are one AVX2 code).
// NAN for a type seam does not support.
float seam_vec_dot(exact_order o, uint32_t type, const void *w, const void *act, int64_t n);

#ifdef __cplusplus
}
#endif
#endif
