// formats.h — the number formats of GGUF files and caches, bit by bit: the
// 16-bit floats (f16, bf16) and their conversions, and the quantised block
// layouts. The reference arithmetic (quant.h), llama.cpp's float orders
// (exact.h) and the CUDA kernels all read them from here. The small
// per-block helpers marked SEAM_HD are shared with the CUDA kernels, so both
// sides decode a block with the same code.
#ifndef SEAM_FORMATS_H
#define SEAM_FORMATS_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(__CUDACC__)
#define SEAM_HD __host__ __device__ static inline
#else
#define SEAM_HD static inline
#endif

typedef uint16_t seam_f16;   // IEEE 754 half, as bits
typedef uint16_t seam_bf16;  // bfloat16, as bits

SEAM_HD float seam_f16_to_f32(seam_f16 h) {
    uint32_t sign = (uint32_t)(h & 0x8000) << 16;
    uint32_t exp = (h >> 10) & 0x1f;
    uint32_t mant = h & 0x3ff;
    uint32_t bits;
    if (exp == 0x1f) {
        bits = sign | 0x7f800000u | (mant << 13);  // inf, nan
    } else if (exp != 0) {
        bits = sign | ((exp + 112) << 23) | (mant << 13);
    } else if (mant == 0) {
        bits = sign;  // zero
    } else {          // subnormal: renormalise
        int e = -1;
        do { mant <<= 1; e++; } while (!(mant & 0x400));
        bits = sign | ((uint32_t)(112 - e) << 23) | ((mant & 0x3ff) << 13);
    }
    union { uint32_t u; float f; } v = {bits};
    return v.f;
}

SEAM_HD float seam_bf16_to_f32(seam_bf16 h) {
    union { uint32_t u; float f; } v = {(uint32_t)h << 16};
    return v.f;
}

// Round-to-nearest-even f32 -> f16 and f32 -> bf16.
seam_f16 seam_f32_to_f16(float f);
seam_bf16 seam_f32_to_bf16(float f);

#define QK_K 256  // weights per super-block of the K types
#define QK8_0 32  // weights per block of the 32-wide types


// Q4_0: 32 weights, 18 bytes. w = d * (q - 8); qs[j] holds weight j in its
// low nibble and weight j+16 in its high nibble.
typedef struct {
    seam_f16 d;
    uint8_t qs[QK8_0 / 2];
} block_q4_0;

// Q5_0: 32 weights, 22 bytes. w = d * (q - 16), q = nibble | (fifth bit << 4);
// bit j of qh (u32, little-endian) is the fifth bit of weight j.
typedef struct {
    seam_f16 d;
    uint8_t qh[4];
    uint8_t qs[QK8_0 / 2];
} block_q5_0;

// Q8_0: 32 weights, 34 bytes. w = d * q.
typedef struct {
    seam_f16 d;
    int8_t qs[QK8_0];
} block_q8_0;

// Q4_K: 256 weights, 144 bytes, eight sub-blocks of 32.
//   w = d * sc[s] * q - dmin * m[s]
//   scales[12] packs eight 6-bit scales sc[] and eight 6-bit mins m[]:
//     s < 4:  sc = scales[s] & 63,            m = scales[s+4] & 63
//     s >= 4: sc = (scales[s+4] & 15) | ((scales[s-4] >> 6) << 4)
//             m  = (scales[s+4] >> 4) | ((scales[s]   >> 6) << 4)
//   qs: 4 chunks of 32 bytes; chunk c holds sub-block 2c in the low nibbles
//   and sub-block 2c+1 in the high nibbles.
typedef struct {
    seam_f16 d;
    seam_f16 dmin;
    uint8_t scales[12];
    uint8_t qs[QK_K / 2];
} block_q4_K;

// Q5_K: as Q4_K plus a fifth bit per weight: bit (2c) of qh[l] is the fifth
// bit of sub-block 2c's weight l, bit (2c+1) that of sub-block 2c+1.
typedef struct {
    seam_f16 d;
    seam_f16 dmin;
    uint8_t scales[12];
    uint8_t qh[QK_K / 8];
    uint8_t qs[QK_K / 2];
} block_q5_K;

// Q6_K: 256 weights, 210 bytes, sixteen sub-blocks of 16. w = d * sc[s] * (q - 32).
//   Two halves of 128 weights; in half h (ql += 64h, qh += 32h), for l < 32:
//     q[l]      = (ql[l]    & 15) | (((qh[l] >> 0) & 3) << 4)
//     q[l + 32] = (ql[l+32] & 15) | (((qh[l] >> 2) & 3) << 4)
//     q[l + 64] = (ql[l]    >> 4) | (((qh[l] >> 4) & 3) << 4)
//     q[l + 96] = (ql[l+32] >> 4) | (((qh[l] >> 6) & 3) << 4)
typedef struct {
    uint8_t ql[QK_K / 2];
    uint8_t qh[QK_K / 4];
    int8_t scales[QK_K / 16];
    seam_f16 d;
} block_q6_K;

// Q8_K (activations only): 256 values, 292 bytes. x = d * q; bsums[j] is the
// sum of qs[16j .. 16j+15], which the K-type dots use to apply the mins.
typedef struct {
    float d;
    int8_t qs[QK_K];
    int16_t bsums[QK_K / 16];
} block_q8_K;

// ---------------------------------------------------------------------------
// Shared per-block helpers (C reference and CUDA kernels).

// Scale and min of sub-block s (0..7) of a Q4_K/Q5_K block (layout above).
SEAM_HD void seam_q4k_scale_min(const uint8_t *scales, int s, uint8_t *sc, uint8_t *m) {
    if (s < 4) {
        *sc = scales[s] & 63;
        *m = scales[s + 4] & 63;
    } else {
        *sc = (uint8_t)((scales[s + 4] & 15) | ((scales[s - 4] >> 6) << 4));
        *m = (uint8_t)((scales[s + 4] >> 4) | ((scales[s] >> 6) << 4));
    }
}

#ifdef __cplusplus
}
#endif

#endif
