// elementwise.cu — one thread per element: scale, residual add, the gated FFN
// activations (SwiGLU, GEGLU) and logit soft-capping.
//
// Bandwidth-bound in principle, latency-bound in practice: the vectors of one
// token are a few KB to 1 MB (the logits), far below what one launch moves.
#include <math.h>
#include <stdlib.h>

#include "cuda_common.cuh"

constexpr int EW_THREADS = 256;

// Shared checks of the elementwise launchers.
static int check_vector(const char *op, const void *a, const void *b, int n, seam_error *e) {
    if (!a || !b) return seam_fail(e, "%s: NULL vector", op);
    if (n <= 0) return seam_fail(e, "%s: n = %d must be positive", op, n);
    return 0;
}

__global__ void scale_kernel(float *x, float v, int n) {
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) x[i] *= v;
}

// x (n) += y repeated every m elements: m = n adds a vector, m < n a bias
// to each row of a batch.
__global__ void add_kernel(float *__restrict__ x, const float *__restrict__ y, int n, int m) {
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) x[i] += y[i % m];
}

// gate = silu(gate) * up, as cpu_swiglu (CUDA's expf: within 2 ulp of libm's).
__global__ void swiglu_kernel(float *__restrict__ gate, const float *__restrict__ up, int n) {
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        const float g = gate[i];
        gate[i] = g / (1.0f + expf(-g)) * up[i];
    }
}

// GELU(tanh) of every f16 value, as cpu_geglu's table (src/cpu/ops.c): built
// on the host with the same expression and the same libm tanhf, so a lookup
// here returns bitwise what the CPU's returns.
SEAM_DEVICE_ARRAY(uint16_t, gelu_table, 1 << 16);
static bool gelu_ready;

int geglu_init(seam_error *e) {
    if (gelu_ready) return 0;
    uint16_t *table = (uint16_t *)malloc(sizeof(uint16_t) << 16);
    if (!table) return seam_fail(e, "out of host memory for the GELU table");
    const float sqrt_2_over_pi = 0.79788456080286535587989211986876f, coef_a = 0.044715f;
    for (int i = 0; i < 1 << 16; i++) {
        const float x = seam_f16_to_f32((seam_f16)i);
        table[i] = f16_bits(0.5f * x * (1.0f + tanhf(sqrt_2_over_pi * x * fmaf(coef_a * x, x, 1.0f))));
    }
    void *dst = NULL;
    const cudaError_t err = cudaGetSymbolAddress(&dst, gelu_table);
    const int rc = err != cudaSuccess ? cuda_fail_at(e, __FILE__, __LINE__, "cudaGetSymbolAddress(gelu_table)", err)
                                      : seam_cuda_upload(dst, table, sizeof(uint16_t) << 16, e);
    free(table);
    gelu_ready = rc == 0;
    return rc;
}

// gate = gelu(gate) * up, as cpu_geglu: 0 below -10, the identity above 10,
// else the table at gate rounded to f16.
__global__ void geglu_kernel(float *__restrict__ gate, const float *__restrict__ up, int n) {
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        const float g = gate[i];
        if (g <= -10.0f) gate[i] = 0.0f;
        else if (g >= 10.0f) gate[i] = g * up[i];
        else gate[i] = f16_to_f32(gelu_table[f16_bits(g)]) * up[i];
    }
}

// x = cap * tanh(x / cap), as the engine's final soft-capping (CUDA's tanhf).
__global__ void softcap_kernel(float *x, float cap, int n) {
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) x[i] = cap * tanhf(x[i] / cap);
}

extern "C" int seam_cuda_scale(seam_cuda_stream *s, float *x, float v, int n, seam_error *e) {
    if (check_vector("scale", x, x, n, e)) return -1;
    SEAM_LAUNCH(scale_kernel, ceil_div(n, EW_THREADS), EW_THREADS, 0, stream_of(s), x, v, n);
    CUDA_LAUNCHED(e, "scale_kernel");
    return 0;
}

extern "C" int seam_cuda_add_rows(seam_cuda_stream *s, float *x, const float *y, int rows, int n, seam_error *e) {
    if (check_vector("add", x, y, n, e)) return -1;
    if (rows <= 0 || (int64_t)rows * n > INT32_MAX) return seam_fail(e, "add: bad shape %d x %d", rows, n);
    SEAM_LAUNCH(add_kernel, ceil_div((int64_t)rows * n, EW_THREADS), EW_THREADS, 0, stream_of(s), x, y, rows * n, n);
    CUDA_LAUNCHED(e, "add_kernel");
    return 0;
}

extern "C" int seam_cuda_add(seam_cuda_stream *s, float *x, const float *y, int n, seam_error *e) {
    return seam_cuda_add_rows(s, x, y, 1, n, e);
}

extern "C" int seam_cuda_swiglu(seam_cuda_stream *s, float *gate, const float *up, int n, seam_error *e) {
    if (check_vector("swiglu", gate, up, n, e)) return -1;
    SEAM_LAUNCH(swiglu_kernel, ceil_div(n, EW_THREADS), EW_THREADS, 0, stream_of(s), gate, up, n);
    CUDA_LAUNCHED(e, "swiglu_kernel");
    return 0;
}

extern "C" int seam_cuda_geglu(seam_cuda_stream *s, float *gate, const float *up, int n, seam_error *e) {
    if (check_vector("geglu", gate, up, n, e)) return -1;
    if (!gelu_ready) return seam_fail(e, "geglu: call seam_cuda_init first (it uploads the GELU table)");
    SEAM_LAUNCH(geglu_kernel, ceil_div(n, EW_THREADS), EW_THREADS, 0, stream_of(s), gate, up, n);
    CUDA_LAUNCHED(e, "geglu_kernel");
    return 0;
}

extern "C" int seam_cuda_softcap(seam_cuda_stream *s, float *x, float cap, int n, seam_error *e) {
    if (check_vector("softcap", x, x, n, e)) return -1;
    if (!(cap > 0.0f)) return seam_fail(e, "softcap: the cap %g must be positive", cap);
    SEAM_LAUNCH(softcap_kernel, ceil_div(n, EW_THREADS), EW_THREADS, 0, stream_of(s), x, cap, n);
    CUDA_LAUNCHED(e, "softcap_kernel");
    return 0;
}
