// test_quant.c — the block formats, checked three ways: against blocks built
// by hand from the layout diagrams, against an independent decoder (the gguf
// Python package, via tests/data/quant_oracle.bin), and against themselves
// (quantise -> dequantise error; dot == dequantised dot).
#include <criterion/criterion.h>
#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "helpers.h"
#include "numeric/quant.h"


// Bitwise equal, or both nan with the same sign (a nan's payload is the
// converter's choice).
static bool same_float(float a, float b) {
    if (isnan(a) || isnan(b)) return isnan(a) && isnan(b) && signbit(a) == signbit(b);
    return test_bits_of(a) == test_bits_of(b);
}

static void put_f16(uint8_t *p, float f) {
    seam_f16 h = seam_f32_to_f16(f);
    memcpy(p, &h, sizeof h);
}

static float *normal_row(int64_t n, uint64_t *rng) {
    float *x = malloc((size_t)n * sizeof *x);
    for (int64_t i = 0; i < n; i++) x[i] = test_rng_normal(rng);
    return x;
}

// RMS of a - b over RMS of a.
static double rel_rms(const float *a, const float *b, int64_t n) {
    double e = 0, s = 0;
    for (int64_t i = 0; i < n; i++) {
        e += ((double)a[i] - b[i]) * ((double)a[i] - b[i]);
        s += (double)a[i] * a[i];
    }
    return sqrt(e / s);
}

static const uint32_t WEIGHT_TYPES[] = {
    GGML_TYPE_F32, GGML_TYPE_F16, GGML_TYPE_BF16, GGML_TYPE_Q4_0, GGML_TYPE_Q5_0,
    GGML_TYPE_Q8_0, GGML_TYPE_Q4_K, GGML_TYPE_Q5_K, GGML_TYPE_Q6_K,
};
#define N_WEIGHT_TYPES (sizeof WEIGHT_TYPES / sizeof WEIGHT_TYPES[0])

// ---------------------------------------------------------------------------
// f16 and bf16

Test(f16, edge_cases) {
    static const struct { float f; uint16_t h; } cases[] = {
        {0.0f, 0x0000},           {-0.0f, 0x8000},          {1.0f, 0x3c00},
        {-2.0f, 0xc000},          {65504.0f, 0x7bff},       {65519.996f, 0x7bff},
        {65520.0f, 0x7c00},       {1e9f, 0x7c00},           {INFINITY, 0x7c00},
        {-INFINITY, 0xfc00},      {0x1p-14f, 0x0400},       {0x1.ff8p-15f, 0x03ff},
        {0x1p-24f, 0x0001},       {-0x1p-24f, 0x8001},      {0x1p-25f, 0x0000},  // tie -> even (0)
        {0x1.000002p-25f, 0x0001}, {0x1.8p-24f, 0x0002},    // tie between 1 and 2 units -> 2
        {0x1p-14f - 0x1p-25f, 0x0400},                      // tie between 0x3ff and 0x400
        {1.0f + 0x1p-11f, 0x3c00}, {1.0f + 0x3p-11f, 0x3c02}, {-1e-30f, 0x8000},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        cr_assert_eq(seam_f32_to_f16(cases[i].f), cases[i].h, "f32_to_f16(%a) = 0x%04x, want 0x%04x", cases[i].f,
                     seam_f32_to_f16(cases[i].f), cases[i].h);
    }
    cr_assert_eq(seam_f32_to_f16(NAN) & 0x7fff, 0x7e00, "nan stays a quiet nan");
    cr_assert_eq(seam_f32_to_f16(-NAN), 0xfe00);
    cr_assert_eq(seam_f32_to_f16(test_float_of(0x7f800001)), 0x7e00, "a nan with a low payload stays nan");
    cr_assert_eq(test_bits_of(seam_f16_to_f32(0x0001)), test_bits_of(0x1p-24f));
    cr_assert_eq(test_bits_of(seam_f16_to_f32(0x03ff)), test_bits_of(0x1.ff8p-15f));
    cr_assert_eq(test_bits_of(seam_f16_to_f32(0xfc00)), test_bits_of(-INFINITY));
}

Test(f16, every_half_round_trips) {
    for (uint32_t h = 0; h < 0x10000; h++) {
        float f = seam_f16_to_f32((seam_f16)h);
        seam_f16 back = seam_f32_to_f16(f);
        if (isnan(f)) {
            cr_assert((back & 0x7c00) == 0x7c00 && (back & 0x3ff) && (back & 0x8000) == (h & 0x8000),
                      "nan 0x%04x came back as 0x%04x", h, back);
        } else {
            cr_assert_eq(back, h, "0x%04x -> %a -> 0x%04x", h, f, back);
        }
    }
}

// Every midpoint between adjacent finite halves (subnormals included) rounds
// to the even one; a hair either side rounds to the nearer one.
Test(f16, midpoints_round_to_even) {
    for (uint32_t h = 0; h < 0x7bff; h++) {
        float lo = seam_f16_to_f32((seam_f16)h), hi = seam_f16_to_f32((seam_f16)(h + 1));
        float mid = lo + (hi - lo) / 2;  // exact: halves have 11 significant bits
        uint32_t even = (h & 1) ? h + 1 : h;
        cr_assert_eq(seam_f32_to_f16(mid), even, "midpoint %a after 0x%04x", mid, h);
        cr_assert_eq(seam_f32_to_f16(nextafterf(mid, 0)), h);
        cr_assert_eq(seam_f32_to_f16(nextafterf(mid, INFINITY)), h + 1);
        cr_assert_eq(seam_f32_to_f16(-mid), even | 0x8000);
    }
}

Test(bf16, edge_cases) {
    static const struct { uint32_t f; uint16_t h; } cases[] = {
        {0x3f800000, 0x3f80}, {0x3f808000, 0x3f80},  // tie -> even
        {0x3f818000, 0x3f82}, {0x3f80ffff, 0x3f81},  {0x3f808001, 0x3f81},
        {0x7f7fffff, 0x7f80},  // FLT_MAX rounds to inf
        {0x7f800000, 0x7f80}, {0xff800000, 0xff80}, {0x80000000, 0x8000},
        {0x00000001, 0x0000}, {0x807fffff, 0x8080},  // subnormals round like everything else
        {0x7f800001, 0x7fc0}, {0xffc00001, 0xffc0},  // nan stays nan, made quiet
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        cr_assert_eq(seam_f32_to_bf16(test_float_of(cases[i].f)), cases[i].h, "f32_to_bf16(0x%08x) = 0x%04x, want 0x%04x",
                     cases[i].f, seam_f32_to_bf16(test_float_of(cases[i].f)), cases[i].h);
    }
    for (uint32_t h = 0; h < 0x10000; h++) {
        float f = seam_bf16_to_f32((seam_bf16)h);
        if (!isnan(f)) cr_assert_eq(seam_f32_to_bf16(f), h, "0x%04x does not round-trip", h);
    }
}

// ---------------------------------------------------------------------------
// Types

Test(types, supported_and_vec_dot_types) {
    static const struct { uint32_t type, dot; } cases[] = {
        {GGML_TYPE_F32, GGML_TYPE_F32},   {GGML_TYPE_F16, GGML_TYPE_F16},   {GGML_TYPE_BF16, GGML_TYPE_BF16},
        {GGML_TYPE_Q4_0, GGML_TYPE_Q8_0}, {GGML_TYPE_Q5_0, GGML_TYPE_Q8_0}, {GGML_TYPE_Q8_0, GGML_TYPE_Q8_0},
        {GGML_TYPE_Q4_K, GGML_TYPE_Q8_K}, {GGML_TYPE_Q5_K, GGML_TYPE_Q8_K}, {GGML_TYPE_Q6_K, GGML_TYPE_Q8_K},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        cr_assert(seam_type_supported(cases[i].type), "%s", ggml_type_name(cases[i].type));
        cr_assert_eq(seam_vec_dot_type(cases[i].type), cases[i].dot, "%s", ggml_type_name(cases[i].type));
    }
    static const uint32_t unsupported[] = {GGML_TYPE_Q4_1, GGML_TYPE_Q2_K, GGML_TYPE_Q8_K, GGML_TYPE_IQ4_XS, 5, 99};
    for (size_t i = 0; i < sizeof unsupported / sizeof unsupported[0]; i++) {
        cr_assert(!seam_type_supported(unsupported[i]));
        cr_assert_eq(seam_vec_dot_type(unsupported[i]), GGML_TYPE_COUNT);
    }
}

Test(types, refuses_what_it_cannot_do) {
    uint8_t buf[1024] = {0};
    float x[256] = {0};
    cr_assert_eq(seam_dequantize_row(GGML_TYPE_Q2_K, buf, x, 256), -1);
    cr_assert_eq(seam_dequantize_row(GGML_TYPE_Q4_K, buf, x, 100), -1, "not a whole number of blocks");
    cr_assert_eq(seam_dequantize_row(99, buf, x, 32), -1);
    cr_assert_eq(seam_quantize_weights(GGML_TYPE_Q2_K, x, buf, 256), -1);
    cr_assert_eq(seam_quantize_weights(GGML_TYPE_Q4_0, x, buf, 33), -1);
    cr_assert_eq(seam_quantize_activation(GGML_TYPE_Q4_K, x, buf, 256), -1);
    cr_assert_eq(seam_quantize_activation(GGML_TYPE_Q8_K, x, buf, 32), -1);
    cr_assert(isnan(seam_vec_dot(EXACT_ORDER_AVX2, GGML_TYPE_Q2_K, buf, buf, 256)));
}

// ---------------------------------------------------------------------------
// Blocks built by hand from the diagrams

Test(hand, q4_0) {
    block_q4_0 b = {.d = 0x3800};  // 0.5
    for (int j = 0; j < 16; j++) b.qs[j] = (uint8_t)(j | (15 - j) << 4);
    float y[32];
    cr_assert_eq(seam_dequantize_row(GGML_TYPE_Q4_0, &b, y, 32), 0);
    for (int j = 0; j < 16; j++) {
        cr_assert_eq(y[j], 0.5f * (j - 8), "weight %d: low nibble of byte %d", j, j);
        cr_assert_eq(y[j + 16], 0.5f * (7 - j), "weight %d: high nibble of byte %d", j + 16, j);
    }
}

Test(hand, q5_0) {
    // Fifth bits on weights 0, 15 and 31 only: bits 0, 15, 31 of qh.
    block_q5_0 b = {.d = 0x3400, .qh = {0x01, 0x80, 0x00, 0x80}};  // d = 0.25
    for (int j = 0; j < 16; j++) b.qs[j] = (uint8_t)(15 << 4);  // weights 0..15: 0, 16..31: 15
    float y[32];
    cr_assert_eq(seam_dequantize_row(GGML_TYPE_Q5_0, &b, y, 32), 0);
    for (int j = 0; j < 32; j++) {
        int nib = j < 16 ? 0 : 15, bit = j == 0 || j == 15 || j == 31;
        cr_assert_eq(y[j], 0.25f * ((nib | bit << 4) - 16), "weight %d", j);
    }
    cr_assert_eq(y[0], 0.0f);
    cr_assert_eq(y[1], -4.0f);
    cr_assert_eq(y[31], 3.75f);
}

Test(hand, q8_0) {
    block_q8_0 b = {.d = 0x4000};  // 2
    for (int j = 0; j < 32; j++) b.qs[j] = (int8_t)(j * 8 - 128);
    float y[32];
    cr_assert_eq(seam_dequantize_row(GGML_TYPE_Q8_0, &b, y, 32), 0);
    for (int j = 0; j < 32; j++) cr_assert_eq(y[j], 2.0f * (j * 8 - 128));
}

// The GPU prefill's weights: the dequantised value rounded to f16, to
// nearest and ties to even. d = 1 + 2^-10; 3d = 3 + 1.5 * 2^-9 lies halfway
// between two f16 values (spacing 2^-9 in [2, 4)) and goes to the even one,
// 3 + 2^-8; 5d = 5 + 1.25 * 2^-8 rounds down to 5 + 2^-8.
Test(hand, q8_0_to_f16_rounds_to_nearest_even) {
    block_q8_0 b = {.d = 0x3c01, .qs = {1, 3, -3, 5}};
    seam_f16 y[32];
    cr_assert_eq(seam_dequantize_row_f16(GGML_TYPE_Q8_0, &b, y, 32), 0);
    static const seam_f16 want[4] = {0x3c01, 0x4202, 0xc202, 0x4501};
    for (int j = 0; j < 4; j++) cr_assert_eq(y[j], want[j], "weight %d: 0x%04x, want 0x%04x", j, y[j], want[j]);
    for (int j = 4; j < 32; j++) cr_assert_eq(y[j], 0);
    cr_assert_eq(seam_dequantize_row_f16(GGML_TYPE_Q4_K, &b, y, 100), -1, "not a whole number of blocks");
    cr_assert_eq(seam_dequantize_row_f16(GGML_TYPE_Q2_K, &b, y, 256), -1, "no decoder");
}

// Sub-block scales and mins for the K hand blocks; 4..7 are >= 16, so their
// top two bits land in the top bits of bytes 0..7.
static const uint8_t HAND_SC[8] = {10, 17, 24, 31, 38, 45, 52, 59};
static const uint8_t HAND_M[8] = {60, 55, 50, 45, 40, 35, 30, 25};
// HAND_SC/HAND_M packed by hand from the Q4_K diagram:
//   byte j, j<4:  sc[j]   | (sc[j+4] >> 4) << 6    e.g. 10 | 2 << 6 = 0x8a
//   byte j+4:     m[j]    | (m[j+4]  >> 4) << 6    e.g. 60 | 2 << 6 = 0xbc
//   byte j+8:     sc[j+4] & 15 | (m[j+4] & 15) << 4  e.g. 6 | 8 << 4 = 0x86
static const uint8_t HAND_SCALES[12] = {0x8a, 0x91, 0xd8, 0xdf, 0xbc, 0xb7, 0x72, 0x6d, 0x86, 0x3d, 0xe4, 0x9b};

Test(hand, q4k_scale_min_packing) {
    for (int s = 0; s < 8; s++) {
        uint8_t sc, m;
        seam_q4k_scale_min(HAND_SCALES, s, &sc, &m);
        cr_assert_eq(sc, HAND_SC[s], "sub-block %d scale", s);
        cr_assert_eq(m, HAND_M[s], "sub-block %d min", s);
    }
}

// Chunk c: low nibble l & 15 for sub-block 2c, high nibble 15 - (l & 15) for
// sub-block 2c+1. A decoder that gives both halves one scale fails here.
Test(hand, q4_K_nibbles_take_their_own_scale) {
    block_q4_K b = {.d = 0x3800, .dmin = 0x3400};  // 0.5, 0.25
    memcpy(b.scales, HAND_SCALES, 12);
    for (int i = 0; i < 128; i++) b.qs[i] = (uint8_t)((i & 15) | (15 - (i & 15)) << 4);
    float y[QK_K];
    cr_assert_eq(seam_dequantize_row(GGML_TYPE_Q4_K, &b, y, QK_K), 0);
    for (int s = 0; s < 8; s++) {
        for (int l = 0; l < 32; l++) {
            int q = s % 2 == 0 ? (l & 15) : 15 - (l & 15);
            float want = 0.5f * HAND_SC[s] * q - 0.25f * HAND_M[s];
            cr_assert_eq(y[32 * s + l], want, "sub-block %d weight %d: %g, want %g", s, l, y[32 * s + l], want);
        }
    }
}

Test(hand, q5_K) {
    // Fifth bits: qh[l] = 0x55 for even l (sub-blocks 0,2,4,6), 0xaa for odd l.
    block_q5_K b = {.d = 0x3800, .dmin = 0x3400};
    memcpy(b.scales, HAND_SCALES, 12);
    for (int l = 0; l < 32; l++) b.qh[l] = l % 2 ? 0xaa : 0x55;
    for (int i = 0; i < 128; i++) b.qs[i] = (uint8_t)((i & 15) | (15 - (i & 15)) << 4);
    float y[QK_K];
    cr_assert_eq(seam_dequantize_row(GGML_TYPE_Q5_K, &b, y, QK_K), 0);
    for (int s = 0; s < 8; s++) {
        for (int l = 0; l < 32; l++) {
            int q = (s % 2 == 0 ? (l & 15) : 15 - (l & 15)) + (s % 2 == l % 2 ? 16 : 0);
            float want = 0.5f * HAND_SC[s] * q - 0.25f * HAND_M[s];
            cr_assert_eq(y[32 * s + l], want, "sub-block %d weight %d: %g, want %g", s, l, y[32 * s + l], want);
        }
    }
}

Test(hand, q6_K) {
    block_q6_K b = {.d = 0x3800};  // 0.5
    for (int s = 0; s < 16; s++) b.scales[s] = (int8_t)(s - 8);
    // Half 0: ql[l] = 0x21, ql[l+32] = 0x43, qh[l] = 0b11100100 (2-bit fields 0,1,2,3)
    //   q = 1|0<<4, 3|1<<4, 2|2<<4, 4|3<<4 = 1, 19, 34, 52 for weights l, l+32, l+64, l+96
    // Half 1: ql[l] = 0x65, ql[l+32] = 0x87, qh[l] = 0b00011011 (fields 3,2,1,0)
    //   q = 5|3<<4, 7|2<<4, 6|1<<4, 8|0<<4 = 53, 39, 22, 8
    for (int l = 0; l < 32; l++) {
        b.ql[l] = 0x21, b.ql[l + 32] = 0x43, b.qh[l] = 0xe4;
        b.ql[64 + l] = 0x65, b.ql[96 + l] = 0x87, b.qh[32 + l] = 0x1b;
    }
    static const int q[8] = {1, 19, 34, 52, 53, 39, 22, 8};  // per 32 weights
    float y[QK_K];
    cr_assert_eq(seam_dequantize_row(GGML_TYPE_Q6_K, &b, y, QK_K), 0);
    for (int i = 0; i < QK_K; i++) {
        float want = 0.5f * (i / 16 - 8) * (q[i / 32] - 32);
        cr_assert_eq(y[i], want, "weight %d: %g, want %g", i, y[i], want);
    }
}

Test(hand, q8_K) {
    block_q8_K b = {.d = 0.125f};
    for (int j = 0; j < QK_K; j++) b.qs[j] = (int8_t)(j - 128);
    float y[QK_K];
    cr_assert_eq(seam_dequantize_row(GGML_TYPE_Q8_K, &b, y, QK_K), 0);
    for (int j = 0; j < QK_K; j++) cr_assert_eq(y[j], 0.125f * (j - 128));
}

// ---------------------------------------------------------------------------
// Activation quantisers: llama.cpp's rounding, by hand

Test(hand, q8_K_quantiser_ties_to_even_and_bsums) {
    float x[QK_K] = {0};
    x[5] = -2;     // largest magnitude, negative: iscale = -127 / -2 = 63.5
    x[6] = 1;      // 63.5 -> 64 (even)
    x[7] = -1;     // -63.5 -> -64
    x[20] = 0.5f;  // 31.75 -> 32
    block_q8_K y;
    seam_quantize_row_q8_K(x, &y, QK_K);
    cr_assert_eq(y.d, 1 / 63.5f);
    cr_assert_eq(y.qs[5], -127);
    cr_assert_eq(y.qs[6], 64);
    cr_assert_eq(y.qs[7], -64);
    cr_assert_eq(y.qs[20], 32);
    cr_assert_eq(y.bsums[0], -127);
    cr_assert_eq(y.bsums[1], 32);
    for (int g = 2; g < 16; g++) cr_assert_eq(y.bsums[g], 0);

    float z[QK_K] = {0};
    seam_quantize_row_q8_K(z, &y, QK_K);
    cr_assert_eq(y.d, 0.0f, "an all-zero block has d = 0");
}

// llama.cpp's x86 Q8_0 quantiser (the one seam is compared with) rounds
// half to even, unlike its portable reference.
Test(hand, q8_0_quantiser_ties_to_even) {
    float x[32] = {127, 2.5f, -2.5f, 0.5f, -0.5f, 1.5f};  // amax 127: d = 1, steps exact
    block_q8_0 y;
    seam_quantize_row_q8_0(x, &y, 32);
    cr_assert_eq(y.d, 0x3c00);
    static const int8_t want[6] = {127, 2, -2, 0, 0, 2};
    for (int j = 0; j < 6; j++) cr_assert_eq(y.qs[j], want[j], "x = %g", x[j]);
}

// ---------------------------------------------------------------------------
// The oracle: the gguf Python package's decoders (tools/quant_oracle.py)

typedef struct {
    uint32_t kind;  // 0: bytes decode to values; 1: values encode to bytes
    uint32_t type, n, nbytes;
    float *values;   // [n]
    uint8_t *bytes;  // [nbytes], malloc'd so that block structs are aligned
} oracle_record;

static uint32_t read_u32(const uint8_t *p) {
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

// Reads the fixture; returns the number of records (at most max).
static int load_oracle(oracle_record *rec, int max) {
    const char *path = SEAM_SOURCE_DIR "/tests/data/quant_oracle.bin";
    size_t size = 0;
    uint8_t *buf = test_read_file(path, &size);
    cr_assert(buf, "cannot read %s (regenerate it with tools/quant_oracle.py)", path);
    cr_assert(size >= 12 && memcmp(buf, "SQOR", 4) == 0 && read_u32(buf + 4) == 1, "%s: not a version 1 oracle", path);
    int count = (int)read_u32(buf + 8);
    cr_assert(count <= max);
    size_t off = 12;
    for (int r = 0; r < count; r++) {
        cr_assert(off + 16 <= size, "%s: truncated", path);
        oracle_record *o = &rec[r];
        o->kind = read_u32(buf + off), o->type = read_u32(buf + off + 4);
        o->n = read_u32(buf + off + 8), o->nbytes = read_u32(buf + off + 12);
        off += 16;
        cr_assert(off + 4ull * o->n + o->nbytes <= size, "%s: truncated", path);
        o->values = malloc(4ull * o->n + 1);
        o->bytes = malloc(o->nbytes + 1);
        memcpy(o->values, buf + off, 4ull * o->n);
        memcpy(o->bytes, buf + off + 4ull * o->n, o->nbytes);
        off += 4ull * o->n + o->nbytes;
    }
    free(buf);
    return count;
}

// Tolerance: none. Both sides compute d * q (- m) in float32 with the same
// operation order, so every value must match bit for bit (nan: sign only).
Test(oracle, decoders_match_gguf_package) {
    oracle_record rec[32];
    int count = load_oracle(rec, 32);
    uint64_t seen = 0;
    for (int r = 0; r < count; r++) {
        oracle_record *o = &rec[r];
        if (o->kind != 0) continue;
        const char *name = ggml_type_name(o->type);
        cr_assert_eq(ggml_row_bytes(o->type, o->n), o->nbytes, "%s record size", name);
        float *y = malloc(4ull * o->n);
        cr_assert_eq(seam_dequantize_row(o->type, o->bytes, y, o->n), 0, "%s", name);
        for (uint32_t i = 0; i < o->n; i++) {
            cr_assert(same_float(y[i], o->values[i]), "%s value %u: seam %a (0x%08x), oracle %a (0x%08x)", name, i,
                      y[i], test_bits_of(y[i]), o->values[i], test_bits_of(o->values[i]));
        }
        seen |= 1ull << o->type;
        free(y);
    }
    for (size_t t = 0; t < N_WEIGHT_TYPES; t++) {
        if (WEIGHT_TYPES[t] != GGML_TYPE_F32) cr_assert(seen >> WEIGHT_TYPES[t] & 1, "no %s in the oracle", ggml_type_name(WEIGHT_TYPES[t]));
    }
    cr_assert(seen >> GGML_TYPE_Q8_K & 1, "no Q8_K in the oracle");
    for (int r = 0; r < count; r++) free(rec[r].values), free(rec[r].bytes);
}

// f32 -> f16 (numpy's cast), f32 -> bf16 (gguf package), and the activation
// quantisers (gguf's Q8_0, a numpy transcription of quantize_row_q8_K_ref):
// byte for byte.
Test(oracle, encoders_match) {
    oracle_record rec[32];
    int count = load_oracle(rec, 32);
    int checked = 0;
    for (int r = 0; r < count; r++) {
        oracle_record *o = &rec[r];
        if (o->kind != 1) continue;
        const char *name = ggml_type_name(o->type);
        cr_assert_eq(ggml_row_bytes(o->type, o->n), o->nbytes, "%s record size", name);
        uint8_t *out = malloc(o->nbytes);
        cr_assert_eq(seam_quantize_activation(o->type, o->values, out, o->n), 0, "%s", name);
        for (uint32_t i = 0; i < o->nbytes; i++) {
            cr_assert_eq(out[i], o->bytes[i], "%s byte %u: seam 0x%02x, oracle 0x%02x", name, i, out[i], o->bytes[i]);
        }
        checked++;
        free(out);
    }
    cr_assert_eq(checked, 4, "F16, BF16, Q8_0 and Q8_K encodings");
    for (int r = 0; r < count; r++) free(rec[r].values), free(rec[r].bytes);
}

// ---------------------------------------------------------------------------
// Round trips and dots

// Relative RMS error of quantise -> dequantise on N(0, 1) weights; the bounds
// sit ~10% above what these quantisers reach (bits per weight in brackets).
static const struct {
    uint32_t type;
    double bound;
} ROUNDTRIP_BOUNDS[] = {
    {GGML_TYPE_F32, 0},          {GGML_TYPE_F16, 2.3e-4},     {GGML_TYPE_BF16, 1.9e-3},
    {GGML_TYPE_Q8_0, 5.9e-3},    // 8.5
    {GGML_TYPE_Q6_K, 2.0e-2},    // 6.56
    {GGML_TYPE_Q5_K, 4.1e-2},    // 5.5
    {GGML_TYPE_Q5_0, 4.6e-2},    // 5.5
    {GGML_TYPE_Q4_K, 8.2e-2},    // 4.5
    {GGML_TYPE_Q4_0, 9.1e-2},    // 4.5
};
_Static_assert(sizeof ROUNDTRIP_BOUNDS / sizeof ROUNDTRIP_BOUNDS[0] == N_WEIGHT_TYPES, "a bound for every type");

Test(roundtrip, weight_quantisers_error_bounds) {
    const int64_t n = 64 * QK_K;
    uint64_t rng = 42;
    float *x = normal_row(n, &rng), *y = malloc(n * sizeof *y);
    void *q = malloc(ggml_row_bytes(GGML_TYPE_F32, n));
    for (size_t i = 0; i < N_WEIGHT_TYPES; i++) {
        uint32_t t = ROUNDTRIP_BOUNDS[i].type;
        cr_assert_eq(seam_quantize_weights(t, x, q, n), 0, "%s", ggml_type_name(t));
        cr_assert_eq(seam_dequantize_row(t, q, y, n), 0, "%s", ggml_type_name(t));
        double err = rel_rms(x, y, n);
        cr_assert(err <= ROUNDTRIP_BOUNDS[i].bound, "%s: relative RMS error %.3g > %.3g", ggml_type_name(t), err,
                  ROUNDTRIP_BOUNDS[i].bound);
    }
    free(x), free(y), free(q);
}

// Zeros stay zero; constant, one-sided and outlier rows stay finite, and
// every value within what its format allows of the largest magnitude in its
// block (each of 32 or 256 weights; a float's own magnitude): an outlier
// widens its own block's steps, not the row's.
Test(roundtrip, awkward_rows) {
    static const struct {
        uint32_t type;
        double step;  // of the block's largest magnitude
    } bounds[] = {
        {GGML_TYPE_F32, 0},
        {GGML_TYPE_F16, 0x1p-11},     // half an ulp
        {GGML_TYPE_BF16, 0x1p-8},
        {GGML_TYPE_Q8_0, 1.0 / 127},  // a step: the scale is rounded to f16
        {GGML_TYPE_Q4_0, 1.0 / 8},    // a step: -8..7 clips the positive end
        {GGML_TYPE_Q5_0, 1.0 / 16},   // likewise -16..15
        // half a step of a sub-block's range, which is at most twice the block's largest magnitude
        {GGML_TYPE_Q4_K, 1.0 / 15},
        {GGML_TYPE_Q5_K, 1.0 / 31},
        {GGML_TYPE_Q6_K, 1.0 / 64},  // -32..31 around zero: half a step of 2 x amax / 64
    };
    const int64_t n = 2 * QK_K;
    float x[2 * QK_K], y[2 * QK_K];
    uint8_t q[2 * QK_K * 4];
    uint64_t rng = 7;
    for (size_t t = 0; t < sizeof bounds / sizeof bounds[0]; t++) {
        const uint32_t type = bounds[t].type;
        uint32_t block;
        cr_assert(ggml_type_layout(type, &block, NULL));
        for (int kind = 0; kind < 4; kind++) {
            for (int64_t i = 0; i < n; i++) {
                float r = test_rng_normal(&rng);
                x[i] = kind == 0 ? 0 : kind == 1 ? -0.75f : kind == 2 ? 3 + fabsf(r) : r;
            }
            if (kind == 3) x[100] = 50;  // one outlier
            cr_assert_eq(seam_quantize_weights(type, x, q, n), 0);
            cr_assert_eq(seam_dequantize_row(type, q, y, n), 0);
            for (int64_t i = 0; i < n; i++) {
                cr_assert(isfinite(y[i]), "%s kind %d: value %ld not finite", ggml_type_name(type), kind, (long)i);
                double amax = 0;
                for (int64_t j = i / block * block; j < (i / block + 1) * block; j++) amax = fmax(amax, fabsf(x[j]));
                cr_assert(fabsf(y[i] - x[i]) <= bounds[t].step * amax,
                          "%s kind %d value %ld: %.9g vs %.9g (block amax %g)", ggml_type_name(type), kind, (long)i,
                          y[i], x[i], amax);
            }
        }
    }
}

Test(roundtrip, activation_quantisers) {
    const int64_t n = 16 * QK_K;
    uint64_t rng = 3;
    float *x = normal_row(n, &rng), *y = malloc(n * sizeof *y);
    void *q = malloc(ggml_row_bytes(GGML_TYPE_F32, n));
    static const uint32_t types[] = {GGML_TYPE_Q8_K, GGML_TYPE_Q8_0};
    for (int i = 0; i < 2; i++) {
        cr_assert_eq(seam_quantize_activation(types[i], x, q, n), 0);
        cr_assert_eq(seam_dequantize_row(types[i], q, y, n), 0);
        double err = rel_rms(x, y, n);
        cr_assert(err < 7.5e-3, "%s: relative RMS error %.3g", ggml_type_name(types[i]), err);
    }
    free(x), free(y), free(q);
}

// A row of random weights: random bytes with sane f16 scales for the block
// types (so every quant value, scale and min occurs), normals for the floats.
static void *random_weights(uint32_t type, int64_t n, uint64_t *rng) {
    uint8_t *row = malloc(ggml_row_bytes(type, n));
    uint32_t be, bb;
    cr_assert(ggml_type_layout(type, &be, &bb));
    if (be == 1) {
        float *x = normal_row(n, rng);
        seam_quantize_weights(type, x, row, n);
        free(x);
        return row;
    }
    for (uint64_t i = 0; i < ggml_row_bytes(type, n); i++) row[i] = (uint8_t)test_rng_next(rng);
    for (int64_t b = 0; b < n / be; b++) {
        uint8_t *blk = row + b * bb;
        float d = 0.01f * test_rng_normal(rng), dmin = 0.01f * test_rng_normal(rng);
        if (type == GGML_TYPE_Q6_K) {
            put_f16(blk + 208, d);
        } else {
            put_f16(blk, d);
            if (type == GGML_TYPE_Q4_K || type == GGML_TYPE_Q5_K) put_f16(blk + 2, dmin);
        }
    }
    return row;
}

// Rows of several blocks: each weight is its float dequantisation rounded
// once (block by block, at the right offsets).
Test(dequantize, f16_row_is_the_float_row_rounded) {
    uint64_t rng = 19;
    const int64_t n = 3 * QK_K;
    for (size_t t = 0; t < N_WEIGHT_TYPES; t++) {
        const uint32_t type = WEIGHT_TYPES[t];
        void *w = random_weights(type, n, &rng);
        float *f = malloc(n * sizeof *f);
        seam_f16 *h = malloc(n * sizeof *h);
        cr_assert_eq(seam_dequantize_row(type, w, f, n), 0);
        cr_assert_eq(seam_dequantize_row_f16(type, w, h, n), 0, "%s", ggml_type_name(type));
        for (int64_t i = 0; i < n; i++)
            cr_assert_eq(h[i], seam_f32_to_f16(f[i]), "%s weight %ld: 0x%04x, want 0x%04x", ggml_type_name(type),
                         (long)i, h[i], seam_f32_to_f16(f[i]));
        free(w), free(f), free(h);
    }
}

// seam_vec_dot(w, quantised a) equals dequantise(w) . dequantise(a), summed
// exactly, to |error| <= 2e-5 * sum |w_i a_i| (float rounding of the block
// scales and of the running sum; the integer parts are exact).
Test(dot, equals_dequantised_dot) {
    static const int64_t lengths[] = {32, 96, 256, 768, 4096};
    uint64_t rng = 11;
    for (size_t t = 0; t < N_WEIGHT_TYPES; t++) {
        uint32_t type = WEIGHT_TYPES[t], at = seam_vec_dot_type(type), be;
        ggml_type_layout(type, &be, NULL);
        for (size_t k = 0; k < sizeof lengths / sizeof lengths[0]; k++) {
            int64_t n = lengths[k];
            if (n % be) continue;
            void *w = random_weights(type, n, &rng);
            float *x = normal_row(n, &rng), *dw = malloc(n * sizeof *dw), *da = malloc(n * sizeof *da);
            void *a = malloc(ggml_row_bytes(at, n));
            cr_assert_eq(seam_quantize_activation(at, x, a, n), 0);
            cr_assert_eq(seam_dequantize_row(type, w, dw, n), 0);
            cr_assert_eq(seam_dequantize_row(at, a, da, n), 0);
            double want = 0, mag = 0;
            for (int64_t i = 0; i < n; i++) want += (double)dw[i] * da[i], mag += fabs((double)dw[i] * da[i]);
            double got = seam_vec_dot(EXACT_ORDER_AVX2, type, w, a, n);  // held to a tolerance: either order
            cr_assert(fabs(got - want) <= 2e-5 * mag, "%s n=%ld: dot %.9g, dequantised %.9g (sum |wa| %.3g)",
                      ggml_type_name(type), (long)n, got, want, mag);
            free(w), free(x), free(dw), free(da), free(a);
        }
    }
}

// Quantised weights against float activations that lean on them (x = w +
// noise, so that the exact dot is n and not near zero): the dot is within
// five standard deviations of what the formats' round-trip errors e_w (the
// bounds above) and e_a (Q8_K, Q8_0: 7.5e-3) leave, an error vector of
// norm e |w| met by x: (e_w + e_a) |w| |x| / sqrt(n). The 4-bit formats lie
// 2-2.3 of them off (their rounding shrinks w a little, an error x meets
// in full), the others within 1.3; a dot that returns 0 or scales its sum by
// 1.01 lies 6 (Q4_0) to hundreds away.
Test(dot, tracks_float_dot) {
    const int64_t n = 4096;
    uint64_t rng = 5;
    float *w = normal_row(n, &rng), *x = normal_row(n, &rng);
    for (int64_t i = 0; i < n; i++) x[i] = w[i] + 0.5f * x[i];
    double exact = 0, ww = 0, xx = 0;
    for (int64_t i = 0; i < n; i++) exact += (double)w[i] * x[i], ww += (double)w[i] * w[i], xx += (double)x[i] * x[i];
    for (size_t t = 0; t < N_WEIGHT_TYPES; t++) {
        uint32_t type = ROUNDTRIP_BOUNDS[t].type, at = seam_vec_dot_type(type);
        const double sigma = (ROUNDTRIP_BOUNDS[t].bound + 7.5e-3) * sqrt(ww * xx / (double)n);
        void *qw = malloc(ggml_row_bytes(type, n)), *qa = malloc(ggml_row_bytes(at, n));
        cr_assert_eq(seam_quantize_weights(type, w, qw, n), 0);
        cr_assert_eq(seam_quantize_activation(at, x, qa, n), 0);
        double got = seam_vec_dot(EXACT_ORDER_AVX512, type, qw, qa, n);
        cr_assert(fabs(got - exact) <= 5 * sigma, "%s: %.6g vs exact %.6g, %.2g sigma away (sigma %.3g)",
                  ggml_type_name(type), got, exact, fabs(got - exact) / sigma, sigma);
        free(qw), free(qa);
    }
    free(w), free(x);
}
