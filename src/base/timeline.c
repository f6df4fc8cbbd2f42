// timeline.c — crossing and segment records; the report and the JSON dump.
#include "base/timeline.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <stdbool.h>
#include <string.h>

const char *const timeline_direction_name[3] = {"H2D", "D2H", "WTS"};

void timeline_init(seam_timeline *t) { memset(t, 0, sizeof *t); }

void timeline_free(seam_timeline *t) {
    free(t->crossings);
    free(t->tokens);
    free(t->layers);
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

seam_timeline_mark timeline_mark(const seam_timeline *t) {
    return (seam_timeline_mark){.crossings = t->n_crossings, .tokens = t->n_tokens, .layers = t->n_layers};
}

void timeline_rewind(seam_timeline *t, seam_timeline_mark m) {
    if (m.crossings < t->n_crossings) t->n_crossings = m.crossings;
    if (m.tokens < t->n_tokens) t->n_tokens = m.tokens;
    if (m.layers < t->n_layers) t->n_layers = m.layers;
}

int timeline_add_crossing(seam_timeline *t, const seam_crossing *c) {
    return push((void **)&t->crossings, &t->n_crossings, &t->cap_crossings, c, sizeof *c);
}

int timeline_add_token(seam_timeline *t, const seam_token_time *tt) {
    return push((void **)&t->tokens, &t->n_tokens, &t->cap_tokens, tt, sizeof *tt);
}

int timeline_add_layer(seam_timeline *t, const seam_layer_time *lt) {
    return push((void **)&t->layers, &t->n_layers, &t->cap_layers, lt, sizeof *lt);
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
    int layer, experts;
} crossing_kind;

static bool of_kind(const seam_crossing *c, const crossing_kind *k) {
    return c->dir == k->dir && c->bytes == k->bytes && c->layer == k->layer && c->experts == k->experts;
}

// c's kind appended to kinds (n of at most max) if it is not there yet; the new count.
static size_t add_kind(crossing_kind *kinds, size_t n, size_t max, const seam_crossing *c) {
    for (size_t k = 0; k < n; k++)
        if (of_kind(c, &kinds[k])) return n;
    if (n < max) kinds[n++] = (crossing_kind){c->dir, c->bytes, c->layer, c->experts};
    return n;
}

static void report_crossings(const seam_timeline *t, FILE *out) {
    crossing_kind kinds[64];
    size_t n_kinds = 0;
    for (size_t i = 0; i < t->n_crossings; i++) n_kinds = add_kind(kinds, n_kinds, 64, &t->crossings[i]);
    if (!n_kinds) return;
    fprintf(out, "  crossings (us)          count |  wait mean   p50   p99 |  copy mean   p50   p99 | total mean   p50   p99\n");
    fprintf(out, "  (H2D, D2H: the hidden state or the logits, or (experts) an MoE layer's experts' input and output\n"
                 "   run on the CPU; WTS: a layer's weights streamed in, wait = the GPU's stall)\n");
    double *wait = malloc(t->n_crossings * sizeof *wait), *copy = malloc(t->n_crossings * sizeof *copy),
           *total = malloc(t->n_crossings * sizeof *total);
    for (size_t k = 0; wait && copy && total && k < n_kinds; k++) {
        size_t n = 0;
        for (size_t i = 0; i < t->n_crossings; i++) {
            const seam_crossing *c = &t->crossings[i];
            if (!of_kind(c, &kinds[k])) continue;
            wait[n] = c->wait_us, copy[n] = c->copy_us, total[n] = c->total_us;
            n++;
        }
        const stats w = summarise(wait, n), cp = summarise(copy, n), tt = summarise(total, n);
        fprintf(out, "  %s %7" PRIu64 " B @%-4d %7zu | %9.1f %5.1f %5.1f | %9.1f %5.1f %5.1f | %10.1f %5.1f %5.1f%s\n",
                timeline_direction_name[kinds[k].dir], kinds[k].bytes, kinds[k].layer, n, w.mean, w.p50, w.p99,
                cp.mean, cp.p50, cp.p99, tt.mean, tt.p50, tt.p99, kinds[k].experts ? "  (experts)" : "");
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

// Whether token index i was decoded (not a prompt token), from token `from` on.
static bool decoded(const seam_timeline *t, size_t from, int i) {
    return i >= 0 && (size_t)i >= from && (size_t)i < t->n_tokens && t->tokens[i].token == i && !t->tokens[i].prefill;
}

// The crossings of decoded tokens just before layer `layer` (H2D, D2H), a
// row each between the layers' rows.
static void crossing_rows(const seam_timeline *t, size_t from, int layer, int experts, size_t n_decoded, FILE *out) {
    crossing_kind kinds[8];
    size_t n_kinds = 0;
    for (size_t i = 0; i < t->n_crossings; i++) {  // in the order they happen
        const seam_crossing *c = &t->crossings[i];
        if (c->layer == layer && c->experts == experts && c->dir != CROSS_WEIGHTS && decoded(t, from, c->token))
            n_kinds = add_kind(kinds, n_kinds, 8, c);
    }
    for (size_t k = 0; k < n_kinds; k++) {
        double wait = 0, copy = 0, total = 0;
        size_t n = 0;
        for (size_t i = 0; i < t->n_crossings; i++) {
            const seam_crossing *c = &t->crossings[i];
            if (!of_kind(c, &kinds[k]) || !decoded(t, from, c->token)) continue;
            wait += c->wait_us, copy += c->copy_us, total += c->total_us, n++;
        }
        fprintf(out, "   -- %s %" PRIu64 " B crosses%s: %.1f us a token (wait %.1f, copy %.1f)\n",
                timeline_direction_name[kinds[k].dir], kinds[k].bytes, experts ? " (the experts')" : "",
                total / (double)n_decoded, wait / (double)n, copy / (double)n);
    }
}

void timeline_layer_report(const seam_timeline *t, size_t from, int n_layers, FILE *out) {
    size_t n_decoded = 0;
    double token_mean = 0, segment_mean[SEG_COUNT] = {0};
    for (size_t i = 0; i < t->n_tokens; i++)
        if (decoded(t, from, (int)i)) {
            n_decoded++;
            token_mean += t->tokens[i].token_us;
            for (int s = 0; s < SEG_COUNT; s++) segment_mean[s] += t->tokens[i].segment_us[s];
        }
    if (!t->n_layers || !n_decoded) {
        fprintf(out, "layers: no decoded token timed layer by layer\n");
        return;
    }
    token_mean /= (double)n_decoded;
    for (int s = 0; s < SEG_COUNT; s++) segment_mean[s] /= (double)n_decoded;
    double *v = malloc(n_decoded * sizeof *v);
    if (!v) return;
    fprintf(out, "layers: each decoded token's time in each layer (%zu tokens)\n", n_decoded);
    bool streamed = false;
    for (size_t i = 0; i < t->n_crossings; i++) streamed = streamed || t->crossings[i].dir == CROSS_WEIGHTS;
    fprintf(out, "  %5s %-4s %9s %9s %7s %10s %9s %7s%s%s\n", "layer", "dev", "mean us", "p99 us", "share",
            "weights MB", "KV MB", "GB/s", t->predicted_us ? "  pred us" : "",
            streamed ? "   streamed: copy us, GPU stall us" : "");
    double summed[SEG_COUNT] = {0};
    bool timed[SEG_COUNT] = {0};
    for (int il = 0; il <= n_layers; il++) {
        // a crossing "before the head" is the hidden state going to a CPU
        // head, or the logits coming back from a GPU head: after its row
        bool gpu_head = false;
        for (size_t i = 0; il == n_layers && i < t->n_layers; i++)
            gpu_head = gpu_head || (t->layers[i].layer == il && t->layers[i].on_gpu);
        if (!gpu_head) crossing_rows(t, from, il, 0, n_decoded, out);
        // a row for each device that ran part of it: the GPU's, then (its
        // experts kept in host memory) the CPU's, their crossings between
        for (int on_gpu = 1; on_gpu >= 0; on_gpu--) {
            size_t n = 0;
            double kv = 0, weights = 0;
            for (size_t i = 0; i < t->n_layers; i++) {
                const seam_layer_time *lt = &t->layers[i];
                if (lt->layer != il || lt->on_gpu != on_gpu || lt->n != 1 || !decoded(t, from, lt->token)) continue;
                v[n++] = lt->us;
                weights = (double)lt->weight_bytes, kv += (double)lt->kv_bytes;
            }
            if (!n) continue;
            if (!on_gpu) crossing_rows(t, from, il, 1, n_decoded, out);
            kv /= (double)n;
            const stats st = summarise(v, n);
            const int seg = on_gpu ? SEG_GPU : il == n_layers ? SEG_HEAD : SEG_CPU;
            summed[seg] += st.mean, timed[seg] = true;
            char name[16];
            snprintf(name, sizeof name, il == n_layers ? "head" : "%d", il);
            fprintf(out, "  %5s %-4s %9.1f %9.1f %6.1f%% %10.2f %9.3f %7.1f", name, on_gpu ? "GPU" : "CPU", st.mean,
                    st.p99, 100 * st.mean / token_mean, weights / 1e6, kv / 1e6, (weights + kv) / st.mean / 1e3);
            if (t->predicted_us) fprintf(out, " %8.1f", t->predicted_us[il]);
            double copy = 0, stall = 0;
            size_t n_copies = 0;
            for (size_t i = 0; i < t->n_crossings; i++) {
                const seam_crossing *c = &t->crossings[i];
                if (c->dir == CROSS_WEIGHTS && c->layer == il && decoded(t, from, c->token))
                    copy += c->copy_us, stall += c->wait_us, n_copies++;
            }
            if (n_copies) fprintf(out, "   %.1f, %.1f", copy / (double)n_copies, stall / (double)n_copies);
            fprintf(out, "\n");
        }
        if (gpu_head) crossing_rows(t, from, il, 0, n_decoded, out);
    }
    free(v);
    // a GPU head's time is in the GPU segment's
    static const char *const SEGMENT[SEG_COUNT] = {"GPU segment", "CPU layers", "CPU head"};
    bool within = true;
    fprintf(out, "  the layers add up to");
    for (int s = 0, first = 1; s < SEG_COUNT; s++)
        if (timed[s] && segment_mean[s] > 0) {
            const double share = summed[s] / segment_mean[s];
            within = within && fabs(share - 1) <= 0.03;
            fprintf(out, "%s %.1f%% of the %s", first ? "" : ",", 100 * share, SEGMENT[s]);
            first = 0;
        }
    fprintf(out, " (%s 3%%)\n", within ? "within" : "NOT within");
}

int timeline_write_json(const seam_timeline *t, const char *metadata, const char *path, seam_error *e) {
    FILE *f = fopen(path, "w");
    if (!f) return seam_fail(e, "cannot create %s: %s", path, strerror(errno));
    fprintf(f, "{\n  \"run\": %s,\n  \"crossings\": [", metadata ? metadata : "{}");
    for (size_t i = 0; i < t->n_crossings; i++) {
        const seam_crossing *c = &t->crossings[i];
        fprintf(f, "%s\n    {\"token\": %d, \"layer\": %d, \"dir\": \"%s\", \"bytes\": %" PRIu64
                   ", \"wait_us\": %.3f, \"copy_us\": %.3f, \"total_us\": %.3f, \"experts\": %s}",
                i ? "," : "", c->token, c->layer, timeline_direction_name[c->dir], c->bytes, c->wait_us,
                c->copy_us, c->total_us, c->experts ? "true" : "false");
    }
    fprintf(f, "\n  ],\n  \"tokens\": [");
    for (size_t i = 0; i < t->n_tokens; i++) {
        const seam_token_time *tt = &t->tokens[i];
        fprintf(f, "%s\n    {\"token\": %d, \"pos\": %d, \"prefill\": %s, \"batch\": %d, \"n_batch\": %d, "
                   "\"start_us\": %.3f, \"gpu_us\": %.3f, \"cpu_us\": %.3f, \"cpu_attention_us\": %.3f, "
                   "\"head_us\": %.3f, \"gpu_idle_us\": %.3f, \"token_us\": %.3f}",
                i ? "," : "", tt->token, tt->pos, tt->prefill ? "true" : "false", tt->batch, tt->n_batch, tt->start_us,
                tt->segment_us[SEG_GPU], tt->segment_us[SEG_CPU], tt->cpu_attention_us, tt->segment_us[SEG_HEAD],
                tt->gpu_idle_us, tt->token_us);
    }
    fprintf(f, "\n  ],\n  \"layers\": [");
    for (size_t i = 0; i < t->n_layers; i++) {
        const seam_layer_time *lt = &t->layers[i];
        fprintf(f, "%s\n    {\"token\": %d, \"n\": %d, \"layer\": %d, \"device\": \"%s\", \"pos\": %d, \"us\": %.3f, "
                   "\"weight_bytes\": %" PRIu64 ", \"kv_bytes\": %" PRIu64 "}",
                i ? "," : "", lt->token, lt->n, lt->layer, lt->on_gpu ? "GPU" : "CPU", lt->pos, lt->us,
                lt->weight_bytes, lt->kv_bytes);
    }
    fprintf(f, "\n  ]");
    // the records laid out in time, as --trace writes them (tools/plot.py's waterfall draws these)
    timeline_slice *v = NULL;
    size_t n = 0;
    if (timeline_slices(t, &v, &n)) return fclose(f), seam_fail(e, "out of memory laying out the timeline");
    fprintf(f, ",\n  \"slices\": [");
    for (size_t i = 0; i < n; i++)
        fprintf(f, "%s\n    {\"lane\": \"%s\", \"kind\": \"%s\", \"what\": \"%s\", \"token\": %d, \"layer\": %d, "
                   "\"start_us\": %.3f, \"us\": %.3f}",
                i ? "," : "", timeline_lane_name[v[i].lane], timeline_slice_kind_name[v[i].kind], v[i].what, v[i].token,
                v[i].layer, v[i].start_us, v[i].us);
    fprintf(f, "\n  ]");
    free(v);
    if (t->predicted_us && t->n_layers) {
        int last = 0;  // the model's layers and head: the highest layer recorded is the head
        for (size_t i = 0; i < t->n_layers; i++) last = t->layers[i].layer > last ? t->layers[i].layer : last;
        fprintf(f, ",\n  \"layer_predictions\": [");
        for (int il = 0; il <= last; il++)
            fprintf(f, "%s\n    {\"layer\": %d, \"us\": %.3f}", il ? "," : "", il, t->predicted_us[il]);
        fprintf(f, "\n  ]");
    }
    fprintf(f, "\n}\n");
    if (fclose(f)) return seam_fail(e, "writing %s failed", path);
    return 0;
}
