// model.c — configuration from GGUF metadata and weights bound by name.
#include "model/model.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "numeric/quant.h"

static const struct {
    const char *name;
    seam_arch arch;
} ARCHES[] = {
    {"llama", ARCH_LLAMA},
    {"qwen2", ARCH_QWEN2},
    {"qwen3", ARCH_QWEN3},
    {"gemma3", ARCH_GEMMA3},
    {"qwen3moe", ARCH_QWEN3MOE},
};

// Reads "{arch}.{suffix}" as u32 (or f32), with an optional default.
static int arch_u32(const gguf_file *f, const char *arch, const char *suffix, int required,
                    uint32_t def, int *out, seam_error *e) {
    char key[128];
    snprintf(key, sizeof key, "%s.%s", arch, suffix);
    uint32_t v;
    int rc = required ? gguf_get_u32(f, key, &v, e) : gguf_get_u32_or(f, key, def, &v, e);
    if (rc) return -1;
    if (v > (1u << 30)) return seam_fail(e, "metadata %s = %u is out of range", key, v);
    *out = (int)v;
    return 0;
}

static int arch_f32(const gguf_file *f, const char *arch, const char *suffix, float def, float *out,
                    seam_error *e) {
    char key[128];
    snprintf(key, sizeof key, "%s.%s", arch, suffix);
    return gguf_get_f32_or(f, key, def, out, e);
}

// Linear RoPE scaling divides every angle by the factor; other kinds are
// refused rather than run wrong.
static int read_rope_scaling(const gguf_file *f, seam_config *c, seam_error *e) {
    char key[128];
    snprintf(key, sizeof key, "%s.rope.scaling.type", c->arch_name);
    c->rope_scale = 1.0f;
    if (!gguf_find_kv(f, key)) return 0;
    gguf_str type;
    if (gguf_get_str(f, key, &type, e)) return -1;
    if (gguf_str_eq(type, "none")) return 0;
    if (!gguf_str_eq(type, "linear"))
        return seam_fail(e, "%s = '%.*s': only linear RoPE scaling is supported", key,
                         (int)(type.len > 32 ? 32 : type.len), type.ptr);
    float factor;
    if (arch_f32(f, c->arch_name, "rope.scaling.factor", 1.0f, &factor, e)) return -1;
    if (!(factor > 0.0f)) return seam_fail(e, "%s: rope.scaling.factor must be positive", c->arch_name);
    c->rope_scale = 1.0f / factor;
    return 0;
}

// gemma3's sliding-window layers: every layer but each sixth (il % 6 < 5)
// sees only the last attention.sliding_window positions and rotates with
// its own base, as llama.cpp's set_swa_pattern(6) and freq_base_swa.
static int read_sliding_window(const gguf_file *f, seam_config *c, seam_error *e) {
    memset(c->layer_swa, 0, sizeof c->layer_swa);
    c->rope_base_swa = c->rope_base;
    if (c->arch != ARCH_GEMMA3) return 0;
    if (arch_u32(f, c->arch_name, "attention.sliding_window", 0, 0, &c->n_swa, e)) return -1;
    if (c->n_swa == 0) return 0;
    int pattern = 0;
    if (arch_u32(f, c->arch_name, "attention.sliding_window_pattern", 0, 6, &pattern, e)) return -1;
    for (int il = 0; il < c->n_layers; il++) c->layer_swa[il] = pattern == 0 || il % pattern < pattern - 1;
    return arch_f32(f, c->arch_name, "rope.freq_base_swa", 10000.0f, &c->rope_base_swa, e);
}

static int read_experts(const gguf_file *f, seam_config *c, seam_error *e) {
    const char *a = c->arch_name;
    if (arch_u32(f, a, "expert_count", 1, 0, &c->n_expert, e) ||
        arch_u32(f, a, "expert_used_count", 1, 0, &c->n_expert_used, e) ||
        arch_u32(f, a, "expert_feed_forward_length", 1, 0, &c->n_ff_exp, e))
        return -1;
    if (c->n_expert < 1 || c->n_expert > 1024 || c->n_expert_used < 1 || c->n_expert_used > c->n_expert ||
        c->n_ff_exp < 1 || c->n_ff_exp > (1 << 24))
        return seam_fail(e, "%s: expert_count %d, expert_used_count %d, expert_feed_forward_length %d: need "
                            "1 <= used <= count <= 1024 and a positive width", a, c->n_expert, c->n_expert_used,
                         c->n_ff_exp);
    return 0;
}

static int read_config(const gguf_file *f, seam_config *c, seam_error *e) {
    gguf_str arch;
    if (gguf_get_str(f, "general.architecture", &arch, e)) return -1;
    int found = 0;
    for (size_t i = 0; i < sizeof ARCHES / sizeof ARCHES[0]; i++) {
        if (gguf_str_eq(arch, ARCHES[i].name)) {
            c->arch = ARCHES[i].arch;
            c->arch_name = ARCHES[i].name;
            found = 1;
        }
    }
    if (!found)
        return seam_fail(e, "architecture '%.*s' is not supported (seam runs llama, qwen2, qwen3, gemma3, qwen3moe)",
                         (int)(arch.len > 64 ? 64 : arch.len), arch.ptr);
    const char *a = c->arch_name;
    if (arch_u32(f, a, "block_count", 1, 0, &c->n_layers, e) ||
        arch_u32(f, a, "embedding_length", 1, 0, &c->n_embd, e) ||
        arch_u32(f, a, "feed_forward_length", 1, 0, &c->n_ff, e) ||
        arch_u32(f, a, "attention.head_count", 1, 0, &c->n_heads, e) ||
        arch_u32(f, a, "context_length", 0, 4096, &c->n_ctx_train, e))
        return -1;
    if (c->n_layers < 1 || c->n_embd < 1 || c->n_ff < 1 || c->n_heads < 1)
        return seam_fail(e, "%s: block_count, embedding_length, feed_forward_length and "
                            "head_count must all be positive", a);
    // widths multiply into buffer sizes in int: keep every product far from overflow
    if (c->n_embd > (1 << 20) || c->n_heads > 4096)
        return seam_fail(e, "%s: embedding_length %d or head_count %d is implausibly large", a, c->n_embd,
                         c->n_heads);
    if (arch_u32(f, a, "attention.head_count_kv", 0, (uint32_t)c->n_heads, &c->n_kv_heads, e) ||
        arch_u32(f, a, "attention.key_length", 0, (uint32_t)(c->n_embd / c->n_heads), &c->head_dim, e))
        return -1;
    if (c->n_kv_heads < 1 || c->n_heads % c->n_kv_heads != 0)
        return seam_fail(e, "%s: head_count %d is not a multiple of head_count_kv %d", a, c->n_heads,
                         c->n_kv_heads);
    if (c->head_dim < 2 || c->head_dim % 2 != 0 || c->head_dim > 4096)
        return seam_fail(e, "%s: attention.key_length %d must be even and in 2..4096", a, c->head_dim);
    int value_length = 0;
    if (arch_u32(f, a, "attention.value_length", 0, (uint32_t)c->head_dim, &value_length, e)) return -1;
    if (value_length != c->head_dim)
        return seam_fail(e, "%s: value_length %d differs from key_length %d (not supported)", a,
                         value_length, c->head_dim);
    if (arch_f32(f, a, "attention.layer_norm_rms_epsilon", 1e-5f, &c->rms_eps, e) ||
        arch_f32(f, a, "rope.freq_base", 10000.0f, &c->rope_base, e) ||
        arch_u32(f, a, "rope.dimension_count", 0, (uint32_t)c->head_dim, &c->rope_dim, e))
        return -1;
    if (c->rope_dim < 2 || c->rope_dim > c->head_dim || c->rope_dim % 2 != 0)
        return seam_fail(e, "%s: rope.dimension_count %d must be even and at most key_length %d", a,
                         c->rope_dim, c->head_dim);
    if (!(c->rms_eps > 0.0f) || !(c->rope_base > 0.0f))
        return seam_fail(e, "%s: layer_norm_rms_epsilon and rope.freq_base must be positive", a);
    if (c->n_layers > SEAM_MAX_LAYERS)
        return seam_fail(e, "%s: block_count %d is more than seam's limit of %d", a, c->n_layers, SEAM_MAX_LAYERS);
    if (c->arch == ARCH_QWEN3MOE && read_experts(f, c, e)) return -1;
    if (!c->n_expert && c->n_ff > (1 << 24))  // an MoE model never uses its dense width
        return seam_fail(e, "%s: feed_forward_length %d is implausibly large", a, c->n_ff);
    c->rope_neox = c->arch != ARCH_LLAMA;  // as llama.cpp's rope type per architecture
    c->qk_norm = c->arch == ARCH_QWEN3 || c->arch == ARCH_GEMMA3 || c->arch == ARCH_QWEN3MOE;
    c->qkv_bias = c->arch == ARCH_QWEN2;
    c->post_norms = c->ffn_gelu = c->arch == ARCH_GEMMA3;
    c->embd_scale = c->arch == ARCH_GEMMA3 ? sqrtf((float)c->n_embd) : 1.0f;
    // gemma3 scales q by 1/sqrt(head_dim) before attention and the scores by 1;
    // the others scale the scores.
    c->q_scale = c->arch == ARCH_GEMMA3 ? 1.0f / sqrtf((float)c->head_dim) : 1.0f;
    c->kq_scale = c->arch == ARCH_GEMMA3 ? 1.0f : 1.0f / sqrtf((float)c->head_dim);
    if (arch_f32(f, a, "final_logit_softcapping", 0.0f, &c->logit_softcap, e)) return -1;
    return read_rope_scaling(f, c, e) || read_sliding_window(f, c, e) ? -1 : 0;
}

// Binds tensor `name` and checks it is (rows, cols); rows == 1 means a vector.
static int bind(const gguf_file *f, seam_tensor *t, const char *name, int64_t rows, int64_t cols,
                bool optional, seam_error *e) {
    const gguf_tensor *g = gguf_find_tensor(f, name);
    memset(t, 0, sizeof *t);
    if (!g) {
        if (optional) return 0;
        return seam_fail(e, "tensor '%s' is missing from the file", name);
    }
    int64_t g_rows = 1;
    for (uint32_t d = 1; d < g->n_dims; d++) g_rows *= (int64_t)g->ne[d];
    if ((int64_t)g->ne[0] != cols || g_rows != rows)
        return seam_fail(e, "tensor '%s' has shape [%llu, %lld], expected [%lld, %lld]", name,
                         (unsigned long long)g->ne[0], (long long)g_rows, (long long)cols,
                         (long long)rows);
    if (!seam_type_supported(g->type))
        return seam_fail(e, "tensor '%s' has type %s, which seam cannot compute with", name,
                         ggml_type_name(g->type));
    t->name = g->name.ptr;
    t->name_len = (int)g->name.len;
    t->type = g->type;
    t->rows = rows;
    t->cols = cols;
    t->row_bytes = ggml_row_bytes(g->type, (uint64_t)cols);
    t->n_bytes = g->n_bytes;
    t->data = g->data;
    return 0;
}

static int bind_f32_vector(const gguf_file *f, seam_tensor *t, const char *name, int64_t n,
                           bool optional, seam_error *e) {
    if (bind(f, t, name, 1, n, optional, e)) return -1;
    if (t->data && t->type != GGML_TYPE_F32)
        return seam_fail(e, "tensor '%s' has type %s, expected F32", name, ggml_type_name(t->type));
    return 0;
}

static int bind_layer(const gguf_file *f, const seam_config *c, int il, seam_layer_weights *l,
                      seam_error *e) {
    char n[96];
    const int64_t q_dim = (int64_t)c->n_heads * c->head_dim;
    const int64_t kv_dim = (int64_t)c->n_kv_heads * c->head_dim;
#define NAME(suffix) (snprintf(n, sizeof n, "blk.%d." suffix, il), n)
    if (c->n_expert) {
        const int64_t ne = c->n_expert;
        if (bind(f, &l->ffn_gate_inp, NAME("ffn_gate_inp.weight"), ne, c->n_embd, false, e) ||
            bind(f, &l->ffn_gate_exps, NAME("ffn_gate_exps.weight"), ne * c->n_ff_exp, c->n_embd, false, e) ||
            bind(f, &l->ffn_up_exps, NAME("ffn_up_exps.weight"), ne * c->n_ff_exp, c->n_embd, false, e) ||
            bind(f, &l->ffn_down_exps, NAME("ffn_down_exps.weight"), ne * c->n_embd, c->n_ff_exp, false, e))
            return -1;
        if (l->ffn_gate_inp.type != GGML_TYPE_F32)
            return seam_fail(e, "tensor 'blk.%d.ffn_gate_inp.weight' has type %s, expected F32", il,
                             ggml_type_name(l->ffn_gate_inp.type));
    } else if (bind(f, &l->w_gate, NAME("ffn_gate.weight"), c->n_ff, c->n_embd, false, e) ||
               bind(f, &l->w_up, NAME("ffn_up.weight"), c->n_ff, c->n_embd, false, e) ||
               bind(f, &l->w_down, NAME("ffn_down.weight"), c->n_embd, c->n_ff, false, e)) {
        return -1;
    }
    if (bind_f32_vector(f, &l->attn_norm, NAME("attn_norm.weight"), c->n_embd, false, e) ||
        bind(f, &l->wq, NAME("attn_q.weight"), q_dim, c->n_embd, false, e) ||
        bind(f, &l->wk, NAME("attn_k.weight"), kv_dim, c->n_embd, false, e) ||
        bind(f, &l->wv, NAME("attn_v.weight"), kv_dim, c->n_embd, false, e) ||
        bind(f, &l->wo, NAME("attn_output.weight"), c->n_embd, q_dim, false, e) ||
        bind_f32_vector(f, &l->ffn_norm, NAME("ffn_norm.weight"), c->n_embd, false, e))
        return -1;
    if (c->post_norms &&
        (bind_f32_vector(f, &l->attn_post_norm, NAME("post_attention_norm.weight"), c->n_embd, false, e) ||
         bind_f32_vector(f, &l->ffn_post_norm, NAME("post_ffw_norm.weight"), c->n_embd, false, e)))
        return -1;
    if (c->qk_norm && (bind_f32_vector(f, &l->q_norm, NAME("attn_q_norm.weight"), c->head_dim, false, e) ||
                       bind_f32_vector(f, &l->k_norm, NAME("attn_k_norm.weight"), c->head_dim, false, e)))
        return -1;
    if (c->qkv_bias && (bind_f32_vector(f, &l->bq, NAME("attn_q.bias"), q_dim, false, e) ||
                        bind_f32_vector(f, &l->bk, NAME("attn_k.bias"), kv_dim, false, e) ||
                        bind_f32_vector(f, &l->bv, NAME("attn_v.bias"), kv_dim, false, e)))
        return -1;
#undef NAME
    return 0;
}

int model_bind(seam_model *m, gguf_file *f, seam_error *e) {
    memset(&m->cfg, 0, sizeof m->cfg);
    memset(&m->w, 0, sizeof m->w);
    seam_config *c = &m->cfg;
    if (read_config(f, c, e)) return -1;

    // The vocabulary size is the embedding table's row count.
    const gguf_tensor *te = gguf_find_tensor(f, "token_embd.weight");
    if (!te) return seam_fail(e, "tensor 'token_embd.weight' is missing from the file");
    if (te->n_dims != 2 || te->ne[1] < 1 || te->ne[1] > (1u << 24))
        return seam_fail(e, "tensor 'token_embd.weight' must be 2-D [n_embd, n_vocab]");
    c->n_vocab = (int)te->ne[1];

    seam_weights *w = &m->w;
    if (bind(f, &w->tok_embd, "token_embd.weight", c->n_vocab, c->n_embd, false, e) ||
        bind_f32_vector(f, &w->output_norm, "output_norm.weight", c->n_embd, false, e) ||
        bind(f, &w->output, "output.weight", c->n_vocab, c->n_embd, true, e))
        return -1;
    w->tied_output = w->output.data == NULL;
    if (w->tied_output) w->output = w->tok_embd;

    w->layers = calloc((size_t)c->n_layers, sizeof *w->layers);
    if (!w->layers) return seam_fail(e, "out of memory for %d layers", c->n_layers);
    for (int il = 0; il < c->n_layers; il++) {
        if (bind_layer(f, c, il, &w->layers[il], e)) {
            free(w->layers);
            w->layers = NULL;
            return -1;
        }
    }
    m->file = *f;
    return 0;
}

int model_load(seam_model *m, const char *path, seam_error *e) {
    gguf_file f;
    if (gguf_open(&f, path, e)) return -1;
    if (model_bind(m, &f, e)) {
        char msg[sizeof e->msg];
        snprintf(msg, sizeof msg, "%s", e->msg);
        gguf_close(&f);
        return seam_fail(e, "%s: %s", path, msg);
    }
    return 0;
}

void model_free(seam_model *m) {
    free(m->w.layers);
    m->w.layers = NULL;
    gguf_close(&m->file);
}

seam_tensor tensor_rows(const seam_tensor *t, int64_t first, int64_t n) {
    seam_tensor v = *t;
    v.rows = n;
    v.n_bytes = (uint64_t)n * t->row_bytes;
    v.data = (const uint8_t *)t->data + (uint64_t)first * t->row_bytes;
    return v;
}

void model_layer_tensors(const seam_model *m, int il, const seam_tensor *shared[MODEL_LAYER_SHARED],
                         const seam_tensor *routed[MODEL_LAYER_ROUTED]) {
    const seam_layer_weights *l = &m->w.layers[il];
    const seam_tensor *const s[MODEL_LAYER_SHARED] = {
        &l->attn_norm, &l->wq, &l->wk, &l->wv, &l->bq, &l->bk, &l->bv, &l->q_norm, &l->k_norm, &l->wo,
        &l->attn_post_norm, &l->ffn_norm, &l->w_gate, &l->w_up, &l->w_down, &l->ffn_post_norm, &l->ffn_gate_inp};
    const seam_tensor *const r[MODEL_LAYER_ROUTED] = {&l->ffn_gate_exps, &l->ffn_up_exps, &l->ffn_down_exps};
    memcpy(shared, s, sizeof s);
    memcpy(routed, r, sizeof r);
}

// Bytes of the layer's tensors outside the experts, and of its experts.
static void layer_bytes(const seam_model *m, int il, uint64_t *dense, uint64_t *experts) {
    const seam_tensor *shared[MODEL_LAYER_SHARED], *routed[MODEL_LAYER_ROUTED];
    model_layer_tensors(m, il, shared, routed);
    *dense = *experts = 0;
    for (int i = 0; i < MODEL_LAYER_SHARED; i++) *dense += shared[i]->data ? shared[i]->n_bytes : 0;
    for (int i = 0; i < MODEL_LAYER_ROUTED; i++) *experts += routed[i]->data ? routed[i]->n_bytes : 0;
}

uint64_t model_layer_bytes(const seam_model *m, int il) {
    uint64_t dense, experts;
    layer_bytes(m, il, &dense, &experts);
    return dense + experts;
}

uint64_t model_layer_active_expert_bytes(const seam_model *m, int il) {
    uint64_t dense, experts;
    layer_bytes(m, il, &dense, &experts);
    const seam_config *c = &m->cfg;
    return c->n_expert ? experts / (uint64_t)c->n_expert * (uint64_t)c->n_expert_used : 0;
}

uint64_t model_layer_active_bytes(const seam_model *m, int il) {
    uint64_t dense, experts;
    layer_bytes(m, il, &dense, &experts);
    return dense + model_layer_active_expert_bytes(m, il);
}

uint64_t model_layer_macs(const seam_model *m, int il) {
    const seam_tensor *shared[MODEL_LAYER_SHARED], *routed[MODEL_LAYER_ROUTED];
    model_layer_tensors(m, il, shared, routed);
    uint64_t dense = 0, experts = 0;
    for (int i = 0; i < MODEL_LAYER_SHARED; i++)
        if (shared[i]->data && shared[i]->rows > 1) dense += (uint64_t)shared[i]->rows * (uint64_t)shared[i]->cols;
    for (int i = 0; i < MODEL_LAYER_ROUTED; i++)
        if (routed[i]->data) experts += (uint64_t)routed[i]->rows * (uint64_t)routed[i]->cols;
    const seam_config *c = &m->cfg;
    return dense + (c->n_expert ? experts / (uint64_t)c->n_expert * (uint64_t)c->n_expert_used : 0);
}

uint64_t model_bytes_per_token(const seam_model *m) {
    uint64_t sum = m->w.tok_embd.row_bytes + m->w.output_norm.n_bytes + m->w.output.n_bytes;
    for (int il = 0; il < m->cfg.n_layers; il++) sum += model_layer_active_bytes(m, il);
    return sum;
}
