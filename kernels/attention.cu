// attention.cu — the KV cache append, one decoded token's attention, and
// the softmax of rows (block_softmax, cuda_common.cuh, which MoE routing
// shares).
//
// The caches are the engine's layout: per layer (n_ctx, kv_dim) f16, the
// kv_dim = n_kv_heads * head_dim values of a position contiguous.
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
    softmax_kernel<<<rows, SOFTMAX_THREADS, 0, stream_of(s)>>>(x, n);
    CUDA_LAUNCHED(e, "softmax_kernel");
    return 0;
}

// ---------------------------------------------------------------- KV append

// Latency-bound (2 kv_dim values): one thread per value.
__global__ void kv_append_kernel(uint16_t *__restrict__ kc, uint16_t *__restrict__ vc, const float *__restrict__ k,
                                 const float *__restrict__ v, int kv_dim, int n_ctx,
                                 const seam_cuda_step *__restrict__ step) {
    const int i = blockIdx.x * blockDim.x + threadIdx.x, pos = step->pos;
    if (i >= kv_dim || pos < 0 || pos >= n_ctx) return;  // the host checks pos; never write outside the cache
    kc[(size_t)pos * kv_dim + i] = f16_bits(k[i]);
    vc[(size_t)pos * kv_dim + i] = f16_bits(v[i]);
}

extern "C" int seam_cuda_kv_append(seam_cuda_stream *s, uint16_t *k_cache, uint16_t *v_cache, const float *k,
                                   const float *v, int kv_dim, int n_ctx, const seam_cuda_step *step, seam_error *e) {
    if (!k_cache || !v_cache || !k || !v || !step) return seam_fail(e, "kv_append: NULL device pointer");
    if (kv_dim <= 0 || n_ctx <= 0) return seam_fail(e, "kv_append: bad shape (kv_dim %d, n_ctx %d)", kv_dim, n_ctx);
    kv_append_kernel<<<ceil_div(kv_dim, 128), 128, 0, stream_of(s)>>>(k_cache, v_cache, k, v, kv_dim, n_ctx, step);
    CUDA_LAUNCHED(e, "kv_append_kernel");
    return 0;
}

// ---------------------------------------------------------------- attention
//
// One block per query head. Lanes work in groups of G (a power of two, the
// head's 16-byte chunks rounded up: head_dim 64 -> 8, 128 -> 16, 256 -> 32):
// a group reads one position's key or value row of the head as one 16-byte
// load per lane, so a warp reads 32/G whole rows at once, coalesced.
//   1. q rounded to f16 (as cpu_attention_head), each lane keeping its 8.
//   2. scores: group g takes positions g, g + n_groups, ...; lane dot, group
//      shuffle sum (float, of exact f16 x f16 products: the C sums them in
//      double), times scale, into shared memory.
//   3. block softmax of the scores in place.
//   4. out: each group sums weight (rounded to f16) x value rows of its
//      positions into 8 floats a lane, the groups' partials meet in shared
//      memory and are summed in group order.
// Bound: the K and V rows of the window, 4 head_dim bytes a position, read
// once per query head (the heads of a KV group share them through L2). With
// one block per head only n_heads SMs work, so at decode this kernel is
// latency-bound: each lane keeps ATT_INFLIGHT rows in flight, and splitting
// positions over blocks (flash-decoding) is the next step if it shows in
// the timeline.

constexpr int ATT_THREADS = 256;
constexpr int ATT_MAX_HEAD_DIM = 256;  // 8 values x 32 lanes: one 16-byte chunk per lane
constexpr int ATT_INFLIGHT = 4;        // rows a lane loads before it uses the first: latency hiding
static int att_max_dynamic_smem = -1;  // bytes of scores the kernel may have; -1 before attention_init

// q (8 values) . the 8 halves of k, in float (each product exact).
__device__ inline float dot8(const float q[8], uint4 k) {
    const uint32_t w[4] = {k.x, k.y, k.z, k.w};
    float sum = 0.0f;
#pragma unroll
    for (int i = 0; i < 4; i++) {
        sum += q[2 * i] * f16_to_f32((uint16_t)w[i]);
        sum += q[2 * i + 1] * f16_to_f32((uint16_t)(w[i] >> 16));
    }
    return sum;
}

// acc (8 values) += p * the 8 halves of v.
__device__ inline void axpy8(float acc[8], float p, uint4 v) {
    const uint32_t w[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
    for (int i = 0; i < 4; i++) {
        acc[2 * i] += p * f16_to_f32((uint16_t)w[i]);
        acc[2 * i + 1] += p * f16_to_f32((uint16_t)(w[i] >> 16));
    }
}

__global__ __launch_bounds__(ATT_THREADS) void attention_kernel(float *__restrict__ out, const float *__restrict__ q,
                                                                const uint16_t *__restrict__ kc,
                                                                const uint16_t *__restrict__ vc, int group,
                                                                int head_dim, int kv_dim, int n_ctx, int n_swa,
                                                                float scale, const seam_cuda_step *__restrict__ step) {
    extern __shared__ float att[];           // (t1 - t0) scores, then weights
    __shared__ float part[8 * ATT_THREADS];  // (n_groups, head_dim) partial outputs: at most (ATT_THREADS / G) * 8G
    const int h = blockIdx.x, tid = threadIdx.x;
    float *o = out + (size_t)h * head_dim;
    const int pos = step->pos;
    if (pos < 0 || pos >= n_ctx) {  // the host checks pos; a bad one shows as NaN
        for (int d = tid; d < head_dim; d += ATT_THREADS) o[d] = __int_as_float(0x7fc00000);
        return;
    }
    const int t1 = pos + 1, t0 = n_swa > 0 && t1 > n_swa ? t1 - n_swa : 0, n = t1 - t0;
    const int chunks = head_dim / 8;
    int G = 1;
    while (G < chunks) G *= 2;
    const int n_groups = ATT_THREADS / G, g = tid / G, c = tid % G;
    const bool active = c < chunks;  // lanes past the head's last chunk only join the shuffles
    const size_t head = (size_t)(h / group) * head_dim + 8 * c;
    const uint16_t *kh = kc + head + (size_t)t0 * kv_dim, *vh = vc + head + (size_t)t0 * kv_dim;
    const uint4 zero = make_uint4(0, 0, 0, 0);

    // 1. q as f16, this lane's 8 values
    float qf[8] = {0};
    if (active) {
        const float *qh = q + (size_t)h * head_dim + 8 * c;
#pragma unroll
        for (int k = 0; k < 8; k++) qf[k] = f16_to_f32(f16_bits(qh[k]));
    }

    // 2. scores: a step covers ATT_INFLIGHT * n_groups positions, group g
    // taking g, g + n_groups, ... Every thread runs the same number of steps,
    // so the full-warp shuffles always see all 32 lanes.
    for (int base = 0; base < n; base += ATT_INFLIGHT * n_groups) {
        uint4 kv[ATT_INFLIGHT];
#pragma unroll
        for (int u = 0; u < ATT_INFLIGHT; u++) {
            const int i = base + u * n_groups + g;
            kv[u] = active && i < n ? __ldg((const uint4 *)(kh + (size_t)i * kv_dim)) : zero;
        }
#pragma unroll
        for (int u = 0; u < ATT_INFLIGHT; u++) {
            const int i = base + u * n_groups + g;
            float sum = dot8(qf, kv[u]);
            for (int off = G / 2; off > 0; off /= 2) sum += __shfl_xor_sync(0xffffffffu, sum, off);
            if (c == 0 && i < n) att[i] = sum * scale;
        }
    }
    __syncthreads();

    // 3. weights
    block_softmax(att, n);

    // 4. out: group g sums positions g, g + n_groups, ... into acc
    float acc[8] = {0};
    if (active) {
        for (int base = g; base < n; base += ATT_INFLIGHT * n_groups) {
            uint4 vv[ATT_INFLIGHT];
            float p[ATT_INFLIGHT];
#pragma unroll
            for (int u = 0; u < ATT_INFLIGHT; u++) {
                const int i = base + u * n_groups;
                vv[u] = i < n ? __ldg((const uint4 *)(vh + (size_t)i * kv_dim)) : zero;
                p[u] = i < n ? f16_to_f32(f16_bits(att[i])) : 0.0f;
            }
#pragma unroll
            for (int u = 0; u < ATT_INFLIGHT; u++) axpy8(acc, p[u], vv[u]);
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

int attention_init(int device, seam_error *e) {
    cudaFuncAttributes fa;
    int optin = 0;
    CUDA_TRY(e, cudaFuncGetAttributes(&fa, attention_kernel));
    CUDA_TRY(e, cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, device));
    const int dynamic = optin - (int)fa.sharedSizeBytes;
    CUDA_TRY(e, cudaFuncSetAttribute(attention_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, dynamic));
    att_max_dynamic_smem = dynamic;
    return 0;
}

extern "C" int seam_cuda_attention(seam_cuda_stream *s, float *out, const float *q, const uint16_t *k_cache,
                                   const uint16_t *v_cache, int n_heads, int n_kv_heads, int head_dim, int n_ctx,
                                   int n_swa, float scale, const seam_cuda_step *step, seam_error *e) {
    if (!out || !q || !k_cache || !v_cache || !step) return seam_fail(e, "attention: NULL device pointer");
    if (!aligned(k_cache, 16) || !aligned(v_cache, 16))
        return seam_fail(e, "attention: the K and V caches must be 16-byte aligned");
    if (n_heads <= 0 || n_kv_heads <= 0 || n_heads % n_kv_heads)
        return seam_fail(e, "attention: %d query heads do not share %d KV heads evenly", n_heads, n_kv_heads);
    if (head_dim <= 0 || head_dim % 8 || head_dim > ATT_MAX_HEAD_DIM)
        return seam_fail(e, "attention: head_dim %d must be a multiple of 8, at most %d", head_dim, ATT_MAX_HEAD_DIM);
    if (n_ctx <= 0 || n_swa < 0) return seam_fail(e, "attention: bad context (n_ctx %d, n_swa %d)", n_ctx, n_swa);
    if (att_max_dynamic_smem < 0) return seam_fail(e, "attention: call seam_cuda_init first");
    const int window = n_swa > 0 && n_swa < n_ctx ? n_swa : n_ctx;  // most positions one token attends
    const size_t smem = (size_t)window * sizeof(float);
    if (smem > (size_t)att_max_dynamic_smem)
        return seam_fail(e, "attention: the scores of %d positions need %zu bytes of shared memory, the device has %d "
                         "(lower the context)", window, smem, att_max_dynamic_smem);
    attention_kernel<<<n_heads, ATT_THREADS, smem, stream_of(s)>>>(out, q, k_cache, v_cache, n_heads / n_kv_heads,
                                                                   head_dim, n_kv_heads * head_dim, n_ctx, n_swa,
                                                                   scale, step);
    CUDA_LAUNCHED(e, "attention_kernel");
    return 0;
}
