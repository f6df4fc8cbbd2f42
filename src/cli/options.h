// options.h — what the `seam` command line asks for (every command but
// bench, which parses its own lists): the flags, their defaults, their checks.
//
// Floor src/cli/ (the top): the `seam` command -- its commands (main.c),
// flags (here) and the bench (bench.h). Includes any floor below.
#ifndef SEAM_OPTIONS_H
#define SEAM_OPTIONS_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "engine/engine.h"
#include "plan/plan.h"

typedef struct {
    const char *model_path;
    const char *tokens;     // --tokens "1,2,3"
    const char *prompt;     // -p "text" (or -f's file, read by the caller)
    const char *prompt_file;  // -f FILE
    int n_predict;          // -n
    int n_ctx;              // -c; 0 = 512, or the model's trained context when that is less
    seam_kv_config cache;   // -ctk, -ctv, --swa-full
    int n_threads;          // -t
    int gpu_layers;         // -ngl; -1 = auto (the first of the list for plan)
    int ngl_list[64];       // plan: -ngl 0-48+4, every count to plan and predict
    int n_ngl;
    bool threads_set;       // -t given (plan --hw: else the profile's threads)
    const char *hw;         // plan --hw: a hardware profile to predict the speed on
    const char *hw_out;     // --hw-out: where --hw this writes what it measured
    const char *shape_path; // plan --shape: a shape file instead of -m
    const char *json_path;  // plan --json: the predictions as JSON
    uint64_t gpu_mem;       // --gpu-mem: plan for a GPU of this many bytes
    int head;               // --head: -1 = with the last layer, DEV_CPU, DEV_GPU
    seam_overflow overflow; // --overflow: how the layers past -ngl run
    bool overflow_set;      // --overflow given: a fit keeps it
    int fit;                // --fit: 0 = not asked (plan), else 1 + a fit_rule (speed, memory)
    bool fit_cache;         // --fit-cache: the fit may choose the KV cache's types
    bool cpu_moe;           // --cpu-moe
    int n_cpu_moe;          // --n-cpu-moe
    int cpu_moe_list[64];   // plan: --n-cpu-moe 0-48+8, every count to plan and predict
    int n_cpu_moe_list;
    bool no_graph;          // --no-graph: one launch per GPU op instead of a replayed CUDA graph
    seam_gpu_prefill gpu_prefill;  // --gpu-prefill: how a prompt's batches cross the GPU layers
    uint64_t seed;
    float temperature;
    int top_k;
    float top_p;
    int print_ids;          // --ids
    const char *positional; // inspect FILE
    const char *out_path;   // logits -o FILE
    const char *timeline_path;  // --timeline FILE.json
    const char *trace_path;     // --trace FILE.json: Chrome Trace Event format
    bool time_layers;       // --layers: each layer's time, a table after the run
    bool quiet;             // -q: no load, plan, memory or timing lines on stderr
    bool help;              // -h: the command's usage, nothing run
} options;

// The usage of `command` and its flags (seam run --help); NULL, or a name
// no command has: every command's (seam --help).
void options_usage(FILE *f, const char *command);

// argv past the command into o, the defaults first; -1 after printing what
// is wrong (an unknown flag, a flag the command does nothing with, a value
// out of range).
int options_parse(int argc, char **argv, const char *command, options *o);

#endif
