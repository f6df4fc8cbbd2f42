// memory.cu — device memory, pinned host memory, and the copies between them.
#include "cuda_common.cuh"

// ---------------------------------------------------------------- device memory

// A failed allocation is reported here, so each clears CUDA's last error
// (cuda_fail_at's reason): a plan that does not fit must not fail the next
// configuration of a sweep.
extern "C" int seam_cuda_malloc(void **ptr, size_t bytes, seam_error *e) {
    const cudaError_t err = cudaMalloc(ptr, bytes);
    if (err != cudaSuccess) {
        cudaGetLastError();
        *ptr = NULL;
        return seam_fail(e, "CUDA out of memory: %zu bytes did not fit (%s)", bytes, cudaGetErrorString(err));
    }
    return 0;
}

extern "C" void seam_cuda_free(void *ptr) { cudaFree(ptr); }

// From pageable memory cudaMemcpy returns once the bytes are staged, before
// the DMA has written them, and it runs on the legacy default stream, which
// seam's non-blocking streams do not wait for: without the synchronise, the
// first kernel on such a stream could read weights still in flight.
extern "C" int seam_cuda_upload(void *dst, const void *src, size_t bytes, seam_error *e) {
    CUDA_TRY(e, cudaMemcpy(dst, src, bytes, cudaMemcpyHostToDevice));
    CUDA_TRY(e, cudaDeviceSynchronize());
    return 0;
}

// The same ordering the other way: the copy waits for the legacy stream
// only, so everything enqueued before it (on any stream) has run first.
extern "C" int seam_cuda_download(void *dst, const void *src, size_t bytes, seam_error *e) {
    CUDA_TRY(e, cudaDeviceSynchronize());
    CUDA_TRY(e, cudaMemcpy(dst, src, bytes, cudaMemcpyDeviceToHost));
    return 0;
}

// ---------------------------------------------------------------- pinned host memory

extern "C" int seam_cuda_host_alloc(void **ptr, size_t bytes, seam_error *e) {
    const cudaError_t err = cudaHostAlloc(ptr, bytes, cudaHostAllocPortable | cudaHostAllocMapped);
    if (err != cudaSuccess) {
        cudaGetLastError();
        *ptr = NULL;
        return seam_fail(e, "CUDA could not pin %zu bytes of host memory (%s)", bytes, cudaGetErrorString(err));
    }
    return 0;
}

extern "C" void seam_cuda_host_free(void *ptr) { cudaFreeHost(ptr); }

extern "C" int seam_cuda_host_register(void *ptr, size_t bytes, bool read_only, seam_error *e) {
    if (!ptr || bytes == 0) return seam_fail(e, "host_register: empty range");
    unsigned flags = cudaHostRegisterPortable | cudaHostRegisterMapped;
    if (read_only) {
        int device = 0, supported = 0;
        CUDA_TRY(e, cudaGetDevice(&device));
        CUDA_TRY(e, cudaDeviceGetAttribute(&supported, cudaDevAttrHostRegisterReadOnlySupported, device));
        if (supported) flags |= cudaHostRegisterReadOnly;
    }
    const cudaError_t err = cudaHostRegister(ptr, bytes, flags);
    if (err == cudaSuccess) return 0;
    cudaGetLastError();
    return seam_fail(e, "CUDA could not pin %zu bytes at %p%s (%s)", bytes, ptr,
                     read_only && !(flags & cudaHostRegisterReadOnly)
                         ? " (this device cannot pin read-only memory: map the file writable, or copy it)"
                         : "",
                     cudaGetErrorString(err));
}

extern "C" int seam_cuda_host_unregister(void *ptr, seam_error *e) {
    CUDA_TRY(e, cudaHostUnregister(ptr));
    return 0;
}

extern "C" int seam_cuda_host_device_pointer(void **dptr, void *host, seam_error *e) {
    *dptr = NULL;
    CUDA_TRY(e, cudaHostGetDevicePointer(dptr, host, 0));
    return 0;
}

// ---------------------------------------------------------------- asynchronous copies

extern "C" int seam_cuda_copy_h2d(seam_cuda_stream *s, void *dst, const void *src, size_t bytes, seam_error *e) {
    if (!dst || !src) return seam_fail(e, "copy_h2d: NULL pointer");
    CUDA_TRY(e, cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, stream_of(s)));
    return 0;
}

extern "C" int seam_cuda_copy_d2h(seam_cuda_stream *s, void *dst, const void *src, size_t bytes, seam_error *e) {
    if (!dst || !src) return seam_fail(e, "copy_d2h: NULL pointer");
    CUDA_TRY(e, cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToHost, stream_of(s)));
    return 0;
}
