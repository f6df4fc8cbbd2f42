// gemm.cu — a batch of activations times a quantised matrix through cuBLAS:
// the weights dequantised to f16 (matvec.cu's dequantize_f16), the
// activations rounded to f16 by the caller (seam_cuda_quantize's F16, once
// for the matrices that share an input), one cublasGemmEx
// with f32 accumulation and output. This is the GPU prefill's matrix product
// (gpu_segment.c), as llama.cpp's dequantise + cuBLAS path.
//
// Bound: for a batch of n tokens the GEMM does 2 n rows cols flops on tensor
// cores and the dequantisation moves ~2.6 bytes a weight once; against the
// matvec's weight read per token, the GEMM wins once n is large enough to
// pay for the f16 copy (seam's threshold: gpu_segment.h).
#include <cublas_v2.h>
#include <stdlib.h>

#include "cuda_common.cuh"

// cublasSetStream resets the handle to cuBLAS's own workspace pool (CUDA
// 12 on), so the handle is bound to a stream and the caller's workspace
// together, and bound again whenever a product runs on another stream.
struct seam_cuda_blas {
    cublasHandle_t h;
    cudaStream_t stream;  // the stream it is bound to
    void *workspace;      // the caller's, workspace_bytes
    size_t workspace_bytes;
};

static cublasStatus_t bind(seam_cuda_blas *b, cudaStream_t stream, const char **what) {
    *what = "cublasSetStream";
    cublasStatus_t st = cublasSetStream(b->h, stream);
    if (st != CUBLAS_STATUS_SUCCESS) return st;
    *what = "cublasSetWorkspace";
    if ((st = cublasSetWorkspace(b->h, b->workspace, b->workspace_bytes)) == CUBLAS_STATUS_SUCCESS) b->stream = stream;
    return st;
}

static int blas_fail(seam_error *e, const char *what, cublasStatus_t st) {
    return seam_fail(e, "%s failed: cuBLAS status %d (%s)", what, (int)st, cublasGetStatusString(st));
}

extern "C" int seam_cuda_blas_create(seam_cuda_blas **out, seam_cuda_stream *s, void *workspace,
                                     size_t workspace_bytes, seam_error *e) {
    *out = NULL;
    seam_cuda_blas *b = (seam_cuda_blas *)calloc(1, sizeof *b);
    if (!b) return seam_fail(e, "out of memory for a cuBLAS handle");
    cublasStatus_t st = cublasCreate(&b->h);
    if (st != CUBLAS_STATUS_SUCCESS) {
        free(b);
        return blas_fail(e, "cublasCreate", st);
    }
    b->workspace = workspace, b->workspace_bytes = workspace_bytes;
    const char *what;
    if ((st = bind(b, stream_of(s), &what)) != CUBLAS_STATUS_SUCCESS) {
        cublasDestroy(b->h);
        free(b);
        return blas_fail(e, what, st);
    }
    *out = b;
    return 0;
}

extern "C" void seam_cuda_blas_destroy(seam_cuda_blas *b) {
    if (!b) return;
    cublasDestroy(b->h);
    free(b);
}

extern "C" int seam_cuda_matmul(seam_cuda_blas *b, seam_cuda_stream *s, uint32_t type, const void *w, int64_t rows,
                                int64_t cols, const uint16_t *x16, int n, float *out, uint16_t *w16, seam_error *e) {
    if (!b || !x16 || !out || !w16) return seam_fail(e, "matmul: the handle, x16, out and w16 must be given");
    if (n <= 0 || (int64_t)n * cols > INT32_MAX || rows > INT32_MAX || cols > INT32_MAX)
        return seam_fail(e, "matmul: bad batch %d of %lld columns", n, (long long)cols);
    if (seam_cuda_dequantize_f16(s, type, w, rows, cols, w16, e)) return -1;
    // Row-major out (n, rows) = x (n, cols) . W^T is, to column-major cuBLAS,
    // out^T (rows, n) = W^T (rows, cols) . x^T (cols, n): W row-major is
    // W^T column-major with leading dimension cols, so op(A) = T.
    // on s, after the dequantisation it reads, whatever stream the handle was made on
    const char *what;
    cublasStatus_t st = b->stream == stream_of(s) ? CUBLAS_STATUS_SUCCESS : bind(b, stream_of(s), &what);
    if (st != CUBLAS_STATUS_SUCCESS) return blas_fail(e, what, st);
    const float one = 1.0f, zero = 0.0f;
    st = cublasGemmEx(b->h, CUBLAS_OP_T, CUBLAS_OP_N, (int)rows, n, (int)cols, &one, w16, CUDA_R_16F,
                                           (int)cols, x16, CUDA_R_16F, (int)cols, &zero, out, CUDA_R_32F, (int)rows,
                                           CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
    return st == CUBLAS_STATUS_SUCCESS ? 0 : blas_fail(e, "cublasGemmEx", st);
}
