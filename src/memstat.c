// memstat.c — measured memory beside the plan's prediction.
#include "memstat.h"

#include <string.h>

#include "cpu/ops.h"
#include "engine.h"
#include "gpu_segment.h"

void memstat_read(seam_memstat *m) {
    memset(m, 0, sizeof *m);
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    while (f && fgets(line, sizeof line, f)) {
        unsigned long long kib;
        if (sscanf(line, "VmRSS: %llu kB", &kib) == 1) m->rss = kib << 10;
        else if (sscanf(line, "RssAnon: %llu kB", &kib) == 1) m->rss_anon = kib << 10;
        else if (sscanf(line, "RssFile: %llu kB", &kib) == 1) m->rss_file = kib << 10;
    }
    if (f) fclose(f);
    m->gpu_free = gpu_free_bytes();
}

seam_mem_prediction memstat_predict(const seam_plan *p, const seam_model *m, int n_threads) {
    const seam_config *c = &m->cfg;
    uint64_t mapped = 0;
    for (uint64_t i = 0; i < m->file.n_tensors; i++) mapped += m->file.tensors[i].n_bytes;
    const uint64_t more_threads = (uint64_t)(n_threads > 1 ? n_threads - 1 : 0) *
                                  cpu_attention_scratch_floats(p->n_ctx, c->head_dim) * sizeof(float);
    const bool gpu = plan_gpu_computed_layers(p) > 0 || p->head == DEV_GPU;
    return (seam_mem_prediction){
        .host = mapped + p->kv[DEV_CPU] + p->scratch[DEV_CPU] + more_threads + p->pinned,
        .gpu = gpu ? plan_total(p, DEV_GPU) : 0,
    };
}

double memstat_error(uint64_t measured, uint64_t predicted) {
    return predicted ? 100.0 * ((double)measured - (double)predicted) / (double)predicted : 0.0;
}

static uint64_t grown(uint64_t now, uint64_t base) { return now > base ? now - base : 0; }

void memstat_report(FILE *out, const char *label, const seam_memstat *base, const seam_memstat *now,
                    const seam_mem_prediction *pred) {
    const double mib = 1048576.0;
    if (now->rss) {
        const uint64_t host = grown(now->rss, base->rss);
        fprintf(out, "seam: memory after %s: host %.1f MiB (anon %.1f, file %.1f), predicted %.1f MiB (%+.1f%%)\n",
                label, host / mib, grown(now->rss_anon, base->rss_anon) / mib,
                grown(now->rss_file, base->rss_file) / mib, pred->host / mib, memstat_error(host, pred->host));
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
