// kernels.h — the CPU backend's inner loops, chosen once by CPU feature.
//
// Each kernel computes bitwise what its scalar reference computes (named
// below: quant.c and exact.c, whose float order is llama.cpp's) in its set's
// order (exact.h: the AVX2 set follows llama.cpp's AVX2 build, the AVX-512
// set its AVX-512 build), for every input but NaN, whose payload may differ;
// tests/test_cpu_kernels.c holds every set this CPU runs to the scalar set
// of the same order.
#ifndef SEAM_CPU_KERNELS_H
#define SEAM_CPU_KERNELS_H

#include <stddef.h>
#include <stdint.h>

#include "numeric/quant.h"

// Rows 0..n_rows-1 of a matrix (row r at w + r * row_bytes, n weights of
// `type` each; row_bytes at least ggml_row_bytes(type, n)) against n_act
// inputs (input j at act + j * act_stride, as cpu_quantize_input leaves it:
// n activations in seam_vec_dot_type(type) with the extras below after the
// blocks):
//   out[j * ldo + r] = seam_vec_dot(type, row r, input j, n)
// Decode's matvec is one input; prefill's batches share each row among
// several, so that the quantised types' kernels unpack a block once for all
// of them (F32 and F16 run input by input, prefetching ahead of the rows).
typedef void (*cpu_dot_fn)(uint32_t type, const void *w, size_t row_bytes, int64_t n_rows, const void *act,
                           size_t act_stride, int n_act, int64_t n, float *out, int64_t ldo);

// What the tiles take per block besides an input's blocks, after them
// (from the next 16-byte boundary; cpu_quantize_input writes it):
//   Q8_K: each block's eight sub-block sums (int16 [n / QK_K][8], sum i =
//         bsums[2i] + bsums[2i + 1]), which the Q4_K mins meet;
//   Q8_0: each block's scale as f32 (float [n / QK8_0]).
// A tile meets them once per (block, input, row), so they are formed once
// per input.
void cpu_input_extras(uint32_t act_type, void *act, int64_t n);
static inline const void *cpu_input_extras_of(const void *act, size_t block_bytes, int64_t n_blocks) {
    const uintptr_t end = (uintptr_t)act + block_bytes * (size_t)n_blocks;
    return (const void *)((end + 15) & ~(uintptr_t)15);
}
static inline const int16_t *cpu_q8_K_sums_of(const void *act, int64_t n) {
    return (const int16_t *)cpu_input_extras_of(act, sizeof(block_q8_K), n / QK_K);
}
static inline const float *cpu_q8_0_scales_of(const void *act, int64_t n) {
    return (const float *)cpu_input_extras_of(act, sizeof(block_q8_0), n / QK8_0);
}

// The AVX-512 prefill tiles' buffers, on each thread's stack (the other
// sets keep none; cpu_kernels.tiles_stack_bytes): a group of
// prepared inputs and a chunk of unpacked rows (more only for rows too wide
// for one input tile or one row to fit). cpu_tiles_stack_bytes bounds them
// for rows of n weights, for the memory prediction (memstat.c). The K
// types' group is the larger: each group unpacks every row again, and a row
// of 3072 weights filled 64 KiB with two tiles of eight inputs, so a batch
// of 96 unpacked it six times; 256 KiB and chunks of 32 KiB of rows (both
// in a Zen 4 core's 1 MiB L2) took the tiles from 81-84 to 88-92 G
// multiply-adds/s on one core, rows of 1024 and 3072 alike (best of 6
// rounds, bench/results/2026-12-03-prefill.md).
#define CPU_TILES_GROUP_BYTES (64 << 10)
#define CPU_KTILES_GROUP_BYTES (256 << 10)
#define CPU_TILES_ROWS_BYTES (32 << 10)
#define CPU_TILE_INPUTS 8  // the inputs of a K type's tile
// What a block of 256 weights takes in a K type's input tile and unpacked
// row, and a block of 32 in the Q4_0/Q5_0/Q8_0 micro-tiles' inputs and rows
// (the AVX-512 file's ktile_block, ktile_wblock, wt_inputs and wt_rows; it
// asserts that they fit).
#define CPU_TILES_INPUT_BLOCK_BYTES 2600
#define CPU_TILES_ROW_BLOCK_BYTES 448
#define CPU_MICRO_INPUT_BLOCK_BYTES 272
#define CPU_MICRO_ROWS_BLOCK_BYTES 144
uint64_t cpu_tiles_stack_bytes(int64_t n);

// An attention head's weighted sum of values, the contract of
// exact_attention_values_run and _end (src/numeric/exact.h): in runs of positions
// [c0, c1) of the query's [t0, t1), out (head_dim) = sum over t of f16(w[t])
// * v[t] (position t's row at v + (t % ring) * stride elements), in
// llama.cpp's lane order. acc holds head_dim * 64 floats of the kernel's own
// layout, which only the same set's _end reads.
typedef void (*cpu_attn_values_run_fn)(float *acc, const float *w, const seam_f16 *v, int c0, int c1, int t0,
                                       int head_dim, int64_t stride, int ring);
typedef void (*cpu_attn_values_end_fn)(float *out, float *acc, int head_dim);

// Optional (NULL where a set has none; the queries then take values_run and
// values_end one by one): the value sums of n <= CPU_VALUES_GROUP queries
// sharing a KV head, over one run of positions [c0, c1) with c1 - c0 <=
// CPU_VALUES_RUN, bitwise what values_run and values_end give each query
// alone: for each query whose range [t0, t1) meets the run, its lanes acc
// (head_dim * 64 floats, the kernel's own layout, fresh where the part met
// starts at t0) go on over the part met, and when the run reaches its t1,
// out (head_dim) gets the sums. tile: cpu_values_tile_floats(head_dim)
// floats of scratch, where a kernel keeps the run's rows turned around so
// that every query takes each loaded value.
#define CPU_VALUES_GROUP 32
// 1024: each run costs every query a pass of its lanes through memory, and
// the tile (272 KiB of f16 at heads of 128, in L2) halves those passes
// against 512 -- the Qwen3-0.6B shape's values 11% fewer samples at pp2048
// (perf, values_group / Q4_K tiles 0.505 -> 0.450); Gemma 3's heads of 256
// unchanged, and runs of 2048 no better.
#define CPU_VALUES_RUN 1024
static inline size_t cpu_values_tile_floats(int head_dim) {
    // the run's values transposed, f16 (head_dim, CPU_VALUES_RUN + 64), a
    // row of zeros, f16 (head_dim), and each query's weights rounded to f16,
    // f32 (CPU_VALUES_GROUP, CPU_VALUES_RUN + 64)
    const size_t w = CPU_VALUES_RUN + 64, hd = (size_t)head_dim;
    return (hd * w + hd + 1) / 2 + CPU_VALUES_GROUP * w;
}
typedef struct {
    const float *w;  // (t1) the weights, indexed by position
    float *acc;      // (head_dim * 64) its lanes
    float *out;      // (head_dim)
    int t0, t1;
} cpu_values_query;
typedef void (*cpu_attn_values_group_fn)(const cpu_values_query *qs, int n, const seam_f16 *v, int c0, int c1,
                                         int head_dim, int64_t stride, int ring, float *tile);

// Flash attention's online softmax and sum of values over the scores s, the
// contract of exact_attention_flash_run and _end (src/numeric/exact.h); state holds
// exact_flash_state_floats(head_dim) floats.
typedef void (*cpu_attn_flash_run_fn)(float *state, const float *s, const void *v, uint32_t v_type, size_t v_row,
                                      int ring, int c0, int c1, int t0, int head_dim);
typedef void (*cpu_attn_flash_end_fn)(float *out, float *state, uint32_t v_type, int head_dim);

// dst[i] = seam_f32_to_f16(src[i]) for i < n (the KV cache, q for the
// attention dots).
typedef void (*cpu_to_f16_fn)(seam_f16 *dst, const float *src, int64_t n);

// seam_quantize_row_q8_K: the activations of every K-type matvec.
typedef void (*cpu_quantize_q8_K_fn)(const float *x, block_q8_K *y, int64_t n);

// seam_quantize_row_q8_0: the activations of every 32-wide matvec.
typedef void (*cpu_quantize_q8_0_fn)(const float *x, block_q8_0 *y, int64_t n);

// exact_softmax and exact_swiglu (src/numeric/exact.h): llama.cpp's softmax of an
// attention row and its SwiGLU, with its vector expf.
typedef void (*cpu_softmax_fn)(float *x, int t0, int t1, int n);
typedef void (*cpu_swiglu_fn)(float *gate, const float *up, int n);

// One head's RoPE rotation by precomputed angles, cpu_rope_apply's (ops.h):
// each pair (a, b) -> (fma(a, cos, -(b sin)), fma(a, sin, b cos)), as gcc
// contracts ggml's rotation.
typedef void (*cpu_rope_fn)(float *v, int rope_dim, const float *cos_t, const float *sin_t, bool neox);

// cpu_rmsnorm (ops.h) of each of `rows` rows of n values, n apart: out = x /
// rms(x) * weight, out may be x.
typedef void (*cpu_rmsnorm_rows_fn)(float *out, const float *x, const float *weight, int rows, int n, float eps);

// The roof of the set's int8 arithmetic, which prefill's tiles chase: the
// widest multiply-add of bytes the set's dots use, in rounds of
// CPU_INT8_PROBE_CHAINS independent accumulators (more than its latency
// times its issue rate, so that only the issue rate counts), for `rounds`
// rounds; returns the byte multiply-adds done. AVX-512: vpdpbusd on 512
// bits (64 a time); AVX2: vpmaddubsw (32) with the vpmaddwd that widens
// its sums. NULL in the scalar set.
#define CPU_INT8_PROBE_CHAINS 12
typedef uint64_t (*cpu_int8_probe_fn)(uint64_t rounds);

typedef struct {
    const char *name;   // "avx512", "avx2", "scalar-avx2", "scalar-avx512": which set was chosen
    exact_order order;  // the llama.cpp build whose float order it follows
    cpu_dot_fn dot[GGML_TYPE_COUNT];  // per weight type; every supported type is set
    cpu_attn_values_run_fn values_run;
    cpu_attn_values_end_fn values_end;
    cpu_attn_values_group_fn values_group;  // NULL: values_run and values_end query by query
    cpu_attn_flash_run_fn flash_run;
    cpu_attn_flash_end_fn flash_end;
    cpu_to_f16_fn to_f16;
    cpu_quantize_q8_K_fn quantize_q8_K;
    cpu_quantize_q8_0_fn quantize_q8_0;
    cpu_softmax_fn softmax;
    cpu_swiglu_fn swiglu;
    cpu_rope_fn rope;
    cpu_rmsnorm_rows_fn rmsnorm_rows;
    cpu_int8_probe_fn int8_probe;
    // The bytes its kernels keep on a thread's stack for rows of n weights
    // beyond a few KiB (the memory prediction counts them per thread); NULL:
    // none.
    uint64_t (*tiles_stack_bytes)(int64_t n);
} cpu_kernels;

// The fastest kernels this CPU runs, with the scalar reference filling every
// gap; decided on the first call (thread-safe), then a constant. So seam's
// order is that of the llama.cpp a pip install builds on this CPU: AVX-512
// on a Zen 4, AVX2 on a Zen 3. The environment variable SEAM_KERNELS picks
// another set by name (for benchmarks, and for the tests of the other
// order): avx2, avx512, scalar-avx2, scalar-avx512, or scalar (the scalar
// set in the fastest set's order); a name this CPU cannot run is an error.
const cpu_kernels *cpu_kernels_get(void);

// Every set this CPU runs, the scalar ones first (one per order:
// seam_vec_dot row by row for every type; exact_attention_values_run/_end
// and exact_attention_flash_run/_end, seam_f32_to_f16, the quantisers,
// exact_softmax, exact_swiglu, the scalar rotation), the fastest last;
// returns how many.
#define CPU_KERNEL_SETS 4
int cpu_kernels_all(const cpu_kernels *sets[CPU_KERNEL_SETS]);

// The scalar set of an order.
const cpu_kernels *cpu_kernels_reference(exact_order order);

// The AVX2 + FMA + F16C kernels (matvec_avx2.c) in either order: fills dot[]
// for the types it covers and the other kernels (in the AVX-512 order all
// but the softmax, which cpu_kernels_fill_avx512 brings). Call only when the
// CPU has those features.
void cpu_kernels_fill_avx2(cpu_kernels *k, exact_order order);
// Its attention kernels (attention_avx2.c): the value sums and flash
// attention; cpu_kernels_fill_avx2 calls it.
void cpu_kernels_fill_avx2_attention(cpu_kernels *k, exact_order order);

// The AVX-512 BW/VL + VNNI kernels (matvec_avx512.c): replaces the quantised
// dots (K types, Q4_0/Q5_0/Q8_0) of an AVX2 set in the AVX-512 order, and its
// attention kernels below. Call only when the CPU has those features.
void cpu_kernels_fill_avx512(cpu_kernels *k);
// Its attention kernels (attention_avx512.c): the f16 scores and the grouped
// values; cpu_kernels_fill_avx512 calls it.
void cpu_kernels_fill_avx512_attention(cpu_kernels *k);

#endif
