// test_exact.c — the ops that copy llama.cpp's float order (src/cpu/exact.c).
//
// That they equal llama.cpp bit for bit is what the golden tests show on
// whole models; here each op is held to its definition: the lane layout and
// the order of its sums, written out by hand.
#include <criterion/criterion.h>
#include <math.h>
#include <string.h>

#include "numeric/exact.h"
#include "helpers.h"

Test(exact, expf_is_close_to_libm) {
    uint64_t rng = 1;
    for (int i = 0; i < 100000; i++) {
        const float x = test_rng_uniform(&rng) * 87.0f;
        const float want = expf(x), got = exact_expf(x);
        cr_assert(fabsf(got - want) <= 3e-7f * want, "exp(%a): %a, libm %a", x, got, want);
    }
    cr_assert_eq(exact_expf(-INFINITY), 0.0f);
    cr_assert_eq(exact_expf(-200.0f), 0.0f);
    cr_assert(isinf(exact_expf(200.0f)));
    cr_assert_eq(exact_expf(0.0f), 1.0f);
}

Test(exact, reduce16_adds_halves_then_quarters_then_pairs) {
    // 1 + 2^-24 rounds to 1 in float: the order decides which small terms survive
    float a[16] = {0};
    a[0] = 1.0f;
    a[8] = 0x1p-24f;   // added to a[0] first: lost
    a[12] = 0x1p-24f;  // lands in t3[4], then t6[0] = t3[4] + t3[0]: lost again
    a[2] = 0x1p-23f;   // t6[2] joins t6[0] last of its pair: kept
    const float got = exact_reduce16(a);
    cr_assert_eq(got, 1.0f + 0x1p-23f, "%a", got);
}

// The reference of ggml_vec_dot_f16's layout, written out slowly.
static float dot_f16_layout(const seam_f16 *x, const seam_f16 *y, int n) {
    float acc[4][16] = {{0}};
    const int np = n / 64 * 64;
    for (int k = 0; k < np; k++) {
        float *a = &acc[(k / 16) % 4][k % 16];
        *a = fmaf(seam_f16_to_f32(x[k]), seam_f16_to_f32(y[k]), *a);
    }
    float r[16];
    for (int l = 0; l < 16; l++) r[l] = (acc[0][l] + acc[2][l]) + (acc[1][l] + acc[3][l]);
    double sum = np ? exact_reduce16(r) : 0.0;
    for (int k = np; k < n; k++) sum += (double)(seam_f16_to_f32(x[k]) * seam_f16_to_f32(y[k]));
    return (float)sum;
}

Test(exact, dot_f16_follows_ggml_layout) {
    uint64_t rng = 7;
    const int lengths[] = {1, 32, 63, 64, 100, 128, 256, 300};
    for (size_t li = 0; li < sizeof lengths / sizeof *lengths; li++) {
        const int n = lengths[li];
        seam_f16 x[300], y[300];
        double exact = 0;
        for (int i = 0; i < n; i++) {
            x[i] = seam_f32_to_f16(test_rng_normal(&rng));
            y[i] = seam_f32_to_f16(test_rng_normal(&rng));
            exact += (double)seam_f16_to_f32(x[i]) * seam_f16_to_f32(y[i]);
        }
        const float got = exact_dot_f16(x, y, n);
        cr_assert_eq(got, dot_f16_layout(x, y, n), "n = %d", n);
        cr_assert(fabs(got - exact) < 1e-4 * (1 + fabs(exact)), "n = %d: %g vs %g", n, got, exact);
    }
}

Test(exact, softmax_sums_to_one_and_masks) {
    float x[80];
    uint64_t rng = 3;
    for (int i = 0; i < 80; i++) x[i] = 4 * test_rng_normal(&rng);
    float y[80];
    memcpy(y, x, sizeof x);
    exact_softmax(y, 5, 37, 48);  // visible 5..36 of a 48-wide row
    double sum = 0;
    for (int t = 5; t < 37; t++) {
        cr_assert(y[t] > 0 && y[t] <= 1);
        sum += y[t];
    }
    cr_assert(fabs(sum - 1) < 1e-6, "%g", sum);
    for (int t = 0; t < 5; t++) cr_assert_eq(y[t], x[t], "masked positions are not written");
    // a row of 20 (not a multiple of 16): the last four use libm's expf
    memcpy(y, x, sizeof x);
    exact_softmax(y, 0, 20, 20);
    float m = x[0];
    for (int t = 1; t < 20; t++) m = x[t] > m ? x[t] : m;
    double s = 0;
    for (int c = 0; c < 16; c += 16) {
        float lane[16];
        for (int l = 0; l < 16; l++) lane[l] = exact_expf(x[l] - m);
        s += exact_reduce16(lane);
    }
    for (int t = 16; t < 20; t++) s += expf(x[t] - m);
    cr_assert_eq(y[17], expf(x[17] - m) * (float)(1.0 / s));
}

Test(exact, attention_values_are_dots_over_positions) {
    enum { T = 70, D = 8 };
    seam_f16 v[T * D], col[128] = {0}, w16[128] = {0};
    float w[T], out[D], scratch[D * 64];
    uint64_t rng = 11;
    for (int i = 0; i < T * D; i++) v[i] = seam_f32_to_f16(test_rng_normal(&rng));
    for (int t = 0; t < T; t++) w[t] = fabsf(test_rng_normal(&rng)) / T;
    exact_attention_values(out, w, v, 3, T, D, D, T, scratch);
    for (int d = 0; d < D; d++) {
        // the same as one f16 dot over a zero-padded row of 128 positions
        for (int t = 0; t < 128; t++) {
            col[t] = t < T ? v[t * D + d] : 0;
            w16[t] = t >= 3 && t < T ? seam_f32_to_f16(w[t]) : 0;
        }
        cr_assert_eq(out[d], exact_dot_f16(col, w16, 128), "d = %d", d);
    }
}

Test(exact, swiglu_uses_vector_exp_then_libm_tail) {
    float g[20], u[20], y[20];
    uint64_t rng = 5;
    for (int i = 0; i < 20; i++) g[i] = 3 * test_rng_normal(&rng), u[i] = test_rng_normal(&rng);
    memcpy(y, g, sizeof g);
    exact_swiglu(y, u, 20);
    for (int i = 0; i < 20; i++) {
        const float e = i < 16 ? exact_expf(0.0f - g[i]) : expf(-g[i]);
        cr_assert_eq(y[i], g[i] / (1.0f + e) * u[i], "i = %d", i);
    }
}
