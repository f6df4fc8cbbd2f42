// tokenizer_bpe.h — what tokenizer.c calls in tokenizer_bpe.c (byte-level
// BPE); tokenizer_bpe.c calls nothing of tokenizer.c.
#ifndef SEAM_TOKENIZER_BPE_H
#define SEAM_TOKENIZER_BPE_H

#include "text/tokenizer_merge.h"

int tk_bpe_pre(seam_tokenizer *t, const gguf_file *f, seam_error *e);  // tokenizer.ggml.pre -> t->pre and flags
int tk_bpe_run(const seam_tokenizer *t, tk_work *w, const char *text, size_t len, tk_ids *out, seam_error *e);
void tk_bpe_unspell(const char *s, size_t n, tk_piece *p);  // a token's GPT-2 spelling -> its bytes

#endif
