// norm_rope.cu — RMS norm (of the residual stream, of each q/k head) and
// rotary position embedding, with cpu_rmsnorm's and cpu_rope's rounding.
//
// Both are latency-bound at decode: a few thousand floats, one pass each.
#include <math.h>

#include "cuda_common.cuh"

constexpr int NORM_THREADS = 256;

// One block per vector. The sum of squares is accumulated in double, of the
// float products, as cpu_rmsnorm does: the per-thread and tree order differs
// from the C loop only far below float resolution, so mean, scale and the
// outputs come out equal to the C reference (bar a once-in-1e9 rounding tie).
// out may be x: each thread reads and writes only its own elements.
__global__ __launch_bounds__(NORM_THREADS) void rmsnorm_kernel(float *out, const float *x, const float *__restrict__ w,
                                                               int n, float eps) {
    const float *xr = x + (size_t)blockIdx.x * n;
    float *o = out + (size_t)blockIdx.x * n;
    double ss = 0.0;
    for (int i = threadIdx.x; i < n; i += NORM_THREADS) ss += (double)(xr[i] * xr[i]);
    ss = block_reduce(ss, op_sum());
    const float mean = (float)(ss / n);
    const float scale = 1.0f / sqrtf(mean + eps);  // IEEE sqrt and division: nvcc's defaults without fast math
    for (int i = threadIdx.x; i < n; i += NORM_THREADS) o[i] = (xr[i] * scale) * w[i];
}

extern "C" int seam_cuda_rmsnorm(seam_cuda_stream *s, float *out, const float *x, const float *weight, int rows, int n,
                                 float eps, seam_error *e) {
    if (!out || !x || !weight) return seam_fail(e, "rmsnorm: out, x and weight must be device pointers");
    if (rows <= 0 || n <= 0) return seam_fail(e, "rmsnorm: bad shape %d x %d", rows, n);
    SEAM_LAUNCH(rmsnorm_kernel, rows, NORM_THREADS, 0, stream_of(s), out, x, weight, n, eps);
    CUDA_LAUNCHED(e, "rmsnorm_kernel");
    return 0;
}

constexpr int ROPE_THREADS = 64;

// One block per head of each token (token t = blockIdx.x / n_heads, at
// step[t].pos), one thread per rotated pair (i, i + rope_dim/2) for
// NEOX, (2i, 2i+1) otherwise. The angle is cpu_rope_angles': theta_i = pos
// times theta_scale, i times over, in float (theta_scale is the host's powf,
// the same libm as the engine), then freq_scale * theta_i. The rotation
// rounds as the CPU's rope does (ggml's, as gcc contracts it): the second
// product rounded, the first fused with it; cosf and sinf are CUDA's, within
// 2 ulp of the host's, the one source of difference.
__global__ __launch_bounds__(ROPE_THREADS) void rope_kernel(float *vec, int head_dim, int rope_dim, float theta_scale,
                                                            float freq_scale, bool neox, int n_heads,
                                                            const seam_cuda_step *__restrict__ step) {
    float *v = vec + (size_t)blockIdx.x * head_dim;
    const int half = rope_dim / 2;
    const float pos = (float)step[blockIdx.x / n_heads].pos;
    for (int i = threadIdx.x; i < half; i += ROPE_THREADS) {
        float theta = pos;
        for (int k = 0; k < i; k++) theta *= theta_scale;
        float sin_t, cos_t;
        sincosf(freq_scale * theta, &sin_t, &cos_t);
        const int a = neox ? i : 2 * i, b = neox ? i + half : 2 * i + 1;
        const float x0 = v[a], x1 = v[b];
        v[a] = __fmaf_rn(x0, cos_t, -__fmul_rn(x1, sin_t));
        v[b] = __fmaf_rn(x0, sin_t, __fmul_rn(x1, cos_t));
    }
}

extern "C" int seam_cuda_rope(seam_cuda_stream *s, float *vec, int n_tokens, int n_heads, int head_dim, int rope_dim,
                              float base, float freq_scale, bool neox, const seam_cuda_step *step, seam_error *e) {
    if (!vec || !step) return seam_fail(e, "rope: vec and step must be device pointers");
    if (n_tokens <= 0 || n_heads <= 0 || head_dim <= 0 || rope_dim <= 0 || rope_dim % 2 || rope_dim > head_dim)
        return seam_fail(e, "rope: bad shape (%d tokens of %d heads of %d, rope_dim %d: it must be even and at most "
                            "head_dim)", n_tokens, n_heads, head_dim, rope_dim);
    const float theta_scale = powf(base, -2.0f / (float)rope_dim);  // on the host, as cpu_rope computes it
    SEAM_LAUNCH(rope_kernel, n_tokens * n_heads, ROPE_THREADS, 0, stream_of(s), vec, head_dim, rope_dim, theta_scale,
                freq_scale, neox, n_heads, step);
    CUDA_LAUNCHED(e, "rope_kernel");
    return 0;
}
