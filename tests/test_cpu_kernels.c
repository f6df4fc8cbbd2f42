// test_cpu_kernels.c — the CPU backend's fast paths against their scalar
// references: every kernel of every instruction set this CPU runs (the dots
// on random blocks of several row lengths, rows at a time; attention's value
// sums; f16 conversion; Q8_K quantisation; softmax and SwiGLU), the threaded
// matvec and attention on pools of 1..4 threads (the pool itself: test_pool.c).
//
// Every fast set must be there: a CPU with AVX2 (and AVX-512) whose set did
// not load fails, and where the CPU runs no fast set the comparisons skip,
// saying so, or fail under SEAM_REQUIRE_SIMD=1 (./test.sh, CI).
//
// Tolerance: none. The kernels keep the reference's integer sums and its
// float steps in its order (llama.cpp's, see quant.c and exact.c), so every
// result must be bitwise the reference's -- the golden logits match
// llama.cpp's to the last bit only if every dot does.
#include <criterion/criterion.h>
#include <math.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#if defined(__x86_64__) && defined(__GNUC__)
#include <cpuid.h>
#endif

#include "cpu/kernels.h"
#include "cpu/ops.h"
#include "cpu/pool.h"
#include "numeric/exact.h"
#include "helpers.h"
#include "numeric/quant.h"


// A finite f16 scale of random sign and magnitude around 2^-8..2^0.
static seam_f16 random_scale(uint64_t *rng) {
    return seam_f32_to_f16(ldexpf(test_rng_uniform(rng), -(int)(test_rng_next(rng) % 8)));
}

static void set_f16(void *p, seam_f16 h) {
    memcpy(p, &h, sizeof h);
}

// n weights of `type` as random bytes, with every f16 scale made finite: the
// quants and packed sub-block scales take every bit pattern, including the
// extremes a quantiser rarely writes.
static void *random_weights(uint32_t type, int64_t n, uint64_t *rng) {
    const uint64_t bytes = ggml_row_bytes(type, (uint64_t)n);
    uint8_t *w = malloc(bytes);
    for (uint64_t i = 0; i < bytes; i++) w[i] = (uint8_t)test_rng_next(rng);
    switch (type) {
        case GGML_TYPE_F32:
            for (int64_t i = 0; i < n; i++) ((float *)w)[i] = test_rng_normal(rng);
            break;
        case GGML_TYPE_F16:
            for (int64_t i = 0; i < n; i++) ((seam_f16 *)w)[i] = seam_f32_to_f16(test_rng_normal(rng));
            break;
        case GGML_TYPE_BF16:
            for (int64_t i = 0; i < n; i++) ((seam_bf16 *)w)[i] = seam_f32_to_bf16(test_rng_normal(rng));
            break;
        case GGML_TYPE_Q4_0:
            for (int64_t b = 0; b < n / QK8_0; b++) set_f16(&((block_q4_0 *)w)[b].d, random_scale(rng));
            break;
        case GGML_TYPE_Q5_0:
            for (int64_t b = 0; b < n / QK8_0; b++) set_f16(&((block_q5_0 *)w)[b].d, random_scale(rng));
            break;
        case GGML_TYPE_Q8_0:
            for (int64_t b = 0; b < n / QK8_0; b++) set_f16(&((block_q8_0 *)w)[b].d, random_scale(rng));
            break;
        case GGML_TYPE_Q4_K:
            for (int64_t b = 0; b < n / QK_K; b++) {
                set_f16(&((block_q4_K *)w)[b].d, random_scale(rng));
                set_f16(&((block_q4_K *)w)[b].dmin, random_scale(rng));
            }
            break;
        case GGML_TYPE_Q5_K:
            for (int64_t b = 0; b < n / QK_K; b++) {
                set_f16(&((block_q5_K *)w)[b].d, random_scale(rng));
                set_f16(&((block_q5_K *)w)[b].dmin, random_scale(rng));
            }
            break;
        case GGML_TYPE_Q6_K:
            for (int64_t b = 0; b < n / QK_K; b++) set_f16(&((block_q6_K *)w)[b].d, random_scale(rng));
            break;
    }
    return w;
}

// n activations in `act_type`: float rows quantised by the reference, or,
// for Q8_K, raw random quants (every int8 including -128, the bsums kept
// consistent) so that the kernels see the extremes of the int16 sums.
static void *random_activations(uint32_t act_type, int64_t n, uint64_t *rng) {
    void *a = malloc(ggml_row_bytes(act_type, (uint64_t)n));
    if (act_type == GGML_TYPE_Q8_K) {
        block_q8_K *y = a;
        for (int64_t b = 0; b < n / QK_K; b++) {
            y[b].d = ldexpf(test_rng_uniform(rng), -6);
            for (int j = 0; j < QK_K; j++) y[b].qs[j] = (int8_t)test_rng_next(rng);
            for (int g = 0; g < QK_K / 16; g++) {
                int sum = 0;
                for (int l = 0; l < 16; l++) sum += y[b].qs[16 * g + l];
                y[b].bsums[g] = (int16_t)sum;
            }
        }
        return a;
    }
    float *x = malloc((size_t)n * sizeof *x);
    for (int64_t i = 0; i < n; i++) x[i] = test_rng_normal(rng);
    seam_quantize_activation(act_type, x, a, n);
    free(x);
    return a;
}

// What this CPU and its OS run, read from cpuid and xgetbv here, apart from
// ops.c's own check: AVX2 with FMA and F16C, and AVX-512 F, BW, VL and VNNI.
static void cpu_simd(bool *avx2, bool *avx512) {
    *avx2 = *avx512 = false;
#if defined(__x86_64__) && defined(__GNUC__)
    unsigned a, b, c, d;
    if (!__get_cpuid(1, &a, &b, &c, &d) || !(c & bit_OSXSAVE)) return;
    const bool fma_f16c = (c & bit_FMA) && (c & bit_F16C);
    unsigned lo, hi;
    __asm__("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
    const bool ymm = (lo & 0x06) == 0x06, zmm = (lo & 0xe6) == 0xe6;  // the OS saves the registers
    if (!__get_cpuid_count(7, 0, &a, &b, &c, &d)) return;
    *avx2 = ymm && fma_f16c && (b & bit_AVX2);
    *avx512 = *avx2 && zmm && (b & bit_AVX512F) && (b & bit_AVX512BW) && (b & bit_AVX512VL) && (c & bit_AVX512VNNI);
#endif
}

// The sets to hold to the scalar ones, sets[FIRST_FAST..n) of the n
// returned (the scalar set of each order first, at sets[order]): every set
// this CPU runs must have loaded, each in its build's order; with none to
// compare the test skips, or fails under SEAM_REQUIRE_SIMD=1, and never
// passes having checked nothing.
#define FIRST_FAST EXACT_ORDERS
static int fast_sets(const cpu_kernels *sets[CPU_KERNEL_SETS]) {
    const int n = cpu_kernels_all(sets);
    bool avx2, avx512;
    cpu_simd(&avx2, &avx512);
    const int want = FIRST_FAST + avx2 + avx512;
    cr_assert_eq(n, want, "this CPU runs %d kernel sets (scalar-avx2, scalar-avx512%s%s), but %d loaded", want,
                 avx2 ? ", avx2" : "", avx512 ? ", avx512" : "", n);
    for (int o = 0; o < EXACT_ORDERS; o++)
        cr_assert(sets[o]->order == (exact_order)o && !strcmp(sets[o]->name, o ? "scalar-avx512" : "scalar-avx2"),
                  "kernel set %d is %s", o, sets[o]->name);
    for (int i = FIRST_FAST; i < n; i++) {
        const bool wide = i > FIRST_FAST;
        cr_assert_str_eq(sets[i]->name, wide ? "avx512" : "avx2", "kernel set %d", i);
        cr_assert_eq(sets[i]->order, wide ? EXACT_ORDER_AVX512 : EXACT_ORDER_AVX2,
                     "the %s set follows llama.cpp's %s build", sets[i]->name, sets[i]->name);
    }
    if (n == FIRST_FAST) {
        cr_assert(!test_required("SEAM_REQUIRE_SIMD"),
                  "SEAM_REQUIRE_SIMD=1, but this CPU runs no SIMD kernel set to compare with the scalar one");
        cr_skip_test("skipped: this CPU has no AVX2, so no fast kernel set is compared with the scalar one");
    }
    return n;
}

// The scalar set in a fast set's order: its reference.
static const cpu_kernels *ref_of(const cpu_kernels *fast) { return cpu_kernels_reference(fast->order); }

// Six rows against 1..11, 15..17 and 35 inputs at once through a fast
// kernel (the tiles of every width and their mixes, more inputs than one
// tile prepares, row groups whole and partial) and through the scalar set,
// each (row, input) bitwise seam_vec_dot.
static void check_dot_with(const cpu_kernels *fast, uint32_t type, int64_t n, uint64_t *rng) {
    enum { ROWS = 6, INPUTS = 35, LDO = ROWS + 2 };
    const cpu_kernels *ref = ref_of(fast);
    const uint64_t row_bytes = ggml_row_bytes(type, (uint64_t)n);
    uint8_t *w = malloc(ROWS * row_bytes);
    for (int r = 0; r < ROWS; r++) {
        void *row = random_weights(type, n, rng);
        memcpy(w + r * row_bytes, row, row_bytes);
        free(row);
    }
    const uint32_t act_type = seam_vec_dot_type(type);
    const uint64_t stride = cpu_matvec_scratch_bytes(n) + 64;  // not the packed size: the stride is used
    uint8_t *act = malloc(INPUTS * stride);
    for (int j = 0; j < INPUTS; j++) {
        void *a = random_activations(act_type, n, rng);
        memcpy(act + j * stride, a, ggml_row_bytes(act_type, (uint64_t)n));
        cpu_input_extras(act_type, act + j * stride, n);
        free(a);
    }
    float got[INPUTS * LDO], want[INPUTS * LDO];
    for (int n_act = 1; n_act <= INPUTS; n_act = n_act == 11 ? 15 : n_act == 17 ? INPUTS : n_act + 1) {
        for (int i = 0; i < INPUTS * LDO; i++) got[i] = want[i] = NAN;
        fast->dot[type](type, w, row_bytes, ROWS, act, stride, n_act, n, got, LDO);
        ref->dot[type](type, w, row_bytes, ROWS, act, stride, n_act, n, want, LDO);
        for (int j = 0; j < n_act; j++)
            for (int r = 0; r < ROWS; r++) {
                const float exact = seam_vec_dot(fast->order, type, w + r * row_bytes, act + j * stride, n);
                cr_assert(test_bits_of(want[j * LDO + r]) == test_bits_of(exact), "the scalar set is seam_vec_dot");
                cr_assert(test_bits_of(got[j * LDO + r]) == test_bits_of(exact),
                          "%s (%s) n=%ld, %d inputs: row %d input %d = %.9g vs reference %.9g, not bitwise equal",
                          ggml_type_name(type), fast->name, (long)n, n_act, r, j, got[j * LDO + r], exact);
            }
    }
    free(w), free(act);
}

// Every fast set this CPU runs (AVX2, and AVX-512 on top of it), not only
// the one the engine picks.
static void check_dot(uint32_t type, int64_t n, uint64_t *rng) {
    const cpu_kernels *sets[CPU_KERNEL_SETS];
    const int n_sets = fast_sets(sets);
    for (int i = FIRST_FAST; i < n_sets; i++) check_dot_with(sets[i], type, n, rng);
}

Test(kernels, k_types_bitwise) {
    static const uint32_t types[] = {GGML_TYPE_Q4_K, GGML_TYPE_Q5_K, GGML_TYPE_Q6_K};
    // 4096 + 256: the AVX-512 tiles' inputs in groups and their blocks
    // in passes, one partial; 8192: its rows in two chunks, one partial
    static const int64_t lengths[] = {256, 512, 768, 1024, 2048, 3072, 4096 + 256, 8192};
    uint64_t rng = 1;
    for (size_t t = 0; t < sizeof types / sizeof types[0]; t++)
        for (size_t l = 0; l < sizeof lengths / sizeof lengths[0]; l++)
            for (int rep = 0; rep < 20; rep++) check_dot(types[t], lengths[l], &rng);
}

Test(kernels, wide32_types_bitwise) {
    // 1..3 blocks exercise the tail alone; 5, 20 and 35 the four-block loop
    // and its tail; 4096 the AVX-512 micro-tiles' inputs in several groups
    static const uint32_t types[] = {GGML_TYPE_Q4_0, GGML_TYPE_Q5_0, GGML_TYPE_Q8_0};
    static const int64_t lengths[] = {32, 64, 96, 160, 640, 1024, 1120, 4096};
    uint64_t rng = 2;
    for (size_t t = 0; t < sizeof types / sizeof types[0]; t++)
        for (size_t l = 0; l < sizeof lengths / sizeof lengths[0]; l++)
            for (int rep = 0; rep < 20; rep++) check_dot(types[t], lengths[l], &rng);
}

Test(kernels, float_types_bitwise) {
    static const uint32_t types[] = {GGML_TYPE_F32, GGML_TYPE_F16, GGML_TYPE_BF16};
    // tails and blocks of 64; past 1024 an F16 input is converted as it goes
    // (the AVX2 set's dot_f16), 1100 with a tail there too
    static const int64_t lengths[] = {1, 7, 8, 13, 63, 64, 100, 128, 256, 1000, 1100, 4096};
    uint64_t rng = 3;
    for (size_t t = 0; t < sizeof types / sizeof types[0]; t++)
        for (size_t l = 0; l < sizeof lengths / sizeof lengths[0]; l++)
            for (int rep = 0; rep < 20; rep++) check_dot(types[t], lengths[l], &rng);
}

// F16 rows against queries as attention's scores take them: many rows (the
// AVX2 kernel takes rows eight at a time when a row has leftovers past its
// blocks of 64, the AVX-512 one sixteen at a time when it has none, and the
// last few one by one), 1, 3, 4, 7, 18 and 40 queries at once (the AVX-512
// kernel converts 8 at a time, or with rows in lanes CPU_VALUES_GROUP at a
// time and takes them 4 at a time; the AVX2 order's rows in lanes, eight
// rows at a time from 4 queries, lengths of a multiple of 32: 32, 64, 96,
// 128, 160, 192, 256), head sizes with leftovers of every kind (32: all
// leftovers in the AVX-512 order; 80, 100: blocks then leftovers, 100 with a few past the last 8)
// and none, each score bitwise seam_vec_dot -- also where every product is
// a zero (query 2 is zeros signed against row 0's elements, so that each
// of its products with row 0 is -0), whose sum is +0.
Test(kernels, f16_scores_bitwise) {
    static const int64_t lengths[] = {8, 24, 32, 40, 64, 80, 96, 100, 128, 160, 192, 256};
    static const int inputs[] = {1, 3, 4, 7, 18, 40};
    enum { ROWS = 40, INPUTS = 40, QSTRIDE = 264 };
    const cpu_kernels *sets[CPU_KERNEL_SETS];
    const int n_sets = fast_sets(sets);
    uint64_t rng = 11;
    for (size_t l = 0; l < sizeof lengths / sizeof lengths[0]; l++) {
        const int64_t n = lengths[l];
        const size_t row_bytes = (size_t)(n + 8) * sizeof(seam_f16);  // rows apart by more than their length
        uint8_t *w = malloc(ROWS * row_bytes);
        for (int r = 0; r < ROWS; r++)
            for (int64_t i = 0; i < n; i++)
                ((seam_f16 *)(w + r * row_bytes))[i] = seam_f32_to_f16(ldexpf(test_rng_normal(&rng), (int)(i % 9) - 4));
        seam_f16 q[INPUTS][QSTRIDE];
        for (int j = 0; j < INPUTS; j++)
            for (int64_t i = 0; i < n; i++) {
                const float w0 = seam_f16_to_f32(((const seam_f16 *)w)[i]);
                q[j][i] = seam_f32_to_f16(j != 2 ? test_rng_normal(&rng) : w0 < 0 ? 0.0f : -0.0f);
            }
        for (int i = FIRST_FAST; i < n_sets; i++)
            for (size_t in = 0; in < sizeof inputs / sizeof inputs[0]; in++)
                for (int n_rows = 1; n_rows <= ROWS; n_rows += n_rows < 9 ? 1 : n_rows < 17 ? 7 : 8) {
                    float got[INPUTS][ROWS];
                    sets[i]->dot[GGML_TYPE_F16](GGML_TYPE_F16, w, row_bytes, n_rows, q, sizeof q[0], inputs[in], n,
                                                got[0], ROWS);
                    for (int j = 0; j < inputs[in]; j++)
                        for (int r = 0; r < n_rows; r++) {
                            const float want =
                                seam_vec_dot(sets[i]->order, GGML_TYPE_F16, w + r * row_bytes, q[j], n);
                            cr_assert(test_bits_of(got[j][r]) == test_bits_of(want),
                                      "F16 scores (%s) n=%ld, %d rows, %d inputs: row %d input %d = %.9g, want %.9g",
                                      sets[i]->name, (long)n, n_rows, inputs[in], r, j, got[j][r], want);
                        }
                }
        free(w);
    }
}

// The end of a run of `len` positions from c0, within [.., t1).
static int c1_of(int c0, int len, int t1) { return t1 - c0 < len ? t1 : c0 + len; }

// Attention's value sums: short ranges (lanes left at zero) and long ones,
// head sizes with and without a tail past the last 8, taken in runs (as the
// groups of cpu_attention take them) against the whole range at once; then
// the same rows kept in a ring (a sliding layer's cache): the same sums.
Test(kernels, attn_values_bitwise) {
    static const int head_dims[] = {64, 72, 128, 256};
    // the last two pass the fast kernel's chunks of positions (1024)
    static const int ranges[][2] = {{0, 1}, {3, 40}, {0, 64}, {5, 200}, {130, 333}, {0, 2100}, {1000, 2141}};
    enum { RING = 2100 };  // the longest range; the last one wraps around it
    const cpu_kernels *sets[CPU_KERNEL_SETS];
    const int n_sets = cpu_kernels_all(sets);  // the scalar set too: in runs, in a ring
    uint64_t rng = 7;
    for (size_t hd = 0; hd < sizeof head_dims / sizeof head_dims[0]; hd++) {
        const int head_dim = head_dims[hd], stride = 3 * head_dim, n_pos = 2141;
        seam_f16 *v = malloc(sizeof(seam_f16) * (size_t)n_pos * stride);
        seam_f16 *ring = malloc(sizeof(seam_f16) * (size_t)RING * stride);
        float *w = malloc(sizeof(float) * n_pos), *scratch = malloc(sizeof(float) * 64 * (size_t)head_dim);
        float want[256], got[256];
        for (int i = 0; i < n_pos * stride; i++) v[i] = seam_f32_to_f16(test_rng_normal(&rng));
        for (int t = 0; t < n_pos; t++) w[t] = 0.5f * (test_rng_uniform(&rng) + 1.0f) / 16;
        for (size_t r = 0; r < sizeof ranges / sizeof ranges[0]; r++) {
            const int t0 = ranges[r][0], t1 = ranges[r][1];
            for (int t = t0; t < t1; t++)
                memcpy(ring + (size_t)(t % RING) * stride, v + (size_t)t * stride, sizeof(seam_f16) * stride);
            for (int i = 0; i < n_sets; i++)
                for (int in_ring = 0; in_ring < 2; in_ring++) {
                    const cpu_kernels *ref = cpu_kernels_reference(sets[i]->order);
                    ref->values_run(scratch, w, v, t0, t1, t0, head_dim, stride, n_pos);
                    ref->values_end(want, scratch, head_dim);
                    for (int k = 0; k < 64 * head_dim; k++) scratch[k] = NAN;  // no reliance on what scratch held
                    // in runs of 100 positions (the first may hold fewer than 64)
                    for (int c0 = t0; c0 < t1; c0 += 100)
                        sets[i]->values_run(scratch, w, in_ring ? ring : v, c0, c1_of(c0, 100, t1), t0, head_dim, stride,
                                            in_ring ? RING : n_pos);
                    sets[i]->values_end(got, scratch, head_dim);
                    for (int d = 0; d < head_dim; d++)
                        cr_assert(test_bits_of(got[d]) == test_bits_of(want[d]),
                                  "attn_values (%s%s) head_dim %d [%d, %d): out[%d] = %.9g, want %.9g", sets[i]->name,
                                  in_ring ? ", in a ring" : "", head_dim, t0, t1, d, got[d], want[d]);
                }
        }
        free(v), free(ring), free(w), free(scratch);
    }
}

// The value sums of a group of queries at once (values_group, where a set
// has it), in runs of CPU_VALUES_RUN from the group's first position as
// cpu_attention takes them: queries of 1..CPU_VALUES_GROUP per group with
// ranges that start and end anywhere (mid-run, mid-block, alike or apart,
// some meeting no position of a run; runs short enough for the AVX-512
// kernel to keep all four accumulators of a pair, and long ones where it
// takes one at a time), head sizes with a tail past the last 16, rows whole
// and in a ring that wraps, two of them infinite: each query's sums bitwise
// the scalar set's alone.
Test(kernels, attn_values_group_bitwise) {
    static const int head_dims[] = {32, 72, 128, 256};
    static const int ranges[][2] = {{0, 1},     {3, 40},   {0, 64},    {5, 200},   {130, 333}, {0, 2100},
                                    {1000, 2141}, {511, 513}, {700, 1601}, {64, 1088}, {17, 18},   {1500, 2077}};
    enum { N_RANGES = sizeof ranges / sizeof ranges[0], RING = 2100, N_POS = 2141 };
    const cpu_kernels *sets[CPU_KERNEL_SETS];
    const int n_sets = fast_sets(sets);
    uint64_t rng = 12;
    for (size_t hd = 0; hd < sizeof head_dims / sizeof head_dims[0]; hd++) {
        const int head_dim = head_dims[hd], stride = 3 * head_dim;
        seam_f16 *v = malloc(sizeof(seam_f16) * (size_t)N_POS * stride);
        seam_f16 *ring = malloc(sizeof(seam_f16) * (size_t)RING * stride);
        float *w = malloc(sizeof(float) * CPU_VALUES_GROUP * N_POS);
        float *acc = malloc(sizeof(float) * CPU_VALUES_GROUP * 64 * (size_t)head_dim);
        float *tile = malloc(sizeof(float) * cpu_values_tile_floats(head_dim));
        float *want = malloc(sizeof(float) * N_RANGES * head_dim), *got = malloc(sizeof(float) * N_RANGES * head_dim);
        for (int i = 0; i < N_POS * stride; i++) v[i] = seam_f32_to_f16(test_rng_normal(&rng));
        // infinities, which a position outside a query's part must not reach (inf x 0 is NaN)
        v[45 * stride + 1] = 0x7c00, v[1600 * stride + 3] = 0xfc00;
        for (int t = 0; t < CPU_VALUES_GROUP * N_POS; t++) w[t] = 0.5f * (test_rng_uniform(&rng) + 1.0f) / 16;
        int grouped = 0;
        for (int i = FIRST_FAST; i < n_sets; i++) {
            if (!sets[i]->values_group) continue;
            grouped++;
            for (int r = 0; r < N_RANGES; r++)  // query r takes the weights of slot r % 8
                exact_attention_values(sets[i]->order, want + r * head_dim, w + (r % CPU_VALUES_GROUP) * N_POS, v,
                                       ranges[r][0], ranges[r][1], head_dim, stride, N_POS, acc);
            for (int in_ring = 0; in_ring < 2; in_ring++)
                for (int n = 1; n <= CPU_VALUES_GROUP; n++)
                    for (int first = 0; first + n <= N_RANGES; first += n) {  // queries first..first+n-1
                        cpu_values_query qs[CPU_VALUES_GROUP];
                        int t0 = N_POS, t1 = 0;
                        for (int m = 0; m < n; m++) {
                            const int r = first + m;
                            qs[m] = (cpu_values_query){.w = w + (r % CPU_VALUES_GROUP) * N_POS,
                                                       .acc = acc + (size_t)m * 64 * head_dim,
                                                       .out = got + r * head_dim, .t0 = ranges[r][0], .t1 = ranges[r][1]};
                            t0 = qs[m].t0 < t0 ? qs[m].t0 : t0, t1 = qs[m].t1 > t1 ? qs[m].t1 : t1;
                        }
                        if (in_ring && t1 - t0 > RING) continue;  // the ring holds the last RING positions
                        for (int t = t0; in_ring && t < t1; t++)
                            memcpy(ring + (size_t)(t % RING) * stride, v + (size_t)t * stride, sizeof(seam_f16) * stride);
                        for (int k = 0; k < CPU_VALUES_GROUP * 64 * head_dim; k++) acc[k] = NAN;
                        for (int c0 = t0; c0 < t1; c0 += CPU_VALUES_RUN)
                            sets[i]->values_group(qs, n, in_ring ? ring : v, c0, c1_of(c0, CPU_VALUES_RUN, t1), head_dim,
                                                  stride, in_ring ? RING : N_POS, tile);
                        for (int m = 0; m < n; m++)
                            for (int d = 0; d < head_dim; d++) {
                                const int r = first + m;
                                cr_assert(test_bits_of(got[r * head_dim + d]) == test_bits_of(want[r * head_dim + d]),
                                          "values_group (%s%s) head_dim %d, %d queries: [%d, %d) out[%d] = %.9g, want %.9g",
                                          sets[i]->name, in_ring ? ", in a ring" : "", head_dim, n, ranges[r][0],
                                          ranges[r][1], d, got[r * head_dim + d], want[r * head_dim + d]);
                            }
                    }
        }
        free(v), free(ring), free(w), free(acc), free(tile), free(want), free(got);
        if (!grouped) cr_skip_test("skipped: no kernel set this CPU runs has values_group (the AVX-512 set has)");
    }
}

// Flash attention's online softmax over f16 and q8_0 values: scores that
// rise (a new maximum rescales the sums), fall and tie, short and long
// ranges, in runs, rows in a ring.
Test(kernels, attn_flash_bitwise) {
    static const int head_dims[] = {32, 64, 128, 256};
    static const int ranges[][2] = {{0, 1}, {3, 40}, {5, 200}, {0, 1100}, {900, 2041}};
    static const uint32_t types[] = {GGML_TYPE_F16, GGML_TYPE_Q8_0};
    enum { RING = 1200, N_POS = 2041 };
    const cpu_kernels *sets[CPU_KERNEL_SETS];
    const int n_sets = cpu_kernels_all(sets);  // the scalar set too: in runs, in a ring
    uint64_t rng = 17;
    float *s = malloc(sizeof(float) * N_POS);
    for (int t = 0; t < N_POS; t++) s[t] = t % 97 == 0 ? 3.0f : t % 89 == 0 ? s[t - 1] : 2.0f * test_rng_normal(&rng);
    for (size_t ty = 0; ty < 2; ty++)
        for (size_t hd = 0; hd < sizeof head_dims / sizeof head_dims[0]; hd++) {
            const int head_dim = head_dims[hd];
            const size_t row = 2 * ggml_row_bytes(types[ty], (uint64_t)head_dim);  // two heads a position
            uint8_t *v = malloc(row * N_POS), *ring = malloc(row * RING);
            for (int t = 0; t < N_POS; t++) {
                void *x = random_weights(types[ty], 2 * head_dim, &rng);
                memcpy(v + row * t, x, row);
                free(x);
            }
            float want[256], got[256], *scratch = malloc(sizeof(float) * 64 * (size_t)head_dim);
            for (size_t r = 0; r < sizeof ranges / sizeof ranges[0]; r++) {
                const int t0 = ranges[r][0], t1 = ranges[r][1];
                for (int t = t0; t < t1; t++) memcpy(ring + row * (size_t)(t % RING), v + row * t, row);
                sets[0]->flash_run(scratch, s, v, types[ty], row, N_POS, t0, t1, t0, head_dim);
                sets[0]->flash_end(want, scratch, types[ty], head_dim);
                for (int i = 0; i < n_sets; i++)
                    for (int in_ring = 0; in_ring < 2; in_ring++) {
                        for (int k = 0; k < 64 * head_dim; k++) scratch[k] = NAN;
                        for (int c0 = t0; c0 < t1; c0 += 77)  // in runs of 77 positions
                            sets[i]->flash_run(scratch, s, in_ring ? ring : v, types[ty], row, in_ring ? RING : N_POS, c0,
                                               c1_of(c0, 77, t1), t0, head_dim);
                        sets[i]->flash_end(got, scratch, types[ty], head_dim);
                        for (int d = 0; d < head_dim; d++)
                            cr_assert(test_bits_of(got[d]) == test_bits_of(want[d]),
                                      "attn_flash (%s%s, %s) head_dim %d [%d, %d): out[%d] = %.9g, want %.9g",
                                      sets[i]->name, in_ring ? ", in a ring" : "", ggml_type_name(types[ty]), head_dim,
                                      t0, t1, d, got[d], want[d]);
                    }
            }
            free(v), free(ring), free(scratch);
        }
    free(s);
}

// The Walsh-Hadamard transform of a quantised cache's rotation against the
// matrix llama.cpp builds (ggml_gen_hadamard: H[0][0] = 1/sqrt(n), then
// [[H, H], [H, -H]] doubling), applied in double: equal to float rounding;
// and it is its own inverse to the same accuracy.
Test(kernels, fwht_is_the_hadamard_matrix) {
    enum { N = 256 };
    static float h[N][N];
    for (int n = 64; n <= N; n *= 2) {
        h[0][0] = 1.0f / sqrtf((float)n);
        for (int s = 1; s < n; s *= 2)
            for (int i = 0; i < s; i++)
                for (int j = 0; j < s; j++) h[i + s][j] = h[i][j + s] = h[i][j], h[i + s][j + s] = -h[i][j];
        uint64_t rng = 4;
        float x[2 * N], y[2 * N];
        for (int i = 0; i < 2 * n; i++) x[i] = y[i] = test_rng_normal(&rng);
        cpu_fwht(y, 2 * n, n);  // two blocks
        for (int b = 0; b < 2; b++)
            for (int i = 0; i < n; i++) {
                double want = 0;
                for (int j = 0; j < n; j++) want += (double)h[i][j] * x[b * n + j];
                cr_assert(fabs(y[b * n + i] - want) < 1e-5, "n %d, block %d, [%d]: %.9g, want %.9g", n, b, i,
                          y[b * n + i], want);
            }
        cpu_fwht(y, 2 * n, n);
        for (int i = 0; i < 2 * n; i++) cr_assert(fabsf(y[i] - x[i]) < 1e-5f, "n %d: not its own inverse at %d", n, i);
    }
}

// f32 -> f16 rows: normal, subnormal, overflowing, tie and NaN values, in
// blocks of 8 and tails.
Test(kernels, to_f16_bitwise) {
    const cpu_kernels *sets[CPU_KERNEL_SETS];
    const int n_sets = fast_sets(sets);
    uint64_t rng = 9;
    float x[203];
    for (int i = 0; i < 203; i++) {
        const uint32_t u = (uint32_t)test_rng_next(&rng);
        x[i] = i % 3 ? ldexpf(test_rng_normal(&rng), (int)(u % 48) - 30)
                     : test_float_of(u);  // any bits: NaNs, infs, subnormals
    }
    x[5] = 65520.0f, x[6] = 0x1p-25f, x[7] = 1.0f + 0x1p-11f, x[8] = NAN, x[9] = -NAN;
    for (int n = 0; n <= 203; n += 29) {
        seam_f16 want[203], got[203];
        sets[0]->to_f16(want, x, n);
        for (int i = 1; i < n_sets; i++) {
            sets[i]->to_f16(got, x, n);
            for (int k = 0; k < n; k++)
                cr_assert_eq(got[k], want[k], "to_f16 (%s) of %a: 0x%04x, want 0x%04x", sets[i]->name, x[k], got[k],
                             want[k]);
        }
    }
}

// Q8_K activations: normal rows, a zero block, ties of the largest
// magnitude with both signs, rows with NaN and infinity.
Test(kernels, quantize_q8_K_bitwise) {
    const cpu_kernels *sets[CPU_KERNEL_SETS];
    const int n_sets = fast_sets(sets);
    enum { N = 6 * QK_K };
    uint64_t rng = 10;
    float x[N];
    for (int rep = 0; rep < 50; rep++) {
        for (int i = 0; i < N; i++) x[i] = ldexpf(test_rng_normal(&rng), rep % 20 - 10);
        for (int i = QK_K; i < 2 * QK_K; i++) x[i] = 0.0f;       // block 1: zero
        x[2 * QK_K + 7] = 1e3f, x[2 * QK_K + 9] = -1e3f;         // block 2: tie, first wins
        x[3 * QK_K + 4] = 0.5f * 12582912.f / 127;               // block 3: a product near the trick's edge
        if (rep % 5 == 0) x[4 * QK_K + rep % QK_K] = NAN;        // block 4: a NaN
        if (rep % 7 == 0) x[5 * QK_K + rep % QK_K] = -INFINITY;  // block 5: an infinity
        block_q8_K want[N / QK_K], got[N / QK_K];
        sets[0]->quantize_q8_K(x, want, N);
        for (int i = 1; i < n_sets; i++) {
            memset(got, 0x5a, sizeof got);
            sets[i]->quantize_q8_K(x, got, N);
            for (int b = 0; b < N / QK_K; b++)
                cr_assert(memcmp(&got[b], &want[b], sizeof want[b]) == 0,
                          "quantize_q8_K (%s): block %d of rep %d differs", sets[i]->name, b, rep);
        }
    }
}

// Q8_0 activations: normal rows, a zero block, a subnormal largest value
// (an infinite multiplier), ties at the rounding's halves, NaN and infinity.
Test(kernels, quantize_q8_0_bitwise) {
    const cpu_kernels *sets[CPU_KERNEL_SETS];
    const int n_sets = fast_sets(sets);
    enum { N = 6 * QK8_0 };
    uint64_t rng = 12;
    float x[N];
    for (int rep = 0; rep < 200; rep++) {
        for (int i = 0; i < N; i++) x[i] = ldexpf(test_rng_normal(&rng), rep % 30 - 15);
        for (int i = QK8_0; i < 2 * QK8_0; i++) x[i] = 0.0f;             // block 1: zero
        x[2 * QK8_0] = 0x1p-140f, x[2 * QK8_0 + 1] = -0x1p-141f;         // block 2: subnormal
        for (int i = 2 * QK8_0 + 2; i < 3 * QK8_0; i++) x[i] = 0.0f;
        x[3 * QK8_0] = 127.0f, x[3 * QK8_0 + 1] = 2.5f, x[3 * QK8_0 + 2] = -3.5f;  // block 3: exact halves
        if (rep % 5 == 0) x[4 * QK8_0 + rep % QK8_0] = NAN;              // block 4: a NaN
        if (rep % 7 == 0) x[5 * QK8_0 + rep % QK8_0] = -INFINITY;        // block 5: an infinity
        block_q8_0 want[N / QK8_0], got[N / QK8_0];
        sets[0]->quantize_q8_0(x, want, N);
        for (int i = 1; i < n_sets; i++) {
            memset(got, 0x5a, sizeof got);
            sets[i]->quantize_q8_0(x, got, N);
            for (int b = 0; b < N / QK8_0; b++)
                cr_assert(memcmp(&got[b], &want[b], sizeof want[b]) == 0,
                          "quantize_q8_0 (%s): block %d of rep %d differs", sets[i]->name, b, rep);
        }
    }
}

// RoPE's rotation: NEOX and normal pairs, rope_dim with and without a tail
// past the last 8 pairs, angles of a far position.
Test(kernels, rope_bitwise) {
    const cpu_kernels *sets[CPU_KERNEL_SETS];
    const int n_sets = fast_sets(sets);
    static const int dims[] = {128, 64, 72, 34, 256};
    uint64_t rng = 14;
    for (size_t di = 0; di < sizeof dims / sizeof dims[0]; di++)
        for (int neox = 0; neox < 2; neox++)
            for (int pos = 0; pos < 40000; pos += 9973) {
                const int rope_dim = dims[di];
                float cos_t[128], sin_t[128], want[256], got[256];
                cpu_rope_angles(cos_t, sin_t, rope_dim, pos, 1e6f, 0.5f);
                for (int i = 0; i < rope_dim; i++) want[i] = 4 * test_rng_normal(&rng);
                memcpy(got, want, sizeof(float) * (size_t)rope_dim);
                sets[0]->rope(want, rope_dim, cos_t, sin_t, neox);
                for (int k = 1; k < n_sets; k++) {
                    float v[256];
                    memcpy(v, got, sizeof(float) * (size_t)rope_dim);
                    sets[k]->rope(v, rope_dim, cos_t, sin_t, neox);
                    cr_assert(memcmp(v, want, sizeof(float) * (size_t)rope_dim) == 0,
                              "rope (%s) rope_dim %d, %s, pos %d differs", sets[k]->name, rope_dim,
                              neox ? "neox" : "normal", pos);
                }
            }
}

// SwiGLU and the attention softmax, through llama.cpp's vector expf (each
// set against the scalar set of its order): inputs
// from tiny to past the exponent range (|n| > 192), infinities and NaN (for
// SwiGLU), rows with and without a tail past the last 16, windows [t0, t1).
Test(kernels, softmax_swiglu_bitwise) {
    const cpu_kernels *sets[CPU_KERNEL_SETS];
    const int n_sets = fast_sets(sets);
    uint64_t rng = 11;
    enum { N = 301 };
    float g[N], up[N];
    for (int rep = 0; rep < 40; rep++) {
        const float spread = ldexpf(1.0f, rep % 10 - 2);  // up to 128: exp past the float range
        for (int i = 0; i < N; i++) g[i] = spread * test_rng_normal(&rng), up[i] = test_rng_normal(&rng);
        if (rep == 3) g[7] = NAN, g[20] = INFINITY, g[21] = -INFINITY, g[22] = -0.0f, g[40] = 200.0f, g[41] = -200.0f;
        for (int n = 1; n <= N; n += rep % 2 ? 50 : 13) {
            float want[N], got[N];
            for (int i = FIRST_FAST; i < n_sets; i++) {
                memcpy(want, g, sizeof g);
                ref_of(sets[i])->swiglu(want, up, n);
                memcpy(got, g, sizeof g);
                sets[i]->swiglu(got, up, n);
                cr_assert(memcmp(got, want, sizeof(float) * n) == 0, "swiglu (%s) n=%d rep %d differs", sets[i]->name,
                          n, rep);
            }
            // softmax without NaN or +inf (which make every output NaN, the payload
            // then depending on the compiler's operand order in x * scale)
            const int t0 = rep % 3 == 0 ? 0 : (rep * 7) % n, t1 = n, padded = (n + 15) / 16 * 16;
            float scores[N];
            memcpy(scores, g, sizeof g);
            if (rep == 3) scores[7] = 50.0f, scores[20] = 1e30f;
            for (int i = FIRST_FAST; i < n_sets; i++) {
                memcpy(want, scores, sizeof g);
                ref_of(sets[i])->softmax(want, t0, t1, padded);
                memcpy(got, scores, sizeof g);
                sets[i]->softmax(got, t0, t1, padded);
                cr_assert(memcmp(got, want, sizeof(float) * n) == 0, "softmax (%s) [%d, %d) rep %d differs",
                          sets[i]->name, t0, t1, rep);
            }
        }
    }
}

// The RMS norm of rows side by side: every set's rmsnorm_rows gives bitwise
// what cpu_rmsnorm gives each row alone -- blocks of eight rows and short
// ones, lengths a multiple of 8 and not, magnitudes from tiny to huge (the
// double sum's order shows), and written over its input.
Test(kernels, rmsnorm_rows_bitwise) {
    const cpu_kernels *sets[CPU_KERNEL_SETS];
    const int n_sets = fast_sets(sets);
    uint64_t rng = 17;
    enum { ROWS = 19, N = 1028 };
    static float x[ROWS * N], w[N], want[ROWS * N], got[ROWS * N];
    static const int lengths[] = {8, 32, 128, 1024, 1028, 60};
    for (size_t li = 0; li < sizeof lengths / sizeof lengths[0]; li++) {
        const int n = lengths[li];
        for (int rows = 1; rows <= ROWS; rows += rows < 9 ? 1 : 5) {
            for (int i = 0; i < rows * n; i++) x[i] = ldexpf(test_rng_normal(&rng), (i % 7) * 9 - 30);
            for (int i = 0; i < n; i++) w[i] = 1.0f + 0.1f * test_rng_normal(&rng);
            for (int r = 0; r < rows; r++) cpu_rmsnorm(want + r * n, x + r * n, w, n, 1e-6f);
            for (int i = 0; i < n_sets; i++) {
                sets[i]->rmsnorm_rows(got, x, w, rows, n, 1e-6f);
                cr_assert(memcmp(got, want, sizeof(float) * rows * n) == 0, "rmsnorm_rows (%s) %d rows of %d differ",
                          sets[i]->name, rows, n);
                memcpy(got, x, sizeof(float) * rows * n);
                sets[i]->rmsnorm_rows(got, got, w, rows, n, 1e-6f);
                cr_assert(memcmp(got, want, sizeof(float) * rows * n) == 0,
                          "rmsnorm_rows (%s) in place, %d rows of %d differ", sets[i]->name, rows, n);
            }
        }
    }
}

// All heads of several queries (each its own range, as a prompt's tokens
// and a sliding window give) through the pool give bitwise each head alone
// (GQA groups of 2), for every pair of cache types; and a cache kept as a
// ring of 85 positions (a sliding layer's) gives what the whole cache gives.
Test(kernels, attention_over_the_pool) {
    enum { n_heads = 8, n_kv = 4, head_dim = 64, kv_dim = n_kv * head_dim, n_pos = 90, n_q = 3 };
    enum { q_dim = n_heads * head_dim };
    static const int t0[n_q] = {7, 60, 30}, t1[n_q] = {90, 61, 61};  // each within the last 85 positions
    static const uint32_t types[][2] = {{GGML_TYPE_F16, GGML_TYPE_F16}, {GGML_TYPE_Q8_0, GGML_TYPE_Q8_0},
                                        {GGML_TYPE_F16, GGML_TYPE_Q8_0}, {GGML_TYPE_Q8_0, GGML_TYPE_F16}};
    uint64_t rng = 8;
    float *k = malloc(sizeof(float) * n_pos * kv_dim), *v = malloc(sizeof(float) * n_pos * kv_dim);
    for (int i = 0; i < n_pos * kv_dim; i++) k[i] = test_rng_normal(&rng), v[i] = test_rng_normal(&rng);
    float q[n_q * q_dim], want[n_q * q_dim], got[n_q * q_dim], whole[n_q * q_dim];
    for (int i = 0; i < n_q * q_dim; i++) q[i] = test_rng_normal(&rng);
    const size_t per_thread = cpu_attention_scratch_floats(n_pos, head_dim);
    float *scratch = malloc(sizeof(float) * 4 * per_thread);
    for (size_t ty = 0; ty < sizeof types / sizeof types[0]; ty++)
        for (int ring = n_pos; ring >= 85; ring -= n_pos - 85) {
            cpu_kv kv = {.k_type = types[ty][0], .v_type = types[ty][1], .ring = ring};
            // a position's heads one after another (the GPU's layout; the engine's is head-major)
            kv.k_row = ggml_row_bytes(kv.k_type, kv_dim), kv.v_row = ggml_row_bytes(kv.v_type, kv_dim);
            kv.k_head = ggml_row_bytes(kv.k_type, head_dim), kv.v_head = ggml_row_bytes(kv.v_type, head_dim);
            uint8_t *kc = malloc(kv.k_row * ring), *vc = malloc(kv.v_row * ring);
            kv.k = kc, kv.v = vc;
            for (int t = 0; t < n_pos; t++) {  // in a ring, later positions overwrite the first ones
                cpu_kv_store(kv.k_type, kc + kv.k_row * (t % ring), k + t * kv_dim, kv_dim);
                cpu_kv_store(kv.v_type, vc + kv.v_row * (t % ring), v + t * kv_dim, kv_dim);
            }
            for (int i = 0; i < n_q; i++)
                for (int h = 0; h < n_heads; h++) {
                    const int g = h / (n_heads / n_kv), o = i * q_dim + h * head_dim;
                    cpu_kv head = kv;
                    head.k += g * kv.k_head;
                    head.v += g * kv.v_head;
                    cpu_attention_head(want + o, q + o, &head, t0[i], t1[i], head_dim, 0.125f, scratch, per_thread);
                }
            if (ring == n_pos) memcpy(whole, want, sizeof whole);
            else cr_assert(memcmp(want, whole, sizeof want) == 0, "K %s, V %s: the ring's attention differs from the "
                           "whole cache's", ggml_type_name(kv.k_type), ggml_type_name(kv.v_type));
            for (int nth = 1; nth <= 4; nth++) {
                seam_error err = {{0}};
                seam_pool *pool = pool_create(nth, &err);
                cr_assert(pool, "%s", err.msg);
                cpu_attention(pool, n_q, got, q_dim, q, q_dim, &kv, n_heads, n_kv, head_dim, t0, t1, 0.125f, scratch,
                              per_thread);
                cr_assert(memcmp(got, want, sizeof got) == 0, "cpu_attention (K %s, V %s, ring %d) on %d threads "
                          "differs from head by head", ggml_type_name(kv.k_type), ggml_type_name(kv.v_type), ring, nth);
                pool_destroy(pool);
            }
            free(kc), free(vc);
        }
    free(k), free(v), free(scratch);
}

// ---------------------------------------------------------------------------
// The threaded matvec: every pool size and chunking gives bitwise the row
// kernel's result for each row alone (the kernels against the reference
// are tested above).

static seam_tensor make_tensor(uint32_t type, int64_t rows, int64_t cols, uint64_t *rng) {
    seam_tensor t = {.name = "test", .name_len = 4, .type = type, .rows = rows, .cols = cols};
    t.row_bytes = ggml_row_bytes(type, (uint64_t)cols);
    t.n_bytes = t.row_bytes * (uint64_t)rows;
    uint8_t *data = malloc(t.n_bytes);
    for (int64_t r = 0; r < rows; r++) {
        void *row = random_weights(type, cols, rng);
        memcpy(data + r * t.row_bytes, row, t.row_bytes);
        free(row);
    }
    t.data = data;
    return t;
}

// cpu_matvec (one input) and cpu_matmul (a batch) on pools of 1..4 threads:
// every output is seam_vec_dot of its row and its input, as quantised.
Test(matvec, pool_sizes_agree_with_reference) {
    static const struct {
        uint32_t type;
        int64_t rows, cols;
    } cases[] = {
        {GGML_TYPE_Q4_K, 1, 256},    {GGML_TYPE_Q4_K, 3, 512},   {GGML_TYPE_Q6_K, 17, 1024},
        {GGML_TYPE_Q4_K, 1000, 768}, {GGML_TYPE_Q6_K, 333, 256}, {GGML_TYPE_Q8_0, 129, 640},
        {GGML_TYPE_Q5_0, 64, 96},    {GGML_TYPE_F32, 50, 100},   {GGML_TYPE_F16, 40, 72},
    };
    enum { BATCH = 5 };
    uint64_t rng = 6;
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        seam_tensor w = make_tensor(cases[c].type, cases[c].rows, cases[c].cols, &rng);
        const size_t act_bytes = cpu_matvec_scratch_bytes(w.cols);
        float *x = malloc(sizeof(float) * (size_t)w.cols * BATCH), *out = malloc(sizeof(float) * (size_t)w.rows * BATCH);
        for (int64_t i = 0; i < w.cols * BATCH; i++) x[i] = test_rng_normal(&rng);
        uint8_t *scratch = malloc(act_bytes * BATCH), *act = malloc(act_bytes * BATCH);
        for (int b = 0; b < BATCH; b++) cpu_quantize_input(seam_vec_dot_type(w.type), x + b * w.cols, act + b * act_bytes, w.cols);
        for (int nth = 1; nth <= 4; nth++) {
            seam_error err = {{0}};
            seam_pool *pool = pool_create(nth, &err);
            cr_assert(pool, "%s", err.msg);
            for (int n = 1; n <= BATCH; n += BATCH - 1) {
                memset(out, 0xff, sizeof(float) * (size_t)w.rows * BATCH);
                if (n == 1) cpu_matvec(pool, &w, x, out, scratch);
                else cpu_matmul(pool, &w, x, w.cols, out, w.rows, n, scratch);
                for (int b = 0; b < n; b++)
                    for (int64_t r = 0; r < w.rows; r++) {
                        const float want = seam_vec_dot(cpu_kernels_get()->order, w.type,
                                                        (const uint8_t *)w.data + r * w.row_bytes, act + b * act_bytes,
                                                        w.cols);
                        const float got = out[b * w.rows + r];
                        cr_assert(test_bits_of(got) == test_bits_of(want),
                                  "%s %ldx%ld, %d threads, %d inputs: input %d row %ld = %.9g, want %.9g",
                                  ggml_type_name(w.type), (long)w.rows, (long)w.cols, nth, n, b, (long)r, got, want);
                    }
            }
            pool_destroy(pool);
        }
        free(x), free(out), free(scratch), free(act), free((void *)w.data);
    }
}

// Several matrices as one job (cpu_matmul_parts): each part's outputs equal
// its own matmul's, for parts that share the inputs' quantisation (Q4_K and
// Q6_K over Q8_K) and for parts that cannot (Q4_K and Q8_0), on 1..4 threads.
Test(matvec, parts_equal_one_matmul_each) {
    enum { COLS = 512, BATCH = 3 };
    static const uint32_t types[2][3] = {{GGML_TYPE_Q4_K, GGML_TYPE_Q6_K, GGML_TYPE_Q4_K},
                                         {GGML_TYPE_Q4_K, GGML_TYPE_Q8_0, GGML_TYPE_Q6_K}};
    static const int64_t rows[3] = {300, 7, 129};
    uint64_t rng = 13;
    float *x = malloc(sizeof(float) * COLS * BATCH);
    for (int i = 0; i < COLS * BATCH; i++) x[i] = test_rng_normal(&rng);
    void *scratch = malloc(cpu_matvec_scratch_bytes(COLS) * BATCH);
    for (int set = 0; set < 2; set++) {
        seam_tensor w[3];
        const seam_tensor *wp[3];
        float *got[3], *want[3];
        int64_t ldo[3];
        for (int i = 0; i < 3; i++) {
            w[i] = make_tensor(types[set][i], rows[i], COLS, &rng);
            wp[i] = &w[i];
            ldo[i] = rows[i] + 1;
            got[i] = malloc(sizeof(float) * (size_t)ldo[i] * BATCH);
            want[i] = malloc(sizeof(float) * (size_t)ldo[i] * BATCH);
        }
        for (int nth = 1; nth <= 4; nth++) {
            seam_error err = {{0}};
            seam_pool *pool = pool_create(nth, &err);
            cr_assert(pool, "%s", err.msg);
            for (int i = 0; i < 3; i++) {
                memset(got[i], 0, sizeof(float) * (size_t)ldo[i] * BATCH);
                memset(want[i], 0, sizeof(float) * (size_t)ldo[i] * BATCH);
                cpu_matmul(pool, &w[i], x, COLS, want[i], ldo[i], BATCH, scratch);
            }
            cpu_matmul_parts(pool, 3, wp, x, COLS, got, ldo, BATCH, scratch);
            for (int i = 0; i < 3; i++)
                cr_assert(memcmp(got[i], want[i], sizeof(float) * (size_t)ldo[i] * BATCH) == 0,
                          "set %d, %d threads: part %d (%s) differs from its own matmul", set, nth, i,
                          ggml_type_name(w[i].type));
            pool_destroy(pool);
        }
        for (int i = 0; i < 3; i++) free((void *)w[i].data), free(got[i]), free(want[i]);
    }
    free(x), free(scratch);
}
