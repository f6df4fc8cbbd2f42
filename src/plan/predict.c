// predict.c — the roofline of one decoded token (predict.h).
#include "plan/predict.h"

#include <inttypes.h>
#include <string.h>

#include "cpu/ops.h"
#include "cpu/speed.h"
#include "engine/engine.h"

const char *const predict_part_name[PART_COUNT] = {"embedding", "launch", "GPU layers", "CPU layers", "head",
                                                   "crossings"};
const char *const predict_lane_name[LANE_COUNT] = {"CPU", "bus", "GPU"};

// Bytes one token reads of a layer, per weight type: the tensors outside
// the routed experts (shared) and the active share of the experts.
typedef struct {
    uint64_t bytes[GGML_TYPE_COUNT];
    uint64_t rows[GGML_TYPE_COUNT];  // matvec rows (a row's fixed cost is the CPU kernels')
} reads;

typedef struct {
    reads shared, experts;
} layer_reads;

static void add_tensor(reads *r, const seam_tensor *t, uint64_t num, uint64_t den) {
    if (!t->data) return;
    r->bytes[t->type] += t->n_bytes / den * num;
    r->rows[t->type] += (uint64_t)t->rows / den * num;
}

static void read_layer(const seam_model *m, int il, layer_reads *r) {
    const seam_config *c = &m->cfg;
    memset(r, 0, sizeof *r);
    const seam_tensor *shared[MODEL_LAYER_SHARED], *routed[MODEL_LAYER_ROUTED];
    model_layer_tensors(m, il, shared, routed);
    for (int i = 0; i < MODEL_LAYER_SHARED; i++) add_tensor(&r->shared, shared[i], 1, 1);
    if (c->n_expert)
        for (int i = 0; i < MODEL_LAYER_ROUTED; i++)
            add_tensor(&r->experts, routed[i], (uint64_t)c->n_expert_used, (uint64_t)c->n_expert);
}

static uint64_t total(const reads *r) {
    uint64_t s = 0;
    for (int t = 0; t < GGML_TYPE_COUNT; t++) s += r->bytes[t];
    return s;
}

int predict_layer_kernels(const seam_config *c) {
    // gpu_segment.c's layer_forward: a matvec is two kernels (the input's
    // quantisation, then the dots)
    int k = 1 + 3 * 2 + (c->qkv_bias ? 3 : 0) + (c->qk_norm ? 2 : 0) + 2 + (c->q_scale != 1.0f) + 2 + 2 +
            (c->post_norms ? 1 : 0) + 1 + 1;
    if (c->n_expert) k += 1 + 1 + 1 + 6 * c->n_expert_used + 1;  // router, route, quantise, per expert, sum
    else k += 2 * 2 + 1 + 2 + (c->post_norms ? 1 : 0) + 1;
    return k;
}

typedef struct {
    const hw_profile *hw;
    const seam_config *c;
    int threads;
    double cpu_gbs;  // read bandwidth on `threads`
    double gpu_gbs;  // peak * efficiency
    double kv_per_pos;  // bytes of K and V of one position of one layer
    bool in_cache;      // the CPU's weights fit its last-level cache: no streaming from memory
} ctx;

static double hw_get(const hw_profile *hw, hw_key k, double def) { return hw->set[k] ? hw->v[k] : def; }

// The CPU's matvecs over r streamed from memory, per type: at the speed
// the kernels stream a long matrix (cpu_stream_gbs), or where that is
// unknown the slower of the read bandwidth and the kernels on the threads.
// Each call's fixed cost is cpu_jobs_fixed_us's, added by the caller.
static double cpu_streamed_us(const ctx *x, const reads *r) {
    double ns = 0;
    for (int t = 0; t < GGML_TYPE_COUNT; t++) {
        if (!r->bytes[t]) continue;
        const double dot = x->hw->cpu_dot_gbs[t], stream = x->hw->cpu_stream_gbs[t];
        const double cmp = dot > 0 ? (r->bytes[t] / dot + r->rows[t] * x->hw->cpu_dot_row_ns[t]) / x->threads : 0;
        const double mem = r->bytes[t] / x->cpu_gbs;
        if (stream > 0) ns += r->bytes[t] / (stream * x->cpu_gbs / x->hw->v[HW_CPU_READ_GBS]);
        else ns += mem > cmp ? mem : cmp;  // bytes / (GB/s) = ns
    }
    return 1e-3 * ns;
}

// One pool job of the CPU backend's layer (cpu/backend.c): matrices multiplied against one
// input, their rows shared out as cpu_matmul_items does.
enum { JOB_PARTS = 3 };
typedef struct {
    seam_tensor w[JOB_PARTS];
    int n;
} cpu_job;

// The jobs of the layer recipe (model/layer.c) on the CPU, in order: q/k/v as one, the output
// projection, then gate/up as one and down -- or the router and, per chosen
// expert, its gate/up and its down (experts_only: those alone, for a GPU
// layer whose experts stay on the CPU). Attention's job is counted apart
// (cpu_attention_us). Returns the count, at most LAYER_JOBS(c).
#define LAYER_JOBS(c) (4 + 2 * (c)->n_expert_used)
static int layer_jobs(const seam_model *m, int il, bool experts_only, cpu_job *jobs) {
    const seam_layer_weights *l = &m->w.layers[il];
    const seam_config *c = &m->cfg;
    int n = 0;
    if (!experts_only) {
        jobs[n++] = (cpu_job){{l->wq, l->wk, l->wv}, 3};
        jobs[n++] = (cpu_job){{l->wo}, 1};
        if (!c->n_expert) {
            jobs[n++] = (cpu_job){{l->w_gate, l->w_up}, 2};
            jobs[n++] = (cpu_job){{l->w_down}, 1};
            return n;
        }
        jobs[n++] = (cpu_job){{l->ffn_gate_inp}, 1};
    }
    // one expert's rows (every expert's are alike)
    const seam_tensor gate = tensor_rows(&l->ffn_gate_exps, 0, c->n_ff_exp),
                      up = tensor_rows(&l->ffn_up_exps, 0, c->n_ff_exp),
                      down = tensor_rows(&l->ffn_down_exps, 0, c->n_embd);
    for (int j = 0; j < c->n_expert_used; j++) {
        jobs[n++] = (cpu_job){{gate, up}, 2};
        jobs[n++] = (cpu_job){{down}, 1};
    }
    return n;
}

// A job's fixed cost to the pool (none on one thread, which makes it a call).
static double job_us(const ctx *x) { return x->threads > 1 ? hw_get(x->hw, HW_CPU_JOB_US, 0) : 0; }

// n matmul jobs' fixed costs: each the caller's call and the pool's job.
static double cpu_jobs_fixed_us(const ctx *x, int n) { return n * (hw_get(x->hw, HW_CPU_CALL_US, 0) + job_us(x)); }

// A matmul job on weights in cache: the caller's fixed cost of the call,
// the pool's, and the job's grabs of rows at the dot kernels' speed
// (row_ns + bytes / dot_gbs; where the profile lacks them, a thread's share
// of the read bandwidth) over the threads.
static double cpu_job_us(const ctx *x, const cpu_job *j) {
    const seam_tensor *w[JOB_PARTS];
    double row_us[JOB_PARTS];
    for (int i = 0; i < j->n; i++) {
        const double dot = x->hw->cpu_dot_gbs[j->w[i].type];
        w[i] = &j->w[i];
        row_us[i] = 1e-3 * (dot > 0 ? x->hw->cpu_dot_row_ns[w[i]->type] + w[i]->row_bytes / dot
                                    : w[i]->row_bytes * x->threads / x->cpu_gbs);
    }
    return cpu_jobs_fixed_us(x, 1) + cpu_matmul_schedule_us(x->threads, hw_get(x->hw, HW_CPU_WAKE_US, 0), j->n, w, row_us);
}

static double cpu_jobs_us(const ctx *x, int n, const cpu_job *jobs) {
    double us = 0;
    for (int i = 0; i < n; i++) us += cpu_job_us(x, &jobs[i]);
    return us;
}

// The CPU's matmul jobs over the weights r: job by job where its part
// stays in the last cache, else streamed from memory plus each job's fixed
// cost.
static double cpu_weights_us(const ctx *x, const reads *r, int n, const cpu_job *jobs) {
    return x->in_cache ? cpu_jobs_us(x, n, jobs) : cpu_streamed_us(x, r) + cpu_jobs_fixed_us(x, n);
}

// Attention of layer il as cpu_attention shares it: jobs of p query heads
// of one KV head (cpu_attention_per_job), KV head by KV head, over the
// threads; a position costs a job K+V bytes / attn_read_gbs (its KV head's
// rows, read once) + p * (K+V bytes / attn_gbs + attn_pos_ns), as measured
// with every thread attending at once -- over a cache in the last-level
// cache (the attn_llc figures) when the CPU's whole part stays there. A
// profile without these figures: the K and V bytes at the read bandwidth.
static double cpu_attention_us(const ctx *x, int il, int fill) {
    const seam_config *c = x->c;
    const int n = plan_kv_visible(c, il, fill - 1);
    if (!x->hw->set[HW_CPU_ATTN_GBS]) return 1e-3 * n * x->kv_per_pos / x->cpu_gbs;
    const hw_key fig =
        x->in_cache && x->hw->set[HW_CPU_ATTN_LLC_READ_GBS] ? HW_CPU_ATTN_LLC_READ_GBS : HW_CPU_ATTN_READ_GBS;
    const double read_gbs = x->hw->v[fig], attn_gbs = x->hw->v[fig + 1], pos_ns = x->hw->v[fig + 2];
    const int group = c->n_heads / c->n_kv_heads, p = cpu_attention_per_job(1, c->n_heads, c->n_kv_heads, x->threads);
    const int per_kv = (group + p - 1) / p, jobs = c->n_kv_heads * per_kv;
    const double bytes = x->kv_per_pos / c->n_kv_heads;  // K and V of one KV head's position
    double piece[jobs];
    for (int k = 0; k < jobs; k++) {
        const int left = group - k % per_kv * p, q = left < p ? left : p;
        piece[k] = 1e-3 * n * (bytes / read_gbs + q * (bytes / attn_gbs + pos_ns));
    }
    return job_us(x) + cpu_schedule_us(x->threads, hw_get(x->hw, HW_CPU_WAKE_US, 0), jobs, piece);
}

static double gpu_layer_us(const ctx *x, uint64_t weight_bytes, double weight_gbs, int il, int fill) {
    const double kv = plan_kv_visible(x->c, il, fill - 1) * x->kv_per_pos;
    const int kernels = (int)hw_get(x->hw, HW_GPU_KERNELS_PER_LAYER, predict_layer_kernels(x->c));
    return 1e-3 * (weight_bytes / weight_gbs + kv / x->gpu_gbs) + kernels * x->hw->v[HW_GPU_KERNEL_US];
}

static double crossing_us(const ctx *x, uint64_t bytes) {
    return x->hw->v[HW_PCIE_US] + 1e-3 * bytes / x->hw->v[HW_PCIE_GBS];
}

static void step(seam_prediction *pr, predict_lane lane, predict_part part, uint64_t bytes, double us, const char *fmt,
                 int a, int b) {
    if (pr->n_steps == PREDICT_MAX_STEPS) return;  // more than any plan makes: the totals below stay right
    predict_step *s = &pr->step[pr->n_steps++];
    *s = (predict_step){.lane = lane, .part = part, .bytes = bytes, .us = us};
    snprintf(s->what, sizeof s->what, fmt, a, b);
}

// Consecutive layers of one kind, summed into one step.
typedef struct {
    int first, last;
    uint64_t bytes;
    double us;
} run;

static void flush(seam_prediction *pr, run *r, predict_lane lane, predict_part part, const char *label) {
    if (r->first < 0) return;
    char fmt[64];
    snprintf(fmt, sizeof fmt, "%s %%d..%%d", label);
    step(pr, lane, part, r->bytes, r->us, fmt, r->first, r->last);
    *r = (run){-1, -1, 0, 0};
}

static void extend(run *r, int il, uint64_t bytes, double us) {
    if (r->first < 0) r->first = il;
    r->last = il, r->bytes += bytes, r->us += us;
}

int predict_token(const seam_model *m, const seam_plan *p, const hw_profile *hw, int n_threads, int fill,
                  seam_prediction *pr, seam_error *e) {
    const seam_config *c = &m->cfg;
    const int L = c->n_layers, computed = plan_gpu_computed_layers(p);
    const bool uses_gpu = computed > 0 || p->head == DEV_GPU;
    if (!hw->has_cpu && (computed < L || p->head == DEV_CPU))
        return seam_fail(e, "profile '%s' gives no CPU figures (cpu_read_gbs), and this plan runs %s on the CPU",
                         hw->name, computed < L ? "layers" : "the head");
    if (uses_gpu && !hw->has_gpu)
        return seam_fail(e, "profile '%s' has no GPU, and this plan puts %d layers%s on one", hw->name, computed,
                         p->head == DEV_GPU ? " and the head" : "");
    if (fill < 1) return seam_fail(e, "the KV fill must be at least one position");
    if (n_threads < 1) n_threads = hw->set[HW_CPU_THREADS] ? (int)hw->v[HW_CPU_THREADS] : 1;
    memset(pr, 0, sizeof *pr);
    pr->gpu_layers = p->gpu_layers, pr->n_layers = L, pr->n_threads = n_threads, pr->fill = fill;
    for (int d = 0; d < DEV_COUNT; d++) pr->memory[d] = plan_total(p, (seam_device)d);
    pr->gpu_budget = p->budget[DEV_GPU];
    pr->overflow = p->overflow, pr->head = p->head;

    // read bandwidth on n threads: the measured figure at cpu_threads, one
    // thread's figure times n below it (or a share of the whole)
    const double prof_t = hw_get(hw, HW_CPU_THREADS, 1), full = hw->v[HW_CPU_READ_GBS];
    double cpu_gbs = full;
    if (n_threads < prof_t)
        cpu_gbs = hw->set[HW_CPU_READ_GBS_1] ? n_threads * hw->v[HW_CPU_READ_GBS_1] : full * n_threads / prof_t;
    if (cpu_gbs > full) cpu_gbs = full;
    // the bytes the CPU holds and reads over the tokens (every expert, the
    // head, the KV cache at this fill): do they stay in its last cache?
    uint64_t cpu_set = p->head == DEV_CPU ? m->w.output.n_bytes : 0;
    for (int il = computed; il < L; il++) cpu_set += model_layer_bytes(m, il);
    for (int il = computed; il < L; il++) cpu_set += plan_kv_bytes(c, p->cache, plan_kv_rows(c, p->cache, il, fill));
    const ctx x = {.hw = hw, .c = c, .threads = n_threads, .cpu_gbs = cpu_gbs,
                   .gpu_gbs = hw->v[HW_GPU_PEAK_GBS] * hw->v[HW_GPU_EFFICIENCY],
                   .kv_per_pos = (double)plan_kv_bytes(c, p->cache, 1),
                   .in_cache = hw->set[HW_CPU_LLC_MIB] && cpu_set <= hw->v[HW_CPU_LLC_MIB] * 1048576.0};

    const uint64_t hidden = (uint64_t)c->n_embd * sizeof(float);
    const seam_tensor *emb = &m->w.tok_embd;
    // (a profile without CPU figures: the row's few KiB count as nothing)
    step(pr, LANE_CPU, PART_EMBED, emb->row_bytes, hw->has_cpu ? 1e-3 * emb->row_bytes / cpu_gbs : 0, "embedding row", 0, 0);

    // the GPU's layers: resident ones, and (mapped, stream) the overflow;
    // experts kept on the CPU (--n-cpu-moe) cross to it and back
    if (uses_gpu) step(pr, LANE_CPU, PART_LAUNCH, 0, hw->v[HW_LAUNCH_US], "launch the GPU segment", 0, 0);
    if (computed > 0) step(pr, LANE_BUS, PART_CROSSING, hidden, crossing_us(&x, hidden), "H2D hidden state", 0, 0);
    const int cards = hw_cards_for_budget(hw, p->budget[DEV_GPU]);
    run res = {-1, -1, 0, 0}, cpu_exp = {-1, -1, 0, 0};
    double stream_copy = 0, stream_compute = 0;
    uint64_t stream_bytes = 0;
    int n_cpu_experts = 0;
    for (int il = 0; il < computed; il++) {
        layer_reads r;
        read_layer(m, il, &r);
        const bool experts_here = p->experts[il] == DEV_GPU || p->layer[il] != DEV_GPU;
        const uint64_t on_gpu = total(&r.shared) + (experts_here ? total(&r.experts) : 0);
        if (il >= p->gpu_layers && p->overflow == OVERFLOW_STREAM) {
            // the whole layer is copied (every expert), its compute waits for it
            stream_copy += 1e-3 * model_layer_bytes(m, il) / hw->v[HW_PCIE_GBS];
            pr->layer_us[il] = gpu_layer_us(&x, on_gpu, x.gpu_gbs, il, fill);
            stream_compute += pr->layer_us[il];
            stream_bytes += model_layer_bytes(m, il);
            continue;
        }
        const bool mapped = il >= p->gpu_layers;  // OVERFLOW_MAPPED: its kernels read host memory
        // a card boundary: the hidden state goes through the host to the next card (a resident
        // layer's test first: past them gpu_layers may be 0, and the cards' share with it)
        if (!mapped && cards > 1 && il > 0 && il % ((p->gpu_layers + cards - 1) / cards) == 0) {
            flush(pr, &res, LANE_GPU, PART_GPU_LAYERS, "layers");
            step(pr, LANE_BUS, PART_CROSSING, hidden, crossing_us(&x, hidden), "D2H hidden state (to the next card)", 0, 0);
            step(pr, LANE_BUS, PART_CROSSING, hidden, crossing_us(&x, hidden), "H2D hidden state (from the last card)", 0, 0);
        }
        if (mapped && res.first >= 0 && res.last < p->gpu_layers) flush(pr, &res, LANE_GPU, PART_GPU_LAYERS, "layers");
        pr->layer_us[il] = gpu_layer_us(&x, on_gpu, mapped ? hw->v[HW_PCIE_GBS] : x.gpu_gbs, il, fill);
        extend(&res, il, on_gpu, pr->layer_us[il]);
        if (!experts_here) {
            cpu_job jobs[LAYER_JOBS(c)];
            const int n = layer_jobs(m, il, true, jobs);
            const double experts_us = cpu_weights_us(&x, &r.experts, n, jobs);
            pr->layer_us[il] += experts_us;
            extend(&cpu_exp, il, total(&r.experts), experts_us);
            n_cpu_experts++;
        }
    }
    flush(pr, &res, LANE_GPU, PART_GPU_LAYERS, p->overflow == OVERFLOW_MAPPED ? "layers (mapped past -ngl)" : "layers");
    pr->n_cpu_experts = n_cpu_experts;
    if (stream_bytes) {
        const double us = stream_copy > stream_compute ? stream_copy : stream_compute;
        step(pr, LANE_GPU, PART_GPU_LAYERS, stream_bytes, us, "layers %d..%d streamed in (copy and compute overlap)",
             p->gpu_layers, L - 1);
    }
    if (n_cpu_experts) {
        // the experts' input and the router's logits, two copies (gpu_segment.c's host_experts)
        const uint64_t router = (uint64_t)c->n_expert * sizeof(float);
        step(pr, LANE_BUS, PART_CROSSING, (hidden + router) * n_cpu_experts,
             n_cpu_experts * (crossing_us(&x, hidden) + crossing_us(&x, router)),
             "D2H experts' input and router logits (x%d)", n_cpu_experts, 0);
        flush(pr, &cpu_exp, LANE_CPU, PART_CPU_LAYERS, "experts of layers");
        step(pr, LANE_BUS, PART_CROSSING, hidden * n_cpu_experts, n_cpu_experts * crossing_us(&x, hidden),
             "H2D experts' output back (x%d)", n_cpu_experts, 0);
    }

    // the CPU's layers, then the head
    const bool cpu_after = computed < L || p->head == DEV_CPU;
    if (computed > 0 && cpu_after) step(pr, LANE_BUS, PART_CROSSING, hidden, crossing_us(&x, hidden), "D2H hidden state", 0, 0);
    run cpu = {-1, -1, 0, 0};
    for (int il = computed; il < L; il++) {
        layer_reads r;
        read_layer(m, il, &r);
        reads all = r.shared;
        for (int t = 0; t < GGML_TYPE_COUNT; t++) all.bytes[t] += r.experts.bytes[t], all.rows[t] += r.experts.rows[t];
        cpu_job jobs[LAYER_JOBS(c)];
        const int n = layer_jobs(m, il, false, jobs);
        const double attention_us = cpu_attention_us(&x, il, fill);
        pr->cpu_attention_us += attention_us;
        pr->layer_us[il] = cpu_weights_us(&x, &all, n, jobs) + attention_us;
        extend(&cpu, il, total(&all) + (uint64_t)(plan_kv_visible(c, il, fill - 1) * x.kv_per_pos), pr->layer_us[il]);
    }
    flush(pr, &cpu, LANE_CPU, PART_CPU_LAYERS, "layers");
    reads head = {{0}, {0}};
    add_tensor(&head, &m->w.output_norm, 1, 1);
    add_tensor(&head, &m->w.output, 1, 1);
    const uint64_t head_bytes = total(&head), logits = (uint64_t)c->n_vocab * sizeof(float);
    if (p->head == DEV_GPU) {
        if (computed < L) step(pr, LANE_BUS, PART_CROSSING, hidden, crossing_us(&x, hidden), "H2D hidden state", 0, 0);
        pr->layer_us[L] = 1e-3 * head_bytes / x.gpu_gbs + 3 * hw->v[HW_GPU_KERNEL_US];
        step(pr, LANE_GPU, PART_HEAD, head_bytes, pr->layer_us[L], "output head", 0, 0);
        step(pr, LANE_BUS, PART_CROSSING, logits, crossing_us(&x, logits), "D2H logits", 0, 0);
    } else {
        const cpu_job job = {{m->w.output}, 1};
        pr->layer_us[L] = cpu_weights_us(&x, &head, 1, &job);
        step(pr, LANE_CPU, PART_HEAD, head_bytes, pr->layer_us[L], "output head", 0, 0);
    }

    for (int i = 0; i < pr->n_steps; i++) {
        pr->part_us[pr->step[i].part] += pr->step[i].us;
        pr->token_us += pr->step[i].us;
        if (pr->step[i].lane == LANE_GPU) pr->gpu_busy_us += pr->step[i].us;
    }
    pr->gpu_idle_us = uses_gpu ? pr->token_us - pr->gpu_busy_us : 0;
    pr->tok_s = 1e6 / pr->token_us;
    return 0;
}

void predict_print_header(FILE *out) {
    fprintf(out, "%5s %7s %-7s %-4s %8s %9s | %9s %9s %9s %9s %9s %9s | %9s\n", "ngl", "cpu-moe", "place", "head",
            "tok/s", "ms/token", "GPU lay", "CPU lay", "head", "crossing", "launch", "embed", "GPU idle");
}

void predict_print(const seam_prediction *pr, FILE *out) {
    static const char *DEV[DEV_COUNT] = {"CPU", "GPU"};
    fprintf(out, "%5d %7d %-7s %-4s %8.2f %9.3f | %9.3f %9.3f %9.3f %9.3f %9.3f %9.3f | %9.3f\n", pr->gpu_layers,
            pr->n_cpu_experts, plan_overflow_name[pr->overflow], DEV[pr->head], pr->tok_s, pr->token_us / 1e3,
            pr->part_us[PART_GPU_LAYERS] / 1e3, pr->part_us[PART_CPU_LAYERS] / 1e3, pr->part_us[PART_HEAD] / 1e3,
            pr->part_us[PART_CROSSING] / 1e3, pr->part_us[PART_LAUNCH] / 1e3, pr->part_us[PART_EMBED] / 1e3,
            pr->gpu_idle_us / 1e3);
}

void predict_write_json(const seam_prediction *pr, FILE *out) {
    static const char *DEV[DEV_COUNT] = {"cpu", "gpu"};
    fprintf(out,
            "{\"n_gpu_layers\": %d, \"n_cpu_experts\": %d, \"n_layers\": %d, \"overflow\": \"%s\", \"head\": \"%s\", "
            "\"n_threads\": %d, \"fill\": %d, \"tok_s\": %.4f, \"token_us\": %.3f, \"gpu_busy_us\": %.3f, "
            "\"gpu_idle_us\": %.3f, \"cpu_attention_us\": %.3f, \"parts_us\": {",
            pr->gpu_layers, pr->n_cpu_experts, pr->n_layers, plan_overflow_name[pr->overflow], DEV[pr->head],
            pr->n_threads, pr->fill,
            pr->tok_s, pr->token_us, pr->gpu_busy_us, pr->gpu_idle_us, pr->cpu_attention_us);
    for (int k = 0; k < PART_COUNT; k++) fprintf(out, "%s\"%s\": %.3f", k ? ", " : "", predict_part_name[k], pr->part_us[k]);
    fprintf(out, "}, \"memory\": {\"cpu\": %" PRIu64 ", \"gpu\": %" PRIu64 ", \"gpu_budget\": %" PRIu64 "}, \"steps\": [",
            pr->memory[DEV_CPU], pr->memory[DEV_GPU], pr->gpu_budget);
    for (int i = 0; i < pr->n_steps; i++) {
        const predict_step *s = &pr->step[i];
        fprintf(out, "%s{\"lane\": \"%s\", \"part\": \"%s\", \"what\": \"%s\", \"bytes\": %" PRIu64 ", \"us\": %.3f}",
                i ? ", " : "", predict_lane_name[s->lane], predict_part_name[s->part], s->what, s->bytes, s->us);
    }
    fprintf(out, "]}");
}
