// memstat.c — measured memory beside the plan's prediction.
#include "plan/memstat.h"

#include <string.h>
#include <unistd.h>

#include "cpu/kernels.h"
#include "cpu/ops.h"
#include "cpu/pool.h"
#include "engine/engine.h"
#include "gpu/gpu_segment.h"

// Resident bytes of the mappings that overlap [lo, hi), from smaps: a header
// line "start-end perms ..." per mapping, then its "Rss: N kB".
static uint64_t resident_in(uintptr_t lo, uintptr_t hi) {
    FILE *f = fopen("/proc/self/smaps", "r");
    char line[512];
    uint64_t bytes = 0;
    bool inside = false;
    while (f && fgets(line, sizeof line, f)) {
        unsigned long start, end;
        unsigned long long kib;
        char perms[8];
        if (sscanf(line, "%lx-%lx %7s", &start, &end, perms) == 3) inside = start < hi && end > lo;
        else if (inside && sscanf(line, "Rss: %llu kB", &kib) == 1) bytes += kib << 10;
    }
    if (f) fclose(f);
    return bytes;
}

void memstat_read(seam_memstat *m, const gguf_file *model) {
    memset(m, 0, sizeof *m);
    // The GPU first: the process's first CUDA call creates the context,
    // whose host memory (100-300 MB on a real driver) is then in both
    // snapshots instead of counted as the engine's.
    m->gpu_free = gpu_free_bytes();
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    while (f && fgets(line, sizeof line, f)) {
        unsigned long long kib;
        if (sscanf(line, "VmRSS: %llu kB", &kib) == 1) m->rss = kib << 10;
        else if (sscanf(line, "RssAnon: %llu kB", &kib) == 1) m->rss_anon = kib << 10;
    }
    if (f) fclose(f);
    if (model && model->mapped)
        m->model = resident_in((uintptr_t)model->base, (uintptr_t)model->base + (uintptr_t)model->size);
}

seam_mem_prediction memstat_predict(const seam_plan *p, const seam_model *m, int n_threads) {
    const seam_config *c = &m->cfg;
    const long page = sysconf(_SC_PAGESIZE);
    const uint64_t mapped = m->file.mapped ? seam_align_up(m->file.size, page > 0 ? (uint64_t)page : 4096) : 0;
    // each worker: its attention scratch, and what any thread holds (pool_worker_bytes)
    const uint64_t more_threads =
        (uint64_t)(n_threads > 1 ? n_threads - 1 : 0) *
        (cpu_attention_scratch_floats(p->n_ctx, c->head_dim) * sizeof(float) + pool_worker_bytes());
    // every thread's stack holds the prefill tiles' buffers for the widest
    // rows, where the kernel set keeps any
    const cpu_kernels *kern = cpu_kernels_get();
    int64_t widest = c->n_embd > c->n_heads * c->head_dim ? c->n_embd : c->n_heads * c->head_dim;
    const int64_t ff = c->n_expert ? c->n_ff_exp : c->n_ff;
    widest = ff > widest ? ff : widest;
    const uint64_t tiles =
        kern->tiles_stack_bytes ? (uint64_t)(n_threads > 1 ? n_threads : 1) * kern->tiles_stack_bytes(widest) : 0;
    const bool gpu = plan_gpu_computed_layers(p) > 0 || p->head == DEV_GPU;
    return (seam_mem_prediction){
        .host = mapped + p->kv[DEV_CPU] + p->scratch[DEV_CPU] + more_threads + tiles + p->pinned,
        .gpu = gpu ? plan_total(p, DEV_GPU) : 0,
    };
}

double memstat_error(uint64_t measured, uint64_t predicted) {
    return predicted ? 100.0 * ((double)measured - (double)predicted) / (double)predicted : 0.0;
}

static uint64_t grown(uint64_t now, uint64_t base) { return now > base ? now - base : 0; }

uint64_t memstat_host(const seam_memstat *base, const seam_memstat *now) {
    return grown(now->rss_anon, base->rss_anon) + now->model;
}

void memstat_report(FILE *out, const char *label, const seam_memstat *base, const seam_memstat *now,
                    const seam_mem_prediction *pred) {
    const double mib = 1048576.0;
    if (now->rss) {
        const uint64_t host = memstat_host(base, now);
        fprintf(out, "seam: memory after %s: host %.1f MiB (anon %.1f, model file %.1f), predicted %.1f MiB (%+.1f%%)\n",
                label, host / mib, grown(now->rss_anon, base->rss_anon) / mib, now->model / mib, pred->host / mib,
                memstat_error(host, pred->host));
    } else {
        fprintf(out, "seam: memory after %s: /proc/self/status cannot be read; predicted %.1f MiB on the host\n",
                label, pred->host / mib);
    }
    if (pred->gpu) {
        const uint64_t gpu = grown(base->gpu_free, now->gpu_free);
        fprintf(out, "seam: memory after %s: GPU %.1f MiB (cudaMemGetInfo), predicted %.1f MiB (%+.1f%%)\n", label,
                gpu / mib, pred->gpu / mib, memstat_error(gpu, pred->gpu));
    }
}
