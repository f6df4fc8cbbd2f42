// seam_cuda.h — the CUDA backend's C API, the only door from the engine into
// kernels/. Every function checks its arguments and the CUDA status and
// reports failures through seam_error; none aborts.
#ifndef SEAM_CUDA_H
#define SEAM_CUDA_H

#include <stddef.h>
#include <stdint.h>

#include "common.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct {
    char name[256];
    int major, minor;          // compute capability
    int sm_count;
    uint64_t total_bytes;      // device memory
    uint64_t free_bytes;
    double mem_bandwidth_gbs;  // peak, from the memory clock and bus width
} seam_cuda_info;

// Number of usable CUDA devices; 0 when there is no driver or no device.
int seam_cuda_device_count(void);
int seam_cuda_device_info(int device, seam_cuda_info *info, seam_error *e);

// Device memory and copies (synchronous; the engine's timed crossings come later).
int seam_cuda_malloc(void **ptr, size_t bytes, seam_error *e);
void seam_cuda_free(void *ptr);
int seam_cuda_upload(void *dst_device, const void *src_host, size_t bytes, seam_error *e);
int seam_cuda_download(void *dst_host, const void *src_device, size_t bytes, seam_error *e);

// out (rows) = W (rows, cols; Q4_K blocks) @ act (cols; Q8_K blocks), all in
// device memory: the same arithmetic as seam_vec_dot on each row. cols must
// be a multiple of 256. One warp per row; bandwidth-bound.
int seam_cuda_matvec_q4k(const void *w, const void *act, float *out, int rows, int cols, seam_error *e);

#ifdef __cplusplus
}
#endif
#endif
