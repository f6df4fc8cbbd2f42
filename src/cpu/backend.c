// backend.c — the CPU's layer operations (model/layer.h) over a batch of
// tokens in host memory, and the buffers they write.
#include "cpu/backend.h"

#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "numeric/quant.h"

// Lays out the cache of kv's types for n_ctx positions in one allocation,
// resident from the start (as llama.cpp clears its own).
static int kv_alloc(cpu_kv_cache *kv, const seam_config *c, seam_kv_config cfg, int n_ctx, seam_error *e) {
    kv->cfg = cfg;
    kv->k_head_row = ggml_row_bytes(plan_kv_ggml_type[cfg.k], (uint64_t)c->head_dim);
    kv->v_head_row = ggml_row_bytes(plan_kv_ggml_type[cfg.v], (uint64_t)c->head_dim);
    plan_kv_rotation(c, cfg, &kv->rot_k, &kv->rot_v);
    kv->bytes = 0;
    for (int il = 0; il < c->n_layers; il++) {
        kv->rows[il] = plan_kv_rows(c, cfg, il, n_ctx);
        kv->bytes += plan_kv_bytes(c, cfg, (uint64_t)kv->rows[il]);
    }
    if (kv->bytes > SIZE_MAX || !(kv->mem = seam_alloc_resident((size_t)kv->bytes)))
        return seam_fail(e, "out of memory for the KV cache (%d positions: %.1f MiB); lower -c or use -ctk/-ctv q8_0",
                         n_ctx, (double)kv->bytes / (1 << 20));
    uint8_t *p = kv->mem;
    for (int il = 0; il < c->n_layers; il++) {
        kv->k[il] = p, p += (size_t)c->n_kv_heads * kv->rows[il] * kv->k_head_row;
        kv->v[il] = p, p += (size_t)c->n_kv_heads * kv->rows[il] * kv->v_head_row;
    }
    return 0;
}

enum { BUFFERS = 19 };

// The backend's buffers besides the KV cache, and their bytes: one list for
// allocating them, for counting them (cpu_backend_scratch_bytes) and for
// freeing them (bytes NULL: the buffers only, c unread).
static void buffer_layout(cpu_backend *b, const seam_config *c, int n_ctx, void **buf[BUFFERS], size_t bytes[BUFFERS]) {
    layer_acts *a = &b->layer.acts;
    cpu_moe_work *m = &b->moe;
    void **const fields[BUFFERS] = {
        (void **)&a->x,      (void **)&a->xb,     (void **)&a->xb2,  (void **)&a->q,    (void **)&a->k,
        (void **)&a->v,      (void **)&a->hb,     (void **)&a->hb2,  (void **)&m->out,  (void **)&m->router,
        (void **)&m->chosen, (void **)&m->weight, (void **)&m->pair, (void **)&m->slot, (void **)&m->first,
        &b->act,             &b->act2,            (void **)&b->rope_angles,             (void **)&b->att,
    };
    memcpy(buf, fields, sizeof fields);
    if (!bytes) return;
    const size_t U = SEAM_UBATCH, f = sizeof(float), i = sizeof(int);
    const size_t q_dim = (size_t)c->n_heads * c->head_dim, kv_dim = (size_t)c->n_kv_heads * c->head_dim;
    const size_t wide = q_dim > (size_t)c->n_embd ? q_dim : (size_t)c->n_embd;
    // an MoE model's layers all run experts: its feed_forward_length is unused
    // (and unchecked by any tensor), so it must not size a buffer
    const size_t hidden = (size_t)(c->n_expert ? c->n_ff_exp : c->n_ff), widest = wide > hidden ? wide : hidden;
    const size_t pairs = U * (c->n_expert ? (size_t)c->n_expert_used : 1), experts = (size_t)c->n_expert + 1;
    const size_t sizes[BUFFERS] = {
        f * U * c->n_embd, f * U * wide, f * U * c->n_embd, f * U * q_dim, f * U * kv_dim,
        f * U * kv_dim, f * pairs * hidden, f * pairs * hidden, f * pairs * c->n_embd, f * U * experts,
        i * pairs, f * pairs, i * pairs, i * pairs, i * experts,
        pairs * cpu_matvec_scratch_bytes((int64_t)widest), pairs * cpu_matvec_scratch_bytes((int64_t)widest),
        f * U * 2 * c->rope_dim, f * cpu_attention_scratch_floats(n_ctx, c->head_dim),
    };
    memcpy(bytes, sizes, sizeof sizes);
}

uint64_t cpu_backend_scratch_bytes(const seam_config *c, int n_ctx) {
    cpu_backend b;
    void **buf[BUFFERS];
    size_t bytes[BUFFERS];
    buffer_layout(&b, c, n_ctx, buf, bytes);
    uint64_t sum = 0;
    for (int i = 0; i < BUFFERS; i++) sum += bytes[i];
    return sum;
}

extern const layer_ops cpu_layer_ops;

int cpu_backend_init(cpu_backend *b, const seam_config *c, int n_ctx, seam_kv_config kv, seam_error *e) {
    memset(b, 0, sizeof *b);
    b->cfg = c;
    b->n_ctx = n_ctx;
    void **buf[BUFFERS];
    size_t bytes[BUFFERS];
    buffer_layout(b, c, n_ctx, buf, bytes);
    for (int i = 0; i < BUFFERS; i++)
        if (!(*buf[i] = seam_alloc_resident(bytes[i]))) {
            cpu_backend_free(b);
            return seam_fail(e, "out of memory for the activations of a batch of %d tokens", SEAM_UBATCH);
        }
    if (kv_alloc(&b->kv, c, kv, n_ctx, e)) {
        cpu_backend_free(b);
        return -1;
    }
    b->layer.ops = &cpu_layer_ops;
    b->layer.be = b;
    b->layer.rot_k = b->kv.rot_k;
    b->layer.rot_v = b->kv.rot_v;
    return 0;
}

void cpu_backend_free(cpu_backend *b) {
    void **buf[BUFFERS];
    buffer_layout(b, NULL, 0, buf, NULL);
    for (int i = 0; i < BUFFERS; i++) free(*buf[i]);
    free(b->kv.mem);
    pool_destroy(b->pool);
    memset(b, 0, sizeof *b);
}

int cpu_backend_set_threads(cpu_backend *b, int n_threads, seam_error *e) {
    seam_pool *pool = NULL;
    if (n_threads != 1 && !(pool = pool_create(n_threads, e))) return -1;
    // attention scratch for every thread
    const size_t att = cpu_attention_scratch_floats(b->n_ctx, b->cfg->head_dim);
    float *scratch = seam_alloc_resident(sizeof(float) * att * (size_t)n_threads);
    if (!scratch) {
        pool_destroy(pool);
        return seam_fail(e, "out of memory for the attention scratch of %d threads", n_threads);
    }
    free(b->att);
    b->att = scratch;
    pool_destroy(b->pool);
    b->pool = pool;
    return 0;
}

void cpu_backend_begin(cpu_backend *b, int pos0, int n) {
    const seam_config *c = b->cfg;
    const int half = c->rope_dim / 2;
    b->pos0 = pos0;
    b->n = n;
    b->attention_s = 0;
    for (int t = 0; t < n; t++) {
        float *angles = b->rope_angles + (size_t)t * 2 * c->rope_dim;
        cpu_rope_angles(angles, angles + half, c->rope_dim, pos0 + t, c->rope_base, c->rope_scale);
        if (c->n_swa) cpu_rope_angles(angles + 2 * half, angles + 3 * half, c->rope_dim, pos0 + t, c->rope_base_swa, 1.0f);
    }
}

// ---------------------------------------------------------------- steps by row

// A step each row of a buffer takes alone (a token's norm, RoPE, residual
// add): for one token on the calling thread, as its cost is a few
// microseconds; for a batch shared out over the pool a row at a time, so
// that no core waits while one does them all.
typedef void (*row_fn)(const cpu_backend *b, const void *arg, int row);

typedef struct {
    row_fn fn;
    const cpu_backend *b;
    const void *arg;
    int rows;
    _Atomic int next;
} row_job;

// Rows in runs of an eighth of a thread's share: a row of a few hundred
// nanoseconds took as long again to pass its counter between the cores
// (2% of a prompt went to the counter of row by row).
static void row_share(void *ctx, int ith, int nth) {
    (void)ith;
    row_job *j = ctx;
    const int run = j->rows / (8 * nth) > 1 ? j->rows / (8 * nth) : 1;
    for (int r0; (r0 = atomic_fetch_add(&j->next, run)) < j->rows;)
        for (int r = r0; r < r0 + run && r < j->rows; r++) j->fn(j->b, j->arg, r);
}

static void each_row(const cpu_backend *b, row_fn fn, const void *arg, int rows) {
    if (b->n == 1) {
        for (int r = 0; r < rows; r++) fn(b, arg, r);
        return;
    }
    row_job job = {fn, b, arg, rows, 0};
    pool_run(b->pool, row_share, &job);
}

// The arguments of the elementwise steps: rows of cols values.
typedef struct {
    float *x;
    const float *y;  // add: the rows added; glu: up; rmsnorm: the input
    const float *w;  // rmsnorm: the weight; add_bias: the bias
    float s;         // scale: the factor; rmsnorm: eps
    int cols, block;
    int rows;        // rmsnorm: the rows in all, which its steps take NORM_ROWS at a time
    bool gelu;
} rows_arg;

// Eight rows at a time: the kernels normalise rows side by side (matvec_avx2.c).
#define NORM_ROWS 8

static void rmsnorm_rows(const cpu_backend *b, const void *arg, int r) {
    const rows_arg *a = arg;
    const size_t first = (size_t)r * NORM_ROWS * a->cols;
    const int rows = a->rows - r * NORM_ROWS < NORM_ROWS ? a->rows - r * NORM_ROWS : NORM_ROWS;
    cpu_rmsnorm_rows(a->x + first, a->y + first, a->w, rows, a->cols, a->s);
}

static void add_bias_row(const cpu_backend *b, const void *arg, int r) {
    const rows_arg *a = arg;
    float *x = a->x + (size_t)r * a->cols;
    for (int i = 0; i < a->cols; i++) x[i] += a->w[i];
}

static void add_row(const cpu_backend *b, const void *arg, int r) {
    const rows_arg *a = arg;
    float *x = a->x + (size_t)r * a->cols;
    const float *y = a->y + (size_t)r * a->cols;
    for (int i = 0; i < a->cols; i++) x[i] += y[i];
}

static void scale_row(const cpu_backend *b, const void *arg, int r) {
    const rows_arg *a = arg;
    cpu_scale(a->x + (size_t)r * a->cols, a->s, a->cols);
}

static void rotate_row(const cpu_backend *b, const void *arg, int r) {
    const rows_arg *a = arg;
    cpu_fwht(a->x + (size_t)r * a->cols, a->cols, a->block);
}

static void glu_row(const cpu_backend *b, const void *arg, int r) {
    const rows_arg *a = arg;
    float *gate = a->x + (size_t)r * a->cols;
    const float *up = a->y + (size_t)r * a->cols;
    if (a->gelu) cpu_geglu(gate, up, a->cols);
    else cpu_swiglu(gate, up, a->cols);
}

static int op_rmsnorm(void *be, float *out, const float *x, const seam_tensor *w, int rows, int cols, seam_error *e) {
    const cpu_backend *b = be;
    const rows_arg a = {.x = out, .y = x, .w = w->data, .s = b->cfg->rms_eps, .cols = cols, .rows = rows};
    each_row(b, rmsnorm_rows, &a, (rows + NORM_ROWS - 1) / NORM_ROWS);
    return 0;
}

static int op_add_bias(void *be, float *x, const seam_tensor *bias, int n, int cols, seam_error *e) {
    each_row(be, add_bias_row, &(rows_arg){.x = x, .w = bias->data, .cols = cols}, n);
    return 0;
}

static int op_add(void *be, float *x, const float *y, int n, int cols, seam_error *e) {
    each_row(be, add_row, &(rows_arg){.x = x, .y = y, .cols = cols}, n);
    return 0;
}

static int op_scale(void *be, float *x, float s, int n, int cols, seam_error *e) {
    each_row(be, scale_row, &(rows_arg){.x = x, .s = s, .cols = cols}, n);
    return 0;
}

static int op_rotate(void *be, float *x, int n, int cols, int block, seam_error *e) {
    each_row(be, rotate_row, &(rows_arg){.x = x, .cols = cols, .block = block}, n);
    return 0;
}

static int op_glu(void *be, float *gate, const float *up, int n, int cols, bool gelu, seam_error *e) {
    each_row(be, glu_row, &(rows_arg){.x = gate, .y = up, .cols = cols, .gelu = gelu}, n);
    return 0;
}

// ---------------------------------------------------------------- attention

typedef struct {
    int il;
    float *q, *k;
} rope_arg;

typedef struct {
    int il;
    const float *k, *v;
} kv_arg;

// Token t's q and k rotated by its angles (a sliding layer's own base).
static void rope_row(const cpu_backend *b, const void *arg, int t) {
    const rope_arg *a = arg;
    const seam_config *c = b->cfg;
    const int half = c->rope_dim / 2;
    const float *angles = b->rope_angles + (size_t)t * 2 * c->rope_dim, *cos_t = angles + (c->layer_swa[a->il] ? 2 * half : 0);
    cpu_rope_apply(a->q + (size_t)t * c->n_heads * c->head_dim, c->n_heads, a->k + (size_t)t * c->n_kv_heads * c->head_dim,
                   c->n_kv_heads, c->head_dim, c->rope_dim, cos_t, cos_t + half, c->rope_neox);
}

static int op_rope(void *be, int il, float *q, float *k, int n, seam_error *e) {
    each_row(be, rope_row, &(rope_arg){.il = il, .q = q, .k = k}, n);
    return 0;
}

// Token t's k and v into their cache rows, in the cache's types.
static void kv_append_row(const cpu_backend *b, const void *arg, int t) {
    const kv_arg *a = arg;
    const seam_config *c = b->cfg;
    const cpu_kv_cache *kv = &b->kv;
    const size_t row = (size_t)((b->pos0 + t) % kv->rows[a->il]), rows = (size_t)kv->rows[a->il];
    const float *k = a->k + (size_t)t * c->n_kv_heads * c->head_dim, *v = a->v + (size_t)t * c->n_kv_heads * c->head_dim;
    for (int g = 0; g < c->n_kv_heads; g++) {
        const size_t at = (size_t)g * rows + row;
        cpu_kv_store(plan_kv_ggml_type[kv->cfg.k], kv->k[a->il] + at * kv->k_head_row, k + g * c->head_dim, c->head_dim);
        cpu_kv_store(plan_kv_ggml_type[kv->cfg.v], kv->v[a->il] + at * kv->v_head_row, v + g * c->head_dim, c->head_dim);
    }
}

static int op_kv_append(void *be, int il, const float *k, const float *v, int n, seam_error *e) {
    each_row(be, kv_append_row, &(kv_arg){.il = il, .k = k, .v = v}, n);
    return 0;
}

static int op_attention(void *be, int il, float *out, const float *q, int n, seam_error *e) {
    cpu_backend *b = be;
    const seam_config *c = b->cfg;
    const cpu_kv_cache *kv = &b->kv;
    const int q_dim = c->n_heads * c->head_dim;
    int t0[SEAM_UBATCH], t1[SEAM_UBATCH];
    for (int t = 0; t < n; t++) {
        t1[t] = b->pos0 + t + 1;
        t0[t] = t1[t] - plan_kv_visible(c, il, b->pos0 + t);
    }
    const size_t rows = (size_t)kv->rows[il];
    const cpu_kv layer = {.k = kv->k[il], .v = kv->v[il], .k_row = kv->k_head_row, .v_row = kv->v_head_row,
                          .k_head = rows * kv->k_head_row, .v_head = rows * kv->v_head_row,
                          .k_type = plan_kv_ggml_type[kv->cfg.k], .v_type = plan_kv_ggml_type[kv->cfg.v],
                          .ring = kv->rows[il]};
    const double start = seam_now();
    cpu_attention(b->pool, n, out, q_dim, q, q_dim, &layer, c->n_heads, c->n_kv_heads, c->head_dim, t0, t1,
                  c->kq_scale, b->att, cpu_attention_scratch_floats(b->n_ctx, c->head_dim));
    b->attention_s += seam_now() - start;
    return 0;
}

// ---------------------------------------------------------------- products

static int op_matmul(void *be, int n_mats, const seam_tensor *const w[], const float *x, float *const out[], int n,
                     seam_error *e) {
    const cpu_backend *b = be;
    int64_t ldo[4];
    for (int i = 0; i < n_mats; i++) ldo[i] = w[i]->rows;
    cpu_matmul_parts(b->pool, n_mats, w, x, w[0]->cols, out, ldo, n, b->act);
    return 0;
}

typedef struct {
    const seam_layer_weights *l;
    const float *x;  // (n, n_embd) the experts' input
    float *out;      // (n, n_embd) the tokens' weighted sums
} moe_arg;

// Token t's input quantised once for the experts' gate (in act) and, if up
// takes another type, for up (in act2), into the slot of its first rank;
// its other ranks' slots get copies of those blocks.
static void token_input(const cpu_backend *b, const void *arg, int t) {
    const moe_arg *a = arg;
    const seam_config *c = b->cfg;
    const int ku = c->n_expert_used;
    const size_t bytes = cpu_matvec_scratch_bytes(c->n_embd), first = (size_t)b->moe.slot[t * ku] * bytes;
    const uint32_t gate = seam_vec_dot_type(a->l->ffn_gate_exps.type), up = seam_vec_dot_type(a->l->ffn_up_exps.type);
    const float *x = a->x + (size_t)t * c->n_embd;
    uint8_t *act = b->act, *act2 = b->act2;
    cpu_quantize_input(gate, x, act + first, c->n_embd);
    if (up != gate) cpu_quantize_input(up, x, act2 + first, c->n_embd);
    for (int j = 1; j < ku; j++) {
        const size_t at = (size_t)b->moe.slot[t * ku + j] * bytes;
        memcpy(act + at, act + first, bytes);
        if (up != gate) memcpy(act2 + at, act2 + first, bytes);
    }
}

// Slot i's hidden layer activated, and quantised for the experts' down.
static void pair_hidden(const cpu_backend *b, const void *arg, int i) {
    const moe_arg *a = arg;
    const int F = b->cfg->n_ff_exp;
    float *h = b->layer.acts.hb + (size_t)i * F;
    cpu_swiglu(h, b->layer.acts.hb2 + (size_t)i * F, F);
    cpu_quantize_input(seam_vec_dot_type(a->l->ffn_down_exps.type), h,
                       (uint8_t *)b->act2 + (size_t)i * cpu_matvec_scratch_bytes(F), F);
}

// Token t's experts' outputs, weighted and summed in rank order.
static void pair_sum(const cpu_backend *b, const void *arg, int t) {
    const moe_arg *a = arg;
    const cpu_moe_work *m = &b->moe;
    const int ku = b->cfg->n_expert_used, E = b->cfg->n_embd;
    float *out = a->out + (size_t)t * E;
    for (int i = 0; i < E; i++) {
        float sum = 0;
        for (int j = 0; j < ku; j++) {
            const float term = m->out[(size_t)m->slot[t * ku + j] * E + i] * m->weight[t * ku + j];
            sum = j ? sum + term : term;
        }
        out[i] = sum;
    }
}

// One expert's rows (gate, up or down: which, its first row ex * rows) as
// an item of a job, against its pairs' inputs in act and outputs in out.
static cpu_matmul_item expert_item(const cpu_moe_work *m, const seam_tensor *w, int64_t rows, int ex, const void *act,
                                   int64_t cols, float *out, seam_tensor *slice) {
    *slice = tensor_rows(w, (int64_t)ex * rows, rows);
    const uint64_t stride = cpu_matvec_scratch_bytes(cols);
    return (cpu_matmul_item){
        .w = slice, .act = (const uint8_t *)act + (size_t)m->first[ex] * stride, .act_stride = stride,
        .n = m->first[ex + 1] - m->first[ex], .out = out + (size_t)m->first[ex] * rows, .ldo = rows,
    };
}

// The experts grouped by expert: each expert's rows are read once for every
// (token, rank) pair that chose it, and every expert's gate and up, then
// every expert's down, run as one pool job.
void cpu_backend_experts(const cpu_backend *b, const seam_layer_weights *l, const float *x, float *router, float *out,
                         int n) {
    const seam_config *c = b->cfg;
    const cpu_moe_work *m = &b->moe;
    const int ku = c->n_expert_used, E = c->n_embd, F = c->n_ff_exp, ne = c->n_expert;
    for (int t = 0; t < n; t++) cpu_moe_route(c, router + t * ne, m->chosen + t * ku, m->weight + t * ku);
    // the pairs in expert order (a counting sort)
    memset(m->first, 0, sizeof(int) * (ne + 1));
    for (int p = 0; p < n * ku; p++) m->first[m->chosen[p] + 1]++;
    for (int ex = 0; ex < ne; ex++) m->first[ex + 1] += m->first[ex];
    int fill[ne];
    memcpy(fill, m->first, sizeof fill);
    for (int p = 0; p < n * ku; p++) {
        m->slot[p] = fill[m->chosen[p]]++;
        m->pair[m->slot[p]] = p;
    }
    const moe_arg arg = {l, x, out};
    each_row(b, token_input, &arg, n);
    const void *up_act =
        seam_vec_dot_type(l->ffn_up_exps.type) == seam_vec_dot_type(l->ffn_gate_exps.type) ? b->act : b->act2;
    cpu_matmul_item items[2 * ne];
    seam_tensor slices[2 * ne];
    int n_items = 0;
    for (int ex = 0; ex < ne; ex++)
        if (m->first[ex + 1] > m->first[ex]) {
            items[n_items] = expert_item(m, &l->ffn_gate_exps, F, ex, b->act, E, b->layer.acts.hb, &slices[n_items]);
            n_items++;
            items[n_items] = expert_item(m, &l->ffn_up_exps, F, ex, up_act, E, b->layer.acts.hb2, &slices[n_items]);
            n_items++;
        }
    cpu_matmul_items(b->pool, n_items, items);
    each_row(b, pair_hidden, &arg, n * ku);
    n_items = 0;
    for (int ex = 0; ex < ne; ex++)
        if (m->first[ex + 1] > m->first[ex]) {
            items[n_items] = expert_item(m, &l->ffn_down_exps, E, ex, b->act2, F, m->out, &slices[n_items]);
            n_items++;
        }
    cpu_matmul_items(b->pool, n_items, items);
    each_row(b, pair_sum, &arg, n);
}

static int op_moe(void *be, int il, const seam_layer_weights *l, const float *x, float *out, int n, seam_error *e) {
    const cpu_backend *b = be;
    cpu_matmul(b->pool, &l->ffn_gate_inp, x, b->cfg->n_embd, b->moe.router, b->cfg->n_expert, n, b->act);
    cpu_backend_experts(b, l, x, b->moe.router, out, n);
    return 0;
}

const layer_ops cpu_layer_ops = {
    .rmsnorm = op_rmsnorm, .matmul = op_matmul,     .add_bias = op_add_bias, .add = op_add,
    .scale = op_scale,     .rope = op_rope,         .rotate = op_rotate,     .kv_append = op_kv_append,
    .attention = op_attention, .glu = op_glu,       .moe = op_moe,
};
