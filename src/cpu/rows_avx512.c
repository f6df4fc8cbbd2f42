// rows_avx512.c — the steps a batch takes row by row, done across rows at
// once with AVX-512 (compiled with -mavx512f; reached only after a run-time
// feature check, through cpu_kernels_fill_avx512): the RMS norm, whose sum
// of squares is a chain of dependent double additions in the order of the
// values (llama.cpp's ggml_float sum). A row alone waits on that chain's
// latency at every value -- 2.4% of a Qwen3-0.6B-shaped prompt, a norm
// before attention and the FFN and one per head for q and k -- so eight
// rows go side by side, each in a lane of one register of doubles: eight
// chains at once, each row's additions its own, in its order.
#include <math.h>
#include <stddef.h>

#include "cpu/kernels.h"
#include "cpu/simd_x86.h"

static cpu_rmsnorm_rows_fn rmsnorm_rows_narrow;  // rows whose length is no multiple of 8

// r[c] holds element c of the eight rows afterwards.
static inline void transpose8(__m256 r[8]) {
    __m256 a[8], b[8];
    for (int i = 0; i < 4; i++) {
        a[2 * i] = _mm256_unpacklo_ps(r[2 * i], r[2 * i + 1]);
        a[2 * i + 1] = _mm256_unpackhi_ps(r[2 * i], r[2 * i + 1]);
    }
    for (int i = 0; i < 2; i++) {
        b[4 * i] = _mm256_shuffle_ps(a[4 * i], a[4 * i + 2], _MM_SHUFFLE(1, 0, 1, 0));
        b[4 * i + 1] = _mm256_shuffle_ps(a[4 * i], a[4 * i + 2], _MM_SHUFFLE(3, 2, 3, 2));
        b[4 * i + 2] = _mm256_shuffle_ps(a[4 * i + 1], a[4 * i + 3], _MM_SHUFFLE(1, 0, 1, 0));
        b[4 * i + 3] = _mm256_shuffle_ps(a[4 * i + 1], a[4 * i + 3], _MM_SHUFFLE(3, 2, 3, 2));
    }
    for (int i = 0; i < 4; i++) {
        r[i] = _mm256_permute2f128_ps(b[i], b[4 + i], 0x20);
        r[4 + i] = _mm256_permute2f128_ps(b[i], b[4 + i], 0x31);
    }
}

static void rmsnorm_rows(float *out, const float *x, const float *weight, int rows, int n, float eps) {
    if (n % 8) {
        rmsnorm_rows_narrow(out, x, weight, rows, n, eps);
        return;
    }
    for (int r0 = 0; r0 < rows; r0 += 8) {
        const int nr = rows - r0 < 8 ? rows - r0 : 8;
        const float *src[8];  // a short block's missing rows: its last row again, their sums unused
        for (int r = 0; r < 8; r++) src[r] = x + (size_t)(r0 + (r < nr ? r : nr - 1)) * (size_t)n;
        __m512d sum = _mm512_setzero_pd();  // lane r: row r's sum
        for (int i = 0; i < n; i += 8) {
            __m256 sq[8];
            for (int r = 0; r < 8; r++) {
                const __m256 v = _mm256_loadu_ps(src[r] + i);
                sq[r] = _mm256_mul_ps(v, v);  // x * x in float, as the reference rounds it
            }
            transpose8(sq);
            for (int c = 0; c < 8; c++) sum = _mm512_add_pd(sum, _mm512_cvtps_pd(sq[c]));
        }
        double s[8];
        _mm512_storeu_pd(s, sum);
        for (int r = 0; r < nr; r++) {  // the sums are all taken: a row may be written over its input now
            const float mean = (float)(s[r] / n);
            const __m256 scale = _mm256_set1_ps(1.0f / sqrtf(mean + eps));
            const float *xr = x + (size_t)(r0 + r) * (size_t)n;
            float *o = out + (size_t)(r0 + r) * (size_t)n;
            for (int i = 0; i < n; i += 8)
                _mm256_storeu_ps(o + i, _mm256_mul_ps(_mm256_mul_ps(_mm256_loadu_ps(xr + i), scale),
                                                      _mm256_loadu_ps(weight + i)));
        }
    }
}

void cpu_kernels_fill_avx512_rows(cpu_kernels *k) {
    rmsnorm_rows_narrow = k->rmsnorm_rows;
    k->rmsnorm_rows = rmsnorm_rows;
}
