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
// anything on the CPU (the embedding row at least, so in practice always);
// the GPU and bus keys when the plan uses a GPU. A group is all or nothing.
#ifndef SEAM_HW_H
#define SEAM_HW_H

#include <stdbool.h>
#include <stdio.h>

#include "common.h"
#include "gguf.h"

enum { HW_SOURCE_LEN = 160 };

typedef enum {
    // CPU
    HW_CPU_THREADS,     // threads the CPU part runs on (the default of seam plan -t)
    HW_CPU_READ_GBS,    // read bandwidth on cpu_threads threads, GB/s
    HW_CPU_READ_GBS_1,  // one thread's read bandwidth, GB/s: fewer threads read min(t * this, cpu_read_gbs)
    HW_CPU_ATTN_GBS,    // optional: one thread's attention speed, bytes of cached K and V per query head per second (GB/s)
    HW_CPU_JOB_US,      // optional: starting and joining one job on the thread pool (more than one thread), us
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

// Per weight type: one thread's dot-product speed on weights in cache (GB/s
// of weight bytes), the compute roof of a CPU matvec; 0 = unknown
// (bandwidth-bound). Keys `cpu_dot_gbs.Q4_K` etc.
typedef struct {
    char name[64];
    char path[512];
    double v[HW_KEYS];
    bool set[HW_KEYS];
    char source[HW_KEYS][HW_SOURCE_LEN];
    double cpu_dot_gbs[GGML_TYPE_COUNT];
    char dot_source[HW_SOURCE_LEN];  // one source for the dot rates (they come from one probe)
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
// attention's speed and the pool's job cost. Takes a few seconds.
int hw_measure_cpu(hw_profile *hw, int n_threads, seam_error *e);

// The profile as `key = value  # source` lines (a file hw_parse reads back).
void hw_write(const hw_profile *hw, FILE *out);

#endif
