// placement.c — the plan's names and the KV cache's layout.
#include "model/placement.h"

#include <string.h>

#include "numeric/quant.h"

const char *const plan_overflow_name[OVERFLOW_COUNT] = {"cpu", "mapped", "stream"};

int plan_overflow_find(const char *name, size_t len) {
    for (int k = 0; k < OVERFLOW_COUNT; k++)
        if (strlen(plan_overflow_name[k]) == len && !strncmp(name, plan_overflow_name[k], len)) return k;
    return -1;
}

const char *const gpu_prefill_name[GPU_PREFILL_COUNT] = {"tokens", "gemm", "auto"};

int gpu_prefill_find(const char *name) {
    for (int k = 0; k < GPU_PREFILL_COUNT; k++)
        if (!strcmp(name, gpu_prefill_name[k])) return k;
    return -1;
}

bool gpu_prefill_uses_gemm(seam_gpu_prefill mode) { return mode == GPU_PREFILL_GEMM || mode == GPU_PREFILL_AUTO; }

int plan_gpu_computed_layers(const seam_plan *p) {
    return p->overflow == OVERFLOW_CPU ? p->gpu_layers : p->n_layers;
}

const char *const plan_kv_type_name[KV_TYPE_COUNT] = {"f16", "q8_0"};
const uint32_t plan_kv_ggml_type[KV_TYPE_COUNT] = {GGML_TYPE_F16, GGML_TYPE_Q8_0};

int plan_kv_type_find(const char *name) {
    for (int k = 0; k < KV_TYPE_COUNT; k++)
        if (!strcmp(name, plan_kv_type_name[k])) return k;
    return -1;
}

int plan_kv_check(const seam_config *c, seam_kv_config kv, seam_error *e) {
    const seam_kv_type types[2] = {kv.k, kv.v};
    for (int i = 0; i < 2; i++) {
        if (types[i] < 0 || types[i] >= KV_TYPE_COUNT)
            return seam_fail(e, "unknown KV cache type %d", (int)types[i]);
        // a head's values are whole blocks, so that heads never share one
        if (types[i] == KV_Q8_0 && c->head_dim % QK8_0)
            return seam_fail(e, "a q8_0 %s cache needs heads of a multiple of %d values; this model's have %d (use f16)",
                             i ? "V" : "K", QK8_0, c->head_dim);
    }
    return 0;
}

void plan_kv_rotation(const seam_config *c, seam_kv_config kv, int *rot_k, int *rot_v) {
    const bool whole = c->head_dim % 64 == 0;
    int n = 64;
    while (c->head_dim % (2 * n) == 0) n *= 2;
    *rot_k = kv.k != KV_F16 && whole ? n : 0;
    *rot_v = kv.v != KV_F16 && whole ? 64 : 0;
}

int plan_kv_rows(const seam_config *c, seam_kv_config kv, int il, int n_ctx) {
    if (!c->layer_swa[il] || kv.swa_full) return n_ctx;
    const int ring = c->n_swa + SEAM_UBATCH;
    return ring < n_ctx ? ring : n_ctx;
}

uint64_t plan_kv_bytes(const seam_config *c, seam_kv_config kv, uint64_t n) {
    const uint64_t kv_dim = (uint64_t)c->n_kv_heads * c->head_dim;
    return n * (ggml_row_bytes(plan_kv_ggml_type[kv.k], kv_dim) + ggml_row_bytes(plan_kv_ggml_type[kv.v], kv_dim));
}

int plan_kv_visible(const seam_config *c, int il, int pos) {
    return c->layer_swa[il] && pos + 1 > c->n_swa ? c->n_swa : pos + 1;
}

uint64_t plan_kv_read_bytes(const seam_config *c, seam_kv_config kv, int l0, int l1, int pos) {
    uint64_t bytes = 0;
    for (int il = l0; il < l1; il++) bytes += plan_kv_bytes(c, kv, (uint64_t)plan_kv_visible(c, il, pos));
    return bytes;
}

uint64_t plan_prompt_macs(const seam_model *m, int n, int pos0) {
    const seam_config *c = &m->cfg;
    const uint64_t per_position = 2 * (uint64_t)c->n_heads * (uint64_t)c->head_dim;
    uint64_t macs = (uint64_t)m->w.output.rows * (uint64_t)m->w.output.cols;
    for (int il = 0; il < c->n_layers; il++) {
        macs += (uint64_t)n * model_layer_macs(m, il);
        for (int pos = pos0; pos < pos0 + n; pos++) macs += per_position * (uint64_t)plan_kv_visible(c, il, pos);
    }
    return macs;
}

seam_layer_time plan_layer_record(const seam_model *m, seam_kv_config kv, int il, int pos) {
    const seam_config *c = &m->cfg;
    seam_layer_time lt = {.layer = il, .pos = pos};
    if (il == c->n_layers) {
        lt.weight_bytes = m->w.output.n_bytes + m->w.output_norm.n_bytes;
    } else {
        lt.weight_bytes = model_layer_active_bytes(m, il);
        lt.kv_bytes = plan_kv_bytes(c, kv, (uint64_t)plan_kv_visible(c, il, pos));
    }
    return lt;
}
