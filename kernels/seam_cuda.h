// seam_cuda.h — the CUDA backend's C API, the only door from the engine into
// kernels/. Every function checks its arguments and the CUDA status and
// reports failures through seam_error (naming the kernels/ file and line of
// a failed CUDA call); none aborts.
//
// Execution model. Ops are asynchronous: each enqueues its kernel(s) on a
// seam_cuda_stream and returns; a launcher's 0 means the launch was accepted,
// and a fault inside a kernel surfaces at the next synchronising call. A NULL
// stream means CUDA's legacy default stream. All pointers to vectors, caches
// and weights are device pointers (cudaMalloc'd, or host memory made visible
// with seam_cuda_host_device_pointer) unless named host_*.
//
// Per-token parameters and CUDA graphs. The layers of one token are a fixed
// sequence of launches, so the engine captures them once as a CUDA graph
// (seam_cuda_graph_begin/end) and replays it per token. What changes from one
// token to the next (the token id, its position) is NOT a kernel argument:
// the ops that need it (embedding, rope, kv_append, attention) read it from
// a seam_cuda_step in device memory, and the engine refreshes that struct by
// one seam_cuda_copy_h2d per token, enqueued before the graph launch (or
// captured inside it from a fixed pinned host struct). The graph is then
// replayed unchanged: no cudaGraphExecUpdate, no re-capture. Every other
// argument (shapes, pointers, n_ctx, the window) is fixed at capture.
// The host validates pos and token before the copy (engine_forward does);
// the kernels only guard them to stay in bounds: kv_append skips an
// out-of-range position, and attention and embedding write NaN, so a bad
// step is loud in the logits instead of silently stale.
#ifndef SEAM_CUDA_H
#define SEAM_CUDA_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/common.h"

#ifdef __cplusplus
extern "C" {
#endif

// ---------------------------------------------------------------- devices

typedef struct {
    char name[256];
    int major, minor;          // compute capability
    int sm_count;
    uint64_t total_bytes;      // device memory
    uint64_t free_bytes;
    double mem_bandwidth_gbs;  // peak, from the memory clock and bus width (0 where the device reports neither)
    bool emulated;             // the emulated device (emu/, the SEAM_CUDA_EMU build): its times are CPU times
} seam_cuda_info;

// Number of usable CUDA devices; 0 when there is no driver or no device.
int seam_cuda_device_count(void);
int seam_cuda_device_info(int device, seam_cuda_info *info, seam_error *e);

// Selects the device and prepares what the kernels need once: the GELU
// table of seam_cuda_geglu and the shared-memory limit of seam_cuda_attention
// (those two fail until it ran). Call once, before any stream or capture;
// later calls for the same device do nothing. One device per process.
int seam_cuda_init(int device, seam_error *e);

// ---------------------------------------------------------------- streams, events, graphs

typedef struct seam_cuda_stream seam_cuda_stream;  // a non-blocking cudaStream_t
typedef struct seam_cuda_event seam_cuda_event;    // a cudaEvent_t with timing
typedef struct seam_cuda_graph seam_cuda_graph;    // an instantiated cudaGraphExec_t

// The stream does not synchronise with the legacy default stream (so that a
// capture is never broken by it): order against it explicitly.
int seam_cuda_stream_create(seam_cuda_stream **s, seam_error *e);
void seam_cuda_stream_destroy(seam_cuda_stream *s);
int seam_cuda_stream_synchronize(seam_cuda_stream *s, seam_error *e);

int seam_cuda_event_create(seam_cuda_event **ev, seam_error *e);
void seam_cuda_event_destroy(seam_cuda_event *ev);
int seam_cuda_event_record(seam_cuda_event *ev, seam_cuda_stream *s, seam_error *e);
// Work enqueued on s after this waits until ev, as last recorded, has
// happened (on whatever stream recorded it): how one stream waits for
// another's copy without the host waiting.
int seam_cuda_stream_wait_event(seam_cuda_stream *s, const seam_cuda_event *ev, seam_error *e);
// Milliseconds between two recorded events (~0.5 us resolution); waits for end.
int seam_cuda_event_elapsed_ms(const seam_cuda_event *start, const seam_cuda_event *end, float *ms, seam_error *e);

// Capture: begin, enqueue ops on s (they are recorded, not run), end. end
// always closes the capture, and fails when the capture was invalidated (an
// op that cannot be captured: the capture is then discarded). When an op in
// between fails, call discard instead of end: it closes the capture and
// drops what was recorded, so that s works again and the op's error stands.
// s must be a created stream, not NULL.
int seam_cuda_graph_begin(seam_cuda_stream *s, seam_error *e);
int seam_cuda_graph_end(seam_cuda_stream *s, seam_cuda_graph **g, seam_error *e);
void seam_cuda_graph_discard(seam_cuda_stream *s);
int seam_cuda_graph_launch(seam_cuda_graph *g, seam_cuda_stream *s, seam_error *e);
void seam_cuda_graph_destroy(seam_cuda_graph *g);

// What changes per token, in device memory (see the top of this file).
typedef struct {
    int32_t token;  // the token whose embedding row starts the pass
    int32_t pos;    // its position: rope angle, KV slot, last position attended
} seam_cuda_step;

// ---------------------------------------------------------------- memory

// Device memory (256-byte aligned) and synchronous copies for setup and
// tests: each waits for the whole device and returns when its bytes have
// arrived, so that it is ordered with work on every stream (seam's streams
// do not wait for the default stream that cudaMemcpy uses).
int seam_cuda_malloc(void **ptr, size_t bytes, seam_error *e);
void seam_cuda_free(void *ptr);
int seam_cuda_upload(void *dst_device, const void *src_host, size_t bytes, seam_error *e);
int seam_cuda_download(void *dst_host, const void *src_device, size_t bytes, seam_error *e);

// Pinned host memory, portable and mapped: copies from and to it are true
// DMA, and the GPU can read it directly (seam_cuda_host_device_pointer).
int seam_cuda_host_alloc(void **ptr, size_t bytes, seam_error *e);
void seam_cuda_host_free(void *ptr);
// Pins an existing host range (e.g. the mapped GGUF file) in place, mapped
// and portable; read_only asks for cudaHostRegisterReadOnly where the device
// supports it (required for a PROT_READ mapping), and is ignored elsewhere.
int seam_cuda_host_register(void *ptr, size_t bytes, bool read_only, seam_error *e);
int seam_cuda_host_unregister(void *ptr, seam_error *e);
// The device address of pinned, mapped host memory: kernels given it read
// the host bytes across the bus (the `mapped` placement).
int seam_cuda_host_device_pointer(void **dptr, void *host, seam_error *e);

// Asynchronous copies on s. The host side should be pinned: from pageable
// memory CUDA stages the copy synchronously, and a capture rejects it. A
// pinned source must stay unchanged until the copy has run.
int seam_cuda_copy_h2d(seam_cuda_stream *s, void *dst_device, const void *src_host, size_t bytes, seam_error *e);
int seam_cuda_copy_d2h(seam_cuda_stream *s, void *dst_host, const void *src_device, size_t bytes, seam_error *e);

// ---------------------------------------------------------------- matvec
//
// Weight types with a kernel: Q4_0, Q5_0, Q8_0, Q4_K, Q5_K, Q6_K, F16, F32.
// cols must be a multiple of the type's block (32 for the 32-wide types, 256
// for the K types, 8 for F16, 4 for F32). Weights must be 16-byte aligned for
// Q4_K, Q5_K, F16 and F32 (device allocations are; a GGUF mapping is when its
// alignment is a multiple of 16, as the default 32), 2-byte aligned for the
// others; x, act and scratch 16-byte aligned.

// Whether the kernels read weights of this type (the list above): a plan
// keeps a tensor of another type off the GPU. Needs no device.
bool seam_cuda_reads_type(uint32_t type);

// Bytes of the activation scratch a matvec of cols columns needs, any type.
uint64_t seam_cuda_matvec_scratch_bytes(int64_t cols);

// act = x (n) quantised to the weight type's activation format, the values
// bitwise those of seam_quantize_activation(seam_vec_dot_type(weight_type)):
// Q8_K for the K types, Q8_0 for the 32-wide types, F16 for F16, a copy for
// F32. The layout is the device's, not quant.c's blocks: qs (n int8), then d
// (n / block floats; Q8_0's is the value of its f16), then for Q8_K bsums
// (n / 16 int16), so that the matvec reads aligned 16-byte words.
int seam_cuda_quantize(seam_cuda_stream *s, uint32_t weight_type, const float *x, void *act, int64_t n, seam_error *e);

// out (rows) = W (rows, cols) @ act, act already quantised by
// seam_cuda_quantize (so that several matrices can share one quantisation).
// Each row is seam_vec_dot's integer-exact per-sub-block arithmetic; only the
// order of the float sums differs.
int seam_cuda_matvec_quantized(seam_cuda_stream *s, uint32_t type, const void *w, int64_t rows, int64_t cols,
                               const void *act, float *out, seam_error *e);

// out (rows) = W_e @ act for e = *expert (device memory), W_e the e'th of the
// n_expert matrices (rows, cols each) stored one after another from w, as a
// GGUF expert tensor [cols, rows, n_expert] holds them: one routed expert,
// chosen on the device (seam_cuda_moe_route), so that a captured graph
// replays whatever the router picks. An index outside 0..n_expert-1 gives
// NaN rows.
int seam_cuda_matvec_expert(seam_cuda_stream *s, uint32_t type, const void *w, int n_expert, int64_t rows,
                            int64_t cols, const int32_t *expert, const void *act, float *out, seam_error *e);

// out (rows) = W (rows, cols) @ x (cols): x is quantised once into scratch
// (seam_cuda_matvec_scratch_bytes(cols); unused for F32), then the matvec.
int seam_cuda_matvec(seam_cuda_stream *s, uint32_t type, const void *w, int64_t rows, int64_t cols,
                     const float *x, float *out, void *scratch, seam_error *e);

// out (cols) = row step->token of table (n_rows, cols; any matvec type),
// dequantised as seam_dequantize_row, times scale. NaN for a bad token.
int seam_cuda_embedding(seam_cuda_stream *s, uint32_t type, const void *table, int64_t n_rows, int64_t cols,
                        float scale, const seam_cuda_step *step, float *out, seam_error *e);

// ---------------------------------------------------------------- matrix products (prefill)
//
// A batch of n activations times a matrix, for prompts: the weights are
// dequantised to f16 and multiplied on cuBLAS (gemm.cu), not the matvec's
// integer dots, so the results match the matvec within float rounding of
// the f16 inputs (a tolerance, as llama.cpp's cuBLAS path), not bitwise.

// W (rows, cols; any matvec type, its alignment and shape rules) into out
// (rows, cols) f16, row-major: each weight seam_dequantize_row's value
// rounded as seam_f32_to_f16 (seam_dequantize_row_f16), bit for bit.
int seam_cuda_dequantize_f16(seam_cuda_stream *s, uint32_t type, const void *w, int64_t rows, int64_t cols,
                             uint16_t *out, seam_error *e);

typedef struct seam_cuda_blas seam_cuda_blas;  // a cuBLAS handle bound to one stream
// The handle works in the caller's device buffer (workspace_bytes), which
// must outlive it: cuBLAS then allocates none of its own.
int seam_cuda_blas_create(seam_cuda_blas **b, seam_cuda_stream *s, void *workspace, size_t workspace_bytes,
                          seam_error *e);
void seam_cuda_blas_destroy(seam_cuda_blas *b);

// out (n, rows) = x (n, cols) . W (rows, cols)^T on b's stream s: x16 the
// batch already rounded to f16 (seam_cuda_quantize with GGML_TYPE_F16, so
// that matrices with one input share it), W dequantised into w16 (rows *
// cols halves), then one cublasGemmEx with f32 accumulation and output.
int seam_cuda_matmul(seam_cuda_blas *b, seam_cuda_stream *s, uint32_t type, const void *w, int64_t rows, int64_t cols,
                     const uint16_t *x16, int n, float *out, uint16_t *w16, seam_error *e);

// ---------------------------------------------------------------- norms and rope

// Each of rows vectors of n: out = x / rms(x) * weight (weight shared by the
// rows), as cpu_rmsnorm: the sum of squares in double. out may be x. rows 1
// is the block norm; rows = heads, n = head_dim the per-head q/k norms.
int seam_cuda_rmsnorm(seam_cuda_stream *s, float *out, const float *x, const float *weight, int rows, int n,
                      float eps, seam_error *e);

// In place, as cpu_rope: vec (n_tokens, n_heads, head_dim), token t at
// position step[t].pos (step: n_tokens of them), the first rope_dim (even,
// <= head_dim) dimensions of each head rotated.
int seam_cuda_rope(seam_cuda_stream *s, float *vec, int n_tokens, int n_heads, int head_dim, int rope_dim, float base,
                   float freq_scale, bool neox, const seam_cuda_step *step, seam_error *e);

// ---------------------------------------------------------------- elementwise (n elements)

int seam_cuda_scale(seam_cuda_stream *s, float *x, float v, int n, seam_error *e);          // x *= v
int seam_cuda_add(seam_cuda_stream *s, float *x, const float *y, int n, seam_error *e);     // x += y
// x (rows, n) += y (n) on every row: a bias over a batch.
int seam_cuda_add_rows(seam_cuda_stream *s, float *x, const float *y, int rows, int n, seam_error *e);
int seam_cuda_swiglu(seam_cuda_stream *s, float *gate, const float *up, int n, seam_error *e);  // as cpu_swiglu
int seam_cuda_geglu(seam_cuda_stream *s, float *gate, const float *up, int n, seam_error *e);   // as cpu_geglu
int seam_cuda_softcap(seam_cuda_stream *s, float *x, float cap, int n, seam_error *e);      // x = cap tanh(x / cap)

// ---------------------------------------------------------------- attention

// Each of rows vectors of n, in place, as cpu_softmax (the sum in double).
int seam_cuda_softmax(seam_cuda_stream *s, float *x, int rows, int n, seam_error *e);

// One layer's KV cache on the device, its bytes and rows as the plan counts
// them (plan_kv_rows, plan_kv_bytes): position t in row t % rows (a sliding
// layer keeps a ring, the others rows = n_ctx); a row holds kv_dim =
// n_kv_heads * head_dim values of k_type / v_type: GGML_TYPE_F16, or
// GGML_TYPE_Q8_0 blocks of 32 (a head holds whole blocks). Position-major,
// unlike the host cache (engine.h keeps a head's positions together): the
// device cache is never copied to or from the host's.
typedef struct {
    void *k, *v;
    uint32_t k_type, v_type;
    int rows;
} seam_cuda_kv;

// k, v (kv_dim) into row step->pos % rows of this layer's caches, as
// cpu_kv_store writes them (f16 rounded as seam_f32_to_f16; q8_0 as
// seam_quantize_row_q8_0), bit for bit.
int seam_cuda_kv_append(seam_cuda_stream *s, const seam_cuda_kv *kv, const float *k, const float *v, int kv_dim,
                        int n_ctx, const seam_cuda_step *step, seam_error *e);

// x (n) turned block by block by the Walsh-Hadamard transform, as cpu_fwht
// (bit for bit); block a power of two up to 1024 that divides n.
int seam_cuda_fwht(seam_cuda_stream *s, float *x, int n, int block, seam_error *e);

// One decoded token's attention, all heads: for query head h (KV head
// h / (n_heads / n_kv_heads)), out[h] = cpu_attention_head over positions
// [t0, step->pos] of this layer's caches, t0 = 0, or step->pos + 1 - n_swa
// on a sliding layer (n_swa > 0). An f16 cache follows llama.cpp's attention
// without flash attention (the weights rounded to f16), a q8_0 one its
// flash attention; the sums run in the GPU's order (a tolerance, not bit
// equality). q, out: (n_heads, head_dim). head_dim a multiple of 8 (32 with
// a q8_0 cache), at most 256. The scores of up to min(n_ctx, n_swa)
// positions live in shared memory where they fit (about 55k positions on an
// H100/H200, 23k on sm_86/89), else in scores: device scratch of (n_heads,
// n_ctx) floats, which may be NULL only when they fit.
int seam_cuda_attention(seam_cuda_stream *s, float *out, const float *q, const seam_cuda_kv *kv, int n_heads,
                        int n_kv_heads, int head_dim, int n_ctx, int n_swa, float scale, float *scores,
                        const seam_cuda_step *step, seam_error *e);

// ---------------------------------------------------------------- mixture of experts

// The router's choice, as cpu_moe_route: softmax of logits (n_expert, at most
// 1024) as cpu_softmax, the indices of the k largest probabilities, largest
// first (ties to the lower index), into chosen (k int32), and their
// probabilities renormalised (the sum in double, clamped to 2^-14 from
// below) into weights (k). k at most 64 and n_expert.
int seam_cuda_moe_route(seam_cuda_stream *s, const float *logits, int n_expert, int k, int32_t *chosen,
                        float *weights, seam_error *e);

// The chosen experts' outputs summed in rank order, as cpu_moe_route and the CPU backend sum them:
// acc (n) = y * weights[slot] for slot 0, acc + y * weights[slot] after.
int seam_cuda_moe_accumulate(seam_cuda_stream *s, float *acc, const float *y, const float *weights, int slot, int n,
                             seam_error *e);

// ---------------------------------------------------------------- checks without a GPU

// The kernels' block decoders run on the host: the dot product of one row
// (seam_vec_dot's contract: act quantised to the type's activation format)
// and the dequantisation of one row, chunk by chunk as the device does them.
// They let a machine without a GPU check the bit layouts against quant.c.
// NAN / -1 for a type without a kernel or a bad n.
float seam_cuda_host_vec_dot(uint32_t type, const void *w, const void *act, int64_t n);
int seam_cuda_host_dequantize(uint32_t type, const void *src, float *dst, int64_t n);
// The same rounded to f16, as seam_cuda_dequantize_f16 does on the device.
int seam_cuda_host_dequantize_f16(uint32_t type, const void *src, uint16_t *dst, int64_t n);

#ifdef __cplusplus
}
#endif
#endif
