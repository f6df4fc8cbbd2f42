// timeline.h — what a run spent its time on: every crossing of the GPU/CPU
// boundary and every segment of every token, and the reports derived from
// them.
//
// A token's time is the sum of its segments (GPU layers, CPU layers, head)
// and its crossings; the report checks that the parts add up to the
// measured token time.
#ifndef SEAM_TIMELINE_H
#define SEAM_TIMELINE_H

#include <stdint.h>
#include <stdio.h>

#include "base/common.h"

// The hidden state (or the logits) crossing, or (stream placement) a
// layer's weights copied to the GPU while earlier layers compute.
typedef enum { CROSS_H2D = 0, CROSS_D2H = 1, CROSS_WEIGHTS = 2 } seam_direction;
extern const char *const timeline_direction_name[3];  // "H2D", "D2H", "WTS": the report's and the JSON's

typedef struct {
    int token;           // index of the token in the run (prompt tokens first)
    int layer;           // the crossing comes before this layer; n_layers = before the head; an experts'
                         // crossing is within its layer
    seam_direction dir;
    int experts;         // 1: an MoE layer's experts' input (D2H) or output (H2D), run on the CPU
                         // (--n-cpu-moe); 0: the hidden state or the logits, or (WTS) a layer's weights
    uint64_t bytes;
    double wait_us;      // the producer's queue draining (the GPU finishing earlier work); for
                         // weights, the GPU stalled waiting for the copy
    double copy_us;      // the copy itself (CUDA events around it)
    double total_us;     // host wall time from the request to the data being usable; for weights,
                         // 0: the copy overlaps the GPU's compute, whose time holds any stall
} seam_crossing;

typedef enum { SEG_GPU = 0, SEG_CPU = 1, SEG_HEAD = 2, SEG_COUNT } seam_segment;

typedef struct {
    int token;
    int pos;
    int batch, n_batch;            // the token's batch: its first token's index, and its tokens (decode: itself, 1)
    double start_us;               // host clock at the token's start, from the timeline's first token (a batch's
                                   // tokens share its time out evenly)
    double segment_us[SEG_COUNT];  // compute time of each segment (GPU: CUDA events around its launch and ops)
    double cpu_attention_us;       // of segment_us[SEG_CPU]: attention over the KV cache (the rest: the matrices,
                                   // norms, rope)
    double gpu_idle_us;            // the GPU waiting while the CPU works
    double token_us;               // host wall time of the whole token
    int prefill;                   // 1 for a prompt token
} seam_token_time;

// One layer's part of a batch (a decoded token: a batch of one), recorded
// when the run times its layers (engine_time_layers). The output head is
// recorded as layer n_layers.
typedef struct {
    int token;              // the batch's first token (the timeline's token index)
    int n;                  // tokens in the batch
    int layer;
    int on_gpu;             // 1: CUDA events before and after it on the GPU's stream; 0: the host clock
    int pos;                // the batch's last token's position
    double us;              // the batch's time in it
    uint64_t weight_bytes;  // weights a token reads in it (an MoE layer: its chosen experts' share)
    uint64_t kv_bytes;      // K and V the batch's last token reads in it
} seam_layer_time;

typedef struct {
    seam_crossing *crossings;
    size_t n_crossings, cap_crossings;
    seam_token_time *tokens;
    size_t n_tokens, cap_tokens;
    seam_layer_time *layers;
    size_t n_layers, cap_layers;
    double origin_s;             // seam_now() at the first token's start: start_us's zero
    const double *predicted_us;  // (model layers + 1) the speed model's time of each layer and the head, for
                                 // the report and the JSON beside the measured ones; NULL: none (the caller's)
} seam_timeline;

void timeline_init(seam_timeline *t);
void timeline_free(seam_timeline *t);
// Room for n token records, written through at once (seam_alloc_resident):
// a run of up to n tokens then holds no more memory than at its start, as
// the plan counts it (engine_scratch_bytes). -1 when out of memory.
int timeline_reserve_tokens(seam_timeline *t, size_t n);
// Where the records end, and a return there that keeps the room: a caller
// that runs the same positions again (seam bench's repetitions) holds one
// run's records at a time, as the plan counts them, where appending every
// repetition's grew the timeline past its reserve (moe-small, 40 runs of
// pp512: the process 11.7% over the plan's prediction).
typedef struct {
    size_t crossings, tokens, layers;
} seam_timeline_mark;
seam_timeline_mark timeline_mark(const seam_timeline *t);
void timeline_rewind(seam_timeline *t, seam_timeline_mark m);

int timeline_add_crossing(seam_timeline *t, const seam_crossing *c);
int timeline_add_token(seam_timeline *t, const seam_token_time *tt);
int timeline_add_layer(seam_timeline *t, const seam_layer_time *lt);

// The records laid out in time, for a timeline viewer (--trace) and
// tools/plot.py's waterfall alike: a lane each for the host thread (tokens,
// and what the token spent outside the parts below: embedding, launches,
// sampling), the GPU stream (its layers and the crossings it queues), the
// copy stream (streamed layers' weights) and the CPU's layers (and the
// head, and experts kept there). A token starts at its measured start; its
// parts follow one another from there in the data flow's order, each its
// measured length (scaled down together when their sum passes the token's
// wall time, which they are parts of). A batch's tokens share its parts.
typedef enum { TL_HOST, TL_GPU, TL_COPY, TL_CPU, TL_LANES } timeline_lane;
extern const char *const timeline_lane_name[TL_LANES];  // "host thread", "GPU stream", "copy stream", "CPU layers"

typedef enum { SLICE_BATCH, SLICE_TOKEN, SLICE_OTHER, SLICE_LAYER, SLICE_CROSSING, SLICE_WEIGHTS, SLICE_STALL } slice_kind;
extern const char *const timeline_slice_kind_name[SLICE_STALL + 1];  // "batch", "token", ...

typedef struct {
    timeline_lane lane;
    slice_kind kind;
    char what[64];     // "token 7 (pos 6)", "layer 3", "head", "H2D hidden state", "layer 5 weights", ...
    double start_us, us;
    int token;         // the token (a batch, a batch's part: its first token)
    int layer;         // a layer's, a crossing's, a copy's or a stall's layer (the head: n_layers); -1: none
    int crossing;      // the crossing record it draws; -1: none
} timeline_slice;

// Every slice of the timeline (malloc'd, *n of them; NULL and 0 when there is
// no token); -1 when out of memory.
int timeline_slices(const seam_timeline *t, timeline_slice **out, size_t *n);

// A Chrome Trace Event file (chrome://tracing, Perfetto) being written: a
// process per run added, a thread a lane, a complete event ("X") a slice
// with its token, layer and crossing (direction, bytes, wait, copy) in its
// args. `metadata`, a JSON object's text (the plan, the machine; NULL: {}),
// is the file's otherData.
typedef struct {
    FILE *f;
    const char *path;
    int n_processes;
} timeline_trace;

int timeline_trace_open(timeline_trace *tr, const char *path, const char *metadata, seam_error *e);
// The slices of t's tokens from token `from` on, as a process titled
// `title`, its time from its first slice.
int timeline_trace_add(timeline_trace *tr, const seam_timeline *t, size_t from, const char *title, seam_error *e);
int timeline_trace_close(timeline_trace *tr, seam_error *e);

// The report after a run: per crossing kind (direction and bytes) the count
// and mean/p50/p99 of wait, copy and total; per segment the mean time and its
// share of the decode token time; and whether the parts add up (within 3 %).
void timeline_report(const seam_timeline *t, FILE *out);

// Per layer of a model of n_layers (when the run timed them), over the
// decoded tokens from token index `from` on: its device,
// the mean and p99 time a decoded token spent in it, its share of the token,
// the bytes of weights and KV it read and their GB/s, a streamed layer's
// copy and the GPU's stall for it, the crossings in the rows between the
// layers where they happen; and whether each segment's layers add up to its
// time (within 3 %).
void timeline_layer_report(const seam_timeline *t, size_t from, int n_layers, FILE *out);

// Every record as JSON ({"run": metadata, "crossings": [...], "tokens": [...],
// "layers": [...], "slices": [...]}); metadata, a JSON object's text (the
// plan, the machine; NULL: {}).
int timeline_write_json(const seam_timeline *t, const char *metadata, const char *path, seam_error *e);

#endif
