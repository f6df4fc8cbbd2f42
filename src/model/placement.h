// placement.h — the plan as data: which device runs each part of a model,
// how the layers that do not fit run, and how the KV cache is laid out.
//
// The planner (plan/) computes a seam_plan from the model, the request and
// the engine's declared buffer sizes; the engine and the GPU segment take it
// as data and never call the planner. The KV cache's layout lives here
// because the planner counts it and both backends build it:
//
// KV bytes per token = sum over the layers on that device of
// 2 * n_kv_heads * head_dim * bytes(kv type), where a sliding layer (gemma3's
// local layers) holds only its window and one batch (plan_kv_rows).
#ifndef SEAM_PLACEMENT_H
#define SEAM_PLACEMENT_H

#include <stdbool.h>
#include <stdint.h>

#include "base/timeline.h"
#include "model/model.h"

typedef enum { DEV_CPU = 0, DEV_GPU = 1, DEV_COUNT } seam_device;

// Tokens the engine runs through a layer at once (model/layer.h's batch, as
// llama.cpp's n_ubatch): a sliding layer's ring holds its window and one
// batch, whose keys and values join the cache before the batch attends.
// 192: each weight row is unpacked once for twice the tokens of 96 and each
// matmul's pool job has twice the work, while a batch's tiles still fit a
// 1024-wide row's group (cpu/kernels.h) -- 1.09x on the Qwen3-0.6B shape's
// pp512, 1.07x at pp2048, 1.12x on moe-small's pp512, where an expert sees
// 24 tokens a batch at 96 (bench/ab.py, 2 threads; 256 no better).
#define SEAM_UBATCH 192

// The KV cache's element types (llama.cpp's -ctk/-ctv).
typedef enum { KV_F16, KV_Q8_0, KV_TYPE_COUNT } seam_kv_type;
extern const char *const plan_kv_type_name[KV_TYPE_COUNT];  // "f16", "q8_0"
extern const uint32_t plan_kv_ggml_type[KV_TYPE_COUNT];     // GGML_TYPE_F16, GGML_TYPE_Q8_0
// The type named name; -1 for any other name.
int plan_kv_type_find(const char *name);

// The KV cache's configuration; all zero is llama.cpp's default (f16 keys
// and values, sliding layers in a ring).
typedef struct {
    seam_kv_type k, v;
    bool swa_full;  // sliding layers keep every position (llama.cpp's --swa-full), not a ring of their window
} seam_kv_config;

// Fails with a message when the model cannot hold a cache of kv's types
// (q8_0 on heads that are not whole blocks of 32).
int plan_kv_check(const seam_config *c, seam_kv_config kv, seam_error *e);

// llama.cpp's rotation of a quantised cache (llama-kv-cache.cpp's
// attn_rot_k/attn_rot_v): a q8_0 cache takes keys turned by a Walsh-Hadamard
// transform over blocks of *rot_k values (the largest power of two of at
// least 64 that divides head_dim; the queries are turned alike), and values
// over blocks of *rot_v = 64 (the attention's output is turned back), so that
// an outlier is spread over its block before the block is quantised. 0 where
// the cache is f16 or head_dim is not a multiple of 64.
void plan_kv_rotation(const seam_config *c, seam_kv_config kv, int *rot_k, int *rot_v);

// Positions layer il's cache holds at context n_ctx: n_ctx, or on a sliding
// layer (unless kv.swa_full) a ring of min(n_ctx, n_swa + SEAM_UBATCH)
// positions, position p in row p % rows.
int plan_kv_rows(const seam_config *c, seam_kv_config kv, int il, int n_ctx);

// The one place KV bytes are counted: bytes of n positions of one layer's K
// and V (kv_dim = n_kv_heads * head_dim values each, in kv.k and kv.v). The
// cache a layer holds is plan_kv_bytes(c, kv, plan_kv_rows(..)); what its
// attention reads for a token at position pos is plan_kv_bytes(c, kv,
// plan_kv_visible(c, il, pos)).
uint64_t plan_kv_bytes(const seam_config *c, seam_kv_config kv, uint64_t n);

// Positions a token at position pos attends over on layer il: pos + 1, or at
// most the window on a sliding layer.
int plan_kv_visible(const seam_config *c, int il, int pos);

// Multiply-adds of a prompt of n tokens at positions pos0..pos0 + n - 1 as
// prefill computes it: every layer's matrix products for each token
// (model_layer_macs), attention's scores and weighted values against the
// positions each token sees (2 * n_heads * head_dim each), and the output
// head once, for the last token. The work a prefill speed is a share of.
uint64_t plan_prompt_macs(const seam_model *m, int n, int pos0);

// The timeline's record of layer il (the output head: il = n_layers) for a
// token at position pos, its bytes filled in: the weights a token reads
// there and the K and V it attends over in a cache of kv's types; the
// caller fills in the batch, the device and the time.
seam_layer_time plan_layer_record(const seam_model *m, seam_kv_config kv, int il, int pos);

// Bytes of K and V that one decoded token at position pos reads on layers
// l0..l1-1 (the speed model's KV term).
uint64_t plan_kv_read_bytes(const seam_config *c, seam_kv_config kv, int l0, int l1, int pos);

// How the layers that do not fit (gpu_layers..n_layers-1, whose weights stay
// in host memory) run: the three explanations of DESIGN.md, side by side.
typedef enum {
    OVERFLOW_CPU,     // on the CPU (llama.cpp's way): the hidden state crosses the bus twice a token
    OVERFLOW_MAPPED,  // on the GPU, its kernels reading the weights from pinned, mapped host memory
    OVERFLOW_STREAM,  // on the GPU, each layer's weights copied in by DMA while earlier layers compute
    OVERFLOW_COUNT
} seam_overflow;

extern const char *const plan_overflow_name[OVERFLOW_COUNT];  // "cpu", "mapped", "stream"
// The placement whose name is the len bytes at name; -1 for none.
int plan_overflow_find(const char *name, size_t len);

// How a prompt's batches of SEAM_UBATCH tokens cross the GPU layers: as
// matrix products (each weight matrix dequantised to f16 once a batch, one
// cuBLAS GEMM for all its tokens), or token by token as decode runs them.
// auto takes the GEMM for a batch of at least GPU_GEMM_MIN_BATCH tokens
// (gpu_segment.h). tokens is the default: the GEMM's f16 products lie
// outside the golden tolerance of the token path (README, "GPU"), and
// whether and from where it is faster is unmeasured until a device runs
// bench/gpu-check.sh.
typedef enum { GPU_PREFILL_TOKENS, GPU_PREFILL_GEMM, GPU_PREFILL_AUTO, GPU_PREFILL_COUNT } seam_gpu_prefill;
extern const char *const gpu_prefill_name[GPU_PREFILL_COUNT];  // "tokens", "gemm", "auto"
// The mode named name; -1 for any other name.
int gpu_prefill_find(const char *name);

// Whether mode can take the GEMM for a batch, and so needs its device
// buffers and cuBLAS handle (gemm, auto): the one test by which the plan
// counts them and the GPU segment makes them (gpu_segment_prefill_bytes).
bool gpu_prefill_uses_gemm(seam_gpu_prefill mode);

// Where each part of the model lives, and what each device holds.
typedef struct {
    int n_layers;
    int gpu_layers;                       // layers 0..gpu_layers-1 live in GPU memory and run there
    seam_overflow overflow;               // how the rest run: on the CPU, or on the GPU from host memory
    seam_device layer[SEAM_MAX_LAYERS];   // where a layer's attention, norms, router and dense FFN live
    seam_device experts[SEAM_MAX_LAYERS]; // the routed experts of a layer (MoE only)
    seam_device head;                     // output norm and head
    uint64_t weights[DEV_COUNT];          // bytes of weights per device
    uint64_t kv[DEV_COUNT];               // bytes of KV cache per device, at n_ctx
    uint64_t scratch[DEV_COUNT];          // activations and other working buffers
    uint64_t budget[DEV_COUNT];           // what the device may use (CPU: 0 = unchecked)
    uint64_t pinned;                      // mapped, stream: host bytes pinned for the overflow layers' copies
    int n_ctx;
    seam_kv_config cache;
    seam_gpu_prefill gpu_prefill;         // as asked: the GEMM's buffers are in scratch[DEV_GPU], and on the
                                          // device, only where gpu_prefill_uses_gemm
    uint64_t kv_per_token[DEV_COUNT];     // bytes of KV cache one more position of context adds per device
    int ring_layers, ring_rows;           // sliding layers whose cache is a ring of ring_rows positions
} seam_plan;

// Layers the GPU computes: gpu_layers, or all of them when the overflow
// runs there.
int plan_gpu_computed_layers(const seam_plan *p);

#endif
