// gguf_types.c — block size and bytes per block of every ggml tensor type,
// so that the reader can validate files whose types seam does not compute.
#include "format/gguf.h"

#include <strings.h>

#include "format/gguf_format.h"

typedef struct {
    const char *name;
    uint32_t block_elems;
    uint32_t block_bytes;
} type_layout;

static const type_layout LAYOUTS[GGML_TYPE_COUNT] = {
    [GGML_TYPE_F32] = {"F32", 1, 4},         [GGML_TYPE_F16] = {"F16", 1, 2},
    [GGML_TYPE_Q4_0] = {"Q4_0", 32, 18},     [GGML_TYPE_Q4_1] = {"Q4_1", 32, 20},
    [GGML_TYPE_Q5_0] = {"Q5_0", 32, 22},     [GGML_TYPE_Q5_1] = {"Q5_1", 32, 24},
    [GGML_TYPE_Q8_0] = {"Q8_0", 32, 34},     [GGML_TYPE_Q8_1] = {"Q8_1", 32, 36},
    [GGML_TYPE_Q2_K] = {"Q2_K", 256, 84},    [GGML_TYPE_Q3_K] = {"Q3_K", 256, 110},
    [GGML_TYPE_Q4_K] = {"Q4_K", 256, 144},   [GGML_TYPE_Q5_K] = {"Q5_K", 256, 176},
    [GGML_TYPE_Q6_K] = {"Q6_K", 256, 210},   [GGML_TYPE_Q8_K] = {"Q8_K", 256, 292},
    [GGML_TYPE_IQ2_XXS] = {"IQ2_XXS", 256, 66}, [GGML_TYPE_IQ2_XS] = {"IQ2_XS", 256, 74},
    [GGML_TYPE_IQ3_XXS] = {"IQ3_XXS", 256, 98}, [GGML_TYPE_IQ1_S] = {"IQ1_S", 256, 50},
    [GGML_TYPE_IQ4_NL] = {"IQ4_NL", 32, 18},  [GGML_TYPE_IQ3_S] = {"IQ3_S", 256, 110},
    [GGML_TYPE_IQ2_S] = {"IQ2_S", 256, 82},   [GGML_TYPE_IQ4_XS] = {"IQ4_XS", 256, 136},
    [GGML_TYPE_I8] = {"I8", 1, 1},            [GGML_TYPE_I16] = {"I16", 1, 2},
    [GGML_TYPE_I32] = {"I32", 1, 4},          [GGML_TYPE_I64] = {"I64", 1, 8},
    [GGML_TYPE_F64] = {"F64", 1, 8},          [GGML_TYPE_IQ1_M] = {"IQ1_M", 256, 56},
    [GGML_TYPE_BF16] = {"BF16", 1, 2},        [GGML_TYPE_TQ1_0] = {"TQ1_0", 256, 54},
    [GGML_TYPE_TQ2_0] = {"TQ2_0", 256, 66},   [GGML_TYPE_MXFP4] = {"MXFP4", 32, 17},
};

bool ggml_type_layout(uint32_t type, uint32_t *block_elems, uint32_t *block_bytes) {
    if (type >= GGML_TYPE_COUNT || LAYOUTS[type].name == NULL) return false;
    if (block_elems) *block_elems = LAYOUTS[type].block_elems;
    if (block_bytes) *block_bytes = LAYOUTS[type].block_bytes;
    return true;
}

const char *ggml_type_name(uint32_t type) {
    if (type >= GGML_TYPE_COUNT || LAYOUTS[type].name == NULL) return "?";
    return LAYOUTS[type].name;
}

int ggml_type_find(const char *name) {
    for (uint32_t t = 0; t < GGML_TYPE_COUNT; t++)
        if (LAYOUTS[t].name && !strcasecmp(name, LAYOUTS[t].name)) return (int)t;
    return -1;
}

uint64_t ggml_row_bytes(uint32_t type, uint64_t n) {
    uint32_t be, bb;
    if (!ggml_type_layout(type, &be, &bb)) return 0;
    return n / be * bb;
}

int gguf_tensor_size(gguf_tensor *t, seam_error *why) {
    if (gguf_check_dims(t->n_dims, why)) return -1;
    uint64_t n = 1;
    for (uint32_t d = 0; d < t->n_dims; d++) {
        if (t->ne[d] == 0) return seam_fail(why, "dimension %u is zero", d);
        if (seam_mul_u64(n, t->ne[d], &n))
            return seam_fail(why, "element count overflows at dimension %u (%llu)", d, (ull)t->ne[d]);
    }
    uint32_t block_elems, block_bytes;
    if (!ggml_type_layout(t->type, &block_elems, &block_bytes))
        return seam_fail(why, "unknown tensor type %u", t->type);
    if (t->ne[0] % block_elems != 0)
        return seam_fail(why, "row length %llu is not a multiple of %u, the block size of %s",
                         (ull)t->ne[0], block_elems, ggml_type_name(t->type));
    uint64_t row_bytes;
    if (seam_mul_u64(t->ne[0] / block_elems, block_bytes, &row_bytes) ||
        seam_mul_u64(row_bytes, n / t->ne[0], &t->n_bytes))
        return seam_fail(why, "byte size overflows (%llu elements of %s)", (ull)n, ggml_type_name(t->type));
    t->n_elems = n;
    return 0;
}
