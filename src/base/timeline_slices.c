// timeline_slices.c — the timeline's records laid out in time (timeline.h):
// what --trace writes and tools/plot.py's waterfall draws.
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/timeline.h"

const char *const timeline_lane_name[TL_LANES] = {"host thread", "GPU stream", "copy stream", "CPU layers"};
const char *const timeline_slice_kind_name[SLICE_STALL + 1] = {"batch", "token", "other", "layer",
                                                               "crossing", "weights", "stall"};

typedef struct {
    timeline_slice *v;
    size_t n, cap;
    bool failed;
} slices;

static timeline_slice *add(slices *s, timeline_slice x) {
    if (s->n == s->cap) {
        const size_t cap = s->cap ? 2 * s->cap : 256;
        timeline_slice *p = realloc(s->v, cap * sizeof *p);
        if (!p) return s->failed = true, NULL;
        s->v = p, s->cap = cap;
    }
    s->v[s->n] = x;
    return &s->v[s->n++];
}

// One of a batch's parts before it is placed: its lane, its length, what it draws.
typedef struct {
    timeline_lane lane;
    slice_kind kind;
    double us;
    int layer, crossing;
    bool experts;  // a GPU layer's experts, kept on the CPU
} part;

typedef struct {
    part *v;
    int n, cap;
    bool failed;
} parts;

static void put(parts *p, timeline_lane lane, slice_kind kind, double us, int layer, int crossing) {
    if (p->n == p->cap) {
        const int cap = p->cap ? 2 * p->cap : 64;
        part *grown = realloc(p->v, (size_t)cap * sizeof *grown);
        if (!grown) {
            p->failed = true;
            return;
        }
        p->v = grown, p->cap = cap;
    }
    p->v[p->n++] = (part){lane, kind, us, layer, crossing, false};
}

static bool in_batch(int token, int first, int n) { return token >= first && token < first + n; }

// The crossings of the batch of the given direction, experts' or not, of one
// layer (-1: any), in the order they were recorded.
static void put_crossings(parts *p, const seam_timeline *t, int first, int n, seam_direction dir, int experts,
                          int layer) {
    for (size_t i = 0; i < t->n_crossings; i++) {
        const seam_crossing *c = &t->crossings[i];
        if (in_batch(c->token, first, n) && c->dir == dir && c->experts == experts && (layer < 0 || c->layer == layer))
            put(p, TL_GPU, SLICE_CROSSING, c->total_us, c->layer, (int)i);
    }
}

// The batch's parts in the data flow's order: the hidden state up, the GPU's
// layers (an MoE layer's experts kept on the CPU between its crossings down
// and up), the hidden state (or the logits) down, the CPU's layers and the
// head. Per layer where the run timed them, else per segment.
static void batch_parts(const seam_timeline *t, size_t b, parts *p) {
    const seam_token_time *bt = &t->tokens[b];
    const int first = bt->token, n = bt->n_batch > 0 ? bt->n_batch : 1;
    put_crossings(p, t, first, n, CROSS_H2D, 0, -1);
    bool timed = false, down = false;
    for (size_t i = 0; i < t->n_layers; i++) {
        const seam_layer_time *r = &t->layers[i];
        if (!in_batch(r->token, first, n)) continue;
        timed = true;
        bool gpu_layer = false;  // an earlier record of this layer on the GPU: r is its experts, on the CPU
        for (size_t k = 0; k < i && !r->on_gpu; k++)
            gpu_layer |= t->layers[k].on_gpu && t->layers[k].layer == r->layer && in_batch(t->layers[k].token, first, n);
        if (r->on_gpu) {
            put(p, TL_GPU, SLICE_LAYER, r->us, r->layer, -1);
        } else if (gpu_layer) {
            put_crossings(p, t, first, n, CROSS_D2H, 1, r->layer);
            put(p, TL_CPU, SLICE_LAYER, r->us, r->layer, -1);
            if (p->n) p->v[p->n - 1].experts = true;
            put_crossings(p, t, first, n, CROSS_H2D, 1, r->layer);
        } else {
            if (!down) put_crossings(p, t, first, n, CROSS_D2H, 0, -1), down = true;
            put(p, TL_CPU, SLICE_LAYER, r->us, r->layer, -1);
        }
    }
    if (timed) {
        if (!down) put_crossings(p, t, first, n, CROSS_D2H, 0, -1);  // the logits, after a head on the GPU
        return;
    }
    double seg[SEG_COUNT] = {0};
    for (int k = 0; k < n && b + (size_t)k < t->n_tokens; k++)
        for (int g = 0; g < SEG_COUNT; g++) seg[g] += t->tokens[b + (size_t)k].segment_us[g];
    if (seg[SEG_GPU] > 0) put(p, TL_GPU, SLICE_LAYER, seg[SEG_GPU], -1, -1);
    put_crossings(p, t, first, n, CROSS_D2H, 0, -1);
    put_crossings(p, t, first, n, CROSS_D2H, 1, -1);
    put_crossings(p, t, first, n, CROSS_H2D, 1, -1);
    if (seg[SEG_CPU] > 0) put(p, TL_CPU, SLICE_LAYER, seg[SEG_CPU], -1, -1);
    if (seg[SEG_HEAD] > 0) put(p, TL_CPU, SLICE_LAYER, seg[SEG_HEAD], -2, -1);  // -2: the head, as a segment
}

// head: the head's layer number (the model's layer count), -1 when no layer was timed
static void name_part(const seam_timeline *t, const part *q, int head, char *what, size_t len) {
    if (q->kind == SLICE_CROSSING) {
        const seam_crossing *c = &t->crossings[q->crossing];
        snprintf(what, len, "%s %s%llu B", timeline_direction_name[c->dir], c->experts ? "experts' " : "",
                 (unsigned long long)c->bytes);
    } else if (q->layer == -1) {
        snprintf(what, len, "%s layers", q->lane == TL_GPU ? "GPU" : "CPU");
    } else if (q->layer == -2 || q->layer == head) {
        snprintf(what, len, "head");
    } else {
        snprintf(what, len, "layer %d%s", q->layer, q->lane == TL_CPU && q->kind == SLICE_LAYER && q->experts ?
                 " experts" : "");
    }
}

// The streamed layers' copies of the batch on the copy stream: two buffers
// taken in turn (gpu_segment.c), so the first two copies start with the GPU's
// first part and each later one when the layer two before it is done with its
// buffer; a copy's stall is drawn at the start of the layer that waited.
static void place_weights(const seam_timeline *t, int first, int n, slices *s, size_t from) {
    double bus_free = -1;
    for (size_t i = from; i < s->n; i++)
        if (s->v[i].lane == TL_GPU && s->v[i].kind == SLICE_LAYER) {
            bus_free = s->v[i].start_us;
            break;
        }
    if (bus_free < 0) return;
    for (size_t i = 0; i < t->n_crossings; i++) {
        const seam_crossing *c = &t->crossings[i];
        if (c->dir != CROSS_WEIGHTS || !in_batch(c->token, first, n)) continue;
        const timeline_slice *waited = NULL, *buffer_free = NULL;
        for (size_t k = from; k < s->n; k++) {
            if (s->v[k].lane != TL_GPU || s->v[k].kind != SLICE_LAYER) continue;
            if (s->v[k].layer == c->layer) waited = &s->v[k];
            if (s->v[k].layer == c->layer - 2) buffer_free = &s->v[k];
        }
        const double start = buffer_free && buffer_free->start_us + buffer_free->us > bus_free
                                 ? buffer_free->start_us + buffer_free->us : bus_free;
        timeline_slice copy = {.lane = TL_COPY, .kind = SLICE_WEIGHTS, .start_us = start, .us = c->copy_us,
                               .token = first, .layer = c->layer, .crossing = (int)i};
        snprintf(copy.what, sizeof copy.what, "layer %d weights", c->layer);
        bus_free = start + c->copy_us;
        timeline_slice stall = {.lane = TL_GPU, .kind = SLICE_STALL, .token = first, .layer = c->layer,
                                .crossing = (int)i};
        if (waited && c->wait_us > 0) {
            stall.start_us = waited->start_us;
            stall.us = c->wait_us < waited->us ? c->wait_us : waited->us;  // within the layer it held up
            snprintf(stall.what, sizeof stall.what, "stall: layer %d weights", c->layer);
        }
        add(s, copy);
        if (waited && c->wait_us > 0) add(s, stall);
    }
}

int timeline_slices(const seam_timeline *t, timeline_slice **out, size_t *n_out) {
    slices s = {0};
    int head = -1;  // the highest layer recorded is the head's
    for (size_t i = 0; i < t->n_layers; i++) head = t->layers[i].layer > head ? t->layers[i].layer : head;
    parts work = {0}, *p = &work;
    for (size_t b = 0; b < t->n_tokens;) {
        const seam_token_time *bt = &t->tokens[b];
        const int n = bt->n_batch > 0 ? bt->n_batch : 1;
        double span = 0;
        for (int k = 0; k < n && b + (size_t)k < t->n_tokens; k++) span += t->tokens[b + (size_t)k].token_us;
        // the host lane: a batch of several holds its tokens; a token, what it spent outside its parts
        const size_t from = s.n;
        if (n > 1) {
            timeline_slice batch = {.lane = TL_HOST, .kind = SLICE_BATCH, .start_us = bt->start_us, .us = span,
                                    .token = bt->token, .layer = -1, .crossing = -1};
            snprintf(batch.what, sizeof batch.what, "prompt batch of %d tokens (pos %d..%d)", n, bt->pos,
                     bt->pos + n - 1);
            add(&s, batch);
        } else {
            timeline_slice token = {.lane = TL_HOST, .kind = SLICE_TOKEN, .start_us = bt->start_us, .us = span,
                                    .token = bt->token, .layer = -1, .crossing = -1};
            snprintf(token.what, sizeof token.what, "%s %d (pos %d)", bt->prefill ? "prompt token" : "token",
                     bt->token, bt->pos);
            add(&s, token);
        }
        p->n = 0;
        batch_parts(t, b, p);
        double sum = 0;
        for (int i = 0; i < p->n; i++) sum += p->v[i].us;
        const double scale = sum > span && sum > 0 ? span / sum : 1, rest = sum < span ? span - sum : 0;
        double at = bt->start_us;
        if (rest > 0) {
            timeline_slice other = {.lane = TL_HOST, .kind = SLICE_OTHER, .start_us = at, .us = rest,
                                    .token = bt->token, .layer = -1, .crossing = -1};
            snprintf(other.what, sizeof other.what, "embedding, launch, other");
            add(&s, other);
            at += rest;
        }
        for (int i = 0; i < p->n; i++) {
            timeline_slice x = {.lane = p->v[i].lane, .kind = p->v[i].kind, .start_us = at, .us = scale * p->v[i].us,
                                .token = bt->token, .layer = p->v[i].layer, .crossing = p->v[i].crossing};
            name_part(t, &p->v[i], head, x.what, sizeof x.what);
            if (x.layer == -2) x.layer = -1;
            add(&s, x);
            at += x.us;
        }
        place_weights(t, bt->token, n, &s, from);
        b += (size_t)n;
    }
    free(work.v);
    if (s.failed || work.failed) return free(s.v), -1;
    *out = s.v, *n_out = s.n;
    return 0;
}

int timeline_trace_open(timeline_trace *tr, const char *path, const char *metadata, seam_error *e) {
    *tr = (timeline_trace){.f = fopen(path, "w"), .path = path};
    if (!tr->f) return seam_fail(e, "cannot create %s: %s", path, strerror(errno));
    fprintf(tr->f, "{\"displayTimeUnit\": \"ms\",\n \"otherData\": %s,\n \"traceEvents\": [", metadata ? metadata : "{}");
    return 0;
}

int timeline_trace_add(timeline_trace *tr, const seam_timeline *t, size_t from, const char *title, seam_error *e) {
    timeline_slice *v = NULL;
    size_t n = 0;
    if (timeline_slices(t, &v, &n)) return seam_fail(e, "out of memory laying out the timeline");
    const int pid = ++tr->n_processes;
    const int first = from < t->n_tokens ? t->tokens[from].token : 0;
    double t0 = -1;
    for (size_t i = 0; i < n; i++)
        if (v[i].token >= first && (t0 < 0 || v[i].start_us < t0)) t0 = v[i].start_us;
    FILE *f = tr->f;
    char text[1024];
    fprintf(f, "%s\n  {\"name\": \"process_name\", \"ph\": \"M\", \"pid\": %d, \"tid\": 0, "
               "\"args\": {\"name\": \"%s\"}}",
            pid > 1 ? "," : "", pid, seam_json_escape(title, text, sizeof text));
    fprintf(f, ",\n  {\"name\": \"process_sort_index\", \"ph\": \"M\", \"pid\": %d, \"tid\": 0, "
               "\"args\": {\"sort_index\": %d}}", pid, pid);
    // a thread a lane, in the data flow's order
    for (int l = 0; l < TL_LANES; l++) {
        fprintf(f, ",\n  {\"name\": \"thread_name\", \"ph\": \"M\", \"pid\": %d, \"tid\": %d, "
                   "\"args\": {\"name\": \"%s\"}}", pid, l + 1, timeline_lane_name[l]);
        fprintf(f, ",\n  {\"name\": \"thread_sort_index\", \"ph\": \"M\", \"pid\": %d, \"tid\": %d, "
                   "\"args\": {\"sort_index\": %d}}", pid, l + 1, l + 1);
    }
    for (size_t i = 0; i < n; i++) {
        const timeline_slice *x = &v[i];
        if (x->token < first) continue;
        fprintf(f, ",\n  {\"name\": \"%s\", \"cat\": \"%s\", \"ph\": \"X\", \"pid\": %d, \"tid\": %d, "
                   "\"ts\": %.3f, \"dur\": %.3f, \"args\": {\"token\": %d",
                x->what, timeline_slice_kind_name[x->kind], pid, x->lane + 1, x->start_us - t0, x->us, x->token);
        if (x->layer >= 0) fprintf(f, ", \"layer\": %d", x->layer);
        if (x->crossing >= 0) {
            const seam_crossing *c = &t->crossings[x->crossing];
            fprintf(f, ", \"direction\": \"%s\", \"bytes\": %llu, \"wait_us\": %.3f, \"copy_us\": %.3f, \"total_us\": %.3f",
                    timeline_direction_name[c->dir], (unsigned long long)c->bytes, c->wait_us, c->copy_us, c->total_us);
        }
        fprintf(f, "}}");
    }
    free(v);
    return ferror(f) ? seam_fail(e, "writing %s failed", tr->path) : 0;
}

int timeline_trace_close(timeline_trace *tr, seam_error *e) {
    fprintf(tr->f, "\n]}\n");
    const int failed = fclose(tr->f);
    tr->f = NULL;
    return failed ? seam_fail(e, "writing %s failed", tr->path) : 0;
}
