// fit.c — every placement that fits, predicted, ranked.
#include "plan/fit.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "plan/predict.h"

const char *const fit_rule_name[2] = {"speed", "memory"};

static const char *const DEVICE_NAME[DEV_COUNT] = {"cpu", "gpu"};

static int faster_first(const void *pa, const void *pb) {
    const fit_candidate *a = pa, *b = pb;
    // at the printed precision, 0.01 tok/s: a difference below it is the arithmetic's, not the placement's
    const long long sa = llround(a->tok_s * 100), sb = llround(b->tok_s * 100);
    if (sa != sb) return sa > sb ? -1 : 1;
    // as fast: resident layers before streamed or mapped ones (no pinned copy), then fewer GPU bytes
    if ((a->overflow == OVERFLOW_CPU) != (b->overflow == OVERFLOW_CPU)) return a->overflow == OVERFLOW_CPU ? -1 : 1;
    if (a->gpu_bytes != b->gpu_bytes) return a->gpu_bytes < b->gpu_bytes ? -1 : 1;
    if (a->gpu_layers != b->gpu_layers) return b->gpu_layers - a->gpu_layers;
    if (a->n_cpu_moe != b->n_cpu_moe) return a->n_cpu_moe - b->n_cpu_moe;
    if (a->head != b->head) return (int)a->head - (int)b->head;
    if (a->overflow != b->overflow) return (int)a->overflow - (int)b->overflow;
    // (--fit-cache) the wider cache first: a total order, so that qsort, not stable, ranks alike everywhere
    if (a->cache.k != b->cache.k) return (int)a->cache.k - (int)b->cache.k;
    return (int)a->cache.v - (int)b->cache.v;
}

static bool same_cache(seam_kv_config a, seam_kv_config b) { return a.k == b.k && a.v == b.v; }

static bool same_placement(const fit_candidate *a, const seam_plan *p, int n_cpu_moe) {
    return a->gpu_layers == p->gpu_layers && a->n_cpu_moe == n_cpu_moe && a->head == p->head &&
           a->overflow == p->overflow && same_cache(a->cache, p->cache);
}

// The plan and prediction of one placement; false when it does not fit or
// the engine would not run it (plan_make's reasons) or the profile cannot
// predict it.
static bool try_placement(const seam_model *m, const seam_plan_request *req, const hw_profile *hw, int n_threads,
                          fit_candidate *out) {
    seam_plan p;
    seam_prediction pr;
    seam_error e = {{0}};
    if (plan_make(&p, m, req, &e) || predict_token(m, &p, hw, n_threads, req->n_ctx, &pr, &e)) return false;
    *out = (fit_candidate){.gpu_layers = p.gpu_layers, .n_cpu_moe = req->cpu_moe ? m->cfg.n_layers : req->n_cpu_moe,
                           .head = p.head, .overflow = p.overflow, .cache = p.cache,
                           .gpu_bytes = plan_total(&p, DEV_GPU),
                           .tok_s = pr.tok_s};
    return true;
}

// llama.cpp's --fit among the ranked placements (fit.h): the fewest first
// layers' experts on the CPU with every layer and the head on the GPU, else
// the most whole layers, within the budget less its margin.
static int llamacpp_placement(const fit_result *r, const seam_model *m, seam_kv_config cache) {
    const uint64_t target = r->budget > FIT_LLAMACPP_MARGIN ? r->budget - FIT_LLAMACPP_MARGIN : 0;
    const int L = m->cfg.n_layers;
    int best = -1;
    for (int i = 0; i < r->n; i++) {
        const fit_candidate *c = &r->c[i];
        // it keeps the cache types it is given
        if (c->gpu_bytes > target || c->overflow != OVERFLOW_CPU || !same_cache(c->cache, cache)) continue;
        const bool whole = c->n_cpu_moe == 0 && c->head == (c->gpu_layers == L ? DEV_GPU : DEV_CPU);
        const bool experts = m->cfg.n_expert > 0 && c->gpu_layers == L && c->head == DEV_GPU;
        if (!whole && !experts) continue;
        const fit_candidate *b = best < 0 ? NULL : &r->c[best];
        // more layers first; of as many, fewer layers' experts on the CPU
        if (!b || c->gpu_layers > b->gpu_layers || (c->gpu_layers == b->gpu_layers && c->n_cpu_moe < b->n_cpu_moe))
            best = i;
    }
    return best;
}

int fit_search(const seam_model *m, const seam_plan_request *base, fit_open open, const hw_profile *hw,
               int n_threads, fit_rule rule, fit_result *out, seam_error *e) {
    const int L = m->cfg.n_layers;
    const bool moe = m->cfg.n_expert > 0 && open.experts;
    // K <= n experts of GPU layers, heads, overflows, cache types: at most (L+1)(L+2)/2 x 2 x 3 x 4
    const int caches = open.cache ? KV_TYPE_COUNT * KV_TYPE_COUNT : 1;
    const size_t most = (size_t)(L + 1) * (size_t)(L + 2) / 2 * 6 * (size_t)caches;
    // a profile without the GPU's figures would rank only the CPU's placements and pick -ngl 0
    if (base->gpu_budget && !hw->has_gpu)
        return seam_fail(e, "'%s' has no GPU figures, so the fit cannot predict a GPU layer: give a profile of the GPU "
                            "(models/hw) with --hw", hw->name);
    *out = (fit_result){.c = malloc(most * sizeof *out->c), .rule = rule, .budget = base->gpu_budget, .n_layers = L};
    if (!out->c) return seam_fail(e, "out of memory for %zu placements", most);
    seam_plan_request req = *base;
    req.head_apart = false;  // the fit chooses what the engine runs
    for (int n = 0; n <= L; n++) {
        for (int k = 0; k <= (moe ? n : 0); k++) {
            for (int h = 0; h < (open.head ? DEV_COUNT : 1); h++) {
                for (int ov = 0; ov < (open.overflow ? 3 : 1); ov++) {
                    for (int kv = 0; kv < caches; kv++) {
                        if (open.overflow && ov != OVERFLOW_CPU && n == L) continue;  // nothing overflows
                        req.gpu_layers = n;
                        if (moe) req.n_cpu_moe = k, req.cpu_moe = false;
                        if (open.head) req.head = h;
                        if (open.overflow) req.overflow = (seam_overflow)ov;
                        if (open.cache) req.cache.k = (seam_kv_type)(kv / KV_TYPE_COUNT),
                                        req.cache.v = (seam_kv_type)(kv % KV_TYPE_COUNT);
                        if (try_placement(m, &req, hw, n_threads, &out->c[out->n])) out->n++;
                    }
                }
            }
        }
    }
    // the memory rule: the most layers that fit, what the user left open as by default
    req = *base;
    req.head_apart = false, req.gpu_layers = -1;
    if (open.head) req.head = -1;
    if (open.overflow) req.overflow = OVERFLOW_CPU;
    if (open.experts) req.n_cpu_moe = 0, req.cpu_moe = false;
    seam_plan fullest;
    seam_error why = {{0}};
    const bool has_fullest = plan_make(&fullest, m, &req, &why) == 0;  // not where the user's flags rule it out
    if (out->n == 0)
        return fit_free(out), seam_fail(e, "no placement of this model under these flags fits and can be "
                                           "predicted on '%s'%s%s", hw->name, has_fullest ? "" : ": ", why.msg);
    if (rule == FIT_MEMORY && !has_fullest) return fit_free(out), seam_fail(e, "%s", why.msg);
    qsort(out->c, (size_t)out->n, sizeof *out->c, faster_first);
    const int fullest_k = req.cpu_moe ? L : req.n_cpu_moe;
    out->fullest = -1;
    for (int i = 0; has_fullest && i < out->n && out->fullest < 0; i++)
        if (same_placement(&out->c[i], &fullest, fullest_k)) out->fullest = i;
    if (rule == FIT_MEMORY && out->fullest < 0)
        return fit_free(out), seam_fail(e, "the fullest layer split (-ngl %d) cannot be predicted on '%s'",
                                        fullest.gpu_layers, hw->name);
    out->chosen = rule == FIT_SPEED ? 0 : out->fullest;
    out->llamacpp = open.head && open.overflow && open.experts ? llamacpp_placement(out, m, base->cache) : -1;
    return 0;
}

seam_plan_request fit_request(const fit_result *r, const seam_plan_request *base) {
    const fit_candidate *c = &r->c[r->chosen];
    seam_plan_request req = *base;
    req.gpu_layers = c->gpu_layers;
    req.head = c->head;
    req.overflow = c->overflow;
    req.cache.k = c->cache.k, req.cache.v = c->cache.v;
    if (!req.cpu_moe) req.n_cpu_moe = c->n_cpu_moe;
    req.head_apart = false;
    return req;
}

void fit_flags(const fit_candidate *c, char *buf, size_t len) {
    int at = snprintf(buf, len, "-ngl %d", c->gpu_layers);
    if (c->n_cpu_moe && at < (int)len) at += snprintf(buf + at, len - (size_t)at, " --n-cpu-moe %d", c->n_cpu_moe);
    if (at < (int)len) at += snprintf(buf + at, len - (size_t)at, " --head %s", DEVICE_NAME[c->head]);
    if (c->overflow != OVERFLOW_CPU && at < (int)len)
        at += snprintf(buf + at, len - (size_t)at, " --overflow %s", plan_overflow_name[c->overflow]);
    if (c->cache.k != KV_F16 && at < (int)len)
        at += snprintf(buf + at, len - (size_t)at, " -ctk %s", plan_kv_type_name[c->cache.k]);
    if (c->cache.v != KV_F16 && at < (int)len) snprintf(buf + at, len - (size_t)at, " -ctv %s", plan_kv_type_name[c->cache.v]);
}

static void print_row(const fit_result *r, int i, FILE *out) {
    const fit_candidate *c = &r->c[i];
    char ratio[16] = "-";
    if (r->fullest >= 0) snprintf(ratio, sizeof ratio, "%.2fx", c->tok_s / r->c[r->fullest].tok_s);
    char cache[16];
    snprintf(cache, sizeof cache, "%s/%s", plan_kv_type_name[c->cache.k], plan_kv_type_name[c->cache.v]);
    fprintf(out, " %s %4d %5d %8d  %-4s %-9s %-9s %10.1f %9.2f %10s%s%s\n", i == r->chosen ? "*" : " ", i + 1,
            c->gpu_layers, c->n_cpu_moe, DEVICE_NAME[c->head], plan_overflow_name[c->overflow], cache,
            c->gpu_bytes / 1048576.0, c->tok_s, ratio, i == r->fullest ? "  the fullest layer split" : "",
            i == r->llamacpp ? "  llama.cpp's --fit" : "");
}

void fit_print(const fit_result *r, int show, FILE *out) {
    fprintf(out, "fit by %s: %d placements fit a GPU budget of %.1f MiB; ranked by predicted decode speed\n",
            fit_rule_name[r->rule], r->n, r->budget / 1048576.0);
    fprintf(out, "   %4s %5s %8s  %-4s %-9s %-9s %10s %9s %10s\n", "rank", "ngl", "cpu-moe", "head", "overflow",
            "KV K/V", "GPU MiB", "tok/s", "vs full");
    const int shown = show < r->n ? show : r->n;
    for (int i = 0; i < shown; i++) print_row(r, i, out);
    // the choice, the fullest layer split and llama.cpp's, in rank order, where the first rows leave them out
    const int more[3] = {r->chosen, r->fullest, r->llamacpp};
    bool gap = true;
    for (int i = shown; i < r->n; i++) {
        if (i != more[0] && i != more[1] && i != more[2]) continue;
        if (gap) fprintf(out, "   ...\n"), gap = false;
        print_row(r, i, out);
    }
    char flags[96], full[96];
    fit_flags(&r->c[r->chosen], flags, sizeof flags);
    fprintf(out, "chosen (by %s): %s, %.2f tok/s predicted", fit_rule_name[r->rule], flags, r->c[r->chosen].tok_s);
    if (r->fullest < 0) {
        fprintf(out, "; no layer split of these flags fits to compare with");
    } else if (r->chosen != r->fullest) {
        fit_flags(&r->c[r->fullest], full, sizeof full);
        fprintf(out, ", %.2fx the fullest layer split (%s, %.2f tok/s)", r->c[r->chosen].tok_s / r->c[r->fullest].tok_s,
                full, r->c[r->fullest].tok_s);
    }
    fprintf(out, "\n");
    if (r->llamacpp >= 0) {
        fit_flags(&r->c[r->llamacpp], full, sizeof full);
        const fit_candidate *c = &r->c[r->llamacpp];
        const bool whole = c->gpu_layers == r->n_layers && c->n_cpu_moe == 0;  // nothing left to place in part
        fprintf(out, "llama.cpp's --fit would place about %s%s, %.2f tok/s predicted, leaving its %llu MiB margin "
                     "free\n", full, whole ? "" : " (and part of one more layer)", c->tok_s,
                (unsigned long long)(FIT_LLAMACPP_MARGIN >> 20));
    }
}

void fit_write_json(const fit_result *r, FILE *out) {
    fprintf(out,
            "{\"rule\": \"%s\", \"budget_bytes\": %llu, \"chosen\": %d, \"fullest\": %d, \"llamacpp\": %d, "
            "\"candidates\": [",
            fit_rule_name[r->rule], (unsigned long long)r->budget, r->chosen, r->fullest, r->llamacpp);
    for (int i = 0; i < r->n; i++) {
        const fit_candidate *c = &r->c[i];
        fprintf(out,
                "%s\n  {\"gpu_layers\": %d, \"n_cpu_moe\": %d, \"head\": \"%s\", \"overflow\": \"%s\", "
                "\"type_k\": \"%s\", \"type_v\": \"%s\", \"gpu_bytes\": %llu, \"tok_s\": %.4f}",
                i ? "," : "", c->gpu_layers, c->n_cpu_moe, DEVICE_NAME[c->head], plan_overflow_name[c->overflow],
                plan_kv_type_name[c->cache.k], plan_kv_type_name[c->cache.v], (unsigned long long)c->gpu_bytes,
                c->tok_s);
    }
    fprintf(out, "\n]}");
}

void fit_free(fit_result *r) {
    free(r->c);
    r->c = NULL;
    r->n = 0;
}
