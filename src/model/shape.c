// shape.c — shape files, the tensor table seam-synth writes, and a model
// bound over that table without weights.
#include "model/shape.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "numeric/quant.h"

// ---------------------------------------------------------------- shape file

// Keys after "{arch}." that a shape file may set (GGUF's own names).
static const char *ARCH_KEYS[] = {
    "block_count",          "embedding_length",    "feed_forward_length",
    "attention.head_count", "attention.head_count_kv", "attention.key_length",
    "attention.value_length", "attention.layer_norm_rms_epsilon", "rope.freq_base",
    "context_length",       "expert_count",        "expert_used_count",
    "expert_feed_forward_length", "attention.sliding_window",
};

// Which optional keys the file set (the rest take their defaults).
typedef struct {
    int kv_heads, head_dim, ctx, eps, rope;
} keys_set;

static int parse_int(const char *v, int lo, int hi, int *out) {
    char *end;
    errno = 0;
    long x = strtol(v, &end, 10);
    if (errno || *end || end == v || x < lo || x > hi) return -1;
    *out = (int)x;
    return 0;
}

static int set_arch_key(seam_shape *sh, keys_set *set, const char *k, const char *v) {
    int iv = 0;
    float fv = strtof(v, NULL);
    if (!strcmp(k, "attention.layer_norm_rms_epsilon")) return sh->rms_eps = fv, set->eps = 1, fv > 0 ? 0 : -1;
    if (!strcmp(k, "rope.freq_base")) return sh->rope_base = fv, set->rope = 1, fv > 0 ? 0 : -1;
    if (parse_int(v, 1, 1 << 24, &iv)) return -1;
    if (!strcmp(k, "block_count")) sh->n_layers = iv;
    else if (!strcmp(k, "embedding_length")) sh->n_embd = iv;
    else if (!strcmp(k, "feed_forward_length")) sh->n_ff = iv;
    else if (!strcmp(k, "attention.head_count")) sh->n_heads = iv;
    else if (!strcmp(k, "attention.head_count_kv")) sh->n_kv_heads = iv, set->kv_heads = 1;
    else if (!strcmp(k, "attention.key_length") || !strcmp(k, "attention.value_length"))
        sh->head_dim = iv, set->head_dim = 1;
    else if (!strcmp(k, "context_length")) sh->n_ctx = iv, set->ctx = 1;
    else if (!strcmp(k, "expert_count")) sh->n_expert = iv;
    else if (!strcmp(k, "expert_used_count")) sh->n_expert_used = iv;
    else if (!strcmp(k, "expert_feed_forward_length")) sh->n_ff_exp = iv;
    else if (!strcmp(k, "attention.sliding_window")) sh->n_swa = iv;
    return 0;
}

int shape_read(const char *path, seam_shape *sh, seam_error *e) {
    FILE *f = fopen(path, "r");
    if (!f) return seam_fail(e, "cannot open shape file %s: %s", path, strerror(errno));
    memset(sh, 0, sizeof *sh);
    keys_set set = {0};
    char line[512];
    int lineno = 0, rc = 0;
    char pending[64][2][128];  // arch keys seen before general.architecture
    int n_pending = 0;
    while (rc == 0 && fgets(line, sizeof line, f)) {
        lineno++;
        char *hash = strchr(line, '#');
        if (hash) *hash = 0;
        char *s = seam_trim(line);
        if (!*s) continue;
        char *eq = strchr(s, '=');
        if (!eq) {
            rc = seam_fail(e, "%s:%d: expected 'key = value'", path, lineno);
            break;
        }
        *eq = 0;
        char *k = seam_trim(s), *v = seam_trim(eq + 1);
        if (!strcmp(k, "general.architecture")) snprintf(sh->arch, sizeof sh->arch, "%s", v);
        else if (!strcmp(k, "general.name")) snprintf(sh->name, sizeof sh->name, "%s", v);
        else if (!strcmp(k, "vocab_size")) rc = parse_int(v, 16, 1 << 24, &sh->n_vocab);
        else if (!strcmp(k, "seed")) sh->seed = strtoull(v, NULL, 10);
        else if (!strcmp(k, "ftype")) snprintf(sh->ftype, sizeof sh->ftype, "%s", v);
        else if (!strcmp(k, "tie_word_embeddings")) sh->tied = !strcmp(v, "true") || !strcmp(v, "1");
        else if (!strncmp(k, "tensor_type.", 12)) {
            const int t = ggml_type_find(v);
            if (t < 0 || sh->n_type_of == 8 || strlen(k + 12) >= sizeof sh->type_of[0].name) rc = -1;
            else {
                snprintf(sh->type_of[sh->n_type_of].name, sizeof sh->type_of[0].name, "%s", k + 12);
                sh->type_of[sh->n_type_of++].type = (uint32_t)t;
            }
        } else if (strchr(k, '.') && n_pending < 64) {
            snprintf(pending[n_pending][0], 128, "%s", k);
            snprintf(pending[n_pending][1], 128, "%s", v);
            n_pending++;
        } else {
            rc = seam_fail(e, "%s:%d: unknown key '%s'", path, lineno, k);
            break;
        }
        if (rc) seam_fail(e, "%s:%d: bad value '%s' for '%s'", path, lineno, v, k);
    }
    fclose(f);
    if (rc) return -1;
    if (strcmp(sh->arch, "llama") && strcmp(sh->arch, "qwen2") && strcmp(sh->arch, "qwen3") &&
        strcmp(sh->arch, "qwen3moe") && strcmp(sh->arch, "gemma3"))
        return seam_fail(e, "%s: general.architecture must be llama, qwen2, qwen3, qwen3moe or gemma3 (got '%s')",
                         path, sh->arch);
    size_t alen = strlen(sh->arch);
    for (int i = 0; i < n_pending; i++) {
        const char *k = pending[i][0];
        int known = 0;
        if (!strncmp(k, sh->arch, alen) && k[alen] == '.')
            for (size_t j = 0; j < sizeof ARCH_KEYS / sizeof *ARCH_KEYS; j++)
                if (!strcmp(k + alen + 1, ARCH_KEYS[j])) known = 1;
        if (!known) return seam_fail(e, "%s: unknown key '%s'", path, k);
        if (set_arch_key(sh, &set, k + alen + 1, pending[i][1]))
            return seam_fail(e, "%s: bad value '%s' for '%s'", path, pending[i][1], k);
    }
    const char *missing = !sh->n_layers ? "block_count" : !sh->n_embd ? "embedding_length"
                          : !sh->n_ff ? "feed_forward_length" : !sh->n_heads ? "attention.head_count"
                          : !sh->n_vocab ? "vocab_size" : !sh->ftype[0] ? "ftype" : NULL;
    if (!missing && !strcmp(sh->arch, "gemma3") && !sh->n_swa) missing = "attention.sliding_window";
    if (!missing && !strcmp(sh->arch, "qwen3moe"))
        missing = !sh->n_expert ? "expert_count" : !sh->n_expert_used ? "expert_used_count"
                  : !sh->n_ff_exp ? "expert_feed_forward_length" : NULL;
    if (missing) return seam_fail(e, "%s: missing key '%s'", path, missing);
    if (sh->n_expert_used > sh->n_expert) return seam_fail(e, "%s: expert_used_count exceeds expert_count", path);
    if (!set.kv_heads) sh->n_kv_heads = sh->n_heads;
    if (!set.head_dim) sh->head_dim = sh->n_embd / sh->n_heads;
    if (!set.ctx) sh->n_ctx = 4096;
    if (!set.eps) sh->rms_eps = 1e-6f;
    if (!set.rope) sh->rope_base = 10000.0f;
    if (sh->n_heads % sh->n_kv_heads || sh->head_dim % 2)
        return seam_fail(e, "%s: head_count must be a multiple of head_count_kv and key_length even", path);
    if (!sh->name[0]) snprintf(sh->name, sizeof sh->name, "seam synthetic %s", sh->arch);
    return 0;
}

// ---------------------------------------------------------------- tensor types

// llama.cpp's use_more_bits: the first and last eighth of the layers, and
// every third layer between, get more bits in Q4_K_M.
static int use_more_bits(int il, int n) { return il < n / 8 || il >= 7 * n / 8 || (il - n / 8) % 3 == 2; }

// Falls back to a 32-wide type when a row is not a multiple of 256, as
// llama.cpp does (Q4_K -> Q5_0, Q6_K -> Q8_0).
static uint32_t fit_row(uint32_t type, int64_t cols) {
    if (cols % QK_K == 0) return type;
    if (type == GGML_TYPE_Q4_K) return GGML_TYPE_Q5_0;
    if (type == GGML_TYPE_Q6_K) return GGML_TYPE_Q8_0;
    return type;
}

static int pick_type(const char *ftype, shape_tensor_class cls, int il, int n_layers, int64_t cols, uint32_t *out) {
    if (cls == T_NORM) return *out = GGML_TYPE_F32, 0;
    uint32_t t;
    if (!strcmp(ftype, "F32")) t = GGML_TYPE_F32;
    else if (!strcmp(ftype, "F16")) t = GGML_TYPE_F16;
    else if (!strcmp(ftype, "BF16")) t = GGML_TYPE_BF16;
    else if (!strcmp(ftype, "Q8_0")) t = GGML_TYPE_Q8_0;
    else if (!strcmp(ftype, "Q4_0")) t = GGML_TYPE_Q4_0;
    else if (!strcmp(ftype, "Q4_K_M")) {
        t = GGML_TYPE_Q4_K;
        if (cls == T_OUTPUT) t = GGML_TYPE_Q6_K;
        if ((cls == T_ATTN_V || cls == T_FFN_DOWN) && use_more_bits(il, n_layers)) t = GGML_TYPE_Q6_K;
    } else return -1;
    *out = fit_row(t, cols);
    return 0;
}

static uint32_t ftype_id(const char *ftype) {  // llama_ftype numbering, for general.file_type
    if (!strcmp(ftype, "F32")) return 0;
    if (!strcmp(ftype, "F16")) return 1;
    if (!strcmp(ftype, "Q4_0")) return 2;
    if (!strcmp(ftype, "Q8_0")) return 7;
    if (!strcmp(ftype, "Q4_K_M")) return 15;
    return 32;  // BF16
}

// ---------------------------------------------------------------- the table

// used[i]: some tensor has tensor_type override i's name (a typo must not
// pass unnoticed).
static int add_tensor(shape_tensor *ts, int *n, const seam_shape *sh, int *used, const char *name,
                      shape_tensor_class cls, int il, int64_t rows, int64_t cols, float scale, seam_error *e) {
    shape_tensor *t = &ts[(*n)++];
    snprintf(t->name, sizeof t->name, "%s", name);
    t->cls = cls, t->layer = il, t->rows = rows, t->cols = cols, t->experts = 1;
    t->center = cls == T_NORM ? 1.0f : 0.0f;
    t->scale = scale;
    if (pick_type(sh->ftype, cls, il, sh->n_layers, cols, &t->type))
        return seam_fail(e, "ftype '%s' is not one of F32, F16, BF16, Q8_0, Q4_0, Q4_K_M", sh->ftype);
    const char *base = name;  // the name without "blk.N." and ".weight"
    if (!strncmp(base, "blk.", 4)) base = strchr(base + 4, '.') + 1;
    const size_t len = strlen(base) - (strstr(base, ".weight") ? strlen(".weight") : 0);
    for (int i = 0; i < sh->n_type_of; i++) {
        if (strlen(sh->type_of[i].name) != len || strncmp(base, sh->type_of[i].name, len)) continue;
        uint32_t block, bytes;
        t->type = sh->type_of[i].type;
        used[i] = 1;
        if (!ggml_type_layout(t->type, &block, &bytes) || cols % block)
            return seam_fail(e, "tensor_type.%s = %s: rows of %lld weights are not whole %s blocks", sh->type_of[i].name,
                             ggml_type_name(t->type), (long long)cols, ggml_type_name(t->type));
    }
    return 0;
}

int shape_tensors(const seam_shape *sh, shape_tensor **out, int *n_out, seam_error *e) {
    const int L = sh->n_layers, E = sh->n_embd, F = sh->n_ff;
    const int64_t q_dim = (int64_t)sh->n_heads * sh->head_dim, kv_dim = (int64_t)sh->n_kv_heads * sh->head_dim;
    // Scales: projections 1/sqrt(fan_in) keep each block's output near unit
    // size; the head gets logits with a spread of a few units.
    const int n_max = 3 + 15 * L;
    shape_tensor *ts = calloc((size_t)n_max, sizeof *ts);
    if (!ts) return seam_fail(e, "out of memory for %d tensors", n_max);
    int n = 0, rc = 0, used[8] = {0};
    char name[64];
    const float embd_scale = sh->tied ? 3.0f / sqrtf((float)E) : 1.0f;
    rc |= add_tensor(ts, &n, sh, used, "token_embd.weight", sh->tied ? T_OUTPUT : T_EMBD, 0, sh->n_vocab, E, embd_scale, e);
    for (int il = 0; il < L && !rc; il++) {
#define T(suffix, cls, rows, cols, scale) \
    (snprintf(name, sizeof name, "blk.%d." suffix, il), add_tensor(ts, &n, sh, used, name, cls, il, rows, cols, scale, e))
        rc |= T("attn_norm.weight", T_NORM, 1, E, 0.1f);
        rc |= T("attn_q.weight", T_ATTN_QKO, q_dim, E, 1.0f / sqrtf((float)E));
        rc |= T("attn_k.weight", T_ATTN_QKO, kv_dim, E, 1.0f / sqrtf((float)E));
        rc |= T("attn_v.weight", T_ATTN_V, kv_dim, E, 1.0f / sqrtf((float)E));
        if (!strcmp(sh->arch, "qwen2")) {
            rc |= T("attn_q.bias", T_NORM, 1, q_dim, 0.1f);
            ts[n - 1].center = 0.0f;
            rc |= T("attn_k.bias", T_NORM, 1, kv_dim, 0.1f);
            ts[n - 1].center = 0.0f;
            rc |= T("attn_v.bias", T_NORM, 1, kv_dim, 0.1f);
            ts[n - 1].center = 0.0f;
        }
        const bool gemma3 = !strcmp(sh->arch, "gemma3");
        if (!strcmp(sh->arch, "qwen3") || !strcmp(sh->arch, "qwen3moe") || gemma3) {
            rc |= T("attn_q_norm.weight", T_NORM, 1, sh->head_dim, 0.1f);
            rc |= T("attn_k_norm.weight", T_NORM, 1, sh->head_dim, 0.1f);
        }
        rc |= T("attn_output.weight", T_ATTN_QKO, E, q_dim, 1.0f / sqrtf((float)q_dim));
        if (gemma3) rc |= T("post_attention_norm.weight", T_NORM, 1, E, 0.1f);
        rc |= T("ffn_norm.weight", T_NORM, 1, E, 0.1f);
        if (sh->n_expert) {
            // Router logits spread by ~4 so that the top-k experts are well
            // separated from the rest: a near-tie would let rounding pick a
            // different expert in two engines.
            const int64_t X = sh->n_expert, FX = sh->n_ff_exp;
            rc |= T("ffn_gate_inp.weight", T_NORM, X, E, 4.0f / sqrtf((float)E));
            ts[n - 1].center = 0.0f;
            rc |= T("ffn_gate_exps.weight", T_FFN_GU, X * FX, E, 1.0f / sqrtf((float)E));
            ts[n - 1].experts = X;
            rc |= T("ffn_up_exps.weight", T_FFN_GU, X * FX, E, 1.0f / sqrtf((float)E));
            ts[n - 1].experts = X;
            rc |= T("ffn_down_exps.weight", T_FFN_DOWN, X * E, FX, 1.0f / sqrtf((float)FX));
            ts[n - 1].experts = X;
        } else {
            rc |= T("ffn_gate.weight", T_FFN_GU, F, E, 1.0f / sqrtf((float)E));
            rc |= T("ffn_up.weight", T_FFN_GU, F, E, 1.0f / sqrtf((float)E));
            rc |= T("ffn_down.weight", T_FFN_DOWN, E, F, 1.0f / sqrtf((float)F));
        }
        if (gemma3) rc |= T("post_ffw_norm.weight", T_NORM, 1, E, 0.1f);
#undef T
    }
    rc |= add_tensor(ts, &n, sh, used, "output_norm.weight", T_NORM, 0, 1, E, 0.1f, e);
    if (!sh->tied)
        rc |= add_tensor(ts, &n, sh, used, "output.weight", T_OUTPUT, 0, sh->n_vocab, E, 3.0f / sqrtf((float)E), e);
    for (int i = 0; i < sh->n_type_of && !rc; i++)
        if (!used[i]) rc = seam_fail(e, "tensor_type.%s names no tensor of this model", sh->type_of[i].name);
    if (rc) return free(ts), -1;
    *out = ts;
    *n_out = n;
    return 0;
}

void shape_declare(const seam_shape *sh, const shape_tensor *ts, int n, gguf_writer *w) {
    char key[96];
#define AK(suffix) (snprintf(key, sizeof key, "%s." suffix, sh->arch), key)
    gguf_w_str(w, "general.architecture", sh->arch);
    gguf_w_str(w, "general.name", sh->name);
    gguf_w_u32(w, "general.file_type", ftype_id(sh->ftype));
    gguf_w_u32(w, "general.quantization_version", 2);
    gguf_w_u32(w, AK("block_count"), (uint32_t)sh->n_layers);
    gguf_w_u32(w, AK("context_length"), (uint32_t)sh->n_ctx);
    gguf_w_u32(w, AK("embedding_length"), (uint32_t)sh->n_embd);
    gguf_w_u32(w, AK("feed_forward_length"), (uint32_t)sh->n_ff);
    gguf_w_u32(w, AK("attention.head_count"), (uint32_t)sh->n_heads);
    gguf_w_u32(w, AK("attention.head_count_kv"), (uint32_t)sh->n_kv_heads);
    gguf_w_u32(w, AK("attention.key_length"), (uint32_t)sh->head_dim);
    gguf_w_u32(w, AK("attention.value_length"), (uint32_t)sh->head_dim);
    gguf_w_f32(w, AK("attention.layer_norm_rms_epsilon"), sh->rms_eps);
    gguf_w_f32(w, AK("rope.freq_base"), sh->rope_base);
    if (sh->n_expert) {
        gguf_w_u32(w, AK("expert_count"), (uint32_t)sh->n_expert);
        gguf_w_u32(w, AK("expert_used_count"), (uint32_t)sh->n_expert_used);
        gguf_w_u32(w, AK("expert_feed_forward_length"), (uint32_t)sh->n_ff_exp);
    }
    if (sh->n_swa) gguf_w_u32(w, AK("attention.sliding_window"), (uint32_t)sh->n_swa);
    gguf_w_u32(w, AK("rope.dimension_count"), (uint32_t)sh->head_dim);
#undef AK
    for (int i = 0; i < n; i++) {
        const uint64_t x = (uint64_t)ts[i].experts;
        const uint64_t ne[3] = {(uint64_t)ts[i].cols, (uint64_t)ts[i].rows / x, x};
        gguf_w_tensor(w, ts[i].name, ts[i].type, x > 1 ? 3 : ts[i].rows == 1 ? 1 : 2, ne);
    }
}

// ---------------------------------------------------------------- a model without weights

int shape_model(const char *path, seam_model *m, seam_error *e) {
    seam_shape sh;
    shape_tensor *ts = NULL;
    int n = 0;
    if (shape_read(path, &sh, e) || shape_tensors(&sh, &ts, &n, e)) return -1;
    gguf_writer *w = gguf_writer_new(GGUF_DEFAULT_ALIGNMENT);
    shape_declare(&sh, ts, n, w);
    free(ts);
    char *header = NULL;
    size_t header_len = 0;
    FILE *mem = open_memstream(&header, &header_len);
    int rc = mem ? gguf_w_begin(w, mem, e) : seam_fail(e, "out of memory for the header of %s", path);
    if (mem && fclose(mem) && !rc) rc = seam_fail(e, "out of memory for the header of %s", path);
    const uint64_t size = header_len + gguf_w_data_size(w);
    gguf_writer_free(w);
    // the whole file's address space, no access; the header's pages readable
    uint8_t *base = rc ? MAP_FAILED : mmap(NULL, size, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (!rc && base == MAP_FAILED)
        rc = seam_fail(e, "%s: cannot reserve %.1f GiB of address space: %s", path, size / 1073741824.0, strerror(errno));
    const size_t page = (size_t)sysconf(_SC_PAGESIZE), head_pages = (header_len + page - 1) / page * page;
    if (!rc && mprotect(base, head_pages, PROT_READ | PROT_WRITE))
        rc = seam_fail(e, "%s: mprotect: %s", path, strerror(errno));
    if (!rc) {
        memcpy(base, header, header_len);
        mprotect(base, head_pages, PROT_READ);
    }
    free(header);
    gguf_file f;
    if (!rc && gguf_parse(&f, base, size, e) == 0) {
        f.mapped = true;  // base is an mmap of ours: gguf_close unmaps it
        if (model_bind(m, &f, e) == 0) return 0;
        gguf_close(&f);
        return -1;
    }
    if (base != MAP_FAILED) munmap(base, size);
    return -1;
}
