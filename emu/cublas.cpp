// cublas.cpp — the cuBLAS seam calls (kernels/gemm.cu), on the emulated
// card: a handle bound to a stream and a workspace, and cublasGemmEx for the
// one configuration the GPU prefill uses, f16 A and B, f32 C and
// accumulation.
//
// The handle keeps real cuBLAS's rules about memory: cublasCreate takes its
// default workspace pool from the card (CUBLAS_DEFAULT_POOL, counted as a
// device allocation: cudaMemGetInfo shows it), cublasSetStream puts the
// handle back on that pool, whatever workspace was set before (CUDA 12's
// cuBLAS does so), and a product run on the default pool after the caller
// gave the handle a workspace of its own is a fault: the caller's plan
// counted that workspace, not cuBLAS's pool. The product runs on the handle's stream, in its order, and
// sums each output over k in order in float: the f16 products are exact in
// float, so only the order of the sums differs from a GPU's (tensor cores
// add in blocks), which the prefill's tests hold to a tolerance.
#include <cublas_v2.h>

#include <mutex>
#include <set>

#include "emu.h"

// cuBLAS's default workspace per handle: 32 MiB on sm_90 (4 MiB before).
constexpr size_t CUBLAS_DEFAULT_POOL = 32u << 20;

struct cublasContext {
    cudaStream_t stream = nullptr;
    void *pool = nullptr;             // the default workspace, CUBLAS_DEFAULT_POOL bytes of the card
    bool user_workspace = false;      // a cublasSetWorkspace is in effect
    bool user_workspace_ever = false; // the caller has given it one
};

namespace {

std::mutex handles_mutex;
std::set<cublasHandle_t> *handles;  // live handles (never freed: a queued product may outlive exit)

bool valid(cublasHandle_t h) {
    std::lock_guard<std::mutex> lock(handles_mutex);
    return handles && handles->count(h);
}

// Elements an operand of rows x cols (as op() makes it) occupies with
// leading dimension ld, stored transposed when t.
size_t extent(bool t, int rows, int cols, int ld) {
    if (rows == 0 || cols == 0) return 0;
    return t ? (size_t)ld * (rows - 1) + cols : (size_t)ld * (cols - 1) + rows;
}

void require_device(const char *what, const void *p, size_t bytes) {
    emu::region r;
    if (bytes && (!emu::find_region(p, bytes, &r) || r.kind != emu::REGION_DEVICE))
        emu::fault("cublasGemmEx: %s (%zu bytes at %p) is not inside one device allocation", what, bytes, p);
}

}  // namespace

extern "C" cublasStatus_t cublasCreate_v2(cublasHandle_t *h) {
    if (!emu::the_card()) return CUBLAS_STATUS_NOT_INITIALIZED;
    void *pool;
    if (cudaMalloc(&pool, CUBLAS_DEFAULT_POOL) != cudaSuccess) {
        cudaGetLastError();  // cuBLAS reports its own status, and leaves the runtime's error alone
        return CUBLAS_STATUS_ALLOC_FAILED;
    }
    std::lock_guard<std::mutex> lock(handles_mutex);
    if (!handles) handles = new std::set<cublasHandle_t>;
    *h = new cublasContext;
    (*h)->pool = pool;
    handles->insert(*h);
    return CUBLAS_STATUS_SUCCESS;
}

extern "C" cublasStatus_t cublasDestroy_v2(cublasHandle_t h) {
    if (!valid(h)) return CUBLAS_STATUS_NOT_INITIALIZED;
    cudaDeviceSynchronize();  // as cuBLAS: its work finishes first
    {
        std::lock_guard<std::mutex> lock(handles_mutex);
        handles->erase(h);
    }
    cudaFree(h->pool);
    delete h;
    return CUBLAS_STATUS_SUCCESS;
}

extern "C" cublasStatus_t cublasSetStream_v2(cublasHandle_t h, cudaStream_t stream) {
    if (!valid(h)) return CUBLAS_STATUS_NOT_INITIALIZED;
    h->stream = stream;
    h->user_workspace = false;  // back on the default pool
    return CUBLAS_STATUS_SUCCESS;
}

extern "C" cublasStatus_t cublasSetWorkspace_v2(cublasHandle_t h, void *workspace, size_t bytes) {
    if (!valid(h)) return CUBLAS_STATUS_NOT_INITIALIZED;
    emu::region r;
    const bool device = emu::find_region(workspace, bytes, &r) && r.kind == emu::REGION_DEVICE;
    if (bytes && (!device || (uintptr_t)workspace % 256)) return CUBLAS_STATUS_INVALID_VALUE;
    h->user_workspace = h->user_workspace_ever = true;
    return CUBLAS_STATUS_SUCCESS;
}

extern "C" const char *cublasGetStatusString(cublasStatus_t st) {
    switch (st) {
    case CUBLAS_STATUS_SUCCESS: return "the operation completed successfully";
    case CUBLAS_STATUS_NOT_INITIALIZED: return "the library was not initialized";
    case CUBLAS_STATUS_INVALID_VALUE: return "an unsupported value or parameter was passed to the function";
    case CUBLAS_STATUS_NOT_SUPPORTED: return "the functionality requested is not supported";
    case CUBLAS_STATUS_ALLOC_FAILED: return "the resource allocation failed";
    default: return "unknown error";
    }
}

extern "C" cublasStatus_t cublasGemmEx(cublasHandle_t h, cublasOperation_t transa, cublasOperation_t transb, int m,
                                       int n, int k, const void *alpha, const void *A, cudaDataType Atype, int lda,
                                       const void *B, cudaDataType Btype, int ldb, const void *beta, void *C,
                                       cudaDataType Ctype, int ldc, cublasComputeType_t compute,
                                       cublasGemmAlgo_t algo) {
    if (!valid(h)) return CUBLAS_STATUS_NOT_INITIALIZED;
    if (Atype != CUDA_R_16F || Btype != CUDA_R_16F || Ctype != CUDA_R_32F || compute != CUBLAS_COMPUTE_32F)
        return CUBLAS_STATUS_NOT_SUPPORTED;  // the one configuration emulated
    if ((transa != CUBLAS_OP_N && transa != CUBLAS_OP_T) || (transb != CUBLAS_OP_N && transb != CUBLAS_OP_T))
        return CUBLAS_STATUS_NOT_SUPPORTED;
    const bool ta = transa == CUBLAS_OP_T, tb = transb == CUBLAS_OP_T;
    if (m < 0 || n < 0 || k < 0 || lda < (ta ? k : m) || lda < 1 || ldb < (tb ? n : k) || ldb < 1 || ldc < m ||
        ldc < 1 || !alpha || !beta)
        return CUBLAS_STATUS_INVALID_VALUE;
    if (h->user_workspace_ever && !h->user_workspace)
        emu::fault("cublasGemmEx on cuBLAS's default workspace pool (%zu bytes) after cublasSetWorkspace gave the "
                   "handle one of its own: cublasSetStream put it back on the pool; set the workspace again after "
                   "each cublasSetStream", CUBLAS_DEFAULT_POOL);
    require_device("A", A, 2 * extent(ta, m, k, lda));
    require_device("B", B, 2 * extent(tb, k, n, ldb));
    require_device("C", C, 4 * extent(false, m, n, ldc));
    const float a = *(const float *)alpha, b = *(const float *)beta;  // the host pointer mode: read at the call
    emu::enqueue_host(h->stream, "cublasGemmEx", [=] {
        const __half *ah = (const __half *)A, *bh = (const __half *)B;
        float *c = (float *)C;
        std::vector<float> arow(k);
        for (int i = 0; i < m; i++) {
            for (int p = 0; p < k; p++) arow[p] = __half2float(ta ? ah[(size_t)i * lda + p] : ah[(size_t)p * lda + i]);
            for (int j = 0; j < n; j++) {
                float sum = 0.0f;
                for (int p = 0; p < k; p++)
                    sum += arow[p] * __half2float(tb ? bh[(size_t)p * ldb + j] : bh[(size_t)j * ldb + p]);
                float *out = c + (size_t)j * ldc + i;
                *out = b == 0.0f ? a * sum : a * sum + b * *out;  // beta 0: C is not read, as cuBLAS
            }
        }
        for (int j = 0; j < n; j++) emu::mark_written(c + (size_t)j * ldc, sizeof(float) * (size_t)m);
    }, {A, B}, {C});
    return CUBLAS_STATUS_SUCCESS;
}
