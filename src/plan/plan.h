// plan.h — the split: which layer (and which tensor class of a layer) lives
// on which device, and the memory each device needs for it.
//
// Floor src/plan/: deciding and predicting a split -- the plan and its
// memory (here), the speed model (predict.h), hardware profiles (hw.h), and
// the memory a run holds against the plan (memstat.h). Above engine/.
//
// The memory model (DESIGN.md) that the plan predicts and the engine later
// checks against what the devices report:
//
//   weights(device) + KV(device) + scratch(device) <= budget(device)
//
// The plan it makes is data (model/placement.h), which the engine takes.
#ifndef SEAM_PLAN_H
#define SEAM_PLAN_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "model/placement.h"

// What the user asks for.
typedef struct {
    int gpu_layers;        // layers 0..gpu_layers-1 on the GPU; -1: as many as fit
    int n_cpu_moe;         // the experts of layers 0..n_cpu_moe-1 stay on the CPU (llama.cpp's --n-cpu-moe)
    bool cpu_moe;          // every layer's experts stay on the CPU (llama.cpp's --cpu-moe)
    int head;              // -1: on the device that computes the last layer; DEV_CPU or DEV_GPU to force
    seam_overflow overflow;  // how the layers past gpu_layers run
    int n_ctx;             // positions the KV cache holds
    seam_kv_config cache;  // the KV cache's types and sliding-window policy
    uint64_t gpu_budget;   // bytes the GPU may use; 0 = there is no GPU
    seam_gpu_prefill gpu_prefill;  // how a prompt's batches cross the GPU layers (--gpu-prefill)
    bool head_apart;       // the head may be on the GPU while the CPU computes layers: llama.cpp's
                           // placement, which seam plans and predicts (seam plan) but does not run
} seam_plan_request;

// Builds the plan for req. Fails with a message when the GPU layers asked for
// do not fit (naming the largest count that does) or are asked of a machine
// without a GPU. A plan it makes never needs more GPU memory than the
// budget: the head, wherever it is asked to be, counted.
int plan_make(seam_plan *p, const seam_model *m, const seam_plan_request *req, seam_error *e);

// Whether the GPU's kernels read weights of this type (kernels/blocks.cuh's
// with_type; test_cuda checks that the two agree): a plan computes no layer
// on the GPU, nor the head, with a tensor of another type (an auto head
// stays on the CPU), in every build, so that predictions plan what runs.
bool plan_gpu_reads_type(uint32_t type);

// The largest number of GPU layers whose plan fits the request's budget.
int plan_max_gpu_layers(const seam_model *m, const seam_plan_request *req);

// p for exactly n GPU layers under req, none of plan_make's checks made
// (the budget, the head's place): what plan_make fills once they pass, and
// a prediction's plan of a placement the engine refuses -- the head on the
// GPU while the CPU computes layers, llama.cpp's (seam plan --hw --head gpu).
void plan_place(seam_plan *p, const seam_model *m, const seam_plan_request *req, int n);

uint64_t plan_total(const seam_plan *p, seam_device d);

// The plan as a table: per device its layers, weights, KV and scratch bytes.
void plan_print(const seam_plan *p, FILE *out);

// "12G", "512M", "3000000000": bytes, or -1 when the text is not a size.
int plan_parse_bytes(const char *text, uint64_t *out);

#endif
