// tokenizer.c — loading a GGUF vocabulary, special tokens, SentencePiece,
// and the API: encoding and pieces. The byte-level BPE specifics (Unicode
// classes, pre-tokenizers, the GPT-2 byte spelling) are in tokenizer_bpe.c;
// the merge engine both use, and the string set, in tokenizer_merge.c.
//
// Encoding, as llama.cpp does it:
//   1. partition: the text is cut around every occurrence of a special token
//      (longest first); control tokens only when parse_special.
//   2. each remaining run of text is tokenized on its own: SPM runs whole,
//      BPE runs word by word after the pre-tokenizer.
//   3. merging: the run starts as one symbol per UTF-8 character; the best
//      adjacent pair (highest score, or lowest merge rank) joins until no pair
//      is a token (SPM) or a merge (BPE). Ties go to the leftmost pair.
#include "text/tokenizer.h"

#include "text/tokenizer_bpe.h"
#include "text/tokenizer_merge.h"
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

// ---------------------------------------------------------------- SentencePiece

static const char SPM_SPACE[] = "\xe2\x96\x81";  // U+2581 '▁', SPM's spelling of ' '

// A pair may merge when the joined text is a token; better tokens score higher.
static int spm_pair(const seam_tokenizer *t, tk_work *w, const tk_symbol *l, const tk_symbol *r,
                    double *prio, seam_error *e) {
    int id = tk_strset_find(&t->vocab, l->text, (size_t)(l->n + r->n));
    if (id < 0) return 0;
    *prio = t->score[id];
    return 1;
}

// Byte fallback: <0xNN>, or failing that the byte itself as a token.
static int spm_byte_token(const seam_tokenizer *t, uint8_t byte, seam_error *e) {
    char hex[7];
    snprintf(hex, sizeof hex, "<0x%02X>", byte);
    int id = tk_strset_find(&t->vocab, hex, 6);
    if (id < 0) id = tk_strset_find(&t->vocab, (const char *)&byte, 1);
    if (id < 0) return seam_fail(e, "tokenizer: byte 0x%02X has no token (neither <0x%02X> nor the byte itself) in this vocabulary", byte, byte);
    return id;
}

static int spm_run(const seam_tokenizer *t, tk_work *w, const char *raw, size_t len, bool prefix_space,
                   tk_ids *out, seam_error *e) {
    // the run as SentencePiece sees it: optional leading space, ' ' -> '▁'
    if (TK_GROW(w->buf, w->cap_buf, 3 * (len + 1))) return tk_oom(e);
    size_t n = 0;
    if (prefix_space) {
        memcpy(w->buf, SPM_SPACE, 3);
        n = 3;
    }
    for (size_t i = 0; i < len; i++) {
        if (raw[i] == ' ') {
            memcpy(w->buf + n, SPM_SPACE, 3);
            n += 3;
        } else {
            w->buf[n++] = raw[i];
        }
    }
    if (tk_split_chars(w, w->buf, n, e) || tk_merge(t, w, spm_pair, e)) return -1;
    for (int i = 0; i != -1; i = w->sym[i].next) {
        const tk_symbol *s = &w->sym[i];
        int id = tk_strset_find(&t->vocab, s->text, (size_t)s->n);
        if (id >= 0) {
            if (tk_push(out, id, e)) return -1;
            continue;
        }
        for (int j = 0; j < s->n; j++) {
            int b = spm_byte_token(t, (uint8_t)s->text[j], e);
            if (b < 0 || tk_push(out, b, e)) return -1;
        }
    }
    return 0;
}

// ---------------------------------------------------------------- loading

// Token text that llama.cpp gives a role, whatever the file's token type says.
static const char *const EOT_TEXT[] = {
    "<|eot_id|>", "<|im_end|>", "<|end|>", "<end_of_turn>", "<|endoftext|>", "<|end_of_text|>",
    "<EOT>", "_<EOT>", "[EOT]", "<\xef\xbd\x9c" "end\xe2\x96\x81of\xe2\x96\x81sentence\xef\xbd\x9c>",
    "<end_of_utterance>", NULL};
static const char *const EOM_TEXT[] = {"<|eom_id|>", NULL};
static const char *const FIM_PRE_TEXT[] = {
    "<|fim_prefix|>", "<fim-prefix>", "<fim_prefix>", "<\xef\xbd\x9c" "fim\xe2\x96\x81" "begin\xef\xbd\x9c>",
    "<PRE>", "\xe2\x96\x81<PRE>", "<|code_prefix|>", "<|prefix|>", NULL};
static const char *const FIM_SUF_TEXT[] = {
    "<|fim_suffix|>", "<fim-suffix>", "<fim_suffix>", "<\xef\xbd\x9c" "fim\xe2\x96\x81hole\xef\xbd\x9c>",
    "<SUF>", "\xe2\x96\x81<SUF>", "<|code_suffix|>", "<|suffix|>", NULL};
static const char *const FIM_MID_TEXT[] = {
    "<|fim_middle|>", "<fim-middle>", "<fim_middle>", "<\xef\xbd\x9c" "fim\xe2\x96\x81" "end\xef\xbd\x9c>",
    "<MID>", "\xe2\x96\x81<MID>", "<|code_middle|>", "<|middle|>", NULL};
static const char *const FIM_PAD_TEXT[] = {"<|fim_pad|>", "<fim-pad>", "<fim_pad>", "<PAD>", "[PAD]", NULL};
static const char *const FIM_REP_TEXT[] = {"<|fim_repo|>", "<|repo_name|>", "<fim-repo>", "<REPO>", "<reponame>", NULL};
static const char *const FIM_SEP_TEXT[] = {"<|file_sep|>", NULL};
static const char *const EOG_TEXT[] = {
    "<|eot_id|>", "<|im_end|>", "<|end|>", "<|return|>", "<|call|>", "<|flush|>", "<|calls|>",
    "<end_of_turn>", "<|endoftext|>", "</s>", "<|eom_id|>", "<EOT>", "_<EOT>", "[EOT]", "[EOS]",
    "<|end_of_text|>", "<end_of_utterance>", "<eos>", "<turn|>", "<|tool_response>",
    "<\xef\xbd\x9c" "end\xe2\x96\x81of\xe2\x96\x81sentence\xef\xbd\x9c>", "[e~[", NULL};

static int find_text(const seam_tokenizer *t, const char *s) {
    return tk_strset_find(&t->vocab, s, strlen(s));
}

// The lowest id whose text is in list, or -1. (llama.cpp takes the first it
// meets in a hash map; vocabularies hold one of each in practice.)
static int find_any(const seam_tokenizer *t, const char *const *list) {
    int best = -1;
    for (; *list; list++) {
        int id = find_text(t, *list);
        if (id >= 0 && (best < 0 || id < best)) best = id;
    }
    return best;
}

// An id from the file: a missing key keeps *id, an id out of range too
// (llama.cpp warns and keeps its default).
static int read_id(const gguf_file *f, const char *key, int n_vocab, int *id, seam_error *e) {
    if (!gguf_find_kv(f, key)) return 0;
    uint32_t v;
    if (gguf_get_u32(f, key, &v, e)) return -1;
    if (v < (uint32_t)n_vocab) *id = (int)v;
    return 0;
}

static int read_bool(const gguf_file *f, const char *key, bool *out, seam_error *e) {
    const gguf_kv *kv = gguf_find_kv(f, key);
    if (!kv) return 0;
    if (kv->type != GGUF_TYPE_BOOL) return seam_fail(e, "%s: expected a bool, found value type %u", key, kv->type);
    *out = kv->v.b;
    return 0;
}

// A typed array of at least n elements, or NULL when the key is absent.
static int read_array(const gguf_file *f, const char *key, uint32_t type, uint32_t type2, uint64_t n,
                      const gguf_kv **out, seam_error *e) {
    const gguf_kv *kv = gguf_find_kv(f, key);
    *out = NULL;
    if (!kv) return 0;
    if (kv->type != GGUF_TYPE_ARRAY || (kv->v.arr.type != type && kv->v.arr.type != type2))
        return seam_fail(e, "%s: unexpected value type (want an array of %s)", key,
                         type == GGUF_TYPE_STRING ? "strings" : "numbers");
    if (kv->v.arr.n < n)
        return seam_fail(e, "%s: %llu entries for %llu tokens", key, (unsigned long long)kv->v.arr.n,
                         (unsigned long long)n);
    *out = kv;
    return 0;
}

static int32_t arr_i32(const gguf_kv *kv, uint64_t i) {
    int32_t v;
    memcpy(&v, kv->v.arr.data + 4 * i, 4);
    return v;
}

static int load_tokens(seam_tokenizer *t, const gguf_file *f, seam_error *e) {
    const gguf_kv *tokens, *scores, *types;
    if (read_array(f, "tokenizer.ggml.tokens", GGUF_TYPE_STRING, GGUF_TYPE_STRING, 0, &tokens, e)) return -1;
    if (!tokens) return seam_fail(e, "tokenizer.ggml.tokens: missing; the file has no vocabulary");
    if (tokens->v.arr.n == 0 || tokens->v.arr.n > INT32_MAX / 2)
        return seam_fail(e, "tokenizer.ggml.tokens: %llu tokens is not a vocabulary size seam accepts",
                         (unsigned long long)tokens->v.arr.n);
    uint32_t n = (uint32_t)tokens->v.arr.n;
    if (read_array(f, "tokenizer.ggml.scores", GGUF_TYPE_FLOAT32, GGUF_TYPE_INT32, n, &scores, e) ||
        read_array(f, "tokenizer.ggml.token_type", GGUF_TYPE_INT32, GGUF_TYPE_INT32, n, &types, e))
        return -1;

    t->n_vocab = (int)n;
    t->score = calloc(n, sizeof *t->score);
    t->attr = calloc(n, sizeof *t->attr);
    t->eog = calloc(n, sizeof *t->eog);
    if (!t->score || !t->attr || !t->eog || tk_strset_init(&t->vocab, n)) return tk_oom(e);
    for (uint32_t i = 0; i < n; i++) {
        gguf_str s = tokens->v.arr.strs[i];
        char empty[32];
        if (s.len == 0) {  // llama.cpp names empty entries so that they stay distinct
            s.len = (uint64_t)snprintf(empty, sizeof empty, "[EMPTY_%u]", i);
            s.ptr = empty;
        }
        int first = tk_strset_add(&t->vocab, s.ptr, s.len);
        if (first < 0) return tk_oom(e);
        if (first != (int)i)
            return seam_fail(e, "tokenizer.ggml.tokens: token %u repeats token %d ('%.*s'); llama.cpp refuses such a vocabulary too",
                             i, first, (int)(s.len > 64 ? 64 : s.len), s.ptr);
        if (scores && scores->v.arr.type == GGUF_TYPE_INT32) {
            t->score[i] = (float)arr_i32(scores, i);
        } else if (scores) {
            memcpy(&t->score[i], scores->v.arr.data + 4 * i, 4);
        }
        // GGUF token types: 1 normal, 2 unknown, 3 control, 4 user-defined,
        // 5 unused, 6 byte; anything else is undefined and renders as nothing.
        static const uint8_t attr_of_type[7] = {0, TK_NORMAL, TK_UNKNOWN, TK_CONTROL, TK_USER_DEFINED, TK_UNUSED, TK_BYTE};
        int32_t type = types ? arr_i32(types, i) : 1;
        t->attr[i] = (type >= 0 && type < 7) ? attr_of_type[type] : 0;
    }
    return 0;
}

static int load_merges(seam_tokenizer *t, const gguf_file *f, seam_error *e) {
    const gguf_kv *merges;
    if (read_array(f, "tokenizer.ggml.merges", GGUF_TYPE_STRING, GGUF_TYPE_STRING, 0, &merges, e)) return -1;
    if (!merges) return seam_fail(e, "tokenizer.ggml.merges: missing; a gpt2 (BPE) vocabulary needs its merges");
    if (merges->v.arr.n > INT32_MAX / 2) return seam_fail(e, "tokenizer.ggml.merges: too many merges");
    uint32_t n = (uint32_t)merges->v.arr.n;
    if (tk_strset_init(&t->merges, n)) return tk_oom(e);
    // "left right", rank = position; a repeated merge keeps its first rank
    for (uint32_t i = 0; i < n; i++)
        if (tk_strset_add(&t->merges, merges->v.arr.strs[i].ptr, merges->v.arr.strs[i].len) < 0) return tk_oom(e);
    return 0;
}

static bool is_eog_text(const seam_tokenizer *t, const char *s) {
    int id = find_text(t, s);
    return id >= 0 && t->eog[id];
}

// Marks id as control, as llama.cpp does for tokens it recognises by text.
static void make_control(seam_tokenizer *t, int id) {
    if (id >= 0) t->attr[id] |= TK_CONTROL;
}

// The ids that end generation, and the control bits llama.cpp infers from
// token text (llama_vocab::impl::load, in its order).
static int load_special(seam_tokenizer *t, const gguf_file *f, seam_error *e) {
    int n = t->n_vocab;
    int eot = -1, eom = -1, fim[6] = {-1, -1, -1, -1, -1, -1};  // pre suf mid pad rep sep
    static const char *const fim_key[6] = {"fim_pre", "fim_suf", "fim_mid", "fim_pad", "fim_rep", "fim_sep"};
    static const char *const old_fim_key[3] = {"prefix", "suffix", "middle"};
    static const char *const *const fim_text[6] = {FIM_PRE_TEXT, FIM_SUF_TEXT, FIM_MID_TEXT,
                                                   FIM_PAD_TEXT, FIM_REP_TEXT, FIM_SEP_TEXT};
    if (t->bos >= n) t->bos = -1;
    if (t->eos >= n) t->eos = -1;
    if (read_id(f, "tokenizer.ggml.bos_token_id", n, &t->bos, e) ||
        read_id(f, "tokenizer.ggml.eos_token_id", n, &t->eos, e) ||
        read_id(f, "tokenizer.ggml.eot_token_id", n, &eot, e) ||
        read_id(f, "tokenizer.ggml.eom_token_id", n, &eom, e))
        return -1;
    char key[64];
    for (int i = 0; i < 6; i++) {
        snprintf(key, sizeof key, "tokenizer.ggml.%s_token_id", fim_key[i]);
        if (read_id(f, key, n, &fim[i], e)) return -1;
    }
    for (int i = 0; i < 3; i++) {  // deprecated names, read after the new ones
        snprintf(key, sizeof key, "tokenizer.ggml.%s_token_id", old_fim_key[i]);
        if (read_id(f, key, n, &fim[i], e)) return -1;
    }

    if (eot < 0) make_control(t, eot = find_any(t, EOT_TEXT));
    if (eom < 0) make_control(t, eom = find_any(t, EOM_TEXT));
    for (int i = 0; i < 6; i++)
        if (fim[i] < 0) make_control(t, fim[i] = find_any(t, fim_text[i]));

    for (int i = 3; i < 6; i++)
        if (fim[i] >= 0) t->eog[fim[i]] = true;
    for (const char *const *s = EOG_TEXT; *s; s++) {
        int id = find_text(t, *s);
        if (id >= 0) {
            t->eog[id] = true;
            make_control(t, id);
        }
    }
    // gpt-oss: llama.cpp always renders these
    static const char *const always_render[] = {"<|channel|>", "<|message|>", "<|start|>", "<|constrain|>", NULL};
    for (const char *const *s = always_render; *s; s++) {
        int id = find_text(t, *s);
        if (id >= 0) t->attr[id] = TK_USER_DEFINED;
    }
    if (t->eos >= 0) t->eog[t->eos] = true;
    if (eot >= 0) t->eog[eot] = true;
    if (eom >= 0) t->eog[eom] = true;

    // Exceptions llama.cpp makes for vocabularies where these are ordinary:
    // <|end|> next to <|return|>/<|call|> (o200k_harmony) or <|calls|>/<|flush|>
    // (solar-open), and </s> next to <|tool_response> (gemma4) or <|plamo:eos|>.
    int end = find_text(t, "<|end|>"), s_end = find_text(t, "</s>");
    bool has_call = is_eog_text(t, "<|call|>") || is_eog_text(t, "<|calls|>");
    if (end >= 0 && t->eog[end] && has_call && (is_eog_text(t, "<|return|>") || is_eog_text(t, "<|flush|>"))) {
        t->eog[end] = false;
        t->attr[end] = TK_USER_DEFINED;
    }
    if (s_end >= 0 && t->eog[s_end] && (is_eog_text(t, "<|tool_response>") || is_eog_text(t, "<|plamo:eos|>"))) {
        t->eog[s_end] = false;
        t->attr[s_end] = TK_NORMAL;
    }
    return 0;
}

typedef struct {
    size_t len;
    int32_t id;
} special_entry;

static int by_length_desc(const void *a, const void *b) {
    const special_entry *x = a, *y = b;
    if (x->len != y->len) return x->len > y->len ? -1 : 1;
    return (x->id > y->id) - (x->id < y->id);
}

// Tokens that are cut out of the text before tokenizing, longest first.
// (llama.cpp's std::sort leaves ties in no set order; seam puts lower ids
// first, which matters only for two equally long tokens that overlap.)
static int load_special_list(seam_tokenizer *t, seam_error *e) {
    special_entry *v = malloc((size_t)t->n_vocab * sizeof *v);
    t->special = malloc((size_t)t->n_vocab * sizeof *t->special);
    if (!v || !t->special) {
        free(v);
        return tk_oom(e);
    }
    for (int i = 0; i < t->n_vocab; i++)
        if (t->attr[i] & (TK_CONTROL | TK_USER_DEFINED | TK_UNKNOWN))
            v[t->n_special++] = (special_entry){tk_str_len(&t->vocab, (uint32_t)i), i};
    qsort(v, (size_t)t->n_special, sizeof *v, by_length_desc);
    for (int i = 0; i < t->n_special; i++) t->special[i] = v[i].id;
    free(v);
    return 0;
}

static int load_model(seam_tokenizer *t, const gguf_file *f, seam_error *e) {
    gguf_str model;
    if (gguf_get_str(f, "tokenizer.ggml.model", &model, e)) return -1;
    if (gguf_str_eq(model, "llama")) {
        t->kind = TK_SPM;
        t->bos = 1;
        t->eos = 2;
        t->add_bos = true;
        t->add_space_prefix = true;
    } else if (gguf_str_eq(model, "gpt2")) {
        t->kind = TK_BPE;
        t->bos = 11;
        t->eos = 11;
        if (tk_bpe_pre(t, f, e)) return -1;
    } else {
        return seam_fail(e, "tokenizer.ggml.model: '%.*s' is not a vocabulary seam reads ('gpt2' or 'llama')",
                         (int)(model.len > 64 ? 64 : model.len), model.ptr);
    }
    // llama.cpp gives phi-3 files special-token whitespace stripping by name
    const gguf_kv *name = gguf_find_kv(f, "general.name");
    if (name && name->type == GGUF_TYPE_STRING) {
        char lower[256];
        size_t len = name->v.str.len < sizeof lower - 1 ? name->v.str.len : sizeof lower - 1;
        for (size_t i = 0; i < len; i++) lower[i] = (char)tolower((unsigned char)name->v.str.ptr[i]);
        lower[len] = '\0';
        if (strstr(lower, "phi-3") || strstr(lower, "phi3"))
            return seam_fail(e, "general.name '%s': phi-3 vocabularies need llama.cpp's RSTRIP rules, which seam does not implement", lower);
    }
    return read_bool(f, "tokenizer.ggml.add_space_prefix", &t->add_space_prefix, e);
}

int tokenizer_load(seam_tokenizer **out, const gguf_file *f, seam_error *e) {
    *out = NULL;
    seam_tokenizer *t = calloc(1, sizeof *t);
    if (!t) return tk_oom(e);
    if (load_model(t, f, e) || load_tokens(t, f, e) || (t->kind == TK_BPE && load_merges(t, f, e)) ||
        load_special(t, f, e) || read_bool(f, "tokenizer.ggml.add_bos_token", &t->add_bos, e) ||
        read_bool(f, "tokenizer.ggml.add_eos_token", &t->add_eos, e) || load_special_list(t, e)) {
        tokenizer_free(t);
        return -1;
    }
    *out = t;
    return 0;
}

void tokenizer_free(seam_tokenizer *t) {
    if (!t) return;
    tk_strset_free(&t->vocab);
    tk_strset_free(&t->merges);
    free(t->score);
    free(t->attr);
    free(t->eog);
    free(t->special);
    free(t);
}

int tokenizer_n_vocab(const seam_tokenizer *t) { return t->n_vocab; }
int tokenizer_bos(const seam_tokenizer *t) { return t->bos; }
int tokenizer_eos(const seam_tokenizer *t) { return t->eos; }

bool tokenizer_is_eog(const seam_tokenizer *t, int id) {
    return id >= 0 && id < t->n_vocab && t->eog[id];
}

// ---------------------------------------------------------------- encoding

// A piece of the input: a special token, or a run of text still to tokenize.
typedef struct {
    int32_t token;     // -1 for text
    size_t off, len;   // the run of text
} fragment;

typedef struct {
    fragment *v;
    size_t n, cap;
} fragments;

static int frag_push(fragments *f, fragment x, seam_error *e) {
    if (TK_GROW(f->v, f->cap, f->n + 1)) return tk_oom(e);
    f->v[f->n++] = x;
    return 0;
}

// Cuts every occurrence of every special token out of the text runs, one
// token at a time, longest token first (llama.cpp's tokenizer_st_partition).
static int partition(const seam_tokenizer *t, const char *text, size_t len, bool parse_special,
                     fragments *cur, seam_error *e) {
    fragments next = {0};
    cur->n = 0;
    if (len > 0 && frag_push(cur, (fragment){-1, 0, len}, e)) return -1;
    for (int k = 0; k < t->n_special; k++) {
        int id = t->special[k];
        if (!parse_special && (t->attr[id] & (TK_CONTROL | TK_UNKNOWN))) continue;
        const char *s = tk_str(&t->vocab, (uint32_t)id);
        size_t n = tk_str_len(&t->vocab, (uint32_t)id);
        next.n = 0;
        for (size_t i = 0; i < cur->n; i++) {
            fragment fr = cur->v[i];
            while (fr.token < 0 && fr.len >= n) {
                const char *hit = memmem(text + fr.off, fr.len, s, n);
                if (!hit) break;
                size_t at = (size_t)(hit - text);
                if (at > fr.off && frag_push(&next, (fragment){-1, fr.off, at - fr.off}, e)) goto fail;
                if (frag_push(&next, (fragment){id, at, n}, e)) goto fail;
                fr.len -= at + n - fr.off;
                fr.off = at + n;
            }
            if ((fr.token >= 0 || fr.len > 0) && frag_push(&next, fr, e)) goto fail;
        }
        fragments swap = *cur;
        *cur = next;
        next = swap;
    }
    free(next.v);
    return 0;
fail:
    free(next.v);
    return -1;
}

static int push_added(const seam_tokenizer *t, int id, const char *what, tk_ids *out, seam_error *e) {
    if (id < 0) return seam_fail(e, "tokenizer: the vocabulary asks for %s but has no %s token", what, what);
    return tk_push(out, id, e);
}

int tokenizer_encode(const seam_tokenizer *t, const char *text, size_t len, bool add_special,
                     bool parse_special, int32_t **ids, int *n_ids, seam_error *e) {
    tk_ids out = {0};
    tk_work w = {0};
    fragments frags = {0};
    *ids = NULL;
    *n_ids = 0;
    if (len > INT32_MAX / 4) {
        seam_fail(e, "tokenizer: %zu bytes of text is more than seam tokenizes at once", len);
        goto fail;
    }
    if (partition(t, text, len, parse_special, &frags, e)) goto fail;
    if (add_special && t->add_bos && push_added(t, t->bos, "BOS", &out, e)) goto fail;
    bool prev_special = true;  // SPM: a run at the start or after a special token gets a space prefix
    for (size_t i = 0; i < frags.n; i++) {
        fragment fr = frags.v[i];
        int rc;
        if (fr.token >= 0) {
            rc = tk_push(&out, fr.token, e);
        } else if (t->kind == TK_SPM) {
            rc = spm_run(t, &w, text + fr.off, fr.len, t->add_space_prefix && prev_special, &out, e);
        } else {
            rc = tk_bpe_run(t, &w, text + fr.off, fr.len, &out, e);
        }
        if (rc) goto fail;
        prev_special = fr.token >= 0;
    }
    if (add_special && t->add_eos && push_added(t, t->eos, "EOS", &out, e)) goto fail;
    tk_work_free(&w);
    free(frags.v);
    *ids = out.ids;
    *n_ids = out.n;
    return 0;
fail:
    tk_work_free(&w);
    free(frags.v);
    free(out.ids);
    return -1;
}

// ---------------------------------------------------------------- pieces

int tokenizer_piece(const seam_tokenizer *t, int id, char *buf, int len, bool render_special) {
    if (id < 0 || id >= t->n_vocab) return 0;
    uint8_t attr = t->attr[id];
    if (!render_special && (attr & (TK_UNKNOWN | TK_CONTROL))) return 0;
    const char *s = tk_str(&t->vocab, (uint32_t)id);
    size_t n = tk_str_len(&t->vocab, (uint32_t)id);
    tk_piece p = {buf, len > 0 ? (size_t)len : 0, 0};
    if (attr & (TK_UNKNOWN | TK_CONTROL | TK_USER_DEFINED)) {
        tk_put(&p, s, n);
    } else if ((attr & TK_NORMAL) && t->kind == TK_SPM) {
        for (size_t i = 0; i < n;) {
            bool space = n - i >= 3 && memcmp(s + i, SPM_SPACE, 3) == 0;
            tk_put(&p, space ? " " : s + i, 1);
            i += space ? 3 : 1;
        }
    } else if (attr & TK_NORMAL) {
        tk_bpe_unspell(s, n, &p);
    } else if (attr & TK_BYTE) {
        // "<0xNN>": the two characters after "<0x", read as strtol would
        uint8_t byte = 0;
        for (size_t i = 3; i < 5 && i < n && isxdigit((unsigned char)s[i]); i++)
            byte = (uint8_t)(byte * 16 + (isdigit((unsigned char)s[i]) ? s[i] - '0' : (tolower((unsigned char)s[i]) - 'a' + 10)));
        tk_put(&p, &byte, 1);
    }
    if (p.n <= p.cap) return (int)p.n;
    return p.n > INT32_MAX ? -INT32_MAX : -(int)p.n;
}
