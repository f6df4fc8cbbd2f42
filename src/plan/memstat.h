// memstat.h — the memory the process holds, measured, beside what the plan
// predicts (DESIGN.md's memory model, checked): on the host the resident
// pages of a run, its anonymous memory (KV cache, activations, the timeline)
// from /proc/self/status and the model file's mapping from
// /proc/self/smaps; on the GPU the used memory cudaMemGetInfo reports. The
// pages of the program's and its libraries' code (about 1 MiB, shared with
// every process that runs them) are no part of a run and left out of both.
#ifndef SEAM_MEMSTAT_H
#define SEAM_MEMSTAT_H

#include <stdint.h>
#include <stdio.h>

#include "model/model.h"
#include "plan/plan.h"

typedef struct {
    uint64_t rss, rss_anon;  // host bytes; 0 where /proc/self/status cannot be read
    uint64_t model;          // resident bytes of the model file's mapping (0 where smaps cannot be read)
    uint64_t gpu_free;       // device 0's free bytes; 0 without a GPU
} seam_memstat;

// The process's memory now; model: the mapped model file (NULL: none).
void memstat_read(seam_memstat *m, const gguf_file *model);

// What running plan p of model m adds to the process, in bytes: on the host
// the mapped file, every page of it (gguf_prefetch reads them all at load;
// the GPU's copies are read from the mapping), the host's KV cache and
// scratch (engine_scratch_bytes: with the timeline of a full context, all
// written at load, so the figure holds at every depth), the attention scratch
// of the n_threads - 1 other threads with their
// own (pool_worker_bytes: thread-local storage, stack) and the overflow layers' pinned copies;
// on the GPU its plan total.
typedef struct {
    uint64_t host, gpu;
} seam_mem_prediction;

seam_mem_prediction memstat_predict(const seam_plan *p, const seam_model *m, int n_threads);

// The host bytes a run holds at `now`: the anonymous memory grown since
// `base` (read before the engine's buffers came in) and the model file's
// resident pages.
uint64_t memstat_host(const seam_memstat *base, const seam_memstat *now);

// One line per device: what the process holds now (memstat_host; on the GPU
// the memory used since base), the prediction, and the error, e.g.
//   seam: memory after loading: host 612.3 MiB (anon 258.1, model file 354.2), predicted 611.6 MiB (+0.1%)
void memstat_report(FILE *out, const char *label, const seam_memstat *base, const seam_memstat *now,
                    const seam_mem_prediction *pred);

// The signed error of measured against predicted, in percent of predicted.
double memstat_error(uint64_t measured, uint64_t predicted);

#endif
