// sampler.c — greedy, temperature, top-k, top-p.
#include "text/sampler.h"

#include <math.h>
#include <stdlib.h>

int sampler_init(seam_sampler *s, int n_vocab, float temperature, int top_k, float top_p,
                 uint64_t seed) {
    s->n_vocab = n_vocab;
    s->temperature = temperature;
    s->top_k = top_k;
    s->top_p = top_p;
    s->rng_state = seed ? seed : 0x5eed5eedull;
    s->cand = malloc((size_t)n_vocab * sizeof *s->cand);
    return s->cand ? 0 : -1;
}

void sampler_free(seam_sampler *s) {
    free(s->cand);
    s->cand = NULL;
}

static float rng_f32(uint64_t *state) {  // xorshift64*, uniform in [0, 1)
    *state ^= *state >> 12;
    *state ^= *state << 25;
    *state ^= *state >> 27;
    return (float)((*state * 0x2545F4914F6CDD1Dull) >> 40) / 16777216.0f;
}

int sampler_argmax(const float *logits, int n) {
    int best = 0;
    for (int i = 1; i < n; i++)
        if (logits[i] > logits[best]) best = i;
    return best;
}

static int by_prob_desc(const void *a, const void *b) {
    const seam_prob_index *x = a, *y = b;
    if (x->prob != y->prob) return x->prob > y->prob ? -1 : 1;
    return x->index - y->index;
}

int sampler_sample(seam_sampler *s, float *logits) {
    if (s->temperature <= 0.0f) return sampler_argmax(logits, s->n_vocab);

    // softmax(logits / temperature)
    float max = logits[sampler_argmax(logits, s->n_vocab)];
    double sum = 0.0;
    for (int i = 0; i < s->n_vocab; i++) {
        s->cand[i].index = i;
        s->cand[i].prob = expf((logits[i] - max) / s->temperature);
        sum += s->cand[i].prob;
    }
    int n = s->n_vocab;
    const int filter = (s->top_k > 0 && s->top_k < n) || s->top_p < 1.0f;
    if (filter) {
        qsort(s->cand, (size_t)n, sizeof *s->cand, by_prob_desc);
        if (s->top_k > 0 && s->top_k < n) n = s->top_k;
        sum = 0.0;
        for (int i = 0; i < n; i++) sum += s->cand[i].prob;
        if (s->top_p < 1.0f) {  // the smallest prefix whose mass reaches top_p
            double kept = 0.0;
            for (int i = 0; i < n; i++) {
                kept += s->cand[i].prob;
                if (kept >= s->top_p * sum) {
                    n = i + 1;
                    break;
                }
            }
            sum = kept;
        }
    }
    const double r = rng_f32(&s->rng_state) * sum;
    double cdf = 0.0;
    for (int i = 0; i < n; i++) {
        cdf += s->cand[i].prob;
        if (r < cdf) return s->cand[i].index;
    }
    return s->cand[n - 1].index;
}
