// plan.c — placement of layers and tensor classes, and the memory it costs.
#include "plan/plan.h"

#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "engine/engine.h"
#include "numeric/quant.h"

bool plan_gpu_reads_type(uint32_t type) {
    switch (type) {
    case GGML_TYPE_Q4_0: case GGML_TYPE_Q5_0: case GGML_TYPE_Q8_0: case GGML_TYPE_Q4_K: case GGML_TYPE_Q5_K:
    case GGML_TYPE_Q6_K: case GGML_TYPE_F16: case GGML_TYPE_F32: return true;
    default: return false;
    }
}

static bool gpu_reads(const seam_tensor *t) { return !t->data || plan_gpu_reads_type(t->type); }

// The first tensor of layer il the GPU cannot read, or NULL.
static const seam_tensor *unreadable_on_gpu(const seam_model *m, int il) {
    const seam_tensor *shared[MODEL_LAYER_SHARED], *routed[MODEL_LAYER_ROUTED];
    model_layer_tensors(m, il, shared, routed);
    for (int i = 0; i < MODEL_LAYER_SHARED + MODEL_LAYER_ROUTED; i++) {
        const seam_tensor *t = i < MODEL_LAYER_SHARED ? shared[i] : routed[i - MODEL_LAYER_SHARED];
        if (!gpu_reads(t)) return t;
    }
    return NULL;
}

// Working memory beyond the activations: the CUDA context's own, the graph,
// the quantised activation buffers and, where the prefill takes the GEMM,
// cuBLAS's handle (its workspace is one of the GEMM's buffers, counted
// apart). A round figure, checked after loading.
#define GPU_RESERVE (64ull << 20)

static uint64_t tensor_bytes(const seam_tensor *t) { return t->data ? t->n_bytes : 0; }

// Bytes of layer il outside its routed experts, and of its experts.
static void layer_split(const seam_model *m, int il, uint64_t *shared, uint64_t *experts) {
    const seam_layer_weights *l = &m->w.layers[il];
    *experts = tensor_bytes(&l->ffn_gate_exps) + tensor_bytes(&l->ffn_up_exps) + tensor_bytes(&l->ffn_down_exps);
    *shared = model_layer_bytes(m, il) - *experts;
}

// The activations one token needs on the GPU when it runs any layer.
static uint64_t gpu_activation_bytes(const seam_config *c, int n_ctx) {
    const uint64_t q_dim = (uint64_t)c->n_heads * c->head_dim, kv_dim = (uint64_t)c->n_kv_heads * c->head_dim;
    const uint64_t hidden = (uint64_t)(c->n_expert ? c->n_ff_exp : c->n_ff);  // as the CPU backend sizes it
    return 4 * (4 * (uint64_t)c->n_embd + 2 * q_dim + 2 * kv_dim + 2 * hidden + (uint64_t)c->n_heads * n_ctx +
                (uint64_t)c->n_expert);
}

void plan_place(seam_plan *p, const seam_model *m, const seam_plan_request *req, int n) {
    const seam_config *c = &m->cfg;
    memset(p, 0, sizeof *p);
    p->n_layers = c->n_layers;
    p->gpu_layers = n;
    p->overflow = req->overflow;
    p->n_ctx = req->n_ctx;
    p->cache = req->cache;
    p->gpu_prefill = req->gpu_prefill;
    p->budget[DEV_GPU] = req->gpu_budget;
    const bool overflow_on_gpu = req->overflow != OVERFLOW_CPU;
    uint64_t largest_overflow = 0;  // the stream placement's two staging buffers hold the largest
    for (int il = 0; il < c->n_layers; il++) {
        p->layer[il] = il < n ? DEV_GPU : DEV_CPU;
        const bool experts_on_cpu = req->cpu_moe || il < req->n_cpu_moe;
        p->experts[il] = p->layer[il] == DEV_GPU && !experts_on_cpu ? DEV_GPU : DEV_CPU;
        uint64_t shared, experts;
        layer_split(m, il, &shared, &experts);
        p->weights[p->layer[il]] += shared;
        p->weights[p->experts[il]] += experts;
        // the KV cache lives where the layer is computed
        const seam_device kv_dev = il < n || overflow_on_gpu ? DEV_GPU : DEV_CPU;
        const int rows = plan_kv_rows(c, req->cache, il, req->n_ctx);
        p->kv[kv_dev] += plan_kv_bytes(c, req->cache, (uint64_t)rows);
        if (rows == req->n_ctx) p->kv_per_token[kv_dev] += plan_kv_bytes(c, req->cache, 1);
        else p->ring_layers++, p->ring_rows = rows;
        if (il >= n && overflow_on_gpu) {
            const uint64_t bytes = model_layer_bytes(m, il);
            p->pinned += bytes;
            largest_overflow = bytes > largest_overflow ? bytes : largest_overflow;
        }
    }
    const int computed_on_gpu = overflow_on_gpu ? c->n_layers : n;
    const bool head_fits_gpu = computed_on_gpu == c->n_layers && computed_on_gpu > 0 && gpu_reads(&m->w.output);
    p->head = req->head >= 0 ? (seam_device)req->head : head_fits_gpu ? DEV_GPU : DEV_CPU;
    p->weights[p->head] += tensor_bytes(&m->w.output_norm) + tensor_bytes(&m->w.output);
    p->weights[DEV_CPU] += m->w.tied_output && p->head == DEV_CPU ? 0 : tensor_bytes(&m->w.tok_embd);
    // the host holds what the engine allocates (engine_scratch_bytes: it
    // runs every token's embedding and the logits come back to it); the GPU
    // its activations, the batched prefill's buffers when its mode takes the
    // GEMM, the logits when the head is there, and working memory
    p->scratch[DEV_CPU] = engine_scratch_bytes(c, req->n_ctx);
    if (computed_on_gpu > 0 || p->head == DEV_GPU)
        p->scratch[DEV_GPU] = gpu_activation_bytes(c, req->n_ctx) +
                              gpu_segment_prefill_bytes(m, computed_on_gpu, req->gpu_prefill) + GPU_RESERVE;
    if (p->head == DEV_GPU) p->scratch[DEV_GPU] += 4ull * (uint64_t)c->n_vocab;
    if (req->overflow == OVERFLOW_STREAM && n < c->n_layers) p->scratch[DEV_GPU] += 2 * largest_overflow;
}

uint64_t plan_total(const seam_plan *p, seam_device d) { return p->weights[d] + p->kv[d] + p->scratch[d]; }

// Without a GPU, a plan that puts nothing there (a total of 0) fits.
static bool fits(const seam_plan *p) { return plan_total(p, DEV_GPU) <= p->budget[DEV_GPU]; }

int plan_max_gpu_layers(const seam_model *m, const seam_plan_request *req) {
    if (req->gpu_budget == 0) return 0;
    seam_plan p;
    int best = 0;
    for (int n = 1; n <= m->cfg.n_layers; n++) {  // memory grows with n: the last that fits
        if (unreadable_on_gpu(m, n - 1)) break;
        plan_place(&p, m, req, n);
        if (!fits(&p)) break;
        best = n;
    }
    return best;
}

int plan_make(seam_plan *p, const seam_model *m, const seam_plan_request *req, seam_error *e) {
    const seam_config *c = &m->cfg;
    // past the model's layers means all of them, as llama.cpp reads -ngl 99
    int n = req->gpu_layers > c->n_layers ? c->n_layers : req->gpu_layers;
    if (req->gpu_budget == 0 && n > 0)
        return seam_fail(e, "--gpu-layers %d needs a CUDA device and there is none; use -ngl 0", req->gpu_layers);
    if (req->gpu_budget == 0 && req->head == DEV_GPU)
        return seam_fail(e, "--head gpu needs a CUDA device and there is none; use --head cpu");
    if (req->gpu_budget == 0 && req->overflow != OVERFLOW_CPU)
        return seam_fail(e, "--overflow %s computes layers on the GPU and there is no CUDA device; use --overflow cpu",
                         plan_overflow_name[req->overflow]);
    if (req->n_ctx < 1) return seam_fail(e, "the context must hold at least one token (got -c %d)", req->n_ctx);
    if (req->n_ctx > c->n_ctx_train)
        return seam_fail(e, "a context of %d tokens is past the %d this model was trained for (its context_length); "
                            "use at most -c %d", req->n_ctx, c->n_ctx_train, c->n_ctx_train);
    if (plan_kv_check(c, req->cache, e)) return -1;
    if (n < 0) n = plan_max_gpu_layers(m, req);
    plan_place(p, m, req, n);
    // the head reads the last layer's output: on the GPU it needs every layer
    // computed there, or it would run on a hidden state the CPU layers have
    // not yet seen
    if (p->head == DEV_GPU && plan_gpu_computed_layers(p) < c->n_layers && !req->head_apart)
        return seam_fail(e, "--head gpu needs every layer computed on the GPU, and %d of %d are (-ngl %d%s); raise "
                            "-ngl to %d, use --overflow mapped or stream, or drop --head gpu",
                         plan_gpu_computed_layers(p), c->n_layers, n, req->gpu_layers < 0 ? ", as many as fit" : "",
                         c->n_layers);
    // what the GPU computes, it must have kernels for
    for (int il = 0; il < plan_gpu_computed_layers(p); il++) {
        const seam_tensor *t = unreadable_on_gpu(m, il);
        if (t)
            return seam_fail(e, "layer %d's %.*s is %s, which no CUDA kernel reads: keep the layer on the CPU (-ngl %d, "
                                "--overflow cpu)", il, t->name_len, t->name, ggml_type_name(t->type), il);
    }
    if (p->head == DEV_GPU && !gpu_reads(&m->w.output))
        return seam_fail(e, "the output head %.*s is %s, which no CUDA kernel reads: use --head cpu",
                         m->w.output.name_len, m->w.output.name, ggml_type_name(m->w.output.type));
    if (!fits(p)) {
        char need[32], have[32];
        snprintf(need, sizeof need, "%.2f GiB", plan_total(p, DEV_GPU) / 1073741824.0);
        snprintf(have, sizeof have, "%.2f GiB", p->budget[DEV_GPU] / 1073741824.0);
        return seam_fail(e, "%d GPU layers need %s of GPU memory and %s is available; at most %d layers fit", n,
                         need, have, plan_max_gpu_layers(m, req));
    }
    return 0;
}

static void mib(uint64_t b, char *buf, size_t len) { snprintf(buf, len, "%10.1f MiB", b / 1048576.0); }

void plan_print(const seam_plan *p, FILE *out) {
    static const char *NAMES[DEV_COUNT] = {"CPU", "GPU"};
    fprintf(out, "plan: %d of %d layers on the GPU, head on the %s, context %d\n", p->gpu_layers, p->n_layers,
            NAMES[p->head], p->n_ctx);
    fprintf(out, "  KV cache: K %s, V %s, %.1f KiB per token of context", plan_kv_type_name[p->cache.k],
            plan_kv_type_name[p->cache.v], (p->kv_per_token[DEV_CPU] + p->kv_per_token[DEV_GPU]) / 1024.0);
    if (p->ring_layers)
        fprintf(out, " on %d full layers; %d sliding layers keep a ring of their last %d positions (--swa-full: all)",
                p->n_layers - p->ring_layers, p->ring_layers, p->ring_rows);
    fprintf(out, "\n");
    if (p->overflow != OVERFLOW_CPU && p->gpu_layers < p->n_layers)
        fprintf(out, "  layers %d..%d stay in host memory and run on the GPU: %s\n", p->gpu_layers, p->n_layers - 1,
                p->overflow == OVERFLOW_MAPPED ? "their kernels read the weights over the bus (mapped)"
                                               : "each copied in by DMA while earlier layers compute (stream)");
    if (p->pinned)
        fprintf(out, "  (their weights: a pinned copy of %.1f MiB in host memory beside the file's mapping%s)\n",
                p->pinned / 1048576.0, p->overflow == OVERFLOW_STREAM ? "; GPU scratch holds two layers of it" : "");
    fprintf(out, "  %-4s %-14s %14s %14s %14s %14s %14s %12s\n", "dev", "layers", "weights", "KV", "scratch", "total",
            "budget", "KV/token");
    for (int d = 0; d < DEV_COUNT; d++) {
        int first = -1, last = -1, experts_elsewhere = 0;
        for (int il = 0; il < p->n_layers; il++) {
            if (p->layer[il] != (seam_device)d) continue;
            if (first < 0) first = il;
            last = il;
            experts_elsewhere += p->experts[il] != p->layer[il];
        }
        char layers[32] = "-", w[32], kv[32], s[32], t[32], b[32] = "         -";
        if (first >= 0) snprintf(layers, sizeof layers, "%d..%d", first, last);
        mib(p->weights[d], w, sizeof w), mib(p->kv[d], kv, sizeof kv), mib(p->scratch[d], s, sizeof s);
        mib(plan_total(p, (seam_device)d), t, sizeof t);
        if (p->budget[d]) mib(p->budget[d], b, sizeof b);
        fprintf(out, "  %-4s %-14s %s %s %s %s %s %8.1f KiB\n", NAMES[d], layers, w, kv, s, t, b,
                p->kv_per_token[d] / 1024.0);
        if (experts_elsewhere)
            fprintf(out, "       (the experts of %d of these layers are on the %s)\n", experts_elsewhere,
                    NAMES[1 - d]);
    }
}

int plan_parse_bytes(const char *text, uint64_t *out) {
    char *end;
    errno = 0;
    double v = strtod(text, &end);
    if (errno || end == text || !(v >= 0)) return -1;
    double scale = 1;
    switch (toupper((unsigned char)*end)) {
    case 'K': scale = 1024.0, end++; break;
    case 'M': scale = 1048576.0, end++; break;
    case 'G': scale = 1073741824.0, end++; break;
    case 'T': scale = 1099511627776.0, end++; break;
    }
    if (*end == 'i' || *end == 'I') end++;
    if (*end == 'B' || *end == 'b') end++;
    if (*end || v * scale > 1.8e19) return -1;
    *out = (uint64_t)(v * scale);
    return 0;
}
