// test_regressions.c — inputs the fuzzers (tests/fuzz/) found to misbehave,
// kept so that they stay fixed. Each test names the finding; the undefined
// behaviour they guard against is reported by the sanitizer build
// (scripts/sanitize.sh), the results are checked in every build.
#include <criterion/criterion.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "engine/engine.h"
#include "cpu/ops.h"
#include "numeric/exact.h"
#include "format/gguf.h"
#include "helpers.h"
#include "model/model.h"
#include "plan/plan.h"
#include "numeric/quant.h"

// fuzz_gguf: a weight of NaN or infinity (a corrupt file) made the Q8_0
// activation quantiser convert NaN or infinity to int8, which is undefined;
// so did a block whose largest value is subnormal (127 / amax overflows).
Test(regressions, q8_0_quantiser_non_finite_inputs) {
    float x[4 * QK8_0];
    for (int i = 0; i < 4 * QK8_0; i++) x[i] = 0.25f * (float)(i % 9) - 1.0f;
    x[3] = NAN;                                          // block 0: a NaN
    x[QK8_0 + 5] = INFINITY;                             // block 1: +inf
    x[2 * QK8_0 + 7] = -INFINITY;                        // block 2: -inf
    for (int i = 3 * QK8_0; i < 4 * QK8_0; i++) x[i] = (i % 2 ? 1 : -1) * 1e-40f;  // block 3: subnormal
    block_q8_0 y[4];
    seam_quantize_row_q8_0(x, y, 4 * QK8_0);
    for (int b = 0; b < 4; b++)
        for (int j = 0; j < QK8_0; j++) cr_assert(y[b].qs[j] >= -127 && y[b].qs[j] <= 127, "block %d [%d] = %d", b, j, y[b].qs[j]);
    // finite values next to the NaN quantise as they would without it
    const float id = 127.0f / 1.0f;
    cr_assert_eq(y[0].qs[0], (int8_t)nearbyintf(x[0] * id));
    cr_assert_eq(y[0].qs[8], (int8_t)nearbyintf(x[8] * id));
}

// fuzz_gguf, again through attention: exact_expf rounded NaN (a score from a
// corrupt weight) to an int exponent, which is undefined. NaN gives NaN, as
// the vector code it copies does, in both orders; infinities still saturate.
Test(regressions, exact_expf_non_finite) {
    for (int o = 0; o < EXACT_ORDERS; o++) {
        cr_assert(isnan(exact_expf((exact_order)o, NAN)));
        cr_assert(isnan(exact_expf((exact_order)o, -NAN)));
        cr_assert_eq(exact_expf((exact_order)o, INFINITY), INFINITY);
        cr_assert_eq(exact_expf((exact_order)o, -INFINITY), 0.0f);
        cr_assert_float_eq(exact_expf((exact_order)o, 0.0f), 1.0f, 1e-6f);
    }
}

// Overwrites the F32 tensor `name` of a parsed in-memory file with v.
static void poke_f32(gguf_file *f, uint8_t *buf, const char *name, const float *v, int n) {
    const gguf_tensor *t = gguf_find_tensor(f, name);
    cr_assert(t && t->type == GGML_TYPE_F32 && t->n_elems >= (uint64_t)n, "%s: no such F32 tensor", name);
    memcpy(buf + ((const uint8_t *)t->data - buf), v, (size_t)n * sizeof(float));
}

// fuzz_gguf, the same finding end to end: a model whose norm weights are
// NaN, infinite or subnormal runs a forward pass without undefined behaviour
// (the logits are garbage, which is the file's fault, not a crash).
Test(regressions, forward_with_non_finite_norm_weights) {
    static const float bad[] = {NAN, INFINITY, -INFINITY, 1e-40f};
    size_t size;
    uint8_t *buf = test_read_file(SEAM_SOURCE_DIR "/tests/fuzz/corpus/gguf/micro-qwen3.gguf", &size);
    cr_assert(buf, "the micro model seed is missing");
    for (size_t k = 0; k < sizeof bad / sizeof bad[0]; k++) {
        seam_error e = {{0}};
        gguf_file f;
        cr_assert_eq(gguf_parse(&f, buf, size, &e), 0, "%s", e.msg);
        float v[32];
        for (int i = 0; i < 32; i++) v[i] = i % 3 ? bad[k] : 1.0f;
        poke_f32(&f, buf, "blk.0.attn_norm.weight", v, 32);
        poke_f32(&f, buf, "output_norm.weight", v, 32);
        seam_model m;
        cr_assert_eq(model_bind(&m, &f, &e), 0, "%s", e.msg);
        seam_engine eng;
        cr_assert_eq(engine_init(&eng, &m, 2, &e), 0, "%s", e.msg);
        float *logits;
        for (int pos = 0; pos < 2; pos++) cr_assert_eq(engine_forward(&eng, 1, pos, &logits, &e), 0, "%s", e.msg);
        engine_free(&eng);
        model_free(&m);
    }
    free(buf);
}

// fuzz_gguf (out of memory): qwen3moe's feed_forward_length is metadata no
// tensor checks (its layers run experts only), yet it sized the FFN buffers:
// a 20 KiB file asked engine_init for 2 x 4 GiB. Now the expert width does.
Test(regressions, moe_ignores_dense_ffn_length) {
    size_t size;
    uint8_t *buf = test_read_file(SEAM_SOURCE_DIR "/tests/fuzz/corpus/gguf/micro-qwen3moe.gguf", &size);
    cr_assert(buf, "the micro MoE seed is missing");
    seam_error e = {{0}};
    gguf_file f;
    cr_assert_eq(gguf_parse(&f, buf, size, &e), 0, "%s", e.msg);
    const gguf_kv *kv = gguf_find_kv(&f, "qwen3moe.feed_forward_length");
    cr_assert(kv && kv->type == GGUF_TYPE_UINT32);
    const uint32_t huge = 1u << 30;  // the largest model.c accepts
    memcpy(buf + ((const uint8_t *)kv->key.ptr - buf) + kv->key.len + 4, &huge, 4);
    gguf_close(&f);

    cr_assert_eq(gguf_parse(&f, buf, size, &e), 0, "%s", e.msg);
    seam_model m;
    cr_assert_eq(model_bind(&m, &f, &e), 0, "%s", e.msg);
    cr_assert_eq(m.cfg.n_ff, (int)huge);
    seam_plan p;
    const seam_plan_request req = {.gpu_layers = 0, .head = -1, .n_ctx = 2};
    cr_assert_eq(plan_make(&p, &m, &req, &e), 0, "%s", e.msg);
    cr_assert_lt(p.scratch[DEV_CPU], 1u << 20, "scratch of %llu bytes for a 20 KiB model",
                 (unsigned long long)p.scratch[DEV_CPU]);
    seam_engine eng;
    cr_assert_eq(engine_init(&eng, &m, 2, &e), 0, "%s", e.msg);
    float *logits;
    cr_assert_eq(engine_forward(&eng, 1, 0, &logits, &e), 0, "%s", e.msg);
    engine_free(&eng);
    model_free(&m);
    free(buf);
}

// A q8_0 cache on Gemma 3 parted from llama.cpp at one token of a 700-token
// prompt: the GELU table's entry for x = -1.999 (f16 0xbfff). ggml-cpu.c is
// compiled as gnu11, where gcc fuses 1 + a*x*x into one multiply-add, and
// only that entry of the 65536 rounds to another f16 unfused. llama.cpp's
// value, read from its ffn_geglu tensor: -0.045501709 (f16 0xa9d3).
Test(regressions, geglu_table_fuses_as_ggml) {
    float gate = seam_f16_to_f32(0xbfff), up = 1.0f;
    cpu_geglu(&gate, &up, 1);
    cr_assert_eq(gate, seam_f16_to_f32(0xa9d3), "gelu(%.9g) = %.9g, llama.cpp's %.9g", seam_f16_to_f32(0xbfff), gate,
                 seam_f16_to_f32(0xa9d3));
}
