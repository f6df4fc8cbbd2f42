// matvec_avx512.c — the quantised dots with AVX-512 VL + VNNI (compiled with
// -mavx512f -mavx512bw -mavx512vl -mavx512vnni; reached only after a run-time
// feature check): the tiles of simd_x86.h with cores of VNNI instructions
// on 256-bit registers, whose 32 registers also hold a tile's six inputs
// next to a block's quants and scales. The other kernels are the AVX2 set's.
//
// Measured on a 2-core Zen 4 (bench/results): 23 GB/s per core in cache for
// Q4_K decode (AVX2: 19) and ~77-84 G multiply-adds/s per core in prefill
// tiles (AVX2: 57-66); decode on 2 threads reads 29 GB/s, 89% of the
// machine's read bandwidth.
#include <stddef.h>

#include "cpu/kernels.h"
#include "cpu/simd_x86.h"

// The K-type tiles' core (simd_x86.h, pairs true) with VNNI on 256-bit registers:
// dpbusd sums each run's byte products in fours straight into int32 lanes
// (|.| <= 4 * 63 * 128: an int16 holds it), two runs' lanes are packed into
// the two words of each lane, and one dpwssd applies both runs' scales and
// accumulates -- three multiplies per two runs where maddubs + dpwssd take
// four; the multiplies are the bound, as they share two pipes with the
// float steps.
static inline __attribute__((always_inline)) void k_core_vnni(int nb, const __m256i q[8], const __m256i s[8],
                                                              const int8_t *const a[], __m256i lanes[]) {
    const __m256i zero = _mm256_setzero_si256();
    for (int k = 0; k < 4; k++)
        for (int j = 0; j < nb; j++) {
            const __m256i p0 = _mm256_dpbusd_epi32(zero, q[2 * k], _mm256_loadu_si256((const __m256i *)(a[j] + 64 * k)));
            const __m256i p1 =
                _mm256_dpbusd_epi32(zero, q[2 * k + 1], _mm256_loadu_si256((const __m256i *)(a[j] + 64 * k + 32)));
            const __m256i both = _mm256_mask_blend_epi16(0xaaaa, p0, _mm256_slli_epi32(p1, 16));
            lanes[j] = _mm256_dpwssd_epi32(lanes[j], both, s[k]);
        }
}
KTILE_KERNEL(dot_q4_K, q4k_dots_tile, k_core_vnni, true, 6)
KTILE_KERNEL(dot_q6_K, q6k_dots_tile, k_core_vnni, true, 6)

// The 32-wide types' byte core: one dpbusd, straight into the lanes.
static inline __attribute__((always_inline)) __m256i i8_core_vnni(__m256i abs_q, __m256i s) {
    return _mm256_dpbusd_epi32(_mm256_setzero_si256(), abs_q, s);
}
WIDE32_KERNEL(dot_q4_0, unpack_q4_0, i8_core_vnni)
WIDE32_KERNEL(dot_q5_0, unpack_q5_0, i8_core_vnni)
WIDE32_KERNEL(dot_q8_0, unpack_q8_0, i8_core_vnni)

void cpu_kernels_fill_avx512(cpu_kernels *k) {
    k->name = "avx512";
    k->dot[GGML_TYPE_Q4_K] = dot_q4_K;
    k->dot[GGML_TYPE_Q6_K] = dot_q6_K;
    k->dot[GGML_TYPE_Q4_0] = dot_q4_0;
    k->dot[GGML_TYPE_Q5_0] = dot_q5_0;
    k->dot[GGML_TYPE_Q8_0] = dot_q8_0;
}
