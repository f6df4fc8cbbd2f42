// energy.h — the GPU board's power and energy over a stretch of work, from
// NVML (the driver's management library, loaded at run time with dlopen,
// so that a machine without the driver builds and runs; on the emulated
// device, the emulator's own NVML, a power model of its card).
//
// What it measures is the board's: the CPU's energy (the CPU layers of a
// split, the host's work) is not in it, as the offload article's J/token
// figures (GPU power) leave it out too.
#ifndef SEAM_GPU_ENERGY_H
#define SEAM_GPU_ENERGY_H

#include <stdbool.h>

typedef struct gpu_energy gpu_energy;

typedef struct {
    double joules;   // the board's energy over the stretch
    double seconds;  // its length
    double watts;    // joules / seconds
    double busy;     // the share of the stretch some kernel was running (NVML's utilization, sampled), 0..1
    bool counter;    // joules from the board's energy counter (else from the power samples)
} gpu_energy_result;

// Starts measuring device 0: its energy counter now, and a thread sampling
// its power and utilization every few milliseconds. NULL, with *why, where
// there is no NVML (no driver, or a build without CUDA) or no device.
gpu_energy *gpu_energy_start(const char **why);

// Stops the sampling and gives what the board used since the start; frees m.
void gpu_energy_stop(gpu_energy *m, gpu_energy_result *out);

#endif
