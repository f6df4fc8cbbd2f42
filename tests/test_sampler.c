// test_sampler.c — the sampler's distributions: greedy picks the first
// largest logit; temperature, top-k and top-p draw each token with the
// probability their definitions give, over many draws; a seed repeats its
// draws and another seed does not.
//
// The bounds cannot flake: the draws are seeded, so a run repeats exactly,
// and each bound is one no sound sampler misses for any seed. A token of
// probability q drawn N times is counted N q within
// Z sqrt(N q (1 - q)) + 1; at Z = 6 a correct sampler lands outside once in
// 5e8 counts. A token the filters remove is never drawn.
#include <criterion/criterion.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "text/sampler.h"

#define N_DRAWS 200000
#define Z 6.0

enum { V = 6 };

// The probabilities the logits log(p) give at temperature t, kept to the
// first k tokens (p is descending) and then to the smallest prefix whose
// mass reaches top_p, renormalised.
static void expected(const double p[V], double t, int k, double top_p, double q[V]) {
    double sum = 0;
    for (int i = 0; i < V; i++) q[i] = i < k ? pow(p[i], 1.0 / t) : 0, sum += q[i];
    double kept = 0;
    int n = 0;
    while (n < k && kept < top_p * sum) kept += q[n++];
    for (int i = 0; i < V; i++) q[i] = i < n ? q[i] / kept : 0;
}

// N_DRAWS draws from logits log(p) (shuffled into another order, so that the
// sort is exercised) against expected()'s probabilities.
static void check_distribution(const double p[V], float temperature, int top_k, float top_p, uint64_t seed) {
    static const int order[V] = {3, 0, 5, 1, 4, 2};  // token order[i] gets p[i]
    float base[V], logits[V];
    for (int i = 0; i < V; i++) base[order[i]] = logf((float)p[i]);
    double q[V];
    expected(p, temperature, top_k ? top_k : V, top_p, q);
    seam_sampler s;
    cr_assert_eq(sampler_init(&s, V, temperature, top_k, top_p, seed), 0);
    long count[V] = {0};
    for (int d = 0; d < N_DRAWS; d++) {
        memcpy(logits, base, sizeof base);
        const int t = sampler_sample(&s, logits);
        cr_assert(t >= 0 && t < V, "drew token %d of %d", t, V);
        count[t]++;
    }
    sampler_free(&s);
    for (int i = 0; i < V; i++) {
        const long c = count[order[i]];
        const double mean = N_DRAWS * q[i], bound = Z * sqrt(N_DRAWS * q[i] * (1 - q[i])) + 1;
        cr_assert(fabs(c - mean) <= bound,
                  "temperature %g, top-k %d, top-p %g: the token of p = %g drawn %ld times in %d, "
                  "expected %.0f +- %.0f",
                  temperature, top_k, top_p, p[i], c, N_DRAWS, mean, bound);
    }
}

static const double P[V] = {0.4, 0.25, 0.15, 0.1, 0.06, 0.04};

Test(sampler, greedy_takes_the_first_largest) {
    float logits[V] = {0.5f, 2.0f, -1.0f, 2.0f, 1.9f, 0.0f};
    seam_sampler s;
    cr_assert_eq(sampler_init(&s, V, 0.0f, 0, 1.0f, 1), 0);
    for (int d = 0; d < 100; d++) cr_assert_eq(sampler_sample(&s, logits), 1);
    sampler_free(&s);
    cr_assert_eq(sampler_argmax(logits, V), 1);
    const float negative[3] = {-3.0f, -2.0f, -5.0f};
    cr_assert_eq(sampler_argmax(negative, 3), 1);
}

Test(sampler, temperature_one_draws_the_softmax) { check_distribution(P, 1.0f, 0, 1.0f, 1); }

// A temperature above 1 flattens the distribution, one below sharpens it.
Test(sampler, temperature_scales_the_logits) {
    check_distribution(P, 2.0f, 0, 1.0f, 2);
    check_distribution(P, 0.5f, 0, 1.0f, 3);
}

Test(sampler, top_k_keeps_the_k_most_likely) {
    check_distribution(P, 1.0f, 1, 1.0f, 4);
    check_distribution(P, 1.0f, 3, 1.0f, 5);
    check_distribution(P, 1.0f, V, 1.0f, 6);  // k = the vocabulary: no filter
}

// The nucleus is the smallest prefix whose mass reaches top-p (0.4 + 0.25 =
// 0.65 < 0.7, so 0.7 keeps three tokens and 0.6 two), taken after the
// temperature (at 2 the same 0.7 keeps four).
Test(sampler, top_p_keeps_the_nucleus) {
    check_distribution(P, 1.0f, 0, 0.7f, 7);
    check_distribution(P, 1.0f, 0, 0.6f, 8);
    check_distribution(P, 2.0f, 0, 0.7f, 9);
    check_distribution(P, 1.0f, 0, 0.3f, 10);  // the top token alone
}

// top-k first, then top-p within the k kept.
Test(sampler, top_k_then_top_p) {
    check_distribution(P, 1.0f, 4, 0.75f, 11);
    check_distribution(P, 1.5f, 2, 0.9f, 12);
}

static void draws(uint64_t seed, int out[1000]) {
    float logits[V];
    seam_sampler s;
    cr_assert_eq(sampler_init(&s, V, 1.0f, 0, 1.0f, seed), 0);
    for (int d = 0; d < 1000; d++) {
        for (int i = 0; i < V; i++) logits[i] = logf((float)P[i]);
        out[d] = sampler_sample(&s, logits);
    }
    sampler_free(&s);
}

// The same seed draws the same tokens; other seeds (0 means a fixed default)
// draw others: two independent runs of 1000 draws from P agree at ~24% of
// them, far from all.
Test(sampler, a_seed_repeats_its_draws) {
    static const uint64_t seeds[] = {0, 1, 2, 12345};
    int a[4][1000], b[1000];
    for (int k = 0; k < 4; k++) {
        draws(seeds[k], a[k]);
        draws(seeds[k], b);
        cr_assert(memcmp(a[k], b, sizeof b) == 0, "seed %llu drew other tokens the second time",
                  (unsigned long long)seeds[k]);
    }
    for (int k = 0; k < 4; k++)
        for (int m = k + 1; m < 4; m++) {
            int same = 0;
            for (int d = 0; d < 1000; d++) same += a[k][d] == a[m][d];
            cr_assert_lt(same, 400, "seeds %llu and %llu drew the same token %d times in 1000",
                         (unsigned long long)seeds[k], (unsigned long long)seeds[m], same);
        }
}
