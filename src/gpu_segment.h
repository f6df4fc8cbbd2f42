// gpu_segment.h — the GPU side of the split: layers 0..N-1 (and the output
// head, when the plan puts it there) run on the CUDA device, one stream, the
// whole segment captured once as a CUDA graph and replayed for every token.
//
// The engine calls it between its host-side steps; every move of data
// between host and device goes through the segment's crossing function,
// which records it in the timeline.
#ifndef SEAM_GPU_SEGMENT_H
#define SEAM_GPU_SEGMENT_H

#include <stdbool.h>

#include "model.h"
#include "plan.h"
#include "timeline.h"

typedef struct gpu_segment gpu_segment;

// The free memory of CUDA device 0, which bounds a plan's GPU part; 0 when
// seam was built without CUDA or there is no device.
uint64_t gpu_free_bytes(void);

// Copies the weights of the plan's GPU layers (and head) to the device and
// allocates their KV caches and the activations. Fails with a message when
// there is no CUDA build or device, when memory runs out (naming what and how
// much), or for what the GPU path does not run yet (MoE layers).
int gpu_segment_init(gpu_segment **out, const seam_model *m, const seam_plan *plan, int n_ctx, bool use_graph,
                     seam_error *e);
void gpu_segment_free(gpu_segment *g);

// One token through the GPU layers: x (n_embd, host) crosses to the device,
// the layers run, and either the hidden state crosses back into x or, when
// the head is on the GPU, the logits cross back into the segment's pinned
// buffer and *logits points at it (n_vocab, valid until the next call).
// Records the crossings (as token tt->token) and fills tt's GPU segment time
// (CUDA events around the segment on its stream: from the GPU taking up its
// launch -- the graph's, or the first op's without graphs -- to its last op).
int gpu_segment_forward(gpu_segment *g, float *x, float **logits, int pos, seam_timeline *tl, seam_token_time *tt,
                        seam_error *e);

// Columns of the widest input each of the segment's two quantised-activation
// buffers receives, from the model's shapes alone: `scratch` the input of
// every matvec (n_embd, q_dim or the FFN's hidden width), `hidden` (MoE; 0
// otherwise) the down experts' input (n_ff_exp) and, when the up experts'
// type is not the gate experts', the up experts' own quantisation of the
// layer input (n_embd). gpu_segment_init allocates
// seam_cuda_matvec_scratch_bytes of each.
typedef struct {
    int64_t scratch, hidden;
} gpu_scratch_cols;
gpu_scratch_cols gpu_segment_scratch_cols(const seam_config *c);

#endif
