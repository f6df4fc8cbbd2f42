// quant.c — block formats: decoders, the reference dot products, quantisers.
//
// Each block format has one unpack function, with its bit layout beside it,
// that turns a block into small integers and float scales. Dequantisation
// and the dot products are written once over that unpacked form, so a
// layout is decoded in exactly one place.
//
// The arithmetic is llama.cpp's reference arithmetic (ggml-quants.c:
// dequantize_row_*, quantize_row_q8_0_ref, quantize_row_q8_K_ref;
// ggml-cpu/quants.c: ggml_vec_dot_*_generic; ggml-cpu/vec.cpp: the scalar
// ggml_vec_dot_f32/f16/bf16). Dequantised values are bitwise those of
// llama.cpp and of the gguf Python package (tests/data/quant_oracle.bin).
// The quantised dot products follow llama.cpp's x86 kernels instead (see
// "Dot products" below), whose float order the comparisons depend on.
#include "numeric/quant.h"

#include "numeric/exact.h"

#include <math.h>
#include <string.h>

// d * q - m must round after the multiply, as the oracle and llama.cpp do; a
// fused multiply-add differs in the last bit. gcc in ISO C mode (-std=c11)
// never fuses; clang fuses within an expression unless told not to.
#if defined(__clang__)
#pragma STDC FP_CONTRACT OFF
#endif


// Round to nearest, ties to even, exactly as llama.cpp's nearest_int: adding
// 1.5 * 2^23 leaves the rounded integer in the low mantissa bits. |f| < 2^22.
static inline int nearest_int(float f) {
    float v = f + 12582912.f;
    int32_t i;
    memcpy(&i, &v, sizeof i);
    return (i & 0x007fffff) - 0x00400000;
}

// ---------------------------------------------------------------------------
// Types

static bool is_float(uint32_t type) {
    return type == GGML_TYPE_F32 || type == GGML_TYPE_F16 || type == GGML_TYPE_BF16;
}

static bool is_32wide(uint32_t type) {
    return type == GGML_TYPE_Q4_0 || type == GGML_TYPE_Q5_0 || type == GGML_TYPE_Q8_0;
}

static bool is_ktype(uint32_t type) {
    return type == GGML_TYPE_Q4_K || type == GGML_TYPE_Q5_K || type == GGML_TYPE_Q6_K;
}

bool seam_type_supported(uint32_t type) {
    return is_float(type) || is_32wide(type) || is_ktype(type);
}

uint32_t seam_vec_dot_type(uint32_t type) {
    if (is_ktype(type)) return GGML_TYPE_Q8_K;
    if (is_32wide(type)) return GGML_TYPE_Q8_0;
    if (is_float(type)) return type;
    return GGML_TYPE_COUNT;  // no such type: seam does not compute with it
}

// n is a whole number of blocks of a type seam has a layout for.
static bool whole_blocks(uint32_t type, int64_t n) {
    uint32_t be;
    return n >= 0 && ggml_type_layout(type, &be, NULL) && n % be == 0;
}

// ---------------------------------------------------------------------------
// Unpacking

// Element i of an F32, F16 or BF16 row, as float.
static float load_float(uint32_t type, const void *p, int64_t i) {
    switch (type) {
    case GGML_TYPE_F16: return seam_f16_to_f32(((const seam_f16 *)p)[i]);
    case GGML_TYPE_BF16: return seam_bf16_to_f32(((const seam_bf16 *)p)[i]);
    default: return ((const float *)p)[i];
    }
}

// Block b of a 32-wide row: fills q[32] and returns d, with w[j] = d * q[j].
//
// Q4_0, 18 bytes:  | d f16 | qs[16] |
//   qs[j] = weight j (low nibble) | weight j+16 (high nibble); q = nibble - 8
// Q5_0, 22 bytes:  | d f16 | qh[4] | qs[16] |
//   nibbles as Q4_0; bit j of qh (bit j%8 of byte j/8) is bit 4 of weight j;
//   q = 5-bit value - 16
// Q8_0, 34 bytes:  | d f16 | qs[32] int8 |      q = qs[j]
static float unpack_32(uint32_t type, const void *row, int64_t b, int8_t q[QK8_0]) {
    if (type == GGML_TYPE_Q8_0) {
        const block_q8_0 *x = (const block_q8_0 *)row + b;
        memcpy(q, x->qs, QK8_0);
        return seam_f16_to_f32(x->d);
    }
    const uint8_t *qs, *qh = NULL;
    seam_f16 d;
    if (type == GGML_TYPE_Q4_0) {
        const block_q4_0 *x = (const block_q4_0 *)row + b;
        qs = x->qs, d = x->d;
    } else {
        const block_q5_0 *x = (const block_q5_0 *)row + b;
        qs = x->qs, qh = x->qh, d = x->d;
    }
    int offset = qh ? 16 : 8;
    for (int j = 0; j < QK8_0; j++) {
        int v = j < 16 ? qs[j] & 15 : qs[j - 16] >> 4;
        if (qh) v |= ((qh[j >> 3] >> (j & 7)) & 1) << 4;
        q[j] = (int8_t)(v - offset);
    }
    return seam_f16_to_f32(d);
}

// A K-type super-block, unpacked: the weights of sub-block s are
// w = d * sc[s] * q - dmin * m[s]. Q4_K and Q5_K have 8 sub-blocks of 32;
// Q6_K has 16 sub-blocks of 16 and no mins (dmin = 0, m = 0).
typedef struct {
    float d, dmin;
    int n_sub;
    int sc[16], m[16];
    int8_t q[QK_K];
} kblock;

// Q4_K, 144 bytes:  | d f16 | dmin f16 | scales[12] | qs[128] |
//   scales, 6-bit (sc, m) per sub-block s (seam_q4k_scale_min):
//     bytes 0..3    [sc4..7 bits 4-5 | sc0..3]
//     bytes 4..7    [ m4..7 bits 4-5 |  m0..3]
//     bytes 8..11   [ m4..7 bits 0-3 | sc4..7 bits 0-3]
//   qs: four chunks of 32 bytes; chunk c holds sub-block 2c in the LOW
//   nibbles and sub-block 2c+1 in the HIGH nibbles, each with its own
//   scale and min.
// Q5_K, 176 bytes:  | d f16 | dmin f16 | scales[12] | qh[32] | qs[128] |
//   as Q4_K, plus bit s of qh[l] as bit 4 of weight l of sub-block s.
static void unpack_k4(seam_f16 d, seam_f16 dmin, const uint8_t *scales, const uint8_t *qh,
                      const uint8_t *qs, kblock *kb) {
    kb->d = seam_f16_to_f32(d);
    kb->dmin = seam_f16_to_f32(dmin);
    kb->n_sub = 8;
    for (int s = 0; s < 8; s++) {
        uint8_t sc, m;
        seam_q4k_scale_min(scales, s, &sc, &m);
        kb->sc[s] = sc;
        kb->m[s] = m;
        const uint8_t *chunk = qs + 32 * (s / 2);
        int shift = 4 * (s & 1);
        for (int l = 0; l < 32; l++) {
            int v = (chunk[l] >> shift) & 15;
            if (qh) v |= ((qh[l] >> s) & 1) << 4;
            kb->q[32 * s + l] = (int8_t)v;
        }
    }
}

// Q6_K, 210 bytes:  | ql[128] | qh[64] | scales[16] int8 | d f16 |
//   two halves of 128 weights, each with 64 bytes of ql and 32 of qh;
//   in a half, for l < 32 (the low 4 bits | the high 2 bits << 4):
//     weight l      = ql[l]    low nibble  | qh[l] bits 0-1
//     weight l + 32 = ql[l+32] low nibble  | qh[l] bits 2-3
//     weight l + 64 = ql[l]    high nibble | qh[l] bits 4-5
//     weight l + 96 = ql[l+32] high nibble | qh[l] bits 6-7
//   q = that - 32; sub-block s (weights 16s..16s+15) has scale scales[s].
static void unpack_q6_K(const block_q6_K *x, kblock *kb) {
    kb->d = seam_f16_to_f32(x->d);
    kb->dmin = 0;
    kb->n_sub = 16;
    for (int s = 0; s < 16; s++) {
        kb->sc[s] = x->scales[s];
        kb->m[s] = 0;
    }
    for (int h = 0; h < 2; h++) {
        const uint8_t *ql = x->ql + 64 * h, *qh = x->qh + 32 * h;
        int8_t *q = kb->q + 128 * h;
        for (int l = 0; l < 32; l++) {
            q[l] = (int8_t)(((ql[l] & 15) | ((qh[l] & 3) << 4)) - 32);
            q[l + 32] = (int8_t)(((ql[l + 32] & 15) | (((qh[l] >> 2) & 3) << 4)) - 32);
            q[l + 64] = (int8_t)(((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32);
            q[l + 96] = (int8_t)(((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32);
        }
    }
}

// Block b of a K-type row.
static void unpack_k(uint32_t type, const void *row, int64_t b, kblock *kb) {
    if (type == GGML_TYPE_Q4_K) {
        const block_q4_K *x = (const block_q4_K *)row + b;
        unpack_k4(x->d, x->dmin, x->scales, NULL, x->qs, kb);
    } else if (type == GGML_TYPE_Q5_K) {
        const block_q5_K *x = (const block_q5_K *)row + b;
        unpack_k4(x->d, x->dmin, x->scales, x->qh, x->qs, kb);
    } else {
        unpack_q6_K((const block_q6_K *)row + b, kb);
    }
}

// ---------------------------------------------------------------------------
// Dequantisation

int seam_dequantize_row(uint32_t type, const void *src, float *dst, int64_t n) {
    if (!whole_blocks(type, n)) return -1;
    if (is_float(type)) {
        for (int64_t i = 0; i < n; i++) dst[i] = load_float(type, src, i);
    } else if (is_32wide(type)) {
        for (int64_t b = 0; b < n / QK8_0; b++) {
            int8_t q[QK8_0];
            float d = unpack_32(type, src, b, q);
            for (int j = 0; j < QK8_0; j++) dst[b * QK8_0 + j] = d * q[j];
        }
    } else if (is_ktype(type)) {
        for (int64_t b = 0; b < n / QK_K; b++) {
            kblock kb;
            unpack_k(type, src, b, &kb);
            int width = QK_K / kb.n_sub;
            float *y = dst + b * QK_K;
            for (int s = 0; s < kb.n_sub; s++) {
                float ds = kb.d * kb.sc[s], dm = kb.dmin * kb.m[s];
                for (int l = 0; l < width; l++) y[s * width + l] = ds * kb.q[s * width + l] - dm;
            }
        }
    } else if (type == GGML_TYPE_Q8_K) {
        // Q8_K, 292 bytes:  | d f32 | qs[256] int8 | bsums[16] int16 |   w = d * q
        const block_q8_K *x = src;
        for (int64_t b = 0; b < n / QK_K; b++) {
            for (int j = 0; j < QK_K; j++) dst[b * QK_K + j] = x[b].d * x[b].qs[j];
        }
    } else {
        return -1;
    }
    return 0;
}

int seam_dequantize_row_f16(uint32_t type, const void *src, seam_f16 *dst, int64_t n) {
    uint32_t be, bb;
    if (!whole_blocks(type, n) || !ggml_type_layout(type, &be, &bb) || be > QK_K) return -1;
    float y[QK_K];  // one block at a time: the largest holds QK_K weights
    for (int64_t b = 0; b < n / be; b++) {
        if (seam_dequantize_row(type, (const uint8_t *)src + b * bb, y, be)) return -1;
        for (uint32_t i = 0; i < be; i++) dst[b * be + i] = seam_f32_to_f16(y[i]);
    }
    return 0;
}

// ---------------------------------------------------------------------------
// Dot products
//
// The quantised dots follow the float arithmetic of llama.cpp's x86 kernels
// (ggml-cpu/arch/x86/quants.c, the AVX2 paths every x86 build runs), so that
// seam's logits equal llama.cpp's bit for bit wherever the inputs do: a
// last-bit difference in one dot can push an activation across an 8-bit
// quantisation step downstream and grow into a visible change of the logits.
//
// Those kernels sum each block's integer products exactly into 8 lanes --
// weight w of a block lands in lane (w % 32) / 4, four neighbours a lane --
// then fold each lane into its own float accumulator with one fused
// multiply-add per block, and add the 8 accumulators pairwise at the end.

// _mm256 horizontal sum as hsum_float_8: halves, then pairs, then the last two.
static float hsum8(const float a[8]) {
    float r[4];
    for (int i = 0; i < 4; i++) r[i] = a[i + 4] + a[i];
    return (r[0] + r[2]) + (r[1] + r[3]);
}

static float dot_32wide(uint32_t type, const void *w, const block_q8_0 *a, int64_t n) {
    float acc[8] = {0};
    for (int64_t b = 0; b < n / QK8_0; b++) {
        int8_t q[QK8_0];
        const float d = unpack_32(type, w, b, q) * seam_f16_to_f32(a[b].d);
        for (int l = 0; l < 8; l++) {
            int lane = 0;
            for (int t = 4 * l; t < 4 * l + 4; t++) lane += q[t] * a[b].qs[t];
            acc[l] = fmaf(d, (float)lane, acc[l]);
        }
    }
    return hsum8(acc);
}

// The mins' term of a Q4_K/Q5_K block: four lanes, lane k holding sub-blocks
// 2k and 2k+1 (m times the sum of the sub-block's activation quants).
static void k4_min_lanes(const kblock *kb, const block_q8_K *a, int lanes[4]) {
    for (int k = 0; k < 4; k++) {
        lanes[k] = 0;
        for (int s = 2 * k; s < 2 * k + 2; s++) lanes[k] += kb->m[s] * (a->bsums[2 * s] + a->bsums[2 * s + 1]);
    }
}

static float dot_ktype(uint32_t type, const void *w, const block_q8_K *a, int64_t n) {
    float acc[8] = {0}, acc_m[4] = {0}, summs = 0;
    for (int64_t b = 0; b < n / QK_K; b++) {
        kblock kb;
        unpack_k(type, w, b, &kb);
        const float d = a[b].d * kb.d, dmin = -a[b].d * kb.dmin;
        const int width = QK_K / kb.n_sub;
        // Q6_K's lanes hold the unsigned quants (q + 32); the 32s come off
        // through the bsums, lane l taking sub-blocks 2l and 2l+1
        const int offset = type == GGML_TYPE_Q6_K ? 32 : 0;
        int lane[8] = {0};
        for (int i = 0; i < QK_K; i++) lane[(i % 32) / 4] += kb.sc[i / width] * (kb.q[i] + offset) * a[b].qs[i];
        for (int l = 0; l < 8 && offset; l++)
            lane[l] -= 32 * (kb.sc[2 * l] * a[b].bsums[2 * l] + kb.sc[2 * l + 1] * a[b].bsums[2 * l + 1]);
        for (int l = 0; l < 8; l++) acc[l] = fmaf(d, (float)lane[l], acc[l]);
        if (type == GGML_TYPE_Q6_K) continue;
        int mins[4];
        k4_min_lanes(&kb, &a[b], mins);
        if (type == GGML_TYPE_Q4_K) {  // four float lanes, summed at the end
            for (int k = 0; k < 4; k++) acc_m[k] = fmaf(dmin, (float)mins[k], acc_m[k]);
        } else {  // Q5_K: one float, a product per block
            summs += dmin * (float)(mins[0] + mins[1] + mins[2] + mins[3]);
        }
    }
    return hsum8(acc) + ((acc_m[0] + acc_m[2]) + (acc_m[1] + acc_m[3])) + summs;
}

float seam_vec_dot(exact_order o, uint32_t type, const void *w, const void *act, int64_t n) {
    // ggml's vector dots of float rows (exact.h); BF16 keeps vec.cpp's scalar
    // path (float products summed in double), which neither x86 build runs
    if (type == GGML_TYPE_F32) return exact_dot_f32(o, w, act, (int)n);
    if (type == GGML_TYPE_F16) return exact_dot_f16(o, w, act, (int)n);
    if (type == GGML_TYPE_BF16) {
        double sum = 0;
        for (int64_t i = 0; i < n; i++) sum += (double)(load_float(type, w, i) * load_float(type, act, i));
        return (float)sum;
    }
    if (is_32wide(type)) return dot_32wide(type, w, act, n);
    if (is_ktype(type)) return dot_ktype(type, w, act, n);
    return NAN;  // no dot product for this type: check seam_type_supported first
}

// ---------------------------------------------------------------------------
// Activation quantisers (llama.cpp's reference rounding)

void seam_quantize_row_q8_0(const float *x, block_q8_0 *y, int64_t n) {
    // As llama.cpp's x86 quantize_row_q8_0 (its AVX path, which every x86
    // build runs, not the portable reference): the multiplier is 127/amax,
    // not 1/d, and products round half to even. Either choice flips a rounding
    // now and then, and one flipped step of an outlier-heavy row is visible
    // in the logits, so seam follows the build it is compared with.
    for (int64_t b = 0; b < n / QK8_0; b++, x += QK8_0) {
        float amax = 0;
        for (int j = 0; j < QK8_0; j++) amax = fabsf(x[j]) > amax ? fabsf(x[j]) : amax;
        const float d = amax / 127.f, id = amax != 0.0f ? 127.f / amax : 0.0f;
        y[b].d = seam_f32_to_f16(d);
        // Products round half to even. A subnormal amax makes id infinite and a
        // NaN or infinite input (a corrupt weight) makes the product NaN or
        // infinite; converting those to int8 is undefined, so the product is
        // clamped first (which changes no finite block's result).
        for (int j = 0; j < QK8_0; j++)
            y[b].qs[j] = (int8_t)nearbyintf(fmaxf(-127.0f, fminf(127.0f, x[j] * id)));
    }
}

void seam_quantize_row_q8_K(const float *x, block_q8_K *y, int64_t n) {
    for (int64_t b = 0; b < n / QK_K; b++, x += QK_K) {
        // The value of largest magnitude, with its sign, maps to -127.
        float amax = 0, max = 0;
        for (int j = 0; j < QK_K; j++) {
            if (fabsf(x[j]) > amax) amax = fabsf(x[j]), max = x[j];
        }
        memset(&y[b], 0, sizeof y[b]);  // llama.cpp leaves a zero block's bsums unset
        if (amax == 0) continue;
        float iscale = -127.f / max;
        for (int j = 0; j < QK_K; j++) {
            int v = nearest_int(iscale * x[j]);
            y[b].qs[j] = (int8_t)(v < 127 ? v : 127);
        }
        for (int g = 0; g < QK_K / 16; g++) {
            int sum = 0;
            for (int l = 0; l < 16; l++) sum += y[b].qs[16 * g + l];
            y[b].bsums[g] = (int16_t)sum;
        }
        y[b].d = 1 / iscale;
    }
}

// x as F32, F16 or BF16.
static void store_floats(uint32_t type, const float *x, void *dst, int64_t n) {
    if (type == GGML_TYPE_F32) {
        memcpy(dst, x, (size_t)n * sizeof(float));
    } else if (type == GGML_TYPE_F16) {
        for (int64_t i = 0; i < n; i++) ((seam_f16 *)dst)[i] = seam_f32_to_f16(x[i]);
    } else {
        for (int64_t i = 0; i < n; i++) ((seam_bf16 *)dst)[i] = seam_f32_to_bf16(x[i]);
    }
}

int seam_quantize_activation(uint32_t type, const float *x, void *dst, int64_t n) {
    if (!whole_blocks(type, n)) return -1;
    if (type == GGML_TYPE_Q8_K) {
        seam_quantize_row_q8_K(x, dst, n);
    } else if (type == GGML_TYPE_Q8_0) {
        seam_quantize_row_q8_0(x, dst, n);
    } else if (is_float(type)) {
        store_floats(type, x, dst, n);
    } else {
        return -1;
    }
    return 0;
}

// ---------------------------------------------------------------------------
// Weight quantisers (the synthesiser)
//
// Not llama.cpp's elaborate searches: each group of weights is fitted by
// least squares from a min/max start, the group scales are quantised, and
// every weight is then re-rounded against the scales the decoder will see.
// The fit and the re-rounding can only lower the squared error; quantising
// the scales is the one step that raises it.

// L[i] = x[i] * iscale + offset, rounded to the nearest level in [0, nmax].
// Clamping first keeps nearest_int in range (and maps nan to level 0).
// Comparisons, not fminf/fmaxf: those are library calls unless nan-free
// math is allowed, and this loop runs over every synthesised weight.
static void quantize_levels(const float *x, int n, float iscale, float offset, int nmax, uint8_t *L) {
    for (int i = 0; i < n; i++) {
        float v = x[i] * iscale + offset;
        v = v > 0 ? (v < nmax ? v : (float)nmax) : 0;
        L[i] = (uint8_t)nearest_int(v);
    }
}

// Best scale for x ~ scale * (L - nhalf), L in [0, 2 nhalf - 1], n <= 32.
// Starts, as llama.cpp does, from the grid that puts the value of largest
// magnitude on -nhalf (the end of the signed range with the extra level).
static float fit_symmetric(const float *x, int n, int nhalf) {
    float amax = 0, max = 0;
    for (int i = 0; i < n; i++) {
        if (fabsf(x[i]) > amax) amax = fabsf(x[i]), max = x[i];
    }
    if (amax == 0) return 0;
    float iscale = -nhalf / max;
    uint8_t L[32];
    quantize_levels(x, n, iscale, (float)nhalf, 2 * nhalf - 1, L);
    float sxl = 0, sll = 0;  // least squares with these levels
    for (int i = 0; i < n; i++) {
        int l = L[i] - nhalf;
        sxl += x[i] * l;
        sll += (float)(l * l);
    }
    return sll > 0 ? sxl / sll : 1 / iscale;
}

// Best (scale, m) for x ~ scale * L - m, L in [0, nmax], m >= 0 (the K
// formats subtract their mins), n <= 32. Starts from the [min(x, 0), max]
// grid, then solves the 2x2 least-squares problem for those levels.
static float fit_asymmetric(const float *x, int n, int nmax, float *m) {
    float lo = x[0], hi = x[0];
    for (int i = 1; i < n; i++) lo = x[i] < lo ? x[i] : lo, hi = x[i] > hi ? x[i] : hi;
    if (lo > 0) lo = 0;
    if (hi == lo) {  // all equal and <= 0: the min alone says it
        *m = -lo;
        return 0;
    }
    float iscale = nmax / (hi - lo), scale = 1 / iscale, min = lo;
    uint8_t L[32];
    quantize_levels(x, n, iscale, -lo * iscale, nmax, L);
    float sl = 0, sll = 0, sx = 0, sxl = 0;
    for (int i = 0; i < n; i++) {
        sl += L[i];
        sll += (float)(L[i] * L[i]);
        sx += x[i];
        sxl += x[i] * L[i];
    }
    float det = n * sll - sl * sl;
    if (det > 0) {
        float s = (n * sxl - sx * sl) / det, c = (sll * sx - sl * sxl) / det;
        if (c > 0) c = 0, s = sxl / sll;  // the offset may only subtract
        if (s > 0) scale = s, min = c;
    }
    *m = -min;
    return scale;
}

// Q4_0 / Q5_0: one symmetric fit per block of 32.
static void quantize_32(uint32_t type, const float *x, void *dst, int64_t n) {
    int nhalf = type == GGML_TYPE_Q4_0 ? 8 : 16;
    for (int64_t b = 0; b < n / QK8_0; b++, x += QK8_0) {
        seam_f16 d = seam_f32_to_f16(fit_symmetric(x, QK8_0, nhalf));
        float dq = seam_f16_to_f32(d);
        uint8_t L[QK8_0], qs[QK8_0 / 2], qh[4] = {0};
        quantize_levels(x, QK8_0, dq ? 1 / dq : 0, (float)nhalf, 2 * nhalf - 1, L);
        for (int j = 0; j < 16; j++) qs[j] = (uint8_t)((L[j] & 15) | (L[j + 16] & 15) << 4);
        for (int j = 0; j < QK8_0; j++) qh[j >> 3] |= (uint8_t)((L[j] >> 4) << (j & 7));
        if (type == GGML_TYPE_Q4_0) {
            block_q4_0 *y = (block_q4_0 *)dst + b;
            y->d = d;
            memcpy(y->qs, qs, sizeof qs);
        } else {
            block_q5_0 *y = (block_q5_0 *)dst + b;
            y->d = d;
            memcpy(y->qh, qh, sizeof qh);
            memcpy(y->qs, qs, sizeof qs);
        }
    }
}

// Q4_K / Q5_K (nmax 15 / 31): an asymmetric fit per sub-block of 32; the
// eight scales and eight mins are quantised to 6 bits against d and dmin,
// packed as unpack_k4 reads them, and the levels L[256] re-rounded.
static void fit_k4_block(const float *x, int nmax, seam_f16 *d, seam_f16 *dmin, uint8_t scales[12],
                         uint8_t L[QK_K]) {
    float scale[8], min[8], max_scale = 0, max_min = 0;
    for (int s = 0; s < 8; s++) {
        scale[s] = fit_asymmetric(x + 32 * s, 32, nmax, &min[s]);
        max_scale = scale[s] > max_scale ? scale[s] : max_scale;
        max_min = min[s] > max_min ? min[s] : max_min;
    }
    float is = max_scale > 0 ? 63 / max_scale : 0, im = max_min > 0 ? 63 / max_min : 0;
    memset(scales, 0, 12);
    for (int s = 0; s < 8; s++) {
        int ls = nearest_int(scale[s] * is), lm = nearest_int(min[s] * im);  // <= 63: max * 63 / max
        if (s < 4) {
            scales[s] = (uint8_t)ls;
            scales[s + 4] = (uint8_t)lm;
        } else {
            scales[s + 4] = (uint8_t)((ls & 15) | (lm & 15) << 4);
            scales[s - 4] |= (uint8_t)((ls >> 4) << 6);
            scales[s] |= (uint8_t)((lm >> 4) << 6);
        }
    }
    *d = seam_f32_to_f16(max_scale / 63);
    *dmin = seam_f32_to_f16(max_min / 63);
    float dq = seam_f16_to_f32(*d), mq = seam_f16_to_f32(*dmin);
    for (int s = 0; s < 8; s++) {
        uint8_t sc, m;
        seam_q4k_scale_min(scales, s, &sc, &m);
        float ds = dq * sc, dm = mq * m;
        quantize_levels(x + 32 * s, 32, ds ? 1 / ds : 0, ds ? dm / ds : 0, nmax, L + 32 * s);
    }
}

// Packs Q4_K/Q5_K levels: nibbles by chunk, and for Q5_K (qh not NULL) the
// fifth bits.
static void pack_k4(const uint8_t L[QK_K], uint8_t *qs, uint8_t *qh) {
    for (int c = 0; c < 4; c++) {
        for (int l = 0; l < 32; l++) qs[32 * c + l] = (uint8_t)((L[64 * c + l] & 15) | (L[64 * c + 32 + l] & 15) << 4);
    }
    if (!qh) return;
    memset(qh, 0, QK_K / 8);
    for (int s = 0; s < 8; s++) {
        for (int l = 0; l < 32; l++) qh[l] |= (uint8_t)((L[32 * s + l] >> 4) << s);
    }
}

// Q6_K: a symmetric fit per sub-block of 16; the sixteen scales become int8
// against d, the largest in magnitude mapping to -128 (as llama.cpp does).
static void quantize_q6_K_block(const float *x, block_q6_K *y) {
    float scale[16], amax = 0, max = 0;
    for (int s = 0; s < 16; s++) {
        scale[s] = fit_symmetric(x + 16 * s, 16, 32);
        if (fabsf(scale[s]) > amax) amax = fabsf(scale[s]), max = scale[s];
    }
    float iscale = amax > 0 ? -128 / max : 0;
    for (int s = 0; s < 16; s++) {
        int v = nearest_int(iscale * scale[s]);
        y->scales[s] = (int8_t)(v < 127 ? v : 127);
    }
    y->d = seam_f32_to_f16(amax > 0 ? 1 / iscale : 0);
    float dq = seam_f16_to_f32(y->d);
    uint8_t L[QK_K];
    for (int s = 0; s < 16; s++) {
        float ds = dq * y->scales[s];
        quantize_levels(x + 16 * s, 16, ds ? 1 / ds : 0, 32, 63, L + 16 * s);
    }
    for (int h = 0; h < 2; h++) {  // the inverse of unpack_q6_K
        const uint8_t *Lh = L + 128 * h;
        uint8_t *ql = y->ql + 64 * h, *qh = y->qh + 32 * h;
        for (int l = 0; l < 32; l++) {
            ql[l] = (uint8_t)((Lh[l] & 15) | (Lh[l + 64] & 15) << 4);
            ql[l + 32] = (uint8_t)((Lh[l + 32] & 15) | (Lh[l + 96] & 15) << 4);
            qh[l] = (uint8_t)((Lh[l] >> 4) | (Lh[l + 32] >> 4) << 2 | (Lh[l + 64] >> 4) << 4 | (Lh[l + 96] >> 4) << 6);
        }
    }
}

int seam_quantize_weights(uint32_t type, const float *x, void *dst, int64_t n) {
    if (!whole_blocks(type, n)) return -1;
    switch (type) {
    case GGML_TYPE_F32: case GGML_TYPE_F16: case GGML_TYPE_BF16:
        store_floats(type, x, dst, n);
        return 0;
    case GGML_TYPE_Q8_0:
        seam_quantize_row_q8_0(x, dst, n);
        return 0;
    case GGML_TYPE_Q4_0: case GGML_TYPE_Q5_0:
        quantize_32(type, x, dst, n);
        return 0;
    case GGML_TYPE_Q4_K:
        for (int64_t b = 0; b < n / QK_K; b++) {
            block_q4_K *y = (block_q4_K *)dst + b;
            uint8_t L[QK_K];
            fit_k4_block(x + b * QK_K, 15, &y->d, &y->dmin, y->scales, L);
            pack_k4(L, y->qs, NULL);
        }
        return 0;
    case GGML_TYPE_Q5_K:
        for (int64_t b = 0; b < n / QK_K; b++) {
            block_q5_K *y = (block_q5_K *)dst + b;
            uint8_t L[QK_K];
            fit_k4_block(x + b * QK_K, 31, &y->d, &y->dmin, y->scales, L);
            pack_k4(L, y->qs, y->qh);
        }
        return 0;
    case GGML_TYPE_Q6_K:
        for (int64_t b = 0; b < n / QK_K; b++) quantize_q6_K_block(x + b * QK_K, (block_q6_K *)dst + b);
        return 0;
    default:
        return -1;
    }
}
