// matvec_q4k.cu — Q4_K weights times a Q8_K activation, one warp per row.
//
// Bandwidth-bound: each weight byte is read once. Lane l of the warp takes
// 8 weights of every super-block (sub-block l/4, weights 8*(l%4)..+8), so the
// warp covers a 256-weight block per step; the integer dot of those 8 weights
// is exact, then scaled in float as seam_vec_dot does. The block's mins are
// applied by lanes 0..15 from the activation's 16 partial sums.
#include <cuda_runtime.h>

#include "quant.h"
#include "seam_cuda.h"

__global__ void matvec_q4k_kernel(const block_q4_K *__restrict__ w, const block_q8_K *__restrict__ act,
                                  float *__restrict__ out, int rows, int blocks_per_row) {
    const int row = blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32;
    const int lane = threadIdx.x % 32;
    if (row >= rows) return;
    const int sub = lane / 4;          // sub-block 0..7
    const int part = (lane % 4) * 8;   // first of this lane's 8 weights in the sub-block
    const int shift = (sub & 1) * 4;   // odd sub-blocks live in the high nibbles
    float acc = 0.0f;
    for (int b = 0; b < blocks_per_row; b++) {
        const block_q4_K *x = &w[(size_t)row * blocks_per_row + b];
        const block_q8_K *y = &act[b];
        uint8_t sc, m;
        seam_q4k_scale_min(x->scales, sub, &sc, &m);
        const uint8_t *qs = x->qs + 32 * (sub / 2) + part;
        const int8_t *q8 = y->qs + 32 * sub + part;
        int isum = 0;
        for (int l = 0; l < 8; l++) isum += ((qs[l] >> shift) & 15) * q8[l];
        const float d = seam_f16_to_f32(x->d) * y->d;
        acc += d * (float)(sc * isum);
        if (lane < 16) {
            uint8_t sc2, m2;
            seam_q4k_scale_min(x->scales, lane / 2, &sc2, &m2);
            acc -= seam_f16_to_f32(x->dmin) * y->d * (float)(y->bsums[lane] * m2);
        }
    }
    for (int off = 16; off > 0; off /= 2) acc += __shfl_xor_sync(0xffffffffu, acc, off);
    if (lane == 0) out[row] = acc;
}

extern "C" int seam_cuda_matvec_q4k(const void *w, const void *act, float *out, int rows, int cols,
                                    seam_error *e) {
    if (!w || !act || !out || rows <= 0 || cols <= 0 || cols % QK_K != 0)
        return seam_fail(e, "matvec_q4k: bad arguments (rows %d, cols %d: cols must be a positive multiple of %d)",
                         rows, cols, QK_K);
    const int warps_per_block = 4;
    const int grid = (rows + warps_per_block - 1) / warps_per_block;
    matvec_q4k_kernel<<<grid, 32 * warps_per_block>>>((const block_q4_K *)w, (const block_q8_K *)act, out, rows,
                                                      cols / QK_K);
    cudaError_t err = cudaGetLastError();
    if (err == cudaSuccess) err = cudaDeviceSynchronize();
    if (err != cudaSuccess) return seam_fail(e, "matvec_q4k launch failed: %s", cudaGetErrorString(err));
    return 0;
}
