// gguf.h — the GGUF file format: reading (mmap + validation) and writing.
//
// Floor src/format/: the file and nothing about what it holds -- its
// header, metadata, tensor table, and the types' block sizes (gguf_types.c),
// for reading (gguf.c) and writing (gguf_writer.c). Above base/ only.
//
// This room knows the file format and nothing about models. A file is
//
//   magic "GGUF" | u32 version (3; 2 accepted) | u64 n_tensors | u64 n_kv
//   n_kv x   { string key | u32 value type | value }
//   n_tensors x { string name | u32 n_dims | u64 ne[n_dims] | u32 ggml type | u64 offset }
//   padding to general.alignment (default 32)
//   tensor data: each tensor at data_start + offset, offsets aligned
//
// A string is u64 length + bytes (no NUL). All integers little-endian.
// Everything returned by the reader points into the mapping; it lives until
// gguf_close.
#ifndef SEAM_GGUF_H
#define SEAM_GGUF_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "base/common.h"

#ifdef __cplusplus
extern "C" {
#endif

#define GGUF_MAGIC "GGUF"
#define GGUF_DEFAULT_ALIGNMENT 32

typedef enum {
    GGUF_TYPE_UINT8 = 0,
    GGUF_TYPE_INT8 = 1,
    GGUF_TYPE_UINT16 = 2,
    GGUF_TYPE_INT16 = 3,
    GGUF_TYPE_UINT32 = 4,
    GGUF_TYPE_INT32 = 5,
    GGUF_TYPE_FLOAT32 = 6,
    GGUF_TYPE_BOOL = 7,
    GGUF_TYPE_STRING = 8,
    GGUF_TYPE_ARRAY = 9,
    GGUF_TYPE_UINT64 = 10,
    GGUF_TYPE_INT64 = 11,
    GGUF_TYPE_FLOAT64 = 12,
    GGUF_TYPE_COUNT
} gguf_value_type;

// Tensor element types, numbered as ggml numbers them. The reader knows the
// block size and bytes per block of every type ggml has shipped, so that it
// can validate any file; which of them seam can compute is quant.h's business.
typedef enum {
    GGML_TYPE_F32 = 0,
    GGML_TYPE_F16 = 1,
    GGML_TYPE_Q4_0 = 2,
    GGML_TYPE_Q4_1 = 3,
    GGML_TYPE_Q5_0 = 6,
    GGML_TYPE_Q5_1 = 7,
    GGML_TYPE_Q8_0 = 8,
    GGML_TYPE_Q8_1 = 9,
    GGML_TYPE_Q2_K = 10,
    GGML_TYPE_Q3_K = 11,
    GGML_TYPE_Q4_K = 12,
    GGML_TYPE_Q5_K = 13,
    GGML_TYPE_Q6_K = 14,
    GGML_TYPE_Q8_K = 15,
    GGML_TYPE_IQ2_XXS = 16,
    GGML_TYPE_IQ2_XS = 17,
    GGML_TYPE_IQ3_XXS = 18,
    GGML_TYPE_IQ1_S = 19,
    GGML_TYPE_IQ4_NL = 20,
    GGML_TYPE_IQ3_S = 21,
    GGML_TYPE_IQ2_S = 22,
    GGML_TYPE_IQ4_XS = 23,
    GGML_TYPE_I8 = 24,
    GGML_TYPE_I16 = 25,
    GGML_TYPE_I32 = 26,
    GGML_TYPE_I64 = 27,
    GGML_TYPE_F64 = 28,
    GGML_TYPE_IQ1_M = 29,
    GGML_TYPE_BF16 = 30,
    GGML_TYPE_TQ1_0 = 34,
    GGML_TYPE_TQ2_0 = 35,
    GGML_TYPE_MXFP4 = 39,
    GGML_TYPE_COUNT = 40
} ggml_type;

// Block size (elements) and bytes per block of a ggml type; false for a
// number that is no type (gaps, removed types, out of range).
bool ggml_type_layout(uint32_t type, uint32_t *block_elems, uint32_t *block_bytes);
const char *ggml_type_name(uint32_t type);  // "Q4_K", or "?" when unknown
// The type named name in any case ("Q4_K", "q4_k": shape and hardware files
// are typed by people); -1 for a name that is no type.
int ggml_type_find(const char *name);

// Bytes of a row of n elements (n a multiple of the block size).
uint64_t ggml_row_bytes(uint32_t type, uint64_t n);

typedef struct {
    uint64_t len;
    const char *ptr;  // into the mapping, not NUL-terminated
} gguf_str;

typedef struct {
    gguf_str key;
    uint32_t type;  // gguf_value_type
    union {
        uint64_t u64;  // UINT8..UINT64 (zero-extended)
        int64_t i64;   // INT8..INT64 (sign-extended)
        double f64;    // FLOAT32, FLOAT64
        bool b;
        gguf_str str;
        struct {
            uint32_t type;        // element type (never ARRAY: nested arrays are rejected)
            uint64_t n;           // element count
            const uint8_t *data;  // first element in the mapping (numeric arrays)
            gguf_str *strs;       // [n] for string arrays (allocated by the reader), else NULL
        } arr;
    } v;
} gguf_kv;

typedef struct {
    gguf_str name;
    uint32_t n_dims;    // 1..4
    uint64_t ne[4];     // elements per dimension, ne[0] fastest (a row); unused = 1
    uint32_t type;      // ggml_type
    uint64_t offset;    // from the start of the data section, aligned
    uint64_t n_elems;   // product of ne
    uint64_t n_bytes;   // ggml_row_bytes(type, ne[0]) * rows
    const void *data;   // mapping + data_offset + offset
} gguf_tensor;

// Checks a tensor's shape (n_dims, ne) against its type and fills n_elems
// and n_bytes, with overflow checks. The reason goes to why, without the file
// and tensor, which the caller adds. Shared by the reader and the writer.
int gguf_tensor_size(gguf_tensor *t, seam_error *why);

typedef struct {
    const uint8_t *base;  // the file's bytes (mapping, or caller's buffer)
    uint64_t size;
    bool mapped;          // base is our mmap (unmapped by gguf_close)
    uint32_t version;
    uint64_t n_kv;
    gguf_kv *kv;          // [n_kv]
    uint64_t n_tensors;
    gguf_tensor *tensors; // [n_tensors]
    uint64_t alignment;
    uint64_t data_offset; // start of the data section in the file
} gguf_file;

// Maps and validates a file. On failure everything is released and e says
// what is wrong, e.g. "model.gguf: tensor 'blk.0.attn_q.weight': data
// [1000, 5000) runs past the end of the file (4096 bytes)".
int gguf_open(gguf_file *f, const char *path, seam_error *e);
// Validates a file already in memory (tests, fuzzing); buf must outlive f.
int gguf_parse(gguf_file *f, const void *buf, uint64_t size, seam_error *e);
void gguf_close(gguf_file *f);
// Reads every page of the file once, as llama.cpp's loader does (its mmap
// with MAP_POPULATE), so that the mapping is resident from the start instead
// of as the first tokens touch it.
void gguf_prefetch(const gguf_file *f);

const gguf_kv *gguf_find_kv(const gguf_file *f, const char *key);
const gguf_tensor *gguf_find_tensor(const gguf_file *f, const char *name);
bool gguf_str_eq(gguf_str s, const char *c);

// Typed lookups. Each returns 0 and stores the value, or -1 with e filled
// when the key is missing or holds a value of an incompatible type. Integer
// getters accept any integer type whose value fits; float getters accept
// FLOAT32/FLOAT64 and integers.
int gguf_get_u32(const gguf_file *f, const char *key, uint32_t *out, seam_error *e);
int gguf_get_f32(const gguf_file *f, const char *key, float *out, seam_error *e);
int gguf_get_str(const gguf_file *f, const char *key, gguf_str *out, seam_error *e);
// Same, but a missing key stores def and succeeds.
int gguf_get_u32_or(const gguf_file *f, const char *key, uint32_t def, uint32_t *out, seam_error *e);
int gguf_get_f32_or(const gguf_file *f, const char *key, float def, float *out, seam_error *e);

// A value rendered for humans (`seam inspect`): numbers, quoted strings,
// arrays as "[type x n]" with the first few elements.
void gguf_format_value(const gguf_kv *kv, char *buf, size_t len);

// ---------------------------------------------------------------------------
// Writing (the synthesiser, tests). Declare metadata and tensors first, then
// stream the tensor data in declaration order; nothing is held in memory but
// the header. Strings passed in are copied.

typedef struct gguf_writer gguf_writer;

gguf_writer *gguf_writer_new(uint32_t alignment);
void gguf_writer_free(gguf_writer *w);

void gguf_w_u32(gguf_writer *w, const char *key, uint32_t v);
void gguf_w_i32(gguf_writer *w, const char *key, int32_t v);
void gguf_w_f32(gguf_writer *w, const char *key, float v);
void gguf_w_bool(gguf_writer *w, const char *key, bool v);
void gguf_w_str(gguf_writer *w, const char *key, const char *v);
void gguf_w_arr_str(gguf_writer *w, const char *key, const char *const *v, uint64_t n);
void gguf_w_arr_f32(gguf_writer *w, const char *key, const float *v, uint64_t n);
void gguf_w_arr_i32(gguf_writer *w, const char *key, const int32_t *v, uint64_t n);

// Declares a tensor; returns its index. ne[0] is the row length.
int gguf_w_tensor(gguf_writer *w, const char *name, uint32_t type, uint32_t n_dims, const uint64_t *ne);

// Bytes the data section of the tensors declared so far takes (each tensor
// padded to the alignment): the file is the header plus this.
uint64_t gguf_w_data_size(const gguf_writer *w);

// Writes header, metadata, tensor table and padding to out.
int gguf_w_begin(gguf_writer *w, FILE *out, seam_error *e);
// Appends the next tensor's bytes (a part at a time is fine: the writer pads
// when a tensor is complete). Tensors must come in declaration order.
int gguf_w_data(gguf_writer *w, const void *data, uint64_t n, seam_error *e);
// Checks every declared byte was written and flushes.
int gguf_w_finish(gguf_writer *w, seam_error *e);

#ifdef __cplusplus
}
#endif
#endif
