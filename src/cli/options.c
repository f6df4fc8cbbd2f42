// options.c — the `seam` command line's flags (options.h).
#include "cli/options.h"

#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "plan/fit.h"

// The commands options_parse serves, a bit each: a flag's entry says which
// take it, so that each command's --help lists its own flags and a flag
// given to a command that does nothing with it is refused.
enum {
    CMD_RUN = 1 << 0, CMD_CHAT = 1 << 1, CMD_LOGITS = 1 << 2, CMD_PLAN = 1 << 3, CMD_TOKENIZE = 1 << 4,
    CMD_INSPECT = 1 << 5,
    RUNS = CMD_RUN | CMD_CHAT | CMD_LOGITS,  // the commands that place and run a model
    PLACES = RUNS | CMD_PLAN,                // and the one that plans it
    ALL = PLACES | CMD_TOKENIZE | CMD_INSPECT,
};

static const struct {
    const char *name, *usage, *what;
    unsigned bit;
} COMMANDS[] = {
    {"run", "seam run -m FILE (-p TEXT | -f FILE | --tokens IDS) [options]",
     "generate from a prompt and report the time of each token", CMD_RUN},
    {"chat", "seam chat -m FILE [options]",
     "talk with the model, one line per turn (the cache keeps the conversation)", CMD_CHAT},
    {"logits", "seam logits -m FILE (-p TEXT | -f FILE | --tokens IDS) -o OUT.f32 [options]",
     "write the logits after every prompt token (float32 [n_tokens][n_vocab])", CMD_LOGITS},
    {"plan", "seam plan (-m FILE | --shape FILE.shape) [options]",
     "print where each layer goes and the memory each device needs; with --hw, the predicted speed", CMD_PLAN},
    {"tokenize", "seam tokenize -m FILE (TEXT | -p TEXT | -f FILE)",
     "print the token ids of a text as the model sees it", CMD_TOKENIZE},
    {"inspect", "seam inspect FILE", "print a GGUF file's metadata, tensors and bytes read per token", CMD_INSPECT},
};

// A flag's help: its names (", " between them), its value, what it does (a
// "\n" continues it on the next line), the commands that take it.
static const struct {
    const char *names, *value, *what;
    unsigned commands;
} FLAGS[] = {
    {"-m, --model", "FILE", "GGUF model to load (required)", ALL},
    {"-p, --prompt", "TEXT", "prompt text, tokenised with the model's vocabulary", CMD_RUN | CMD_LOGITS | CMD_TOKENIZE},
    {"-f, --file", "FILE", "the prompt from a file (one trailing newline dropped, as llama.cpp's -f)",
     CMD_RUN | CMD_LOGITS | CMD_TOKENIZE},
    {"--tokens", "IDS", "prompt as token ids, comma-separated (e.g. 1,2,3)", CMD_RUN | CMD_LOGITS},
    {"-n, --n-predict", "N", "tokens to generate (chat: per turn) [32]", CMD_RUN | CMD_CHAT},
    {"-c, --ctx-size", "N", "context size in tokens: prompt + generated [512, or the model's\n"
                            "trained context when less]; at most that trained context\n"
                            "(plan --hw: the KV cache's fill a prediction decodes at)",
     PLACES},
    {"-ctk, --cache-type-k", "T", "the KV cache's key type: f16 or q8_0 [f16]", PLACES},
    {"-ctv, --cache-type-v", "T", "the KV cache's value type: f16 or q8_0 [f16]; a q8_0 cache attends\n"
                                  "as llama.cpp's flash attention does", PLACES},
    {"--swa-full", NULL, "sliding-window layers keep every position, not a ring of their window", PLACES},
    {"-t, --threads", "N", "CPU threads [all cores; plan --hw: the profile's]", PLACES},
    {"-ngl, --gpu-layers", "N", "layers 0..N-1 on the GPU [0]; past the model's layers (llama.cpp's 99)\n"
                                "= all of them; 'auto' = with --hw PROFILE the placement predicted fastest\n"
                                "that fits (seam plan --fit), without it as many layers as fit\n"
                                "(plan --hw: a list, 0,20,44,48 or 0-48+4)", PLACES},
    {"--fit", "speed|memory", "what -ngl auto chooses by: the predicted speed (needs --hw) or the most\n"
                              "layers that fit [speed with --hw, else memory]; plan --fit: every placement\n"
                              "that fits, ranked, the chosen one's flags", CMD_RUN | CMD_CHAT | CMD_PLAN},
    {"--fit-cache", NULL, "-ngl auto may choose the KV cache's types too (f16, q8_0) [-ctk, -ctv]",
     CMD_RUN | CMD_CHAT | CMD_PLAN},
    {"--head", "cpu|gpu", "where the output head runs [the device of the last layer]", PLACES},
    {"--overflow", "MODE", "how the layers past -ngl run: cpu (on the CPU), mapped (on the GPU,\n"
                           "reading their weights over the bus), stream (on the GPU, each layer\n"
                           "copied in while earlier ones compute) [cpu]", PLACES},
    {"--no-graph", NULL, "launch the GPU layers op by op instead of as one CUDA graph [graph]", RUNS},
    {"--gpu-prefill", "MODE", "how a prompt's batches cross the GPU layers: tokens (one by one, as decode),\n"
                              "gemm (dequantise to f16, cuBLAS) or auto (gemm from %d tokens); only gemm\n"
                              "and auto hold the GEMM's GPU buffers [tokens]", PLACES},
    {"--cpu-moe", NULL, "keep every layer's experts on the CPU (MoE models)", PLACES},
    {"--n-cpu-moe", "N", "keep the experts of layers 0..N-1 on the CPU [0] (plan --hw: a list)", PLACES},
    {"--gpu-mem", "SIZE", "plan for a GPU with SIZE bytes free (e.g. 12G) [the device's; plan --hw: the\n"
                          "profile's cards]", PLACES},
    {"--hw", "PROFILE", "a hardware profile (models/hw/*.hw, or 'this' = this CPU measured now): plan\n"
                        "predicts tok/s and where a token's time goes; run and chat choose -ngl auto\n"
                        "by it; run --layers sets each layer's predicted time beside the measured",
     CMD_RUN | CMD_CHAT | CMD_PLAN},
    {"--hw-out", "FILE", "where --hw this writes the profile it measured, every figure with its source\n"
                         "(a file --hw reads back, not measuring again; '-': stderr) [seam-this.hw]",
     CMD_RUN | CMD_CHAT | CMD_PLAN},
    {"--shape", "FILE", "the model of a shape file (models/*.shape), as seam-synth would write it", CMD_PLAN},
    {"--json", "FILE", "the predictions (--hw) as JSON ('-' = stdout)", CMD_PLAN},
    {"--seed", "N", "sampler seed [0: a fixed default]", CMD_RUN | CMD_CHAT},
    {"--temp", "T", "temperature; 0 = greedy [0]", CMD_RUN | CMD_CHAT},
    {"--top-k", "K", "keep the K most likely tokens; 0 = off [0]", CMD_RUN | CMD_CHAT},
    {"--top-p", "P", "keep the smallest set with mass P; 1 = off [1]", CMD_RUN | CMD_CHAT},
    {"--timeline", "FILE", "write every crossing and token record as JSON", CMD_RUN | CMD_CHAT},
    {"--trace", "FILE", "the run as a Chrome Trace Event file: a lane each for the host thread, the GPU\n"
                        "stream, the copy stream and the CPU's layers (open it in Perfetto or chrome://tracing)",
     CMD_RUN | CMD_CHAT},
    {"--layers", NULL, "time every layer and print a table of them (and write them with --timeline) [off]",
     CMD_RUN},
    {"-o, --output", "FILE", "the file the logits go to (required)", CMD_LOGITS},
    {"--ids", NULL, "print generated token ids (space-separated, one line), not text", CMD_RUN},
    {"-q, --quiet", NULL, "print only what the command makes (text, ids) and errors, not the load,\n"
                          "the plan, the memory and the timing report [off]", RUNS},
    {"-h, --help", NULL, "this help (seam --help: every command's flags; seam --version: the version)", ALL},
};

enum { N_FLAGS = sizeof FLAGS / sizeof FLAGS[0], N_COMMANDS = sizeof COMMANDS / sizeof COMMANDS[0] };

// Whether `names` ("-m, --model") holds flag as one of its names.
static bool names_hold(const char *names, const char *flag) {
    const size_t len = strlen(flag);
    for (const char *p = names; (p = strstr(p, flag)); p += len)
        if ((p == names || p[-1] == ' ') && (p[len] == ',' || p[len] == 0)) return true;
    return false;
}

static unsigned command_bit(const char *command) {
    for (int i = 0; command && i < N_COMMANDS; i++)
        if (!strcmp(COMMANDS[i].name, command)) return COMMANDS[i].bit;
    return 0;
}

static void print_flag(FILE *f, int i) {
    char left[48];
    // a flag without a short name lines up its long one under the others'
    snprintf(left, sizeof left, "%s%s%s%s", FLAGS[i].names[1] == '-' ? "    " : "", FLAGS[i].names,
             FLAGS[i].value ? " " : "", FLAGS[i].value ? FLAGS[i].value : "");
    fprintf(f, "  %-23s ", left);
    if (strlen(left) > 23) fprintf(f, "\n  %-23s ", "");
    for (const char *w = FLAGS[i].what; *w; w++) {
        if (*w == '%') fprintf(f, "%d", GPU_GEMM_MIN_BATCH), w++;  // the one number a text takes
        else if (*w == '\n') fprintf(f, "\n  %-23s ", "");
        else fputc(*w, f);
    }
    fputc('\n', f);
}

void options_usage(FILE *f, const char *command) {
    const unsigned bit = command_bit(command);
    for (int i = 0; bit && i < N_COMMANDS; i++)
        if (COMMANDS[i].bit == bit) fprintf(f, "usage: %s\n\n%s.\n\noptions (default in brackets):\n", COMMANDS[i].usage,
                                            COMMANDS[i].what);
    if (!bit) {
        fprintf(f, "usage: seam COMMAND [options]   (seam COMMAND --help: that command's options)\n\ncommands:\n");
        for (int i = 0; i < N_COMMANDS; i++) fprintf(f, "  %-9s %s\n", COMMANDS[i].name, COMMANDS[i].what);
        fprintf(f, "  %-9s %s\n", "bench", "prompt and generation speed, llama-bench style (seam bench --help)");
        fprintf(f, "\n");
        for (int i = 0; i < N_COMMANDS; i++) fprintf(f, "  %s\n", COMMANDS[i].usage);
        fprintf(f, "\noptions (default in brackets; seam COMMAND --help lists a command's own):\n");
    }
    for (int i = 0; i < N_FLAGS; i++)
        if (!bit || FLAGS[i].commands & bit) print_flag(f, i);
}

// The commands that take flag, or ALL for a flag the table does not know
// (options_parse refuses it as unknown).
static unsigned flag_commands(const char *flag) {
    for (int i = 0; i < N_FLAGS; i++)
        if (names_hold(FLAGS[i].names, flag)) return FLAGS[i].commands;
    return ALL;
}

// "run, chat and plan"
static void commands_of(unsigned commands, char *buf, size_t len) {
    int n = 0, left = 0;
    for (int i = 0; i < N_COMMANDS; i++) left += !!(commands & COMMANDS[i].bit);
    buf[0] = 0;
    for (int i = 0; i < N_COMMANDS; i++)
        if (commands & COMMANDS[i].bit) {
            left--;
            snprintf(buf + strlen(buf), len - strlen(buf), "%s%s", n++ ? (left ? ", " : " and ") : "", COMMANDS[i].name);
        }
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

int options_parse(int argc, char **argv, const char *command, options *o) {
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    *o = (options){.n_predict = 32, .n_threads = cores > 0 ? (int)cores : 1, .top_p = 1.0f, .head = -1};
    for (int i = 0; i < argc; i++) {
        const char *a = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        long x;
#define IS(s) (!strcmp(a, s))
        if (a[0] == '-' && command_bit(command) && !(flag_commands(a) & command_bit(command))) {
            char takes[96];
            commands_of(flag_commands(a), takes, sizeof takes);
            return fprintf(stderr, "seam %s: %s does nothing here: it is for %s (see seam %s --help)\n", command,
                           a, takes, command), -1;
        }
        if (IS("-h") || IS("--help")) {
            o->help = true;
        } else if (IS("-m") || IS("--model")) {
            if (parse_text(a, v, "a file", &o->model_path)) return -1;
            i++;
        } else if (IS("-p") || IS("--prompt")) {
            if (o->prompt) return fprintf(stderr, "seam: %s is given twice: give one prompt\n", a), -1;
            if (parse_text(a, v, "a text", &o->prompt)) return -1;
            i++;
        } else if (IS("-f") || IS("--file")) {
            if (parse_text(a, v, "a file", &o->prompt_file)) return -1;
            i++;
        } else if (IS("-q") || IS("--quiet")) {
            o->quiet = true;
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
        } else if (IS("--trace")) {
            if (parse_text(a, v, "a file", &o->trace_path)) return -1;
            i++;
        } else if (IS("--layers")) {
            o->time_layers = true;
        } else if (IS("--hw-out")) {
            if (parse_text(a, v, "a file", &o->hw_out)) return -1;
            i++;
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
    if (o->hw_out && (!o->hw || strcmp(o->hw, "this")))
        return fprintf(stderr, "seam: --hw-out writes the profile --hw this measures: add --hw this\n"), -1;
    if (o->fit && o->n_ngl) return fprintf(stderr, "seam: --fit chooses the GPU layers: give -ngl auto or none\n"), -1;
    if (o->fit) o->gpu_layers = -1;
    if (o->fit_cache && o->gpu_layers != -1)
        return fprintf(stderr, "seam: --fit-cache lets -ngl auto choose the cache: give -ngl auto or --fit\n"), -1;
    return 0;
}
