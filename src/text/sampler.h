// sampler.h — turns logits into the next token: greedy, or temperature with
// top-k and top-p (nucleus) filtering, from a seeded generator.
#ifndef SEAM_SAMPLER_H
#define SEAM_SAMPLER_H

#include <stdint.h>

typedef struct {
    float prob;
    int index;
} seam_prob_index;

typedef struct {
    int n_vocab;
    float temperature;      // 0: greedy
    int top_k;              // 0: off
    float top_p;            // 1: off
    uint64_t rng_state;
    seam_prob_index *cand;  // (n_vocab) scratch
} seam_sampler;

int sampler_init(seam_sampler *s, int n_vocab, float temperature, int top_k, float top_p,
                 uint64_t seed);
void sampler_free(seam_sampler *s);
// Picks a token; may modify logits.
int sampler_sample(seam_sampler *s, float *logits);
// The index of the largest logit (the first among equals).
int sampler_argmax(const float *logits, int n);

#endif
