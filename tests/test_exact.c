// test_exact.c — the ops that copy llama.cpp's float orders (src/numeric/exact.c).
//
// That they equal llama.cpp bit for bit is what the golden tests show on
// whole models, in each build's order against that build's fixtures; here
// each op is held to its definition in both orders: the lane layout and the
// order of its sums, written out by hand.
#include <criterion/criterion.h>
#include <math.h>
#include <string.h>

#include "numeric/exact.h"
#include "helpers.h"

static const exact_order ORDERS[] = {EXACT_ORDER_AVX2, EXACT_ORDER_AVX512};
#define FOR_EACH_ORDER(o) for (exact_order o = EXACT_ORDER_AVX2; o < EXACT_ORDERS; o = (exact_order)(o + 1))

Test(exact, expf_is_close_to_libm) {
    FOR_EACH_ORDER(o) {
        uint64_t rng = 1;
        for (int i = 0; i < 100000; i++) {
            // both ends of the range: the AVX2 exp takes |n| > 126 another way
            const float x = test_rng_uniform(&rng) * 88.0f;
            const float want = expf(x), got = exact_expf(o, x);
            cr_assert(fabsf(got - want) <= 3e-7f * want, "%s exp(%a): %a, libm %a", exact_order_names[o], x, got, want);
        }
        cr_assert_eq(exact_expf(o, -INFINITY), 0.0f);
        cr_assert_eq(exact_expf(o, -200.0f), 0.0f);
        cr_assert(isinf(exact_expf(o, 200.0f)));
        cr_assert_eq(exact_expf(o, 0.0f), 1.0f);
        // near the bottom, where the AVX2 exp scales twice: a subnormal, within the 1.5 ulp a normal gets
        const float tiny = exact_expf(o, -100.0f);
        cr_assert(fabsf(tiny - expf(-100.0f)) <= 0x1p-149f * 2, "%s exp(-100): %a, libm %a", exact_order_names[o],
                  tiny, expf(-100.0f));
    }
}

// The two exps are two roundings of the same polynomial: close, and not
// always the same float (which is why an AVX2 build's softmax differs).
Test(exact, the_two_exps_are_different_roundings) {
    uint64_t rng = 2;
    int differ = 0;
    for (int i = 0; i < 10000; i++) {
        const float x = -20.0f * fabsf(test_rng_normal(&rng));
        const float a = exact_expf(EXACT_ORDER_AVX2, x), b = exact_expf(EXACT_ORDER_AVX512, x);
        cr_assert(fabsf(a - b) <= 2 * 0x1p-23f * b, "exp(%a): %a and %a", x, a, b);
        differ += a != b;
    }
    cr_assert(differ > 100 && differ < 9900, "%d of 10000 differ", differ);
}

// 1 + 2^-24 rounds to 1 in float: the order decides which small terms survive
Test(exact, reduce16_adds_halves_then_quarters_then_pairs) {
    float a[16] = {0};
    a[0] = 1.0f;
    a[8] = 0x1p-24f;   // added to a[0] first: lost
    a[12] = 0x1p-24f;  // lands in t3[4], then t6[0] = t3[4] + t3[0]: lost again
    a[2] = 0x1p-23f;   // t6[2] joins t6[0] last of its pair: kept
    const float got = exact_reduce16(a);
    cr_assert_eq(got, 1.0f + 0x1p-23f, "%a", got);
}

Test(exact, the_two_reduce8_pair_the_quarters_apart) {
    // after the halves: t0 = 1, t1 = t2 = 2^-24. (t0 + t2) + (t1 + t3) loses
    // t2 and keeps nothing of t1 alone; (t0 + t1) + (t2 + t3) the same way --
    // so tell them apart by t1 = 2^-24 with t3 = 2^-24: the softmax's pairs
    // t1 + t3 = 2^-23 survive, the dot's t0 + t1 rounds t1 away
    float a[8] = {1.0f, 0x1p-24f, 0, 0x1p-24f, 0, 0, 0, 0};
    cr_assert_eq(exact_reduce8(a), 1.0f + 0x1p-23f, "%a", exact_reduce8(a));
    cr_assert_eq(exact_reduce8_hadd(a), 1.0f, "%a", exact_reduce8_hadd(a));
}

// The reference of ggml_vec_dot_f16's layout, written out slowly: element k
// of a step in accumulator (k / lanes) % 4, lane k % lanes.
static float dot_f16_layout(exact_order o, const seam_f16 *x, const seam_f16 *y, int n) {
    const int lanes = o == EXACT_ORDER_AVX512 ? 16 : 8;
    float acc[4][16] = {{0}};
    const int np = n / (4 * lanes) * (4 * lanes);
    for (int k = 0; k < np; k++) {
        float *a = &acc[(k / lanes) % 4][k % lanes];
        *a = fmaf(seam_f16_to_f32(x[k]), seam_f16_to_f32(y[k]), *a);
    }
    float r[16];
    for (int l = 0; l < lanes; l++) r[l] = (acc[0][l] + acc[2][l]) + (acc[1][l] + acc[3][l]);
    double sum = np ? (lanes == 16 ? exact_reduce16(r) : exact_reduce8_hadd(r)) : 0.0;
    for (int k = np; k < n; k++) sum += (double)(seam_f16_to_f32(x[k]) * seam_f16_to_f32(y[k]));
    return (float)sum;
}

Test(exact, dot_f16_follows_ggml_layout) {
    uint64_t rng = 7;
    const int lengths[] = {1, 31, 32, 33, 63, 64, 100, 128, 256, 300};
    int differ = 0;
    for (size_t li = 0; li < sizeof lengths / sizeof *lengths; li++) {
        const int n = lengths[li];
        seam_f16 x[300], y[300];
        double exact = 0;
        for (int i = 0; i < n; i++) {
            x[i] = seam_f32_to_f16(test_rng_normal(&rng));
            y[i] = seam_f32_to_f16(test_rng_normal(&rng));
            exact += (double)seam_f16_to_f32(x[i]) * seam_f16_to_f32(y[i]);
        }
        FOR_EACH_ORDER(o) {
            const float got = exact_dot_f16(o, x, y, n);
            cr_assert_eq(got, dot_f16_layout(o, x, y, n), "%s, n = %d", exact_order_names[o], n);
            cr_assert(fabs(got - exact) < 1e-4 * (1 + fabs(exact)), "n = %d: %g vs %g", n, got, exact);
        }
        differ += exact_dot_f16(EXACT_ORDER_AVX2, x, y, n) != exact_dot_f16(EXACT_ORDER_AVX512, x, y, n);
    }
    cr_assert(differ > 0, "the two orders gave the same sums on every length");
}

Test(exact, dot_f32_fuses_the_leftovers) {
    float x[70], y[70];
    uint64_t rng = 8;
    for (int i = 0; i < 70; i++) x[i] = test_rng_normal(&rng), y[i] = test_rng_normal(&rng);
    FOR_EACH_ORDER(o) {
        const int lanes = exact_lanes(o), np = 70 / (4 * lanes) * (4 * lanes);
        float acc[4][16] = {{0}};
        for (int k = 0; k < np; k++) acc[(k / lanes) % 4][k % lanes] = fmaf(x[k], y[k], acc[(k / lanes) % 4][k % lanes]);
        float r[16];
        for (int l = 0; l < lanes; l++) r[l] = (acc[0][l] + acc[2][l]) + (acc[1][l] + acc[3][l]);
        float want = lanes == 16 ? exact_reduce16(r) : exact_reduce8_hadd(r);
        for (int k = np; k < 70; k++) want = fmaf(x[k], y[k], want);
        cr_assert_eq(exact_dot_f32(o, x, y, 70), want, "%s", exact_order_names[o]);
    }
}

Test(exact, softmax_sums_to_one_and_masks) {
    float x[80];
    uint64_t rng = 3;
    for (int i = 0; i < 80; i++) x[i] = 4 * test_rng_normal(&rng);
    FOR_EACH_ORDER(o) {
        float y[80];
        memcpy(y, x, sizeof x);
        exact_softmax(o, y, 5, 37, 48);  // visible 5..36 of a 48-wide row
        double sum = 0;
        for (int t = 5; t < 37; t++) {
            cr_assert(y[t] > 0 && y[t] <= 1);
            sum += y[t];
        }
        cr_assert(fabs(sum - 1) < 1e-6, "%g", sum);
        for (int t = 0; t < 5; t++) cr_assert_eq(y[t], x[t], "masked positions are not written");
        // a row of 20: chunks of the build's lanes, the rest with libm's expf
        memcpy(y, x, sizeof x);
        exact_softmax(o, y, 0, 20, 20);
        float m = x[0];
        for (int t = 1; t < 20; t++) m = x[t] > m ? x[t] : m;
        const int lanes = exact_lanes(o), whole = 20 / lanes * lanes;
        double s = 0;
        for (int c = 0; c < whole; c += lanes) {
            float lane[16];
            for (int l = 0; l < lanes; l++) lane[l] = exact_expf(o, x[c + l] - m);
            s += lanes == 16 ? exact_reduce16(lane) : exact_reduce8(lane);
        }
        for (int t = whole; t < 20; t++) s += expf(x[t] - m);
        cr_assert_eq(y[17], expf(x[17] - m) * (float)(1.0 / s), "%s", exact_order_names[o]);
        cr_assert_eq(y[3], exact_expf(o, x[3] - m) * (float)(1.0 / s), "%s", exact_order_names[o]);
    }
}

Test(exact, attention_values_are_dots_over_positions) {
    enum { T = 70, D = 8 };
    seam_f16 v[T * D], col[128] = {0}, w16[128] = {0};
    float w[T], out[D], scratch[D * 64];
    uint64_t rng = 11;
    for (int i = 0; i < T * D; i++) v[i] = seam_f32_to_f16(test_rng_normal(&rng));
    for (int t = 0; t < T; t++) w[t] = fabsf(test_rng_normal(&rng)) / T;
    for (size_t oi = 0; oi < sizeof ORDERS / sizeof *ORDERS; oi++) {
        const exact_order o = ORDERS[oi];
        exact_attention_values(o, out, w, v, 3, T, D, D, T, scratch);
        for (int d = 0; d < D; d++) {
            // the same as one f16 dot over a zero-padded row of 128 positions
            for (int t = 0; t < 128; t++) {
                col[t] = t < T ? v[t * D + d] : 0;
                w16[t] = t >= 3 && t < T ? seam_f32_to_f16(w[t]) : 0;
            }
            cr_assert_eq(out[d], exact_dot_f16(o, col, w16, 128), "%s, d = %d", exact_order_names[o], d);
        }
    }
}

Test(exact, swiglu_uses_vector_exp_then_libm_tail) {
    float g[20], u[20], y[20];
    uint64_t rng = 5;
    for (int i = 0; i < 20; i++) g[i] = 3 * test_rng_normal(&rng), u[i] = test_rng_normal(&rng);
    FOR_EACH_ORDER(o) {
        memcpy(y, g, sizeof g);
        exact_swiglu(o, y, u, 20);
        const int whole = 20 / exact_lanes(o) * exact_lanes(o);
        for (int i = 0; i < 20; i++) {
            const float e = i < whole ? exact_expf(o, 0.0f - g[i]) : expf(-g[i]);
            cr_assert_eq(y[i], g[i] / (1.0f + e) * u[i], "%s, i = %d", exact_order_names[o], i);
        }
    }
}
