// main.c — the `seam` command line.
//
//   seam run -m FILE [-p TEXT | --tokens IDS] [-n N] ...   generate
//   seam inspect FILE                                      metadata, tensors, bytes per token
//
// Stdout carries only the generated output; reports and progress go to stderr.
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine.h"
#include "gguf.h"
#include "model.h"
#include "quant.h"
#include "sampler.h"

#ifdef SEAM_HAVE_CUDA
#include "seam_cuda.h"
#endif

// ---------------------------------------------------------------- options

typedef struct {
    const char *model_path;
    const char *tokens;     // --tokens "1,2,3"
    int n_predict;          // -n
    int n_ctx;              // -c
    int n_threads;          // -t
    int gpu_layers;         // -ngl; -1 = auto
    uint64_t seed;
    float temperature;
    int top_k;
    float top_p;
    int print_ids;          // --ids
    const char *positional; // inspect FILE
    const char *out_path;   // logits -o FILE
} options;

static void usage(FILE *f) {
    fprintf(f,
            "usage: seam COMMAND [options]\n"
            "\n"
            "commands:\n"
            "  run       generate from a prompt and report the time of each token\n"
            "  inspect   print a GGUF file's metadata, tensors and bytes read per token\n"
            "  logits    write the logits after every prompt token (float32 [n_tokens][n_vocab])\n"
            "\n"
            "run options (default in brackets):\n"
            "  -m, --model FILE        GGUF model to load (required)\n"
            "      --tokens IDS        prompt as token ids, comma-separated (e.g. 1,2,3)\n"
            "  -n, --n-predict N       tokens to generate [32]\n"
            "  -c, --ctx-size N        context size in tokens: prompt + generated [512]\n"
            "  -t, --threads N         CPU threads [1]\n"
            "  -ngl, --gpu-layers N    layers 0..N-1 on the GPU; 'auto' = as many as fit [0]\n"
            "      --seed N            sampler seed [0: a fixed default]\n"
            "      --temp T            temperature; 0 = greedy [0]\n"
            "      --top-k K           keep the K most likely tokens; 0 = off [0]\n"
            "      --top-p P           keep the smallest set with mass P; 1 = off [1]\n"
            "      --ids               print generated token ids, space-separated, on one line\n"
            "  -h, --help              this help\n"
            "\n"
            "  seam inspect FILE\n"
            "  seam logits -m FILE --tokens IDS -o OUT.f32 [-c N]\n");
}

static int parse_long(const char *flag, const char *v, long lo, long hi, long *out) {
    char *end;
    errno = 0;
    long x = v ? strtol(v, &end, 10) : 0;
    if (!v || errno || end == v || *end || x < lo || x > hi) {
        fprintf(stderr, "seam: %s wants an integer in %ld..%ld (got '%s')\n", flag, lo, hi, v ? v : "");
        return -1;
    }
    *out = x;
    return 0;
}

static int parse_float(const char *flag, const char *v, float lo, float hi, float *out) {
    char *end;
    errno = 0;
    float x = v ? strtof(v, &end) : 0;
    if (!v || errno || end == v || *end || !(x >= lo && x <= hi)) {
        fprintf(stderr, "seam: %s wants a number in %g..%g (got '%s')\n", flag, lo, hi, v ? v : "");
        return -1;
    }
    *out = x;
    return 0;
}

static int parse_options(int argc, char **argv, options *o) {
    *o = (options){.n_predict = 32, .n_ctx = 512, .n_threads = 1, .top_p = 1.0f};
    for (int i = 0; i < argc; i++) {
        const char *a = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        long x;
#define IS(s) (!strcmp(a, s))
        if (IS("-h") || IS("--help")) {
            usage(stdout);
            exit(0);
        } else if (IS("-m") || IS("--model")) {
            if (!v) return fprintf(stderr, "seam: %s wants a file\n", a), -1;
            o->model_path = v, i++;
        } else if (IS("--tokens")) {
            if (!v) return fprintf(stderr, "seam: --tokens wants ids, e.g. 1,2,3\n"), -1;
            o->tokens = v, i++;
        } else if (IS("-n") || IS("--n-predict")) {
            if (parse_long(a, v, 0, 1 << 24, &x)) return -1;
            o->n_predict = (int)x, i++;
        } else if (IS("-c") || IS("--ctx-size")) {
            if (parse_long(a, v, 1, 1 << 24, &x)) return -1;
            o->n_ctx = (int)x, i++;
        } else if (IS("-t") || IS("--threads")) {
            if (parse_long(a, v, 1, 256, &x)) return -1;
            o->n_threads = (int)x, i++;
        } else if (IS("-ngl") || IS("--gpu-layers")) {
            if (v && !strcmp(v, "auto")) o->gpu_layers = -1;
            else if (parse_long(a, v, 0, 100000, &x)) return -1;
            else o->gpu_layers = (int)x;
            i++;
        } else if (IS("--seed")) {
            if (parse_long(a, v, 0, LONG_MAX, &x)) return -1;
            o->seed = (uint64_t)x, i++;
        } else if (IS("--temp")) {
            if (parse_float(a, v, 0.0f, 100.0f, &o->temperature)) return -1;
            i++;
        } else if (IS("--top-k")) {
            if (parse_long(a, v, 0, INT_MAX, &x)) return -1;
            o->top_k = (int)x, i++;
        } else if (IS("--top-p")) {
            if (parse_float(a, v, 0.0f, 1.0f, &o->top_p) || o->top_p == 0.0f) {
                if (o->top_p == 0.0f) fprintf(stderr, "seam: --top-p must be above 0\n");
                return -1;
            }
            i++;
        } else if (IS("-o") || IS("--output")) {
            if (!v) return fprintf(stderr, "seam: %s wants a file\n", a), -1;
            o->out_path = v, i++;
        } else if (IS("--ids")) {
            o->print_ids = 1;
        } else if (a[0] != '-' && !o->positional) {
            o->positional = a;
        } else {
            fprintf(stderr, "seam: unknown option '%s' (see seam --help)\n", a);
            return -1;
        }
#undef IS
    }
    return 0;
}

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
            return -1;
        }
        if (count == cap) {
            int *grown = realloc(out, (size_t)(cap *= 2) * sizeof *out);
            if (!grown) break;
            out = grown;
        }
        out[count++] = (int)x;
        p = end;
        if (*p == ',') p++;
        else if (*p) {
            fprintf(stderr, "seam: --tokens wants comma-separated ids (at '%s')\n", p);
            free(out);
            return -1;
        }
    }
    if (!out || count == 0) {
        fprintf(stderr, "seam: --tokens is empty\n");
        free(out);
        return -1;
    }
    *ids = out;
    *n = count;
    return 0;
}

// The number of GPU layers the run will use, or -1 with a message when the
// request cannot be met on this machine.
static int resolve_gpu_layers(const options *o, const seam_model *m) {
    int n_devices = 0;
#ifdef SEAM_HAVE_CUDA
    n_devices = seam_cuda_device_count();
#endif
    if (o->gpu_layers == -1) {
        if (n_devices == 0) fprintf(stderr, "seam: no CUDA device: --gpu-layers auto runs every layer on the CPU\n");
        return 0;
    }
    if (o->gpu_layers == 0) return 0;
    if (o->gpu_layers > m->cfg.n_layers) {
        fprintf(stderr, "seam: --gpu-layers %d is more than the model's %d layers\n", o->gpu_layers,
                m->cfg.n_layers);
        return -1;
    }
    if (n_devices == 0) {
#ifdef SEAM_HAVE_CUDA
        fprintf(stderr, "seam: --gpu-layers %d needs a CUDA device and none is present; use -ngl 0\n",
                o->gpu_layers);
#else
        fprintf(stderr, "seam: --gpu-layers %d needs CUDA, and this seam was built without it; use -ngl 0\n",
                o->gpu_layers);
#endif
        return -1;
    }
    fprintf(stderr, "seam: --gpu-layers %d: the CUDA layer split is not in this build yet; use -ngl 0\n",
            o->gpu_layers);
    return -1;
}

// ---------------------------------------------------------------- run

// What run and logits share: a loaded model, the prompt's tokens and an
// engine whose context holds them and n_extra more.
typedef struct {
    seam_model model;
    seam_engine eng;
    int *prompt;
    int n_prompt;
} session;

static void session_close(session *s) {
    engine_free(&s->eng);
    free(s->prompt);
    model_free(&s->model);
}

static int session_open(session *s, const options *o, int n_extra) {
    memset(s, 0, sizeof *s);
    if (!o->model_path) return fprintf(stderr, "seam: -m FILE is required\n"), -1;
    if (!o->tokens) return fprintf(stderr, "seam: give a prompt with --tokens IDS\n"), -1;
    seam_error err = {{0}};
    double t0 = seam_now();
    if (model_load(&s->model, o->model_path, &err)) return fprintf(stderr, "seam: %s\n", err.msg), -1;
    const seam_config *c = &s->model.cfg;
    fprintf(stderr, "seam: loaded %s (%s, %d layers, n_embd %d, vocab %d) in %.2f s\n", o->model_path,
            c->arch_name, c->n_layers, c->n_embd, c->n_vocab, seam_now() - t0);
    if (resolve_gpu_layers(o, &s->model) < 0 || parse_token_list(o->tokens, c->n_vocab, &s->prompt, &s->n_prompt)) {
        session_close(s);
        return -1;
    }
    if (s->n_prompt + n_extra > o->n_ctx) {
        fprintf(stderr, "seam: prompt (%d) + generated (%d) tokens exceed the context of %d; raise -c\n",
                s->n_prompt, n_extra, o->n_ctx);
        session_close(s);
        return -1;
    }
    if (engine_init(&s->eng, &s->model, o->n_ctx, &err)) {
        fprintf(stderr, "seam: %s\n", err.msg);
        session_close(s);
        return -1;
    }
    return 0;
}

static int cmd_run(const options *o) {
    session ss;
    if (session_open(&ss, o, o->n_predict)) return 1;
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
    for (int i = 0; i < ss.n_prompt; i++)
        if (engine_forward(&ss.eng, ss.prompt[i], i, &logits, &err)) goto fail;
    t_prefill = seam_now() - t_prefill;

    // decode
    double t_decode = seam_now();
    int pos = ss.n_prompt, n_generated = 0;
    for (; n_generated < o->n_predict; n_generated++, pos++) {
        const int next = sampler_sample(&sampler, logits);
        printf(n_generated ? " %d" : "%d", next);
        fflush(stdout);
        if (n_generated + 1 < o->n_predict && engine_forward(&ss.eng, next, pos, &logits, &err)) goto fail;
    }
    if (n_generated) printf("\n");
    t_decode = seam_now() - t_decode;
    fprintf(stderr, "seam: prefill %d tokens in %.3f s (%.1f tok/s); decode %d tokens in %.3f s (%.1f tok/s)\n",
            ss.n_prompt, t_prefill, ss.n_prompt / t_prefill, n_generated, t_decode,
            n_generated > 1 ? (n_generated - 1) / t_decode : 0.0);
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
    if (session_open(&ss, o, 0)) return 1;
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
    fprintf(stderr, "seam: wrote %d x %d logits to %s\n", ss.n_prompt, ss.model.cfg.n_vocab, o->out_path);
done:
    if (out && fclose(out) && rc == 0) {
        fprintf(stderr, "seam: closing %s failed\n", o->out_path);
        rc = 1;
    }
    session_close(&ss);
    return rc;
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
        human_bytes(model_bytes_per_token(&m), b1, sizeof b1);
        printf("read per token  %s (every layer, the head, one embedding row)\n", b1);
        model_free(&m);
    } else {
        printf("read per token  unknown: %s\n", err.msg);
        gguf_close(&f);
    }
    return 0;
}

int main(int argc, char **argv) {
    if (argc < 2) {
        usage(stderr);
        return 2;
    }
    const char *cmd = argv[1];
    if (!strcmp(cmd, "-h") || !strcmp(cmd, "--help") || !strcmp(cmd, "help")) {
        usage(stdout);
        return 0;
    }
    options o;
    if (parse_options(argc - 2, argv + 2, &o)) return 2;
    if (!strcmp(cmd, "run")) return cmd_run(&o);
    if (!strcmp(cmd, "inspect")) return cmd_inspect(&o);
    if (!strcmp(cmd, "logits")) return cmd_logits(&o);
    fprintf(stderr, "seam: unknown command '%s' (see seam --help)\n", cmd);
    return 2;
}
