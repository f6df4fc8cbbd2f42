// tokenizer_bpe.c — byte-level BPE as GGUF "gpt2" vocabularies use it:
// Unicode classes, the pre-tokenizers that split text into words, the GPT-2
// spelling of bytes as characters, and merging by rank.
//
// The pre-tokenizers are hand-written matchers of the regexes named in
// tokenizer_merge.h, ported from llama.cpp's unicode.cpp (which also matches
// them by hand, and so defines the behaviour seam must reproduce, quirks
// included).
#include "text/tokenizer_bpe.h"

#include <stdio.h>
#include <string.h>
#include <utf8proc.h>

// ---------------------------------------------------------------- Unicode

// Code point classes, one bit per \p{..} class llama.cpp uses, plus \s.
enum {
    CP_UNDEFINED = 1 << 0,  // unassigned
    CP_NUMBER = 1 << 1,     // \p{N}
    CP_LETTER = 1 << 2,     // \p{L}
    CP_SEPARATOR = 1 << 3,  // \p{Z}
    CP_MARK = 1 << 4,       // \p{M}
    CP_PUNCT = 1 << 5,      // \p{P}
    CP_SYMBOL = 1 << 6,     // \p{S}
    CP_CONTROL = 1 << 7,    // \p{C} but unassigned
    CP_CATEGORY = 0xFF,
    CP_SPACE = 1 << 8,      // \s: Unicode White_Space
};

static bool cp_is_space(uint32_t cp) {
    static const uint32_t spaces[] = {0x85, 0xA0, 0x1680, 0x2028, 0x2029, 0x202F, 0x205F, 0x3000};
    if ((cp >= 0x09 && cp <= 0x0D) || cp == 0x20 || (cp >= 0x2000 && cp <= 0x200A)) return true;
    for (size_t i = 0; i < sizeof spaces / sizeof *spaces; i++)
        if (cp == spaces[i]) return true;
    return false;
}

static uint16_t cp_flags(uint32_t cp) {
    static const uint16_t of_category[] = {
        [UTF8PROC_CATEGORY_CN] = CP_UNDEFINED,
        [UTF8PROC_CATEGORY_LU] = CP_LETTER, [UTF8PROC_CATEGORY_LL] = CP_LETTER,
        [UTF8PROC_CATEGORY_LT] = CP_LETTER, [UTF8PROC_CATEGORY_LM] = CP_LETTER,
        [UTF8PROC_CATEGORY_LO] = CP_LETTER,
        [UTF8PROC_CATEGORY_MN] = CP_MARK, [UTF8PROC_CATEGORY_MC] = CP_MARK, [UTF8PROC_CATEGORY_ME] = CP_MARK,
        [UTF8PROC_CATEGORY_ND] = CP_NUMBER, [UTF8PROC_CATEGORY_NL] = CP_NUMBER, [UTF8PROC_CATEGORY_NO] = CP_NUMBER,
        [UTF8PROC_CATEGORY_PC] = CP_PUNCT, [UTF8PROC_CATEGORY_PD] = CP_PUNCT, [UTF8PROC_CATEGORY_PS] = CP_PUNCT,
        [UTF8PROC_CATEGORY_PE] = CP_PUNCT, [UTF8PROC_CATEGORY_PI] = CP_PUNCT, [UTF8PROC_CATEGORY_PF] = CP_PUNCT,
        [UTF8PROC_CATEGORY_PO] = CP_PUNCT,
        [UTF8PROC_CATEGORY_SM] = CP_SYMBOL, [UTF8PROC_CATEGORY_SC] = CP_SYMBOL,
        [UTF8PROC_CATEGORY_SK] = CP_SYMBOL, [UTF8PROC_CATEGORY_SO] = CP_SYMBOL,
        [UTF8PROC_CATEGORY_ZS] = CP_SEPARATOR, [UTF8PROC_CATEGORY_ZL] = CP_SEPARATOR,
        [UTF8PROC_CATEGORY_ZP] = CP_SEPARATOR,
        [UTF8PROC_CATEGORY_CC] = CP_CONTROL, [UTF8PROC_CATEGORY_CF] = CP_CONTROL,
        [UTF8PROC_CATEGORY_CS] = CP_CONTROL, [UTF8PROC_CATEGORY_CO] = CP_CONTROL,
    };
    uint16_t f;
    // llama.cpp's tables are Unicode 15.1; utf8proc 2.8 knows 15.0. These are
    // the code points 15.1 assigned (checked over all of Unicode).
    if ((cp >= 0x2FFC && cp <= 0x2FFF) || cp == 0x31EF) {
        f = CP_SYMBOL;  // ideographic description characters
    } else if (cp >= 0x2EBF0 && cp <= 0x2EE5D) {
        f = CP_LETTER;  // CJK Unified Ideographs Extension I
    } else {
        utf8proc_category_t c = utf8proc_category((utf8proc_int32_t)cp);
        f = (c >= 0 && c < (int)(sizeof of_category / sizeof *of_category)) ? of_category[c] : CP_UNDEFINED;
    }
    return cp_is_space(cp) ? f | CP_SPACE : f;
}

// UTF-8 as llama.cpp reads it (unicode_cpt_from_utf8): no check for overlong
// forms or surrogates; a byte that cannot start a character, or one whose
// continuation bytes are missing, reads as U+FFFD and the next byte starts
// afresh. Values above U+10FFFF, on which llama.cpp aborts, read as U+FFFD too.
static uint32_t next_cp(const char *text, size_t len, size_t *i) {
    const uint8_t *s = (const uint8_t *)text + *i;
    size_t left = len - *i;
    uint32_t cp;
    size_t n;
    if (s[0] < 0x80) {
        cp = s[0], n = 1;
    } else if ((s[0] & 0xE0) == 0xC0) {
        cp = s[0] & 0x1F, n = 2;
    } else if ((s[0] & 0xF0) == 0xE0) {
        cp = s[0] & 0x0F, n = 3;
    } else if ((s[0] & 0xF8) == 0xF0) {
        cp = s[0] & 0x07, n = 4;
    } else {
        goto invalid;  // a continuation byte, or 0xF8..0xFF
    }
    if (n > left) goto invalid;
    for (size_t k = 1; k < n; k++) {
        if ((s[k] & 0xC0) != 0x80) goto invalid;
        cp = (cp << 6) | (s[k] & 0x3F);
    }
    if (cp > 0x10FFFF) goto invalid;
    *i += n;
    return cp;
invalid:
    *i += 1;
    return 0xFFFD;
}

static int cp_utf8(uint32_t cp, uint8_t out[4]) {
    if (cp < 0x80) {
        out[0] = (uint8_t)cp;
        return 1;
    }
    if (cp < 0x800) {
        out[0] = (uint8_t)(0xC0 | (cp >> 6));
        out[1] = (uint8_t)(0x80 | (cp & 0x3F));
        return 2;
    }
    if (cp < 0x10000) {
        out[0] = (uint8_t)(0xE0 | (cp >> 12));
        out[1] = (uint8_t)(0x80 | ((cp >> 6) & 0x3F));
        out[2] = (uint8_t)(0x80 | (cp & 0x3F));
        return 3;
    }
    out[0] = (uint8_t)(0xF0 | (cp >> 18));
    out[1] = (uint8_t)(0x80 | ((cp >> 12) & 0x3F));
    out[2] = (uint8_t)(0x80 | ((cp >> 6) & 0x3F));
    out[3] = (uint8_t)(0x80 | (cp & 0x3F));
    return 4;
}

// ---------------------------------------------------------------- GPT-2 byte spelling

// GPT-2 spells each byte as one printable character: the printable Latin-1
// bytes ('!'..'~', '¡'..'¬', '®'..'ÿ') as themselves, the other 68 as
// U+0100, U+0101, ... in byte order (so ' ' is 'Ġ' U+0120, '\n' is 'Ċ').
static uint32_t byte_cp(uint8_t b) {
    if (b <= 0x20) return 0x100 + b;
    if (b >= 0x7F && b <= 0xA0) return 0x100 + 33 + (b - 0x7F);
    if (b == 0xAD) return 0x100 + 33 + 34;
    return b;
}

static int cp_byte(uint32_t cp) {  // the byte cp spells, or -1
    if (cp < 0x100) return (cp > 0x20 && (cp < 0x7F || cp > 0xA0) && cp != 0xAD) ? (int)cp : -1;
    if (cp < 0x100 + 33) return (int)(cp - 0x100);
    if (cp < 0x100 + 33 + 34) return (int)(cp - 0x100 - 33 + 0x7F);
    return cp == 0x100 + 33 + 34 ? 0xAD : -1;
}

void tk_bpe_unspell(const char *s, size_t n, tk_piece *p) {
    for (size_t i = 0; i < n;) {
        uint32_t cp = next_cp(s, n, &i);
        int b = cp_byte(cp);
        if (b >= 0) {
            uint8_t byte = (uint8_t)b;
            tk_put(p, &byte, 1);
            continue;
        }
        // not a spelt byte: llama.cpp writes "[UNK_BYTE_0x<utf8 hex><token>]"
        uint8_t u[4];
        int k = cp_utf8(cp, u);
        char hex[3];
        tk_put(p, "[UNK_BYTE_0x", 12);
        for (int j = 0; j < k; j++) {
            snprintf(hex, sizeof hex, "%02x", u[j]);
            tk_put(p, hex, 2);
        }
        tk_put(p, s, n);
        tk_put(p, "]", 1);
    }
}

// ---------------------------------------------------------------- pre-tokenizers

// The words found so far, as lengths in code points, and the end of the last.
typedef struct {
    size_t *len;
    size_t n, cap;
    size_t prev_end;
    bool oom;
} words;

static void emit(words *o, size_t end) {  // llama.cpp's _add_token
    if (end > o->prev_end) {
        if (TK_GROW(o->len, o->cap, o->n + 1)) {
            o->oom = true;
        } else {
            o->len[o->n++] = end - o->prev_end;
        }
    }
    o->prev_end = end;
}

// One word being split further: positions are absolute, and reads outside
// [ini, end) give no code point and no class, as in llama.cpp.
typedef struct {
    const uint32_t *cp;
    const uint16_t *fl;
    size_t ini, end;
} span;

#define NO_CP 0xFFFFFFFFu

static uint32_t cp_at(const span *s, size_t pos) { return pos >= s->ini && pos < s->end ? s->cp[pos] : NO_CP; }
static uint16_t fl_at(const span *s, size_t pos) { return pos >= s->ini && pos < s->end ? s->fl[pos] : 0; }

// 's 't 're 've 'm 'll 'd at pos (ASCII case-insensitive when fold): the
// contraction's length, or 0.
static size_t contraction(const span *s, size_t pos, bool fold) {
    if (cp_at(s, pos) != '\'' || pos + 1 >= s->end) return 0;
    uint32_t a = cp_at(s, pos + 1), b = pos + 2 < s->end ? cp_at(s, pos + 2) : NO_CP;
    if (fold) {
        a = (a >= 'A' && a <= 'Z') ? a + 32 : a;
        b = (b >= 'A' && b <= 'Z') ? b + 32 : b;
    }
    if (a == 's' || a == 't' || a == 'm' || a == 'd') return 2;
    if ((a == 'r' && b == 'e') || (a == 'v' && b == 'e') || (a == 'l' && b == 'l')) return 3;
    return 0;
}

// \s+(?!\S) then \s+: a whitespace run leaves its last space to the next
// word unless the run ends the text. Returns the new position (pos if no
// whitespace).
static size_t whitespace_run(const span *s, size_t pos) {
    size_t n = 0;
    while (fl_at(s, pos + n) & CP_SPACE) n++;
    if (n > 1 && cp_at(s, pos + n) != NO_CP) return pos + n - 1;
    return pos + n;
}

// 's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)
static void split_gpt2(const span *s, words *o) {
    for (size_t pos = s->ini; pos < s->end;) {
        uint32_t c = cp_at(s, pos);
        size_t k = contraction(s, pos, false);
        if (k) {
            emit(o, pos += k);
            continue;
        }
        uint16_t f = c == ' ' ? fl_at(s, pos + 1) : fl_at(s, pos);  // class after an optional space
        uint16_t want = (f & CP_LETTER) ? CP_LETTER : (f & CP_NUMBER) ? CP_NUMBER : 0;
        if (want) {
            pos += c == ' ';
            while (fl_at(s, pos) & want) pos++;
            emit(o, pos);
            continue;
        }
        if (!(f & (CP_SPACE | CP_LETTER | CP_NUMBER)) && f) {
            pos += c == ' ';
            while (!(f & (CP_SPACE | CP_LETTER | CP_NUMBER)) && f) f = fl_at(s, ++pos);
            emit(o, pos);
            continue;
        }
        size_t end = whitespace_run(s, pos);
        emit(o, pos = end > pos ? end : pos + 1);
    }
}

// (?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,max_digits}|
//  ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+      (llama3: 3, qwen2: 1)
static void split_llama3(const span *s, words *o, size_t max_digits) {
    for (size_t pos = s->ini; pos < s->end;) {
        uint32_t c = cp_at(s, pos);
        uint16_t f = fl_at(s, pos);
        size_t k = contraction(s, pos, true);
        if (k) {
            emit(o, pos += k);
            continue;
        }
        if (!(c == '\r' || c == '\n' || (f & CP_NUMBER)) && ((f & CP_LETTER) || (fl_at(s, pos + 1) & CP_LETTER))) {
            pos++;
            while (fl_at(s, pos) & CP_LETTER) pos++;
            emit(o, pos);
            continue;
        }
        if (f & CP_NUMBER) {
            for (size_t ini = pos; fl_at(s, pos) & CP_NUMBER;)
                if (++pos - ini >= max_digits) emit(o, ini = pos);
            emit(o, pos);
            continue;
        }
        uint16_t f2 = c == ' ' ? fl_at(s, pos + 1) : f;
        if (!(f2 & (CP_SPACE | CP_LETTER | CP_NUMBER)) && f) {
            pos += c == ' ';
            while (!(f2 & (CP_SPACE | CP_LETTER | CP_NUMBER)) && f2) f2 = fl_at(s, ++pos);
            while (cp_at(s, pos) == '\r' || cp_at(s, pos) == '\n') pos++;
            emit(o, pos);
            continue;
        }
        size_t after_newline = 0;  // \s*[\r\n]+: up to the last newline of the whitespace run
        for (size_t p = pos; fl_at(s, p) & CP_SPACE; p++)
            if (cp_at(s, p) == '\r' || cp_at(s, p) == '\n') after_newline = p + 1;
        if (after_newline) {
            emit(o, pos = after_newline);
            continue;
        }
        size_t end = whitespace_run(s, pos);
        emit(o, pos = end > pos ? end : pos + 1);
    }
}

// Runs of code points that a one-class regex ([...]+) matches, and the gaps
// between them, as std::regex splits llama.cpp's "collapsed" text: ASCII is
// matched as itself, any other code point by its class alone.
static void split_runs(const span *s, words *o, bool (*in_class)(uint32_t cp, uint16_t fl)) {
    for (size_t pos = s->ini; pos < s->end;) {
        bool in = in_class(s->cp[pos], s->fl[pos]);
        while (pos < s->end && in_class(s->cp[pos], s->fl[pos]) == in) pos++;
        emit(o, pos);
    }
}

static bool collapsed_is(uint16_t fl, uint16_t category) {
    return !(fl & CP_SPACE) && (fl & CP_CATEGORY) == category;
}

// [\p{P}\$\+<=>\^~\|]: every ASCII punctuation mark but '`'
static bool default_punct(uint32_t cp, uint16_t fl) {
    if (cp < 0x80) return cp != 0 && strchr("!\"#$%&'()*+,-./:;<=>?@[\\]^_{|}~", (int)cp);
    return collapsed_is(fl, CP_PUNCT);
}

static bool default_number(uint32_t cp, uint16_t fl) {  // \p{N}
    if (cp < 0x80) return cp >= '0' && cp <= '9';
    return collapsed_is(fl, CP_NUMBER);
}

// [0-9][0-9][0-9], leftmost first
static void split_digit_triples(const span *s, words *o) {
    for (size_t pos = s->ini; pos + 3 <= s->end;) {
        bool triple = true;
        for (size_t k = 0; k < 3; k++) triple = triple && s->cp[pos + k] >= '0' && s->cp[pos + k] <= '9';
        if (!triple) {
            pos++;
            continue;
        }
        emit(o, pos);
        emit(o, pos += 3);
    }
    emit(o, s->end);
}

typedef enum { PASS_GPT2, PASS_LLAMA3, PASS_QWEN2, PASS_PUNCT_RUNS, PASS_NUMBER_RUNS, PASS_DIGIT_TRIPLES, PASS_END } pass;

static void split(pass p, const span *s, words *o) {
    switch (p) {
    case PASS_GPT2: split_gpt2(s, o); break;
    case PASS_LLAMA3: split_llama3(s, o, 3); break;
    case PASS_QWEN2: split_llama3(s, o, 1); break;
    case PASS_PUNCT_RUNS: split_runs(s, o, default_punct); break;
    case PASS_NUMBER_RUNS: split_runs(s, o, default_number); break;
    case PASS_DIGIT_TRIPLES: split_digit_triples(s, o); break;
    case PASS_END: break;
    }
}

// Each pre-tokenizer is a list of passes; each pass splits every word the
// previous one found.
static const pass PASSES[][5] = {
    [TK_PRE_DEFAULT] = {PASS_PUNCT_RUNS, PASS_GPT2, PASS_NUMBER_RUNS, PASS_DIGIT_TRIPLES, PASS_END},
    [TK_PRE_GPT2] = {PASS_GPT2, PASS_END},
    [TK_PRE_LLAMA3] = {PASS_LLAMA3, PASS_END},
    [TK_PRE_QWEN2] = {PASS_QWEN2, PASS_END},
};

// Splits w->cp[0, n) into words; their lengths end up in w->chunk[0, *n_words).
static int pretokenize(const seam_tokenizer *t, tk_work *w, size_t n, size_t *n_words, seam_error *e) {
    if (TK_GROW(w->chunk, w->cap_chunk, 1)) return tk_oom(e);
    w->chunk[0] = n;
    *n_words = 1;
    for (const pass *p = PASSES[t->pre]; *p != PASS_END; p++) {
        words o = {.len = w->chunk2, .cap = w->cap_chunk2};
        size_t start = 0;
        for (size_t i = 0; i < *n_words; i++) {
            span s = {w->cp, w->flags, start, start + w->chunk[i]};
            o.prev_end = start;
            split(*p, &s, &o);
            start = s.end;
        }
        w->chunk2 = w->chunk;  // swap: this pass's words become the input of the next
        w->cap_chunk2 = w->cap_chunk;
        w->chunk = o.len;
        w->cap_chunk = o.cap;
        *n_words = o.n;
        if (o.oom) return tk_oom(e);
    }
    return 0;
}

// ---------------------------------------------------------------- merging

// A pair may merge when "left right" is a merge; earlier merges go first.
static int bpe_pair(const seam_tokenizer *t, tk_work *w, const tk_symbol *l, const tk_symbol *r,
                    double *prio, seam_error *e) {
    size_t n = (size_t)l->n + 1 + (size_t)r->n;
    if (TK_GROW(w->key, w->cap_key, n)) return tk_oom(e);
    memcpy(w->key, l->text, (size_t)l->n);
    w->key[l->n] = ' ';
    memcpy(w->key + l->n + 1, r->text, (size_t)r->n);
    int rank = tk_strset_find(&t->merges, w->key, n);
    if (rank < 0) return 0;
    *prio = -(double)rank;
    return 1;
}

// One word, in its GPT-2 spelling in w->buf[0, n), to ids.
static int bpe_word(const seam_tokenizer *t, tk_work *w, size_t n, tk_ids *out, seam_error *e) {
    int id = t->ignore_merges ? tk_strset_find(&t->vocab, w->buf, n) : -1;
    if (id >= 0) return tk_push(out, id, e);
    if (tk_split_chars(w, w->buf, n, e) || tk_merge(t, w, bpe_pair, e)) return -1;
    for (int i = 0; i != -1; i = w->sym[i].next) {
        const tk_symbol *s = &w->sym[i];
        id = tk_strset_find(&t->vocab, s->text, (size_t)s->n);
        if (id >= 0) {
            if (tk_push(out, id, e)) return -1;
            continue;
        }
        // Not a token: llama.cpp looks up each byte of the spelling on its
        // own and drops those that are not tokens either.
        for (int j = 0; j < s->n; j++) {
            id = tk_strset_find(&t->vocab, s->text + j, 1);
            if (id >= 0 && tk_push(out, id, e)) return -1;
        }
    }
    return 0;
}

int tk_bpe_run(const seam_tokenizer *t, tk_work *w, const char *text, size_t len, tk_ids *out, seam_error *e) {
    if (TK_GROW(w->cp, w->cap_cp, len) || TK_GROW(w->flags, w->cap_flags, len)) return tk_oom(e);
    size_t n = 0;
    for (size_t i = 0; i < len; n++) {
        w->cp[n] = next_cp(text, len, &i);
        w->flags[n] = cp_flags(w->cp[n]);
    }
    size_t n_words = 0;
    if (pretokenize(t, w, n, &n_words, e)) return -1;
    for (size_t k = 0, start = 0; k < n_words; start += w->chunk[k++]) {
        // spell the word: code points -> UTF-8 bytes -> one GPT-2 character each
        if (TK_GROW(w->buf, w->cap_buf, 8 * w->chunk[k])) return tk_oom(e);
        size_t m = 0;
        for (size_t i = start; i < start + w->chunk[k]; i++) {
            uint8_t u[4];
            int nu = cp_utf8(w->cp[i], u);
            for (int j = 0; j < nu; j++) m += (size_t)cp_utf8(byte_cp(u[j]), (uint8_t *)w->buf + m);
        }
        if (bpe_word(t, w, m, out, e)) return -1;
    }
    return 0;
}

// ---------------------------------------------------------------- loading

// tokenizer.ggml.pre names llama.cpp maps to the regex families seam has.
static const struct {
    const char *name;
    tk_pre pre;
    bool llama3;  // llama.cpp also sets ignore_merges and add_bos for these
} PRE_NAMES[] = {
    {"default", TK_PRE_DEFAULT, false},
    {"llama3", TK_PRE_LLAMA3, true}, {"llama-v3", TK_PRE_LLAMA3, true}, {"llama-bpe", TK_PRE_LLAMA3, true},
    {"falcon3", TK_PRE_LLAMA3, true}, {"falcon-h1", TK_PRE_LLAMA3, true}, {"pixtral", TK_PRE_LLAMA3, true},
    {"midm-2.0", TK_PRE_LLAMA3, true}, {"lfm2", TK_PRE_LLAMA3, true}, {"jina-v5-nano", TK_PRE_LLAMA3, true},
    {"dbrx", TK_PRE_LLAMA3, false}, {"smaug-bpe", TK_PRE_LLAMA3, false},
    {"qwen2", TK_PRE_QWEN2, false}, {"deepseek-r1-qwen", TK_PRE_QWEN2, false}, {"kormo", TK_PRE_QWEN2, false},
    {"f2llmv2", TK_PRE_QWEN2, false}, {"megrez", TK_PRE_QWEN2, false}, {"stablelm2", TK_PRE_QWEN2, false},
    {"hunyuan", TK_PRE_QWEN2, false}, {"solar-open", TK_PRE_QWEN2, false},
    {"gpt-2", TK_PRE_GPT2, false}, {"phi-2", TK_PRE_GPT2, false}, {"gigachat", TK_PRE_GPT2, false},
    {"a.x-4.0", TK_PRE_GPT2, false}, {"mellum", TK_PRE_GPT2, false}, {"exaone4", TK_PRE_GPT2, false},
    {"roberta-bpe", TK_PRE_GPT2, false}, {"mpt", TK_PRE_GPT2, false}, {"olmo", TK_PRE_GPT2, false},
    {"jais", TK_PRE_GPT2, false}, {"trillion", TK_PRE_GPT2, false}, {"granite-docling", TK_PRE_GPT2, false},
};

int tk_bpe_pre(seam_tokenizer *t, const gguf_file *f, seam_error *e) {
    gguf_str pre = {0, ""};
    if (gguf_find_kv(f, "tokenizer.ggml.pre") && gguf_get_str(f, "tokenizer.ggml.pre", &pre, e)) return -1;
    t->pre = TK_PRE_DEFAULT;  // also when the key is missing, as in llama.cpp
    if (pre.len == 0) return 0;
    for (size_t i = 0; i < sizeof PRE_NAMES / sizeof *PRE_NAMES; i++) {
        if (gguf_str_eq(pre, PRE_NAMES[i].name)) {
            t->pre = PRE_NAMES[i].pre;
            t->ignore_merges = t->add_bos = PRE_NAMES[i].llama3;
            return 0;
        }
    }
    return seam_fail(e, "tokenizer.ggml.pre: pre-tokenizer '%.*s' is not one seam implements (qwen2, llama3, gpt-2 and default families)",
                     (int)(pre.len > 64 ? 64 : pre.len), pre.ptr);
}
