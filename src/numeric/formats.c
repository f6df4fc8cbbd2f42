// formats.c — f32 to f16 and bf16, rounding to nearest even as ggml does.
#include "numeric/formats.h"

#include <string.h>

// m >> s, rounded to nearest with ties to even (1 <= s <= 24).
static uint32_t shift_rne(uint32_t m, int s) {
    uint32_t q = m >> s, rem = m & ((1u << s) - 1), half = 1u << (s - 1);
    return q + (rem > half || (rem == half && (q & 1)));
}

seam_f16 seam_f32_to_f16(float f) {
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    uint16_t sign = (uint16_t)((u >> 16) & 0x8000);
    u &= 0x7fffffff;
    if (u > 0x7f800000) return sign | 0x7e00;  // nan -> the quiet nan ggml makes
    if (u >= 0x38800000) {                     // >= 2^-14: a normal half, or inf
        // Rebias the exponent (127 -> 15) and round away 13 mantissa bits; a
        // carry out of the mantissa correctly bumps the exponent.
        uint32_t h = shift_rne(u - 0x38000000, 13);
        return sign | (uint16_t)(h >= 0x7c00 ? 0x7c00 : h);
    }
    if (u < 0x33000000) return sign;  // below 2^-25: rounds to zero
    // Subnormal half: count units of 2^-24. The float is (2^23 + mant) *
    // 2^(e - 150), so shift right by 126 - e.
    uint32_t e = u >> 23, m = (u & 0x7fffff) | 0x800000;
    return sign | (uint16_t)shift_rne(m, (int)(126 - e));
}

seam_bf16 seam_f32_to_bf16(float f) {
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    if ((u & 0x7fffffff) > 0x7f800000) return (seam_bf16)((u >> 16) | 64);  // nan: keep it quiet
    return (seam_bf16)((u + 0x7fff + ((u >> 16) & 1)) >> 16);
}
