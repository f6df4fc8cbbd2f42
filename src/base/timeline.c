// timeline.c — crossing and segment records; the report and the JSON dump.
#include "base/timeline.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

const char *const timeline_direction_name[3] = {"H2D", "D2H", "WTS"};

void timeline_init(seam_timeline *t) { memset(t, 0, sizeof *t); }

void timeline_free(seam_timeline *t) {
    free(t->crossings);
    free(t->tokens);
    memset(t, 0, sizeof *t);
}

int timeline_reserve_tokens(seam_timeline *t, size_t n) {
    if (n <= t->cap_tokens) return 0;
    seam_token_time *p = seam_alloc_resident(n * sizeof *p);
    if (!p) return -1;
    if (t->n_tokens) memcpy(p, t->tokens, t->n_tokens * sizeof *p);
    free(t->tokens);
    t->tokens = p;
    t->cap_tokens = n;
    return 0;
}

// Appends one element of `size` bytes to a growing array.
static int push(void **items, size_t *n, size_t *cap, const void *item, size_t size) {
    if (*n == *cap) {
        const size_t grown = *cap ? 2 * *cap : 256;
        void *p = realloc(*items, grown * size);
        if (!p) return -1;
        *items = p;
        *cap = grown;
    }
    memcpy((char *)*items + *n * size, item, size);
    (*n)++;
    return 0;
}

int timeline_add_crossing(seam_timeline *t, const seam_crossing *c) {
    return push((void **)&t->crossings, &t->n_crossings, &t->cap_crossings, c, sizeof *c);
}

int timeline_add_token(seam_timeline *t, const seam_token_time *tt) {
    return push((void **)&t->tokens, &t->n_tokens, &t->cap_tokens, tt, sizeof *tt);
}

typedef struct {
    double mean, p50, p99;
} stats;

// Sorts v (n) in place.
static stats summarise(double *v, size_t n) {
    stats s = {0, 0, 0};
    if (n == 0) return s;
    seam_sort_doubles(v, n);
    for (size_t i = 0; i < n; i++) s.mean += v[i];
    s.mean /= (double)n;
    s.p50 = v[(n - 1) / 2];
    s.p99 = v[(size_t)ceil(0.99 * (double)(n - 1))];
    return s;
}

// A kind of crossing: a direction, a size and a place in the layer stack.
typedef struct {
    seam_direction dir;
    uint64_t bytes;
    int layer;
} crossing_kind;

static void report_crossings(const seam_timeline *t, FILE *out) {
    crossing_kind kinds[64];
    size_t n_kinds = 0;
    for (size_t i = 0; i < t->n_crossings && n_kinds < 64; i++) {
        const seam_crossing *c = &t->crossings[i];
        size_t k = 0;
        while (k < n_kinds && !(kinds[k].dir == c->dir && kinds[k].bytes == c->bytes && kinds[k].layer == c->layer)) k++;
        if (k == n_kinds) kinds[n_kinds++] = (crossing_kind){c->dir, c->bytes, c->layer};
    }
    if (!n_kinds) return;
    fprintf(out, "  crossings (us)          count |  wait mean   p50   p99 |  copy mean   p50   p99 | total mean   p50   p99\n");
    fprintf(out, "  (H2D, D2H: the hidden state or the logits; WTS: a layer's weights streamed in, wait = the GPU's stall)\n");
    double *wait = malloc(t->n_crossings * sizeof *wait), *copy = malloc(t->n_crossings * sizeof *copy),
           *total = malloc(t->n_crossings * sizeof *total);
    for (size_t k = 0; wait && copy && total && k < n_kinds; k++) {
        size_t n = 0;
        for (size_t i = 0; i < t->n_crossings; i++) {
            const seam_crossing *c = &t->crossings[i];
            if (c->dir != kinds[k].dir || c->bytes != kinds[k].bytes || c->layer != kinds[k].layer) continue;
            wait[n] = c->wait_us, copy[n] = c->copy_us, total[n] = c->total_us;
            n++;
        }
        const stats w = summarise(wait, n), cp = summarise(copy, n), tt = summarise(total, n);
        fprintf(out, "  %s %7" PRIu64 " B @%-4d %7zu | %9.1f %5.1f %5.1f | %9.1f %5.1f %5.1f | %10.1f %5.1f %5.1f\n",
                timeline_direction_name[kinds[k].dir], kinds[k].bytes, kinds[k].layer, n, w.mean, w.p50, w.p99,
                cp.mean, cp.p50, cp.p99, tt.mean, tt.p50, tt.p99);
    }
    free(wait), free(copy), free(total);
}

void timeline_report(const seam_timeline *t, FILE *out) {
    static const char *SEGMENTS[SEG_COUNT] = {"GPU layers", "CPU layers", "head"};
    size_t n = 0;
    for (size_t i = 0; i < t->n_tokens; i++) n += !t->tokens[i].prefill;
    if (n == 0) {
        fprintf(out, "timeline: no decoded tokens\n");
        return;
    }
    // per decode token: each segment, the crossings that belong to it, the idle GPU
    double *v = malloc(n * sizeof *v);
    if (!v) return;
    double seg_mean[SEG_COUNT] = {0}, cross_mean = 0, idle_mean = 0, token_mean = 0;
    for (int s = 0; s < SEG_COUNT; s++) {
        size_t k = 0;
        for (size_t i = 0; i < t->n_tokens; i++)
            if (!t->tokens[i].prefill) v[k++] = t->tokens[i].segment_us[s];
        seg_mean[s] = summarise(v, n).mean;
    }
    size_t k = 0;
    for (size_t i = 0; i < t->n_tokens; i++)
        if (!t->tokens[i].prefill) v[k++] = t->tokens[i].token_us;
    const stats token = summarise(v, n);
    token_mean = token.mean;
    double attention_mean = 0;
    for (size_t i = 0; i < t->n_tokens; i++)
        if (!t->tokens[i].prefill) {
            idle_mean += t->tokens[i].gpu_idle_us / (double)n;
            attention_mean += t->tokens[i].cpu_attention_us / (double)n;
        }
    for (size_t i = 0; i < t->n_crossings; i++) {
        const seam_crossing *c = &t->crossings[i];
        for (size_t j = 0; j < t->n_tokens; j++)
            if (t->tokens[j].token == c->token && !t->tokens[j].prefill) cross_mean += c->total_us / (double)n;
    }
    free(v);

    fprintf(out, "timeline: %zu decoded tokens, %.2f ms each (median %.2f, p99 %.2f): %.1f tok/s\n", n,
            token_mean / 1e3, token.p50 / 1e3, token.p99 / 1e3, 1e6 / token_mean);
    fprintf(out, "  %-22s %10s %8s\n", "part of a token", "mean ms", "share");
    double parts = cross_mean;
    for (int s = 0; s < SEG_COUNT; s++) {
        parts += seg_mean[s];
        if (seg_mean[s] > 0)
            fprintf(out, "  %-22s %10.3f %7.1f%%\n", SEGMENTS[s], seg_mean[s] / 1e3, 100 * seg_mean[s] / token_mean);
        if (s == SEG_CPU && attention_mean > 0)
            fprintf(out, "    %-20s %10.3f %7.1f%%   (of the CPU layers: over the KV cache)\n", "attention",
                    attention_mean / 1e3, 100 * attention_mean / token_mean);
    }
    if (cross_mean > 0)
        fprintf(out, "  %-22s %10.3f %7.1f%%\n", "crossings", cross_mean / 1e3, 100 * cross_mean / token_mean);
    const double unaccounted = token_mean - parts;
    fprintf(out, "  %-22s %10.3f %7.1f%%   (embedding, sampling, bookkeeping)\n", "other", unaccounted / 1e3,
            100 * unaccounted / token_mean);
    if (seg_mean[SEG_GPU] > 0)
        fprintf(out, "  (GPU layers: CUDA events from the GPU taking up the segment's launch -- one graph, or the\n"
                     "   first of its ops with --no-graph -- to its last op: the launches are in it)\n");
    if (idle_mean > 0)
        fprintf(out, "  GPU idle while the CPU works: %.3f ms a token (%.1f%%)\n", idle_mean / 1e3,
                100 * idle_mean / token_mean);
    fprintf(out, "  the parts add up to %.1f%% of the token time (%s 3%%)\n", 100 * parts / token_mean,
            fabs(unaccounted) <= 0.03 * token_mean ? "within" : "NOT within");
    report_crossings(t, out);
}

int timeline_write_json(const seam_timeline *t, const char *path, seam_error *e) {
    FILE *f = fopen(path, "w");
    if (!f) return seam_fail(e, "cannot create %s: %s", path, strerror(errno));
    fprintf(f, "{\n  \"crossings\": [");
    for (size_t i = 0; i < t->n_crossings; i++) {
        const seam_crossing *c = &t->crossings[i];
        fprintf(f, "%s\n    {\"token\": %d, \"layer\": %d, \"dir\": \"%s\", \"bytes\": %" PRIu64
                   ", \"wait_us\": %.3f, \"copy_us\": %.3f, \"total_us\": %.3f}",
                i ? "," : "", c->token, c->layer, timeline_direction_name[c->dir], c->bytes, c->wait_us,
                c->copy_us, c->total_us);
    }
    fprintf(f, "\n  ],\n  \"tokens\": [");
    for (size_t i = 0; i < t->n_tokens; i++) {
        const seam_token_time *tt = &t->tokens[i];
        fprintf(f, "%s\n    {\"token\": %d, \"pos\": %d, \"prefill\": %s, \"gpu_us\": %.3f, \"cpu_us\": %.3f, "
                   "\"cpu_attention_us\": %.3f, \"head_us\": %.3f, \"gpu_idle_us\": %.3f, \"token_us\": %.3f}",
                i ? "," : "", tt->token, tt->pos, tt->prefill ? "true" : "false", tt->segment_us[SEG_GPU],
                tt->segment_us[SEG_CPU], tt->cpu_attention_us, tt->segment_us[SEG_HEAD], tt->gpu_idle_us, tt->token_us);
    }
    fprintf(f, "\n  ]\n}\n");
    if (fclose(f)) return seam_fail(e, "writing %s failed", path);
    return 0;
}
