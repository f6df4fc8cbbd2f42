// device.cu — device discovery and memory for the C side.
#include <cuda_runtime.h>
#include <stdio.h>
#include <string.h>

#include "seam_cuda.h"

// Fills e with the CUDA error of `what` and returns -1.
static int cuda_fail(seam_error *e, const char *what, cudaError_t err) {
    return seam_fail(e, "CUDA %s failed: %s", what, cudaGetErrorString(err));
}

extern "C" int seam_cuda_device_count(void) {
    int n = 0;
    if (cudaGetDeviceCount(&n) != cudaSuccess) {
        cudaGetLastError();  // no driver or no device: clear the sticky error
        return 0;
    }
    return n;
}

extern "C" int seam_cuda_device_info(int device, seam_cuda_info *info, seam_error *e) {
    if (device < 0 || device >= seam_cuda_device_count())
        return seam_fail(e, "CUDA device %d does not exist", device);
    cudaDeviceProp p;
    cudaError_t err = cudaGetDeviceProperties(&p, device);
    if (err != cudaSuccess) return cuda_fail(e, "cudaGetDeviceProperties", err);
    memset(info, 0, sizeof *info);
    snprintf(info->name, sizeof info->name, "%s", p.name);
    info->major = p.major;
    info->minor = p.minor;
    info->sm_count = p.multiProcessorCount;
    int mem_clock_khz = 0, bus_bits = 0;
    cudaDeviceGetAttribute(&mem_clock_khz, cudaDevAttrMemoryClockRate, device);
    cudaDeviceGetAttribute(&bus_bits, cudaDevAttrGlobalMemoryBusWidth, device);
    info->mem_bandwidth_gbs = 2.0 * mem_clock_khz * 1e3 * (bus_bits / 8) / 1e9;  // DDR: two transfers a clock
    size_t free_b = 0, total_b = 0;
    if ((err = cudaSetDevice(device)) != cudaSuccess) return cuda_fail(e, "cudaSetDevice", err);
    if ((err = cudaMemGetInfo(&free_b, &total_b)) != cudaSuccess) return cuda_fail(e, "cudaMemGetInfo", err);
    info->free_bytes = free_b;
    info->total_bytes = total_b;
    return 0;
}

extern "C" int seam_cuda_malloc(void **ptr, size_t bytes, seam_error *e) {
    cudaError_t err = cudaMalloc(ptr, bytes);
    if (err != cudaSuccess) {
        *ptr = NULL;
        return seam_fail(e, "CUDA out of memory: %zu bytes did not fit (%s)", bytes, cudaGetErrorString(err));
    }
    return 0;
}

extern "C" void seam_cuda_free(void *ptr) { cudaFree(ptr); }

extern "C" int seam_cuda_upload(void *dst, const void *src, size_t bytes, seam_error *e) {
    cudaError_t err = cudaMemcpy(dst, src, bytes, cudaMemcpyHostToDevice);
    return err == cudaSuccess ? 0 : cuda_fail(e, "host-to-device copy", err);
}

extern "C" int seam_cuda_download(void *dst, const void *src, size_t bytes, seam_error *e) {
    cudaError_t err = cudaMemcpy(dst, src, bytes, cudaMemcpyDeviceToHost);
    return err == cudaSuccess ? 0 : cuda_fail(e, "device-to-host copy", err);
}
