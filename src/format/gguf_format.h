// gguf_format.h — format constants the GGUF reader and writer share
// (internal to gguf.c and gguf_writer.c).
#ifndef SEAM_GGUF_FORMAT_H
#define SEAM_GGUF_FORMAT_H

#include <stdint.h>

#include "format/gguf.h"

typedef unsigned long long ull;  // for printf

#if defined(__GNUC__)
#define PRINTF_LIKE(fmt, args) __attribute__((format(printf, fmt, args)))
#else
#define PRINTF_LIKE(fmt, args)
#endif

// The GGUF spec caps keys at 2^16-1 bytes; we hold tensor names to the same,
// so that a garbage length is reported as such.
#define GGUF_MAX_NAME 65535u

// The fewest bytes a metadata entry (key length, 1-byte key, value type,
// 1-byte value) and a tensor info (name length, 1-byte name, n_dims, one
// dimension, type, offset) can take: counts that cannot fit are rejected
// before anything is allocated for them.
#define MIN_KV_BYTES (8 + 1 + 4 + 1)
#define MIN_TENSOR_BYTES (8 + 1 + 4 + 8 + 4 + 8)

// Bytes of a scalar of each value type; 0 for STRING and ARRAY, which carry
// their own lengths.
static const uint8_t SCALAR_BYTES[GGUF_TYPE_COUNT] = {
    [GGUF_TYPE_UINT8] = 1, [GGUF_TYPE_INT8] = 1,    [GGUF_TYPE_UINT16] = 2,
    [GGUF_TYPE_INT16] = 2, [GGUF_TYPE_UINT32] = 4,  [GGUF_TYPE_INT32] = 4,
    [GGUF_TYPE_FLOAT32] = 4, [GGUF_TYPE_BOOL] = 1,  [GGUF_TYPE_UINT64] = 8,
    [GGUF_TYPE_INT64] = 8, [GGUF_TYPE_FLOAT64] = 8,
};

static inline int gguf_check_dims(uint32_t n_dims, seam_error *why) {
    if (n_dims < 1 || n_dims > 4) return seam_fail(why, "%u dimensions (GGUF tensors have 1 to 4)", n_dims);
    return 0;
}

#endif
