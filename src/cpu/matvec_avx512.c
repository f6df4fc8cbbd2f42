// matvec_avx512.c — the K-type dot products with AVX-512 BW + VNNI
// (compiled with -mavx512f -mavx512bw -mavx512vl -mavx512vnni; reached only
// after a run-time feature check). The other types keep their AVX2 kernels.
//
// Why a second set: decode streams Q4_K and Q6_K weights at the memory
// bandwidth, and the AVX2 kernels, at ~13 (Q4_K) and ~17 (Q6_K) GB/s of
// weights per core in cache, are barely faster than a core's ~10 GB/s share
// of DRAM, so compute and memory stop overlapping. Here a 512-bit register
// holds both nibble halves of a 32-byte chunk (or both runs of a Q6_K pair)
// next to the 64 activations they multiply, VNNI's dpwssd applies the
// sub-block scales and accumulates in one instruction, and Q4_K goes two
// rows at a time (below). On the Xeon this was tuned on (2 cores, shared),
// that is ~15 and ~18-23 GB/s per core in cache: only 10-25% more, since the
// 512-bit multiplies issue on fewer ports. Decode on one thread gains ~7%;
// on both cores, where DRAM is the limit, the two sets are level.
//
#include <stddef.h>

#include "cpu/kernels.h"
#include "cpu/simd_x86.h"

// Scalar float steps must round as quant.c's do: no fusing (gcc's ISO mode
// never fuses; clang does within an expression unless told not to).
#if defined(__clang__)
#pragma STDC FP_CONTRACT OFF
#endif

// 16 int32 lanes -> the 8 of the reference's layout: lane l of each 256-bit
// half holds weights with (w % 32) / 4 == l, so the halves add lane by lane.
static inline __m256i fold_512(__m512i v) {
    return _mm256_add_epi32(_mm512_castsi512_si256(v), _mm512_extracti64x4_epi64(v, 1));
}

// A zmm of 32 words: eight of idx0, then eight each of idx1, idx2, idx3.
// As a permutexvar index it spreads four scales over four runs of 8 int16
// lanes (16 weights each); as a shift count, it shifts each run its own way.
static inline __m512i spread4(int idx0, int idx1, int idx2, int idx3) {
    return _mm512_inserti64x4(
        _mm512_castsi256_si512(_mm256_set_m128i(_mm_set1_epi16((short)idx1), _mm_set1_epi16((short)idx0))),
        _mm256_set_m128i(_mm_set1_epi16((short)idx3), _mm_set1_epi16((short)idx2)), 1);
}

// Q4_K: chunk c (32 bytes) is broadcast to both 256-bit halves and the upper
// half shifted right by 4, so one register holds sub-block 2c (low nibbles)
// then 2c+1 (high nibbles): the order of activations 64c..64c+63 in memory.
static inline __attribute__((always_inline)) void q4k_block(const void *wv, const block_q8_K *a, __m256i *lanes,
                                                            __m128i *min_lanes) {
    const block_q4_K *w = wv;
    const __m128i sm = q4k_scales_mins1(w->scales);
    *min_lanes = q4k_min_products(sm, a);
    const __m512i sc = _mm512_castsi256_si512(_mm256_cvtepu8_epi16(sm));  // words 0..7: sc0..sc7
    const __m512i low4 = _mm512_set1_epi8(15);
    const __m512i nibble_shift = spread4(0, 0, 4, 4);
    __m512i acc = _mm512_setzero_si512();
#pragma GCC unroll 4
    for (int c = 0; c < 4; c++) {
        const __m512i both = _mm512_broadcast_i64x4(_mm256_loadu_si256((const __m256i *)(w->qs + 32 * c)));
        const __m512i q = _mm512_and_si512(_mm512_srlv_epi16(both, nibble_shift), low4);
        const __m512i p = _mm512_maddubs_epi16(q, _mm512_loadu_si512(a->qs + 64 * c));  // |.| <= 2 * 15 * 128
        const __m512i s = _mm512_permutexvar_epi16(spread4(2 * c, 2 * c, 2 * c + 1, 2 * c + 1), sc);
        acc = _mm512_dpwssd_epi32(acc, p, s);
    }
    *lanes = fold_512(acc);
}

// Q6_K: per half, the 64 bytes of ql hold runs 0 and 1 in their low nibbles
// (weights 0..63 of the half) and runs 2 and 3 in their high nibbles
// (64..127); qh, broadcast to both 256-bit halves, is shifted per half so
// that each run's 2 bits land on bits 4-5. The -32 offset comes off through
// the bsums, as in the AVX2 kernel.
static inline __attribute__((always_inline)) void q6k_block(const void *wv, const block_q8_K *a, __m256i *lanes,
                                                            __m128i *min_lanes) {
    const block_q6_K *w = wv;
    const __m512i low4 = _mm512_set1_epi8(15), bits45 = _mm512_set1_epi8(0x30);
    const __m256i sc16 = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)w->scales));
    const __m256i offset = _mm256_madd_epi16(sc16, _mm256_loadu_si256((const __m256i *)a->bsums));
    __m512i acc = _mm512_zextsi256_si512(_mm256_sub_epi32(_mm256_setzero_si256(), _mm256_slli_epi32(offset, 5)));
    const __m512i sc = _mm512_castsi256_si512(sc16);
    const __m512i shl_01 = spread4(4, 4, 2, 2), shr_23 = spread4(0, 0, 2, 2);  // runs 0,1: <<4, <<2; 2,3: >>0, >>2
#pragma GCC unroll 2
    for (int h = 0; h < 2; h++) {
        const __m512i ql = _mm512_loadu_si512(w->ql + 64 * h);
        const __m512i qh = _mm512_broadcast_i64x4(_mm256_loadu_si256((const __m256i *)(w->qh + 32 * h)));
        const __m512i q01 =
            _mm512_or_si512(_mm512_and_si512(ql, low4), _mm512_and_si512(_mm512_sllv_epi16(qh, shl_01), bits45));
        const __m512i q23 = _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi16(ql, 4), low4),
                                            _mm512_and_si512(_mm512_srlv_epi16(qh, shr_23), bits45));
        const int8_t *a8 = a->qs + 128 * h;
        const __m512i p01 = _mm512_maddubs_epi16(q01, _mm512_loadu_si512(a8));  // |.| <= 2 * 63 * 128
        const __m512i p23 = _mm512_maddubs_epi16(q23, _mm512_loadu_si512(a8 + 64));
        const int s = 8 * h;  // sub-blocks of 16: p01 covers s..s+3, p23 s+4..s+7
        acc = _mm512_dpwssd_epi32(acc, p01, _mm512_permutexvar_epi16(spread4(s, s + 1, s + 2, s + 3), sc));
        acc = _mm512_dpwssd_epi32(acc, p23, _mm512_permutexvar_epi16(spread4(s + 4, s + 5, s + 6, s + 7), sc));
    }
    *lanes = fold_512(acc);
    *min_lanes = _mm_setzero_si128();
}

static inline __attribute__((always_inline)) float q4_K_row(const void *w, const void *a, int64_t n) {
    return k_dot(q4k_block, sizeof(block_q4_K), offsetof(block_q4_K, d), true, w, a, n);
}
static inline __attribute__((always_inline)) float q6_K_row(const void *w, const void *a, int64_t n) {
    return k_dot(q6k_block, sizeof(block_q6_K), offsetof(block_q6_K, d), false, w, a, n);
}
ROWS_KERNEL(dot_q6_K, q6_K_row)

// Q4_K, two rows at once: row A in the low 256 bits of every register, row B
// in the high ones, each 256-bit half a chunk's 32 bytes of nibbles against
// the same (broadcast) activations. Against one row per register this halves
// the per-block work around the products -- the scale unpacking, the mins,
// the activations' sub-block sums, the float steps -- which costs as much as
// the products themselves. Each half's lanes are its row's lanes of the
// reference layout, and the float steps run lane by lane as in k_dot.
static inline __attribute__((always_inline)) void q4k_block2(const block_q4_K *wa, const block_q4_K *wb,
                                                             const block_q8_K *a, __m512i *lanes, __m256i *min_lanes) {
    const __m256i zero = _mm256_setzero_si256();
    const __m256i sm = q4k_scales_mins(_mm256_loadu2_m128i((const __m128i *)wb->scales, (const __m128i *)wa->scales));
    *min_lanes = _mm256_madd_epi16(_mm256_unpackhi_epi8(sm, zero), _mm256_broadcastsi128_si256(q8k_sub_block_sums(a)));
    const __m512i sc = _mm512_castsi256_si512(_mm256_unpacklo_epi8(sm, zero));  // words 0-7: A's sc0..7; 8-15: B's
    const __m512i low4 = _mm512_set1_epi8(15);
    __m512i acc = _mm512_setzero_si512();
#pragma GCC unroll 4
    for (int c = 0; c < 4; c++) {
        const __m512i bits =
            _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_loadu_si256((const __m256i *)(wa->qs + 32 * c))),
                               _mm256_loadu_si256((const __m256i *)(wb->qs + 32 * c)), 1);
        const __m512i a_lo = _mm512_broadcast_i64x4(_mm256_loadu_si256((const __m256i *)(a->qs + 64 * c)));
        const __m512i a_hi = _mm512_broadcast_i64x4(_mm256_loadu_si256((const __m256i *)(a->qs + 64 * c + 32)));
        const __m512i p_lo = _mm512_maddubs_epi16(_mm512_and_si512(bits, low4), a_lo);
        const __m512i p_hi = _mm512_maddubs_epi16(_mm512_and_si512(_mm512_srli_epi16(bits, 4), low4), a_hi);
        acc = _mm512_dpwssd_epi32(acc, p_lo, _mm512_permutexvar_epi16(spread4(2 * c, 2 * c, 8 + 2 * c, 8 + 2 * c), sc));
        acc = _mm512_dpwssd_epi32(acc, p_hi,
                                  _mm512_permutexvar_epi16(spread4(2 * c + 1, 2 * c + 1, 9 + 2 * c, 9 + 2 * c), sc));
    }
    *lanes = acc;
}

// The permutation index of a zmm of floats: lanes 0-7 from lane i, 8-15 from j.
static inline __m512i spread_ps(int i, int j) {
    return _mm512_inserti64x4(_mm512_set1_epi32(i), _mm256_set1_epi32(j), 1);
}

static void dot_q4_K(uint32_t type, const void *w, size_t row_bytes, int64_t n_rows, const void *act, int64_t n,
                     float *out) {
    const uint8_t *base = w;
    const block_q8_K *a = act;
    const size_t used = (size_t)(n / QK_K) * sizeof(block_q4_K);
    prefetch_start(base, n_rows, row_bytes, used);
    int64_t r = 0;
    for (; r + 2 <= n_rows; r += 2) {
        prefetch_row(base, r, n_rows, row_bytes, used);
        prefetch_row(base, r + 1, n_rows, row_bytes, used);
        const block_q4_K *wa = (const block_q4_K *)(base + (size_t)r * row_bytes);
        const block_q4_K *wb = (const block_q4_K *)(base + (size_t)(r + 1) * row_bytes);
        __m512 acc = _mm512_setzero_ps();
        __m256 acc_m = _mm256_setzero_ps();
        for (int64_t b = 0; b < n / QK_K; b++) {
            __m512i lanes;
            __m256i min_lanes;
            q4k_block2(&wa[b], &wb[b], &a[b], &lanes, &min_lanes);
            // [da * dA, -da * dminA, da * dB, -da * dminB]: k_scales_dmin for both rows in one go
            uint32_t da_ma, db_mb;
            memcpy(&da_ma, &wa[b].d, sizeof da_ma);
            memcpy(&db_mb, &wb[b].d, sizeof db_mb);
            const __m128 sc = _mm_mul_ps(_mm_cvtph_ps(_mm_insert_epi32(_mm_cvtsi32_si128((int)da_ma), (int)db_mb, 1)),
                                         _mm_setr_ps(a[b].d, -a[b].d, a[b].d, -a[b].d));
            acc = _mm512_fmadd_ps(_mm512_permutexvar_ps(spread_ps(0, 2), _mm512_castps128_ps512(sc)),
                                  _mm512_cvtepi32_ps(lanes), acc);
            acc_m = _mm256_fmadd_ps(
                _mm256_permutevar8x32_ps(_mm256_castps128_ps256(sc), _mm256_setr_epi32(1, 1, 1, 1, 3, 3, 3, 3)),
                _mm256_cvtepi32_ps(min_lanes), acc_m);
        }
        out[r] = hsum8(_mm512_castps512_ps256(acc)) + hsum4(_mm256_castps256_ps128(acc_m));
        out[r + 1] = hsum8(_mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(acc), 1))) +
                     hsum4(_mm256_extractf128_ps(acc_m, 1));
    }
    for (; r < n_rows; r++) {
        prefetch_row(base, r, n_rows, row_bytes, used);
        out[r] = q4_K_row(base + (size_t)r * row_bytes, act, n);
    }
}

// Prefill's core (simd_x86.h, pairs true) with VNNI on 256-bit registers:
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
DOTS_KERNEL(dots_q4_K, q4k_dots_tile, k_core_vnni, true)
DOTS_KERNEL(dots_q6_K, q6k_dots_tile, k_core_vnni, true)

void cpu_kernels_fill_avx512(cpu_kernels *k) {
    k->name = "avx512";
    k->dot[GGML_TYPE_Q4_K] = dot_q4_K;
    k->dot[GGML_TYPE_Q6_K] = dot_q6_K;
    k->dots[GGML_TYPE_Q4_K] = dots_q4_K;
    k->dots[GGML_TYPE_Q6_K] = dots_q6_K;
}
