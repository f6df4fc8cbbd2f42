// matvec.cu — quantised matrix times vector: the activation quantisers, the
// matvec of every weight type, the embedding row, and their host checks.
//
// The matvec is the one kernel that matters: decode is bandwidth-bound, and
// almost every byte of a token is a weight byte read here exactly once. Its
// floor is weight bytes / memory bandwidth (an H200: ~4.3 TB/s measured).
#include "blocks.cuh"

// ---------------------------------------------------------------- activation quantisers
//
// Latency-bound (a few KB per token): one warp per activation block.

constexpr int Q_WARPS = 4;  // activation blocks per thread block

// x (n_blocks * 256) -> Q8_K (the device layout of blocks.cuh), as
// seam_quantize_row_q8_K. Lane l holds x[8l..8l+7].
__global__ __launch_bounds__(32 * Q_WARPS) void quantize_q8_K_kernel(const float *__restrict__ x, int8_t *__restrict__ qs,
                                                                     float *__restrict__ d, int16_t *__restrict__ bsums,
                                                                     int n_blocks) {
    const int b = blockIdx.x * Q_WARPS + threadIdx.x / 32, lane = threadIdx.x % 32;
    if (b >= n_blocks) return;
    const float4 *x4 = (const float4 *)(x + (size_t)b * QK_K + 8 * lane);
    const float4 v0 = x4[0], v1 = x4[1];
    const float v[8] = {v0.x, v0.y, v0.z, v0.w, v1.x, v1.y, v1.z, v1.w};
    // The reference keeps the first value of largest magnitude (with its
    // sign): the lane's first strict maximum, then across lanes the larger
    // magnitude or, on a tie, the lower index. NaN never wins, as there.
    float amax = 0.0f, max = 0.0f;
    int imax = QK_K;
#pragma unroll
    for (int i = 0; i < 8; i++) {
        if (fabsf(v[i]) > amax) amax = fabsf(v[i]), max = v[i], imax = 8 * lane + i;
    }
#pragma unroll
    for (int off = 16; off > 0; off >>= 1) {
        const float oa = __shfl_xor_sync(0xffffffffu, amax, off), om = __shfl_xor_sync(0xffffffffu, max, off);
        const int oi = __shfl_xor_sync(0xffffffffu, imax, off);
        if (oa > amax || (oa == amax && oi < imax)) amax = oa, max = om, imax = oi;
    }
    int q[8] = {0};
    if (amax != 0.0f) {  // else the reference's zero block: d, qs and bsums all 0
        const float iscale = -127.f / max;
#pragma unroll
        for (int i = 0; i < 8; i++) q[i] = min(__float2int_rn(iscale * v[i]), 127);  // nearest_int: ties to even
        if (lane == 0) d[b] = 1 / iscale;
    } else if (lane == 0) {
        d[b] = 0.0f;
    }
    uint2 packed;
    packed.x = (q[0] & 255) | (q[1] & 255) << 8 | (q[2] & 255) << 16 | (uint32_t)(q[3] & 255) << 24;
    packed.y = (q[4] & 255) | (q[5] & 255) << 8 | (q[6] & 255) << 16 | (uint32_t)(q[7] & 255) << 24;
    *(uint2 *)(qs + (size_t)b * QK_K + 8 * lane) = packed;
    int sum = q[0] + q[1] + q[2] + q[3] + q[4] + q[5] + q[6] + q[7];
    sum += __shfl_xor_sync(0xffffffffu, sum, 1);  // bsums[g]: the 16 values of lanes 2g, 2g+1
    if (lane % 2 == 0) bsums[(size_t)b * (QK_K / 16) + lane / 2] = (int16_t)sum;
}

// x (n_blocks * 32) -> Q8_0 (the device layout), as seam_quantize_row_q8_0
// (quantize_q8_0_block over the warp; d the value of its f16). Lane l holds
// x[l]; a warp past the last block leaves as a whole.
__global__ __launch_bounds__(32 * Q_WARPS) void quantize_q8_0_kernel(const float *__restrict__ x, int8_t *__restrict__ qs,
                                                                     float *__restrict__ d, int n_blocks) {
    const int b = blockIdx.x * Q_WARPS + threadIdx.x / 32, lane = threadIdx.x % 32;
    if (b >= n_blocks) return;
    const float v = x[(size_t)b * QK8_0 + lane];
    const float scale = f16_to_f32(quantize_q8_0_block<1>(&v, qs + (size_t)b * QK8_0 + lane));
    if (lane == 0) d[b] = scale;
}

// x (n) -> f16, as seam_f32_to_f16.
__global__ void quantize_f16_kernel(const float *__restrict__ x, uint16_t *__restrict__ y, int n) {
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = f16_bits(x[i]);
}

extern "C" bool seam_cuda_reads_type(uint32_t type) {
    return with_type(type, [](auto) {});
}

extern "C" uint64_t seam_cuda_matvec_scratch_bytes(int64_t cols) {
    return cols > 0 ? 2 * (uint64_t)cols : 0;  // f16 is the widest format: 2 bytes a value (Q8_K: 1.14)
}

extern "C" int seam_cuda_quantize(seam_cuda_stream *s, uint32_t weight_type, const float *x, void *act, int64_t n,
                                  seam_error *e) {
    const cudaStream_t st = stream_of(s);
    if (!x || !act || !aligned(x, 16) || !aligned(act, 16))
        return seam_fail(e, "quantize: x and act must be 16-byte aligned device pointers");
    if (n <= 0 || n > INT32_MAX) return seam_fail(e, "quantize: n = %lld is out of range", (long long)n);
    switch (weight_type) {
    case GGML_TYPE_Q4_K: case GGML_TYPE_Q5_K: case GGML_TYPE_Q6_K: {
        if (n % QK_K) return seam_fail(e, "quantize: Q8_K needs a multiple of %d values (got %lld)", QK_K, (long long)n);
        const act_view a = act_layout<QK_K>(act, n);
        SEAM_LAUNCH(quantize_q8_K_kernel, ceil_div(n / QK_K, Q_WARPS), 32 * Q_WARPS, 0, st,
            x, (int8_t *)a.qs, (float *)a.d, (int16_t *)a.bsums, (int)(n / QK_K));
        CUDA_LAUNCHED(e, "quantize_q8_K_kernel");
        return 0;
    }
    case GGML_TYPE_Q4_0: case GGML_TYPE_Q5_0: case GGML_TYPE_Q8_0: {
        if (n % QK8_0) return seam_fail(e, "quantize: Q8_0 needs a multiple of %d values (got %lld)", QK8_0, (long long)n);
        const act_view a = act_layout<QK8_0>(act, n);
        SEAM_LAUNCH(quantize_q8_0_kernel, ceil_div(n / QK8_0, Q_WARPS), 32 * Q_WARPS, 0, st, x, (int8_t *)a.qs,
                    (float *)a.d, (int)(n / QK8_0));
        CUDA_LAUNCHED(e, "quantize_q8_0_kernel");
        return 0;
    }
    case GGML_TYPE_F16:
        SEAM_LAUNCH(quantize_f16_kernel, ceil_div(n, 256), 256, 0, st, x, (uint16_t *)act, (int)n);
        CUDA_LAUNCHED(e, "quantize_f16_kernel");
        return 0;
    case GGML_TYPE_F32:
        CUDA_TRY(e, cudaMemcpyAsync(act, x, (size_t)n * sizeof(float), cudaMemcpyDeviceToDevice, st));
        return 0;
    default:
        return seam_fail(e, "quantize: no CUDA kernel for weight type %u", weight_type);
    }
}

// ---------------------------------------------------------------- matvec
//
// One warp per row. Lane l takes chunks l, l+32, l+64... of the row (see
// blocks.cuh), so each step of the warp reads a contiguous stretch of the
// row (a Q4_K step: four blocks, 576 bytes, as 16-byte loads), and the
// activation, shared by every row, comes from L1/L2. The row's partial sums
// meet in one warp reduction; no shared memory, no block barrier.

constexpr int MV_WARPS = 4;  // rows per thread block

// expert (device, or NULL): the matrix is the expert'th of n_expert stored
// expert_bytes apart, the index read here so that a replayed graph follows
// the router; an index out of range gives NaN rows.
template <class T>
__global__ __launch_bounds__(32 * MV_WARPS) void matvec_kernel(const uint8_t *__restrict__ w, uint64_t row_bytes,
                                                              const act_view act, float *__restrict__ out, int rows,
                                                              int n_chunks, const int32_t *__restrict__ expert,
                                                              int n_expert, uint64_t expert_bytes) {
    const int row = blockIdx.x * MV_WARPS + threadIdx.x / 32, lane = threadIdx.x % 32;
    if (row >= rows) return;  // the whole warp: the shuffles below see all 32 lanes
    if (expert) {
        const int e = *expert;
        if (e < 0 || e >= n_expert) {
            if (lane == 0) out[row] = __int_as_float(0x7fc00000);
            return;
        }
        w += (uint64_t)e * expert_bytes;
    }
    const uint8_t *wr = w + (uint64_t)row * row_bytes;
    float acc = 0.0f;
#pragma unroll 2
    for (int c = lane; c < n_chunks; c += 32) {
        const int b = c / T::CHUNKS, j = c % T::CHUNKS;
        acc += T::dot(wr + (uint64_t)b * T::BYTES, act, b, j);
    }
    acc = warp_reduce(acc, op_sum());
    if (lane == 0) out[row] = acc;
}

struct type_shape {
    int qk, align;
    const char *name;
};

// The shape of a weight type, and whether (rows, cols) of it at w can be
// computed with; fills e and returns -1 when not.
static int check_matrix(const char *op, uint32_t type, const void *w, int64_t rows, int64_t cols, type_shape *sh,
                        seam_error *e) {
    if (!with_type(type, [&](auto t) {
            using T = decltype(t);
            *sh = {T::QK, T::ALIGN, T::NAME};
        }))
        return seam_fail(e, "%s: no CUDA kernel for weight type %u (keep this tensor on the CPU)", op, type);
    if (!w) return seam_fail(e, "%s: the weights are NULL", op);
    if (rows <= 0 || rows > INT32_MAX || cols <= 0 || cols % sh->qk || cols / sh->qk > INT32_MAX / 16)
        return seam_fail(e, "%s: bad shape %lld x %lld for %s (cols must be a positive multiple of %d)", op,
                         (long long)rows, (long long)cols, sh->name, sh->qk);
    if (!aligned(w, sh->align))
        return seam_fail(e, "%s: %s weights at %p are not %d-byte aligned (place the tensor at an aligned offset)", op,
                         sh->name, w, sh->align);
    return 0;
}

// The launch behind the matvecs: expert NULL for a plain matrix.
static int launch_matvec(seam_cuda_stream *s, uint32_t type, const void *w, int64_t rows, int64_t cols,
                         const void *act, float *out, const int32_t *expert, int n_expert, seam_error *e) {
    type_shape sh;
    if (check_matrix("matvec", type, w, rows, cols, &sh, e)) return -1;
    if (!act || !out || !aligned(act, 16)) return seam_fail(e, "matvec: act (16-byte aligned) and out must be device pointers");
    with_type(type, [&](auto t) {
        using T = decltype(t);
        const uint64_t row_bytes = (uint64_t)(cols / T::QK) * T::BYTES;
        SEAM_LAUNCH(matvec_kernel<T>, ceil_div(rows, MV_WARPS), 32 * MV_WARPS, 0, stream_of(s),
            (const uint8_t *)w, row_bytes, act_layout<T::Act::QK>(act, cols), out, (int)rows,
            (int)(cols / T::QK * T::CHUNKS), expert, n_expert, row_bytes * (uint64_t)rows);
    });
    CUDA_LAUNCHED(e, "matvec_kernel");
    return 0;
}

extern "C" int seam_cuda_matvec_quantized(seam_cuda_stream *s, uint32_t type, const void *w, int64_t rows,
                                          int64_t cols, const void *act, float *out, seam_error *e) {
    return launch_matvec(s, type, w, rows, cols, act, out, NULL, 0, e);
}

extern "C" int seam_cuda_matvec_expert(seam_cuda_stream *s, uint32_t type, const void *w, int n_expert, int64_t rows,
                                       int64_t cols, const int32_t *expert, const void *act, float *out,
                                       seam_error *e) {
    if (!expert) return seam_fail(e, "matvec_expert: the expert index must be a device pointer");
    if (n_expert < 1) return seam_fail(e, "matvec_expert: n_expert = %d must be positive", n_expert);
    // the experts' rows must be alignable as one matrix's: check the whole stack
    type_shape sh;
    if (check_matrix("matvec_expert", type, w, rows * n_expert, cols, &sh, e)) return -1;
    return launch_matvec(s, type, w, rows, cols, act, out, expert, n_expert, e);
}

extern "C" int seam_cuda_matvec(seam_cuda_stream *s, uint32_t type, const void *w, int64_t rows, int64_t cols,
                                const float *x, float *out, void *scratch, seam_error *e) {
    type_shape sh;
    if (check_matrix("matvec", type, w, rows, cols, &sh, e)) return -1;
    if (type == GGML_TYPE_F32) return seam_cuda_matvec_quantized(s, type, w, rows, cols, x, out, e);  // x is its own format
    if (seam_cuda_quantize(s, type, x, scratch, cols, e)) return -1;
    return seam_cuda_matvec_quantized(s, type, w, rows, cols, scratch, out, e);
}

// ---------------------------------------------------------------- embedding
//
// Latency-bound (one row, a few KB): one thread per chunk of the row.

template <class T>
__global__ void embedding_kernel(const uint8_t *__restrict__ table, uint64_t row_bytes, int64_t n_rows, int n_chunks,
                                 float scale, const seam_cuda_step *__restrict__ step, float *__restrict__ out) {
    const int c = blockIdx.x * blockDim.x + threadIdx.x;
    if (c >= n_chunks) return;
    const int b = c / T::CHUNKS, j = c % T::CHUNKS, token = step->token;
    if (token < 0 || token >= n_rows) {  // the host checks the token; a bad one shows as NaN
        for (int i = 0; i < T::QK / T::CHUNKS; i++) out[(size_t)c * (T::QK / T::CHUNKS) + i] = __int_as_float(0x7fc00000);
        return;
    }
    T::dequant(table + (uint64_t)token * row_bytes + (uint64_t)b * T::BYTES, j, scale, out + (size_t)b * T::QK);
}

extern "C" int seam_cuda_embedding(seam_cuda_stream *s, uint32_t type, const void *table, int64_t n_rows, int64_t cols,
                                   float scale, const seam_cuda_step *step, float *out, seam_error *e) {
    type_shape sh;
    if (check_matrix("embedding", type, table, n_rows, cols, &sh, e)) return -1;
    if (!step || !out) return seam_fail(e, "embedding: step and out must be device pointers");
    with_type(type, [&](auto t) {
        using T = decltype(t);
        const int n_chunks = (int)(cols / T::QK * T::CHUNKS);
        SEAM_LAUNCH(embedding_kernel<T>, ceil_div(n_chunks, 128), 128, 0, stream_of(s),
            (const uint8_t *)table, (uint64_t)(cols / T::QK) * T::BYTES, n_rows, n_chunks, scale, step, out);
    });
    CUDA_LAUNCHED(e, "embedding_kernel");
    return 0;
}

// ---------------------------------------------------------------- dequantisation to f16
//
// The GEMM path's weights (gemm.cu): a whole matrix into f16, one thread per
// chunk. Memory-bound: it reads the matrix once (0.56 bytes a weight for
// Q4_K) and writes 2 bytes a weight, so its floor is about 2.6 bytes a
// weight / bandwidth; the stores are 2-byte ones, a chunk's runs apart, so
// the writes coalesce only per run (16 weights for the K types).

template <class T>
__global__ void dequantize_f16_kernel(const uint8_t *__restrict__ w, uint64_t row_bytes, int64_t n_chunks,
                                      int chunks_per_row, int64_t cols, uint16_t *__restrict__ out) {
    const int64_t c = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (c >= n_chunks) return;
    const int64_t row = c / chunks_per_row;
    const int k = (int)(c % chunks_per_row), b = k / T::CHUNKS, j = k % T::CHUNKS;
    T::dequant(w + (uint64_t)row * row_bytes + (uint64_t)b * T::BYTES, j, 1.0f, out + row * cols + (int64_t)b * T::QK);
}

extern "C" int seam_cuda_dequantize_f16(seam_cuda_stream *s, uint32_t type, const void *w, int64_t rows, int64_t cols,
                                        uint16_t *out, seam_error *e) {
    type_shape sh;
    if (check_matrix("dequantize_f16", type, w, rows, cols, &sh, e)) return -1;
    if (!out) return seam_fail(e, "dequantize_f16: out must be a device pointer");
    with_type(type, [&](auto t) {
        using T = decltype(t);
        const int chunks_per_row = (int)(cols / T::QK * T::CHUNKS);
        const int64_t n_chunks = rows * chunks_per_row;
        SEAM_LAUNCH(dequantize_f16_kernel<T>, (unsigned)ceil_div(n_chunks, 256), 256, 0, stream_of(s),
            (const uint8_t *)w, (uint64_t)(cols / T::QK) * T::BYTES, n_chunks, chunks_per_row, cols, out);
    });
    CUDA_LAUNCHED(e, "dequantize_f16_kernel");
    return 0;
}

// ---------------------------------------------------------------- host checks

// The activation act (n values, quant.c's blocks for Q8_K and Q8_0) in the
// device layout, in a malloc'd buffer; NULL when out of memory.
template <class Act> static void *to_device_layout(const void *act, int64_t n) {
    int8_t *buf = (int8_t *)malloc((size_t)n * sizeof(float));  // the largest layout, F32's
    if (!buf) return NULL;
    const act_view a = act_layout<Act::QK>(buf, n);
    for (int64_t b = 0; b < n / Act::QK; b++) {
        if constexpr (Act::QK == QK_K) {
            const block_q8_K *y = (const block_q8_K *)act + b;
            memcpy((int8_t *)a.qs + b * QK_K, y->qs, QK_K);
            ((float *)a.d)[b] = y->d;
            memcpy((int16_t *)a.bsums + b * (QK_K / 16), y->bsums, sizeof y->bsums);
        } else if constexpr (Act::QK == QK8_0) {
            const block_q8_0 *y = (const block_q8_0 *)act + b;
            memcpy((int8_t *)a.qs + b * QK8_0, y->qs, QK8_0);
            ((float *)a.d)[b] = seam_f16_to_f32(y->d);
        } else {  // F16, F32: the values as they are
            memcpy((int8_t *)a.qs + b * 16, (const int8_t *)act + b * 16, 16);
        }
    }
    return buf;
}

extern "C" float seam_cuda_host_vec_dot(uint32_t type, const void *w, const void *act, int64_t n) {
    float sum = NAN;
    with_type(type, [&](auto t) {
        using T = decltype(t);
        void *dev_act;
        if (n <= 0 || n % T::QK || !(dev_act = to_device_layout<typename T::Act>(act, n))) return;
        const act_view a = act_layout<T::Act::QK>(dev_act, n);
        sum = 0.0f;
        for (int64_t b = 0; b < n / T::QK; b++) {
            for (int j = 0; j < T::CHUNKS; j++) sum += T::dot((const uint8_t *)w + b * T::BYTES, a, (int)b, j);
        }
        free(dev_act);
    });
    return sum;
}

template <class Y> static int host_dequantize(uint32_t type, const void *src, Y *dst, int64_t n) {
    int rc = -1;
    with_type(type, [&](auto t) {
        using T = decltype(t);
        if (n <= 0 || n % T::QK) return;
        for (int64_t b = 0; b < n / T::QK; b++) {
            for (int j = 0; j < T::CHUNKS; j++) T::dequant((const uint8_t *)src + b * T::BYTES, j, 1.0f, dst + b * T::QK);
        }
        rc = 0;
    });
    return rc;
}

extern "C" int seam_cuda_host_dequantize(uint32_t type, const void *src, float *dst, int64_t n) {
    return host_dequantize(type, src, dst, n);
}

extern "C" int seam_cuda_host_dequantize_f16(uint32_t type, const void *src, uint16_t *dst, int64_t n) {
    return host_dequantize(type, src, dst, n);
}
