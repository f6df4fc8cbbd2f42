// fuzz_tokenizer.c — libFuzzer target: arbitrary text through two real
// vocabularies (the committed golden ones: qwen3's byte-level BPE, and an
// 8k SentencePiece). The first input byte picks the vocabulary (even: BPE,
// odd: SPM); the rest is the text, which need not be UTF-8.
//
// For each of the four add_special/parse_special settings: encoding succeeds
// (both vocabularies can spell any byte), every id is in range, every id has
// a piece, and the pieces concatenate. Where the text is one llama.cpp
// reads without replacement (valid UTF-8, no special token involved, and for
// SPM no literal U+2581, which it uses to spell a space) decoding gives the
// text back exactly, after SPM's added leading space (and with any U+2581
// that a space fell back to read as the space).
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "format/gguf.h"
#include "text/tokenizer.h"
#include "text/tokenizer_merge.h"  // token attributes: which ids are special

#define CHECK(cond)                                                                      \
    do {                                                                                 \
        if (!(cond)) {                                                                   \
            fprintf(stderr, "fuzz_tokenizer: check failed: %s (line %d)\n", #cond, __LINE__); \
            abort();                                                                     \
        }                                                                                \
    } while (0)

static seam_tokenizer *vocab[2];  // [0] BPE, [1] SPM

static seam_tokenizer *load(const char *name) {
    char path[512];
    snprintf(path, sizeof path, "%s/tests/golden/%s", SEAM_SOURCE_DIR, name);
    gguf_file f;
    seam_error e;
    seam_tokenizer *t = NULL;
    if (gguf_open(&f, path, &e) || tokenizer_load(&t, &f, &e)) {
        fprintf(stderr, "fuzz_tokenizer: %s\n", e.msg);
        exit(1);
    }
    gguf_close(&f);
    return t;
}

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    vocab[0] = load("vocab-qwen3-5k.gguf");
    vocab[1] = load("vocab-spm-8k.gguf");
    return 0;
}

// Strict UTF-8: no overlong forms, surrogates or code points past U+10FFFF,
// the text the tokenizers read back byte for byte.
static bool valid_utf8(const uint8_t *s, size_t n) {
    for (size_t i = 0; i < n;) {
        uint8_t c = s[i];
        size_t len = c < 0x80 ? 1 : (c & 0xE0) == 0xC0 ? 2 : (c & 0xF0) == 0xE0 ? 3 : (c & 0xF8) == 0xF0 ? 4 : 0;
        if (len == 0 || len > n - i) return false;
        uint32_t cp = len == 1 ? c : c & (0x7F >> len);
        for (size_t k = 1; k < len; k++) {
            if ((s[i + k] & 0xC0) != 0x80) return false;
            cp = (cp << 6) | (s[i + k] & 0x3F);
        }
        static const uint32_t min_cp[5] = {0, 0, 0x80, 0x800, 0x10000};
        if (cp < min_cp[len] || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return false;
        i += len;
    }
    return true;
}

// SPM spells a space U+2581; where the vocabulary has no lone U+2581 token
// it falls back to its three byte tokens, which decode (as in llama.cpp) to
// U+2581 itself. Turns those back into spaces in place; returns the length.
static size_t spm_spaces(char *s, size_t n) {
    size_t w = 0;
    for (size_t r = 0; r < n;) {
        if (n - r >= 3 && memcmp(s + r, "\xe2\x96\x81", 3) == 0) {
            s[w++] = ' ';
            r += 3;
        } else {
            s[w++] = s[r++];
        }
    }
    return w;
}

static void run(const seam_tokenizer *t, const char *text, size_t len, bool add_special, bool parse_special,
                bool check_round_trip) {
    int32_t *ids;
    int n;
    seam_error e;
    if (tokenizer_encode(t, text, len, add_special, parse_special, &ids, &n, &e)) {
        fprintf(stderr, "fuzz_tokenizer: encode failed: %s\n", e.msg);
        abort();
    }
    CHECK(n >= 0 && (n == 0 || ids != NULL));
    size_t cap = len + 64, used = 0;
    char *out = malloc(cap);
    CHECK(out);
    bool special = false;
    for (int i = 0; i < n; i++) {
        CHECK(ids[i] >= 0 && ids[i] < t->n_vocab);
        special |= (t->attr[ids[i]] & (TK_CONTROL | TK_USER_DEFINED | TK_UNKNOWN)) != 0;
        // a piece that does not fit is reported as the bytes it needs
        char none[1];
        int need = tokenizer_piece(t, ids[i], none, 0, true);
        CHECK(need <= 0);
        const size_t piece_len = (size_t)-need;
        if (used + piece_len > cap) {
            cap = 2 * (used + piece_len);
            out = realloc(out, cap);
            CHECK(out);
        }
        CHECK(tokenizer_piece(t, ids[i], out + used, (int)(cap - used), true) == (int)piece_len);
        used += piece_len;
    }
    if (check_round_trip && !special) {
        const bool spm = t->kind == TK_SPM;
        if (spm) used = spm_spaces(out, used);
        const size_t lead = spm && t->add_space_prefix && len > 0 ? 1 : 0;
        CHECK(used == len + lead);
        CHECK(lead == 0 || out[0] == ' ');
        CHECK(memcmp(out + lead, text, len) == 0);
    }
    free(out);
    free(ids);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size == 0) return 0;
    const seam_tokenizer *t = vocab[data[0] & 1];
    const char *text = (const char *)data + 1;
    const size_t len = size - 1;
    const bool round_trip = valid_utf8(data + 1, len) &&
                            !(t->kind == TK_SPM && memmem(text, len, "\xe2\x96\x81", 3));
    for (int add = 0; add < 2; add++)
        for (int parse = 0; parse < 2; parse++) run(t, text, len, add, parse, round_trip && !add);
    return 0;
}
