// test_tokenizer.c — seam's tokenizer against llama.cpp's, through the
// fixtures in tests/golden/ (written by tools/ref_tokenize.py), and against
// hostile vocabularies and input; and the chat template families told apart
// as llama.cpp tells them.
//
// A fixture names its GGUF and that file's SHA-256. The small vocabularies
// (tests/golden/vocab-*.gguf) are committed; the real ones are optional: a
// fixture whose model is absent skips and says so, one whose model differs
// fails and asks for the fixtures to be regenerated.
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "text/chat.h"
#include "format/gguf.h"
#include "helpers.h"
#include "text/tokenizer.h"

// ---------------------------------------------------------------------------
// Fixtures

static size_t unhex(const char *hex, uint8_t *out) {  // "-" is empty
    size_t n = 0;
    if (strcmp(hex, "-") == 0) return 0;
    for (; hex[0] && hex[1]; hex += 2) {
        unsigned v;
        sscanf(hex, "%2x", &v);
        out[n++] = (uint8_t)v;
    }
    return n;
}

// The next space-separated field of *line, NUL-terminated in place.
static char *field(char **line) {
    char *s = *line;
    while (*s == ' ') s++;
    char *end = s + strcspn(s, " ");
    *line = *end ? end + 1 : end;
    *end = '\0';
    return s;
}

static int piece_of(const seam_tokenizer *t, int id, bool special, uint8_t *buf, size_t cap) {
    int n = tokenizer_piece(t, id, (char *)buf, (int)cap, special);
    cr_assert(n >= 0, "piece of %d needs %d bytes, more than the test's %zu", id, -n, cap);
    return n;
}

// SHA-256 over every id of u32le(piece length) + piece, as the fixture's.
static void pieces_digest(const seam_tokenizer *t, bool special, char out[65]) {
    static uint8_t buf[1 << 16];
    test_sha256 s;
    test_sha256_init(&s);
    for (int id = 0; id < tokenizer_n_vocab(t); id++) {
        uint32_t n = (uint32_t)piece_of(t, id, special, buf, sizeof buf);
        uint8_t len[4] = {(uint8_t)n, (uint8_t)(n >> 8), (uint8_t)(n >> 16), (uint8_t)(n >> 24)};
        test_sha256_update(&s, len, 4);
        test_sha256_update(&s, buf, n);
    }
    test_sha256_hex(&s, out);
}

static bool same_ids(const int32_t *a, int na, const int32_t *b, int nb) {
    return na == nb && (na == 0 || memcmp(a, b, (size_t)na * sizeof *a) == 0);
}

static void print_ids(const char *what, const int32_t *ids, int n) {
    fprintf(stderr, "    %s (%d):", what, n);
    for (int i = 0; i < n && i < 64; i++) fprintf(stderr, " %d", ids[i]);
    fprintf(stderr, n > 64 ? " ...\n" : "\n");
}

static seam_tokenizer *load_path(const char *path) {
    gguf_file f;
    seam_error e = {{0}};
    seam_tokenizer *t = NULL;
    cr_assert_eq(gguf_open(&f, path, &e), 0, "%s", e.msg);
    cr_assert_eq(tokenizer_load(&t, &f, &e), 0, "%s: %s", path, e.msg);
    gguf_close(&f);
    return t;
}

// Resolves a fixture's model into path (test_require_input when it is absent).
static void fixture_model(const char *model, const char *fixture, char *path, size_t cap) {
    snprintf(path, cap, model[0] == '/' ? "%s" : SEAM_SOURCE_DIR "/%s", model);
    test_require_input(path, fixture, "models/get-default-model.sh or models/get-vocabs.sh");
}

// Checks everything one fixture records against seam's tokenizer.
static void check_fixture(const char *name) {
    char fx[4096], model_path[4096];
    snprintf(fx, sizeof fx, SEAM_SOURCE_DIR "/tests/golden/tokenize-%s.txt", name);
    size_t size;
    char *text = (char *)test_read_file(fx, &size);
    cr_assert(text, "cannot read %s", fx);
    text = realloc(text, size + 1);
    text[size] = '\0';

    seam_tokenizer *t = NULL;
    uint8_t *input = malloc(size + 1), *want = malloc(size + 1), *got = malloc(1 << 16);
    size_t input_len = 0;
    int32_t *want_ids = malloc((size + 1) * sizeof *want_ids);
    int n_texts = 0, n_encodings = 0, n_pieces = 0, failures = 0;
    for (char *line = text, *next; line && *line; line = next) {
        next = strchr(line, '\n');
        if (next) *next++ = '\0';
        if (line[0] == '#') continue;
        char *rest = line, *kind = field(&rest);
        if (strcmp(kind, "model") == 0) {
            fixture_model(field(&rest), fx, model_path, sizeof model_path);
        } else if (strcmp(kind, "sha256") == 0) {
            char have[65];
            cr_assert_eq(test_sha256_file(model_path, have), 0, "cannot read %s", model_path);
            cr_assert_str_eq(have, field(&rest), "%s changed since %s was written: regenerate fixtures (the command is in its header)",
                             model_path, fx);
            t = load_path(model_path);
        } else if (strcmp(kind, "vocab") == 0) {
            int n = atoi(field(&rest)), bos = atoi(field(&rest)), eos = atoi(field(&rest));
            cr_assert_eq(tokenizer_n_vocab(t), n);
            cr_expect_eq(tokenizer_bos(t), bos, "BOS: seam %d, llama.cpp %d", tokenizer_bos(t), bos);
            cr_expect_eq(tokenizer_eos(t), eos, "EOS: seam %d, llama.cpp %d", tokenizer_eos(t), eos);
        } else if (strcmp(kind, "eog") == 0) {
            int n = atoi(field(&rest)), n_seam = 0;
            for (int i = 0; i < n; i++) {
                int id = atoi(field(&rest));
                cr_expect(tokenizer_is_eog(t, id), "llama.cpp ends generation at %d, seam does not", id);
            }
            for (int id = 0; id < tokenizer_n_vocab(t); id++) n_seam += tokenizer_is_eog(t, id);
            cr_expect_eq(n_seam, n, "seam has %d end-of-generation tokens, llama.cpp %d", n_seam, n);
        } else if (strcmp(kind, "pieces") == 0) {
            for (int special = 0; special < 2; special++) {
                char have[65];
                pieces_digest(t, special, have);
                cr_expect_str_eq(have, field(&rest), "the pieces (render_special=%d) of some token differ from llama.cpp's", special);
            }
        } else if (strcmp(kind, "text") == 0) {
            input_len = unhex(field(&rest), input);
            n_texts++;
        } else if (strcmp(kind, "ids") == 0) {
            int flags = atoi(field(&rest)), n = atoi(field(&rest));
            for (int i = 0; i < n; i++) want_ids[i] = atoi(field(&rest));
            int32_t *ids;
            int n_ids;
            seam_error e = {{0}};
            cr_assert_eq(tokenizer_encode(t, (const char *)input, input_len, flags & 2, flags & 1, &ids, &n_ids, &e), 0, "%s", e.msg);
            if (!same_ids(ids, n_ids, want_ids, n)) {
                fprintf(stderr, "%s: text '%.*s' add_special=%d parse_special=%d\n", name, (int)input_len,
                        (const char *)input, flags >> 1, flags & 1);
                print_ids("llama.cpp", want_ids, n);
                print_ids("seam", ids, n_ids);
                failures++;
            }
            free(ids);
            n_encodings++;
        } else if (strcmp(kind, "piece") == 0) {
            int id = atoi(field(&rest));
            for (int special = 0; special < 2; special++) {
                size_t n = unhex(field(&rest), want);
                int have = piece_of(t, id, special, got, 1 << 16);
                cr_expect(have == (int)n && memcmp(got, want, n) == 0, "%s: piece of %d (render_special=%d) differs", name, id, special);
            }
            n_pieces++;
        }
    }
    cr_assert(n_texts > 0, "%s holds no test strings", fx);
    cr_expect_eq(failures, 0, "%s: %d of %d encodings differ from llama.cpp's (listed above)", name, failures, n_encodings);
    cr_log_info("%s: %d strings, %d encodings, %d pieces checked against llama.cpp", name, n_texts, n_encodings, n_pieces);
    tokenizer_free(t);
    free(text);
    free(input);
    free(want);
    free(got);
    free(want_ids);
}

Test(tokenizer_golden, gemma3_spm) { check_fixture("gemma3"); }
Test(tokenizer_golden, gemma3_small_space_prefix) { check_fixture("spm-8k"); }
Test(tokenizer_golden, qwen3_small_qwen2_pre) { check_fixture("qwen3-5k"); }
Test(tokenizer_golden, llama3_small_llama3_pre) { check_fixture("llama3-5k"); }
Test(tokenizer_golden, qwen3_small_gpt2_pre) { check_fixture("gpt2-5k"); }
Test(tokenizer_golden, qwen3_small_default_pre) { check_fixture("default-5k"); }
Test(tokenizer_golden, qwen3_full) { check_fixture("qwen3-vocab"); }
Test(tokenizer_golden, llama3_full) { check_fixture("llama3.2-vocab"); }

// ---------------------------------------------------------------------------
// Properties over random input, on every vocabulary at hand

static const struct {
    const char *path;
    bool round_trip;  // false: the trimmed SPM vocabulary has no '▁' token, so a space comes back as its bytes
} VOCABS[] = {
    {"tests/golden/vocab-qwen3-5k.gguf", true},   {"tests/golden/vocab-llama3-5k.gguf", true},
    {"tests/golden/vocab-default-5k.gguf", true}, {"tests/golden/vocab-spm-8k.gguf", false},
    {"models/gemma-3-270m-q4_k_m.gguf", true},
};

// A vocabulary of VOCABS; NULL (test_have_input) when an installed one is
// absent, while the committed ones must be there.
static seam_tokenizer *load_vocab(const char *rel, const char *test) {
    char path[4096];
    snprintf(path, sizeof path, SEAM_SOURCE_DIR "/%s", rel);
    if (strncmp(rel, "models/", 7) == 0 && !test_have_input(path, test, "models/get-default-model.sh")) return NULL;
    return load_path(path);
}

// Concatenated pieces of text's ids: streaming decode, one piece at a time.
static size_t decode(const seam_tokenizer *t, const int32_t *ids, int n, char *out, size_t cap) {
    size_t len = 0;
    for (int i = 0; i < n; i++) {
        int k = tokenizer_piece(t, ids[i], out + len, (int)(cap - len), false);
        cr_assert(k >= 0, "piece of %d does not fit", ids[i]);
        len += (size_t)k;
    }
    return len;
}

// Random valid UTF-8 from scripts that exercise every pre-tokenizer branch.
static size_t random_utf8(uint64_t *rng, char *out, size_t max_chars) {
    static const uint32_t ranges[][2] = {
        {' ', '~'}, {' ', ' '}, {'\n', '\n'}, {'0', '9'}, {'\'', '\''}, {0xA0, 0x17F},
        {0xAC00, 0xD7A3}, {0x4E00, 0x9FFF}, {0x3040, 0x30FF}, {0x0400, 0x04FF}, {0x1F300, 0x1F64F}, {0x300, 0x36F},
    };
    size_t n = 0, chars = 1 + test_rng_next(rng) % max_chars;
    for (size_t i = 0; i < chars; i++) {
        const uint32_t *r = ranges[test_rng_next(rng) % (sizeof ranges / sizeof *ranges)];
        uint32_t cp = r[0] + (uint32_t)(test_rng_next(rng) % (r[1] - r[0] + 1));
        if (cp < 0x80) {
            out[n++] = (char)cp;
        } else if (cp < 0x800) {
            out[n++] = (char)(0xC0 | (cp >> 6)), out[n++] = (char)(0x80 | (cp & 0x3F));
        } else if (cp < 0x10000) {
            out[n++] = (char)(0xE0 | (cp >> 12)), out[n++] = (char)(0x80 | ((cp >> 6) & 0x3F));
            out[n++] = (char)(0x80 | (cp & 0x3F));
        } else {
            out[n++] = (char)(0xF0 | (cp >> 18)), out[n++] = (char)(0x80 | ((cp >> 12) & 0x3F));
            out[n++] = (char)(0x80 | ((cp >> 6) & 0x3F)), out[n++] = (char)(0x80 | (cp & 0x3F));
        }
    }
    return n;
}

// Valid UTF-8 comes back byte for byte from the pieces, even where a
// character is split over byte tokens (the pieces are then partial UTF-8).
Test(tokenizer, round_trip_random_text) {
    int n_vocabs = 0;
    for (size_t v = 0; v < sizeof VOCABS / sizeof *VOCABS; v++) {
        if (!VOCABS[v].round_trip) continue;
        seam_tokenizer *t = load_vocab(VOCABS[v].path, "the round trip of random text");
        if (!t) continue;
        n_vocabs++;
        uint64_t rng = 42 + v;
        char text[512], back[4096];
        for (int iter = 0; iter < 300; iter++) {
            size_t n = random_utf8(&rng, text, 100);
            int32_t *ids;
            int n_ids;
            seam_error e = {{0}};
            cr_assert_eq(tokenizer_encode(t, text, n, false, false, &ids, &n_ids, &e), 0, "%s", e.msg);
            size_t m = decode(t, ids, n_ids, back, sizeof back);
            cr_assert(m == n && memcmp(back, text, n) == 0, "%s: '%.*s' came back as '%.*s'", VOCABS[v].path, (int)n, text, (int)m, back);
            free(ids);
        }
        tokenizer_free(t);
    }
    cr_assert_geq(n_vocabs, 3, "round trips on %d vocabularies: the three committed ones are missing", n_vocabs);
    cr_log_info("round trips on %d vocabularies", n_vocabs);
}

// Arbitrary bytes (mostly invalid UTF-8, NULs, stray special-token text) never
// crash, and every id is in the vocabulary.
Test(tokenizer, random_bytes_are_safe) {
    static const char *const snippets[] = {"<|im_end|>", "<start_of_turn>", "<0xFF>", "'s", "\xe2\x96\x81", "  ", "\n\n"};
    for (size_t v = 0; v < sizeof VOCABS / sizeof *VOCABS; v++) {
        seam_tokenizer *t = load_vocab(VOCABS[v].path, "the encoding of random bytes");
        if (!t) continue;
        uint64_t rng = 7 + v;
        char text[256];
        for (int iter = 0; iter < 300; iter++) {
            size_t n = 0, len = test_rng_next(&rng) % 200;
            while (n < len) {
                if (test_rng_next(&rng) % 8 == 0) {
                    const char *s = snippets[test_rng_next(&rng) % (sizeof snippets / sizeof *snippets)];
                    size_t k = strlen(s) < len - n ? strlen(s) : len - n;
                    memcpy(text + n, s, k);
                    n += k;
                } else {
                    text[n++] = (char)(test_rng_next(&rng) & 0xFF);
                }
            }
            for (int flags = 0; flags < 4; flags++) {
                int32_t *ids;
                int n_ids;
                seam_error e = {{0}};
                cr_assert_eq(tokenizer_encode(t, text, n, flags & 2, flags & 1, &ids, &n_ids, &e), 0, "%s", e.msg);
                for (int i = 0; i < n_ids; i++) cr_assert(ids[i] >= 0 && ids[i] < tokenizer_n_vocab(t));
                free(ids);
            }
        }
        tokenizer_free(t);
    }
}

Test(tokenizer, piece_reports_the_size_it_needs) {
    seam_tokenizer *t = load_vocab("tests/golden/vocab-qwen3-5k.gguf", "piece sizes");
    int32_t *ids;
    int n_ids;
    seam_error e = {{0}};
    cr_assert_eq(tokenizer_encode(t, "<|im_start|>", 12, false, true, &ids, &n_ids, &e), 0, "%s", e.msg);
    cr_assert_eq(n_ids, 1);
    char buf[16];
    cr_expect_eq(tokenizer_piece(t, ids[0], NULL, 0, true), -12);
    cr_expect_eq(tokenizer_piece(t, ids[0], buf, 11, true), -12);
    cr_expect_eq(tokenizer_piece(t, ids[0], buf, 12, true), 12);
    cr_expect_eq(memcmp(buf, "<|im_start|>", 12), 0);
    cr_expect_eq(tokenizer_piece(t, ids[0], buf, sizeof buf, false), 0, "control tokens render as nothing");
    cr_expect_eq(tokenizer_piece(t, -1, buf, sizeof buf, true), 0);
    cr_expect_eq(tokenizer_piece(t, tokenizer_n_vocab(t), buf, sizeof buf, true), 0);
    cr_expect(!tokenizer_is_eog(t, -1) && !tokenizer_is_eog(t, tokenizer_n_vocab(t)));
    free(ids);
    tokenizer_free(t);
}

// ---------------------------------------------------------------------------
// Hostile vocabularies, written with seam's GGUF writer

typedef void (*kv_writer)(gguf_writer *w);

// Writes a vocabulary-only GGUF and loads it: 0 and *t, or -1 and e.
static int load_written(kv_writer kvs, seam_tokenizer **t, seam_error *e) {
    const char *path = test_path("tokenizer-hostile.gguf");
    gguf_writer *w = gguf_writer_new(32);
    cr_assert(w);
    kvs(w);
    FILE *out = fopen(path, "wb");
    cr_assert(out);
    cr_assert_eq(gguf_w_begin(w, out, e), 0, "%s", e->msg);
    cr_assert_eq(gguf_w_finish(w, e), 0, "%s", e->msg);
    fclose(out);
    gguf_writer_free(w);
    gguf_file f;
    cr_assert_eq(gguf_open(&f, path, e), 0, "%s", e->msg);
    int rc = tokenizer_load(t, &f, e);
    gguf_close(&f);
    return rc;
}

static void expect_refused(kv_writer kvs, const char *words) {
    seam_tokenizer *t = (seam_tokenizer *)1;
    seam_error e = {{0}};
    cr_expect_eq(load_written(kvs, &t, &e), -1, "a hostile vocabulary loaded (want an error with '%s')", words);
    cr_expect_null(t);
    cr_expect(strstr(e.msg, words), "error '%s' does not mention '%s'", e.msg, words);
}

// A small SentencePiece vocabulary: control tokens, two words, bytes for a-c.
static const char *const SPM_TOKENS[] = {"<unk>", "<s>", "</s>", "\xe2\x96\x81", "a", "b", "ab",
                                         "\xe2\x96\x81" "ab", "<0x61>", "<0x62>", "<0x63>", "<0xC3>", "<0xA9>"};
static const int32_t SPM_TYPES[] = {2, 3, 3, 1, 1, 1, 1, 1, 6, 6, 6, 6, 6};
static const float SPM_SCORES[] = {0, 0, 0, -1, -2, -2, -3, -4, 0, 0, 0, 0, 0};
#define N_SPM (sizeof SPM_TOKENS / sizeof *SPM_TOKENS)

static void spm_vocab(gguf_writer *w) {
    gguf_w_arr_str(w, "tokenizer.ggml.tokens", SPM_TOKENS, N_SPM);
    gguf_w_arr_f32(w, "tokenizer.ggml.scores", SPM_SCORES, N_SPM);
    gguf_w_arr_i32(w, "tokenizer.ggml.token_type", SPM_TYPES, N_SPM);
}
static void spm_base(gguf_writer *w) {
    gguf_w_str(w, "tokenizer.ggml.model", "llama");
    spm_vocab(w);
}

static void no_model(gguf_writer *w) { spm_vocab(w); }
static void bert_model(gguf_writer *w) {
    gguf_w_str(w, "tokenizer.ggml.model", "bert");
    spm_vocab(w);
}
static void no_tokens(gguf_writer *w) { gguf_w_str(w, "tokenizer.ggml.model", "llama"); }
static void tokens_not_strings(gguf_writer *w) {
    gguf_w_str(w, "tokenizer.ggml.model", "llama");
    gguf_w_arr_f32(w, "tokenizer.ggml.tokens", SPM_SCORES, N_SPM);
}
static void short_types(gguf_writer *w) {
    gguf_w_str(w, "tokenizer.ggml.model", "llama");
    gguf_w_arr_str(w, "tokenizer.ggml.tokens", SPM_TOKENS, N_SPM);
    gguf_w_arr_i32(w, "tokenizer.ggml.token_type", SPM_TYPES, N_SPM - 1);
}
static void scores_as_strings(gguf_writer *w) {
    gguf_w_str(w, "tokenizer.ggml.model", "llama");
    gguf_w_arr_str(w, "tokenizer.ggml.tokens", SPM_TOKENS, N_SPM);
    gguf_w_arr_str(w, "tokenizer.ggml.scores", SPM_TOKENS, N_SPM);
}
static void duplicate_tokens(gguf_writer *w) {
    static const char *const dup[] = {"<unk>", "a", "b", "a"};
    gguf_w_str(w, "tokenizer.ggml.model", "llama");
    gguf_w_arr_str(w, "tokenizer.ggml.tokens", dup, 4);
}
static void bos_flag_not_bool(gguf_writer *w) {
    spm_base(w);
    gguf_w_u32(w, "tokenizer.ggml.add_bos_token", 1);
}
static void bos_id_negative(gguf_writer *w) {
    spm_base(w);
    gguf_w_i32(w, "tokenizer.ggml.bos_token_id", -5);
}
static void phi3_name(gguf_writer *w) {
    spm_base(w);
    gguf_w_str(w, "general.name", "Phi-3 mini");
}
static void gpt2_no_merges(gguf_writer *w) {
    gguf_w_str(w, "tokenizer.ggml.model", "gpt2");
    gguf_w_str(w, "tokenizer.ggml.pre", "qwen2");
    gguf_w_arr_str(w, "tokenizer.ggml.tokens", SPM_TOKENS, N_SPM);
}
static void gpt2_unknown_pre(gguf_writer *w) {
    gguf_w_str(w, "tokenizer.ggml.model", "gpt2");
    gguf_w_str(w, "tokenizer.ggml.pre", "chameleon");
    gguf_w_arr_str(w, "tokenizer.ggml.tokens", SPM_TOKENS, N_SPM);
    gguf_w_arr_str(w, "tokenizer.ggml.merges", SPM_TOKENS, N_SPM);
}

Test(tokenizer_hostile, refused_with_a_reason) {
    expect_refused(no_model, "tokenizer.ggml.model");
    expect_refused(bert_model, "'bert'");
    expect_refused(no_tokens, "tokenizer.ggml.tokens");
    expect_refused(tokens_not_strings, "tokenizer.ggml.tokens");
    expect_refused(short_types, "tokenizer.ggml.token_type");
    expect_refused(scores_as_strings, "tokenizer.ggml.scores");
    expect_refused(duplicate_tokens, "repeats token 1");
    expect_refused(bos_flag_not_bool, "add_bos_token");
    expect_refused(bos_id_negative, "bos_token_id");
    expect_refused(phi3_name, "phi-3");
    expect_refused(gpt2_no_merges, "merges");
    expect_refused(gpt2_unknown_pre, "chameleon");
}

static void encode_ok(const seam_tokenizer *t, const char *text, bool add_special, const int32_t *want, int n) {
    int32_t *ids;
    int n_ids;
    seam_error e = {{0}};
    cr_assert_eq(tokenizer_encode(t, text, strlen(text), add_special, false, &ids, &n_ids, &e), 0, "%s", e.msg);
    cr_expect(same_ids(ids, n_ids, want, n), "'%s' encodes differently", text);
    if (!same_ids(ids, n_ids, want, n)) {
        print_ids("want", want, n);
        print_ids("seam", ids, n_ids);
    }
    free(ids);
}

// SPM by hand: the space prefix, merges by score, byte fallback, and a byte
// with no token at all, which is an error rather than a crash.
Test(tokenizer_hostile, small_spm) {
    seam_tokenizer *t;
    seam_error e = {{0}};
    cr_assert_eq(load_written(spm_base, &t, &e), 0, "%s", e.msg);
    cr_expect_eq(tokenizer_bos(t), 1);
    cr_expect(tokenizer_is_eog(t, 2) && !tokenizer_is_eog(t, 1));
    encode_ok(t, "ab", true, (const int32_t[]){1, 7}, 2);              // <s> ▁ab
    encode_ok(t, "ab abc", false, (const int32_t[]){7, 7, 10}, 3);     // ▁ab ▁ab <0x63>
    encode_ok(t, "\xc3\xa9", false, (const int32_t[]){3, 11, 12}, 3);  // ▁ <0xC3> <0xA9>
    int32_t *ids;
    int n;
    cr_expect_eq(tokenizer_encode(t, "d", 1, false, false, &ids, &n, &e), -1);
    cr_expect_null(ids);
    cr_expect(strstr(e.msg, "0x64"), "%s", e.msg);
    char buf[8];
    cr_expect_eq(tokenizer_piece(t, 7, buf, sizeof buf, false), 3);
    cr_expect_eq(memcmp(buf, " ab", 3), 0);
    cr_expect_eq(tokenizer_piece(t, 11, buf, sizeof buf, false), 1);
    cr_expect_eq((uint8_t)buf[0], 0xC3);
    tokenizer_free(t);
}

// A BPE vocabulary whose merges make strings that are not tokens, whose
// tokens are not GPT-2 spellings, and with empty and out-of-range entries.
static const char *const BPE_TOKENS[] = {"h", "i", "\xc4\xa0", "hi", "", "\xff\xfe", "<0x"};
static const int32_t BPE_TYPES[] = {1, 1, 1, 1, 1, 1, 6};
static const char *const BPE_MERGES[] = {"h i", "\xc4\xa0 h", "nospace", "i i", "h i"};

static void bpe_odd(gguf_writer *w) {
    gguf_w_str(w, "tokenizer.ggml.model", "gpt2");
    gguf_w_str(w, "tokenizer.ggml.pre", "llama-bpe");
    gguf_w_arr_str(w, "tokenizer.ggml.tokens", BPE_TOKENS, 7);
    gguf_w_arr_i32(w, "tokenizer.ggml.token_type", BPE_TYPES, 7);
    gguf_w_arr_str(w, "tokenizer.ggml.merges", BPE_MERGES, 5);
    gguf_w_u32(w, "tokenizer.ggml.bos_token_id", 1000);  // out of range: ignored
    gguf_w_u32(w, "tokenizer.ggml.eos_token_id", 3);
}

Test(tokenizer_hostile, odd_bpe) {
    seam_tokenizer *t;
    seam_error e = {{0}};
    cr_assert_eq(load_written(bpe_odd, &t, &e), 0, "%s", e.msg);
    cr_expect_eq(tokenizer_bos(t), -1, "BOS 1000 is out of range and the default 11 too");
    cr_expect_eq(tokenizer_eos(t), 3);
    // llama3 vocabularies add BOS; this one has none to add
    int32_t *ids;
    int n;
    cr_expect_eq(tokenizer_encode(t, "hi", 2, true, false, &ids, &n, &e), -1);
    cr_expect(strstr(e.msg, "BOS"), "%s", e.msg);
    encode_ok(t, "hi hii", false, (const int32_t[]){3, 2, 3, 1}, 4);  // "Ġhii": Ġ hi i, no "Ġ h" token
    encode_ok(t, "[EMPTY_4]", false, (const int32_t[]){0}, 0);         // no byte tokens: dropped
    char buf[64];
    int k = tokenizer_piece(t, 5, buf, sizeof buf, false);             // invalid UTF-8 token text
    cr_expect(k > 0 && memcmp(buf, "[UNK_BYTE_0xefbfbd", 18) == 0, "%.*s", k, buf);
    cr_expect_eq(tokenizer_piece(t, 6, buf, sizeof buf, false), 1);  // byte token "<0x": byte 0
    cr_expect_eq(buf[0], 0);
    tokenizer_free(t);
}

// ---------------------------------------------------------------------------
// Chat templates: excerpts of the templates real files carry

static const chat_template *detected(const char *tmpl) {
    const chat_template *c;
    seam_error e = {{0}};
    cr_assert_eq(chat_template_detect(tmpl, strlen(tmpl), &c, &e), 0, "%s", e.msg);
    return c;
}

static void refused(const char *tmpl, const char *says) {
    const chat_template *c;
    seam_error e = {{0}};
    cr_assert_eq(chat_template_detect(tmpl, strlen(tmpl), &c, &e), -1, "'%s' detected as %s", tmpl, c ? c->name : "?");
    cr_assert_null(c);
    cr_assert(strstr(e.msg, says), "'%s': the message does not say '%s':\n%s", tmpl, says, e.msg);
}

Test(chat_template, the_families_seam_writes) {
    static const char qwen3[] =  // Qwen3: ChatML
        "{%- if tools %}\n    {{- '<|im_start|>system\\n' }}\n{%- endif %}\n{%- for message in messages %}\n"
        "        {{- '<|im_start|>' + message.role + '\\n' + content + '<|im_end|>' + '\\n' }}";
    static const char gemma3[] =  // Gemma 3 (instruction-tuned)
        "{{ bos_token }}\n{%- if messages[0]['role'] == 'system' -%}\n{%- for message in loop_messages -%}\n"
        "{{ '<start_of_turn>' + role + '\\n' + (first_user_prefix if loop.first else \"\") }}";
    static const char llama32[] =  // Llama 3.2 (instruct)
        "{{- bos_token }}\n{{- '<|start_header_id|>system<|end_header_id|>\\n\\n' }}\n"
        "{{- '<|start_header_id|>' + message['role'] + '<|end_header_id|>\\n\\n'+ message['content'] | trim + '<|eot_id|>' }}";
    cr_expect_str_eq(detected(qwen3)->name, "chatml");
    cr_expect_str_eq(detected(gemma3)->name, "gemma");
    cr_expect_str_eq(detected(llama32)->name, "llama3");
    // a family's name stands for its template, as in llama.cpp
    cr_expect_str_eq(detected("chatml")->name, "chatml");
    cr_expect_str_eq(detected("gemma")->name, "gemma");
    cr_expect_str_eq(detected("llama3")->name, "llama3");
    // the turns each family's model was trained on
    const chat_template *c = detected(gemma3);
    cr_expect_str_eq(c->user_prefix, "<start_of_turn>user\n");
    cr_expect_str_eq(c->user_suffix, "<end_of_turn>\n<start_of_turn>model\n");
    c = detected(llama32);
    cr_expect_str_eq(c->user_suffix, "<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n");
    cr_expect_str_eq(c->turn_end, "");
}

// Families llama.cpp checks before a later one's markers are named, not
// taken for the later family (phi-4 opens turns with ChatML's <|im_start|>).
Test(chat_template, other_families_are_named) {
    refused("{% for message in messages %}{{'<|im_start|>system<|im_sep|>' + message['content'] + '<|im_end|>'}}",
            "a phi-4 template");
    refused("{{ bos_token }}{% for message in messages %}{{ '[INST] ' + message['content'] + ' [/INST]' }}",
            "a Llama 2 or Mistral ([INST]) template");
    refused("{% for message in messages %}{{ '<|user|>\\n' + message['content'] + '<|end|>\\n<|assistant|>\\n' }}",
            "a phi-3 template");
}

Test(chat_template, an_unknown_template_is_quoted) {
    refused("{% for m in messages %}{{ m.role }}: {{ m.content }}\n{% endfor %}",
            "not a template seam recognises (it knows ChatML, Gemma and Llama 3 by their markers): "
            "\"{% for m in messages %}{{ m.role }}: {{ m.content }}\\n{%...\"");
    refused("", "\"\"");
    // cut between characters, not inside one: 'x' and then two-byte characters
    char tmpl[128] = "x";
    for (int i = 0; i < 40; i++) strcat(tmpl, "\xc3\xa9");
    char want[128] = "\"x";
    for (int i = 0; i < 27; i++) strcat(want, "\xc3\xa9");
    strcat(want, "...\"");
    refused(tmpl, want);
}
