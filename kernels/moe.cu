// moe.cu — the mixture of experts on the device: the router's choice
// (cpu_moe_route: softmax over the experts, the top k, their weights
// renormalised) and the rank-ordered sum of the chosen experts' outputs.
// The expert matvecs are matvec.cu's, reading the chosen index from device
// memory, so a layer's launches are fixed and its graph replays any routing.
//
// Latency-bound: n_expert ~128 values and k ~8 winners, one block.
#include <math.h>

#include "cuda_common.cuh"
#include "numeric/exact.h"

constexpr int ROUTE_THREADS = 128, ROUTE_MAX_EXPERTS = 1024, ROUTE_MAX_K = 64;

// The better of two candidates (value, index): the larger value, on a tie
// the lower index, as cpu_top_k scans; an index of -1 is no candidate.
static __device__ inline void better(float &v, int &i, float ov, int oi) {
    if (oi >= 0 && (i < 0 || ov > v || (ov == v && oi < i))) v = ov, i = oi;
}

__global__ __launch_bounds__(ROUTE_THREADS) void moe_route_kernel(const float *__restrict__ logits, int n_expert,
                                                                  int k, int32_t *__restrict__ chosen,
                                                                  float *__restrict__ weights) {
    SEAM_SHARED(float, p, ROUTE_MAX_EXPERTS);
    SEAM_SHARED(bool, taken, ROUTE_MAX_EXPERTS);
    SEAM_SHARED(float, best_v, ROUTE_THREADS / 32);
    SEAM_SHARED(int, best_i, ROUTE_THREADS / 32);
    SEAM_SHARED(int, winners, ROUTE_MAX_K);
    for (int i = threadIdx.x; i < n_expert; i += blockDim.x) p[i] = logits[i], taken[i] = false;
    __syncthreads();
    block_softmax(p, n_expert);
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    for (int j = 0; j < k; j++) {
        float v = 0.0f;
        int idx = -1;
        for (int i = threadIdx.x; i < n_expert; i += blockDim.x)
            if (!taken[i]) better(v, idx, p[i], i);
#pragma unroll
        for (int off = 16; off > 0; off >>= 1) {
            const float ov = __shfl_xor_sync(0xffffffffu, v, off);
            const int oi = __shfl_xor_sync(0xffffffffu, idx, off);
            better(v, idx, ov, oi);
        }
        if (lane == 0) best_v[warp] = v, best_i[warp] = idx;
        __syncthreads();
        if (threadIdx.x == 0) {
            for (int w = 1; w < ROUTE_THREADS / 32; w++) better(v, idx, best_v[w], best_i[w]);
            winners[j] = idx;
            taken[idx] = true;
        }
        __syncthreads();
    }
    if (threadIdx.x == 0) {
        double sum = 0.0;
        for (int j = 0; j < k; j++) sum += (double)p[winners[j]];
        const float norm = (float)(sum > EXACT_MOE_MIN_WEIGHT_SUM ? sum : EXACT_MOE_MIN_WEIGHT_SUM);
        for (int j = 0; j < k; j++) {
            chosen[j] = winners[j];
            weights[j] = p[winners[j]] / norm;
        }
    }
}

extern "C" int seam_cuda_moe_route(seam_cuda_stream *s, const float *logits, int n_expert, int k, int32_t *chosen,
                                   float *weights, seam_error *e) {
    if (!logits || !chosen || !weights) return seam_fail(e, "moe_route: NULL device pointer");
    if (n_expert < 1 || n_expert > ROUTE_MAX_EXPERTS || k < 1 || k > ROUTE_MAX_K || k > n_expert)
        return seam_fail(e, "moe_route: %d of %d experts is out of range (at most %d of %d)", k, n_expert, ROUTE_MAX_K,
                         ROUTE_MAX_EXPERTS);
    SEAM_LAUNCH(moe_route_kernel, 1, ROUTE_THREADS, 0, stream_of(s), logits, n_expert, k, chosen, weights);
    CUDA_LAUNCHED(e, "moe_route_kernel");
    return 0;
}

// One thread per element; the product and the sum rounded apart, as the C
// loop (no fused multiply-add).
__global__ void moe_accumulate_kernel(float *__restrict__ acc, const float *__restrict__ y,
                                      const float *__restrict__ weights, int slot, int n) {
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    const float term = __fmul_rn(y[i], weights[slot]);
    acc[i] = slot ? __fadd_rn(acc[i], term) : term;
}

extern "C" int seam_cuda_moe_accumulate(seam_cuda_stream *s, float *acc, const float *y, const float *weights,
                                        int slot, int n, seam_error *e) {
    if (!acc || !y || !weights) return seam_fail(e, "moe_accumulate: NULL device pointer");
    if (n <= 0 || slot < 0) return seam_fail(e, "moe_accumulate: bad n %d or slot %d", n, slot);
    SEAM_LAUNCH(moe_accumulate_kernel, ceil_div(n, 256), 256, 0, stream_of(s), acc, y, weights, slot, n);
    CUDA_LAUNCHED(e, "moe_accumulate_kernel");
    return 0;
}
