// test_gguf.c — the GGUF reader and writer: a round trip through both, every
// truncation of a valid file, and one hand-built hostile file per check.
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "format/gguf.h"
#include "helpers.h"

// ---------------------------------------------------------------------------
// A tiny byte builder for hand-made files.

typedef struct {
    uint8_t *p;
    size_t len, cap;
} bytes;

static void b_put(bytes *b, const void *d, size_t n) {
    if (b->len + n > b->cap) {
        b->cap = (b->len + n) * 2 + 64;
        b->p = realloc(b->p, b->cap);
        cr_assert(b->p);
    }
    memcpy(b->p + b->len, d, n);
    b->len += n;
}
static void b_u8(bytes *b, uint8_t v) { b_put(b, &v, 1); }
static void b_u32(bytes *b, uint32_t v) { b_put(b, &v, 4); }
static void b_u64(bytes *b, uint64_t v) { b_put(b, &v, 8); }
static void b_str(bytes *b, const char *s) {
    b_u64(b, strlen(s));
    b_put(b, s, strlen(s));
}
static void b_zeros(bytes *b, size_t n) {
    while (n--) b_u8(b, 0);
}
static void b_align(bytes *b, size_t a) { b_zeros(b, (a - b->len % a) % a); }

static void b_header(bytes *b, uint32_t version, uint64_t n_tensors, uint64_t n_kv) {
    b_put(b, "GGUF", 4);
    b_u32(b, version);
    b_u64(b, n_tensors);
    b_u64(b, n_kv);
}

static void b_kv_u32(bytes *b, const char *key, uint32_t v) {
    b_str(b, key);
    b_u32(b, GGUF_TYPE_UINT32);
    b_u32(b, v);
}

static void b_tensor(bytes *b, const char *name, uint32_t n_dims, const uint64_t *ne, uint32_t type,
                     uint64_t offset) {
    b_str(b, name);
    b_u32(b, n_dims);
    for (uint32_t d = 0; d < n_dims; d++) b_u64(b, ne[d]);
    b_u32(b, type);
    b_u64(b, offset);
}

// A file with one tensor of the given shape and type at `offset`, followed
// by `data_bytes` bytes of data.
static bytes one_tensor(uint32_t n_dims, const uint64_t *ne, uint32_t type, uint64_t offset,
                        size_t data_bytes) {
    bytes b = {0};
    b_header(&b, 3, 1, 0);
    b_tensor(&b, "w", n_dims, ne, type, offset);
    b_align(&b, GGUF_DEFAULT_ALIGNMENT);
    b_zeros(&b, data_bytes);
    return b;
}

// Parses b from an exactly-sized copy (so that ASan sees any over-read) and
// expects a failure whose message holds `phrase`.
static void expect_fail(bytes *b, const char *phrase) {
    uint8_t *copy = malloc(b->len ? b->len : 1);
    memcpy(copy, b->p, b->len);
    gguf_file f;
    seam_error e = {{0}};
    int rc = gguf_parse(&f, copy, b->len, &e);
    free(copy);
    free(b->p);
    cr_assert_eq(rc, -1, "parse should fail with '%s'", phrase);
    cr_assert(strstr(e.msg, "<buffer>"), "message names the input: %s", e.msg);
    cr_assert(strstr(e.msg, phrase), "message '%s' should mention '%s'", e.msg, phrase);
    cr_assert_null(f.kv);
    cr_assert_null(f.tensors);
}

static void expect_ok(bytes *b, gguf_file *f) {
    seam_error e = {{0}};
    cr_assert_eq(gguf_parse(f, b->p, b->len, &e), 0, "%s", e.msg);
}

// ---------------------------------------------------------------------------
// The sample file: every kind of metadata the writer has, three tensors.

static const char *const TOKENS[] = {"<s>", "", "hello", "w\xc3\xb6rld"};
static const float SCORES[] = {1.5f, -2.0f, 3.25f};
static const int32_t TYPES[] = {1, -2, 3, 4, 5};

typedef struct {
    const char *name;
    uint32_t type, n_dims;
    uint64_t ne[4];
    uint64_t n_bytes;
} sample_tensor;

// The last tensor's size is a multiple of the alignment, so that the file
// ends with no padding and every shorter prefix is invalid.
static const sample_tensor SAMPLE[] = {
    {"tok_embd.weight", GGML_TYPE_Q4_K, 2, {256, 2, 1, 1}, 2 * 144},
    {"blk.0.attn_q.weight", GGML_TYPE_Q8_0, 3, {64, 3, 1, 1}, 3 * 2 * 34},
    {"output_norm.weight", GGML_TYPE_F32, 1, {8, 1, 1, 1}, 32},
};
#define N_SAMPLE 3

static uint8_t *sample_data(int i) {
    uint64_t rng = 1234 + (uint64_t)i;
    uint8_t *d = malloc(SAMPLE[i].n_bytes);
    for (uint64_t j = 0; j < SAMPLE[i].n_bytes; j++) d[j] = (uint8_t)test_rng_next(&rng);
    return d;
}

static void write_sample(const char *path, uint32_t alignment) {
    gguf_writer *w = gguf_writer_new(alignment);
    cr_assert(w);
    gguf_w_str(w, "general.architecture", "llama");
    gguf_w_u32(w, "test.u32", 7);
    gguf_w_i32(w, "test.i32", -5);
    gguf_w_f32(w, "test.f32", 0.5f);
    gguf_w_bool(w, "test.bool", true);
    gguf_w_arr_str(w, "tokenizer.ggml.tokens", TOKENS, 4);
    gguf_w_arr_f32(w, "tokenizer.ggml.scores", SCORES, 3);
    gguf_w_arr_i32(w, "tokenizer.ggml.token_type", TYPES, 5);
    gguf_w_arr_i32(w, "test.empty", NULL, 0);
    for (int i = 0; i < N_SAMPLE; i++)
        cr_assert_eq(gguf_w_tensor(w, SAMPLE[i].name, SAMPLE[i].type, SAMPLE[i].n_dims, SAMPLE[i].ne), i);
    FILE *out = fopen(path, "wb");
    cr_assert(out);
    seam_error e = {{0}};
    cr_assert_eq(gguf_w_begin(w, out, &e), 0, "%s", e.msg);
    for (int i = 0; i < N_SAMPLE; i++) {
        uint8_t *d = sample_data(i);
        uint64_t half = SAMPLE[i].n_bytes / 2;  // in two parts, to test partial writes
        cr_assert_eq(gguf_w_data(w, d, half, &e), 0, "%s", e.msg);
        cr_assert_eq(gguf_w_data(w, d + half, SAMPLE[i].n_bytes - half, &e), 0, "%s", e.msg);
        free(d);
    }
    cr_assert_eq(gguf_w_finish(w, &e), 0, "%s", e.msg);
    gguf_writer_free(w);
    cr_assert_eq(fclose(out), 0);
}

static void check_sample(const gguf_file *f, uint32_t alignment) {
    seam_error e = {{0}};
    cr_assert_eq(f->version, 3);
    cr_assert_eq(f->alignment, alignment);
    cr_assert_eq(f->n_kv, alignment == GGUF_DEFAULT_ALIGNMENT ? 9u : 10u);
    cr_assert_eq(gguf_find_kv(f, "general.alignment") != NULL, alignment != GGUF_DEFAULT_ALIGNMENT);

    gguf_str s;
    uint32_t u;
    float x;
    cr_assert_eq(gguf_get_str(f, "general.architecture", &s, &e), 0);
    cr_assert(gguf_str_eq(s, "llama"));
    cr_assert_eq(gguf_get_u32(f, "test.u32", &u, &e), 0);
    cr_assert_eq(u, 7);
    const gguf_kv *kv = gguf_find_kv(f, "test.i32");
    cr_assert(kv && kv->type == GGUF_TYPE_INT32 && kv->v.i64 == -5);
    cr_assert_eq(gguf_get_f32(f, "test.f32", &x, &e), 0);
    cr_assert_eq(x, 0.5f);
    kv = gguf_find_kv(f, "test.bool");
    cr_assert(kv && kv->type == GGUF_TYPE_BOOL && kv->v.b);

    kv = gguf_find_kv(f, "tokenizer.ggml.tokens");
    cr_assert(kv && kv->type == GGUF_TYPE_ARRAY && kv->v.arr.type == GGUF_TYPE_STRING);
    cr_assert_eq(kv->v.arr.n, 4);
    for (int i = 0; i < 4; i++) cr_assert(gguf_str_eq(kv->v.arr.strs[i], TOKENS[i]), "token %d", i);
    kv = gguf_find_kv(f, "tokenizer.ggml.scores");
    cr_assert(kv && kv->v.arr.type == GGUF_TYPE_FLOAT32 && kv->v.arr.n == 3 && !kv->v.arr.strs);
    cr_assert_eq(memcmp(kv->v.arr.data, SCORES, sizeof SCORES), 0);
    kv = gguf_find_kv(f, "tokenizer.ggml.token_type");
    cr_assert(kv && kv->v.arr.type == GGUF_TYPE_INT32 && kv->v.arr.n == 5);
    cr_assert_eq(memcmp(kv->v.arr.data, TYPES, sizeof TYPES), 0);
    kv = gguf_find_kv(f, "test.empty");
    cr_assert(kv && kv->v.arr.type == GGUF_TYPE_INT32 && kv->v.arr.n == 0);

    cr_assert_eq(f->n_tensors, N_SAMPLE);
    cr_assert_eq(f->data_offset % alignment, 0);
    uint64_t offset = 0;
    for (int i = 0; i < N_SAMPLE; i++) {
        const gguf_tensor *t = gguf_find_tensor(f, SAMPLE[i].name);
        cr_assert_eq(t, &f->tensors[i]);
        cr_assert_eq(t->type, SAMPLE[i].type);
        cr_assert_eq(t->n_dims, SAMPLE[i].n_dims);
        uint64_t n = 1;
        for (int d = 0; d < 4; d++) {
            cr_assert_eq(t->ne[d], SAMPLE[i].ne[d]);
            n *= t->ne[d];
        }
        cr_assert_eq(t->n_elems, n);
        cr_assert_eq(t->n_bytes, SAMPLE[i].n_bytes);
        cr_assert_eq(t->offset, offset);
        cr_assert_eq((const uint8_t *)t->data, f->base + f->data_offset + offset);
        uint8_t *d = sample_data(i);
        cr_assert_eq(memcmp(t->data, d, t->n_bytes), 0, "tensor %d data", i);
        free(d);
        offset += (t->n_bytes + alignment - 1) / alignment * alignment;
    }
    cr_assert_eq(f->data_offset + offset, f->size);
    cr_assert_null(gguf_find_tensor(f, "missing"));
}

Test(gguf, round_trip_open) {
    const char *path = test_path("gguf_round_trip.gguf");
    write_sample(path, GGUF_DEFAULT_ALIGNMENT);
    gguf_file f;
    seam_error e = {{0}};
    cr_assert_eq(gguf_open(&f, path, &e), 0, "%s", e.msg);
    cr_assert(f.mapped);
    check_sample(&f, GGUF_DEFAULT_ALIGNMENT);
    gguf_close(&f);
    cr_assert_null(f.base);
}

Test(gguf, round_trip_parse) {
    const char *path = test_path("gguf_round_trip_parse.gguf");
    write_sample(path, GGUF_DEFAULT_ALIGNMENT);
    size_t size;
    uint8_t *buf = test_read_file(path, &size);
    cr_assert(buf);
    gguf_file f;
    seam_error e = {{0}};
    cr_assert_eq(gguf_parse(&f, buf, size, &e), 0, "%s", e.msg);
    cr_assert(!f.mapped);
    cr_assert_eq(f.base, buf);
    check_sample(&f, GGUF_DEFAULT_ALIGNMENT);
    gguf_close(&f);
    free(buf);
}

Test(gguf, round_trip_custom_alignment) {
    const char *path = test_path("gguf_round_trip_64.gguf");
    write_sample(path, 64);
    gguf_file f;
    seam_error e = {{0}};
    cr_assert_eq(gguf_open(&f, path, &e), 0, "%s", e.msg);
    check_sample(&f, 64);
    const gguf_kv *kv = gguf_find_kv(&f, "general.alignment");
    cr_assert_eq(kv->type, GGUF_TYPE_UINT32);
    gguf_close(&f);
}

Test(gguf, every_truncation_fails) {
    const char *path = test_path("gguf_truncation.gguf");
    write_sample(path, GGUF_DEFAULT_ALIGNMENT);
    size_t size;
    uint8_t *buf = test_read_file(path, &size);
    cr_assert(buf && size > 500 && size < 4096, "sample of %zu bytes", size);
    for (size_t n = 0; n <= size; n++) {
        uint8_t *prefix = malloc(n ? n : 1);  // exactly n bytes, so ASan sees over-reads
        memcpy(prefix, buf, n);
        gguf_file f;
        seam_error e = {{0}};
        int rc = gguf_parse(&f, prefix, n, &e);
        if (n < size) {
            cr_assert_eq(rc, -1, "a prefix of %zu of %zu bytes was accepted", n, size);
            cr_assert(e.msg[0] != '\0', "no message for a prefix of %zu bytes", n);
        } else {
            cr_assert_eq(rc, 0, "%s", e.msg);
            gguf_close(&f);
        }
        free(prefix);
    }
    free(buf);
}

// ---------------------------------------------------------------------------
// Header

Test(gguf, bad_magic) {
    bytes b = {0};
    b_put(&b, "GGML", 4);
    b_u32(&b, 3);
    b_u64(&b, 0);
    b_u64(&b, 0);
    expect_fail(&b, "bad magic");
}

Test(gguf, version_1_rejected) {
    bytes b = {0};
    b_header(&b, 1, 0, 0);
    expect_fail(&b, "unsupported GGUF version 1");
}

Test(gguf, version_4_rejected) {
    bytes b = {0};
    b_header(&b, 4, 0, 0);
    expect_fail(&b, "unsupported GGUF version 4");
}

Test(gguf, version_2_accepted_and_empty_data_section) {
    // No tensors and no padding: the data section starts at the end.
    bytes b = {0};
    b_header(&b, 2, 0, 1);
    b_kv_u32(&b, "a", 1);
    gguf_file f;
    expect_ok(&b, &f);
    cr_assert_eq(f.version, 2);
    cr_assert_eq(f.n_tensors, 0);
    gguf_close(&f);
    free(b.p);
}

Test(gguf, huge_n_kv) {
    bytes b = {0};
    b_header(&b, 3, 0, UINT64_MAX / 2);
    b_kv_u32(&b, "a", 1);
    expect_fail(&b, "metadata entries cannot fit");
}

Test(gguf, huge_n_tensors) {
    bytes b = {0};
    b_header(&b, 3, 1ull << 40, 0);
    b_zeros(&b, 64);
    expect_fail(&b, "tensors cannot fit");
}

// ---------------------------------------------------------------------------
// Metadata

Test(gguf, huge_key_length) {
    bytes b = {0};
    b_header(&b, 3, 0, 1);
    b_u64(&b, UINT64_MAX - 3);
    b_put(&b, "abcd", 4);
    b_zeros(&b, 16);
    expect_fail(&b, "key (18446744073709551612 bytes at byte 32) runs past the end");
}

Test(gguf, huge_string_value) {
    bytes b = {0};
    b_header(&b, 3, 0, 1);
    b_str(&b, "general.name");
    b_u32(&b, GGUF_TYPE_STRING);
    b_u64(&b, 1ull << 62);
    b_put(&b, "x", 1);
    expect_fail(&b, "key 0 'general.name': string value");
}

Test(gguf, huge_array_count) {
    bytes b = {0};
    b_header(&b, 3, 0, 1);
    b_str(&b, "tokenizer.ggml.tokens");
    b_u32(&b, GGUF_TYPE_ARRAY);
    b_u32(&b, GGUF_TYPE_STRING);
    b_u64(&b, 1ull << 60);
    b_str(&b, "a");
    expect_fail(&b, "array of 1152921504606846976 string");
}

Test(gguf, huge_numeric_array_count) {
    bytes b = {0};
    b_header(&b, 3, 0, 1);
    b_str(&b, "scores");
    b_u32(&b, GGUF_TYPE_ARRAY);
    b_u32(&b, GGUF_TYPE_FLOAT64);
    b_u64(&b, UINT64_MAX / 4);
    b_zeros(&b, 16);
    expect_fail(&b, "cannot fit");
}

Test(gguf, nested_array) {
    bytes b = {0};
    b_header(&b, 3, 0, 1);
    b_str(&b, "nested");
    b_u32(&b, GGUF_TYPE_ARRAY);
    b_u32(&b, GGUF_TYPE_ARRAY);
    b_u64(&b, 1);
    b_u32(&b, GGUF_TYPE_UINT8);
    b_u64(&b, 1);
    b_u8(&b, 0);
    expect_fail(&b, "nested arrays");
}

Test(gguf, unknown_value_type) {
    bytes b = {0};
    b_header(&b, 3, 0, 1);
    b_str(&b, "k");
    b_u32(&b, 13);
    b_u32(&b, 0);
    expect_fail(&b, "unknown value type 13");
}

Test(gguf, empty_key) {
    bytes b = {0};
    b_header(&b, 3, 0, 1);
    b_kv_u32(&b, "", 1);
    expect_fail(&b, "empty key");
}

Test(gguf, duplicate_key) {
    bytes b = {0};
    b_header(&b, 3, 0, 3);
    b_kv_u32(&b, "general.x", 1);
    b_kv_u32(&b, "general.y", 1);
    b_kv_u32(&b, "general.x", 2);
    expect_fail(&b, "key 2 'general.x': duplicate name: key 0 has it too");
}

static void expect_bad_alignment(uint32_t type, const void *value, size_t n, const char *phrase) {
    bytes b = {0};
    b_header(&b, 3, 0, 1);
    b_str(&b, "general.alignment");
    b_u32(&b, type);
    b_put(&b, value, n);
    expect_fail(&b, phrase);
}

Test(gguf, alignment_zero) {
    uint32_t v = 0;
    expect_bad_alignment(GGUF_TYPE_UINT32, &v, 4, "alignment must be a power of two");
}

Test(gguf, alignment_three) {
    uint32_t v = 3;
    expect_bad_alignment(GGUF_TYPE_UINT32, &v, 4, "not 3 (u32)");
}

Test(gguf, alignment_negative) {
    int32_t v = -64;
    expect_bad_alignment(GGUF_TYPE_INT32, &v, 4, "not -64 (i32)");
}

Test(gguf, alignment_too_big) {
    uint64_t v = 1ull << 32;
    expect_bad_alignment(GGUF_TYPE_UINT64, &v, 8, "fits in a u32");
}

Test(gguf, alignment_not_integer) {
    float v = 32.0f;
    expect_bad_alignment(GGUF_TYPE_FLOAT32, &v, 4, "(f32)");
}

Test(gguf, alignment_any_integer_type) {
    // A u64 alignment of 64 is accepted, and tensor offsets follow it.
    bytes b = {0};
    b_header(&b, 3, 1, 1);
    b_str(&b, "general.alignment");
    b_u32(&b, GGUF_TYPE_UINT64);
    b_u64(&b, 64);
    uint64_t ne[1] = {4};
    b_tensor(&b, "t", 1, ne, GGML_TYPE_F32, 0);
    b_align(&b, 64);
    size_t start = b.len;
    b_zeros(&b, 16);
    gguf_file f;
    expect_ok(&b, &f);
    cr_assert_eq(f.alignment, 64);
    cr_assert_eq(f.data_offset, start);
    gguf_close(&f);
    free(b.p);
}

// ---------------------------------------------------------------------------
// Tensor table

Test(gguf, valid_one_tensor) {
    uint64_t ne[2] = {8, 2};
    bytes b = one_tensor(2, ne, GGML_TYPE_F32, 0, 64);
    gguf_file f;
    expect_ok(&b, &f);
    cr_assert_eq(f.tensors[0].n_bytes, 64);
    gguf_close(&f);
    free(b.p);
}

Test(gguf, n_dims_zero) {
    uint64_t ne[1] = {8};
    bytes b = one_tensor(0, ne, GGML_TYPE_F32, 0, 32);
    expect_fail(&b, "tensor 0 'w': 0 dimensions");
}

Test(gguf, n_dims_five) {
    uint64_t ne[5] = {8, 1, 1, 1, 1};
    bytes b = one_tensor(5, ne, GGML_TYPE_F32, 0, 32);
    expect_fail(&b, "5 dimensions");
}

Test(gguf, zero_dimension) {
    uint64_t ne[2] = {8, 0};
    bytes b = one_tensor(2, ne, GGML_TYPE_F32, 0, 32);
    expect_fail(&b, "dimension 1 is zero");
}

Test(gguf, dimensions_overflow) {
    uint64_t ne[3] = {1ull << 32, 1ull << 31, 4};
    bytes b = one_tensor(3, ne, GGML_TYPE_F32, 0, 32);
    expect_fail(&b, "element count overflows");
}

Test(gguf, bytes_overflow) {
    // 2^62 elements fit in u64; their 2^64 F32 bytes do not.
    uint64_t ne[2] = {1ull << 31, 1ull << 31};
    bytes b = one_tensor(2, ne, GGML_TYPE_F32, 0, 32);
    expect_fail(&b, "byte size overflows");
}

Test(gguf, unknown_types) {
    const uint32_t types[] = {4, 31, 200};
    for (int i = 0; i < 3; i++) {
        uint64_t ne[1] = {32};
        bytes b = one_tensor(1, ne, types[i], 0, 128);
        char phrase[64];
        snprintf(phrase, sizeof phrase, "unknown tensor type %u", types[i]);
        expect_fail(&b, phrase);
    }
}

Test(gguf, row_not_multiple_of_block) {
    uint64_t ne[2] = {100, 2};
    bytes b = one_tensor(2, ne, GGML_TYPE_Q4_K, 0, 1024);
    expect_fail(&b, "row length 100 is not a multiple of 256, the block size of Q4_K");
}

Test(gguf, misaligned_offset) {
    uint64_t ne[1] = {8};
    bytes b = one_tensor(1, ne, GGML_TYPE_F32, 4, 64);
    expect_fail(&b, "data offset 4 is not a multiple of the alignment (32)");
}

Test(gguf, offset_past_end) {
    uint64_t ne[1] = {8};
    bytes b = one_tensor(1, ne, GGML_TYPE_F32, 32, 48);
    expect_fail(&b, "tensor 0 'w': 32 bytes of data at offset 32");
}

Test(gguf, huge_offset) {
    uint64_t ne[1] = {8};
    bytes b = one_tensor(1, ne, GGML_TYPE_F32, UINT64_MAX - 31, 64);
    expect_fail(&b, "run past the end of the file");
}

Test(gguf, data_section_past_end) {
    // The table ends without the padding up to the data section.
    uint64_t ne[1] = {8};
    bytes b = {0};
    b_header(&b, 3, 1, 0);
    b_tensor(&b, "w", 1, ne, GGML_TYPE_F32, 0);
    expect_fail(&b, "data section starts at byte 64, past the end of the file (57 bytes)");
}

Test(gguf, overlapping_tensors) {
    uint64_t ne[1] = {16};
    bytes b = {0};
    b_header(&b, 3, 3, 0);
    b_tensor(&b, "a", 1, ne, GGML_TYPE_F32, 64);
    b_tensor(&b, "b", 1, ne, GGML_TYPE_F32, 0);
    b_tensor(&b, "c", 1, ne, GGML_TYPE_F32, 32);  // [32, 96) overlaps b [0, 64)
    b_align(&b, 32);
    b_zeros(&b, 128);
    expect_fail(&b, "tensor 2 'c': data [32, 96) overlaps tensor 1 'b' [0, 64)");
}

Test(gguf, duplicate_tensor_names) {
    uint64_t ne[1] = {8};
    bytes b = {0};
    b_header(&b, 3, 2, 0);
    b_tensor(&b, "w", 1, ne, GGML_TYPE_F32, 0);
    b_tensor(&b, "w", 1, ne, GGML_TYPE_F32, 32);
    b_align(&b, 32);
    b_zeros(&b, 64);
    expect_fail(&b, "tensor 1 'w': duplicate name: tensor 0 has it too");
}

Test(gguf, empty_and_long_tensor_names) {
    uint64_t ne[1] = {8};
    bytes b = {0};
    b_header(&b, 3, 1, 0);
    b_tensor(&b, "", 1, ne, GGML_TYPE_F32, 0);
    b_zeros(&b, 64);
    expect_fail(&b, "empty tensor name");

    char *name = malloc(70001);
    memset(name, 'x', 70000);
    name[70000] = '\0';
    b = (bytes){0};
    b_header(&b, 3, 1, 0);
    b_tensor(&b, name, 1, ne, GGML_TYPE_F32, 0);
    b_zeros(&b, 64);
    free(name);
    expect_fail(&b, "tensor name of 70000 bytes is longer than the 65535 allowed");
}

Test(gguf, open_errors) {
    gguf_file f;
    seam_error e = {{0}};
    cr_assert_eq(gguf_open(&f, "/nonexistent/x.gguf", &e), -1);
    cr_assert(strstr(e.msg, "/nonexistent/x.gguf: cannot open"), "%s", e.msg);
    const char *empty = test_path("gguf_empty.gguf");
    cr_assert_eq(test_write_file(empty, "", 0), 0);
    cr_assert_eq(gguf_open(&f, empty, &e), -1);
    cr_assert(strstr(e.msg, "empty file"), "%s", e.msg);
    cr_assert_eq(gguf_open(&f, SEAM_SOURCE_DIR, &e), -1);
    cr_assert(strstr(e.msg, "not a regular file"), "%s", e.msg);

    // A mapped file's errors name the path.
    const char *bad = test_path("gguf_bad_version.gguf");
    bytes b = {0};
    b_header(&b, 9, 0, 0);
    cr_assert_eq(test_write_file(bad, b.p, b.len), 0);
    free(b.p);
    cr_assert_eq(gguf_open(&f, bad, &e), -1);
    cr_assert(strstr(e.msg, bad) && strstr(e.msg, "version 9"), "%s", e.msg);
}

// ---------------------------------------------------------------------------
// Typed lookups and formatting

// A file holding one value of each kind the getters are asked about.
static bytes getter_file(void) {
    bytes b = {0};
    b_header(&b, 3, 0, 7);
    b_kv_u32(&b, "u32", 4000000000u);
    b_str(&b, "neg");
    b_u32(&b, GGUF_TYPE_INT32);
    b_u32(&b, (uint32_t)-3);
    b_str(&b, "big");
    b_u32(&b, GGUF_TYPE_UINT64);
    b_u64(&b, 1ull << 32);
    b_str(&b, "small");
    b_u32(&b, GGUF_TYPE_INT8);
    b_u8(&b, 100);
    b_str(&b, "f64");
    b_u32(&b, GGUF_TYPE_FLOAT64);
    double d = 1e6;
    b_put(&b, &d, 8);
    b_str(&b, "name");
    b_u32(&b, GGUF_TYPE_STRING);
    b_str(&b, "gemma\n\"3\"");
    b_str(&b, "arr");
    b_u32(&b, GGUF_TYPE_ARRAY);
    b_u32(&b, GGUF_TYPE_INT16);
    b_u64(&b, 6);
    for (int16_t i = -1; i < 5; i++) b_put(&b, &i, 2);
    return b;
}

Test(gguf, typed_getters) {
    bytes b = getter_file();
    gguf_file f;
    expect_ok(&b, &f);
    seam_error e = {{0}};
    uint32_t u;
    float x;
    gguf_str s;

    cr_assert_eq(gguf_get_u32(&f, "u32", &u, &e), 0);
    cr_assert_eq(u, 4000000000u);
    cr_assert_eq(gguf_get_u32(&f, "small", &u, &e), 0);
    cr_assert_eq(u, 100);
    cr_assert_eq(gguf_get_u32(&f, "neg", &u, &e), -1);
    cr_assert(strstr(e.msg, "'neg' = -3 does not fit in a u32"), "%s", e.msg);
    cr_assert_eq(gguf_get_u32(&f, "big", &u, &e), -1);
    cr_assert(strstr(e.msg, "4294967296 does not fit"), "%s", e.msg);
    cr_assert_eq(gguf_get_u32(&f, "f64", &u, &e), -1);
    cr_assert(strstr(e.msg, "holds a f64, not an integer"), "%s", e.msg);
    cr_assert_eq(gguf_get_u32(&f, "missing", &u, &e), -1);
    cr_assert(strstr(e.msg, "'missing' is missing"), "%s", e.msg);

    cr_assert_eq(gguf_get_f32(&f, "f64", &x, &e), 0);
    cr_assert_eq(x, 1e6f);
    cr_assert_eq(gguf_get_f32(&f, "neg", &x, &e), 0);
    cr_assert_eq(x, -3.0f);
    cr_assert_eq(gguf_get_f32(&f, "name", &x, &e), -1);
    cr_assert(strstr(e.msg, "holds a string, not a number"), "%s", e.msg);
    cr_assert_eq(gguf_get_f32(&f, "missing", &x, &e), -1);

    cr_assert_eq(gguf_get_str(&f, "name", &s, &e), 0);
    cr_assert(gguf_str_eq(s, "gemma\n\"3\""));
    cr_assert_eq(gguf_get_str(&f, "u32", &s, &e), -1);
    cr_assert(strstr(e.msg, "holds a u32, not a string"), "%s", e.msg);
    cr_assert_eq(gguf_get_str(&f, "missing", &s, &e), -1);

    cr_assert_eq(gguf_get_u32_or(&f, "missing", 11, &u, &e), 0);
    cr_assert_eq(u, 11);
    cr_assert_eq(gguf_get_u32_or(&f, "small", 11, &u, &e), 0);
    cr_assert_eq(u, 100);
    cr_assert_eq(gguf_get_u32_or(&f, "neg", 11, &u, &e), -1);
    cr_assert_eq(gguf_get_f32_or(&f, "missing", 0.25f, &x, &e), 0);
    cr_assert_eq(x, 0.25f);
    cr_assert_eq(gguf_get_f32_or(&f, "f64", 0.25f, &x, &e), 0);
    cr_assert_eq(x, 1e6f);
    cr_assert_eq(gguf_get_f32_or(&f, "arr", 0.25f, &x, &e), -1);
    gguf_close(&f);
    free(b.p);
}

Test(gguf, format_value) {
    bytes b = getter_file();
    gguf_file f;
    expect_ok(&b, &f);
    char buf[128];
    gguf_format_value(gguf_find_kv(&f, "u32"), buf, sizeof buf);
    cr_assert_str_eq(buf, "4000000000");
    gguf_format_value(gguf_find_kv(&f, "neg"), buf, sizeof buf);
    cr_assert_str_eq(buf, "-3");
    gguf_format_value(gguf_find_kv(&f, "f64"), buf, sizeof buf);
    cr_assert_str_eq(buf, "1e+06");
    gguf_format_value(gguf_find_kv(&f, "name"), buf, sizeof buf);
    cr_assert_str_eq(buf, "\"gemma\\n\\\"3\\\"\"");
    gguf_format_value(gguf_find_kv(&f, "arr"), buf, sizeof buf);
    cr_assert_str_eq(buf, "[i16 x 6] -1, 0, 1, 2, ...");
    char tiny[6];
    gguf_format_value(gguf_find_kv(&f, "arr"), tiny, sizeof tiny);
    cr_assert_str_eq(tiny, "[i16 ");
    gguf_close(&f);
    free(b.p);

    const char *path = test_path("gguf_format.gguf");
    write_sample(path, GGUF_DEFAULT_ALIGNMENT);
    seam_error e = {{0}};
    cr_assert_eq(gguf_open(&f, path, &e), 0, "%s", e.msg);
    gguf_format_value(gguf_find_kv(&f, "tokenizer.ggml.tokens"), buf, sizeof buf);
    cr_assert_str_eq(buf, "[string x 4] \"<s>\", \"\", \"hello\", \"w\xc3\xb6rld\"");
    gguf_format_value(gguf_find_kv(&f, "test.bool"), buf, sizeof buf);
    cr_assert_str_eq(buf, "true");
    gguf_format_value(gguf_find_kv(&f, "test.f32"), buf, sizeof buf);
    cr_assert_str_eq(buf, "0.5");
    gguf_close(&f);
}

// ---------------------------------------------------------------------------
// Writer misuse

static FILE *scratch_file(const char *name) {
    FILE *out = fopen(test_path(name), "wb");
    cr_assert(out);
    return out;
}

Test(gguf, writer_rejects_bad_declarations) {
    cr_assert_null(gguf_writer_new(0));
    cr_assert_null(gguf_writer_new(48));

    const uint64_t ne[2] = {100, 2};
    gguf_writer *w = gguf_writer_new(32);
    cr_assert_eq(gguf_w_tensor(w, "w", GGML_TYPE_Q4_K, 2, ne), -1);
    gguf_w_u32(w, "k", 1);  // later declarations do not hide the first error
    FILE *out = scratch_file("gguf_writer_bad.gguf");
    seam_error e = {{0}};
    cr_assert_eq(gguf_w_begin(w, out, &e), -1);
    cr_assert(strstr(e.msg, "tensor 'w': row length 100"), "%s", e.msg);
    gguf_writer_free(w);

    w = gguf_writer_new(32);
    gguf_w_u32(w, "k", 1);
    gguf_w_f32(w, "k", 2);
    cr_assert_eq(gguf_w_begin(w, out, &e), -1);
    cr_assert(strstr(e.msg, "duplicate metadata key 'k'"), "%s", e.msg);
    gguf_writer_free(w);

    w = gguf_writer_new(32);
    cr_assert_eq(gguf_w_tensor(w, "t", GGML_TYPE_F32, 1, ne), 0);
    cr_assert_eq(gguf_w_tensor(w, "t", GGML_TYPE_F32, 1, ne), -1);
    cr_assert_eq(gguf_w_finish(w, &e), -1);
    cr_assert(strstr(e.msg, "duplicate tensor name 't'"), "%s", e.msg);
    gguf_writer_free(w);
    fclose(out);
}

Test(gguf, writer_checks_data_amounts) {
    const uint64_t ne[1] = {8};
    float data[9] = {0};
    seam_error e = {{0}};
    FILE *out = scratch_file("gguf_writer_amounts.gguf");

    gguf_writer *w = gguf_writer_new(32);
    gguf_w_tensor(w, "t", GGML_TYPE_F32, 1, ne);
    cr_assert_eq(gguf_w_data(w, data, 32, &e), -1);
    cr_assert(strstr(e.msg, "before gguf_w_begin"), "%s", e.msg);
    gguf_writer_free(w);

    w = gguf_writer_new(32);
    gguf_w_tensor(w, "t", GGML_TYPE_F32, 1, ne);
    cr_assert_eq(gguf_w_begin(w, out, &e), 0, "%s", e.msg);
    cr_assert_eq(gguf_w_data(w, data, 20, &e), 0, "%s", e.msg);
    cr_assert_eq(gguf_w_finish(w, &e), -1);
    cr_assert(strstr(e.msg, "tensor 0 't' is missing 12 of its 32 bytes"), "%s", e.msg);
    gguf_writer_free(w);

    w = gguf_writer_new(32);
    gguf_w_tensor(w, "t", GGML_TYPE_F32, 1, ne);
    cr_assert_eq(gguf_w_begin(w, out, &e), 0, "%s", e.msg);
    cr_assert_eq(gguf_w_data(w, data, sizeof data, &e), -1);
    cr_assert(strstr(e.msg, "4 bytes more than the declared tensors hold"), "%s", e.msg);
    gguf_writer_free(w);
    fclose(out);
}
