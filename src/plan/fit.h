// fit.h — choosing the split: of the placements that fit the GPU's budget,
// the one the speed model (predict.h) says decodes fastest.
//
// Automatic placement elsewhere fills the GPU: the most layers that fit.
// That is not the fastest split when a layer's experts are better left on
// the CPU (an expert split fits more layers' attention), when the head is
// worth more than a layer, or when a small model's launch cost outweighs
// what the GPU saves. The fit tries every placement the engine runs:
//
//   GPU layers    0..n_layers
//   experts       of the first K GPU layers on the CPU, K = 0..GPU layers (MoE models)
//   head          on the CPU, or on the GPU when the GPU computes every layer
//   overflow      the layers past the GPU's on the CPU, or on the GPU from host memory
//                 (mapped, stream)
//   KV cache      with --fit-cache, its key and value types (f16, q8_0), which trade
//                 the cache's bytes against its precision: only where the user allows it
//
// each with its memory from the plan (plan.h) and its speed from
// predict_token; the dimensions the user fixed (--head, --overflow,
// --n-cpu-moe) stay fixed.
#ifndef SEAM_FIT_H
#define SEAM_FIT_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "plan/hw.h"
#include "plan/plan.h"

typedef enum {
    FIT_SPEED,   // the fastest predicted placement that fits (-ngl auto, seam plan --fit)
    FIT_MEMORY,  // the most GPU layers that fit, experts and head as by default (--fit memory)
} fit_rule;

extern const char *const fit_rule_name[2];  // "speed", "memory"

// The placements the user left open.
typedef struct {
    bool head;      // --head not given
    bool overflow;  // --overflow not given
    bool experts;   // neither --n-cpu-moe nor --cpu-moe given
    bool cache;     // --fit-cache: the KV cache's key and value types too (f16, q8_0)
} fit_open;

typedef struct {
    int gpu_layers, n_cpu_moe;
    seam_device head;
    seam_overflow overflow;
    seam_kv_config cache;
    uint64_t gpu_bytes;  // the plan's GPU total
    double tok_s;        // predicted decode speed
} fit_candidate;

typedef struct {
    fit_candidate *c;  // every placement that fits, fastest first (ties: resident, then fewer GPU bytes)
    int n;
    int chosen;        // index in c of the rule's choice
    int fullest;       // index in c of the memory rule's choice: the fullest layer split
    int llamacpp;      // index in c of what llama.cpp's --fit places for the budget (fit_llamacpp); -1: the
                       // user fixed what it would choose
    fit_rule rule;
    uint64_t budget;
    int n_layers;      // the model's
} fit_result;

// Every placement of m that fits base's GPU budget, predicted on hw with
// n_threads threads and the KV cache filled to base->n_ctx; base gives the
// context, cache, prefill mode and the placements the user fixed. Fails
// with a message when not even the CPU-only plan can be made or predicted.
int fit_search(const seam_model *m, const seam_plan_request *base, fit_open open, const hw_profile *hw,
               int n_threads, fit_rule rule, fit_result *out, seam_error *e);

// llama.cpp's --fit (common/fit.cpp) leaves a margin of free memory
// (--fit-target, 1024 MiB by default) and fills the rest by memory alone: a
// MoE model whose dense weights fit keeps every layer on the GPU and moves
// the experts of as few layers as it must to the CPU; any other keeps the
// most whole layers. It also puts part of one more layer on the
// GPU, which seam's placements do not express: seam's row is the whole-layer
// placement nearest to it, counted by seam's memory model.
#define FIT_LLAMACPP_MARGIN (1024ull << 20)

// base with the chosen placement in it: the request plan_make takes to make it.
seam_plan_request fit_request(const fit_result *r, const seam_plan_request *base);

// The flags that reproduce a placement: "-ngl 33 --n-cpu-moe 17 --head cpu -ctk q8_0".
void fit_flags(const fit_candidate *c, char *buf, size_t len);

// The ranked table: the first `show` placements, the fullest layer split and
// llama.cpp's placement after them when they are not among them, the choice
// marked, and the flags.
void fit_print(const fit_result *r, int show, FILE *out);

// The candidates as one JSON object (no trailing newline).
void fit_write_json(const fit_result *r, FILE *out);

void fit_free(fit_result *r);

#endif
