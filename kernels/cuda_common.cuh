// cuda_common.cuh — what the kernels/*.cu files share (internal to kernels/):
// the launch and shared-memory spellings, the stream handle, error reports
// that name file and line, f16 rounding as quant.c rounds, warp and block
// reductions.
#ifndef SEAM_CUDA_COMMON_CUH
#define SEAM_CUDA_COMMON_CUH

#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <stdint.h>
#include <string.h>

// A launch, a block's shared arrays and a __device__ array, written once for
// nvcc and for the emulated device (emu/cuda_emu.h, the SEAM_CUDA_EMU
// build, which compiles these files with the host's C++ compiler).
#ifdef SEAM_CUDA_EMU
#include "cuda_emu.h"
#else
#define SEAM_LAUNCH(kernel, grid, block, smem, stream, ...) kernel<<<grid, block, smem, stream>>>(__VA_ARGS__)
#define SEAM_SHARED(type, name, count) __shared__ type name[count]
#define SEAM_SHARED_DYNAMIC(type, name) extern __shared__ type name[]
#define SEAM_DEVICE_ARRAY(type, name, count) __device__ type name[count]
#endif

#include "numeric/quant.h"
#include "seam_cuda.h"

// The kernels reproduce the C reference's IEEE division, sqrt and expf
// accuracy; fast math would trade them for approximations.
#ifdef __USE_FAST_MATH__
#error "kernels/ must not be compiled with --use_fast_math"
#endif

struct seam_cuda_stream {
    cudaStream_t s;
};

static inline cudaStream_t stream_of(const seam_cuda_stream *s) { return s ? s->s : 0; }

// ---------------------------------------------------------------- errors

// "matvec.cu:123: what failed: the CUDA message (its name)", returning -1.
// The error is reported here, so it is cleared from CUDA's last error: left
// there, the next good launch (CUDA_LAUNCHED) would report it as its own.
static inline int cuda_fail_at(seam_error *e, const char *file, int line, const char *what, cudaError_t err) {
    cudaGetLastError();
    const char *base = strrchr(file, '/');
    return seam_fail(e, "kernels/%s:%d: %s failed: %s (%s)", base ? base + 1 : file, line, what,
                     cudaGetErrorString(err), cudaGetErrorName(err));
}

// Returns -1 from the enclosing function when a CUDA call fails.
#define CUDA_TRY(e, call)                                                          \
    do {                                                                           \
        cudaError_t err_ = (call);                                                 \
        if (err_ != cudaSuccess) return cuda_fail_at((e), __FILE__, __LINE__, #call, err_); \
    } while (0)

// After a <<<...>>> launch: the launch's own error (bad configuration, no
// device, a sticky fault of an earlier kernel). Never synchronises.
#define CUDA_LAUNCHED(e, kernel)                                                   \
    do {                                                                           \
        cudaError_t err_ = cudaGetLastError();                                     \
        if (err_ != cudaSuccess) return cuda_fail_at((e), __FILE__, __LINE__, "launch of " kernel, err_); \
    } while (0)

static inline bool aligned(const void *p, unsigned a) { return ((uintptr_t)p & (a - 1)) == 0; }

static inline unsigned ceil_div(int64_t n, int64_t d) { return (unsigned)((n + d - 1) / d); }

// Components that seam_cuda_init prepares (attention.cu, elementwise.cu).
int attention_init(int device, seam_error *e);
int geglu_init(seam_error *e);

// ---------------------------------------------------------------- f16

// f32 -> f16 bits, rounded to nearest even: seam_f32_to_f16 exactly, its
// quiet NaN included (__float2half_rn would give a different NaN).
static __host__ __device__ inline uint16_t f16_bits(float f) {
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)(((u >> 16) & 0x8000u) | 0x7e00u);
    const __half_raw h = __float2half_rn(f);
    return h.x;
}

static __host__ __device__ inline float f16_to_f32(uint16_t h) {
#ifdef __CUDA_ARCH__
    __half_raw r;
    r.x = h;
    return __half2float(__half(r));
#else
    return seam_f16_to_f32(h);
#endif
}

// ---------------------------------------------------------------- reductions

struct op_sum {
    template <class T> __device__ T operator()(T a, T b) const { return a + b; }
};
struct op_max {  // fmaxf drops NaN, as the C references' `x > max ? x : max` scans do
    __device__ float operator()(float a, float b) const { return fmaxf(a, b); }
};

template <class T, class Op> __device__ inline T warp_reduce(T v, Op op) {
#pragma unroll
    for (int off = 16; off > 0; off >>= 1) v = op(v, __shfl_xor_sync(0xffffffffu, v, off));
    return v;
}

// The reduction over the whole block, returned to every thread. Every thread
// of the block must call it (blockDim.x a multiple of 32, at most 1024).
template <class T, class Op> __device__ inline T block_reduce(T v, Op op) {
    SEAM_SHARED(T, partial, 32);
    const int warp = threadIdx.x / 32, n_warps = blockDim.x / 32;
    v = warp_reduce(v, op);
    __syncthreads();  // a previous call may still be reading partial[0]
    if (threadIdx.x % 32 == 0) partial[warp] = v;
    __syncthreads();
    if (threadIdx.x == 0) {
        T r = partial[0];
        for (int w = 1; w < n_warps; w++) r = op(r, partial[w]);
        partial[0] = r;
    }
    __syncthreads();
    return partial[0];
}

// ---------------------------------------------------------------- q8_0

// One q8_0 block (32 values) quantised as seam_quantize_row_q8_0, bit for
// bit: the block is held by 32 / N consecutive lanes of a warp, N values a
// lane (x; the quants into q). Its largest magnitude (a NaN never wins, as
// in the reference's scan), the multiplier 127 / amax, each product clamped
// to +-127 (a NaN or infinite one too) and rounded half to even. Returns the
// block's scale amax / 127 as f16 bits. With N < 32 every lane of the warp
// must call it (the block's lanes meet in shuffles).
template <int N> __device__ inline uint16_t quantize_q8_0_block(const float *x, int8_t *q) {
    static_assert(N >= 1 && N <= QK8_0 && QK8_0 % N == 0, "a lane holds a whole share of the block");
    float amax = 0.0f;
#pragma unroll
    for (int j = 0; j < N; j++) amax = fabsf(x[j]) > amax ? fabsf(x[j]) : amax;
#pragma unroll
    for (int off = 1; off < QK8_0 / N; off *= 2) amax = fmaxf(amax, __shfl_xor_sync(0xffffffffu, amax, off));
    const float id = amax != 0.0f ? 127.f / amax : 0.0f;
#pragma unroll
    for (int j = 0; j < N; j++) q[j] = (int8_t)rintf(fmaxf(-127.0f, fminf(127.0f, x[j] * id)));
    return f16_bits(amax / 127.f);
}

// ---------------------------------------------------------------- softmax

// x (n) = softmax(x) by the calling block, as cpu_softmax: max, expf(x - max)
// (CUDA's, within 2 ulp), the sum in double, one multiply by the float
// inverse. x may be in global or shared memory; ends with a barrier.
static __device__ inline void block_softmax(float *x, int n) {
    float max = -INFINITY;
    for (int i = threadIdx.x; i < n; i += blockDim.x) max = fmaxf(max, x[i]);
    max = block_reduce(max, op_max());
    double sum = 0.0;
    for (int i = threadIdx.x; i < n; i += blockDim.x) {
        const float v = expf(x[i] - max);
        x[i] = v;
        sum += v;
    }
    sum = block_reduce(sum, op_sum());
    const float inv = (float)(1.0 / sum);
    for (int i = threadIdx.x; i < n; i += blockDim.x) x[i] *= inv;
    __syncthreads();
}

#endif
