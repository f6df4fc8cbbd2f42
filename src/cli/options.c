// options.c — the `seam` command line's flags (options.h).
#include "cli/options.h"

#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "plan/fit.h"

void options_usage(FILE *f) {
    fprintf(f,
            "usage: seam COMMAND [options]\n"
            "\n"
            "commands:\n"
            "  run       generate from a prompt and report the time of each token\n"
            "  inspect   print a GGUF file's metadata, tensors and bytes read per token\n"
            "  logits    write the logits after every prompt token (float32 [n_tokens][n_vocab])\n"
            "  plan      print where each layer goes and the memory each device needs\n"
            "  chat      talk with the model, one line per turn (the cache keeps the conversation)\n"
            "  tokenize  print the token ids of a text as the model sees it\n"
            "  bench     prompt and generation speed, llama-bench style (seam bench --help)\n"
            "\n"
            "run options (default in brackets):\n"
            "  -m, --model FILE        GGUF model to load (required)\n"
            "  -p, --prompt TEXT       prompt text, tokenised with the model's vocabulary\n"
            "      --tokens IDS        prompt as token ids, comma-separated (e.g. 1,2,3)\n"
            "  -n, --n-predict N       tokens to generate [32]\n"
            "  -c, --ctx-size N        context size in tokens: prompt + generated [512, or the model's\n"
            "                          trained context when less]; at most that trained context\n"
            "  -ctk, --cache-type-k T  the KV cache's key type: f16 or q8_0 [f16]\n"
            "  -ctv, --cache-type-v T  the KV cache's value type: f16 or q8_0 [f16]; a q8_0 cache attends\n"
            "                          as llama.cpp's flash attention does\n"
            "      --swa-full          sliding-window layers keep every position, not a ring of their window\n"
            "  -t, --threads N         CPU threads [all cores]\n"
            "  -ngl, --gpu-layers N    layers 0..N-1 on the GPU [0]; past the model's layers (llama.cpp's 99)\n"
            "                          = all of them; 'auto' = with --hw PROFILE the placement predicted fastest\n"
            "                          that fits (seam plan --fit), without it as many layers as fit\n"
            "      --fit speed|memory  what -ngl auto chooses by: the predicted speed (needs --hw) or the most\n"
            "                          layers that fit [speed with --hw, else memory]\n"
            "      --fit-cache         -ngl auto may choose the KV cache's types too (f16, q8_0) [-ctk, -ctv]\n"
            "      --head cpu|gpu      where the output head runs [the device of the last layer]\n"
            "      --overflow MODE     how the layers past -ngl run: cpu (on the CPU), mapped (on the GPU,\n"
            "                          reading their weights over the bus), stream (on the GPU, each layer\n"
            "                          copied in while earlier ones compute) [cpu]\n"
            "      --no-graph          launch the GPU layers op by op instead of as one CUDA graph [graph]\n"
            "      --gpu-prefill MODE  how a prompt's batches cross the GPU layers: tokens (one by one, as decode),\n"
            "                          gemm (dequantise to f16, cuBLAS) or auto (gemm from %d tokens); only gemm\n"
            "                          and auto hold the GEMM's GPU buffers [tokens]\n"
            "      --cpu-moe           keep every layer's experts on the CPU (MoE models)\n"
            "      --n-cpu-moe N       keep the experts of layers 0..N-1 on the CPU [0]\n"
            "      --gpu-mem SIZE      plan for a GPU with SIZE bytes free (e.g. 12G) [the device's]\n"
            "      --seed N            sampler seed [0: a fixed default]\n"
            "      --temp T            temperature; 0 = greedy [0]\n"
            "      --top-k K           keep the K most likely tokens; 0 = off [0]\n"
            "      --top-p P           keep the smallest set with mass P; 1 = off [1]\n"
            "      --timeline FILE     write every crossing and token record as JSON\n"
            "      --layers            time every layer and print a table of them (and write them with --timeline) [off]\n"
            "  -o, --output FILE       logits: the file the logits go to (required there)\n"
            "      --ids               print generated token ids (space-separated, one line), not text\n"
            "  -h, --help              this help (seam --version: the version)\n"
            "\n"
            "  seam inspect FILE\n"
            "  seam logits -m FILE (--tokens IDS | -p TEXT) -o OUT.f32 [-c N] [-ctk T] [-ctv T]\n"
            "  seam tokenize -m FILE TEXT\n"
            "  seam plan -m FILE [-ngl N|auto] [-c N] [-ctk T] [-ctv T] [--swa-full] [--gpu-mem SIZE] [--head cpu|gpu]\n"
            "            [--overflow MODE] [--n-cpu-moe N] [--gpu-prefill MODE]\n"
            "\n"
            "plan also predicts decode speed on a hardware profile (models/hw/*.hw, or 'this' = this CPU measured now):\n"
            "  seam plan (-m FILE | --shape FILE.shape) -ngl LIST --hw PROFILE [-t N] [-c N] [--json FILE]\n"
            "      --hw PROFILE        predict tok/s and where the time of a token goes, per -ngl value\n"
            "      --shape FILE        the model of a shape file (models/*.shape), as seam-synth would write it\n"
            "      --json FILE         the predictions as JSON ('-' = stdout)\n"
            "  seam plan (-m FILE | --shape FILE.shape) --fit [speed|memory] --hw PROFILE [--gpu-mem SIZE] [--json FILE]\n"
            "      --fit               every placement that fits (GPU layers, experts on the CPU, the head, the\n"
            "                          overflow; what --head, --overflow, --n-cpu-moe fix stays), ranked by\n"
            "                          predicted speed; the fastest chosen (memory: the most layers), its flags\n"
            "  (-ngl takes a list there: 0,20,44,48 or 0-48+4; -c is the KV cache's fill; -t [the profile's threads])\n",
            GPU_GEMM_MIN_BATCH);
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

// A flag's text (a file, a prompt): only that it is there.
static int parse_text(const char *flag, const char *v, const char *what, const char **out) {
    if (!v) return fprintf(stderr, "seam: %s wants %s\n", flag, what), -1;
    *out = v;
    return 0;
}

int options_parse(int argc, char **argv, options *o) {
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    *o = (options){.n_predict = 32, .n_threads = cores > 0 ? (int)cores : 1, .top_p = 1.0f, .head = -1};
    for (int i = 0; i < argc; i++) {
        const char *a = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        long x;
#define IS(s) (!strcmp(a, s))
        if (IS("-h") || IS("--help")) {
            options_usage(stdout);
            exit(0);
        } else if (IS("-m") || IS("--model")) {
            if (parse_text(a, v, "a file", &o->model_path)) return -1;
            i++;
        } else if (IS("-p") || IS("--prompt")) {
            if (o->prompt) return fprintf(stderr, "seam: %s is given twice: give one prompt\n", a), -1;
            if (parse_text(a, v, "a text", &o->prompt)) return -1;
            i++;
        } else if (IS("--tokens")) {
            if (parse_text(a, v, "ids, e.g. 1,2,3", &o->tokens)) return -1;
            i++;
        } else if (IS("-n") || IS("--n-predict")) {
            if (parse_long(a, v, 0, 1 << 24, &x)) return -1;
            o->n_predict = (int)x, i++;
        } else if (IS("-c") || IS("--ctx-size")) {
            if (parse_long(a, v, 1, 1 << 24, &x)) return -1;
            o->n_ctx = (int)x, i++;
        } else if (IS("-ctk") || IS("--cache-type-k") || IS("-ctv") || IS("--cache-type-v")) {
            const int k = v ? plan_kv_type_find(v) : -1;
            if (k < 0) return fprintf(stderr, "seam: %s wants f16 or q8_0 (got '%s')\n", a, v ? v : ""), -1;
            if (IS("-ctk") || IS("--cache-type-k")) o->cache.k = (seam_kv_type)k;
            else o->cache.v = (seam_kv_type)k;
            i++;
        } else if (IS("--swa-full")) {
            o->cache.swa_full = true;
        } else if (IS("-t") || IS("--threads")) {
            if (parse_long(a, v, 1, 256, &x)) return -1;
            o->n_threads = (int)x, o->threads_set = true, i++;
        } else if (IS("-ngl") || IS("--gpu-layers")) {
            seam_error err;
            if (v && !strcmp(v, "auto")) o->gpu_layers = -1, o->n_ngl = 0;
            else if (seam_parse_int_list(a, v, 0, 100000, o->ngl_list, 64, &o->n_ngl, &err))
                return fprintf(stderr, "seam: %s\n", err.msg), -1;
            else o->gpu_layers = o->ngl_list[0];
            i++;
        } else if (IS("--gpu-mem")) {
            if (!v || plan_parse_bytes(v, &o->gpu_mem) || o->gpu_mem == 0)
                return fprintf(stderr, "seam: --gpu-mem wants a size such as 12G or 8000M (got '%s')\n", v ? v : ""), -1;
            i++;
        } else if (IS("--head")) {
            if (v && !strcmp(v, "cpu")) o->head = DEV_CPU;
            else if (v && !strcmp(v, "gpu")) o->head = DEV_GPU;
            else return fprintf(stderr, "seam: --head wants cpu or gpu (got '%s')\n", v ? v : ""), -1;
            i++;
        } else if (IS("--overflow")) {
            const int k = v ? plan_overflow_find(v, strlen(v)) : -1;
            if (k < 0)
                return fprintf(stderr, "seam: --overflow wants cpu, mapped or stream (got '%s')\n", v ? v : ""), -1;
            o->overflow = (seam_overflow)k, o->overflow_set = true, i++;
        } else if (IS("--fit-cache")) {
            o->fit_cache = true;
        } else if (IS("--fit")) {  // its rule is optional: speed unless the next word names one
            const bool named = v && (!strcmp(v, "speed") || !strcmp(v, "memory"));
            o->fit = 1 + (named && !strcmp(v, "memory") ? FIT_MEMORY : FIT_SPEED);
            i += named;
        } else if (IS("--no-graph")) {
            o->no_graph = true;
        } else if (IS("--gpu-prefill")) {
            const int k = v ? gpu_prefill_find(v) : -1;
            if (k < 0) return fprintf(stderr, "seam: --gpu-prefill wants tokens, gemm or auto (got '%s')\n", v ? v : ""), -1;
            o->gpu_prefill = (seam_gpu_prefill)k, i++;
        } else if (IS("--cpu-moe")) {
            o->cpu_moe = true;
        } else if (IS("--n-cpu-moe")) {
            seam_error err;
            if (seam_parse_int_list(a, v, 0, SEAM_MAX_LAYERS, o->cpu_moe_list, 64, &o->n_cpu_moe_list, &err))
                return fprintf(stderr, "seam: %s\n", err.msg), -1;
            o->n_cpu_moe = o->cpu_moe_list[0], i++;
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
            if (parse_text(a, v, "a file", &o->out_path)) return -1;
            i++;
        } else if (IS("--timeline")) {
            if (parse_text(a, v, "a file", &o->timeline_path)) return -1;
            i++;
        } else if (IS("--layers")) {
            o->time_layers = true;
        } else if (IS("--hw") || IS("--shape") || IS("--json")) {
            const char **dst = IS("--hw") ? &o->hw : IS("--shape") ? &o->shape_path : &o->json_path;
            if (parse_text(a, v, IS("--hw") ? "a profile" : "a file", dst)) return -1;
            i++;
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
    if (o->fit && o->n_ngl) return fprintf(stderr, "seam: --fit chooses the GPU layers: give -ngl auto or none\n"), -1;
    if (o->fit) o->gpu_layers = -1;
    if (o->fit_cache && o->gpu_layers != -1)
        return fprintf(stderr, "seam: --fit-cache lets -ngl auto choose the cache: give -ngl auto or --fit\n"), -1;
    return 0;
}
