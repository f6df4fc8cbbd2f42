// tokenizer.h — text to token ids and back, from the vocabulary in a GGUF.
//
// Floor src/text/: text in and out -- the tokenizer (here, with its BPE
// and merge halves below it), chat templates (chat.h) and the sampler
// (sampler.h). Above format/; nothing of the model's arithmetic.
//
// Two kinds of vocabulary, named by tokenizer.ggml.model:
//   "gpt2"  byte-level BPE: the text is split into words by a pre-tokenizer
//           (tokenizer.ggml.pre: qwen2, llama3, gpt-2 or default families),
//           each byte of a word is spelt as one GPT-2 "byte unicode" character,
//           and adjacent pieces merge in the order of tokenizer.ggml.merges.
//   "llama" SentencePiece (Llama, Gemma): spaces become U+2581 '▁', adjacent
//           pieces merge by highest score, and what is left that is not a
//           token falls back to byte tokens <0xNN>.
// Both follow llama.cpp (llama-vocab.cpp, unicode.cpp) so that the ids equal
// llama_tokenize's for the same file, including its handling of special
// tokens, invalid UTF-8 (each bad byte reads as U+FFFD in BPE) and the token
// attributes it infers from token text (e.g. <|im_end|> is control and ends
// generation whatever its GGUF type says).
//
// Not covered: llama.cpp's per-model LSTRIP/RSTRIP attributes (phi-3,
// jina, modern-bert), and pre-tokenizers other than those listed above; a
// file that needs one fails to load with a message that says so.
#ifndef SEAM_TOKENIZER_H
#define SEAM_TOKENIZER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/common.h"
#include "format/gguf.h"

#ifdef __cplusplus
extern "C" {
#endif

// A loaded tokenizer is read-only: encode and piece may run on several
// threads at once.
typedef struct seam_tokenizer seam_tokenizer;

// Reads the vocabulary of f. The tokenizer copies what it needs: f may be
// closed afterwards. Fails (-1, e filled) on a vocabulary llama.cpp would
// also refuse (missing keys, wrong types, duplicate tokens) and on features
// seam does not implement.
int tokenizer_load(seam_tokenizer **out, const gguf_file *f, seam_error *e);
void tokenizer_free(seam_tokenizer *t);

int tokenizer_n_vocab(const seam_tokenizer *t);
int tokenizer_bos(const seam_tokenizer *t);  // -1 when the vocabulary has none
int tokenizer_eos(const seam_tokenizer *t);  // -1 when the vocabulary has none
// End of generation: EOS, EOT, EOM, and the tokens llama.cpp recognises by
// text (<end_of_turn>, <|im_end|>, <|endoftext|>, <|eot_id|>, fim pad...).
bool tokenizer_is_eog(const seam_tokenizer *t, int id);

// Text (any bytes; need not be valid UTF-8 or NUL-terminated) to ids, as
// llama_tokenize(text, add_special, parse_special):
//   add_special   adds BOS (and EOS) where the file asks for them;
//   parse_special lets control-token text in the input (e.g. "<start_of_turn>")
//                 become that token; user-defined tokens are always matched.
// *ids is malloc'd (free it) and holds *n_ids ids; on failure it is NULL.
int tokenizer_encode(const seam_tokenizer *t, const char *text, size_t len, bool add_special,
                     bool parse_special, int32_t **ids, int *n_ids, seam_error *e);

// The bytes of one token, as llama_token_to_piece: byte tokens give their
// byte, '▁' becomes a space (SPM), the GPT-2 byte spelling is undone (BPE).
// Control and unknown tokens render as nothing unless render_special. A
// piece may be part of a UTF-8 character: concatenate pieces before printing.
// Returns the number of bytes written to buf, or -(bytes needed) when len is
// too small (buf then holds a prefix of the piece at most); an id out of
// range renders as nothing.
int tokenizer_piece(const seam_tokenizer *t, int id, char *buf, int len, bool render_special);

#ifdef __cplusplus
}
#endif
#endif
