// matvec_avx512.c — the quantised dots with AVX-512 VL + VNNI (compiled with
// -mavx512f -mavx512bw -mavx512vl -mavx512vnni; reached only after a run-time
// feature check): the tiles of simd_x86.h with cores of VNNI instructions
// on 256-bit registers for decode and the 32-wide types, and the K types'
// prefill tiles below, whose 32 registers hold eight inputs' accumulators
// next to a block's quants and scales. Attention's kernels are in
// attention_avx512.c; the others are the AVX2 set's.
//
// Measured on a 2-core Zen 4 (bench/results): 23 GB/s per core in cache for
// Q4_K decode (AVX2: 19) and 86-90 G multiply-adds/s per core in prefill
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
KTILE_KERNEL(dot_q4_K_one, q4k_dots_tile, k_core_vnni, true, 1)
KTILE_KERNEL(dot_q6_K_one, q6k_dots_tile, k_core_vnni, true, 1)

// ---------------------------------------------------------------------------
// The K types against a prefill batch: tiles of up to KTILE inputs.
//
// The integer core above spends, per pair of runs, a shift and a blend to
// put two runs' lanes side by side for one dpwssd. Here the pairing comes
// from the data layout instead: a run pair's weights and activations are
// interleaved four bytes at a time (unpacklo/unpackhi_epi32 of the two
// runs), so that one dpbusd leaves lane 2k with run A's group and lane 2k + 1
// with run B's, and packs_epi32 of two such products puts each group's
// (A, B) sums in the two words of one int32 lane, in the reference's lane
// order: 2 dpbusd + 1 pack + 1 dpwssd per run pair. The activations are
// interleaved once per tile (ktile_prep), the weights once per row and block
// for a group of tiles (ktile_wblock, below), and what depends only on the
// inputs (their d, Q4_K's sub-block sums) is laid out for vector loads. The
// float steps are the reference's, lane for lane.
//
// Measured on the 2-core Zen 4 (one core, 96 inputs, rows in L2): Q4_K 86-88
// G multiply-adds/s against 80-82 with the shared tiles six wide, Q6_K 94
// against 82; the multiplies, two pipes shared with the float steps, are
// now the bound (12 of the 14 per input and block are the integer core's).
// One input keeps the shared tile, which decodes faster (23 GB/s in cache
// against 18: no tile to prepare, no interleave to pay per row).
#define KTILE CPU_TILE_INPUTS

typedef struct {
    int8_t qs[KTILE][QK_K];        // input j's quants, 64 at a time (runs 2c, 2c + 1) interleaved by 4 bytes
    float d[KTILE];                // input j's d
    float d_pair[KTILE / 2][8];    // Q4_K: d of inputs 2p and 2p + 1, four times each
    int16_t sums[KTILE / 2][16];   // Q4_K: the eight sub-block sums of inputs 2p and 2p + 1
    int16_t bsums[KTILE][QK_K / 16];  // Q6_K: input j's bsums
} ktile_block;

// Block b of the nb inputs from act on (act_stride apart) into t[b], for
// every block of n; the unused pair halves zero.
static void ktile_prep(bool q4k, const uint8_t *act, size_t act_stride, int nb, int64_t n, ktile_block *t) {
    for (int64_t b = 0; b < n / QK_K; b++) {
        memset(t[b].d_pair, 0, sizeof t[b].d_pair);
        memset(t[b].sums, 0, sizeof t[b].sums);
    }
    for (int j = 0; j < nb; j++) {
        const block_q8_K *y = (const block_q8_K *)(act + (size_t)j * act_stride);
        const int16_t *sums = cpu_q8_K_sums_of(y, n);
        for (int64_t b = 0; b < n / QK_K; b++) {
            ktile_block *tb = t + b;
            tb->d[j] = y[b].d;
            for (int c = 0; c < 4; c++) {
                const __m256i ra = _mm256_loadu_si256((const __m256i *)(y[b].qs + 64 * c));
                const __m256i rb = _mm256_loadu_si256((const __m256i *)(y[b].qs + 64 * c + 32));
                _mm256_storeu_si256((__m256i *)(tb->qs[j] + 64 * c), _mm256_unpacklo_epi32(ra, rb));
                _mm256_storeu_si256((__m256i *)(tb->qs[j] + 64 * c + 32), _mm256_unpackhi_epi32(ra, rb));
            }
            if (q4k) {
                for (int k = 0; k < 4; k++) tb->d_pair[j / 2][4 * (j % 2) + k] = y[b].d;
                memcpy(tb->sums[j / 2] + 8 * (j % 2), sums + 8 * b, sizeof(int16_t) * 8);
            } else {
                memcpy(tb->bsums[j], y[b].bsums, sizeof tb->bsums[j]);
            }
        }
    }
}

// One input's int32 lanes of a block: lanes + sum over run pairs c of the
// pair's scales s[c] (words: run A's, run B's) times its group sums; w1[c],
// w2[c] are the pair's interleaved weights (unsigned), a the input's.
static inline __attribute__((always_inline)) __m256i ktile_core(__m256i lanes, const __m256i w1[4],
                                                                const __m256i w2[4], const __m256i s[4],
                                                                const int8_t *a) {
    const __m256i zero = _mm256_setzero_si256();
    for (int c = 0; c < 4; c++) {
        const __m256i p1 = _mm256_dpbusd_epi32(zero, w1[c], _mm256_loadu_si256((const __m256i *)(a + 64 * c)));
        const __m256i p2 = _mm256_dpbusd_epi32(zero, w2[c], _mm256_loadu_si256((const __m256i *)(a + 64 * c + 32)));
        lanes = _mm256_dpwssd_epi32(lanes, _mm256_packs_epi32(p1, p2), s[c]);  // |sums| < 2^15: packs is exact
    }
    return lanes;
}

// Runs A and B (32 unsigned quants each) as a core's weights w1, w2.
static inline __attribute__((always_inline)) void ktile_pair(__m256i ra, __m256i rb, __m256i *w1, __m256i *w2) {
    *w1 = _mm256_unpacklo_epi32(ra, rb);
    *w2 = _mm256_unpackhi_epi32(ra, rb);
}

// hsum4 of the eight four-lane accumulators m[p] holds (inputs 2p, 2p + 1),
// in the same order of additions.
static inline __attribute__((always_inline)) __m256 hsum4_x8(const __m256 m[4]) {
    __m256 w[2];
    for (int k = 0; k < 2; k++)
        w[k] = _mm256_add_ps(_mm256_shuffle_ps(m[2 * k], m[2 * k + 1], _MM_SHUFFLE(3, 2, 3, 2)),
                             _mm256_shuffle_ps(m[2 * k], m[2 * k + 1], _MM_SHUFFLE(1, 0, 1, 0)));
    const __m256 r = _mm256_add_ps(_mm256_shuffle_ps(w[0], w[1], _MM_SHUFFLE(2, 0, 2, 0)),
                                   _mm256_shuffle_ps(w[0], w[1], _MM_SHUFFLE(3, 1, 3, 1)));
    return _mm256_permutevar8x32_ps(r, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
}

// hsum8 of eight accumulators at once, in its order of additions (halves,
// then lanes 0 + 2 and 1 + 3, then the two), sum j in lane j: 22 shuffles
// and adds where eight hsum8 take 48 -- a row of few blocks spends as much
// on its sums as on a block.
static inline __attribute__((always_inline)) __m256 hsum8_x8(const __m256 a[8]) {
    __m256 h[4];
    for (int k = 0; k < 4; k++)  // [a_2k | a_2k+1]: high half + low half
        h[k] = _mm256_add_ps(_mm256_permute2f128_ps(a[2 * k], a[2 * k + 1], 0x31),
                             _mm256_permute2f128_ps(a[2 * k], a[2 * k + 1], 0x20));
    return hsum4_x8(h);  // inputs 0, 2, 4, 6 | 1, 3, 5, 7 come out in order
}

// The first nb of eight sums to out[j * ldo].
static inline __attribute__((always_inline)) void store_x8(__m256 sums, int nb, float *out, int64_t ldo) {
    float v[8];
    _mm256_storeu_ps(v, sums);
    for (int j = 0; j < nb; j++) out[(int64_t)j * ldo] = v[j];
}

// A row's block as the tiles take it, unpacked once for every input of a
// group of tiles (not once per tile of eight): the core's interleaved
// weights and scales, and what the block's float steps need.
typedef struct {
    __m256i w1[4], w2[4], s[4];  // ktile_core's: run pair c's weights, its scale words
    __m256i m;                   // Q4_K: the eight mins (words, both halves); Q6_K: -32 * each sub-block's scale
    float d, neg_dmin;           // the block's d; Q4_K's -dmin
} ktile_wblock;

// Q4_K block xb for the tiles. Run pair c is qs chunk c (low nibbles, high
// nibbles), its scales (sc[2c], sc[2c + 1]) word pair c of the scales.
static inline __attribute__((always_inline)) void q4k_unpack(const block_q4_K *xb, ktile_wblock *o) {
    const __m256i low4 = _mm256_set1_epi8(15);
    const __m128i sm = q4k_scales_mins1(xb->scales);
    const __m256i sc = _mm256_castsi128_si256(_mm_cvtepu8_epi16(sm));
    for (int c = 0; c < 4; c++) {
        const __m256i bits = _mm256_loadu_si256((const __m256i *)(xb->qs + 32 * c));
        ktile_pair(_mm256_and_si256(bits, low4), _mm256_and_si256(_mm256_srli_epi16(bits, 4), low4), &o->w1[c],
                   &o->w2[c]);
        o->s[c] = _mm256_permutevar8x32_epi32(sc, _mm256_set1_epi32(c));
    }
    o->m = _mm256_broadcastsi128_si256(_mm_cvtepu8_epi16(_mm_srli_si128(sm, 8)));
    o->d = f16_to_f32(xb->d);
    o->neg_dmin = -f16_to_f32(xb->dmin);
}

// Q6_K block xb for the tiles (layout in quant.h): run pairs (4h, 4h + 1)
// and (4h + 2, 4h + 3) of half h, as q6k_runs unpacks them; a run is two
// sub-blocks of 16 (lanes 0-3, 4-7), so pair (A, B)'s scale words are
// (sc[2A], sc[2B]) in lanes 0-3 and (sc[2A + 1], sc[2B + 1]) in 4-7.
static inline __attribute__((always_inline)) void q6k_unpack(const block_q6_K *xb, ktile_wblock *o) {
    const __m256i sc = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)xb->scales));
    for (int h = 0; h < 2; h++) {
        __m256i q[4];
        q6k_runs(xb, h, q);
        for (int k = 0; k < 2; k++) {
            const int c = 2 * h + k, A = 2 * c;  // runs A, A + 1
            ktile_pair(q[2 * k], q[2 * k + 1], &o->w1[c], &o->w2[c]);
            o->s[c] = _mm256_permutexvar_epi16(
                _mm256_setr_epi16(2 * A, 2 * A + 2, 2 * A, 2 * A + 2, 2 * A, 2 * A + 2, 2 * A, 2 * A + 2, 2 * A + 1,
                                  2 * A + 3, 2 * A + 1, 2 * A + 3, 2 * A + 1, 2 * A + 3, 2 * A + 1, 2 * A + 3),
                sc);
        }
    }
    o->m = _mm256_slli_epi16(_mm256_sub_epi16(_mm256_setzero_si256(), sc), 5);
    o->d = f16_to_f32(xb->d);
    o->neg_dmin = 0;
}

// A row's sums against a tile's inputs between passes over parts of its
// blocks: its accumulators, in the order the float steps left them.
typedef struct {
    __m256 acc[KTILE];
    __m512 acc_m[KTILE / 4];  // Q4_K's mins: inputs 4q..4q + 3, four lanes each
} ktile_acc;

// Q4_K rows (wb: nblk unpacked blocks a row) against nb inputs (t:
// ktile_prep's) over blocks [b0, b1); the rows' sums carried in st from
// the blocks before b0 and to those after b1, or at the end out[j * ldo + r]
// = seam_vec_dot. The mins' lanes of four inputs share a 512-bit register,
// whose one conversion and multiply-add take fewer instructions than two
// 256-bit ones (+4% for the Q4_K tiles).
static inline __attribute__((always_inline)) void q4k_rows(int nb, const ktile_wblock *wb, int64_t n_rows,
                                                           int64_t nblk, int64_t b0, int64_t b1,
                                                           const ktile_block *t, ktile_acc *st, float *out,
                                                           int64_t ldo) {
    const int np = (nb + 1) / 2;
    for (int64_t r = 0; r < n_rows; r++) {
        __m256 acc[KTILE];  // the unused ones stay 0 for the sums of eight
        __m512 acc_m[KTILE / 4];
        for (int j = 0; j < KTILE; j++) acc[j] = b0 ? st[r].acc[j] : _mm256_setzero_ps();
        for (int q = 0; q < KTILE / 4; q++) acc_m[q] = b0 ? st[r].acc_m[q] : _mm512_setzero_ps();
        for (int64_t b = b0; b < b1; b++) {
            const ktile_wblock *x = wb + r * nblk + b;
            const ktile_block *tb = t + b;
            // da * d for every input at once; -dmin, times each pair's da
            float dad[KTILE] __attribute__((aligned(32)));
            _mm256_store_ps(dad, _mm256_mul_ps(_mm256_set1_ps(x->d), _mm256_loadu_ps(tb->d)));
            const __m512 neg_dmin = _mm512_set1_ps(x->neg_dmin);
            for (int j = 0; j < nb; j++) {
                const __m256i lanes = ktile_core(_mm256_setzero_si256(), x->w1, x->w2, x->s, tb->qs[j]);
                acc[j] = _mm256_fmadd_ps(_mm256_broadcast_ss(&dad[j]), _mm256_cvtepi32_ps(lanes), acc[j]);
            }
            const __m512i mins = _mm512_broadcast_i64x4(x->m);
            for (int q = 0; q < (np + 1) / 2; q++) {
                const __m512i m = _mm512_madd_epi16(mins, _mm512_loadu_si512(tb->sums[2 * q]));
                acc_m[q] = _mm512_fmadd_ps(_mm512_mul_ps(neg_dmin, _mm512_loadu_ps(tb->d_pair[2 * q])),
                                           _mm512_cvtepi32_ps(m), acc_m[q]);
            }
        }
        if (b1 < nblk) {
            for (int j = 0; j < KTILE; j++) st[r].acc[j] = acc[j];
            for (int q = 0; q < KTILE / 4; q++) st[r].acc_m[q] = acc_m[q];
        } else {
            __m256 m4[KTILE / 2];
            for (int q = 0; q < KTILE / 4; q++) {
                m4[2 * q] = _mm512_castps512_ps256(acc_m[q]);
                m4[2 * q + 1] = _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(acc_m[q]), 1));
            }
            store_x8(_mm256_add_ps(hsum8_x8(acc), hsum4_x8(m4)), nb, out + r, ldo);
        }
    }
}

// Q6_K rows, as q4k_rows. The -32 of every quant starts the lanes: -32 *
// (sc[2l] * bsums[2l] + sc[2l + 1] * bsums[2l + 1]).
static inline __attribute__((always_inline)) void q6k_rows(int nb, const ktile_wblock *wb, int64_t n_rows,
                                                           int64_t nblk, int64_t b0, int64_t b1,
                                                           const ktile_block *t, ktile_acc *st, float *out,
                                                           int64_t ldo) {
    for (int64_t r = 0; r < n_rows; r++) {
        __m256 acc[KTILE];  // the unused ones stay 0 for the sums of eight
        for (int j = 0; j < KTILE; j++) acc[j] = b0 ? st[r].acc[j] : _mm256_setzero_ps();
        for (int64_t b = b0; b < b1; b++) {
            const ktile_wblock *x = wb + r * nblk + b;
            const ktile_block *tb = t + b;
            float dad[KTILE] __attribute__((aligned(32)));
            _mm256_store_ps(dad, _mm256_mul_ps(_mm256_set1_ps(x->d), _mm256_loadu_ps(tb->d)));
            for (int j = 0; j < nb; j++) {
                const __m256i offset = _mm256_madd_epi16(x->m, _mm256_loadu_si256((const __m256i *)tb->bsums[j]));
                const __m256i lanes = ktile_core(offset, x->w1, x->w2, x->s, tb->qs[j]);
                acc[j] = _mm256_fmadd_ps(_mm256_broadcast_ss(&dad[j]), _mm256_cvtepi32_ps(lanes), acc[j]);
            }
        }
        if (b1 < nblk)
            for (int j = 0; j < KTILE; j++) st[r].acc[j] = acc[j];
        else  // + 0: the reference's empty mins term (it turns a -0 sum into +0)
            store_x8(_mm256_add_ps(hsum8_x8(acc), _mm256_setzero_ps()), nb, out + r, ldo);
    }
}

// How the tiles block the work: the inputs in groups of tiles prepared
// together (KTILE_GROUP_BYTES of ktile_blocks, in L2), the rows in chunks
// unpacked together (KTILE_ROWS_BYTES of ktile_wblocks, in L2); each tile of
// the group then runs over the chunk's rows with its own inputs in L1. A
// row's block is unpacked once per group where it was once per tile, the
// weights read from memory once per group. A tile's pass takes
// KTILE_PASS_BLOCKS blocks of its rows at a time, so that its inputs' part
// (2.5 KiB a block) stays in L1 beside the rows streaming by: past that,
// rows of 3072 weights ran 10-15% slower than rows of 1024.
#define KTILE_GROUP_BYTES CPU_KTILES_GROUP_BYTES
#define KTILE_ROWS_BYTES CPU_TILES_ROWS_BYTES
// what cpu_tiles_stack_bytes counts for the memory plan
_Static_assert(sizeof(ktile_block) <= CPU_TILES_INPUT_BLOCK_BYTES, "an input tile's block outgrew the plan's count");
_Static_assert(sizeof(ktile_wblock) <= CPU_TILES_ROW_BLOCK_BYTES, "an unpacked block outgrew the plan's count");
_Static_assert(sizeof(ktile_acc) <= sizeof(ktile_wblock), "a chunk row's accumulators outgrew the plan's count");
#define KTILE_PASS_BLOCKS 4

// The cpu_dot_fn of a K type (its blocks `block`, unpacked by `unpack`,
// run by `rows`): one input through the shared tile, more as above.
#define KTILE_DOT(name, one, block, unpack, rows, q4k)                                                             \
    static void name(uint32_t type, const void *w, size_t row_bytes, int64_t n_rows, const void *act,            \
                     size_t act_stride, int n_act, int64_t n, float *out, int64_t ldo) {                         \
        if (n_act == 1) {                                                                                          \
            one(type, w, row_bytes, n_rows, act, act_stride, n_act, n, out, ldo);                                  \
            return;                                                                                                \
        }                                                                                                          \
        const int64_t nblk = n / QK_K;                                                                             \
        const int tiles = (n_act + KTILE - 1) / KTILE;                                                             \
        int group = (int)(KTILE_GROUP_BYTES / (sizeof(ktile_block) * (size_t)nblk));                               \
        group = group < 1 ? 1 : group > tiles ? tiles : group;                                                     \
        int64_t chunk = (int64_t)(KTILE_ROWS_BYTES / (sizeof(ktile_wblock) * (size_t)nblk));                       \
        chunk = chunk < 1 ? 1 : chunk > n_rows ? n_rows : chunk;                                                   \
        ktile_block t[group * nblk];    /* at most KTILE_GROUP_BYTES but for rows past 13000 weights */            \
        ktile_wblock wb[chunk * nblk];  /* at most KTILE_ROWS_BYTES but for rows past 37000 */                     \
        ktile_acc st[chunk];                                                                                       \
        for (int g0 = 0; g0 < tiles; g0 += group) {                                                                \
            const int ng = tiles - g0 < group ? tiles - g0 : group;                                                \
            for (int g = 0; g < ng; g++) {                                                                         \
                const int j0 = (g0 + g) * KTILE;                                                                   \
                ktile_prep(q4k, (const uint8_t *)act + (size_t)j0 * act_stride, act_stride,                        \
                           n_act - j0 < KTILE ? n_act - j0 : KTILE, n, t + g * nblk);                              \
            }                                                                                                      \
            for (int64_t r0 = 0; r0 < n_rows; r0 += chunk) {                                                       \
                const int64_t nr = n_rows - r0 < chunk ? n_rows - r0 : chunk;                                      \
                for (int64_t r = 0; r < nr; r++)                                                                   \
                    for (int64_t b = 0; b < nblk; b++)                                                             \
                        unpack((const block *)((const uint8_t *)w + (size_t)(r0 + r) * row_bytes) + b,             \
                               &wb[r * nblk + b]);                                                                 \
                for (int g = 0; g < ng; g++) {                                                                     \
                    const int j0 = (g0 + g) * KTILE, nb = n_act - j0 < KTILE ? n_act - j0 : KTILE;                 \
                    const ktile_block *tg = t + g * nblk;                                                          \
                    float *oj = out + (int64_t)j0 * ldo + r0;                                                      \
                    for (int64_t b0 = 0; b0 < nblk; b0 += KTILE_PASS_BLOCKS) {                                     \
                        const int64_t b1 = nblk - b0 < KTILE_PASS_BLOCKS ? nblk : b0 + KTILE_PASS_BLOCKS;          \
                        switch (nb) {                                                                              \
                            case 1: rows(1, wb, nr, nblk, b0, b1, tg, st, oj, ldo); break;                         \
                            case 2: rows(2, wb, nr, nblk, b0, b1, tg, st, oj, ldo); break;                         \
                            case 3: rows(3, wb, nr, nblk, b0, b1, tg, st, oj, ldo); break;                         \
                            case 4: rows(4, wb, nr, nblk, b0, b1, tg, st, oj, ldo); break;                         \
                            case 5: rows(5, wb, nr, nblk, b0, b1, tg, st, oj, ldo); break;                         \
                            case 6: rows(6, wb, nr, nblk, b0, b1, tg, st, oj, ldo); break;                         \
                            case 7: rows(7, wb, nr, nblk, b0, b1, tg, st, oj, ldo); break;                         \
                            default: rows(8, wb, nr, nblk, b0, b1, tg, st, oj, ldo); break;                        \
                        }                                                                                          \
                    }                                                                                              \
                }                                                                                                  \
            }                                                                                                      \
        }                                                                                                          \
    }
KTILE_DOT(dot_q4_K, dot_q4_K_one, block_q4_K, q4k_unpack, q4k_rows, true)
KTILE_DOT(dot_q6_K, dot_q6_K_one, block_q6_K, q6k_unpack, q6k_rows, false)

// The 32-wide types' byte core: one dpbusd, straight into the lanes.
static inline __attribute__((always_inline)) __m256i i8_core_vnni(__m256i abs_q, __m256i s) {
    return _mm256_dpbusd_epi32(_mm256_setzero_si256(), abs_q, s);
}
WIDE32_KERNEL(dot_q4_0_one, unpack_q4_0, i8_core_vnni, 1)
WIDE32_KERNEL(dot_q5_0_one, unpack_q5_0, i8_core_vnni, 1)
WIDE32_KERNEL(dot_q8_0_one, unpack_q8_0, i8_core_vnni, 1)

// ---------------------------------------------------------------------------
// The 32-wide types against a prefill batch: micro-tiles of WT_R rows by
// WT_J inputs.
//
// A 32-weight block is one dpbusd per (row, input), so the per-(row, input)
// work around it decides the speed: the shared tile spends a sign (q's
// signs moved onto the activations, for the unsigned-by-signed multiply) and
// a product d * da on every one. Here the weights are biased to unsigned
// bytes instead (q + 8, q + 16, q + 128: Q4_0's and Q5_0's bytes as they are
// stored, Q8_0's with the top bit flipped), and what the bias adds, bias *
// (each lane's four activations summed), starts the dpbusd as its
// accumulator, formed once per input; the d * da of a micro-tile's 16 pairs
// are one 512-bit multiply per block. What is left per (row, input, block)
// is dpbusd, convert and the reference's fused multiply-add, whose two
// multiplies are the bound. The rows' blocks are unpacked once per
// micro-tile row group for all the inputs prepared at once (WT_IN_BYTES of
// them, in L2: 48 of a prompt batch's 192 for Gemma 3's 640-wide rows, where
// 16 at a time spent an eighth of the time unpacking rows again -- Q5_0
// 63 -> 80 G multiply-adds/s, one core); the products are formed in a
// pass before the loop that reads them, as a load that follows the store
// it reads waits on it (a third of the speed, measured).
//
// Measured on the 2-core Zen 4 (one core, 96 inputs, rows in L2): Q5_0
// 74-78 G multiply-adds/s against 45 with the shared tile, Q8_0 75 against
// 52. One input keeps the shared tile (decode).
#define WT_IN_BYTES CPU_TILES_GROUP_BYTES  // the inputs prepared at once: 272 B per WT_J of them and block, on the stack
#define WT_R 4    // rows of a micro-tile
#define WT_J 4    // inputs of a micro-tile: WT_R * WT_J accumulators and the rows' quants in 32 registers

// A group of WT_J inputs at one block.
typedef struct {
    int8_t qs[WT_J][QK8_0];   // input j's quants
    int32_t init[WT_J][8];    // -bias * each lane's four quants summed
    float d[WT_J];            // input j's d
} wt_inputs;

// WT_R rows at one block.
typedef struct {
    uint8_t u[WT_R][QK8_0];   // row r's quants + bias
    float d[WT_R];            // row r's d
} wt_rows;
// what cpu_tiles_stack_bytes counts for the memory plan
_Static_assert(sizeof(wt_inputs) <= CPU_MICRO_INPUT_BLOCK_BYTES, "a micro-tile input block outgrew the plan's count");
_Static_assert(sizeof(wt_rows) <= CPU_MICRO_ROWS_BLOCK_BYTES, "a micro-tile row block outgrew the plan's count");

// Block b of a row as unsigned bytes q + bias (bias: 8, 16, 128).
typedef __m256i (*unpack_u8_fn)(const void *row, int64_t b);

static inline __m256i unpack_u8_q4_0(const void *row, int64_t b) {
    return nibbles_32(((const block_q4_0 *)row + b)->qs);
}

// Q5_0: bit j of qh, weight j's fifth bit, adds 16 to byte j.
static inline __m256i unpack_u8_q5_0(const void *row, int64_t b) {
    const block_q5_0 *x = (const block_q5_0 *)row + b;
    uint32_t qh;
    memcpy(&qh, x->qh, sizeof qh);
    const __m256i nib = nibbles_32(x->qs);
    return _mm256_mask_add_epi8(nib, (__mmask32)qh, nib, _mm256_set1_epi8(16));
}

static inline __m256i unpack_u8_q8_0(const void *row, int64_t b) {
    return _mm256_xor_si256(_mm256_loadu_si256((const __m256i *)((const block_q8_0 *)row + b)->qs),
                            _mm256_set1_epi8((char)0x80));
}

// Inputs act.. (nb of them, act_stride apart) as groups g of WT_J, block b
// at t[g * n_blocks + b]; the missing inputs of the last group zero.
static void wt_prep_inputs(int bias_shift, const uint8_t *act, size_t act_stride, int nb, int64_t n, wt_inputs *t) {
    const int64_t nbk = n / QK8_0;
    memset(t, 0, sizeof *t * (size_t)nbk * (size_t)((nb + WT_J - 1) / WT_J));
    for (int j = 0; j < nb; j++) {
        const block_q8_0 *y = (const block_q8_0 *)(act + (size_t)j * act_stride);
        const float *da = cpu_q8_0_scales_of(y, n);
        wt_inputs *tg = t + (size_t)(j / WT_J) * (size_t)nbk;
        const int k = j % WT_J;
        for (int64_t b = 0; b < nbk; b++) {
            const __m256i q = _mm256_loadu_si256((const __m256i *)y[b].qs);
            _mm256_storeu_si256((__m256i *)tg[b].qs[k], q);
            const __m256i g = _mm256_dpbusd_epi32(_mm256_setzero_si256(), _mm256_set1_epi8(1), q);
            _mm256_storeu_si256((__m256i *)tg[b].init[k],
                                _mm256_sub_epi32(_mm256_setzero_si256(), _mm256_slli_epi32(g, bias_shift)));
            tg[b].d[k] = da[b];
        }
    }
}

// WT_R rows (the last repeated for a short group) into wr[b].
static inline __attribute__((always_inline)) void wt_prep_rows(unpack_u8_fn unpack, size_t block_bytes,
                                                               const uint8_t *const rows[WT_R], int64_t n,
                                                               wt_rows *wr) {
    for (int64_t b = 0; b < n / QK8_0; b++) {
        seam_f16 d[8] = {0};  // the rows' scales, as one vector (an insert's lane must be a constant)
        for (int r = 0; r < WT_R; r++) {
            _mm256_storeu_si256((__m256i *)wr[b].u[r], unpack(rows[r], b));
            memcpy(&d[r], rows[r] + (size_t)b * block_bytes, sizeof d[r]);  // d leads every 32-wide block
        }
        _mm_storeu_ps(wr[b].d, _mm_cvtph_ps(_mm_loadu_si128((const __m128i *)d)));
    }
}

// A micro-tile: WT_R rows against a group of WT_J inputs, res[r][j] =
// seam_vec_dot.
static inline __attribute__((always_inline)) void wt_micro(const wt_rows *wr, const wt_inputs *ti, int64_t n,
                                                           float res[WT_R * WT_J]) {
    __m256 acc[WT_R * WT_J];  // row r, input j at WT_J * r + j
    for (int k = 0; k < WT_R * WT_J; k++) acc[k] = _mm256_setzero_ps();
    // d of row r times da of input j for every block, at dad[b][4r + j]:
    // formed before the loop that reads them (a load right after the store
    // that writes it waits for the store)
    float dad[n / QK8_0][WT_R * WT_J] __attribute__((aligned(64)));
    const __m512i spread = _mm512_set_epi32(3, 3, 3, 3, 2, 2, 2, 2, 1, 1, 1, 1, 0, 0, 0, 0);
    for (int64_t b = 0; b < n / QK8_0; b++) {
        const __m512 d4 = _mm512_permutexvar_ps(spread, _mm512_castps128_ps512(_mm_loadu_ps(wr[b].d)));
        _mm512_store_ps(dad[b], _mm512_mul_ps(d4, _mm512_broadcast_f32x4(_mm_loadu_ps(ti[b].d))));
    }
    for (int64_t b = 0; b < n / QK8_0; b++) {
        __m256i u[WT_R];
        for (int r = 0; r < WT_R; r++) u[r] = _mm256_loadu_si256((const __m256i *)wr[b].u[r]);
        for (int j = 0; j < WT_J; j++) {
            const __m256i a = _mm256_loadu_si256((const __m256i *)ti[b].qs[j]);
            const __m256i init = _mm256_loadu_si256((const __m256i *)ti[b].init[j]);
            for (int r = 0; r < WT_R; r++) {
                const __m256i lanes = _mm256_dpbusd_epi32(init, u[r], a);
                acc[WT_J * r + j] = _mm256_fmadd_ps(_mm256_broadcast_ss(&dad[b][WT_J * r + j]),
                                                    _mm256_cvtepi32_ps(lanes), acc[WT_J * r + j]);
            }
        }
    }
    _Static_assert(WT_R * WT_J == 16 && WT_J == 4, "two sums of eight: rows 0-1, rows 2-3");
    _mm256_storeu_ps(res, hsum8_x8(acc));
    _mm256_storeu_ps(res + 8, hsum8_x8(acc + 8));
}

// Every row against every input: inputs WT_IN_BYTES at a time (prepared once),
// rows WT_R at a time (the last group's missing rows repeat its last row;
// only real rows and inputs are written).
static inline __attribute__((always_inline)) void wt_dot(unpack_u8_fn unpack, size_t block_bytes, int bias_shift,
                                                         const void *w, size_t row_bytes, int64_t n_rows,
                                                         const void *act, size_t act_stride, int n_act, int64_t n,
                                                         float *out, int64_t ldo) {
    const int64_t nbk = n / QK8_0;
    const int groups = (n_act + WT_J - 1) / WT_J;
    int per = (int)(WT_IN_BYTES / (sizeof(wt_inputs) * (size_t)nbk));  // groups of WT_J inputs prepared at once
    per = per < 1 ? 1 : per > groups ? groups : per;
    wt_inputs t[per * nbk];
    wt_rows wr[nbk];
    for (int i0 = 0; i0 < n_act; i0 += per * WT_J) {
        const int ni = n_act - i0 < per * WT_J ? n_act - i0 : per * WT_J;
        wt_prep_inputs(bias_shift, (const uint8_t *)act + (size_t)i0 * act_stride, act_stride, ni, n, t);
        for (int64_t r0 = 0; r0 < n_rows; r0 += WT_R) {
            const int nr = n_rows - r0 < WT_R ? (int)(n_rows - r0) : WT_R;
            const uint8_t *rows[WT_R];
            for (int r = 0; r < WT_R; r++)
                rows[r] = (const uint8_t *)w + (size_t)(r0 + (r < nr ? r : nr - 1)) * row_bytes;
            wt_prep_rows(unpack, block_bytes, rows, n, wr);
            for (int j0 = 0; j0 < ni; j0 += WT_J) {
                float res[WT_R * WT_J];
                wt_micro(wr, t + (size_t)(j0 / WT_J) * (size_t)nbk, n, res);
                for (int r = 0; r < nr; r++)
                    for (int j = 0; j < WT_J && j0 + j < ni; j++) out[(int64_t)(i0 + j0 + j) * ldo + r0 + r] = res[WT_J * r + j];
            }
        }
    }
}

// The cpu_dot_fn of a 32-wide type (its blocks `block`, bias 2^shift): fewer
// inputs than a micro-tile's through the shared tile, more through the
// micro-tiles. Decode's q8_0 attention scores come as a KV head's GQA pair
// over runs of 256 keys, where a half-empty micro-tile and the inputs'
// preparation per run cost more than they save: Qwen3-0.6B shape, q8_0
// cache at 4K, 2 threads, 22 tok/s through the micro-tiles, 26 here
// (bench/ab.py, 2 rounds).
#define WT_DOT(name, one, unpack, block, shift)                                                                     \
    static void name(uint32_t type, const void *w, size_t row_bytes, int64_t n_rows, const void *act,            \
                     size_t act_stride, int n_act, int64_t n, float *out, int64_t ldo) {                         \
        if (n_act < WT_J) one(type, w, row_bytes, n_rows, act, act_stride, n_act, n, out, ldo);                     \
        else wt_dot(unpack, sizeof(block), shift, w, row_bytes, n_rows, act, act_stride, n_act, n, out, ldo);      \
    }
WT_DOT(dot_q4_0, dot_q4_0_one, unpack_u8_q4_0, block_q4_0, 3)
WT_DOT(dot_q5_0, dot_q5_0_one, unpack_u8_q5_0, block_q5_0, 4)
WT_DOT(dot_q8_0, dot_q8_0_one, unpack_u8_q8_0, block_q8_0, 7)

// The int8 roof (kernels.h): vpdpbusd on 512 bits, the widest form of the
// tiles' multiply-add (on Zen 4 the 256-bit form the tiles use reaches the
// same multiply-adds a second). The inputs pass through an empty asm each
// round, so that no product is computed once for all of them.
static uint64_t int8_probe(uint64_t rounds) {
    __m512i acc[CPU_INT8_PROBE_CHAINS];
    __m512i u = _mm512_set1_epi8(3), s = _mm512_set1_epi8(-5);
    for (int i = 0; i < CPU_INT8_PROBE_CHAINS; i++) acc[i] = _mm512_setzero_si512();
    for (uint64_t r = 0; r < rounds; r++) {
        __asm__ volatile("" : "+v"(u), "+v"(s));
#pragma GCC unroll 12
        for (int i = 0; i < CPU_INT8_PROBE_CHAINS; i++) acc[i] = _mm512_dpbusd_epi32(acc[i], u, s);
    }
    for (int i = 0; i < CPU_INT8_PROBE_CHAINS; i++) __asm__ volatile("" : : "v"(acc[i]));
    return rounds * CPU_INT8_PROBE_CHAINS * 64;
}

void cpu_kernels_fill_avx512(cpu_kernels *k) {
    k->name = "avx512";
    k->tiles_stack_bytes = cpu_tiles_stack_bytes;
    k->dot[GGML_TYPE_Q4_K] = dot_q4_K;
    k->dot[GGML_TYPE_Q6_K] = dot_q6_K;
    k->dot[GGML_TYPE_Q4_0] = dot_q4_0;
    k->dot[GGML_TYPE_Q5_0] = dot_q5_0;
    k->dot[GGML_TYPE_Q8_0] = dot_q8_0;
    k->int8_probe = int8_probe;
    cpu_kernels_fill_avx512_attention(k);
}
