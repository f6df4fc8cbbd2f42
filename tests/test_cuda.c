// test_cuda.c — CUDA kernels against the scalar reference. Without a CUDA
// build or device every test reports "skipped: no CUDA device".
#include <criterion/criterion.h>
#include <math.h>
#include <stdlib.h>

#include "helpers.h"
#include "quant.h"

#ifdef SEAM_HAVE_CUDA
#include "seam_cuda.h"

static void require_device(void) {
    if (seam_cuda_device_count() == 0) cr_skip_test("skipped: no CUDA device");
}

Test(cuda, device_info) {
    require_device();
    seam_cuda_info info;
    seam_error e = {{0}};
    cr_assert_eq(seam_cuda_device_info(0, &info, &e), 0, "%s", e.msg);
    cr_assert_gt(info.total_bytes, 0);
    cr_assert_gt(info.sm_count, 0);
    cr_log_info("device 0: %s, sm_%d%d, %d SMs, %.1f GiB", info.name, info.major, info.minor, info.sm_count,
                info.total_bytes / 1073741824.0);
}

Test(cuda, matvec_q4k_matches_reference) {
    require_device();
    const int rows = 67, cols = 3 * QK_K;
    uint64_t rng = 42;
    float *x = malloc(sizeof(float) * cols), *wrow = malloc(sizeof(float) * cols);
    const uint64_t rb = ggml_row_bytes(GGML_TYPE_Q4_K, cols);
    uint8_t *w = malloc(rb * rows);
    block_q8_K act[3];
    for (int i = 0; i < cols; i++) x[i] = test_rng_normal(&rng);
    seam_quantize_row_q8_K(x, act, cols);
    for (int r = 0; r < rows; r++) {
        for (int i = 0; i < cols; i++) wrow[i] = test_rng_normal(&rng) * 0.1f;
        cr_assert_eq(seam_quantize_weights(GGML_TYPE_Q4_K, wrow, w + r * rb, cols), 0);
    }
    seam_error e = {{0}};
    void *dw, *dact;
    float *dout, out[67];
    cr_assert_eq(seam_cuda_malloc(&dw, rb * rows, &e), 0, "%s", e.msg);
    cr_assert_eq(seam_cuda_malloc(&dact, sizeof act, &e), 0, "%s", e.msg);
    cr_assert_eq(seam_cuda_malloc((void **)&dout, sizeof out, &e), 0, "%s", e.msg);
    cr_assert_eq(seam_cuda_upload(dw, w, rb * rows, &e), 0, "%s", e.msg);
    cr_assert_eq(seam_cuda_upload(dact, act, sizeof act, &e), 0, "%s", e.msg);
    cr_assert_eq(seam_cuda_matvec_q4k(dw, dact, dout, rows, cols, &e), 0, "%s", e.msg);
    cr_assert_eq(seam_cuda_download(out, dout, sizeof out, &e), 0, "%s", e.msg);
    for (int r = 0; r < rows; r++) {
        const float ref = seam_vec_dot(GGML_TYPE_Q4_K, w + r * rb, act, cols);
        cr_assert(fabsf(out[r] - ref) <= 1e-4f * (1.0f + fabsf(ref)), "row %d: cuda %g, reference %g", r, out[r], ref);
    }
    seam_cuda_free(dw), seam_cuda_free(dact), seam_cuda_free(dout);
    free(x), free(wrow), free(w);
}

Test(cuda, matvec_q4k_rejects_bad_shapes) {
    seam_error e = {{0}};
    int dummy = 0;
    cr_assert_eq(seam_cuda_matvec_q4k(&dummy, &dummy, (float *)&dummy, 4, 100, &e), -1);
    cr_assert(strstr(e.msg, "multiple of 256"), "%s", e.msg);
}

#else

Test(cuda, not_built) { cr_skip_test("skipped: no CUDA device (seam was built without CUDA)"); }

#endif
