// memstat.h — the memory the process holds, measured, beside what the plan
// predicts (DESIGN.md's memory model, checked): on the host the resident set
// from /proc/self/status, split into its anonymous part (KV cache,
// activations) and its file-backed part (the model's mapping); on the GPU
// the used memory cudaMemGetInfo reports.
#ifndef SEAM_MEMSTAT_H
#define SEAM_MEMSTAT_H

#include <stdint.h>
#include <stdio.h>

#include "model.h"
#include "plan.h"

typedef struct {
    uint64_t rss, rss_anon, rss_file;  // host bytes; 0 where /proc/self/status cannot be read
    uint64_t gpu_free;                 // device 0's free bytes; 0 without a GPU
} seam_memstat;

void memstat_read(seam_memstat *m);

// What running plan p of model m adds to the process, in bytes: on the host
// the mapped file's tensors (all of them: the GPU's copies are read from the
// mapping; gguf_prefetch makes them resident at load), the host's KV cache
// and scratch (engine_scratch_bytes, with the attention scratch of n_threads
// threads) and the overflow layers' pinned copies; on the GPU its plan total.
typedef struct {
    uint64_t host, gpu;
} seam_mem_prediction;

seam_mem_prediction memstat_predict(const seam_plan *p, const seam_model *m, int n_threads);

// One line per device: what the process holds now beyond `base` (read before
// the model's tensors and the engine's buffers came in), the prediction, and
// the error, e.g.
//   seam: memory after loading: host 612.3 MiB (anon 258.1, file 354.2), predicted 611.6 MiB (+0.1%)
void memstat_report(FILE *out, const char *label, const seam_memstat *base, const seam_memstat *now,
                    const seam_mem_prediction *pred);

// The signed error of measured against predicted, in percent of predicted.
double memstat_error(uint64_t measured, uint64_t predicted);

#endif
