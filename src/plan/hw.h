// hw.h — hardware profiles: the few numbers of a machine that decode speed
// depends on, each with where it came from.
//
// A profile is a small text file (models/hw/*.hw) of `key = value` lines,
// each value followed by its source as a comment that starts with one of
//   measured   on that machine (by which probe, when)
//   published  a datasheet, a specification, a published benchmark
//   derived    computed from other measured or published values (say how)
//   fitted     fitted to a measurement the model is then checked against
// for example
//   gpu_peak_gbs = 360   # published: RTX 3060 12 GB datasheet, 192-bit GDDR6 at 15 Gbps
//
// Keys come in groups: `name` always; the CPU keys when the plan runs
// layers or the head on the CPU; the GPU and bus keys when the plan uses a
// GPU. A group's required keys are all there or none is.
#ifndef SEAM_HW_H
#define SEAM_HW_H

#include <stdbool.h>
#include <stdio.h>

#include "base/common.h"
#include "format/gguf.h"
#include "model/model.h"

enum { HW_SOURCE_LEN = 256 };

typedef enum {
    // CPU
    HW_CPU_THREADS,     // optional: threads that reach cpu_read_gbs (the default of seam plan -t; else 1)
    HW_CPU_READ_GBS,    // read bandwidth on cpu_threads threads, GB/s
    HW_CPU_READ_GBS_1,  // one thread's read bandwidth, GB/s: fewer threads read min(t * this, cpu_read_gbs)
    // attention on cpu_threads threads at once (optional, all three or none): a thread's job is one
    // KV head's positions for the p query heads of its group it takes; a position costs it
    // K+V bytes / attn_read_gbs + p * (K+V bytes / attn_gbs + attn_pos_ns)
    HW_CPU_ATTN_READ_GBS,  // the KV head's K and V bytes read, GB/s per thread, the cache past the last-level cache
    HW_CPU_ATTN_GBS,    // each query's dot and weighted sum over them, GB/s of K and V bytes per thread
    HW_CPU_ATTN_POS_NS, // each query's fixed cost per position (scale, softmax, weight), ns
    // the same three (in the same order, all three or none, optional) over a cache that stays in the
    // last-level cache, as a model's does when its weights and cache fit there (cpu_llc_mib)
    HW_CPU_ATTN_LLC_READ_GBS, HW_CPU_ATTN_LLC_GBS, HW_CPU_ATTN_LLC_POS_NS,
    HW_CPU_CALL_US,     // optional: what one matvec call costs its calling thread beyond its bytes and rows, us
    HW_CPU_JOB_US,      // optional: a pool job's cost on cpu_threads threads beyond its call and its work, us
    HW_CPU_WAKE_US,     // optional: how long after a job opens the first worker takes part, us
    HW_CPU_LLC_MIB,     // optional: last-level cache; a CPU part whose weights fit runs at its kernels' in-cache speed
    // GPU
    HW_GPU_MEM_GIB,     // memory of one card, GiB
    HW_GPU_PEAK_GBS,    // memory bandwidth of one card, GB/s
    HW_GPU_EFFICIENCY,  // the share of gpu_peak_gbs decode's kernels reach (0..1]
    HW_GPU_KERNEL_US,   // GPU time per kernel beyond its bytes (launch gap, tail), us
    HW_GPU_KERNELS_PER_LAYER,  // optional: kernels of one layer (default: seam's own layer forward, counted)
    HW_GPU_COUNT,       // optional: cards the GPU layers are split over (default 1); each boundary is a crossing
    HW_LAUNCH_US,       // host time to launch a token's GPU segment (one graph launch), us
    // the bus
    HW_PCIE_GBS,        // host <-> device copy bandwidth, GB/s (the slowest link the crossings use)
    HW_PCIE_US,         // the fixed cost of one small copy, its synchronisation included, us
    HW_KEYS
} hw_key;

// Per weight type, a thread's dot kernel on weights in cache while every
// one of cpu_threads threads computes: a row of b bytes takes row_ns + b /
// dot_gbs nanoseconds (the rate of its blocks and the fixed cost of a row:
// its call, horizontal sum and store). This is the compute roof of a CPU
// matvec; 0 = unknown (bandwidth-bound). And the
// speed a matvec of that type streams from memory on cpu_threads threads
// (the read bandwidth less what the kernels' own work costs); 0 = unknown
// (the slower of cpu_read_gbs and the compute roof). Keys
// `cpu_dot_gbs.Q4_K`, `cpu_dot_row_ns.Q4_K`, `cpu_stream_gbs.Q4_K` etc.
typedef struct {
    char name[64];
    char path[512];
    double v[HW_KEYS];
    bool set[HW_KEYS];
    char source[HW_KEYS][HW_SOURCE_LEN];
    double cpu_dot_gbs[GGML_TYPE_COUNT];
    double cpu_dot_row_ns[GGML_TYPE_COUNT];
    double cpu_stream_gbs[GGML_TYPE_COUNT];
    bool cpu_dot_row_floor[GGML_TYPE_COUNT];  // a measured row cost at or below the floor, held there
    char dot_source[HW_SOURCE_LEN];  // one source for the dot figures (they come from one probe)
    bool has_cpu, has_gpu;
} hw_profile;

extern const char *const hw_key_name[HW_KEYS];

// Parses a profile from text (label names it in errors: "file:line: ...").
int hw_parse(hw_profile *hw, const char *text, const char *label, seam_error *e);

// A profile by file name, or by NAME: models/hw/NAME.hw beside the seam
// executable's build directory, or under the current directory.
int hw_load(hw_profile *hw, const char *name_or_path, seam_error *e);

// This machine's CPU measured now on up to n_threads threads: the memory
// probe's read bandwidth (src/cpu/membw.c), the dot kernels' speed per type,
// a call's and a pool job's fixed costs, and attention's costs on all the
// threads at once, at the head size of `shape` (the model planned) and the
// queries its attention's jobs take on n_threads (NULL: heads of 128,
// jobs of 4 queries). Takes a few seconds.
int hw_measure_cpu(hw_profile *hw, int n_threads, const seam_config *shape, seam_error *e);

// The GPU memory of all the profile's cards, bytes (0 without GPU figures).
uint64_t hw_gpu_bytes(const hw_profile *hw);

// The cards a plan with this GPU budget spreads its layers over: one where
// a single card of the profile holds the budget (--gpu-mem, or the one device
// a run has), every GPU layer on it and no crossing from card to card; all
// the profile's cards otherwise.
int hw_cards_for_budget(const hw_profile *hw, uint64_t budget);

// The profile as `key = value  # source` lines (a file hw_parse reads back).
void hw_write(const hw_profile *hw, FILE *out);
// Its values as one JSON object, {"cpu_read_gbs": 20.5, "cpu_dot_gbs.Q4_K": 22, ...}
// (hw_write's keys; no trailing newline).
void hw_write_json(const hw_profile *hw, FILE *out);

#endif
