// attention.cu — the KV cache append, the Walsh-Hadamard rotation of a
// quantised cache, one decoded token's attention, and
// the softmax of rows (block_softmax, cuda_common.cuh, which MoE routing
// shares).
//
// The device caches (seam_cuda_kv): per layer a row per position it holds (a
// sliding layer: a ring), each row the kv_dim = n_kv_heads * head_dim values
// of a position in f16 or q8_0 blocks -- not the host cache's head-major
// order (engine.h), which the device never copies.
#include <math.h>

#include "cuda_common.cuh"

// ---------------------------------------------------------------- softmax

constexpr int SOFTMAX_THREADS = 256;

// Latency-bound (a row of n_expert or n_ctx values): one block per row.
__global__ __launch_bounds__(SOFTMAX_THREADS) void softmax_kernel(float *x, int n) {
    block_softmax(x + (size_t)blockIdx.x * n, n);
}

extern "C" int seam_cuda_softmax(seam_cuda_stream *s, float *x, int rows, int n, seam_error *e) {
    if (!x) return seam_fail(e, "softmax: x must be a device pointer");
    if (rows <= 0 || n <= 0) return seam_fail(e, "softmax: bad shape %d x %d", rows, n);
    SEAM_LAUNCH(softmax_kernel, rows, SOFTMAX_THREADS, 0, stream_of(s), x, n);
    CUDA_LAUNCHED(e, "softmax_kernel");
    return 0;
}

// ---------------------------------------------------------------- KV append

// Row r of a cache of type (kv_dim values) gets x: thread i writes value i
// (f16, seam_f32_to_f16's rounding) or block i (q8_0, quantize_q8_0_block
// alone), bit for bit.
__device__ inline void kv_store(void *cache, uint32_t type, size_t r, const float *__restrict__ x, int kv_dim, int i) {
    if (type == GGML_TYPE_Q8_0) {
        if (i >= kv_dim / QK8_0) return;
        block_q8_0 *b = (block_q8_0 *)((uint8_t *)cache + r * (size_t)(kv_dim / QK8_0) * sizeof(block_q8_0)) + i;
        b->d = quantize_q8_0_block<QK8_0>(x + i * QK8_0, b->qs);
    } else {
        if (i < kv_dim) ((uint16_t *)cache)[r * (size_t)kv_dim + i] = f16_bits(x[i]);
    }
}

// Latency-bound (2 kv_dim values): one thread per value (or q8_0 block).
__global__ void kv_append_kernel(seam_cuda_kv kv, const float *__restrict__ k, const float *__restrict__ v, int kv_dim,
                                 int n_ctx, const seam_cuda_step *__restrict__ step) {
    const int i = blockIdx.x * blockDim.x + threadIdx.x, pos = step->pos;
    if (pos < 0 || pos >= n_ctx) return;  // the host checks pos; never write outside the cache
    const size_t r = (size_t)(pos % kv.rows);
    kv_store(kv.k, kv.k_type, r, k, kv_dim, i);
    kv_store(kv.v, kv.v_type, r, v, kv_dim, i);
}

static bool cache_type_ok(uint32_t t) { return t == GGML_TYPE_F16 || t == GGML_TYPE_Q8_0; }

extern "C" int seam_cuda_kv_append(seam_cuda_stream *s, const seam_cuda_kv *kv, const float *k, const float *v,
                                   int kv_dim, int n_ctx, const seam_cuda_step *step, seam_error *e) {
    if (!kv || !kv->k || !kv->v || !k || !v || !step) return seam_fail(e, "kv_append: NULL device pointer");
    if (!cache_type_ok(kv->k_type) || !cache_type_ok(kv->v_type))
        return seam_fail(e, "kv_append: the caches must be f16 or q8_0");
    if (kv_dim <= 0 || n_ctx <= 0 || kv->rows <= 0 || kv->rows > n_ctx ||
        ((kv->k_type == GGML_TYPE_Q8_0 || kv->v_type == GGML_TYPE_Q8_0) && kv_dim % QK8_0))
        return seam_fail(e, "kv_append: bad shape (kv_dim %d, n_ctx %d, rows %d)", kv_dim, n_ctx, kv->rows);
    SEAM_LAUNCH(kv_append_kernel, ceil_div(kv_dim, 128), 128, 0, stream_of(s), *kv, k, v, kv_dim, n_ctx, step);
    CUDA_LAUNCHED(e, "kv_append_kernel");
    return 0;
}

// ---------------------------------------------------------------- Walsh-Hadamard

// One block per chunk of `block` values, one thread per value: the scale,
// then the butterflies of distance 1, 2, .., block / 2 in shared memory --
// cpu_fwht's float operations, so the result is its bit for bit.
__global__ void fwht_kernel(float *x, int block, float scale) {
    SEAM_SHARED_DYNAMIC(float, y);
    float *p = x + (size_t)blockIdx.x * block;
    const int j = threadIdx.x;
    y[j] = p[j] * scale;
    __syncthreads();
    for (int len = 1; len < block; len <<= 1) {
        const bool low = !(j & len);
        const float u = low ? y[j] : 0.0f, w = low ? y[j + len] : 0.0f;
        __syncthreads();
        if (low) y[j] = u + w, y[j + len] = u - w;
        __syncthreads();
    }
    p[j] = y[j];
}

extern "C" int seam_cuda_fwht(seam_cuda_stream *s, float *x, int n, int block, seam_error *e) {
    if (!x) return seam_fail(e, "fwht: x must be a device pointer");
    if (block < 2 || block > 1024 || (block & (block - 1)) || n <= 0 || n % block)
        return seam_fail(e, "fwht: %d values in blocks of %d (a power of two, at most 1024, dividing n)", n, block);
    SEAM_LAUNCH(fwht_kernel, n / block, block, (size_t)block * sizeof(float), stream_of(s), x, block,
                1.0f / sqrtf((float)block));
    CUDA_LAUNCHED(e, "fwht_kernel");
    return 0;
}

// ---------------------------------------------------------------- attention
//
// One block per query head. Lanes work in groups of G (a power of two, the
// head's 8-value chunks rounded up: head_dim 64 -> 8, 128 -> 16, 256 -> 32):
// a group reads one position's key or value row of the head, each lane 8
// values (an f16 row's 16 bytes, or 8 bytes of a q8_0 block and its scale),
// so a warp reads 32/G whole rows at once. Position t's row is t % rows of
// the cache (a sliding layer keeps a ring): the window's n <= rows positions
// run from row t0 % rows, wrapping at most once (ring_row).
//   1. q in K's dot type, each lane keeping its 8: rounded to f16, or
//      quantised to q8_0 as cpu_quantize_input does (the block's 4 lanes
//      share its largest magnitude).
//   2. scores: group g takes positions g, g + n_groups, ...; lane dot
//      (f16: float products of f16 values; q8_0: an integer sum times the two
//      scales), group shuffle sum, times scale, into shared memory.
//   3. block softmax of the scores in place (in shared memory, or where
//      they pass it, in the caller's global scores buffer, L2-resident).
//   4. out: each group sums weight x value rows of its positions into 8
//      floats a lane, the groups' partials meet in shared memory and are
//      summed in group order. An f16 cache's weights are rounded to f16 (as
//      llama.cpp's attention without flash attention); a q8_0 cache's, as
//      its flash attention, are not.
// The float sums run in another order than the CPU's, so results are held
// to a tolerance, not bit equality. Bound: the K and V rows of the window,
// read once per query head (the heads of a KV group share them through L2).
// With one block per head only n_heads SMs work, so at decode this kernel
// is latency-bound: each lane keeps ATT_INFLIGHT rows in flight, and
// splitting positions over blocks (flash-decoding) is the next step if it
// shows in the timeline.

constexpr int ATT_THREADS = 256;
constexpr int ATT_MAX_HEAD_DIM = 256;  // 8 values x 32 lanes: one chunk per lane
constexpr int ATT_INFLIGHT = 4;        // rows a lane loads before it uses the first: latency hiding
static int att_max_dynamic_smem = -1;  // bytes of scores the kernel may have; -1 before attention_init

// One lane's 8 values of a row: an f16 row's 16 bytes, or 8 quants of a
// q8_0 block (in raw.x, raw.y) with the block's scale.
struct chunk8 {
    uint4 raw;
    float d;
};

template <bool Q8> __device__ inline chunk8 load_chunk(const uint8_t *row, int c) {
    chunk8 ch = {make_uint4(0, 0, 0, 0), 0.0f};
    if (!Q8) {
        ch.raw = __ldg((const uint4 *)(row + 16 * c));
    } else {  // block c / 4 (34 bytes: the scale, 32 quants), quants 8 (c % 4) ..; 2-byte aligned
        const uint8_t *b = row + (c >> 2) * sizeof(block_q8_0);
        const unsigned short *w = (const unsigned short *)(b + 2 + (c & 3) * 8);
        ch.d = f16_to_f32(__ldg((const unsigned short *)b));
        ch.raw.x = (uint32_t)__ldg(w) | (uint32_t)__ldg(w + 1) << 16;
        ch.raw.y = (uint32_t)__ldg(w + 2) | (uint32_t)__ldg(w + 3) << 16;
    }
    return ch;
}

// The chunk's 8 values as floats (a q8_0 quant times its scale, rounded, as
// dequantize_row_q8_0 gives it).
template <bool Q8> __device__ inline void chunk_values(const chunk8 &ch, float v[8]) {
    const uint32_t w[4] = {ch.raw.x, ch.raw.y, ch.raw.z, ch.raw.w};
#pragma unroll
    for (int i = 0; i < 8; i++)
        v[i] = Q8 ? (float)(int8_t)(w[i / 4] >> (8 * (i % 4))) * ch.d : f16_to_f32((uint16_t)(w[i / 2] >> (16 * (i % 2))));
}

// The query's 8 values as the dot takes them. f16: rounded (qi unused).
// q8_0: quants qi and the block's scale in *dq (every lane of the block
// agrees), the block's 4 lanes quantising it together (quantize_q8_0_block).
template <bool Q8> __device__ inline void query_chunk(const float x[8], float qf[8], int qi[8], float *dq) {
    if (!Q8) {
#pragma unroll
        for (int k = 0; k < 8; k++) qf[k] = f16_to_f32(f16_bits(x[k]));
        return;
    }
    int8_t q[8];
    *dq = f16_to_f32(quantize_q8_0_block<8>(x, q));
#pragma unroll
    for (int k = 0; k < 8; k++) qi[k] = q[k];
}

// The row of the window's i-th position (i < n <= rows), its first in row r0
// < rows: r0 + i < 2 rows, so one subtraction wraps it, not a division.
__device__ inline int ring_row(int r0, int i, int rows) { return r0 + i < rows ? r0 + i : r0 + i - rows; }

template <bool K8> __device__ inline float chunk_dot(const float qf[8], const int qi[8], float dq, const chunk8 &k) {
    if (!K8) {
        float kv[8], sum = 0.0f;
        chunk_values<false>(k, kv);
#pragma unroll
        for (int i = 0; i < 8; i++) sum += qf[i] * kv[i];
        return sum;
    }
    const uint32_t w[2] = {k.raw.x, k.raw.y};
    int isum = 0;
#pragma unroll
    for (int i = 0; i < 8; i++) isum += qi[i] * (int)(int8_t)(w[i / 4] >> (8 * (i % 4)));
    return (float)isum * (k.d * dq);
}

template <bool K8, bool V8>
__global__ __launch_bounds__(ATT_THREADS) void attention_kernel(float *__restrict__ out, const float *__restrict__ q,
                                                                const uint8_t *__restrict__ kc,
                                                                const uint8_t *__restrict__ vc, int group,
                                                                int head_dim, int kv_dim, int n_ctx, int rows,
                                                                int n_swa, float scale, float *scores,
                                                                const seam_cuda_step *__restrict__ step) {
    SEAM_SHARED_DYNAMIC(float, att_shared);
    SEAM_SHARED(float, part, 8 * ATT_THREADS);  // (n_groups, head_dim) partial outputs: at most (ATT_THREADS / G) * 8G
    const int h = blockIdx.x, tid = threadIdx.x;
    float *att = scores ? scores + (size_t)h * n_ctx : att_shared;  // (t1 - t0) scores, then weights
    float *o = out + (size_t)h * head_dim;
    const int pos = step->pos;
    if (pos < 0 || pos >= n_ctx) {  // the host checks pos; a bad one shows as NaN
        for (int d = tid; d < head_dim; d += ATT_THREADS) o[d] = __int_as_float(0x7fc00000);
        return;
    }
    const int t1 = pos + 1, t0 = n_swa > 0 && t1 > n_swa ? t1 - n_swa : 0, n = t1 - t0, r0 = t0 % rows;
    const int chunks = head_dim / 8;
    int G = 1;
    while (G < chunks) G *= 2;
    const int n_groups = ATT_THREADS / G, g = tid / G, c = tid % G;
    const bool active = c < chunks;  // lanes past the head's last chunk only join the shuffles
    // bytes of one head's values, and of a position's row (n_kv_heads heads)
    const size_t k_head = K8 ? (size_t)(head_dim / QK8_0) * sizeof(block_q8_0) : (size_t)head_dim * 2;
    const size_t v_head = V8 ? (size_t)(head_dim / QK8_0) * sizeof(block_q8_0) : (size_t)head_dim * 2;
    const size_t k_row = k_head * (kv_dim / head_dim), v_row = v_head * (kv_dim / head_dim);
    const uint8_t *kh = kc + (size_t)(h / group) * k_head, *vh = vc + (size_t)(h / group) * v_head;

    // 1. q in K's dot type, this lane's 8 values
    float x[8] = {0}, qf[8] = {0}, dq = 0.0f;
    int qi[8] = {0};
    if (active) {
        const float *qh = q + (size_t)h * head_dim + 8 * c;
#pragma unroll
        for (int k = 0; k < 8; k++) x[k] = qh[k];
    }
    query_chunk<K8>(x, qf, qi, &dq);

    // 2. scores: a step covers ATT_INFLIGHT * n_groups positions, group g
    // taking g, g + n_groups, ... Every thread runs the same number of steps,
    // so the full-warp shuffles always see all 32 lanes.
    for (int base = 0; base < n; base += ATT_INFLIGHT * n_groups) {
        chunk8 kv[ATT_INFLIGHT];
#pragma unroll
        for (int u = 0; u < ATT_INFLIGHT; u++) {
            const int i = base + u * n_groups + g;
            kv[u] = active && i < n ? load_chunk<K8>(kh + (size_t)ring_row(r0, i, rows) * k_row, c)
                                    : chunk8{make_uint4(0, 0, 0, 0), 0.0f};
        }
#pragma unroll
        for (int u = 0; u < ATT_INFLIGHT; u++) {
            const int i = base + u * n_groups + g;
            float sum = chunk_dot<K8>(qf, qi, dq, kv[u]);
            for (int off = G / 2; off > 0; off /= 2) sum += __shfl_xor_sync(0xffffffffu, sum, off);
            if (c == 0 && i < n) att[i] = sum * scale;
        }
    }
    __syncthreads();

    // 3. weights
    block_softmax(att, n);

    // 4. out: group g sums positions g, g + n_groups, ... into acc
    constexpr bool flash = K8 || V8;
    float acc[8] = {0};
    if (active) {
        for (int base = g; base < n; base += ATT_INFLIGHT * n_groups) {
            chunk8 vv[ATT_INFLIGHT];
            float p[ATT_INFLIGHT];
#pragma unroll
            for (int u = 0; u < ATT_INFLIGHT; u++) {
                const int i = base + u * n_groups;
                vv[u] = i < n ? load_chunk<V8>(vh + (size_t)ring_row(r0, i, rows) * v_row, c)
                              : chunk8{make_uint4(0, 0, 0, 0), 0.0f};
                p[u] = i < n ? (flash ? att[i] : f16_to_f32(f16_bits(att[i]))) : 0.0f;
            }
#pragma unroll
            for (int u = 0; u < ATT_INFLIGHT; u++) {
                float v[8];
                chunk_values<V8>(vv[u], v);
#pragma unroll
                for (int k = 0; k < 8; k++) acc[k] += p[u] * v[k];
            }
        }
#pragma unroll
        for (int k = 0; k < 8; k++) part[g * head_dim + 8 * c + k] = acc[k];
    }
    __syncthreads();
    for (int d = tid; d < head_dim; d += ATT_THREADS) {
        float sum = 0.0f;
        for (int gg = 0; gg < n_groups; gg++) sum += part[gg * head_dim + d];
        o[d] = sum;
    }
}

typedef void (*attention_fn)(float *, const float *, const uint8_t *, const uint8_t *, int, int, int, int, int, int,
                             float, float *, const seam_cuda_step *);

// The kernel for K's and V's types: [K is q8_0][V is q8_0].
static const attention_fn attention_kernels[2][2] = {
    {attention_kernel<false, false>, attention_kernel<false, true>},
    {attention_kernel<true, false>, attention_kernel<true, true>},
};

int attention_init(int device, seam_error *e) {
    int optin = 0, dynamic = 0;
    CUDA_TRY(e, cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, device));
    for (int i = 0; i < 4; i++) {
        const attention_fn fn = attention_kernels[i / 2][i % 2];
        cudaFuncAttributes fa;
        CUDA_TRY(e, cudaFuncGetAttributes(&fa, (const void *)fn));
        dynamic = optin - (int)fa.sharedSizeBytes;
        CUDA_TRY(e, cudaFuncSetAttribute((const void *)fn, cudaFuncAttributeMaxDynamicSharedMemorySize, dynamic));
        if (i == 0 || dynamic < att_max_dynamic_smem) att_max_dynamic_smem = dynamic;
    }
    return 0;
}

extern "C" int seam_cuda_attention(seam_cuda_stream *s, float *out, const float *q, const seam_cuda_kv *kv, int n_heads,
                                   int n_kv_heads, int head_dim, int n_ctx, int n_swa, float scale, float *scores,
                                   const seam_cuda_step *step, seam_error *e) {
    if (!out || !q || !kv || !kv->k || !kv->v || !step) return seam_fail(e, "attention: NULL device pointer");
    if (!cache_type_ok(kv->k_type) || !cache_type_ok(kv->v_type))
        return seam_fail(e, "attention: the caches must be f16 or q8_0");
    if (!aligned(kv->k, 16) || !aligned(kv->v, 16))
        return seam_fail(e, "attention: the K and V caches must be 16-byte aligned");
    if (n_heads <= 0 || n_kv_heads <= 0 || n_heads % n_kv_heads)
        return seam_fail(e, "attention: %d query heads do not share %d KV heads evenly", n_heads, n_kv_heads);
    const bool k8 = kv->k_type == GGML_TYPE_Q8_0, v8 = kv->v_type == GGML_TYPE_Q8_0;
    if (head_dim <= 0 || head_dim % ((k8 || v8) ? QK8_0 : 8) || head_dim > ATT_MAX_HEAD_DIM)
        return seam_fail(e, "attention: head_dim %d must be a multiple of 8 (32 with a q8_0 cache), at most %d",
                         head_dim, ATT_MAX_HEAD_DIM);
    if (n_ctx <= 0 || n_swa < 0) return seam_fail(e, "attention: bad context (n_ctx %d, n_swa %d)", n_ctx, n_swa);
    const int window = n_swa > 0 && n_swa < n_ctx ? n_swa : n_ctx;  // most positions one token attends
    if (kv->rows < window || kv->rows > n_ctx)
        return seam_fail(e, "attention: a cache of %d rows cannot hold the %d positions a token sees", kv->rows, window);
    if (att_max_dynamic_smem < 0) return seam_fail(e, "attention: call seam_cuda_init first");
    const size_t smem = (size_t)window * sizeof(float);
    const bool shared = smem <= (size_t)att_max_dynamic_smem;
    if (!shared && !scores)
        return seam_fail(e, "attention: the scores of %d positions need %zu bytes, past the %d of shared memory, and "
                         "no scores buffer was given", window, smem, att_max_dynamic_smem);
    SEAM_LAUNCH(attention_kernels[k8][v8], n_heads, ATT_THREADS, shared ? smem : 0, stream_of(s),
        out, q, (const uint8_t *)kv->k, (const uint8_t *)kv->v, n_heads / n_kv_heads, head_dim, n_kv_heads * head_dim,
        n_ctx, kv->rows, n_swa, scale, shared ? NULL : scores, step);
    CUDA_LAUNCHED(e, "attention_kernel");
    return 0;
}
