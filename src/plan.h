// plan.h — the split: which layer (and which tensor class of a layer) lives
// on which device, and the memory each device needs for it.
//
// The memory model (DESIGN.md) that the plan predicts and the engine later
// checks against what the devices report:
//
//   weights(device) + KV(device) + scratch(device) <= budget(device)
//
// KV bytes per token = sum over the layers on that device of
// 2 * n_kv_heads * head_dim * bytes(kv type).
#ifndef SEAM_PLAN_H
#define SEAM_PLAN_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "model.h"

typedef enum { DEV_CPU = 0, DEV_GPU = 1, DEV_COUNT } seam_device;

// How the layers that do not fit (gpu_layers..n_layers-1, whose weights stay
// in host memory) run: the three explanations of DESIGN.md, side by side.
typedef enum {
    OVERFLOW_CPU,     // on the CPU (llama.cpp's way): the hidden state crosses the bus twice a token
    OVERFLOW_MAPPED,  // on the GPU, its kernels reading the weights from pinned, mapped host memory
    OVERFLOW_STREAM,  // on the GPU, each layer's weights copied in by DMA while earlier layers compute
    OVERFLOW_COUNT
} seam_overflow;

extern const char *const plan_overflow_name[OVERFLOW_COUNT];  // "cpu", "mapped", "stream"
// The placement whose name is the len bytes at name; -1 for none.
int plan_overflow_find(const char *name, size_t len);

// What the user asks for.
typedef struct {
    int gpu_layers;        // layers 0..gpu_layers-1 on the GPU; -1: as many as fit
    int n_cpu_moe;         // the experts of layers 0..n_cpu_moe-1 stay on the CPU (llama.cpp's --n-cpu-moe)
    bool cpu_moe;          // every layer's experts stay on the CPU (llama.cpp's --cpu-moe)
    int head;              // -1: on the device that computes the last layer; DEV_CPU or DEV_GPU to force
    seam_overflow overflow;  // how the layers past gpu_layers run
    int n_ctx;             // positions the KV cache holds
    uint64_t gpu_budget;   // bytes the GPU may use; 0 = there is no GPU
} seam_plan_request;

// Where each part of the model lives, and what each device holds.
typedef struct {
    int n_layers;
    int gpu_layers;                       // layers 0..gpu_layers-1 live in GPU memory and run there
    seam_overflow overflow;               // how the rest run: on the CPU, or on the GPU from host memory
    seam_device layer[SEAM_MAX_LAYERS];   // where a layer's attention, norms, router and dense FFN live
    seam_device experts[SEAM_MAX_LAYERS]; // the routed experts of a layer (MoE only)
    seam_device head;                     // output norm and head
    uint64_t weights[DEV_COUNT];          // bytes of weights per device
    uint64_t kv[DEV_COUNT];               // bytes of KV cache per device, at n_ctx
    uint64_t scratch[DEV_COUNT];          // activations and other working buffers
    uint64_t budget[DEV_COUNT];           // what the device may use (CPU: 0 = unchecked)
    uint64_t pinned;                      // mapped, stream: host bytes pinned for the overflow layers' copies
    int n_ctx;
} seam_plan;

// Builds the plan for req. Fails with a message when the GPU layers asked for
// do not fit (naming the largest count that does) or are asked of a machine
// without a GPU.
int plan_make(seam_plan *p, const seam_model *m, const seam_plan_request *req, seam_error *e);

// The largest number of GPU layers whose plan fits the request's budget.
int plan_max_gpu_layers(const seam_model *m, const seam_plan_request *req);

uint64_t plan_total(const seam_plan *p, seam_device d);

// Layers the GPU computes: gpu_layers, or all of them when the overflow
// runs there.
int plan_gpu_computed_layers(const seam_plan *p);

// The plan as a table: per device its layers, weights, KV and scratch bytes.
void plan_print(const seam_plan *p, FILE *out);

// "12G", "512M", "3000000000": bytes, or -1 when the text is not a size.
int plan_parse_bytes(const char *text, uint64_t *out);

#endif
