// test_cuda.c — the CUDA backend against the C reference (quant.c, cpu/ops.c).
// Without a CUDA build every test reports "skipped: no CUDA device"; with a
// build but no device, the argument checks and the host runs of the block
// decoders still run, the rest skip.
//
// Tolerances, and why:
//   bitwise   activation quantisers, embedding rows, KV append, scale, add,
//             GEGLU (same integer and float operations, same f16 table);
//             the host decoders' dequantisation.
//   matvec    |gpu - ref| <= 1e-5 sum|w_i a_i| + 1e-6: the integer sums are
//             exact, only the float sums of chunk and block partials run in
//             another order (a few ulp of the sum of magnitudes).
//   rmsnorm   1e-6 relative: the double sum of squares in another order
//             (bitwise in practice).
//   rope      1e-6 (|x0| + |x1|): CUDA's sincosf is within 2 ulp of libm's;
//             the angle and the rounding of the rotation are the same.
//   softmax, swiglu, softcap   1e-6 relative: CUDA's expf/tanhf, 2 ulp.
//   attention 2e-4 absolute + 1e-3 relative: scores summed in float, not
//             double, may tip a weight's rounding to f16 (2^-11 of that
//             weight); outputs are O(0.1), an indexing error O(0.1). Over a
//             q8_0 cache the CPU runs llama.cpp's online softmax (and over an
//             f16 V an f16 accumulator, 2^-11 a step), the GPU a plain one:
//             2e-3 absolute + 1e-2 relative.
//   fwht      bitwise: the same adds and subtracts in the same pairs.
#include <criterion/criterion.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "helpers.h"
#include "numeric/quant.h"

#ifdef SEAM_HAVE_CUDA
#include "cpu/ops.h"
#include "engine/engine.h"
#include "plan/plan.h"
#include "seam_cuda.h"

static seam_error err;

#define OK(call) cr_assert_eq((call), 0, "%s", err.msg)

static void require_device(void) {
    if (seam_cuda_device_count() == 0) test_no_gpu("cudaGetDeviceCount found none");
    OK(seam_cuda_init(0, &err));
}

static void *dev_alloc(size_t bytes) {
    void *p;
    OK(seam_cuda_malloc(&p, bytes, &err));
    return p;
}

static void *dev_from(const void *host, size_t bytes) {
    void *p = dev_alloc(bytes);
    OK(seam_cuda_upload(p, host, bytes, &err));
    return p;
}

static void to_host(void *host, const void *dev, size_t bytes) { OK(seam_cuda_download(host, dev, bytes, &err)); }

static seam_cuda_step *dev_step(int token, int pos) {
    const seam_cuda_step st = {token, pos};
    return dev_from(&st, sizeof st);
}

static float *random_floats(int n, float scale, uint64_t *rng) {
    float *x = malloc(sizeof(float) * (size_t)n);
    for (int i = 0; i < n; i++) x[i] = scale * test_rng_normal(rng);
    return x;
}

static bool bitwise_equal(const float *a, const float *b, int n) { return memcmp(a, b, sizeof(float) * (size_t)n) == 0; }

// (rows, cols) weights of `type` as random bytes with every f16 scale finite
// (random sign, 2^-8..1): quants, packed scales and high bits take every bit
// pattern. F16 and F32 from normal floats.
static uint8_t *random_weights(uint32_t type, int64_t rows, int64_t cols, uint64_t *rng) {
    const uint64_t bytes = ggml_row_bytes(type, (uint64_t)cols) * (uint64_t)rows;
    uint8_t *w = malloc(bytes);
    if (type == GGML_TYPE_F32 || type == GGML_TYPE_F16) {
        for (int64_t i = 0; i < rows * cols; i++) {
            const float v = test_rng_normal(rng);
            if (type == GGML_TYPE_F32) ((float *)w)[i] = v;
            else ((seam_f16 *)w)[i] = seam_f32_to_f16(v);
        }
        return w;
    }
    for (uint64_t i = 0; i < bytes; i++) w[i] = (uint8_t)test_rng_next(rng);
    uint32_t be, bb;
    ggml_type_layout(type, &be, &bb);
    const bool k4 = type == GGML_TYPE_Q4_K || type == GGML_TYPE_Q5_K;
    for (uint64_t b = 0; b < bytes / bb; b++) {
        for (int f = 0; f < (k4 ? 2 : 1); f++) {  // d (Q6_K's at byte 208), and dmin after d
            const seam_f16 h = seam_f32_to_f16(ldexpf(test_rng_uniform(rng), -(int)(test_rng_next(rng) % 8)));
            memcpy(w + b * bb + (type == GGML_TYPE_Q6_K ? 208 : 2 * f), &h, sizeof h);
        }
    }
    return w;
}

static const uint32_t matvec_types[] = {GGML_TYPE_Q4_0, GGML_TYPE_Q5_0, GGML_TYPE_Q8_0, GGML_TYPE_Q4_K,
                                        GGML_TYPE_Q5_K, GGML_TYPE_Q6_K, GGML_TYPE_F16,  GGML_TYPE_F32};

// A row length with several blocks and a partial last step of the warp.
static int64_t cols_for(uint32_t type) {
    return type == GGML_TYPE_Q4_K || type == GGML_TYPE_Q5_K || type == GGML_TYPE_Q6_K ? 5 * QK_K : 25 * QK8_0;
}

// The reference of row r: seam_vec_dot, and the sum of |w_i a_i| it is held to.
static float reference_dot(uint32_t type, const uint8_t *w, const void *act, int64_t cols, float *magnitude) {
    float *wf = malloc(sizeof(float) * (size_t)cols), *af = malloc(sizeof(float) * (size_t)cols);
    seam_dequantize_row(type, w, wf, cols);
    seam_dequantize_row(seam_vec_dot_type(type), act, af, cols);
    double m = 0;
    for (int64_t i = 0; i < cols; i++) m += fabs((double)wf[i] * af[i]);
    *magnitude = (float)m;
    free(wf), free(af);
    return seam_vec_dot(EXACT_ORDER_AVX2, type, w, act, cols);  // the CUDA dots are held to a tolerance: either order
}

// x quantised on the host into the reference's activation format.
static void *reference_act(uint32_t type, const float *x, int64_t cols) {
    const uint32_t at = seam_vec_dot_type(type);
    void *act = malloc(ggml_row_bytes(at, (uint64_t)cols));
    cr_assert_eq(seam_quantize_activation(at, x, act, cols), 0);
    return act;
}

// ---------------------------------------------------------------- without a device

Test(cuda, host_decoders_match_quant_c) {
    // The kernels' block decoders, run on the host, against quant.c: a check
    // of every bit layout that needs no GPU.
    uint64_t rng = 7;
    for (size_t t = 0; t < sizeof matvec_types / sizeof *matvec_types; t++) {
        const uint32_t type = matvec_types[t];
        const int64_t rows = 16, cols = cols_for(type), rb = (int64_t)ggml_row_bytes(type, (uint64_t)cols);
        uint8_t *w = random_weights(type, rows, cols, &rng);
        float *x = random_floats((int)cols, 1.0f, &rng), *ref = malloc(sizeof(float) * cols), *got = malloc(sizeof(float) * cols);
        seam_f16 *got16 = malloc(sizeof(seam_f16) * cols), *ref16 = malloc(sizeof(seam_f16) * cols);
        void *act = reference_act(type, x, cols);
        for (int64_t r = 0; r < rows; r++) {
            float mag, want = reference_dot(type, w + r * rb, act, cols, &mag);
            float dot = seam_cuda_host_vec_dot(type, w + r * rb, act, cols);
            cr_assert(fabsf(dot - want) <= 1e-5f * mag + 1e-6f, "%s row %lld: host decoder %g, quant.c %g",
                      ggml_type_name(type), (long long)r, dot, want);
            cr_assert_eq(seam_cuda_host_dequantize(type, w + r * rb, got, cols), 0);
            seam_dequantize_row(type, w + r * rb, ref, cols);
            cr_assert(bitwise_equal(got, ref, (int)cols), "%s row %lld: dequantised values differ", ggml_type_name(type),
                      (long long)r);
            // the GEMM path's f16 weights: the same decoders, rounded as quant.c rounds
            cr_assert_eq(seam_cuda_host_dequantize_f16(type, w + r * rb, got16, cols), 0);
            cr_assert_eq(seam_dequantize_row_f16(type, w + r * rb, ref16, cols), 0);
            cr_assert(memcmp(got16, ref16, sizeof(seam_f16) * cols) == 0, "%s row %lld: f16 weights differ",
                      ggml_type_name(type), (long long)r);
        }
        free(w), free(x), free(ref), free(got), free(act), free(got16), free(ref16);
    }
    cr_assert(isnan(seam_cuda_host_vec_dot(GGML_TYPE_Q2_K, &rng, &rng, 256)));
    cr_assert_eq(seam_cuda_host_dequantize_f16(GGML_TYPE_Q2_K, &rng, (seam_f16 *)&rng, 256), -1);
}

Test(cuda, the_plan_knows_which_types_the_kernels_read) {
    // plan.c's list, which every build plans with, is the kernels' own
    for (uint32_t t = 0; t < GGML_TYPE_COUNT; t++)
        cr_assert_eq(plan_gpu_reads_type(t), seam_cuda_reads_type(t), "type %u (%s): the plan says %d, the kernels %d",
                     t, ggml_type_name(t), plan_gpu_reads_type(t), seam_cuda_reads_type(t));
}

Test(cuda, launchers_reject_bad_arguments) {
    // Checked before any CUDA call, so these hold with or without a device.
    _Alignas(16) uint8_t buf[4096] = {0};
    float *f = (float *)buf;
    seam_error e = {{0}};
    cr_assert_eq(seam_cuda_matvec(NULL, GGML_TYPE_Q4_K, buf, 4, 100, f, f, buf, &e), -1);
    cr_assert(strstr(e.msg, "multiple of 256"), "%s", e.msg);
    cr_assert_eq(seam_cuda_matvec(NULL, GGML_TYPE_Q4_K, buf + 2, 4, 256, f, f, buf, &e), -1);
    cr_assert(strstr(e.msg, "aligned"), "%s", e.msg);
    cr_assert_eq(seam_cuda_matvec(NULL, GGML_TYPE_Q2_K, buf, 4, 256, f, f, buf, &e), -1);
    cr_assert(strstr(e.msg, "no CUDA kernel"), "%s", e.msg);
    cr_assert_eq(seam_cuda_matvec_quantized(NULL, GGML_TYPE_Q8_0, buf, 0, 32, buf, f, &e), -1);
    cr_assert_eq(seam_cuda_quantize(NULL, GGML_TYPE_Q4_K, f, buf, 100, &e), -1);
    cr_assert_eq(seam_cuda_quantize(NULL, GGML_TYPE_Q8_0, f + 1, buf, 32, &e), -1);
    cr_assert_eq(seam_cuda_embedding(NULL, GGML_TYPE_Q8_0, buf, 10, 32, 1.0f, NULL, f, &e), -1);
    cr_assert_eq(seam_cuda_rmsnorm(NULL, f, f, f, 0, 16, 1e-6f, &e), -1);
    cr_assert_eq(seam_cuda_rope(NULL, f, 1, 4, 64, 63, 1e4f, 1.0f, false, (seam_cuda_step *)buf, &e), -1);
    cr_assert_eq(seam_cuda_rope(NULL, f, 1, 4, 64, 128, 1e4f, 1.0f, false, (seam_cuda_step *)buf, &e), -1);
    cr_assert_eq(seam_cuda_softcap(NULL, f, 0.0f, 16, &e), -1);
    cr_assert_eq(seam_cuda_add(NULL, f, NULL, 16, &e), -1);
    cr_assert_eq(seam_cuda_softmax(NULL, f, 1, 0, &e), -1);
    const seam_cuda_step *st = (const seam_cuda_step *)buf;
    const seam_cuda_kv kv = {buf, buf, GGML_TYPE_F16, GGML_TYPE_F16, 16};
    seam_cuda_kv q8 = kv, q4 = kv, ring = kv;
    q8.k_type = GGML_TYPE_Q8_0, q4.v_type = GGML_TYPE_Q4_0, ring.rows = 8;
    cr_assert_eq(seam_cuda_kv_append(NULL, &kv, f, f, 0, 16, st, &e), -1);
    cr_assert_eq(seam_cuda_kv_append(NULL, &q8, f, f, 48, 16, st, &e), -1);  // not whole q8_0 blocks
    cr_assert_eq(seam_cuda_kv_append(NULL, &q4, f, f, 64, 16, st, &e), -1);
    cr_assert(strstr(e.msg, "f16 or q8_0"), "%s", e.msg);
    cr_assert_eq(seam_cuda_attention(NULL, f, f, &kv, 8, 3, 64, 16, 0, 1.0f, NULL, st, &e), -1);
    cr_assert(strstr(e.msg, "evenly"), "%s", e.msg);
    cr_assert_eq(seam_cuda_attention(NULL, f, f, &kv, 8, 2, 60, 16, 0, 1.0f, NULL, st, &e), -1);
    cr_assert_eq(seam_cuda_attention(NULL, f, f, &kv, 8, 2, 512, 16, 0, 1.0f, NULL, st, &e), -1);
    cr_assert(strstr(e.msg, "head_dim"), "%s", e.msg);
    cr_assert_eq(seam_cuda_attention(NULL, f, f, &q8, 8, 2, 40, 16, 0, 1.0f, NULL, st, &e), -1);
    cr_assert(strstr(e.msg, "head_dim"), "%s", e.msg);
    cr_assert_eq(seam_cuda_attention(NULL, f, f, &ring, 8, 2, 64, 16, 12, 1.0f, NULL, st, &e), -1);  // 8 rows, window 12
    cr_assert(strstr(e.msg, "rows"), "%s", e.msg);
    cr_assert_eq(seam_cuda_fwht(NULL, f, 96, 48, &e), -1);
    cr_assert_eq(seam_cuda_fwht(NULL, f, 100, 64, &e), -1);
    cr_assert_eq(seam_cuda_graph_begin(NULL, &e), -1);
    int32_t *idx = (int32_t *)buf;
    cr_assert_eq(seam_cuda_matvec_expert(NULL, GGML_TYPE_Q4_K, buf, 4, 8, 256, NULL, buf, f, &e), -1);
    cr_assert_eq(seam_cuda_matvec_expert(NULL, GGML_TYPE_Q4_K, buf, 0, 8, 256, idx, buf, f, &e), -1);
    cr_assert_eq(seam_cuda_moe_route(NULL, f, 8, 9, idx, f, &e), -1);
    cr_assert(strstr(e.msg, "out of range"), "%s", e.msg);
    cr_assert_eq(seam_cuda_moe_route(NULL, f, 2000, 8, idx, f, &e), -1);
    cr_assert_eq(seam_cuda_moe_accumulate(NULL, f, f, f, -1, 16, &e), -1);
    uint16_t *h = (uint16_t *)buf;
    cr_assert_eq(seam_cuda_dequantize_f16(NULL, GGML_TYPE_Q4_K, buf, 4, 100, h, &e), -1);
    cr_assert(strstr(e.msg, "multiple of 256"), "%s", e.msg);
    cr_assert_eq(seam_cuda_dequantize_f16(NULL, GGML_TYPE_Q8_0, buf, 4, 32, NULL, &e), -1);
    cr_assert_eq(seam_cuda_matmul(NULL, NULL, GGML_TYPE_Q8_0, buf, 4, 32, h, 2, f, h, &e), -1);
    cr_assert_eq(seam_cuda_rope(NULL, f, 0, 4, 64, 64, 1e4f, 1.0f, false, st, &e), -1);
    cr_assert_eq(seam_cuda_add_rows(NULL, f, f, 0, 16, &e), -1);
}

// ---------------------------------------------------------------- with a device

Test(cuda, device_info) {
    require_device();
    seam_cuda_info info;
    OK(seam_cuda_device_info(0, &info, &err));
    cr_assert_gt(info.total_bytes, 0);
    cr_assert_gt(info.sm_count, 0);
    cr_log_info("device 0: %s, sm_%d%d, %d SMs, %.1f GiB, %.0f GB/s", info.name, info.major, info.minor,
                info.sm_count, info.total_bytes / 1073741824.0, info.mem_bandwidth_gbs);
}

Test(cuda, a_failed_allocation_leaves_no_error_behind) {
    // CUDA keeps a failed call's error as the thread's last error: left
    // there, the next good launch would report it as its own.
    require_device();
    const float ones[64] = {1.0f};
    float *d = dev_from(ones, sizeof ones);
    void *p;
    cr_assert_eq(seam_cuda_malloc(&p, (size_t)1 << 60, &err), -1);
    OK(seam_cuda_scale(NULL, d, 2.0f, 64, &err));
    cr_assert_eq(seam_cuda_host_alloc(&p, (size_t)1 << 60, &err), -1);
    OK(seam_cuda_scale(NULL, d, 2.0f, 64, &err));
    void *host = aligned_alloc(4096, 4096);
    OK(seam_cuda_host_register(host, 4096, false, &err));
    cr_assert_eq(seam_cuda_host_register(host, 4096, false, &err), -1, "registered twice");
    OK(seam_cuda_scale(NULL, d, 2.0f, 64, &err));
    OK(seam_cuda_host_unregister(host, &err));
    free(host);
    seam_cuda_free(d);
}

Test(cuda, quantize_matches_reference_bitwise) {
    require_device();
    uint64_t rng = 11;
    const int n = 4 * QK_K;
    float *x = random_floats(n, 2.0f, &rng);
    memset(x + QK_K, 0, sizeof(float) * QK_K);    // block 1: zero, the reference's zero block
    x[2 * QK_K + 5] = 9.0f, x[2 * QK_K + 100] = -9.0f;  // block 2: a tie of magnitudes, the first (+) wins
    x[3 * QK_K + 7] = -12.0f, x[3 * QK_K + 9] = 0.5f;   // block 3: a negative maximum, and x * id on a half
    float *dx = dev_from(x, sizeof(float) * n);
    uint8_t *dact = dev_alloc(seam_cuda_matvec_scratch_bytes(n));
    uint8_t *got = malloc(seam_cuda_matvec_scratch_bytes(n));

    block_q8_K k[4];
    seam_quantize_row_q8_K(x, k, n);
    OK(seam_cuda_quantize(NULL, GGML_TYPE_Q4_K, dx, dact, n, &err));
    to_host(got, dact, seam_cuda_matvec_scratch_bytes(n));
    const float *kd = (const float *)(got + n);
    const int16_t *bsums = (const int16_t *)(got + n + 4 * (n / QK_K));
    for (int b = 0; b < 4; b++) {
        cr_assert(memcmp(got + b * QK_K, k[b].qs, QK_K) == 0, "Q8_K block %d: quants differ", b);
        cr_assert(memcmp(&kd[b], &k[b].d, sizeof(float)) == 0, "Q8_K block %d: d %g, reference %g", b, kd[b], k[b].d);
        cr_assert(memcmp(bsums + 16 * b, k[b].bsums, sizeof k[b].bsums) == 0, "Q8_K block %d: bsums differ", b);
    }

    // q8_0 (quantize_q8_0_block, which the KV append and the attention's
    // query share), then again with a NaN in block 0 and block 1's largest
    // magnitude subnormal (127 / amax infinite): the reference clamps such
    // products to +-127
    block_q8_0 z[4 * QK_K / QK8_0];
    for (int edges = 0; edges < 2; edges++) {
        if (edges) {
            x[5] = NAN;
            for (int j = 0; j < QK8_0; j++) x[QK8_0 + j] = (float)(j % 3 - 1) * 1e-39f;
            seam_cuda_free(dx);
            dx = dev_from(x, sizeof(float) * n);
        }
        seam_quantize_row_q8_0(x, z, n);
        OK(seam_cuda_quantize(NULL, GGML_TYPE_Q5_0, dx, dact, n, &err));
        to_host(got, dact, seam_cuda_matvec_scratch_bytes(n));
        for (int b = 0; b < n / QK8_0; b++) {
            cr_assert(memcmp(got + b * QK8_0, z[b].qs, QK8_0) == 0, "Q8_0 block %d%s: quants differ", b,
                      edges ? " (NaN and subnormal inputs)" : "");
            cr_assert_eq(((const float *)(got + n))[b], seam_f16_to_f32(z[b].d), "Q8_0 block %d%s: d differs", b,
                         edges ? " (NaN and subnormal inputs)" : "");
        }
    }

    seam_f16 *h = malloc(sizeof(seam_f16) * n);
    seam_quantize_activation(GGML_TYPE_F16, x, h, n);
    OK(seam_cuda_quantize(NULL, GGML_TYPE_F16, dx, dact, n, &err));
    to_host(got, dact, sizeof(seam_f16) * n);
    cr_assert(memcmp(got, h, sizeof(seam_f16) * n) == 0, "F16 activations differ");
    seam_cuda_free(dx), seam_cuda_free(dact);
    free(x), free(got), free(h);
}

// Runs out = W @ x on the device (weights at dw, device or mapped) and checks
// rows against seam_vec_dot (every `stride`-th row and the last 8).
static void check_matvec(uint32_t type, const uint8_t *w, const void *dw, int64_t rows, int64_t cols, int64_t stride) {
    uint64_t rng = 5;
    const uint64_t rb = ggml_row_bytes(type, (uint64_t)cols);
    float *x = random_floats((int)cols, 1.0f, &rng), *out = malloc(sizeof(float) * (size_t)rows);
    void *act = reference_act(type, x, cols);
    float *dx = dev_from(x, sizeof(float) * (size_t)cols), *dout = dev_alloc(sizeof(float) * (size_t)rows);
    void *scratch = dev_alloc(seam_cuda_matvec_scratch_bytes(cols));
    OK(seam_cuda_matvec(NULL, type, dw, rows, cols, dx, dout, scratch, &err));
    to_host(out, dout, sizeof(float) * (size_t)rows);
    for (int64_t r = 0; r < rows; r++) {
        if (r % stride && r < rows - 8) continue;
        float mag, want = reference_dot(type, w + r * rb, act, cols, &mag);
        cr_assert(fabsf(out[r] - want) <= 1e-5f * mag + 1e-6f, "%s %lld x %lld, row %lld: cuda %g, reference %g",
                  ggml_type_name(type), (long long)rows, (long long)cols, (long long)r, out[r], want);
    }
    seam_cuda_free(dx), seam_cuda_free(dout), seam_cuda_free(scratch);
    free(x), free(out), free(act);
}

Test(cuda, matvec_matches_reference_every_type) {
    require_device();
    uint64_t rng = 3;
    for (size_t t = 0; t < sizeof matvec_types / sizeof *matvec_types; t++) {
        const uint32_t type = matvec_types[t];
        const int64_t rows = 67, cols = cols_for(type);  // 67: the last thread block is part-empty
        uint8_t *w = random_weights(type, rows, cols, &rng);
        void *dw = dev_from(w, ggml_row_bytes(type, (uint64_t)cols) * rows);
        check_matvec(type, w, dw, rows, cols, 1);
        seam_cuda_free(dw);
        free(w);
    }
}

Test(cuda, matvec_output_head_sized) {
    // 262147 rows: more thread blocks than 65535, as gemma3's 262144-row head.
    require_device();
    uint64_t rng = 4;
    const int64_t rows = 262147, cols = QK_K;
    uint8_t *w = random_weights(GGML_TYPE_Q6_K, rows, cols, &rng);
    void *dw = dev_from(w, ggml_row_bytes(GGML_TYPE_Q6_K, cols) * rows);
    check_matvec(GGML_TYPE_Q6_K, w, dw, rows, cols, 997);
    seam_cuda_free(dw);
    free(w);
}

Test(cuda, matvec_reads_mapped_host_memory) {
    // The `mapped` placement: weights in pinned host memory, read over the bus.
    require_device();
    uint64_t rng = 6;
    const int64_t rows = 40, cols = 4 * QK_K;
    const uint64_t bytes = ggml_row_bytes(GGML_TYPE_Q4_K, cols) * rows;
    uint8_t *w = random_weights(GGML_TYPE_Q4_K, rows, cols, &rng), *pinned;
    void *dptr;
    OK(seam_cuda_host_alloc((void **)&pinned, bytes, &err));
    memcpy(pinned, w, bytes);
    OK(seam_cuda_host_device_pointer(&dptr, pinned, &err));
    check_matvec(GGML_TYPE_Q4_K, w, dptr, rows, cols, 1);
    seam_cuda_host_free(pinned);
    // the same through cudaHostRegister of ordinary memory, read-only
    uint8_t *reg = aligned_alloc(4096, (bytes + 4095) / 4096 * 4096);
    memcpy(reg, w, bytes);
    OK(seam_cuda_host_register(reg, (bytes + 4095) / 4096 * 4096, true, &err));
    OK(seam_cuda_host_device_pointer(&dptr, reg, &err));
    check_matvec(GGML_TYPE_Q4_K, w, dptr, rows, cols, 1);
    OK(seam_cuda_host_unregister(reg, &err));
    free(reg), free(w);
}

Test(cuda, embedding_matches_dequantize_bitwise) {
    require_device();
    uint64_t rng = 8;
    for (size_t t = 0; t < sizeof matvec_types / sizeof *matvec_types; t++) {
        const uint32_t type = matvec_types[t];
        const int64_t rows = 5, cols = cols_for(type);
        const uint64_t rb = ggml_row_bytes(type, (uint64_t)cols);
        uint8_t *w = random_weights(type, rows, cols, &rng);
        float *want = malloc(sizeof(float) * cols), *got = malloc(sizeof(float) * cols);
        seam_dequantize_row(type, w + 3 * rb, want, cols);
        cpu_scale(want, 1.5f, (int)cols);
        void *dw = dev_from(w, rb * rows);
        float *dout = dev_alloc(sizeof(float) * cols);
        seam_cuda_step *step = dev_step(3, 0);
        OK(seam_cuda_embedding(NULL, type, dw, rows, cols, 1.5f, step, dout, &err));
        to_host(got, dout, sizeof(float) * cols);
        cr_assert(bitwise_equal(got, want, (int)cols), "%s: embedding row differs", ggml_type_name(type));
        seam_cuda_free(step);
        step = dev_step((int)rows, 0);  // past the table: NaN, not stale values
        OK(seam_cuda_embedding(NULL, type, dw, rows, cols, 1.5f, step, dout, &err));
        to_host(got, dout, sizeof(float) * cols);
        for (int64_t i = 0; i < cols; i++) cr_assert(isnan(got[i]), "%s: bad token left %g", ggml_type_name(type), got[i]);
        seam_cuda_free(dw), seam_cuda_free(dout), seam_cuda_free(step);
        free(w), free(want), free(got);
    }
}

Test(cuda, dequantize_f16_matches_reference_bitwise) {
    require_device();
    uint64_t rng = 20;
    for (size_t t = 0; t < sizeof matvec_types / sizeof *matvec_types; t++) {
        const uint32_t type = matvec_types[t];
        const int64_t rows = 67, cols = cols_for(type);  // 67 rows: the last thread block is part-empty
        const uint64_t rb = ggml_row_bytes(type, (uint64_t)cols);
        uint8_t *w = random_weights(type, rows, cols, &rng);
        seam_f16 *want = malloc(sizeof(seam_f16) * rows * cols), *got = malloc(sizeof(seam_f16) * rows * cols);
        for (int64_t r = 0; r < rows; r++) cr_assert_eq(seam_dequantize_row_f16(type, w + r * rb, want + r * cols, cols), 0);
        void *dw = dev_from(w, rb * rows);
        uint16_t *dout = dev_alloc(sizeof(seam_f16) * rows * cols);
        OK(seam_cuda_dequantize_f16(NULL, type, dw, rows, cols, dout, &err));
        to_host(got, dout, sizeof(seam_f16) * rows * cols);
        for (int64_t i = 0; i < rows * cols; i++)
            cr_assert_eq(got[i], want[i], "%s row %lld [%lld]: 0x%04x, reference 0x%04x", ggml_type_name(type),
                         (long long)(i / cols), (long long)(i % cols), got[i], want[i]);
        seam_cuda_free(dw), seam_cuda_free(dout);
        free(w), free(want), free(got);
    }
}

// out (n, rows) = x . W^T through cuBLAS against the same product of the
// f16-rounded inputs summed in double: the products of two halves are exact
// in float, so only the GEMM's float sums differ, 1e-4 of sum |w_i x_i| at
// most (an indexing error is of the order of the sum itself). The handle is
// made on another stream than the one each product is asked on: the GEMM
// must run on that stream, after the dequantisation it reads (the emulated
// device faults on the unordered read; a GPU would race).
Test(cuda, matmul_matches_reference) {
    require_device();
    uint64_t rng = 21;
    seam_cuda_stream *s, *other;
    seam_cuda_blas *blas;
    OK(seam_cuda_stream_create(&s, &err));
    OK(seam_cuda_stream_create(&other, &err));
    const size_t workspace_bytes = 4u << 20;  // cuBLAS's own default on pre-Hopper cards
    void *workspace = dev_alloc(workspace_bytes);
    OK(seam_cuda_blas_create(&blas, other, workspace, workspace_bytes, &err));
    const int n = 7;
    for (size_t t = 0; t < sizeof matvec_types / sizeof *matvec_types; t++) {
        const uint32_t type = matvec_types[t];
        const int64_t rows = 67, cols = cols_for(type);
        const uint64_t rb = ggml_row_bytes(type, (uint64_t)cols);
        uint8_t *w = random_weights(type, rows, cols, &rng);
        float *x = random_floats((int)(n * cols), 1.0f, &rng), *got = malloc(sizeof(float) * n * rows);
        seam_f16 *w16 = malloc(sizeof(seam_f16) * cols);
        void *dw = dev_from(w, rb * rows);
        float *dx = dev_from(x, sizeof(float) * n * cols), *dout = dev_alloc(sizeof(float) * n * rows);
        uint16_t *dw16 = dev_alloc(sizeof(seam_f16) * rows * cols), *dx16 = dev_alloc(sizeof(seam_f16) * n * cols);
        OK(seam_cuda_quantize(s, GGML_TYPE_F16, dx, dx16, n * cols, &err));
        OK(seam_cuda_matmul(blas, s, type, dw, rows, cols, dx16, n, dout, dw16, &err));
        OK(seam_cuda_stream_synchronize(s, &err));
        to_host(got, dout, sizeof(float) * n * rows);
        for (int64_t r = 0; r < rows; r++) {
            cr_assert_eq(seam_dequantize_row_f16(type, w + r * rb, w16, cols), 0);
            for (int tok = 0; tok < n; tok++) {
                double want = 0, mag = 0;
                for (int64_t k = 0; k < cols; k++) {
                    const double p = (double)seam_f16_to_f32(w16[k]) * seam_f16_to_f32(seam_f32_to_f16(x[tok * cols + k]));
                    want += p, mag += fabs(p);
                }
                const float g = got[tok * rows + r];
                cr_assert(fabs(g - want) <= 1e-4 * mag + 1e-6, "%s token %d row %lld: cuBLAS %g, reference %g",
                          ggml_type_name(type), tok, (long long)r, g, want);
            }
        }
        seam_cuda_free(dw), seam_cuda_free(dx), seam_cuda_free(dout), seam_cuda_free(dw16), seam_cuda_free(dx16);
        free(w), free(x), free(got), free(w16);
    }
    seam_cuda_blas_destroy(blas);
    seam_cuda_free(workspace);
    seam_cuda_stream_destroy(s), seam_cuda_stream_destroy(other);
}

Test(cuda, rmsnorm_matches_reference) {
    require_device();
    uint64_t rng = 9;
    const int shapes[][2] = {{1, 1024}, {1, 640}, {16, 128}, {3, 1000}};  // (rows, n): block norm, head norms
    for (int s = 0; s < 4; s++) {
        const int rows = shapes[s][0], n = shapes[s][1];
        float *x = random_floats(rows * n, 3.0f, &rng), *w = random_floats(n, 1.0f, &rng);
        float *want = malloc(sizeof(float) * rows * n), *got = malloc(sizeof(float) * rows * n);
        for (int r = 0; r < rows; r++) cpu_rmsnorm(want + r * n, x + r * n, w, n, 1e-6f);
        float *dx = dev_from(x, sizeof(float) * rows * n), *dw = dev_from(w, sizeof(float) * n);
        OK(seam_cuda_rmsnorm(NULL, dx, dx, dw, rows, n, 1e-6f, &err));  // in place, as the engine's head norms
        to_host(got, dx, sizeof(float) * rows * n);
        for (int i = 0; i < rows * n; i++)
            cr_assert(fabsf(got[i] - want[i]) <= 1e-6f * fabsf(want[i]), "%dx%d [%d]: cuda %g, reference %g", rows, n,
                      i, got[i], want[i]);
        seam_cuda_free(dx), seam_cuda_free(dw);
        free(x), free(w), free(want), free(got);
    }
}

Test(cuda, rope_matches_reference) {
    // nine tokens in one launch, each at its own position, out of order (a
    // prefill batch, and a batch whose token k took token 0's position, or
    // token 1's, fails at once)
    require_device();
    uint64_t rng = 10;
    enum { T = 9 };
    const int n_heads = 4, head_dim = 128, rope_dims[] = {128, 64};
    const int positions[T] = {5, 0, 3001, 17, 1, 900, 42, 2, 7};
    seam_cuda_step steps[T];
    for (int p = 0; p < T; p++) steps[p] = (seam_cuda_step){0, positions[p]};
    seam_cuda_step *step = dev_from(steps, sizeof steps);
    const int n = n_heads * head_dim;
    for (int neox = 0; neox < 2; neox++)
        for (int rd = 0; rd < 2; rd++) {
            float *x = random_floats(T * n, 1.0f, &rng), *want = malloc(sizeof(float) * T * n);
            float *got = malloc(sizeof(float) * T * n);
            memcpy(want, x, sizeof(float) * T * n);
            for (int p = 0; p < T; p++) {
                float cos_t[64], sin_t[64];
                cpu_rope_angles(cos_t, sin_t, rope_dims[rd], positions[p], 1e6f, 0.25f);
                cpu_rope_apply(want + p * n, n_heads, NULL, 0, head_dim, rope_dims[rd], cos_t, sin_t, neox);
            }
            float *dx = dev_from(x, sizeof(float) * T * n);
            OK(seam_cuda_rope(NULL, dx, T, n_heads, head_dim, rope_dims[rd], 1e6f, 0.25f, neox, step, &err));
            to_host(got, dx, sizeof(float) * T * n);
            for (int p = 0; p < T; p++)
                for (int h = 0; h < n_heads; h++)
                    for (int i = 0; i < head_dim; i++) {
                        // the pair partner of i, whose input also feeds the output
                        const int half = rope_dims[rd] / 2, at = p * n + h * head_dim;
                        const int j = i >= rope_dims[rd] ? i : neox ? (i < half ? i + half : i - half) : i ^ 1;
                        const float tol = 1e-6f * (fabsf(x[at + i]) + fabsf(x[at + j])) + 1e-7f;
                        cr_assert(fabsf(got[at + i] - want[at + i]) <= tol,
                                  "neox %d, rope_dim %d, pos %d, head %d [%d]: cuda %g, reference %g", neox,
                                  rope_dims[rd], positions[p], h, i, got[at + i], want[at + i]);
                    }
            seam_cuda_free(dx);
            free(x), free(want), free(got);
        }
    seam_cuda_free(step);
}

Test(cuda, elementwise_ops_match_reference) {
    require_device();
    uint64_t rng = 12;
    const int n = 5000;
    float *a = random_floats(n, 4.0f, &rng), *b = random_floats(n, 1.0f, &rng);
    float *want = malloc(sizeof(float) * n), *got = malloc(sizeof(float) * n);
    float *da = dev_alloc(sizeof(float) * n), *db = dev_from(b, sizeof(float) * n);
    for (int op = 0; op < 4; op++) {
        static const char *names[] = {"scale", "add", "swiglu", "softcap"};
        memcpy(want, a, sizeof(float) * n);
        OK(seam_cuda_upload(da, a, sizeof(float) * n, &err));
        if (op == 0) {
            cpu_scale(want, 0.37f, n);
            OK(seam_cuda_scale(NULL, da, 0.37f, n, &err));
        } else if (op == 1) {
            for (int i = 0; i < n; i++) want[i] += b[i];
            OK(seam_cuda_add(NULL, da, db, n, &err));
        } else if (op == 2) {
            cpu_swiglu(want, b, n);
            OK(seam_cuda_swiglu(NULL, da, db, n, &err));
        } else {
            for (int i = 0; i < n; i++) want[i] = 3.0f * tanhf(want[i] / 3.0f);  // as engine_forward's soft-capping
            OK(seam_cuda_softcap(NULL, da, 3.0f, n, &err));
        }
        to_host(got, da, sizeof(float) * n);
        const float rel = op < 2 ? 0.0f : 1e-6f;  // scale and add: bitwise
        for (int i = 0; i < n; i++)
            cr_assert(fabsf(got[i] - want[i]) <= rel * fabsf(want[i]) + (op < 2 ? 0.0f : 1e-30f),
                      "%s [%d]: cuda %g, reference %g", names[op], i, got[i], want[i]);
    }
    seam_cuda_free(da), seam_cuda_free(db);
    free(a), free(b), free(want), free(got);
}

Test(cuda, geglu_matches_reference_bitwise) {
    // Every f16 value as a gate (the table's whole domain, and beyond +-10).
    require_device();
    uint64_t rng = 13;
    const int n = 1 << 16;
    float *gate = malloc(sizeof(float) * n), *up = random_floats(n, 1.0f, &rng), *got = malloc(sizeof(float) * n);
    for (int i = 0; i < n; i++) gate[i] = seam_f16_to_f32((seam_f16)i);
    float *dg = dev_from(gate, sizeof(float) * n), *du = dev_from(up, sizeof(float) * n);
    cpu_geglu(gate, up, n);
    OK(seam_cuda_geglu(NULL, dg, du, n, &err));
    to_host(got, dg, sizeof(float) * n);
    for (int i = 0; i < n; i++) {
        if (isnan(gate[i])) cr_assert(isnan(got[i]), "f16 %#x: cuda %g, reference NaN", i, got[i]);
        else cr_assert(memcmp(&got[i], &gate[i], sizeof(float)) == 0, "f16 %#x: cuda %g, reference %g", i, got[i], gate[i]);
    }
    seam_cuda_free(dg), seam_cuda_free(du);
    free(gate), free(up), free(got);
}

Test(cuda, softmax_matches_reference) {
    require_device();
    uint64_t rng = 14;
    const int rows = 3, n = 1000;
    float *x = random_floats(rows * n, 5.0f, &rng), *got = malloc(sizeof(float) * rows * n);
    float *dx = dev_from(x, sizeof(float) * rows * n);
    for (int r = 0; r < rows; r++) cpu_softmax(x + r * n, n);
    OK(seam_cuda_softmax(NULL, dx, rows, n, &err));
    to_host(got, dx, sizeof(float) * rows * n);
    for (int i = 0; i < rows * n; i++)
        cr_assert(fabsf(got[i] - x[i]) <= 1e-6f * x[i] + 1e-12f, "[%d]: cuda %g, reference %g", i, got[i], x[i]);
    seam_cuda_free(dx);
    free(x), free(got);
}

// A cache of rows positions on the device and its host copy, of types k, v.
typedef struct {
    seam_cuda_kv dev;
    uint8_t *k, *v;  // host: (rows, row bytes), a position's heads one after another, as on the device
    size_t k_row, v_row;
    int head_dim;
} test_cache;

static test_cache cache_new(uint32_t k_type, uint32_t v_type, int n_kv, int head_dim, int rows) {
    test_cache c = {.dev = {NULL, NULL, k_type, v_type, rows}, .head_dim = head_dim};
    const uint64_t kv_dim = (uint64_t)n_kv * head_dim;
    c.k_row = ggml_row_bytes(k_type, kv_dim), c.v_row = ggml_row_bytes(v_type, kv_dim);
    c.k = calloc((size_t)rows, c.k_row), c.v = calloc((size_t)rows, c.v_row);
    c.dev.k = dev_from(c.k, c.k_row * rows), c.dev.v = dev_from(c.v, c.v_row * rows);
    return c;
}

static void cache_free(test_cache *c) {
    seam_cuda_free(c->dev.k), seam_cuda_free(c->dev.v);
    free(c->k), free(c->v);
}

static cpu_kv cache_view(const test_cache *c) {
    return (cpu_kv){.k = c->k, .v = c->v, .k_row = c->k_row, .v_row = c->v_row,
                    .k_head = ggml_row_bytes(c->dev.k_type, (uint64_t)c->head_dim),
                    .v_head = ggml_row_bytes(c->dev.v_type, (uint64_t)c->head_dim), .k_type = c->dev.k_type,
                    .v_type = c->dev.v_type, .ring = c->dev.rows};
}

// The append writes row pos % rows as cpu_kv_store does (f16 and q8_0 alike,
// bit for bit) and nothing else; a position past the context writes nothing.
Test(cuda, kv_append_writes_one_position) {
    require_device();
    uint64_t rng = 15;
    const int kv_dim = 5 * 64, n_ctx = 10, rows = 6;  // 5 KV heads: the launch's last block part idle
    static const uint32_t types[][2] = {{GGML_TYPE_F16, GGML_TYPE_F16}, {GGML_TYPE_Q8_0, GGML_TYPE_Q8_0},
                                        {GGML_TYPE_F16, GGML_TYPE_Q8_0}};
    for (size_t ty = 0; ty < sizeof types / sizeof *types; ty++) {
        float *k = random_floats(kv_dim, 1.0f, &rng), *v = random_floats(kv_dim, 1.0f, &rng);
        test_cache c = cache_new(types[ty][0], types[ty][1], kv_dim / 64, 64, rows);
        float *dkv[2] = {dev_from(k, sizeof(float) * kv_dim), dev_from(v, sizeof(float) * kv_dim)};
        seam_cuda_step *step = dev_step(0, 7), *bad = dev_step(0, n_ctx);
        OK(seam_cuda_kv_append(NULL, &c.dev, dkv[0], dkv[1], kv_dim, n_ctx, step, &err));
        OK(seam_cuda_kv_append(NULL, &c.dev, dkv[0], dkv[1], kv_dim, n_ctx, bad, &err));  // skipped: past the cache
        cpu_kv_store(c.dev.k_type, c.k + c.k_row * (7 % rows), k, kv_dim);  // the rest stays zero
        cpu_kv_store(c.dev.v_type, c.v + c.v_row * (7 % rows), v, kv_dim);
        for (int h = 0; h < 2; h++) {
            const size_t bytes = (h ? c.v_row : c.k_row) * rows;
            uint8_t *got = malloc(bytes);
            to_host(got, h ? c.dev.v : c.dev.k, bytes);
            for (size_t i = 0; i < bytes; i++)
                cr_assert_eq(got[i], (h ? c.v : c.k)[i], "%s cache (%s), byte %zu of row %zu: %#x, want %#x",
                             h ? "V" : "K", ggml_type_name(h ? c.dev.v_type : c.dev.k_type), i % (h ? c.v_row : c.k_row),
                             i / (h ? c.v_row : c.k_row), got[i], (h ? c.v : c.k)[i]);
            free(got);
        }
        seam_cuda_free(dkv[0]), seam_cuda_free(dkv[1]), seam_cuda_free(step), seam_cuda_free(bad);
        cache_free(&c);
        free(k), free(v);
    }
}

// The rotation of a quantised cache: bit for bit cpu_fwht, for llama.cpp's
// block sizes.
Test(cuda, fwht_matches_reference_bitwise) {
    require_device();
    uint64_t rng = 19;
    static const int blocks[] = {64, 128, 256};
    for (size_t b = 0; b < sizeof blocks / sizeof *blocks; b++) {
        const int n = 4 * blocks[b];
        float *x = random_floats(n, 3.0f, &rng), *got = malloc(sizeof(float) * n);
        float *dx = dev_from(x, sizeof(float) * n);
        cpu_fwht(x, n, blocks[b]);
        OK(seam_cuda_fwht(NULL, dx, n, blocks[b], &err));
        to_host(got, dx, sizeof(float) * n);
        cr_assert(bitwise_equal(got, x, n), "fwht of blocks of %d differs from cpu_fwht", blocks[b]);
        seam_cuda_free(dx);
        free(x), free(got);
    }
}

// A layer's caches of random keys and values written by cpu_kv_store, and
// queries, with the reference of cpu_attention_head for every head.
typedef struct {
    int n_heads, n_kv, head_dim, n_ctx, n_swa, pos, rows;  // rows < n_ctx: a ring
} att_shape;

static void attention_reference(const att_shape *s, const float *q, const cpu_kv *kv, float *out) {
    const int t1 = s->pos + 1, t0 = s->n_swa > 0 && t1 > s->n_swa ? t1 - s->n_swa : 0;
    const size_t scratch_floats = cpu_attention_scratch_floats(s->n_ctx, s->head_dim);
    float *scratch = malloc(sizeof(float) * scratch_floats);
    for (int h = 0; h < s->n_heads; h++) {
        const int kvh = h / (s->n_heads / s->n_kv);
        cpu_kv head = *kv;
        head.k += kvh * kv->k_head;
        head.v += kvh * kv->v_head;
        cpu_attention_head(out + h * s->head_dim, q + h * s->head_dim, &head, t0, t1, s->head_dim,
                           1.0f / sqrtf((float)s->head_dim), scratch, scratch_floats);
    }
    free(scratch);
}

static void check_attention(const float *got, const float *want, int n, bool flash, const char *what) {
    const float abs_tol = flash ? 2e-3f : 2e-4f, rel_tol = flash ? 1e-2f : 1e-3f;
    for (int i = 0; i < n; i++)
        cr_assert(fabsf(got[i] - want[i]) <= abs_tol + rel_tol * fabsf(want[i]), "%s [%d]: cuda %g, reference %g", what,
                  i, got[i], want[i]);
}

Test(cuda, attention_matches_reference) {
    require_device();
    uint64_t rng = 16;
    const att_shape shapes[] = {
        {8, 2, 128, 1000, 0, 700, 1000},  // qwen3-like GQA, a long context
        {4, 1, 256, 700, 512, 650, 700},  // gemma3's sliding layer: the window starts at 139
        {4, 1, 256, 700, 512, 650, 608},  // ... in a ring of window + 96 rows
        {4, 1, 256, 700, 512, 300, 608},  // ... before the window fills
        {6, 3, 64, 50, 0, 0, 50},         // the first token
        {2, 2, 80, 40, 0, 33, 40},        // head_dim 80: lanes past the head's chunks idle (f16 only)
        {4, 2, 96, 64, 0, 63, 64},        // head_dim 96: 3 q8_0 blocks a head, an idle quad of lanes
        {2, 1, 64, 70000, 0, 69999, 70000},  // scores past any device's shared memory (227 KiB): in global scratch
    };
    static const uint32_t types[][2] = {{GGML_TYPE_F16, GGML_TYPE_F16}, {GGML_TYPE_Q8_0, GGML_TYPE_Q8_0},
                                        {GGML_TYPE_F16, GGML_TYPE_Q8_0}, {GGML_TYPE_Q8_0, GGML_TYPE_F16}};
    for (size_t sc = 0; sc < sizeof shapes / sizeof *shapes; sc++)
        for (size_t ty = 0; ty < sizeof types / sizeof *types; ty++) {
            const att_shape *s = &shapes[sc];
            const bool flash = types[ty][0] != GGML_TYPE_F16 || types[ty][1] != GGML_TYPE_F16;
            if (flash && s->head_dim % QK8_0) continue;
            const int q_dim = s->n_heads * s->head_dim, kv_dim = s->n_kv * s->head_dim;
            float *q = random_floats(q_dim, 1.0f, &rng), *x = malloc(sizeof(float) * kv_dim);
            float *want = malloc(sizeof(float) * q_dim), *got = malloc(sizeof(float) * q_dim);
            test_cache c = cache_new(types[ty][0], types[ty][1], s->n_kv, s->head_dim, s->rows);
            for (int t = 0; t <= s->pos; t++) {  // a ring keeps the last rows positions
                for (int i = 0; i < kv_dim; i++) x[i] = test_rng_normal(&rng);
                cpu_kv_store(c.dev.k_type, c.k + c.k_row * (t % s->rows), x, kv_dim);
                for (int i = 0; i < kv_dim; i++) x[i] = test_rng_normal(&rng);
                cpu_kv_store(c.dev.v_type, c.v + c.v_row * (t % s->rows), x, kv_dim);
            }
            OK(seam_cuda_upload(c.dev.k, c.k, c.k_row * s->rows, &err));
            OK(seam_cuda_upload(c.dev.v, c.v, c.v_row * s->rows, &err));
            const cpu_kv view = cache_view(&c);
            attention_reference(s, q, &view, want);
            float *dq = dev_from(q, sizeof(float) * q_dim), *dout = dev_alloc(sizeof(float) * q_dim);
            float *scores = dev_alloc(sizeof(float) * s->n_heads * s->n_ctx);
            seam_cuda_step *step = dev_step(0, s->pos);
            if (s->n_ctx > 65536) {  // past the shared memory, scratch is needed
                seam_error e = {{0}};
                cr_assert_eq(seam_cuda_attention(NULL, dout, dq, &c.dev, s->n_heads, s->n_kv, s->head_dim, s->n_ctx,
                                                 s->n_swa, 1.0f, NULL, step, &e), -1);
                cr_assert(strstr(e.msg, "scores buffer"), "%s", e.msg);
            }
            OK(seam_cuda_attention(NULL, dout, dq, &c.dev, s->n_heads, s->n_kv, s->head_dim, s->n_ctx, s->n_swa,
                                   1.0f / sqrtf((float)s->head_dim), scores, step, &err));
            to_host(got, dout, sizeof(float) * q_dim);
            char what[96];
            snprintf(what, sizeof what, "shape %zu, K %s, V %s", sc, ggml_type_name(types[ty][0]),
                     ggml_type_name(types[ty][1]));
            check_attention(got, want, q_dim, flash, what);
            seam_cuda_free(step);
            step = dev_step(0, s->n_ctx);  // past the cache: NaN
            OK(seam_cuda_attention(NULL, dout, dq, &c.dev, s->n_heads, s->n_kv, s->head_dim, s->n_ctx, s->n_swa, 1.0f,
                                   scores, step, &err));
            to_host(got, dout, sizeof(float) * q_dim);
            for (int i = 0; i < q_dim; i++) cr_assert(isnan(got[i]), "bad position left %g", got[i]);
            seam_cuda_free(dq), seam_cuda_free(dout), seam_cuda_free(scores), seam_cuda_free(step);
            cache_free(&c);
            free(q), free(x), free(want), free(got);
        }
}

// One cache, queries at eight positions out of order (the tokens of a
// prefill batch each see the positions up to their own): each output is its
// own position's reference, so a position taken from another token of the
// batch shows.
Test(cuda, attention_at_unsorted_positions) {
    require_device();
    uint64_t rng = 19;
    enum { N_CTX = 48, N_Q = 8 };
    const int positions[N_Q] = {17, 3, 39, 0, 25, 8, 31, 12};
    const att_shape base = {8, 2, 64, N_CTX, 0, 0, N_CTX};
    const int q_dim = base.n_heads * base.head_dim, kv_dim = base.n_kv * base.head_dim;
    test_cache c = cache_new(GGML_TYPE_F16, GGML_TYPE_F16, base.n_kv, base.head_dim, base.rows);
    float *x = malloc(sizeof(float) * kv_dim);
    for (int t = 0; t < N_CTX; t++) {
        for (int i = 0; i < kv_dim; i++) x[i] = test_rng_normal(&rng);
        cpu_kv_store(c.dev.k_type, c.k + c.k_row * t, x, kv_dim);
        for (int i = 0; i < kv_dim; i++) x[i] = test_rng_normal(&rng);
        cpu_kv_store(c.dev.v_type, c.v + c.v_row * t, x, kv_dim);
    }
    OK(seam_cuda_upload(c.dev.k, c.k, c.k_row * base.rows, &err));
    OK(seam_cuda_upload(c.dev.v, c.v, c.v_row * base.rows, &err));
    const cpu_kv view = cache_view(&c);
    float *want = malloc(sizeof(float) * q_dim), *got = malloc(sizeof(float) * q_dim);
    float *dout = dev_alloc(sizeof(float) * q_dim), *scores = dev_alloc(sizeof(float) * base.n_heads * N_CTX);
    for (int k = 0; k < N_Q; k++) {
        att_shape s = base;
        s.pos = positions[k];
        float *q = random_floats(q_dim, 1.0f, &rng), *dq = dev_from(q, sizeof(float) * q_dim);
        attention_reference(&s, q, &view, want);
        seam_cuda_step *step = dev_step(k, s.pos);
        OK(seam_cuda_attention(NULL, dout, dq, &c.dev, s.n_heads, s.n_kv, s.head_dim, s.n_ctx, s.n_swa,
                               1.0f / sqrtf((float)s.head_dim), scores, step, &err));
        to_host(got, dout, sizeof(float) * q_dim);
        char what[64];
        snprintf(what, sizeof what, "query %d at position %d", k, s.pos);
        check_attention(got, want, q_dim, false, what);
        seam_cuda_free(step), seam_cuda_free(dq);
        free(q);
    }
    seam_cuda_free(dout), seam_cuda_free(scores);
    cache_free(&c);
    free(x), free(want), free(got);
}

Test(cuda, stream_copies_and_events) {
    require_device();
    seam_cuda_stream *s;
    seam_cuda_event *e0, *e1;
    OK(seam_cuda_stream_create(&s, &err));
    OK(seam_cuda_event_create(&e0, &err));
    OK(seam_cuda_event_create(&e1, &err));
    const int n = 1 << 20;
    float *pinned;
    OK(seam_cuda_host_alloc((void **)&pinned, sizeof(float) * n, &err));
    for (int i = 0; i < n; i++) pinned[i] = (float)i;
    float *dx = dev_alloc(sizeof(float) * n);
    OK(seam_cuda_event_record(e0, s, &err));
    OK(seam_cuda_copy_h2d(s, dx, pinned, sizeof(float) * n, &err));
    OK(seam_cuda_scale(s, dx, 2.0f, n, &err));
    OK(seam_cuda_copy_d2h(s, pinned, dx, sizeof(float) * n, &err));
    OK(seam_cuda_event_record(e1, s, &err));
    float ms = -1;
    OK(seam_cuda_event_elapsed_ms(e0, e1, &ms, &err));
    OK(seam_cuda_stream_synchronize(s, &err));
    cr_assert_geq(ms, 0.0f);
    for (int i = 0; i < n; i++) cr_assert_eq(pinned[i], 2.0f * i, "[%d] = %g", i, pinned[i]);
    cr_log_info("8 MiB there and back with a scale: %.3f ms", ms);
    seam_cuda_free(dx), seam_cuda_host_free(pinned);
    seam_cuda_event_destroy(e0), seam_cuda_event_destroy(e1), seam_cuda_stream_destroy(s);
}

// The ops of the captured token below, on s: KV append and attention, timed
// by events (recorded inside the capture when s is capturing).
static void enqueue_token(seam_cuda_stream *s, const test_cache *c, const att_shape *sh, const float *din, float *dout,
                          const seam_cuda_step *step, seam_cuda_event *e0, seam_cuda_event *e1) {
    const int q_dim = sh->n_heads * sh->head_dim, kv_dim = sh->n_kv * sh->head_dim;
    OK(seam_cuda_event_record(e0, s, &err));
    OK(seam_cuda_kv_append(s, &c->dev, din + q_dim, din + q_dim + kv_dim, kv_dim, sh->n_ctx, step, &err));
    OK(seam_cuda_attention(s, dout, din, &c->dev, sh->n_heads, sh->n_kv, sh->head_dim, sh->n_ctx, 0,
                           1.0f / sqrtf((float)sh->head_dim), NULL, step, &err));
    OK(seam_cuda_event_record(e1, s, &err));
}

Test(cuda, graph_replays_with_the_step_buffer) {
    // A captured token (KV append, attention, timed by events recorded inside
    // the capture) replayed for positions 0..5: only the step and the inputs
    // change, by copies enqueued before each launch. Position 0 runs eagerly,
    // as the engine's first token does, so that every kernel has run once
    // (and its module is loaded) before the capture.
    require_device();
    uint64_t rng = 17;
    const att_shape sh = {4, 2, 64, 8, 0, 0, 8};
    const int q_dim = sh.n_heads * sh.head_dim, kv_dim = sh.n_kv * sh.head_dim;
    test_cache c = cache_new(GGML_TYPE_F16, GGML_TYPE_F16, sh.n_kv, sh.head_dim, sh.rows);
    const cpu_kv view = cache_view(&c);
    float *want = malloc(sizeof(float) * q_dim), *in;  // in: q, k, v and the step, pinned
    OK(seam_cuda_host_alloc((void **)&in, sizeof(float) * (q_dim + 2 * kv_dim) + sizeof(seam_cuda_step), &err));
    seam_cuda_step *host_step = (seam_cuda_step *)(in + q_dim + 2 * kv_dim);
    float *out;
    OK(seam_cuda_host_alloc((void **)&out, sizeof(float) * q_dim, &err));
    float *din = dev_alloc(sizeof(float) * (q_dim + 2 * kv_dim)), *dout = dev_alloc(sizeof(float) * q_dim);
    seam_cuda_step *step = dev_alloc(sizeof(seam_cuda_step));
    seam_cuda_stream *s;
    seam_cuda_event *e0, *e1;
    seam_cuda_graph *g = NULL;
    OK(seam_cuda_stream_create(&s, &err));
    OK(seam_cuda_event_create(&e0, &err));
    OK(seam_cuda_event_create(&e1, &err));
    for (int pos = 0; pos < 6; pos++) {
        for (int i = 0; i < q_dim + 2 * kv_dim; i++) in[i] = test_rng_normal(&rng);
        *host_step = (seam_cuda_step){.token = 0, .pos = pos};
        cpu_kv_store(GGML_TYPE_F16, c.k + c.k_row * pos, in + q_dim, kv_dim);
        cpu_kv_store(GGML_TYPE_F16, c.v + c.v_row * pos, in + q_dim + kv_dim, kv_dim);
        att_shape at = sh;
        at.pos = pos;
        attention_reference(&at, in, &view, want);
        OK(seam_cuda_copy_h2d(s, din, in, sizeof(float) * (q_dim + 2 * kv_dim), &err));
        OK(seam_cuda_copy_h2d(s, step, host_step, sizeof *host_step, &err));
        if (pos == 0) {
            enqueue_token(s, &c, &sh, din, dout, step, e0, e1);
        } else {
            if (!g) {
                OK(seam_cuda_graph_begin(s, &err));
                enqueue_token(s, &c, &sh, din, dout, step, e0, e1);
                OK(seam_cuda_graph_end(s, &g, &err));
            }
            OK(seam_cuda_graph_launch(g, s, &err));
        }
        OK(seam_cuda_copy_d2h(s, out, dout, sizeof(float) * q_dim, &err));
        OK(seam_cuda_stream_synchronize(s, &err));  // before the pinned inputs change
        char what[32];
        snprintf(what, sizeof what, "%s at pos %d", pos ? "replay" : "eager run", pos);
        check_attention(out, want, q_dim, false, what);
        float ms = -1;
        OK(seam_cuda_event_elapsed_ms(e0, e1, &ms, &err));
        cr_assert_geq(ms, 0.0f, "events %s: %g ms", pos ? "inside the graph" : "around the eager run", ms);
    }
    seam_cuda_graph_destroy(g);
    seam_cuda_event_destroy(e0), seam_cuda_event_destroy(e1), seam_cuda_stream_destroy(s);
    seam_cuda_free(din), seam_cuda_free(dout), seam_cuda_free(step);
    seam_cuda_host_free(in), seam_cuda_host_free(out);
    cache_free(&c);
    free(want);
}

// The router on the device against cpu_moe_route: the same experts in the
// same rank order and their weights, over random logits (and a logit row
// with exact ties, which go to the lower index).
Test(cuda, moe_route_matches_cpu_moe_route) {
    require_device();
    uint64_t rng = 21;
    static const int shapes[][2] = {{8, 2}, {128, 8}, {60, 4}, {256, 8}, {1000, 64}};
    for (size_t sh = 0; sh < sizeof shapes / sizeof *shapes; sh++) {
        const int n_expert = shapes[sh][0], k = shapes[sh][1];
        for (int rep = 0; rep < 20; rep++) {
            float *logits = random_floats(n_expert, 2.0f, &rng);
            if (rep == 0)
                for (int i = 0; i < n_expert; i++) logits[i] = (float)(i % 3);  // ties
            seam_config c = {.n_expert = n_expert, .n_expert_used = k};
            float *probs = malloc(sizeof(float) * (size_t)n_expert);
            memcpy(probs, logits, sizeof(float) * (size_t)n_expert);
            int want_idx[64];
            float want_w[64], got_w[64];
            int32_t got_idx[64];
            cpu_moe_route(&c, probs, want_idx, want_w);
            float *dl = dev_from(logits, sizeof(float) * (size_t)n_expert), *dw = dev_alloc(sizeof(float) * 64);
            int32_t *di = dev_alloc(sizeof(int32_t) * 64);
            OK(seam_cuda_moe_route(NULL, dl, n_expert, k, di, dw, &err));
            to_host(got_idx, di, sizeof(int32_t) * (size_t)k);
            to_host(got_w, dw, sizeof(float) * (size_t)k);
            for (int j = 0; j < k; j++) {
                cr_assert_eq(got_idx[j], want_idx[j], "%d of %d experts, rep %d: rank %d is %d, want %d", k, n_expert,
                             rep, j, got_idx[j], want_idx[j]);
                cr_assert(fabsf(got_w[j] - want_w[j]) <= 1e-5f * fabsf(want_w[j]) + 1e-7f,
                          "%d of %d experts, rep %d: weight %d is %g, want %g", k, n_expert, rep, j, got_w[j], want_w[j]);
            }
            seam_cuda_free(dl), seam_cuda_free(dw), seam_cuda_free(di);
            free(logits), free(probs);
        }
    }
}

// One expert of a stack through the index in device memory, every expert in
// turn, against that expert's rows on the host; an index out of range gives
// NaN rows. Then the rank-ordered weighted sum.
Test(cuda, matvec_expert_reads_the_chosen_slice) {
    require_device();
    uint64_t rng = 22;
    const uint32_t types[] = {GGML_TYPE_Q4_K, GGML_TYPE_Q6_K, GGML_TYPE_Q8_0};
    for (size_t t = 0; t < sizeof types / sizeof *types; t++) {
        const uint32_t type = types[t];
        const int n_expert = 5, rows = 24;
        const int64_t cols = cols_for(type);
        const uint64_t rb = ggml_row_bytes(type, (uint64_t)cols);
        uint8_t *w = random_weights(type, (int64_t)rows * n_expert, cols, &rng);
        void *dw = dev_from(w, rb * rows * n_expert);
        float *x = random_floats((int)cols, 1.0f, &rng), out[24];
        void *act = reference_act(type, x, cols);
        float *dx = dev_from(x, sizeof(float) * (size_t)cols), *dout = dev_alloc(sizeof out);
        void *scratch = dev_alloc(seam_cuda_matvec_scratch_bytes(cols));
        OK(seam_cuda_quantize(NULL, type, dx, scratch, cols, &err));
        for (int ex = -1; ex <= n_expert; ex++) {
            int32_t *di = dev_from(&ex, sizeof ex);
            OK(seam_cuda_matvec_expert(NULL, type, dw, n_expert, rows, cols, di, scratch, dout, &err));
            to_host(out, dout, sizeof out);
            for (int r = 0; r < rows; r++) {
                if (ex < 0 || ex == n_expert) {
                    cr_assert(isnan(out[r]), "%s expert %d (out of range): row %d = %g, want NaN", ggml_type_name(type),
                              ex, r, out[r]);
                    continue;
                }
                float mag, want = reference_dot(type, w + ((size_t)ex * rows + r) * rb, act, cols, &mag);
                cr_assert(fabsf(out[r] - want) <= 1e-5f * mag + 1e-6f, "%s expert %d row %d: cuda %g, reference %g",
                          ggml_type_name(type), ex, r, out[r], want);
            }
            seam_cuda_free(di);
        }
        seam_cuda_free(dw), seam_cuda_free(dx), seam_cuda_free(dout), seam_cuda_free(scratch);
        free(w), free(x), free(act);
    }
    // acc = y0 w0, then acc + y1 w1: each step rounded as the C loop rounds it
    const int n = 300;
    float *y0 = random_floats(n, 1.0f, &rng), *y1 = random_floats(n, 1.0f, &rng), wts[2] = {0.625f, 0.375f};
    float *d0 = dev_from(y0, sizeof(float) * n), *d1 = dev_from(y1, sizeof(float) * n), *dwt = dev_from(wts, sizeof wts);
    float *dacc = dev_alloc(sizeof(float) * n), *acc = malloc(sizeof(float) * n);
    OK(seam_cuda_moe_accumulate(NULL, dacc, d0, dwt, 0, n, &err));
    OK(seam_cuda_moe_accumulate(NULL, dacc, d1, dwt, 1, n, &err));
    to_host(acc, dacc, sizeof(float) * n);
    for (int i = 0; i < n; i++) {
        volatile float a = y0[i] * wts[0], b = y1[i] * wts[1];
        cr_assert_eq(acc[i], a + b, "moe_accumulate [%d]: %g, want %g", i, acc[i], a + b);
    }
    seam_cuda_free(d0), seam_cuda_free(d1), seam_cuda_free(dwt), seam_cuda_free(dacc);
    free(y0), free(y1), free(acc);
}

#else

Test(cuda, not_built) { test_no_gpu("seam was built without CUDA"); }

#endif
