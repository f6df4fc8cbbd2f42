// main.c — the `seam` command line.
//
//   seam run -m FILE [-p TEXT | -f FILE | --tokens IDS] [-n N] ...   generate
//   seam inspect FILE                                                metadata, tensors, bytes per token
//
// Stdout carries only the generated output; reports and progress go to
// stderr (`info`), errors and warnings too. Exit status: 0 done, 1 the work
// failed, 2 the command line is wrong (nothing was run).
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli/bench.h"
#include "cli/options.h"
#include "engine/engine.h"
#include "format/gguf.h"
#include "gpu/energy.h"
#include "gpu/gpu_segment.h"
#include "model/model.h"
#include "model/shape.h"
#include "numeric/quant.h"
#include "cpu/kernels.h"
#include "plan/fit.h"
#include "plan/hw.h"
#include "plan/memstat.h"
#include "plan/plan.h"
#include "plan/predict.h"
#include "text/chat.h"
#include "text/sampler.h"
#include "text/tokenizer.h"

// Where --hw this writes the profile it measured, unless --hw-out says.
#define SEAM_THIS_PROFILE "seam-this.hw"

// Where the load, the plan, the memory and the timing report go: stderr, or
// nowhere under -q (set once, in main, before any command runs).
static FILE *info;

// A step's failure: the work's (status 1) or the command line's (status 2).
enum { FAILED = -1, MISUSED = -2 };
static int exit_status(int rc) { return rc == MISUSED ? 2 : rc ? 1 : 0; }

// "1,2,3" -> ids; every id checked against the vocabulary.
static int parse_token_list(const char *s, int n_vocab, int **ids, int *n) {
    int cap = 16, count = 0;
    int *out = malloc((size_t)cap * sizeof *out);
    const char *p = s;
    while (out && *p) {
        char *end;
        errno = 0;
        long x = strtol(p, &end, 10);
        if (end == p || errno || x < 0 || x >= n_vocab) {
            fprintf(stderr, "seam: --tokens: '%s' is not a token id in 0..%d\n", p, n_vocab - 1);
            free(out);
            return MISUSED;
        }
        if (count == cap) {
            int *grown = realloc(out, (size_t)(cap *= 2) * sizeof *out);
            if (!grown) {  // not a shorter prompt than asked for
                fprintf(stderr, "seam: --tokens: out of memory for %d ids\n", cap);
                free(out);
                return -1;
            }
            out = grown;
        }
        out[count++] = (int)x;
        p = end;
        if (*p == ',' && p[1]) p++;
        else if (*p) {
            fprintf(stderr, "seam: --tokens wants comma-separated ids (at '%s')\n", p);
            free(out);
            return MISUSED;
        }
    }
    if (!out) return fprintf(stderr, "seam: --tokens: out of memory\n"), FAILED;
    if (count == 0) {
        fprintf(stderr, "seam: --tokens is empty\n");
        free(out);
        return MISUSED;
    }
    *ids = out;
    *n = count;
    return 0;
}

// The plan for this machine: the GPU's free memory is the budget, or
// --gpu-mem, which also plans for a GPU this machine does not have (`seam
// plan`; running needs the real one). Prints it; -1 with a message when the
// request cannot be met.
// What the options ask of the plan, but for the GPU's budget; -c's default
// is 512, or the model's trained context when that is less.
static seam_plan_request plan_request(const options *o, const seam_model *m) {
    const int n_ctx_default = m->cfg.n_ctx_train < 512 ? m->cfg.n_ctx_train : 512;
    return (seam_plan_request){.gpu_layers = o->gpu_layers, .n_cpu_moe = o->n_cpu_moe, .cpu_moe = o->cpu_moe,
                               .head = o->head, .overflow = o->overflow,
                               .n_ctx = o->n_ctx ? o->n_ctx : n_ctx_default, .cache = o->cache,
                               .gpu_prefill = o->gpu_prefill};
}

// --hw's profile: a file or name (models/hw), or 'this' measured now.
static int load_hw(const options *o, const seam_model *m, hw_profile *hw) {
    seam_error err = {{0}};
    if (!strcmp(o->hw, "this")) {
        fprintf(info, "seam: measuring this machine (memory probe, kernels)...\n");
        const double t0 = seam_now();
        if (hw_measure_cpu(hw, o->n_threads, &m->cfg, &err)) return fprintf(stderr, "seam: %s\n", err.msg), -1;
        // one line; the whole profile goes to a file
        int floors = 0;
        for (int k = 0; k < HW_KEYS; k++) floors += hw->set[k] && !strncmp(hw->source[k], "floor", 5);
        for (int t = 0; t < GGML_TYPE_COUNT; t++) floors += hw->cpu_dot_row_floor[t];
        char held[96] = "";
        if (floors) snprintf(held, sizeof held, ", %d figure%s below what the probes resolve (held at a floor)",
                             floors, floors > 1 ? "s" : "");
        // the whole profile, every figure with its source, to a file --hw reads back (or, "-", to stderr)
        const char *out = o->hw_out ? o->hw_out : SEAM_THIS_PROFILE;
        FILE *f = strcmp(out, "-") ? fopen(out, "w") : stderr;
        if (f) {
            fprintf(f, "# this machine, measured by seam %s (--hw this); --hw %s reads it back\n", SEAM_VERSION, out);
            hw_write(hw, f);
        }
        if (f && f != stderr && fclose(f)) f = NULL;
        if (!f && o->hw_out) return fprintf(stderr, "seam: writing %s failed: %s\n", out, strerror(errno)), -1;
        char where[600];
        if (!f) snprintf(where, sizeof where, "(not written to %s: %s)", out, strerror(errno));
        else if (f == stderr) snprintf(where, sizeof where, "above");
        else snprintf(where, sizeof where, "in %s (--hw %s reads it back; --hw-out FILE writes it elsewhere)", out, out);
        fprintf(info, "seam: profile 'this' measured in %.1f s: reads %.1f GB/s on %d thread%s (%.1f on 1), Q4_K dots "
                "%.1f GB/s a thread%s; every figure with its source %s\n", seam_now() - t0, hw->v[HW_CPU_READ_GBS],
                o->n_threads, o->n_threads > 1 ? "s" : "", hw->v[HW_CPU_READ_GBS_1], hw->cpu_dot_gbs[GGML_TYPE_Q4_K],
                held, where);
        return 0;
    }
    return hw_load(hw, o->hw, &err) ? fprintf(stderr, "seam: %s\n", err.msg), -1 : 0;
}

// What a fit may change: the placements whose flags were not given.
static fit_open fit_open_of(const options *o) {
    return (fit_open){.head = o->head < 0, .overflow = !o->overflow_set, .experts = !o->n_cpu_moe_list && !o->cpu_moe,
                      .cache = o->fit_cache};
}

// The placements of m that fit req's budget on hw, ranked by --fit's rule
// (speed unless it says memory), what the user fixed kept.
static int fit_for(const options *o, const seam_model *m, const seam_plan_request *req, const hw_profile *hw,
                   int threads, fit_result *fit) {
    seam_error err = {{0}};
    const fit_rule rule = o->fit ? (fit_rule)(o->fit - 1) : FIT_SPEED;
    if (fit_search(m, req, fit_open_of(o), hw, threads, rule, fit, &err))
        return fprintf(stderr, "seam: %s\n", err.msg), -1;
    return 0;
}

// The cards a prediction plans on (hw_cards_for_budget), as a line for its
// report.
static void plan_cards(const hw_profile *hw, uint64_t budget, char *line, size_t len) {
    line[0] = 0;
    if (!hw->has_gpu) return;
    const int cards = hw->set[HW_GPU_COUNT] ? (int)hw->v[HW_GPU_COUNT] : 1;
    const double card_gib = hw->v[HW_GPU_MEM_GIB];
    if (hw_cards_for_budget(hw, budget) < cards)
        snprintf(line, len, "  GPU: one card of the profile's %d (%g GiB each): the budget, %.2f GiB, is one card's\n",
                 cards, card_gib, budget / 1073741824.0);
    else
        snprintf(line, len, "  GPU: %d card%s of %g GiB%s, a budget of %.2f GiB\n", cards, cards > 1 ? "s" : "",
                 card_gib, cards > 1 ? ", the GPU layers split between them" : "", budget / 1073741824.0);
}

// The GPU budget a prediction plans for: --gpu-mem, or the profile's cards.
static uint64_t prediction_budget(const options *o, const hw_profile *hw) {
    return o->gpu_mem ? o->gpu_mem : hw_gpu_bytes(hw);
}

// -ngl auto: the placement --fit's rule chooses on --hw's profile, its
// ranked table on stderr; req takes it.
static int fit_auto(const options *o, const seam_model *m, seam_plan_request *req) {
    hw_profile hw;
    fit_result fit;
    if (load_hw(o, m, &hw)) return -1;
    char cards[160];
    plan_cards(&hw, req->gpu_budget, cards, sizeof cards);
    fprintf(info, "-ngl auto on '%s' (%s):\n%s", hw.name, hw.path, cards);
    if (fit_for(o, m, req, &hw, o->n_threads, &fit)) return -1;
    fit_print(&fit, 5, info);
    *req = fit_request(&fit, req);
    fit_free(&fit);
    return 0;
}

static int make_plan(const options *o, const seam_model *m, bool will_run, seam_plan *p) {
    seam_error err = {{0}};
    seam_plan_request req = plan_request(o, m);
    req.gpu_budget = gpu_free_bytes();
    const bool have_gpu = req.gpu_budget > 0;
    if (o->gpu_mem) {
        if (will_run && !have_gpu)
            return fprintf(stderr, "seam: --gpu-mem plans for a GPU, but running on one needs a CUDA device\n"), -1;
        req.gpu_budget = o->gpu_mem;
    }
    if (o->fit && !o->hw)
        return fprintf(stderr, "seam: --fit ranks placements by predicted speed: add --hw PROFILE\n"), MISUSED;
    if (o->gpu_layers == -1 && req.gpu_budget == 0)
        fprintf(info, "seam: no CUDA device: --gpu-layers auto runs every layer on the CPU\n");
    else if (o->gpu_layers == -1 && o->hw && fit_auto(o, m, &req))
        return -1;
    else if (o->gpu_layers == -1 && !o->hw)
        fprintf(info, "seam: -ngl auto: the most layers that fit; with --hw PROFILE, the placement predicted fastest\n");
    if (plan_make(p, m, &req, &err)) return fprintf(stderr, "seam: %s\n", err.msg), -1;
    plan_print(p, info);
    bool emulated;
    const char *gpu = gpu_device_name(&emulated);
    if (gpu && (plan_gpu_computed_layers(p) > 0 || p->head == DEV_GPU))
        fprintf(info, "  GPU: %s%s\n", gpu,
                emulated ? ": an emulated device, its times are CPU times, not GPU times" : "");
    return 0;
}

// What the report adds about the GPU: that an emulated device's times are
// the CPU's, and a CUDA graph that could not be captured.
static void gpu_notes(const seam_engine *eng) {
    if (!eng->gpu) return;
    bool emulated;
    const char *gpu = gpu_device_name(&emulated);
    if (emulated)
        fprintf(info, "seam: the GPU above is %s: its times are CPU times, not GPU times\n", gpu);
    const char *why = gpu_segment_graph_failure(eng->gpu);
    if (why) fprintf(stderr, "seam: the CUDA graph could not be captured, so the GPU layers ran op by op: %s\n", why);
}

// ---------------------------------------------------------------- run

// What run and logits share: a loaded model, the prompt's tokens and an
// engine whose context holds them and n_extra more.
typedef struct {
    seam_model model;
    seam_tokenizer *tok;  // NULL when the file's vocabulary cannot be read
    seam_engine eng;
    int *prompt;
    int n_prompt;
    seam_memstat base;         // before the tensors and the engine's buffers came in
    seam_mem_prediction pred;  // what the plan says they take
    seam_plan plan;            // where the engine runs each part
} session;

static void session_close(session *s) {
    engine_free(&s->eng);
    free(s->prompt);
    tokenizer_free(s->tok);
    model_free(&s->model);
}

// The prompt from -p or -f (tokenised as llama.cpp's tools do: BOS where the
// file asks for it, control-token text recognised) or from --tokens.
static int session_prompt(session *s, const options *o) {
    if (o->tokens) return parse_token_list(o->tokens, s->model.cfg.n_vocab, &s->prompt, &s->n_prompt);
    if (!s->tok) return fprintf(stderr, "seam: this file's vocabulary could not be read; use --tokens\n"), MISUSED;
    seam_error err = {{0}};
    int32_t *ids;
    int n;
    if (tokenizer_encode(s->tok, o->prompt, strlen(o->prompt), true, true, &ids, &n, &err))
        return fprintf(stderr, "seam: %s\n", err.msg), FAILED;
    if (n == 0) {
        free(ids);
        return fprintf(stderr, "seam: the prompt is empty\n"), MISUSED;
    }
    s->prompt = malloc((size_t)n * sizeof *s->prompt);
    for (int i = 0; s->prompt && i < n; i++) s->prompt[i] = ids[i];
    free(ids);
    s->n_prompt = n;
    if (!s->prompt) return fprintf(stderr, "seam: out of memory for %d prompt tokens\n", n), FAILED;
    return 0;
}

// What the session holds now beside what its plan predicts (stderr).
static void session_memory(const session *s, const char *when) {
    seam_memstat now;
    memstat_read(&now, &s->model.file);
    memstat_report(info, when, &s->base, &now, &s->pred);
}

static int session_open(session *s, const options *o, int n_extra) {
    memset(s, 0, sizeof *s);
    if (!o->model_path) return fprintf(stderr, "seam: -m FILE is required\n"), MISUSED;
    if (!o->tokens && !o->prompt)
        return fprintf(stderr, "seam: give a prompt with -p TEXT, -f FILE or --tokens IDS\n"), MISUSED;
    seam_error err = {{0}};
    double t0 = seam_now();
    if (model_load(&s->model, o->model_path, &err)) return fprintf(stderr, "seam: %s\n", err.msg), FAILED;
    const seam_config *c = &s->model.cfg;
    fprintf(info, "seam: loaded %s (%s, %d layers, n_embd %d, vocab %d) in %.2f s\n", o->model_path,
            c->arch_name, c->n_layers, c->n_embd, c->n_vocab, seam_now() - t0);
    if (tokenizer_load(&s->tok, &s->model.file, &err)) {
        fprintf(stderr, "seam: no text: %s\n", err.msg);
        s->tok = NULL;
    }
    // the prompt before the work: a bad id or text is reported before the
    // weights are read in and the plan is made
    const int prompt = session_prompt(s, o);
    if (prompt) {
        session_close(s);
        return prompt;
    }
    memstat_read(&s->base, NULL);
    gguf_prefetch(&s->model.file);
    seam_plan plan;
    const int planned = make_plan(o, &s->model, true, &plan);
    if (planned) {
        session_close(s);
        return planned;
    }
    if (!s->model.cfg.n_expert && (o->n_cpu_moe || o->cpu_moe))
        fprintf(stderr, "seam: %s does nothing here: this model has no experts\n",
                o->cpu_moe ? "--cpu-moe" : "--n-cpu-moe");
    if (s->n_prompt + n_extra > plan.n_ctx) {
        fprintf(stderr, "seam: prompt (%d) + generated (%d) tokens exceed the context of %d; raise -c\n",
                s->n_prompt, n_extra, plan.n_ctx);
        session_close(s);
        return MISUSED;
    }
    if (engine_init_kv(&s->eng, &s->model, plan.n_ctx, plan.cache, &err) || engine_set_threads(&s->eng, o->n_threads, &err) ||
        engine_place(&s->eng, &plan, !o->no_graph, &err)) {
        fprintf(stderr, "seam: %s\n", err.msg);
        session_close(s);
        return -1;
    }
    engine_time_layers(&s->eng, o->time_layers);
    s->pred = memstat_predict(&plan, &s->model, o->n_threads);
    s->plan = plan;
    session_memory(s, "loading");
    return 0;
}

// Samples up to n_max tokens after `logits`, feeding each back at pos,
// pos+1, ...; prints text (or ids) as it goes and stops after an
// end-of-generation token, which is fed too so that the cache holds the whole
// turn. The last of n_max is fed only with feed_last (chat: the next turn
// follows the whole reply; run: nothing follows it). Ends the output's line.
// Returns the number of tokens sampled, or -1 on error.
static int generate(session *s, seam_sampler *sampler, float *logits, int *pos, int n_max, bool print_ids,
                    bool feed_last, seam_error *err) {
    const bool text = s->tok && !print_ids;
    int n = 0;
    while (n < n_max) {
        const int next = sampler_sample(sampler, logits);
        n++;
        const bool end = s->tok && tokenizer_is_eog(s->tok, next);
        if (text && !end) {
            char piece[256];
            const int len = tokenizer_piece(s->tok, next, piece, sizeof piece, false);
            fwrite(piece, 1, len > 0 ? (size_t)len : 0, stdout);
        } else if (!text) {
            printf(n > 1 ? " %d" : "%d", next);
        }
        fflush(stdout);
        if ((n < n_max || end || feed_last) && *pos < s->eng.n_ctx) {
            if (engine_forward(&s->eng, next, (*pos)++, &logits, err)) return -1;
        }
        if (end) break;
    }
    // flushed: when stdout is a pipe, the newline would otherwise wait in its
    // buffer while the report goes to stderr, glued to the last word
    putchar('\n');
    fflush(stdout);
    return n;
}

// What a run's records are of, as a JSON object (--trace's otherData,
// --timeline's "run"): the model, the plan, the machine.
static void run_metadata(const session *s, const options *o, const char *command, char *meta, size_t len) {
    const seam_config *c = &s->model.cfg;
    const seam_plan *p = &s->plan;
    bool emulated = false;
    const char *gpu = gpu_device_name(&emulated);
    char model[1024];
    snprintf(meta, len,
             "{\"seam\": \"%s\", \"command\": \"%s\", \"model\": \"%s\", \"arch\": \"%s\", \"n_layers\": %d, "
             "\"gpu_layers\": %d, \"head\": \"%s\", \"overflow\": \"%s\", \"n_cpu_moe\": %d, \"n_ctx\": %d, "
             "\"threads\": %d, \"cpu_kernels\": \"%s\", \"gpu\": \"%s\", \"gpu_emulated\": %s, "
             "\"layout\": \"each token at its measured start; its parts one after another in the data flow's order, "
             "each its measured length\"}",
             SEAM_VERSION, command, seam_json_escape(o->model_path, model, sizeof model), c->arch_name, c->n_layers,
             p->gpu_layers, p->head == DEV_GPU ? "gpu" : "cpu", plan_overflow_name[p->overflow],
             o->cpu_moe ? c->n_layers : o->n_cpu_moe, p->n_ctx, o->n_threads, cpu_kernels_get()->name,
             gpu ? gpu : "none", emulated ? "true" : "false");
}

// --timeline and --trace: the session's records, as JSON and as a Chrome trace.
static int write_records(const session *s, const options *o, const char *command, seam_error *e) {
    char meta[3072];
    run_metadata(s, o, command, meta, sizeof meta);
    if (o->timeline_path && timeline_write_json(&s->eng.timeline, meta, o->timeline_path, e)) return -1;
    if (!o->trace_path) return 0;
    char title[512];
    snprintf(title, sizeof title, "seam %s %s: %d of %d layers on the GPU", command, o->model_path,
             s->plan.gpu_layers, s->model.cfg.n_layers);
    timeline_trace tr;
    if (timeline_trace_open(&tr, o->trace_path, meta, e)) return -1;
    if (timeline_trace_add(&tr, &s->eng.timeline, 0, title, e)) {
        seam_error ignored;
        timeline_trace_close(&tr, &ignored);
        return -1;
    }
    if (timeline_trace_close(&tr, e)) return -1;
    fprintf(info, "seam: wrote the trace to %s (open it in Perfetto or chrome://tracing)\n", o->trace_path);
    return 0;
}

static int cmd_run(const options *o) {
    session ss;
    const int opened = session_open(&ss, o, o->n_predict);
    if (opened) return exit_status(opened);
    seam_error err = {{0}};
    seam_sampler sampler = {0};
    int rc = 1;
    if (sampler_init(&sampler, ss.model.cfg.n_vocab, o->temperature, o->top_k, o->top_p, o->seed)) {
        fprintf(stderr, "seam: out of memory for the sampler\n");
        goto done;
    }

    // prefill: the prompt, one token at a time
    float *logits = NULL;
    double t_prefill = seam_now();
    if (engine_prefill(&ss.eng, ss.prompt, ss.n_prompt, 0, &logits, &err)) goto fail;
    t_prefill = seam_now() - t_prefill;

    // the GPU board's energy over the decode, where a GPU runs layers
    const char *no_meter = "no GPU layers";
    gpu_energy *meter = ss.eng.gpu ? gpu_energy_start(&no_meter) : NULL;
    double t_decode = seam_now();
    int pos = ss.n_prompt;
    const int n_generated = generate(&ss, &sampler, logits, &pos, o->n_predict, o->print_ids, false, &err);
    gpu_energy_result power = {0};
    if (meter) gpu_energy_stop(meter, &power);
    if (n_generated < 0) goto fail;
    t_decode = seam_now() - t_decode;
    const double gb = (double)model_bytes_per_token(&ss.model) / 1e9;
    const int n_decoded = pos - ss.n_prompt;
    fprintf(info, "seam: prefill %d tokens in %.3f s (%.1f tok/s); decode %d tokens in %.3f s (%.1f tok/s, %.1f GB/s of weights)\n",
            ss.n_prompt, t_prefill, ss.n_prompt / t_prefill, n_generated, t_decode, n_decoded / t_decode,
            gb * n_decoded / t_decode);
    if (meter && n_decoded > 0) {
        bool emulated;
        gpu_device_name(&emulated);
        fprintf(info, "seam: GPU energy over the decode of %d tokens: %.1f W, %.3f J/token, the GPU busy %.0f%% of the "
                "time (NVML%s; the CPU's energy is not counted)\n", n_decoded, power.watts, power.joules / n_decoded,
                100 * power.busy,
                emulated ? ", the emulated board's power model" : power.counter ? ", energy counter" : ", power samples");
    } else if (ss.eng.gpu) {
        fprintf(info, "seam: GPU energy not measured: %s\n", no_meter);
    }
    char filled[64];
    snprintf(filled, sizeof filled, "filling %d of %d positions", pos, ss.eng.n_ctx);
    session_memory(&ss, filled);
    timeline_report(&ss.eng.timeline, info);
    // --hw: the speed model's time of each layer beside the measured one, at the last decoded position
    seam_prediction pr;
    hw_profile hw;
    if (o->time_layers && o->hw) {
        if (load_hw(o, &ss.model, &hw)) goto done;
        if (predict_token(&ss.model, &ss.plan, &hw, o->n_threads, pos, &pr, &err)) goto fail;
        ss.eng.timeline.predicted_us = pr.layer_us;
    }
    if (o->time_layers) timeline_layer_report(&ss.eng.timeline, 0, ss.model.cfg.n_layers, info);
    gpu_notes(&ss.eng);
    if (write_records(&ss, o, "run", &err)) goto fail;
    rc = 0;
    goto done;
fail:
    fprintf(stderr, "seam: %s\n", err.msg);
done:
    sampler_free(&sampler);
    session_close(&ss);
    return rc;
}

// ---------------------------------------------------------------- chat

// Reads user turns from stdin, one line each, until end of input. The KV
// cache carries the whole conversation: each turn prefills only its own
// tokens, which the report after each turn shows.
static int cmd_chat(const options *o) {
    session ss;
    memset(&ss, 0, sizeof ss);
    seam_error err = {{0}};
    if (!o->model_path) return fprintf(stderr, "seam chat: -m FILE is required\n"), 2;
    if (model_load(&ss.model, o->model_path, &err)) return fprintf(stderr, "seam: %s\n", err.msg), 1;
    const chat_template *tpl;
    if (chat_template_load(&ss.model.file, &tpl, &err)) {
        fprintf(stderr, "seam: %s: %s; to talk to it, write its turns into a prompt for seam run -p\n", o->model_path,
                err.msg);
        session_close(&ss);
        return 1;
    }
    if (!tpl) {
        fprintf(stderr, "seam: %s has no chat template (tokenizer.chat_template): a base model, which continues "
                        "text rather than answering; each line is continued as it stands. For answers, use an "
                        "instruction-tuned model's file\n", o->model_path);
        tpl = &CHAT_CONTINUATION;
    }
    seam_sampler sampler = {0};
    int rc = 1;
    seam_plan plan;
    if (tokenizer_load(&ss.tok, &ss.model.file, &err) || make_plan(o, &ss.model, true, &plan) ||
        engine_init_kv(&ss.eng, &ss.model, plan.n_ctx, plan.cache, &err) || engine_set_threads(&ss.eng, o->n_threads, &err) ||
        engine_place(&ss.eng, &plan, !o->no_graph, &err) ||
        sampler_init(&sampler, ss.model.cfg.n_vocab, o->temperature, o->top_k, o->top_p, o->seed)) {
        if (err.msg[0]) fprintf(stderr, "seam: %s\n", err.msg);  // make_plan has spoken for itself
        goto done;
    }
    ss.plan = plan;
    fprintf(info, "seam: chat with %s; one line per turn, end with Ctrl-D\n", o->model_path);
    int pos = 0;
    float *logits = NULL;
    char line[8192];
    for (int turn = 1;;) {
        fprintf(stderr, "> ");
        if (!fgets(line, sizeof line, stdin)) {
            fputc('\n', stderr);  // Ctrl-D: the shell's prompt on a line of its own
            break;
        }
        line[strcspn(line, "\n")] = 0;
        if (!*seam_trim(line)) continue;  // an empty line is no turn
        // BOS (where the file wants one) opens a conversation only
        char turn_text[sizeof line + 128];
        snprintf(turn_text, sizeof turn_text, "%s%s%s", tpl->user_prefix, line, tpl->user_suffix);
        int32_t *ids = NULL;
        int n_ids = 0;
        if (tokenizer_encode(ss.tok, turn_text, strlen(turn_text), pos == 0, true, &ids, &n_ids, &err)) goto fail;
        if (pos > 0 && pos + n_ids + o->n_predict > ss.eng.n_ctx) {
            // a full context: the conversation starts again with this turn, the cache written over from position 0
            fprintf(stderr, "seam: the conversation would pass the context of %d tokens (-c): a new one starts "
                            "with this turn\n", ss.eng.n_ctx);
            free(ids);
            pos = 0;
            if (tokenizer_encode(ss.tok, turn_text, strlen(turn_text), true, true, &ids, &n_ids, &err)) goto fail;
        }
        if (n_ids + o->n_predict > ss.eng.n_ctx) {
            free(ids);
            fprintf(stderr, "seam: this turn's %d tokens and -n %d pass the context of %d tokens: write less, or "
                            "raise -c\n", n_ids, o->n_predict, ss.eng.n_ctx);
            continue;
        }
        const double t0 = seam_now();
        const int prefilled = engine_prefill(&ss.eng, ids, n_ids, pos, &logits, &err);
        free(ids);
        if (prefilled) goto fail;
        pos += n_ids;
        const double t_prefill = seam_now() - t0;
        const int pos_before = pos;
        const double t1 = seam_now();
        const int generated = generate(&ss, &sampler, logits, &pos, o->n_predict, false, true, &err);
        if (generated < 0) goto fail;
        fprintf(info, "seam: turn %d: prefilled %d new tokens in %.2f s (cache held %d before), generated %d in %.2f s\n",
                turn++, n_ids, t_prefill, pos_before - n_ids, generated, seam_now() - t1);
        // close the model's turn in the cache, so the next turn follows it
        if (tokenizer_encode(ss.tok, tpl->turn_end, strlen(tpl->turn_end), false, true, &ids, &n_ids, &err)) goto fail;
        if (pos + n_ids > ss.eng.n_ctx) n_ids = ss.eng.n_ctx - pos;  // the next turn starts a new conversation
        const int closed = n_ids > 0 ? engine_prefill(&ss.eng, ids, n_ids, pos, &logits, &err) : 0;
        free(ids);
        if (closed) goto fail;
        pos += n_ids;
    }
    if (write_records(&ss, o, "chat", &err)) goto fail;
    rc = 0;
    goto done;
fail:
    fprintf(stderr, "seam: %s\n", err.msg);
done:
    sampler_free(&sampler);
    session_close(&ss);
    return rc;
}

// ---------------------------------------------------------------- logits

static int cmd_logits(const options *o) {
    if (!o->out_path) return fprintf(stderr, "seam logits: -o OUT.f32 is required\n"), 2;
    session ss;
    const int opened = session_open(&ss, o, 0);
    if (opened) return exit_status(opened);
    seam_error err = {{0}};
    int rc = 1;
    FILE *out = fopen(o->out_path, "wb");
    if (!out) {
        fprintf(stderr, "seam: cannot create %s: %s\n", o->out_path, strerror(errno));
        goto done;
    }
    for (int i = 0; i < ss.n_prompt; i++) {
        float *logits;
        if (engine_forward(&ss.eng, ss.prompt[i], i, &logits, &err)) {
            fprintf(stderr, "seam: %s\n", err.msg);
            goto done;
        }
        if (fwrite(logits, sizeof(float), (size_t)ss.model.cfg.n_vocab, out) != (size_t)ss.model.cfg.n_vocab) {
            fprintf(stderr, "seam: writing %s failed\n", o->out_path);
            goto done;
        }
    }
    rc = 0;
    fprintf(info, "seam: wrote %d x %d logits to %s\n", ss.n_prompt, ss.model.cfg.n_vocab, o->out_path);
done:
    if (out && fclose(out) && rc == 0) {
        fprintf(stderr, "seam: closing %s failed\n", o->out_path);
        rc = 1;
    }
    session_close(&ss);
    return rc;
}

// ---------------------------------------------------------------- tokenize

static int cmd_tokenize(const options *o) {
    const char *text = o->prompt ? o->prompt : o->positional;
    if (!o->model_path || !text) return fprintf(stderr, "seam tokenize: -m FILE and a text are required\n"), 2;
    seam_error err = {{0}};
    gguf_file f;
    seam_tokenizer *tok = NULL;
    if (gguf_open(&f, o->model_path, &err) || tokenizer_load(&tok, &f, &err)) {
        fprintf(stderr, "seam: %s\n", err.msg);
        if (f.base) gguf_close(&f);
        return 1;
    }
    gguf_close(&f);
    int32_t *ids;
    int n;
    int rc = tokenizer_encode(tok, text, strlen(text), true, true, &ids, &n, &err);
    if (rc == 0) {
        for (int i = 0; i < n; i++) printf(i ? " %d" : "%d", ids[i]);
        printf("\n");
        free(ids);
    } else {
        fprintf(stderr, "seam: %s\n", err.msg);
    }
    tokenizer_free(tok);
    return rc ? 1 : 0;
}

// ---------------------------------------------------------------- plan

// A prediction's two outputs: --json's file (stdout for "-", where the table
// moves to stderr, so that stdout is the JSON alone) and the table.
typedef struct {
    FILE *json, *table;
    const char *path;
} report_out;

static int report_open(const options *o, report_out *r) {
    *r = (report_out){.path = o->json_path, .table = stdout};
    if (!o->json_path) return 0;
    r->json = strcmp(o->json_path, "-") ? fopen(o->json_path, "w") : stdout;
    if (!r->json) return fprintf(stderr, "seam: cannot create %s: %s\n", o->json_path, strerror(errno)), -1;
    if (r->json == stdout) r->table = stderr;
    return 0;
}

// rc, or 1 when the JSON file did not write
static int report_close(report_out *r, int rc) {
    if (r->json && r->json != stdout && fclose(r->json)) return fprintf(stderr, "seam: writing %s failed\n", r->path), 1;
    return rc;
}

// seam plan --fit: every placement that fits the profile's GPU, ranked; the
// chosen one's plan and decomposition after it.
static int plan_fit(const options *o, const seam_model *m, const char *label) {
    seam_error err = {{0}};
    hw_profile hw;
    fit_result fit;
    report_out out;
    if (load_hw(o, m, &hw)) return 1;
    const int threads = o->threads_set ? o->n_threads : 0;
    seam_plan_request req = plan_request(o, m);
    req.gpu_budget = prediction_budget(o, &hw);
    if (report_open(o, &out)) return 1;
    char cards[160];
    plan_cards(&hw, req.gpu_budget, cards, sizeof cards);
    fprintf(out.table, "fit on '%s' (%s): %s, KV cache filled to %d positions\n%s", hw.name, hw.path, label, req.n_ctx,
            cards);
    if (fit_for(o, m, &req, &hw, threads, &fit)) return report_close(&out, 1);
    fit_print(&fit, 10, out.table);
    fflush(out.table);  // before the plan, on stderr
    if (out.json) {
        fit_write_json(&fit, out.json);
        fprintf(out.json, "\n");
    }
    seam_plan p;
    seam_prediction pr;
    req = fit_request(&fit, &req);
    fit_free(&fit);
    int rc = plan_make(&p, m, &req, &err) || predict_token(m, &p, &hw, threads, req.n_ctx, &pr, &err);
    if (rc) fprintf(stderr, "seam: %s\n", err.msg);
    if (!rc) plan_print(&p, stderr), predict_print_header(out.table), predict_print(&pr, out.table);
    return report_close(&out, rc);
}

// The plan of each -ngl value for the profile's GPU, and the predicted
// speed of a decoded token with the KV cache filled to -c.
static int plan_predict(const options *o, const seam_model *m, const char *label) {
    seam_error err = {{0}};
    hw_profile hw;
    const int threads = o->threads_set ? o->n_threads : 0;
    if (load_hw(o, m, &hw)) return 1;
    seam_plan_request req = plan_request(o, m);
    req.gpu_budget = prediction_budget(o, &hw);
    req.head_apart = true;  // --head gpu with layers on the CPU: llama.cpp's placement, predicted
    char cards[160];
    plan_cards(&hw, req.gpu_budget, cards, sizeof cards);
    report_out out;
    if (report_open(o, &out)) return 1;
    FILE *json = out.json, *table = out.table;
    if (json) {
        fprintf(json, "{\"model\": \"%s\", \"hw\": \"%s\", \"profile\": ", label, hw.name);
        hw_write_json(&hw, json);
        fprintf(json, ", \"n_ctx\": %d, \"head\": \"%s\", \"predictions\": [", req.n_ctx,
                o->head < 0 ? "auto" : o->head == DEV_CPU ? "cpu" : "gpu");
    }
    fprintf(table, "prediction on '%s' (%s): %s, KV cache filled to %d positions\n%s", hw.name, hw.path, label,
            req.n_ctx, cards);
    predict_print_header(table);
    int rc = 0, written = 0;
    const int n = (o->n_ngl ? o->n_ngl : 1) * (o->n_cpu_moe_list ? o->n_cpu_moe_list : 1);
    for (int i = 0; i < n; i++) {
        const int per_ngl = o->n_cpu_moe_list ? o->n_cpu_moe_list : 1;
        req.gpu_layers = o->n_ngl ? o->ngl_list[i / per_ngl] : o->gpu_layers;
        req.n_cpu_moe = o->n_cpu_moe_list ? o->cpu_moe_list[i % per_ngl] : o->n_cpu_moe;
        seam_plan p;
        seam_prediction pr;
        if (plan_make(&p, m, &req, &err) || predict_token(m, &p, &hw, threads, req.n_ctx, &pr, &err)) {
            fprintf(stderr, "seam plan: -ngl %d --n-cpu-moe %d: %s\n", req.gpu_layers, req.n_cpu_moe, err.msg);
            rc = 1;
            continue;
        }
        plan_print(&p, stderr);
        predict_print(&pr, table);
        if (json) fprintf(json, "%s\n  ", written++ ? "," : ""), predict_write_json(&pr, json);
    }
    if (json) fprintf(json, "\n]}\n");
    return report_close(&out, rc);
}

static int cmd_plan(const options *o) {
    const char *path = o->model_path ? o->model_path : o->positional;
    if (!path && !o->shape_path) return fprintf(stderr, "seam plan: -m FILE (or --shape FILE.shape) is required\n"), 2;
    if (path && o->shape_path) return fprintf(stderr, "seam plan: give -m FILE or --shape FILE.shape, not both\n"), 2;
    if (!o->hw && (o->n_ngl > 1 || o->json_path))
        return fprintf(stderr, "seam plan: a list of -ngl values and --json are for predictions: add --hw PROFILE\n"), 2;
    seam_error err = {{0}};
    seam_model m;
    if (o->shape_path ? shape_model(o->shape_path, &m, &err) : model_load(&m, path, &err))
        return fprintf(stderr, "seam: %s\n", err.msg), 1;
    seam_plan p;
    const char *label = o->shape_path ? o->shape_path : path;
    // with a profile, -ngl auto is the fit's choice
    const bool fit = o->hw && o->gpu_layers == -1;
    const int rc = fit ? plan_fit(o, &m, label) : o->hw ? plan_predict(o, &m, label) : make_plan(o, &m, false, &p);
    model_free(&m);
    return rc ? 1 : 0;
}

// ---------------------------------------------------------------- inspect

static void human_bytes(uint64_t b, char *buf, size_t len) {
    if (b >= (1ull << 30)) snprintf(buf, len, "%.2f GiB", b / 1073741824.0);
    else if (b >= (1ull << 20)) snprintf(buf, len, "%.2f MiB", b / 1048576.0);
    else if (b >= 1024) snprintf(buf, len, "%.2f KiB", b / 1024.0);
    else snprintf(buf, len, "%" PRIu64 " B", b);
}

static int cmd_inspect(const options *o) {
    const char *path = o->positional ? o->positional : o->model_path;
    if (!path) return fprintf(stderr, "seam inspect: give a GGUF file\n"), 2;
    seam_error err = {{0}};
    gguf_file f;
    if (gguf_open(&f, path, &err)) return fprintf(stderr, "seam: %s\n", err.msg), 1;

    printf("file     %s\nversion  %u\nsize     %" PRIu64 " bytes\nmetadata %" PRIu64 " keys\n", path, f.version,
           f.size, f.n_kv);
    char val[256], b1[32];
    for (uint64_t i = 0; i < f.n_kv; i++) {
        gguf_format_value(&f.kv[i], val, sizeof val);
        printf("  %-44.*s %s\n", (int)f.kv[i].key.len, f.kv[i].key.ptr, val);
    }
    printf("tensors  %" PRIu64 "\n  %-36s %-6s %-24s %s\n", f.n_tensors, "name", "type", "shape", "bytes");
    uint64_t type_bytes[GGML_TYPE_COUNT] = {0}, type_count[GGML_TYPE_COUNT] = {0}, params = 0, total = 0;
    for (uint64_t i = 0; i < f.n_tensors; i++) {
        const gguf_tensor *t = &f.tensors[i];
        char shape[64] = "[";
        for (uint32_t d = 0; d < t->n_dims; d++)
            snprintf(shape + strlen(shape), sizeof shape - strlen(shape), "%s%" PRIu64, d ? ", " : "", t->ne[d]);
        strcat(shape, "]");
        printf("  %-36.*s %-6s %-24s %" PRIu64 "\n", (int)t->name.len, t->name.ptr, ggml_type_name(t->type), shape,
               t->n_bytes);
        type_bytes[t->type] += t->n_bytes;
        type_count[t->type]++;
        params += t->n_elems;
        total += t->n_bytes;
    }
    printf("per type\n");
    for (int ty = 0; ty < GGML_TYPE_COUNT; ty++) {
        if (!type_count[ty]) continue;
        human_bytes(type_bytes[ty], b1, sizeof b1);
        printf("  %-6s %5" PRIu64 " tensors  %12s  %5.1f%%\n", ggml_type_name((uint32_t)ty), type_count[ty], b1,
               100.0 * type_bytes[ty] / (total ? total : 1));
    }
    human_bytes(total, b1, sizeof b1);
    printf("parameters  %" PRIu64 " (%.3f B)\nweights     %s\n", params, params / 1e9, b1);

    // bytes read per decoded token needs the architecture
    seam_model m;
    if (model_bind(&m, &f, &err) == 0) {
        if (m.cfg.n_expert) {  // per layer: all of it, and what one token reads (k of n experts)
            printf("per layer (%d of %d experts active)\n  %5s %14s %14s\n", m.cfg.n_expert_used, m.cfg.n_expert,
                   "layer", "bytes", "active bytes");
            for (int il = 0; il < m.cfg.n_layers; il++) {
                char b2[32];
                human_bytes(model_layer_bytes(&m, il), b1, sizeof b1);
                human_bytes(model_layer_active_bytes(&m, il), b2, sizeof b2);
                printf("  %5d %14s %14s\n", il, b1, b2);
            }
        }
        human_bytes(model_bytes_per_token(&m), b1, sizeof b1);
        printf("read per token  %s (%s, the output norm and head, one embedding row)\n", b1,
               m.cfg.n_expert ? "every layer's attention, router and active experts" : "every layer");
        model_free(&m);
    } else {
        printf("read per token  unknown: %s\n", err.msg);
        gguf_close(&f);
    }
    return 0;
}

// A file the command will write, checked before any work: its folder must
// exist and take files, and it must not be a folder ("-": stdout).
static int check_output(const char *flag, const char *path) {
    if (!path || !strcmp(path, "-")) return 0;
    struct stat st;
    if (stat(path, &st) == 0 && S_ISDIR(st.st_mode))
        return fprintf(stderr, "seam: %s %s is a folder, not a file\n", flag, path), -1;
    const char *slash = strrchr(path, '/');
    char dir[4096];
    snprintf(dir, sizeof dir, "%.*s", slash ? (int)(slash - path) + (slash == path) : 1, slash ? path : ".");
    if (access(dir, W_OK | X_OK))
        return fprintf(stderr, "seam: %s %s: cannot write into %s: %s\n", flag, path, dir, strerror(errno)), -1;
    return 0;
}

// -f FILE's text as the prompt (llama.cpp's -f: one trailing newline
// dropped); malloc'd into *text.
static int read_prompt_file(const char *path, char **text) {
    FILE *f = fopen(path, "rb");
    if (!f) return fprintf(stderr, "seam: -f %s: %s\n", path, strerror(errno)), MISUSED;
    size_t cap = 4096, len = 0, got;
    char *buf = malloc(cap);
    while (buf && (got = fread(buf + len, 1, cap - len - 1, f)) > 0) {
        len += got;
        char *grown = len + 1 == cap ? realloc(buf, cap *= 2) : buf;
        if (!grown) free(buf);
        buf = grown;
    }
    const bool failed = ferror(f);
    fclose(f);
    if (!buf) return fprintf(stderr, "seam: -f %s: out of memory\n", path), FAILED;
    if (failed) return free(buf), fprintf(stderr, "seam: -f %s: reading failed\n", path), FAILED;
    if (len && buf[len - 1] == '\n') len--;
    buf[len] = 0;
    if (strlen(buf) != len) return free(buf), fprintf(stderr, "seam: -f %s holds a NUL byte: not a text\n", path), MISUSED;
    *text = buf;
    return 0;
}

static bool is_command(const char *cmd) {
    static const char *const commands[] = {"run", "inspect", "logits", "tokenize", "chat", "plan"};
    for (size_t i = 0; i < sizeof commands / sizeof *commands; i++)
        if (!strcmp(cmd, commands[i])) return true;
    return false;
}

static int run_command(const char *cmd, const options *o) {
    if (!strcmp(cmd, "run")) return cmd_run(o);
    if (!strcmp(cmd, "inspect")) return cmd_inspect(o);
    if (!strcmp(cmd, "logits")) return cmd_logits(o);
    if (!strcmp(cmd, "tokenize")) return cmd_tokenize(o);
    if (!strcmp(cmd, "chat")) return cmd_chat(o);
    return cmd_plan(o);
}

int main(int argc, char **argv) {
    info = stderr;
    if (argc < 2) {
        options_usage(stderr, NULL);
        return 2;
    }
    const char *cmd = argv[1];
    if (!strcmp(cmd, "-h") || !strcmp(cmd, "--help") || !strcmp(cmd, "help")) {
        options_usage(stdout, argc > 2 ? argv[2] : NULL);  // seam help run: run's
        return 0;
    }
    if (!strcmp(cmd, "--version") || !strcmp(cmd, "version")) {
        printf("seam %s\n", SEAM_VERSION);
        return 0;
    }
    if (!strcmp(cmd, "bench")) return cmd_bench(argc - 2, argv + 2);
    if (!is_command(cmd)) return fprintf(stderr, "seam: unknown command '%s' (see seam --help)\n", cmd), 2;
    options o;
    if (options_parse(argc - 2, argv + 2, cmd, &o)) return 2;
    if (o.help) return options_usage(stdout, cmd), 0;
    const bool takes_file = !strcmp(cmd, "inspect") || !strcmp(cmd, "tokenize") || !strcmp(cmd, "plan");
    const bool runs = !strcmp(cmd, "run") || !strcmp(cmd, "chat");
    const bool hw_here = !strcmp(cmd, "plan") || (runs && o.gpu_layers == -1) || (!strcmp(cmd, "run") && o.time_layers);
    if ((o.n_ngl > 1 || o.n_cpu_moe_list > 1) && strcmp(cmd, "plan")) {
        fprintf(stderr, "seam %s: a list of -ngl or --n-cpu-moe values is seam plan's (with --hw)\n", cmd);
        return 2;
    }
    if (o.hw && !hw_here) {
        fprintf(stderr, "seam %s: --hw is seam plan's, run's and chat's with -ngl auto (the placement predicted "
                        "fastest), and run's with --layers (each layer's predicted time)\n", cmd);
        return 2;
    }
    if (check_output("--timeline", o.timeline_path) || check_output("-o", o.out_path) ||
        check_output("--json", o.json_path) || (o.hw_out && strcmp(o.hw_out, "-") && check_output("--hw-out", o.hw_out)) ||
        check_output("--trace", o.trace_path))
        return 2;
    if (o.temperature == 0.0f && (o.top_k || o.top_p < 1.0f))
        fprintf(stderr, "seam: %s does nothing with --temp 0: greedy takes the most likely token\n",
                o.top_k ? "--top-k" : "--top-p");
    if (o.positional && !takes_file) {
        fprintf(stderr, "seam %s: unexpected argument '%s' (see seam %s --help)\n", cmd, o.positional, cmd);
        return 2;
    }
    if (!!o.prompt + !!o.prompt_file + !!o.tokens > 1)
        return fprintf(stderr, "seam %s: give -p, -f or --tokens, one of them\n", cmd), 2;
    char *file_text = NULL;
    if (o.prompt_file) {
        const int read = read_prompt_file(o.prompt_file, &file_text);
        if (read) return exit_status(read);
        o.prompt = file_text;
    }
    if (o.quiet) info = fopen("/dev/null", "w");
    if (!info) info = stderr;
    const int rc = run_command(cmd, &o);
    if (info != stderr) fclose(info);
    free(file_text);
    return rc;
}
