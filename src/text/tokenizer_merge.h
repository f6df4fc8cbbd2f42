// tokenizer_merge.h — the tokenizer's data, and the functions of
// tokenizer_merge.c that tokenizer.c and tokenizer_bpe.c both call; not part
// of seam's API (include tokenizer.h for that). Calls go one way:
// tokenizer.c -> tokenizer_bpe.c (tokenizer_bpe.h) -> tokenizer_merge.c.
#ifndef SEAM_TOKENIZER_MERGE_H
#define SEAM_TOKENIZER_MERGE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/common.h"
#include "format/gguf.h"

// The type tokenizer.h names; its fields are here, below the API, so that
// this file needs nothing from the file that calls it.
typedef struct seam_tokenizer seam_tokenizer;

// Token attributes, as llama.cpp derives them from the GGUF token type and
// then refines them by token text. Bits, because a token can gain CONTROL on
// top of its type.
enum {
    TK_UNKNOWN = 1 << 0,
    TK_UNUSED = 1 << 1,
    TK_NORMAL = 1 << 2,
    TK_CONTROL = 1 << 3,
    TK_USER_DEFINED = 1 << 4,
    TK_BYTE = 1 << 5,
};

typedef enum { TK_SPM, TK_BPE } tk_kind;

// BPE pre-tokenizers: the regex families of llama.cpp seam implements.
typedef enum {
    TK_PRE_DEFAULT,  // llama.cpp's fallback: punctuation runs, gpt-2 words, digit runs, digit triples
    TK_PRE_GPT2,     // 's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)
    TK_PRE_LLAMA3,   // (?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+
    TK_PRE_QWEN2,    // the same with \p{N} (one digit at a time) for \p{N}{1,3}
} tk_pre;

// Byte strings numbered in the order they were added, with a hash index from
// text to the first string of that text. The vocabulary (number = token id)
// and the BPE merges ("left right", number = rank) are both one.
typedef struct {
    char *bytes;      // every string back to back, each followed by a NUL
    size_t cap;       // bytes allocated
    size_t *start;    // [n + 1] string i is bytes[start[i], start[i + 1] - 1)
    uint32_t n;
    uint32_t *slots;  // [mask + 1] 1 + number of a string, 0 = empty
    uint32_t mask;
} tk_strset;

static inline const char *tk_str(const tk_strset *s, uint32_t i) { return s->bytes + s->start[i]; }
static inline size_t tk_str_len(const tk_strset *s, uint32_t i) { return s->start[i + 1] - s->start[i] - 1; }
int tk_strset_init(tk_strset *s, uint32_t n);  // room for n strings; -1 when out of memory
void tk_strset_free(tk_strset *s);
int tk_strset_find(const tk_strset *s, const char *p, size_t n);  // number, or -1
// Appends string number s->n and returns the number of the first string with
// the same text: itself, or an earlier duplicate. -1 when out of memory.
int tk_strset_add(tk_strset *s, const char *p, size_t n);

struct seam_tokenizer {
    tk_kind kind;
    tk_pre pre;                // BPE only
    int n_vocab;
    tk_strset vocab;           // token texts; id <-> text
    float *score;              // [n_vocab] SPM merge priority
    uint8_t *attr;             // [n_vocab] TK_* bits
    bool *eog;                 // [n_vocab] ends generation
    tk_strset merges;          // BPE: "left right", by rank
    int32_t *special;          // [n_special] control/user-defined/unknown ids, longest text first
    int n_special;
    int bos, eos;              // -1 when none
    bool add_bos, add_eos;     // what add_special adds
    bool add_space_prefix;     // SPM: a space before the text and after each special token
    bool ignore_merges;        // BPE: a word that is a token is taken whole (llama3)
};

// One piece of text during merging: a run of bytes of the work string.
typedef struct {
    const char *text;
    int n;           // bytes; 0 once merged into its left neighbour
    int prev, next;  // neighbours in the chain, -1 at the ends
} tk_symbol;

// A candidate merge of two neighbours.
typedef struct {
    double prio;     // higher merges first: the SPM score, or -rank for BPE
    int left, right;
    int size;        // their bytes when queued; symbols only grow, so a mismatch means stale
} tk_bigram;

// Scratch memory of one encode call.
typedef struct {
    tk_symbol *sym;     // [n_sym]
    size_t n_sym, cap_sym;
    tk_bigram *heap;    // [n_heap] best first
    size_t n_heap, cap_heap;
    char *buf;          // the string being merged (symbols point into it)
    size_t cap_buf;
    char *key;          // BPE: "left right" for a merge look-up
    size_t cap_key;
    uint32_t *cp;       // BPE: the run as code points
    uint16_t *flags;    // BPE: their Unicode classes
    size_t cap_cp, cap_flags;
    size_t *chunk, *chunk2;  // BPE: word lengths (code points), before and after a pre-tokenizer pass
    size_t cap_chunk, cap_chunk2;
} tk_work;

typedef struct {
    int32_t *ids;
    int n;
    size_t cap;
} tk_ids;

// The bytes of a piece, counted even where they do not fit.
typedef struct {
    char *buf;
    size_t cap, n;
} tk_piece;

// Grows the array arr (a T * variable, with capacity cap) to hold at least
// need elements: 0, or -1 when out of memory (arr is then unchanged).
int tk_grow(void *ptr, size_t *cap, size_t need, size_t size);
#define TK_GROW(arr, cap, need) tk_grow(&(arr), &(cap), (need), sizeof *(arr))
int tk_oom(seam_error *e);
int tk_push(tk_ids *v, int32_t id, seam_error *e);
void tk_put(tk_piece *p, const void *bytes, size_t n);
void tk_work_free(tk_work *w);

// How good merging two neighbours is: 1 and *prio set when they may merge,
// 0 when not, -1 on error.
typedef int (*tk_pair_fn)(const seam_tokenizer *t, tk_work *w, const tk_symbol *l, const tk_symbol *r,
                          double *prio, seam_error *e);
// Splits text into one symbol per UTF-8 character, then merges (llama.cpp's
// llm_tokenizer_spm/bpe sessions).
int tk_split_chars(tk_work *w, const char *text, size_t len, seam_error *e);
int tk_merge(const seam_tokenizer *t, tk_work *w, tk_pair_fn prio_of, seam_error *e);

#endif
