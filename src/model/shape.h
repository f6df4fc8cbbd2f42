// shape.h — a model's shape file (models/*.shape) and the tensor table it
// implies: the names, shapes and llama.cpp Q4_K_M types that seam-synth
// writes. seam-synth fills that table with weights; `seam plan --shape`
// binds a model over the same table with no weight bytes at all, so that a
// 17 GiB model can be planned (and its speed predicted) without the file.
//
// A shape file is `key = value` lines ('#' starts a comment): GGUF's own
// key names (general.architecture, general.name, {arch}.block_count, ...)
// plus vocab_size, seed, ftype, tie_word_embeddings, and types named per
// tensor as llama-quantize's --tensor-type (`tensor_type.ffn_up_exps = Q8_0`).
#ifndef SEAM_SHAPE_H
#define SEAM_SHAPE_H

#include <stdint.h>

#include "base/common.h"
#include "format/gguf.h"
#include "model/model.h"

typedef struct {
    char arch[32];   // llama, qwen2, qwen3, qwen3moe, gemma3
    char name[128];
    int n_layers, n_embd, n_ff, n_heads, n_kv_heads, head_dim, n_vocab, n_ctx;
    int n_expert, n_expert_used, n_ff_exp;  // qwen3moe
    int n_swa;                              // gemma3: the sliding window of its local layers
    float rms_eps, rope_base;
    uint64_t seed;   // of the synthetic weights
    char ftype[16];  // F32, F16, BF16, Q8_0, Q4_0, Q4_K_M
    int tied;        // tie_word_embeddings
    struct {
        char name[48];  // a tensor's name without "blk.N." and ".weight": ffn_up_exps, attn_v, output...
        uint32_t type;
    } type_of[8];       // tensor_type.NAME = TYPE: overrides of the ftype's rules
    int n_type_of;
} seam_shape;

// T_NORM covers every tensor kept in F32: norms, biases, the MoE router.
typedef enum { T_NORM, T_EMBD, T_OUTPUT, T_ATTN_QKO, T_ATTN_V, T_FFN_GU, T_FFN_DOWN } shape_tensor_class;

// One tensor of the table, in file order.
typedef struct {
    char name[64];
    shape_tensor_class cls;
    int layer;
    int64_t rows, cols;  // rows of all experts together for the expert tensors
    int64_t experts;     // > 1: a 3-D tensor [cols, rows / experts, experts]
    uint32_t type;       // ggml_type, by llama.cpp's rules for the shape's ftype
    float scale;         // synthetic weights: standard deviation (or of the noise around 1 for norms)
    float center;        // 1 for norms, 0 otherwise
} shape_tensor;

// Reads and checks a shape file; e names the file, the line and the key.
int shape_read(const char *path, seam_shape *sh, seam_error *e);

// The tensor table of sh (*out: n tensors, malloc'd, the caller frees).
int shape_tensors(const seam_shape *sh, shape_tensor **out, int *n, seam_error *e);

// Declares on w the metadata (general.*, the architecture's keys) and the
// tensors of the table; the vocabulary's keys are the caller's.
void shape_declare(const seam_shape *sh, const shape_tensor *ts, int n, gguf_writer *w);

// The model of a shape file as seam-synth would write it, bound with no
// weights: the GGUF header is built in memory and parsed by the reader,
// and the data section is address space reserved with no access (a read of
// a weight faults), so sizes, types and placement are exact and nothing
// but the header takes memory. model_free releases it.
int shape_model(const char *path, seam_model *m, seam_error *e);

#endif
