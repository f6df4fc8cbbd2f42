// fuzz_gguf.c — libFuzzer target: arbitrary bytes as a GGUF file.
//
// The path a user's file takes through `seam inspect` and `seam run`:
// gguf_parse; every value formatted; the vocabulary loaded and used on a
// fixed text; the model bound; and, for a small file, one-token forward
// passes (positions 0 and 1 of a 2-position context, then position 2, which
// must be refused). Any crash, leak or sanitizer report is a finding; a
// file that is merely refused is not.
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/engine.h"
#include "format/gguf.h"
#include "model/model.h"
#include "text/tokenizer.h"

// Above this size a file bound as a model only exercises the loader: the
// forward pass over a bigger (mutated) model would slow every execution.
#define FORWARD_MAX_BYTES 65536

#define CHECK(cond)                                                             \
    do {                                                                        \
        if (!(cond)) {                                                          \
            fprintf(stderr, "fuzz_gguf: check failed: %s (line %d)\n", #cond, __LINE__); \
            abort();                                                            \
        }                                                                       \
    } while (0)

static void use_tokenizer(const seam_tokenizer *tok) {
    static const char text[] = "<|im_start|>user\nHello, world! 123<end_of_turn>\xe2\x96\x81\xff";
    const int n_vocab = tokenizer_n_vocab(tok);
    CHECK(n_vocab > 0);
    for (int special = 0; special < 2; special++) {
        int32_t *ids;
        int n;
        seam_error e;
        if (tokenizer_encode(tok, text, sizeof text - 1, special, special, &ids, &n, &e)) {
            CHECK(ids == NULL);
            continue;
        }
        for (int i = 0; i < n; i++) {
            char piece[64];
            CHECK(ids[i] >= 0 && ids[i] < n_vocab);
            // the bytes written, or minus the bytes needed when they do not fit
            int len = tokenizer_piece(tok, ids[i], piece, sizeof piece, special);
            CHECK(len >= 0 ? len <= (int)sizeof piece : -len > (int)sizeof piece);
            tokenizer_is_eog(tok, ids[i]);
        }
        free(ids);
    }
}

static void forward(const seam_model *m, int token) {
    seam_engine eng;
    seam_error e;
    if (engine_init(&eng, m, 2, &e)) return;
    float *logits;
    for (int pos = 0; pos < 2; pos++) CHECK(engine_forward(&eng, token, pos, &logits, &e) == 0);
    // past the context: an error, never a write past the KV cache
    CHECK(engine_forward(&eng, token, 2, &logits, &e) != 0);
    CHECK(engine_forward(&eng, m->cfg.n_vocab, 0, &logits, &e) != 0);
    engine_free(&eng);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    gguf_file f;
    seam_error e;
    if (gguf_parse(&f, data, size, &e)) return 0;

    char val[256];
    for (uint64_t i = 0; i < f.n_kv; i++) gguf_format_value(&f.kv[i], val, sizeof val);
    for (uint64_t i = 0; i < f.n_tensors; i++) {
        const gguf_tensor *t = &f.tensors[i];
        // the reader's promise: every tensor's bytes lie inside the file
        CHECK((const uint8_t *)t->data >= data && t->n_bytes <= size &&
              (uint64_t)((const uint8_t *)t->data - data) <= size - t->n_bytes);
    }

    // The tokenizer copies what it needs, so it is loaded before model_bind
    // takes the file.
    seam_tokenizer *tok = NULL;
    if (tokenizer_load(&tok, &f, &e) == 0) use_tokenizer(tok);

    seam_model m;
    if (model_bind(&m, &f, &e) == 0) {
        model_bytes_per_token(&m);
        int bos = tok ? tokenizer_bos(tok) : -1;
        if (tok && size <= FORWARD_MAX_BYTES) forward(&m, bos >= 0 && bos < m.cfg.n_vocab ? bos : 0);
        model_free(&m);
    } else {
        gguf_close(&f);
    }
    tokenizer_free(tok);
    return 0;
}
