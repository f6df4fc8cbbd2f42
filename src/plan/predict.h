// predict.h — the cost of a split before running it: a roofline of one
// decoded token over a plan and a hardware profile (hw.h).
//
// Decode reads every active weight once per token, so each device's part
// takes its bytes over its bandwidth; the CPU's part is held to the speed
// its kernels reach on the threads, and a small model's to the cost of its
// pool jobs. One
// token walks the data flow of DESIGN.md in order, one step after another
// (one stream, batch 1: nothing overlaps but a streamed layer's copy):
//
//   embedding row (CPU) -> launch -> H2D -> GPU layers [-> card to card]
//   -> D2H -> CPU layers -> head (CPU, or GPU and the logits D2H)
//
//   GPU layer   (active weights + KV read at the fill) / (peak * efficiency)
//               + kernels * kernel_us
//   CPU layer   weights streamed from memory: per weight type bytes / stream_gbs[type] (at t threads),
//               and each pool job's call_us + job_us (t > 1)
//               weights in the last-level cache: the CPU backend's pool jobs (q/k/v, output, gate/up, down;
//               MoE: router, per chosen expert gate/up and down), each call_us + job_us (t > 1) + its
//               row grabs (cpu_matvec_grab, row_ns + bytes / dot_gbs each) given to the thread free
//               first, the workers starting wake_us late
//               + attention: jobs of p query heads of one KV head (cpu_attention_per_job), a position
//               K+V bytes / attn_read_gbs + p * (K+V bytes / attn_gbs + attn_pos_ns), over the threads
//               alike (as measured with every thread attending at once)
//   crossing    pcie_us + bytes / pcie_gbs
//   mapped      a GPU layer whose weights come over the bus: active bytes / pcie_gbs
//   stream      a GPU layer whose whole weights are copied in while the previous
//               computes: the streamed layers take max(copies, compute)
//
// The GPU waits while the CPU works: its idle time is the token's time less
// the GPU's own steps.
#ifndef SEAM_PREDICT_H
#define SEAM_PREDICT_H

#include <stdio.h>

#include "plan/hw.h"
#include "model/model.h"
#include "plan/plan.h"

typedef enum { LANE_CPU, LANE_BUS, LANE_GPU, LANE_COUNT } predict_lane;

// What a step's time counts as in the decomposition.
typedef enum {
    PART_EMBED,       // the embedding row, on the host
    PART_LAUNCH,      // launching the GPU segment (host)
    PART_GPU_LAYERS,  // layers the GPU computes (resident, mapped or streamed)
    PART_CPU_LAYERS,  // layers (or experts) the CPU computes
    PART_HEAD,        // final norm and output head
    PART_CROSSING,    // the hidden state or the logits over the bus
    PART_COUNT
} predict_part;

extern const char *const predict_part_name[PART_COUNT];  // "embedding", "launch", ...
extern const char *const predict_lane_name[LANE_COUNT];  // "CPU", "bus", "GPU"

enum { PREDICT_MAX_STEPS = 32 };

typedef struct {
    predict_lane lane;
    predict_part part;
    char what[64];      // "layers 0..43", "D2H hidden state", ...
    uint64_t bytes;     // read (compute) or moved (crossing)
    double us;
} predict_step;

typedef struct {
    int gpu_layers, n_layers, n_threads, fill;
    int n_cpu_experts;  // GPU layers whose experts the CPU runs (--n-cpu-moe)
    seam_overflow overflow;
    seam_device head;
    predict_step step[PREDICT_MAX_STEPS];  // in the order the token runs them
    int n_steps;
    double part_us[PART_COUNT];
    double token_us, gpu_busy_us, gpu_idle_us;
    double cpu_attention_us;  // of part_us[PART_CPU_LAYERS]: the CPU layers' attention over the KV cache
    double tok_s;
    uint64_t memory[DEV_COUNT];  // the plan's bytes on each device (plan_total)
    uint64_t gpu_budget;         // the GPU's budget the plan was made for
    double layer_us[SEAM_MAX_LAYERS + 1];  // each layer's time, the head's at n_layers (a streamed layer: its
                                           // compute, which its copy overlaps)
} seam_prediction;

// One decoded token of model m under plan p on hardware hw, its CPU part on
// n_threads threads, attending over `fill` cached positions (itself
// included). Fails with a message when the profile lacks what the plan uses
// (a GPU, the CPU's figures).
int predict_token(const seam_model *m, const seam_plan *p, const hw_profile *hw, int n_threads, int fill,
                  seam_prediction *out, seam_error *e);

// Kernels seam's GPU forward (gpu_segment.c) launches for one layer of this
// configuration: the default of gpu_kernels_per_layer.
int predict_layer_kernels(const seam_config *c);

// The decomposition as a table (one prediction per call, after a header).
void predict_print_header(FILE *out);
void predict_print(const seam_prediction *pr, FILE *out);

// As one JSON object (no trailing newline): the totals, the parts and the steps.
void predict_write_json(const seam_prediction *pr, FILE *out);

#endif
