// make_seeds.c — writes the fuzzers' seed corpus (tests/fuzz/corpus/).
//
//   build-fuzz/make_seeds tests/fuzz/corpus
//
// The corpus is committed; this program is how it was made, so that it can be
// remade when the file format or the architectures grow. Seeds are small on
// purpose (libFuzzer mutates faster, and each must fit -max_len):
//   gguf/       one micro model per architecture (hand-sized, with a small
//               vocabulary, every weight type seam computes with somewhere),
//               files of every metadata value type, and truncations;
//   tokenizer/  short texts; the first byte picks the vocabulary (even: BPE
//               qwen3, odd: SentencePiece), as fuzz_tokenizer.c reads it.
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "format/gguf.h"
#include "numeric/quant.h"

static const char *out_dir;

static int write_seed(const char *sub, const char *name, const void *data, size_t n) {
    char path[512];
    snprintf(path, sizeof path, "%s/%s/%s", out_dir, sub, name);
    FILE *f = fopen(path, "wb");
    if (!f || fwrite(data, 1, n, f) != n || fclose(f)) {
        fprintf(stderr, "make_seeds: cannot write %s: %s\n", path, strerror(errno));
        return -1;
    }
    return 0;
}

// ---------------------------------------------------------------- models

// A micro model: the shape and types of one architecture, small enough that
// the fuzzer's forward pass costs microseconds.
typedef struct {
    const char *file;
    const char *arch;
    bool spm;                   // SentencePiece vocabulary, else byte-level BPE
    uint32_t wtype, embd_type;  // projection and embedding weight types
    uint32_t vtype;             // attn_v and ffn_down (Q4_K_M's Q6_K rows), 0: wtype
    int n_layers, n_embd, n_ff, n_heads, n_kv_heads, head_dim;
    bool tied;
    int n_expert;               // qwen3moe: experts per layer (2 of them used), of n_ff each
} micro;

typedef struct {
    char name[64];
    uint32_t type;
    int64_t rows, cols;
    int64_t experts;  // > 0: a 3-D stack of that many (rows, cols) matrices
    float center;     // norms sit around 1, everything else around 0
} tensor;

static uint64_t rng = 0x5eed;
static float uniform(void) {  // [-1, 1)
    rng = rng * 6364136223846793005ull + 1442695040888963407ull;
    return (float)((rng >> 40) * (1.0 / (1 << 23))) - 1.0f;
}

// Token texts: a few words, byte tokens, the control tokens of each family.
static const char *const SPM_TOKENS[] = {
    "<unk>", "<s>", "</s>", "<start_of_turn>", "<end_of_turn>", "<0x0A>", "<0x20>", "<0xE2>", "<0x96>",
    "<0x81>", "\xe2\x96\x81", "h", "e", "l", "o", "w", "r", "d", "he", "ll", "llo", "hello",
    "\xe2\x96\x81hello", "\xe2\x96\x81w", "or", "\xe2\x96\x81world", "wor", "ld", "a", "b", "c", "<mask>"};
static const int32_t SPM_TYPES[] = {2, 3, 3, 3, 3, 6, 6, 6, 6, 6, 1, 1, 1, 1, 1, 1,
                                    1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 4};
static const char *const BPE_TOKENS[] = {
    "h", "e", "l", "o", "w", "r", "d", "\xc4\xa0", "\xc4\x8a", "he", "ll", "llo", "hello", "\xc4\xa0w",
    "or", "\xc4\xa0wor", "ld", "\xc4\xa0world", "1", "2", "3", "'", "s", "!", "<|endoftext|>",
    "<|im_start|>", "<|im_end|>", "<think>"};
static const int32_t BPE_TYPES[] = {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 3, 3, 3, 4};
static const char *const BPE_MERGES[] = {"h e", "l l", "ll o", "he llo", "\xc4\xa0 w", "o r",
                                         "\xc4\xa0w or", "l d", "\xc4\xa0wor ld"};
#define COUNT(a) (sizeof a / sizeof a[0])

static void vocab_kvs(gguf_writer *w, bool spm) {
    if (spm) {
        float scores[COUNT(SPM_TOKENS)];
        for (size_t i = 0; i < COUNT(SPM_TOKENS); i++) scores[i] = -(float)i;
        gguf_w_str(w, "tokenizer.ggml.model", "llama");
        gguf_w_arr_str(w, "tokenizer.ggml.tokens", SPM_TOKENS, COUNT(SPM_TOKENS));
        gguf_w_arr_f32(w, "tokenizer.ggml.scores", scores, COUNT(SPM_TOKENS));
        gguf_w_arr_i32(w, "tokenizer.ggml.token_type", SPM_TYPES, COUNT(SPM_TYPES));
        gguf_w_u32(w, "tokenizer.ggml.bos_token_id", 1);
        gguf_w_u32(w, "tokenizer.ggml.eos_token_id", 2);
        gguf_w_u32(w, "tokenizer.ggml.unknown_token_id", 0);
        gguf_w_bool(w, "tokenizer.ggml.add_bos_token", true);
        gguf_w_bool(w, "tokenizer.ggml.add_eos_token", false);
        gguf_w_bool(w, "tokenizer.ggml.add_space_prefix", true);
    } else {
        gguf_w_str(w, "tokenizer.ggml.model", "gpt2");
        gguf_w_str(w, "tokenizer.ggml.pre", "qwen2");
        gguf_w_arr_str(w, "tokenizer.ggml.tokens", BPE_TOKENS, COUNT(BPE_TOKENS));
        gguf_w_arr_i32(w, "tokenizer.ggml.token_type", BPE_TYPES, COUNT(BPE_TYPES));
        gguf_w_arr_str(w, "tokenizer.ggml.merges", BPE_MERGES, COUNT(BPE_MERGES));
        gguf_w_u32(w, "tokenizer.ggml.eos_token_id", 26);
        gguf_w_u32(w, "tokenizer.ggml.bos_token_id", 24);
        gguf_w_bool(w, "tokenizer.ggml.add_bos_token", false);
    }
}

// A K type needs rows of 256: shorter rows fall back to Q8_0, as Q4_K_M's do.
static void add(tensor *ts, int *n, const char *name, uint32_t type, int64_t rows, int64_t cols, float center) {
    uint32_t block_elems;
    ggml_type_layout(type, &block_elems, NULL);
    if (cols % block_elems != 0) type = GGML_TYPE_Q8_0;
    tensor *t = &ts[(*n)++];
    snprintf(t->name, sizeof t->name, "%s", name);
    t->type = type, t->rows = rows, t->cols = cols, t->experts = 0, t->center = center;
}

// Serialises a micro model into memory; *size bytes at the returned pointer.
static uint8_t *build_micro(const micro *m, size_t *size) {
    const int E = m->n_embd, F = m->n_ff;
    const int64_t q_dim = (int64_t)m->n_heads * m->head_dim, kv_dim = (int64_t)m->n_kv_heads * m->head_dim;
    const int64_t n_vocab = m->spm ? (int64_t)COUNT(SPM_TOKENS) : (int64_t)COUNT(BPE_TOKENS);
    const bool gemma = !strcmp(m->arch, "gemma3"), qwen2 = !strcmp(m->arch, "qwen2");
    const bool qk_norm = gemma || !strncmp(m->arch, "qwen3", 5);
    const uint32_t vtype = m->vtype ? m->vtype : m->wtype;
    tensor ts[64];
    int n = 0;
    char name[64];
    add(ts, &n, "token_embd.weight", m->embd_type, n_vocab, E, 0);
    for (int il = 0; il < m->n_layers; il++) {
#define T(suffix, type, rows, cols, c) (snprintf(name, sizeof name, "blk.%d." suffix, il), add(ts, &n, name, type, rows, cols, c))
        T("attn_norm.weight", GGML_TYPE_F32, 1, E, 1);
        T("attn_q.weight", m->wtype, q_dim, E, 0);
        T("attn_k.weight", m->wtype, kv_dim, E, 0);
        T("attn_v.weight", vtype, kv_dim, E, 0);
        T("attn_output.weight", m->wtype, E, q_dim, 0);
        if (qwen2) {
            T("attn_q.bias", GGML_TYPE_F32, 1, q_dim, 0);
            T("attn_k.bias", GGML_TYPE_F32, 1, kv_dim, 0);
            T("attn_v.bias", GGML_TYPE_F32, 1, kv_dim, 0);
        }
        if (qk_norm) {
            T("attn_q_norm.weight", GGML_TYPE_F32, 1, m->head_dim, 1);
            T("attn_k_norm.weight", GGML_TYPE_F32, 1, m->head_dim, 1);
        }
        if (gemma) {
            T("post_attention_norm.weight", GGML_TYPE_F32, 1, E, 1);
            T("post_ffw_norm.weight", GGML_TYPE_F32, 1, E, 1);
        }
        T("ffn_norm.weight", GGML_TYPE_F32, 1, E, 1);
        if (m->n_expert) {
            T("ffn_gate_inp.weight", GGML_TYPE_F32, m->n_expert, E, 0);
            T("ffn_gate_exps.weight", m->wtype, F, E, 0);
            ts[n - 1].experts = m->n_expert;
            T("ffn_up_exps.weight", m->wtype, F, E, 0);
            ts[n - 1].experts = m->n_expert;
            T("ffn_down_exps.weight", vtype, E, F, 0);
            ts[n - 1].experts = m->n_expert;
        } else {
            T("ffn_gate.weight", m->wtype, F, E, 0);
            T("ffn_up.weight", m->wtype, F, E, 0);
            T("ffn_down.weight", vtype, E, F, 0);
        }
#undef T
    }
    add(ts, &n, "output_norm.weight", GGML_TYPE_F32, 1, E, 1);
    if (!m->tied) add(ts, &n, "output.weight", m->wtype, n_vocab, E, 0);

    gguf_writer *w = gguf_writer_new(GGUF_DEFAULT_ALIGNMENT);
    char key[96];
#define AK(suffix) (snprintf(key, sizeof key, "%s." suffix, m->arch), key)
    gguf_w_str(w, "general.architecture", m->arch);
    gguf_w_str(w, "general.name", m->file);
    gguf_w_u32(w, AK("block_count"), (uint32_t)m->n_layers);
    gguf_w_u32(w, AK("context_length"), 64);
    gguf_w_u32(w, AK("embedding_length"), (uint32_t)E);
    gguf_w_u32(w, AK("feed_forward_length"), (uint32_t)F);
    gguf_w_u32(w, AK("attention.head_count"), (uint32_t)m->n_heads);
    gguf_w_u32(w, AK("attention.head_count_kv"), (uint32_t)m->n_kv_heads);
    gguf_w_u32(w, AK("attention.key_length"), (uint32_t)m->head_dim);
    gguf_w_u32(w, AK("attention.value_length"), (uint32_t)m->head_dim);
    gguf_w_f32(w, AK("attention.layer_norm_rms_epsilon"), 1e-6f);
    gguf_w_f32(w, AK("rope.freq_base"), 10000.0f);
    if (gemma) {
        gguf_w_u32(w, AK("attention.sliding_window"), 4);
        gguf_w_u32(w, AK("attention.sliding_window_pattern"), 2);
        gguf_w_f32(w, AK("rope.freq_base_swa"), 10000.0f);
        gguf_w_f32(w, AK("final_logit_softcapping"), 30.0f);
    }
    if (!strcmp(m->arch, "llama")) {
        gguf_w_str(w, AK("rope.scaling.type"), "linear");
        gguf_w_f32(w, AK("rope.scaling.factor"), 2.0f);
        gguf_w_u32(w, AK("rope.dimension_count"), (uint32_t)m->head_dim / 2);
    }
    if (m->n_expert) {
        gguf_w_u32(w, AK("expert_count"), (uint32_t)m->n_expert);
        gguf_w_u32(w, AK("expert_used_count"), 2);
        gguf_w_u32(w, AK("expert_feed_forward_length"), (uint32_t)F);
    }
#undef AK
    vocab_kvs(w, m->spm);
    for (int i = 0; i < n; i++) {
        const uint64_t ne[3] = {(uint64_t)ts[i].cols, (uint64_t)ts[i].rows, (uint64_t)ts[i].experts};
        gguf_w_tensor(w, ts[i].name, ts[i].type, ts[i].experts ? 3 : ts[i].rows == 1 ? 1 : 2, ne);
    }

    char *buf = NULL;
    FILE *out = open_memstream(&buf, size);
    seam_error err = {{0}};
    int rc = gguf_w_begin(w, out, &err);
    for (int i = 0; i < n && rc == 0; i++) {
        const tensor *t = &ts[i];
        const uint64_t row_bytes = ggml_row_bytes(t->type, (uint64_t)t->cols);
        float *x = malloc((size_t)t->cols * sizeof *x);
        uint8_t *q = malloc(row_bytes);
        const int64_t rows = t->rows * (t->experts ? t->experts : 1);
        for (int64_t r = 0; r < rows && rc == 0; r++) {
            for (int64_t c = 0; c < t->cols; c++) x[c] = t->center + uniform() / sqrtf((float)t->cols);
            rc = seam_quantize_weights(t->type, x, q, t->cols) ||
                 gguf_w_data(w, q, row_bytes, &err);
        }
        free(x);
        free(q);
    }
    if (rc == 0) rc = gguf_w_finish(w, &err);
    fclose(out);
    gguf_writer_free(w);
    if (rc) {
        fprintf(stderr, "make_seeds: %s: %s\n", m->file, err.msg);
        free(buf);
        return NULL;
    }
    return (uint8_t *)buf;
}

// ---------------------------------------------------------------- header-only files

// Writes a file that has only metadata (made by fill) and no tensors.
static int metadata_seed(const char *name, void (*fill)(gguf_writer *w), uint32_t alignment) {
    gguf_writer *w = gguf_writer_new(alignment);
    fill(w);
    char *buf = NULL;
    size_t size = 0;
    FILE *out = open_memstream(&buf, &size);
    seam_error err = {{0}};
    int rc = gguf_w_begin(w, out, &err) || gguf_w_finish(w, &err);
    fclose(out);
    gguf_writer_free(w);
    if (!rc) rc = write_seed("gguf", name, buf, size);
    else fprintf(stderr, "make_seeds: %s: %s\n", name, err.msg);
    free(buf);
    return rc;
}

static void every_type(gguf_writer *w) {
    static const float f[] = {1.5f, -2.0f, 0.0f};
    static const int32_t i[] = {-1, 0, 7, 1 << 30};
    static const char *const s[] = {"a", "", "\n\"\\\x7f"};
    gguf_w_u32(w, "general.u32", 42);
    gguf_w_i32(w, "general.i32", -42);
    gguf_w_f32(w, "general.f32", 3.25f);
    gguf_w_bool(w, "general.bool", true);
    gguf_w_str(w, "general.str", "seam");
    gguf_w_arr_f32(w, "general.arr_f32", f, COUNT(f));
    gguf_w_arr_i32(w, "general.arr_i32", i, COUNT(i));
    gguf_w_arr_str(w, "general.arr_str", s, COUNT(s));
    gguf_w_arr_i32(w, "general.empty", NULL, 0);
}

static void spm_vocab_only(gguf_writer *w) { vocab_kvs(w, true); }
static void bpe_vocab_only(gguf_writer *w) { vocab_kvs(w, false); }

// ---------------------------------------------------------------- texts

static const char *const TEXTS[] = {
    "hello world",
    "Hello, World! It's 2024; we've 1234567 reasons.",
    "<|im_start|>user\nhello<|im_end|>\n<|im_start|>assistant\n<think>",
    "<start_of_turn>user\nhello world<end_of_turn>\n<s></s><unk><mask>",
    "  leading   and trailing spaces   \r\n\r\n\tx\n\n",
    "int main(void) { return a[i] != b->c && x <= 0x1F; }",
    "\xe4\xbd\xa0\xe5\xa5\xbd\xe4\xb8\x96\xe7\x95\x8c \xf0\x9f\x98\x80 caf\xc3\xa9 na\xc3\xafve \xe2\x96\x81x",
    "\xff\xfe\xc3\x28\xa0\xa1\xe2\x82\x28\xf0\x90\x28\xbc\xf8\xa1\xa1\xa1\xa1\xed\xa0\x80\xc0\xaf",
    "I'M YOU'RE THEY'LL WE'D SHE'S don't 've",
    "\xd9\x85\xd8\xb1\xd8\xad\xd8\xa8\xd8\xa7 \xe0\xa4\xa8\xe0\xa4\xae\xe0\xa4\xb8\xe0\xa5\x8d\xe0\xa4\xa4\xe0\xa5\x87 \xe1\x84\x80\xe1\x85\xa1",
    "12345678901234567890 3.14159 1,000,000",
};

int main(int argc, char **argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: make_seeds CORPUS_DIR\n");
        return 2;
    }
    out_dir = argv[1];
    char path[512];
    for (int i = 0; i < 3; i++) {
        snprintf(path, sizeof path, "%s%s", out_dir, i == 0 ? "" : i == 1 ? "/gguf" : "/tokenizer");
        mkdir(path, 0755);
    }

    // Every weight type seam computes with appears somewhere; the K types need
    // rows of 256.
    static const micro MODELS[] = {
        {"micro-llama.gguf", "llama", true, GGML_TYPE_F32, GGML_TYPE_Q8_0, 0, 1, 32, 32, 2, 2, 16, false},
        {"micro-qwen2.gguf", "qwen2", false, GGML_TYPE_Q5_0, GGML_TYPE_F16, 0, 1, 32, 64, 2, 1, 16, true},
        {"micro-qwen3.gguf", "qwen3", false, GGML_TYPE_Q8_0, GGML_TYPE_BF16, GGML_TYPE_F16, 1, 32, 32, 4, 2, 8, true},
        {"micro-gemma3.gguf", "gemma3", true, GGML_TYPE_Q4_0, GGML_TYPE_Q8_0, 0, 2, 32, 32, 2, 1, 16, true},
        {"micro-ktypes.gguf", "qwen3", false, GGML_TYPE_Q4_K, GGML_TYPE_Q6_K, GGML_TYPE_Q5_K, 1, 256, 32, 1, 1, 32, false},
        {"micro-qwen3moe.gguf", "qwen3moe", false, GGML_TYPE_Q8_0, GGML_TYPE_Q8_0, 0, 1, 32, 32, 2, 1, 16, true, 4},
    };
    int rc = 0;
    for (size_t i = 0; i < COUNT(MODELS) && rc == 0; i++) {
        size_t size;
        uint8_t *buf = build_micro(&MODELS[i], &size);
        if (!buf) return 1;
        rc = write_seed("gguf", MODELS[i].file, buf, size);
        // Truncations of the first model: in the header, the metadata, the
        // tensor table and the data.
        static const double CUTS[] = {0.002, 0.1, 0.5, 0.9, 0.999};
        for (size_t k = 0; i == 0 && k < COUNT(CUTS) && rc == 0; k++) {
            char name[64];
            snprintf(name, sizeof name, "truncated-%zu.gguf", k);
            rc = write_seed("gguf", name, buf, (size_t)(CUTS[k] * (double)size));
        }
        free(buf);
    }
    if (rc || metadata_seed("every-type.gguf", every_type, 32) ||
        metadata_seed("aligned-64.gguf", every_type, 64) ||
        metadata_seed("vocab-spm.gguf", spm_vocab_only, 32) ||
        metadata_seed("vocab-bpe.gguf", bpe_vocab_only, 32))
        return 1;

    for (size_t i = 0; i < COUNT(TEXTS); i++) {
        // Each text once per vocabulary: the first byte selects it.
        for (int v = 0; v < 2; v++) {
            char name[32], buf[512];
            size_t n = strlen(TEXTS[i]);
            buf[0] = (char)v;
            memcpy(buf + 1, TEXTS[i], n);
            snprintf(name, sizeof name, "text-%02zu-%s", i, v ? "spm" : "bpe");
            if (write_seed("tokenizer", name, buf, n + 1)) return 1;
        }
    }
    return 0;
}
