// bench.c — `seam bench`: llama-bench's tests on seam's engine.
//
//   seam bench -m FILE[,FILE..] [-p 512] [-n 128] [-d 0] [-t N,..] [-ngl N,..] [-ctk f16,q8_0] [-ctv f16,q8_0]
//              [--overflow cpu,mapped,stream] [-r 5] [-o md|json|csv]
//
// For every model and every combination of the swept values (comma lists,
// or ranges first-last[+step]), one engine runs, at each depth D (llama-
// bench's -d: D tokens already in the KV cache, filled by prefill in
// ascending order of the depths, each fill continuing the last):
//   ppP  a P-token prompt at positions D..: P / seconds
//   tgN  N tokens decoded one at a time at positions D..: N / seconds, the
//        bytes those tokens read -- weights, and the KV cache their
//        attention reads (plan_kv_read_bytes) -- per second, against the
//        read bandwidth the memory probe measures on the same threads
// each test once to warm up and then -r times, over the same positions; the
// table gives the mean and standard deviation of the repetitions' tokens per
// second, and the memory the process holds after the test (RSS growth since
// the model was opened) beside the plan's prediction (memstat.h). Token ids
// are fixed pseudo-random ones (the speed does not depend on them). The
// results go to stdout; progress to stderr.
#include "cli/bench.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cpu/kernels.h"
#include "cpu/membw.h"
#include "cpu/speed.h"
#include "engine/engine.h"
#include "format/gguf.h"
#include "gpu/energy.h"
#include "gpu/gpu_segment.h"
#include "plan/fit.h"
#include "plan/memstat.h"
#include "model/model.h"
#include "plan/hw.h"
#include "plan/plan.h"
#include "plan/predict.h"

enum { MAX_LIST = 64, MAX_MODELS = 16, MAX_REPS = 100 };

typedef struct {
    int v[MAX_LIST];
    int n;
} int_list;

typedef enum { OUT_MD, OUT_JSON, OUT_CSV } out_format;

typedef struct {
    char *model_list;  // -m's text, split in place into models[]
    const char *models[MAX_MODELS];
    int n_models;
    int_list prompt, gen, depth, threads, gpu_layers, n_cpu_moe, overflow, cache_k, cache_v;
    int reps;
    out_format format;
    bool no_graph;
    bool time_layers;  // --layers: a table of every layer's time after each decode test
    bool wide;         // --wide: md's size, params and bytes a token columns, and the plan beside the memory
    const char *trace; // --trace FILE: each test's last repetition as a process of a Chrome trace
    const char *hw;    // --hw: a profile whose speed model predicts each decode test (NULL: none)
    seam_gpu_prefill gpu_prefill;  // --gpu-prefill: how prompts cross the GPU layers
} bench_options;

// One line of the report: a test of one model under one configuration.
typedef struct {
    const char *model;
    uint64_t size, params;
    const char *kernels;
    int threads, gpu_layers, n_cpu_moe;
    seam_overflow overflow;
    seam_kv_config cache;
    seam_gpu_prefill gpu_prefill;
    bool emulated;        // the GPU layers ran on the emulated device: CPU times, not GPU times
    int n_prompt, n_gen;  // one of them is 0
    int n_depth;          // positions already in the cache
    double ts[MAX_REPS];  // tokens per second of each repetition
    int reps;
    double mean, sd;      // of ts
    double weight_bytes;  // tg: weight bytes one token reads
    double kv_bytes;      // tg: KV cache bytes one token's attention reads (the mean over its positions)
    double gbs;           // tg: bytes read per second (mean), weights and KV
    double read_limit;    // tg: the memory probe's read GB/s on these threads (0: not measured)
    double segment_us[SEG_COUNT];  // tg: a decoded token's mean time in each segment (GPU, CPU layers, head)
    double predicted_ts;           // tg with --hw: the speed model's tok/s at the test's middle position (0: none)
    double cpu_attention_us;       // tg: the share of segment_us[SEG_CPU] the layers' attention took
    double macs;                   // pp: multiply-adds a prompt token takes (plan_prompt_macs / n_prompt)
    double int8_peak;              // pp on the CPU: the int8 roof's G multiply-adds/s on these threads (0: none)
    uint64_t mem, mem_pred;          // host bytes held after the test, and the plan's prediction
    uint64_t gpu_mem, gpu_mem_pred;  // the same on the GPU (0 without one)
    bool energy;                     // tg with GPU layers: the board's energy over the measured runs (NVML)
    gpu_energy_result power;         // ... its figures
    double j_token;                  // ... and per decoded token
} bench_row;

static void usage(FILE *f) {
    fprintf(f,
            "usage: seam bench -m FILE[,FILE...] [options]\n"
            "\n"
            "  -m, --model FILES        GGUF models, comma-separated (required)\n"
            "  -p, --n-prompt LIST      prompt lengths to test, 0 = none [512]\n"
            "  -n, --n-gen LIST         generation lengths to test, 0 = none [128]\n"
            "  -d, --n-depth LIST       tokens already in the KV cache when a test starts [0]\n"
            "  -t, --threads LIST       CPU threads [all cores]\n"
            "  -ngl, --gpu-layers LIST  layers on the GPU [0]; 'auto': with --hw the fastest placement that fits\n"
            "                           (seam plan --fit, per model), else as many layers as fit\n"
            "      --overflow MODES     how the rest run: cpu, mapped, stream, comma-separated [cpu]\n"
            "      --n-cpu-moe LIST     MoE: the experts of layers 0..N-1 stay on the CPU beside GPU layers [0]\n"
            "      --hw PROFILE         the speed model's tok/s beside each decode test (models/hw, or 'this') [none]\n"
            "  -ctk, --cache-type-k TYPES  KV cache key types: f16, q8_0, comma-separated [f16]\n"
            "  -ctv, --cache-type-v TYPES  KV cache value types: f16, q8_0, comma-separated [f16]\n"
            "  -r, --repetitions N      measured runs of each test, after one warm-up [5]\n"
            "  -o, --output FORMAT      md, json or csv [md]\n"
            "      --no-graph           launch the GPU layers op by op [one CUDA graph]\n"
            "      --layers             time every layer; a table of them after each decode test (its last run) [off]\n"
            "      --trace FILE         each test's last run as a process of a Chrome Trace Event file (Perfetto,\n"
            "                           chrome://tracing): host thread, GPU stream, copy stream and CPU lanes\n"
            "      --wide               md: the model's size and parameters, the bytes a decode reads a token and\n"
            "                           the plan's memory too (over 120 columns) [off]\n"
            "      --gpu-prefill MODE   how a prompt's batches cross the GPU layers: gemm (dequantise to f16,\n"
            "                           cuBLAS), tokens (one by one, as decode), or auto (gemm from %d tokens) [tokens]\n"
            "  -h, --help               this help\n"
            "\n"
            "LIST: values separated by commas, or a range first-last or first-last+step\n"
            "(e.g. -t 1,2  -p 128,512  -ngl 0-28+4). Every combination is run.\n",
            GPU_GEMM_MIN_BATCH);
}

static int parse_list(const char *flag, const char *s, int lo, int hi, int_list *out) {
    seam_error e;
    if (seam_parse_int_list(flag, s, lo, hi, out->v, MAX_LIST, &out->n, &e))
        return fprintf(stderr, "seam bench: %s\n", e.msg), -1;
    return 0;
}

// "cpu,stream": indices into names (n of them), each name once or more.
static int parse_names(const char *flag, const char *v, const char *const names[], int n, int_list *out) {
    out->n = 0;
    for (const char *m = v ? v : "";; m++) {  // m: a name, up to the next comma
        const size_t len = strcspn(m, ",");
        int k = -1;
        for (int j = 0; j < n && k < 0; j++)
            if (strlen(names[j]) == len && !strncmp(m, names[j], len)) k = j;
        if (k < 0 || out->n == MAX_LIST) {
            fprintf(stderr, "seam bench: %s wants some of", flag);
            for (int j = 0; j < n; j++) fprintf(stderr, "%s %s", j ? "," : "", names[j]);
            return fprintf(stderr, ", comma-separated (got '%s')\n", v ? v : ""), -1;
        }
        out->v[out->n++] = k;
        m += len;
        if (!*m) return 0;
    }
}

static int parse_bench_options(int argc, char **argv, bench_options *o) {
    const long cores = sysconf(_SC_NPROCESSORS_ONLN);
    *o = (bench_options){.reps = 5};
    o->prompt = (int_list){{512}, 1};
    o->gen = (int_list){{128}, 1};
    o->depth = (int_list){{0}, 1};
    o->cache_k = o->cache_v = (int_list){{KV_F16}, 1};
    o->threads = (int_list){{cores > 0 ? (int)cores : 1}, 1};
    o->gpu_layers = (int_list){{0}, 1};
    o->n_cpu_moe = (int_list){{0}, 1};
    o->overflow = (int_list){{OVERFLOW_CPU}, 1};
    for (int i = 0; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
#define IS(s) (!strcmp(a, s))
        if (IS("-h") || IS("--help")) {
            usage(stdout);
            exit(0);
        } else if (IS("-m") || IS("--model")) {
            if (!v) return fprintf(stderr, "seam bench: %s wants files\n", a), -1;
            free(o->model_list);
            o->n_models = 0;
            char *save = NULL;
            if (!(o->model_list = strdup(v))) return fprintf(stderr, "seam bench: out of memory\n"), -1;
            for (char *m = strtok_r(o->model_list, ",", &save); m; m = strtok_r(NULL, ",", &save)) {
                if (o->n_models == MAX_MODELS)
                    return fprintf(stderr, "seam bench: at most %d models\n", MAX_MODELS), -1;
                o->models[o->n_models++] = m;
            }
            i++;
        } else if (IS("-p") || IS("--n-prompt")) {
            if (parse_list(a, v, 0, 1 << 20, &o->prompt)) return -1;
            i++;
        } else if (IS("-n") || IS("--n-gen")) {
            if (parse_list(a, v, 0, 1 << 20, &o->gen)) return -1;
            i++;
        } else if (IS("-d") || IS("--n-depth")) {
            if (parse_list(a, v, 0, 1 << 24, &o->depth)) return -1;
            i++;
        } else if (IS("-t") || IS("--threads")) {
            if (parse_list(a, v, 1, 256, &o->threads)) return -1;
            i++;
        } else if (IS("-ngl") || IS("--gpu-layers")) {
            if (v && !strcmp(v, "auto")) o->gpu_layers = (int_list){.v = {-1}, .n = 1};  // chosen per model
            else if (parse_list(a, v, 0, SEAM_MAX_LAYERS, &o->gpu_layers)) return -1;
            i++;
        } else if (IS("--overflow")) {
            if (parse_names(a, v, plan_overflow_name, OVERFLOW_COUNT, &o->overflow)) return -1;
            i++;
        } else if (IS("--n-cpu-moe")) {
            if (parse_list(a, v, 0, SEAM_MAX_LAYERS, &o->n_cpu_moe)) return -1;
            i++;
        } else if (IS("--hw")) {
            if (!v) return fprintf(stderr, "seam bench: %s wants a profile\n", a), -1;
            o->hw = v, i++;
        } else if (IS("-ctk") || IS("--cache-type-k") || IS("-ctv") || IS("--cache-type-v")) {
            if (parse_names(a, v, plan_kv_type_name, KV_TYPE_COUNT, IS("-ctk") || IS("--cache-type-k") ? &o->cache_k
                                                                                                      : &o->cache_v))
                return -1;
            i++;
        } else if (IS("-r") || IS("--repetitions")) {
            char *end;
            const long r = v ? strtol(v, &end, 10) : 0;
            if (!v || *end || r < 1 || r > MAX_REPS)
                return fprintf(stderr, "seam bench: %s wants 1..%d (got '%s')\n", a, MAX_REPS, v ? v : ""), -1;
            o->reps = (int)r, i++;
        } else if (IS("-o") || IS("--output")) {
            if (v && !strcmp(v, "md")) o->format = OUT_MD;
            else if (v && !strcmp(v, "json")) o->format = OUT_JSON;
            else if (v && !strcmp(v, "csv")) o->format = OUT_CSV;
            else return fprintf(stderr, "seam bench: %s wants md, json or csv (got '%s')\n", a, v ? v : ""), -1;
            i++;
        } else if (IS("--no-graph")) {
            o->no_graph = true;
        } else if (IS("--layers")) {
            o->time_layers = true;
        } else if (IS("--wide")) {
            o->wide = true;
        } else if (IS("--trace")) {
            if (!v) return fprintf(stderr, "seam bench: %s wants a file\n", a), -1;
            o->trace = v, i++;
        } else if (IS("--gpu-prefill")) {
            const int k = v ? gpu_prefill_find(v) : -1;
            if (k < 0) return fprintf(stderr, "seam bench: %s wants auto, gemm or tokens (got '%s')\n", a, v ? v : ""), -1;
            o->gpu_prefill = (seam_gpu_prefill)k, i++;
        } else {
            return fprintf(stderr, "seam bench: unknown option '%s' (see seam bench --help)\n", a), -1;
        }
#undef IS
    }
    if (!o->n_models) return fprintf(stderr, "seam bench: -m FILE is required\n"), -1;
    return 0;
}

static int list_max(const int_list *l) {
    int m = 0;
    for (int i = 0; i < l->n; i++) m = l->v[i] > m ? l->v[i] : m;
    return m;
}

// n token ids, the same every run: a xorshift from the test's own seed.
static void test_tokens(int *ids, int n, int n_vocab, uint64_t seed) {
    uint64_t x = seed * 0x9e3779b97f4a7c15ull + 1;
    for (int i = 0; i < n; i++) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        ids[i] = (int)(x % (uint64_t)n_vocab);
    }
}

// Seconds for one run of the test at its depth: the prompt's prefill, or
// n_gen decodes.
static int run_once(seam_engine *eng, const bench_row *row, const int *ids, double *seconds, seam_error *e) {
    float *logits;
    const double t0 = seam_now();
    if (row->n_prompt) {
        if (engine_prefill(eng, ids, row->n_prompt, row->n_depth, &logits, e)) return -1;
    } else {
        for (int i = 0; i < row->n_gen; i++)
            if (engine_forward(eng, ids[i], row->n_depth + i, &logits, e)) return -1;
    }
    *seconds = seam_now() - t0;
    return 0;
}

// One of `runs` repetitions' share of the mean time of each segment, and of
// the CPU layers' attention: the mean over the timeline's tokens from
// `from` on, over runs.
static void segment_means(const seam_timeline *t, size_t from, int runs, bench_row *row) {
    const double n = (double)(t->n_tokens - from) * runs;
    for (size_t i = from; i < t->n_tokens; i++) {
        for (int k = 0; k < SEG_COUNT; k++) row->segment_us[k] += t->tokens[i].segment_us[k] / n;
        row->cpu_attention_us += t->tokens[i].cpu_attention_us / n;
    }
}

static void finish_row(bench_row *row) {
    double sum = 0, sq = 0;
    for (int r = 0; r < row->reps; r++) sum += row->ts[r];
    row->mean = sum / row->reps;
    for (int r = 0; r < row->reps; r++) sq += (row->ts[r] - row->mean) * (row->ts[r] - row->mean);
    row->sd = row->reps > 1 ? sqrt(sq / (row->reps - 1)) : 0.0;
    row->gbs = row->n_gen ? row->mean * (row->weight_bytes + row->kv_bytes) / 1e9 : 0.0;
}

// "pp512", "tg128", and llama-bench's " @ d4096" past depth 0.
static void test_name(const bench_row *r, char *buf, size_t len) {
    const int n = snprintf(buf, len, r->n_prompt ? "pp%d" : "tg%d", r->n_prompt ? r->n_prompt : r->n_gen);
    if (r->n_depth && n > 0 && (size_t)n < len) snprintf(buf + n, len - (size_t)n, " @ d%d", r->n_depth);
}

// The backend column: where the layers ran, and the prefill's path through GPU layers.
static void backend_name(const bench_row *r, char *backend, size_t len) {
    const char *cuda = r->emulated ? "CUDA-emu" : "CUDA";
    if (r->overflow != OVERFLOW_CPU) snprintf(backend, len, "%s, rest %s", cuda, plan_overflow_name[r->overflow]);
    else if (r->gpu_layers && r->n_cpu_moe)
        snprintf(backend, len, "%s + CPU %s, experts of %d layers", cuda, r->kernels, r->n_cpu_moe);
    else if (r->gpu_layers) snprintf(backend, len, "%s + CPU %s", cuda, r->kernels);
    else snprintf(backend, len, "CPU %s", r->kernels);
    if (r->n_prompt && (r->gpu_layers || r->overflow != OVERFLOW_CPU)) {  // the prefill path through the GPU layers
        const size_t used = strlen(backend);
        snprintf(backend + used, len - used, ", prefill %s", gpu_prefill_name[r->gpu_prefill]);
    }
}

// llama-bench's table, with what a row's speed is a share of: a decode's
// rate of bytes read against the read bandwidth, a prompt's multiply-adds
// against the int8 peak (the roofs, measured once per thread count, are
// printed under it), and the memory held. Within 120 columns; `wide` adds
// the model's size and parameters, the bytes read a token and the plan's
// memory beside the held.
enum { MD_COLUMNS = 14 };
static void print_md(const bench_row *rows, int n, bool wide) {
    bool speed_model = false, spread = false;
    for (int i = 0; i < n; i++) speed_model = speed_model || rows[i].predicted_ts > 0, spread |= rows[i].reps > 1;
    static const struct {
        const char *head, *rule;
        bool wide;
    } cols[MD_COLUMNS] = {
        {"model", "---", 0}, {"size", "---:", 1}, {"params", "---:", 1}, {"backend", "---", 0},
        {"threads", "---:", 0}, {"ngl", "---:", 0}, {"cache K/V", "---", 0}, {"test", "---:", 0},
        {"t/s", "---:", 0}, {"read MiB/t", "---:", 1}, {"rate", "---:", 0}, {"% of roof", "---:", 0},
        {"memory MiB", "---:", 0}, {"speed model t/s", "---:", 0},
    };
    const int shown = speed_model ? MD_COLUMNS : MD_COLUMNS - 1;
    for (int pass = 0; pass < 2; pass++) {
        for (int c = 0; c < shown; c++)
            if (wide || !cols[c].wide)
                printf("| %s ", pass ? cols[c].rule : c == 12 && wide ? "memory MiB (plan)" : cols[c].head);
        printf("|\n");
    }
    for (int i = 0; i < n; i++) {
        const bench_row *r = &rows[i];
        char cell[MD_COLUMNS][80] = {{0}};
        const char *slash = strrchr(r->model, '/');
        snprintf(cell[0], 80, "%s", slash ? slash + 1 : r->model);
        snprintf(cell[1], 80, "%.2f MiB", r->size / 1048576.0);
        snprintf(cell[2], 80, "%.2f B", r->params / 1e9);
        backend_name(r, cell[3], 80);
        snprintf(cell[4], 80, "%d", r->threads);
        snprintf(cell[5], 80, "%d", r->gpu_layers);
        snprintf(cell[6], 80, "%s/%s", plan_kv_type_name[r->cache.k], plan_kv_type_name[r->cache.v]);
        test_name(r, cell[7], 80);
        // one repetition has no spread to show
        if (spread) snprintf(cell[8], 80, "%.2f ± %.2f", r->mean, r->sd);
        else snprintf(cell[8], 80, "%.2f", r->mean);
        if (r->n_gen) {
            snprintf(cell[9], 80, "%.1f + %.1f KV", r->weight_bytes / 1048576.0, r->kv_bytes / 1048576.0);
            snprintf(cell[10], 80, "%.2f GB/s", r->gbs);
            if (r->read_limit > 0) snprintf(cell[11], 80, "%.0f%% read", 100 * r->gbs / r->read_limit);
        } else {
            snprintf(cell[10], 80, "%.1f GMAC/s", r->mean * r->macs / 1e9);
            if (r->int8_peak > 0) snprintf(cell[11], 80, "%.0f%% int8", 100 * r->mean * r->macs / 1e9 / r->int8_peak);
        }
        if (wide)
            snprintf(cell[12], 80, "%.1f (%.1f, %+.1f%%)", r->mem / 1048576.0, r->mem_pred / 1048576.0,
                     memstat_error(r->mem, r->mem_pred));
        else snprintf(cell[12], 80, "%.1f", r->mem / 1048576.0);
        if (r->predicted_ts > 0)
            snprintf(cell[13], 80, "%.1f (%+.1f%%)", r->predicted_ts, 100 * (r->predicted_ts / r->mean - 1));
        for (int c = 0; c < shown; c++)
            if (wide || !cols[c].wide) printf("| %s ", cell[c]);
        printf("|\n");
    }
    // the roofs the shares above are of, once per thread count
    bool said = false;
    for (int i = 0; i < n; i++) {
        bool first = true;
        for (int k = 0; k < i && first; k++) first = rows[k].threads != rows[i].threads;
        double read = 0, int8 = 0;
        for (int k = i; k < n && first; k++)
            if (rows[k].threads == rows[i].threads) {
                if (rows[k].read_limit > 0) read = rows[k].read_limit;
                if (rows[k].int8_peak > 0) int8 = rows[k].int8_peak;
            }
        if (!first || (read <= 0 && int8 <= 0)) continue;
        printf("%sroofs on %d thread%s:", said ? "" : "\n", rows[i].threads, rows[i].threads > 1 ? "s" : "");
        if (read > 0) printf(" read %.2f GB/s (memory probe, median of 3)%s", read, int8 > 0 ? "," : "");
        if (int8 > 0) printf(" int8 peak %.1f GMAC/s (%s int8 probe, best of 7)", int8, rows[i].kernels);
        printf("\n");
        said = true;
    }
    if (said)
        printf("rate: a decode's bytes read a token (weights + KV cache) times t/s; a prompt's multiply-adds a\n"
               "token (matrix products and attention, counted from the model) times t/s.\n");
    // the GPU board's energy over each decode test's measured runs
    bool any_energy = false;
    for (int i = 0; i < n; i++) {
        const bench_row *r = &rows[i];
        if (!r->energy) continue;
        char test[48];
        test_name(r, test, sizeof test);
        printf("%sGPU energy, %s ngl=%d%s: %.1f W, %.3f J/token, the GPU busy %.0f%% of the time (NVML%s)\n",
               any_energy ? "" : "\n", test, r->gpu_layers, r->overflow != OVERFLOW_CPU ? " (overflow on the GPU)" : "",
               r->power.watts, r->j_token, 100 * r->power.busy,
               r->emulated ? ", the emulated board's power model" : r->power.counter ? ", energy counter" : ", power samples");
        any_energy = true;
    }
    if (any_energy) printf("The board's energy alone: the CPU's (its layers, the host's work) is not counted.\n");
    for (int i = 0; i < n; i++)
        if (rows[i].emulated) {
            printf("\nCUDA-emu: the GPU layers ran on the emulated device (emu/), on this CPU: their times are CPU "
                   "times, not GPU times.\n");
            break;
        }
}

static void print_json(const bench_row *rows, int n) {
    printf("[\n");
    for (int i = 0; i < n; i++) {
        const bench_row *r = &rows[i];
        char test[48];
        test_name(r, test, sizeof test);
        printf("  {\"model\": \"");
        for (const char *c = r->model; *c; c++) printf(*c == '"' || *c == '\\' ? "\\%c" : "%c", *c);
        printf("\", \"model_size\": %llu, \"model_params\": %llu, \"kernels\": \"%s\", \"n_threads\": %d, "
               "\"n_gpu_layers\": %d, \"n_cpu_moe\": %d, \"overflow\": \"%s\", \"type_k\": \"%s\", \"type_v\": \"%s\", \"test\": \"%s\", "
               "\"n_prompt\": %d, \"n_gen\": %d, \"n_depth\": %d, \"avg_ts\": %.4f, \"stddev_ts\": %.4f, "
               "\"samples_ts\": [",
               (unsigned long long)r->size, (unsigned long long)r->params, r->kernels, r->threads, r->gpu_layers,
               r->n_cpu_moe, plan_overflow_name[r->overflow], plan_kv_type_name[r->cache.k], plan_kv_type_name[r->cache.v], test,
               r->n_prompt, r->n_gen, r->n_depth, r->mean, r->sd);
        for (int k = 0; k < r->reps; k++) printf(k ? ", %.4f" : "%.4f", r->ts[k]);
        printf("], \"weight_bytes\": %.0f, \"kv_bytes\": %.0f, \"gbps\": %.4f, \"read_gbps\": %.4f, "
               "\"host_bytes\": %llu, \"host_predicted\": %llu, \"gpu_bytes\": %llu, \"gpu_predicted\": %llu, "
               "\"gpu_prefill\": \"%s\", \"gpu_emulated\": %s, \"predicted_ts\": %.4f, \"macs_per_token\": %.0f, "
               "\"int8_peak_gmacs\": %.3f, \"segments_us\": {\"gpu\": %.3f, \"cpu\": %.3f, \"cpu_attention\": %.3f, \"head\": %.3f}, "
               "\"gpu_watts\": %.3f, \"gpu_j_per_token\": %.5f, \"gpu_busy\": %.4f}%s\n",
               r->weight_bytes, r->kv_bytes, r->gbs, r->read_limit, (unsigned long long)r->mem,
               (unsigned long long)r->mem_pred, (unsigned long long)r->gpu_mem, (unsigned long long)r->gpu_mem_pred,
               gpu_prefill_name[r->gpu_prefill], r->emulated ? "true" : "false", r->predicted_ts, r->macs, r->int8_peak,
               r->segment_us[SEG_GPU],
               r->segment_us[SEG_CPU], r->cpu_attention_us,
               r->segment_us[SEG_HEAD], r->energy ? r->power.watts : 0, r->j_token, r->energy ? r->power.busy : 0,
               i + 1 < n ? "," : "");
    }
    printf("]\n");
}

static void print_csv(const bench_row *rows, int n) {
    printf("model,model_size,model_params,kernels,n_threads,n_gpu_layers,n_cpu_moe,overflow,type_k,type_v,test,n_prompt,"
           "n_gen,n_depth,avg_ts,stddev_ts,weight_bytes,kv_bytes,gbps,read_gbps,host_bytes,host_predicted,gpu_bytes,"
           "gpu_predicted,gpu_prefill,gpu_emulated,predicted_ts,macs_per_token,int8_peak_gmacs\n");
    for (int i = 0; i < n; i++) {
        const bench_row *r = &rows[i];
        char test[48];
        test_name(r, test, sizeof test);
        printf("\"%s\",%llu,%llu,%s,%d,%d,%d,%s,%s,%s,\"%s\",%d,%d,%d,%.4f,%.4f,%.0f,%.0f,%.4f,%.4f,%llu,%llu,%llu,%llu,"
               "%s,%d,%.4f,%.0f,%.3f\n",
               r->model, (unsigned long long)r->size, (unsigned long long)r->params, r->kernels, r->threads,
               r->gpu_layers, r->n_cpu_moe, plan_overflow_name[r->overflow], plan_kv_type_name[r->cache.k],
               plan_kv_type_name[r->cache.v], test, r->n_prompt, r->n_gen, r->n_depth, r->mean, r->sd, r->weight_bytes,
               r->kv_bytes, r->gbs, r->read_limit, (unsigned long long)r->mem, (unsigned long long)r->mem_pred,
               (unsigned long long)r->gpu_mem, (unsigned long long)r->gpu_mem_pred, gpu_prefill_name[r->gpu_prefill],
               r->emulated, r->predicted_ts, r->macs, r->int8_peak);
    }
}

// A roof's measurement on a pool of t threads (NULL for one): > 0, or <= 0
// with a message in e.
typedef double (*roof_fn)(seam_pool *pool, seam_error *e);

// The read bandwidth: 256 MiB (8 times the largest last-level caches seam meets), the median of 3.
static double read_roof(seam_pool *pool, seam_error *e) {
    membw_result r;
    return membw_measure(pool, 256u << 20, 3, &r, e) == 0 ? membw_read_limit(&r) : 0;
}

// The int8 peak (cpu_speed_int8_peak).
static double int8_roof(seam_pool *pool, seam_error *e) {
    const double g = cpu_speed_int8_peak(pool);
    if (g <= 0) seam_fail(e, "the %s kernels have no int8 probe", cpu_kernels_get()->name);
    return g;
}

// A roof on t threads, measured once per thread count (cache[t]: 0 not yet,
// -1 not measurable); 0 when it cannot be measured. `what` names it in the
// message that says so.
static double roof_for(roof_fn measure, const char *what, int threads, double cache[257]) {
    if (cache[threads] != 0) return cache[threads] > 0 ? cache[threads] : 0;
    seam_error e = {{0}};
    seam_pool *pool = threads > 1 ? pool_create(threads, &e) : NULL;
    const double v = threads == 1 || pool ? measure(pool, &e) : 0;
    cache[threads] = v > 0 ? v : -1;
    if (v <= 0) fprintf(stderr, "seam bench: no %s for %d threads: %s\n", what, threads, e.msg);
    pool_destroy(pool);
    return cache[threads] > 0 ? cache[threads] : 0;
}

// The roofs measured so far, by thread count.
typedef struct {
    double read[257], int8[257];
} bench_roofs;

// One combination of the swept values.
typedef struct {
    int threads, ngl, n_cpu_moe;
    seam_overflow overflow;
    seam_kv_config cache;
} bench_config;

static int cmp_int(const void *a, const void *b) { return (*(const int *)a > *(const int *)b) - (*(const int *)a < *(const int *)b); }

// Every test of one model under one configuration, appended to rows; base:
// the process's memory before the model's tensors came in.
static int bench_one(const bench_options *o, const char *path, const seam_model *m, const bench_config *cf,
                     const hw_profile *hw, const seam_memstat *base, bench_row *rows, int *n_rows, int max_rows,
                     bench_roofs *roofs, timeline_trace *trace) {
    seam_error e = {{0}};
    seam_plan plan;
    const int widest = list_max(&o->prompt) > list_max(&o->gen) ? list_max(&o->prompt) : list_max(&o->gen);
    int depths[MAX_LIST];  // ascending: each fill continues the last
    memcpy(depths, o->depth.v, sizeof(int) * (size_t)o->depth.n);
    qsort(depths, (size_t)o->depth.n, sizeof *depths, cmp_int);
    const int n_ctx = depths[o->depth.n - 1] + (widest > 0 ? widest : 1);
    seam_plan_request req = {.gpu_layers = cf->ngl, .head = -1, .overflow = cf->overflow, .n_ctx = n_ctx,
                             .cache = cf->cache, .gpu_budget = gpu_free_bytes(), .gpu_prefill = o->gpu_prefill,
                             .n_cpu_moe = cf->n_cpu_moe};
    char what[192], ngl[16] = "auto";
    if (cf->ngl >= 0) snprintf(ngl, sizeof ngl, "%d", cf->ngl);
    snprintf(what, sizeof what, "%s t=%d ngl=%s%s%.0d ctk=%s ctv=%s", path, cf->threads, ngl,
             cf->n_cpu_moe ? " n-cpu-moe=" : "", cf->n_cpu_moe, plan_kv_type_name[cf->cache.k],
             plan_kv_type_name[cf->cache.v]);
    // -ngl auto with a profile: the fit's fastest placement of the GPU layers and head, the swept
    // experts and overflow kept
    fit_result fit;
    if (cf->ngl < 0 && hw && req.gpu_budget) {
        if (fit_search(m, &req, (fit_open){.head = true}, hw, cf->threads, FIT_SPEED, &fit, &e))
            return fprintf(stderr, "seam bench: %s: %s\n", what, e.msg), -1;
        req = fit_request(&fit, &req);
        fit_free(&fit);
    }
    if (plan_make(&plan, m, &req, &e)) return fprintf(stderr, "seam bench: %s: %s\n", what, e.msg), -1;
    if (cf->ngl < 0)
        fprintf(stderr, "seam bench: %s: -ngl auto placed %d layers on the GPU, the head on the %s (%s)\n", what,
                plan.gpu_layers, plan.head == DEV_GPU ? "GPU" : "CPU",
                !req.gpu_budget ? "no CUDA device" : hw ? "the fastest predicted that fits" : "as many as fit");
    const bool gpu = plan_gpu_computed_layers(&plan) > 0 || plan.head == DEV_GPU;
    bool emulated;
    gpu_device_name(&emulated);
    const seam_mem_prediction pred = memstat_predict(&plan, m, cf->threads);
    seam_engine eng;
    int *ids = malloc(sizeof(int) * (size_t)n_ctx);
    if (!ids || engine_init_kv(&eng, m, n_ctx, cf->cache, &e) || engine_set_threads(&eng, cf->threads, &e) ||
        engine_place(&eng, &plan, !o->no_graph, &e)) {
        fprintf(stderr, "seam bench: %s: %s\n", what, ids ? e.msg : "out of memory");
        if (ids) engine_free(&eng);
        free(ids);
        return -1;
    }
    engine_time_layers(&eng, o->time_layers);
    uint64_t params = 0;
    for (uint64_t i = 0; i < m->file.n_tensors; i++) params += m->file.tensors[i].n_elems;
    const bool progress = isatty(STDERR_FILENO);  // a line rewritten per run on a terminal only
    int rc = 0, filled = 0;
    for (int di = 0; di < o->depth.n && rc == 0; di++) {
        const int depth = depths[di];
        if (depth > filled) {  // the cache up to this depth: the positions past the last fill
            fprintf(stderr, "seam bench: %s: filling the KV cache to %d positions\n", what, depth);
            test_tokens(ids, depth - filled, m->cfg.n_vocab, (uint64_t)depth * 3 + 1);
            float *logits;
            const double t0 = seam_now();
            if (engine_prefill(&eng, ids, depth - filled, filled, &logits, &e)) {
                fprintf(stderr, "seam bench: %s: %s\n", what, e.msg);
                rc = -1;
                break;
            }
            const double took = seam_now() - t0;
            fprintf(stderr, "seam bench: %s: filled %d positions in %.1f s (%.1f tok/s)\n", what, depth - filled, took,
                    (depth - filled) / took);
            filled = depth;
        }
        for (int kind = 0; kind < 2 && rc == 0; kind++) {
            const int_list *sizes = kind == 0 ? &o->prompt : &o->gen;
            for (int s = 0; s < sizes->n && rc == 0; s++) {
                if (sizes->v[s] == 0) continue;
                if (*n_rows == max_rows) {
                    fprintf(stderr, "seam bench: too many tests\n");
                    rc = -1;
                    break;
                }
                bench_row *row = &rows[(*n_rows)++];
                *row = (bench_row){.model = path, .size = m->file.size, .params = params,
                                   .kernels = cpu_kernels_get()->name, .threads = cf->threads, .gpu_layers = plan.gpu_layers,
                                   .n_cpu_moe = cf->n_cpu_moe,
                                   .overflow = cf->overflow, .cache = cf->cache, .gpu_prefill = o->gpu_prefill,
                                   .emulated = gpu && emulated, .n_prompt = kind == 0 ? sizes->v[s] : 0,
                                   .n_gen = kind == 1 ? sizes->v[s] : 0, .n_depth = depth};
                test_tokens(ids, sizes->v[s], m->cfg.n_vocab, (uint64_t)sizes->v[s] * 2 + (uint64_t)kind);
                char test[48];
                test_name(row, test, sizeof test);
                // the timeline holds one repetition at a time (its reserve is one run's)
                const seam_timeline_mark start = timeline_mark(&eng.timeline);
                gpu_energy *meter = NULL;
                for (int r = -1; r < o->reps && rc == 0; r++) {  // r = -1: the warm-up
                    double sec;
                    timeline_rewind(&eng.timeline, start);
                    const char *why;
                    if (r == 0 && gpu && row->n_gen) meter = gpu_energy_start(&why);  // the measured runs
                    if (run_once(&eng, row, ids, &sec, &e)) {
                        fprintf(stderr, "seam bench: %s: %s\n", what, e.msg);
                        rc = -1;
                        break;
                    }
                    if (r >= 0) row->ts[row->reps++] = (row->n_prompt + row->n_gen) / sec;
                    if (r >= 0 && row->n_gen) segment_means(&eng.timeline, start.tokens, o->reps, row);
                    if (progress)
                        fprintf(stderr, "\rseam bench: %s %s: %s %d/%d  ", what, test, r < 0 ? "warm-up" : "run", r + 1,
                                o->reps);
                }
                if (meter) {
                    gpu_energy_stop(meter, &row->power);
                    row->energy = rc == 0 && row->reps > 0;
                    row->j_token = row->energy ? row->power.joules / ((double)row->reps * row->n_gen) : 0;
                }
                if (rc) break;
                if (trace) {  // the last repetition, as a process of its own
                    char title[512];
                    const char *slash = strrchr(path, '/');
                    snprintf(title, sizeof title, "%s %s: t=%d ngl=%d%s%s", slash ? slash + 1 : path, test, cf->threads,
                             plan.gpu_layers, cf->overflow != OVERFLOW_CPU ? " overflow " : "",
                             cf->overflow != OVERFLOW_CPU ? plan_overflow_name[cf->overflow] : "");
                    if (timeline_trace_add(trace, &eng.timeline, start.tokens, title, &e)) {
                        fprintf(stderr, "seam bench: %s\n", e.msg);
                        rc = -1;
                        break;
                    }
                }
                if (row->n_gen) {
                    row->weight_bytes = (double)model_bytes_per_token(m);
                    for (int i = 0; i < row->n_gen; i++)
                        row->kv_bytes += (double)plan_kv_read_bytes(&m->cfg, cf->cache, 0, m->cfg.n_layers, depth + i);
                    row->kv_bytes /= row->n_gen;
                    if (o->time_layers) {  // the last repetition's layers
                        fprintf(stderr, "seam bench: %s %s:\n", what, test);
                        timeline_layer_report(&eng.timeline, start.tokens, m->cfg.n_layers, stderr);
                    }
                    row->read_limit = gpu ? 0 : roof_for(read_roof, "bandwidth figure", cf->threads, roofs->read);
                    seam_prediction pr;
                    if (hw && predict_token(m, &plan, hw, cf->threads, depth + row->n_gen / 2 + 1, &pr, &e) == 0)
                        row->predicted_ts = pr.tok_s;
                    else if (hw)
                        fprintf(stderr, "seam bench: %s: no prediction: %s\n", what, e.msg);
                }
                if (row->n_prompt) {
                    row->macs = (double)plan_prompt_macs(m, row->n_prompt, depth) / row->n_prompt;
                    row->int8_peak = gpu ? 0 : roof_for(int8_roof, "int8 peak", cf->threads, roofs->int8);
                }
                finish_row(row);
                seam_memstat now;
                memstat_read(&now, &m->file);
                row->mem = memstat_host(base, &now);
                row->mem_pred = pred.host;
                row->gpu_mem = base->gpu_free > now.gpu_free ? base->gpu_free - now.gpu_free : 0;
                row->gpu_mem_pred = pred.gpu;
                char spread[32] = "";
                if (row->reps > 1) snprintf(spread, sizeof spread, " ± %.2f", row->sd);
                fprintf(stderr, "%sseam bench: %s %s: %.2f%s tok/s; memory %.1f MiB, predicted %.1f (%+.1f%%)\n",
                        progress ? "\r" : "", what, test, row->mean, spread, row->mem / 1048576.0,
                        row->mem_pred / 1048576.0, memstat_error(row->mem, row->mem_pred));
            }
        }
    }
    free(ids);
    engine_free(&eng);
    return rc;
}

int cmd_bench(int argc, char **argv) {
    bench_options o;
    if (parse_bench_options(argc, argv, &o)) return free(o.model_list), 2;
    const int max_rows = o.n_models * o.threads.n * o.gpu_layers.n * o.n_cpu_moe.n * o.overflow.n * o.cache_k.n *
                         o.cache_v.n * o.depth.n * (o.prompt.n + o.gen.n);
    bench_row *rows = calloc((size_t)max_rows, sizeof *rows);
    if (!rows) return free(o.model_list), fprintf(stderr, "seam bench: out of memory for %d results\n", max_rows), 1;
    // every model of the list opens before any is timed: a missing file
    // fails the command before the first model's tests take minutes
    for (int mi = 0; mi < o.n_models; mi++) {
        gguf_file f;
        seam_error e = {{0}};
        if (gguf_open(&f, o.models[mi], &e)) {
            fprintf(stderr, "seam bench: %s\n", e.msg);
            free(rows), free(o.model_list);
            return 2;
        }
        gguf_close(&f);
    }
    static bench_roofs roofs;
    int n_rows = 0, rc = 0;
    timeline_trace trace;
    seam_error terr = {{0}};
    char meta[256];
    snprintf(meta, sizeof meta, "{\"seam\": \"%s\", \"command\": \"bench\", \"cpu_kernels\": \"%s\", "
             "\"layout\": \"a process a test, its last repetition\"}", SEAM_VERSION, cpu_kernels_get()->name);
    if (o.trace && timeline_trace_open(&trace, o.trace, meta, &terr)) {
        fprintf(stderr, "seam bench: %s\n", terr.msg);
        free(rows), free(o.model_list);
        return 2;
    }
    // a configuration that fails is reported and skipped, so that a sweep
    // still gives every row it can; the exit status says something failed
    for (int mi = 0; mi < o.n_models; mi++) {
        seam_model m;
        seam_error e = {{0}};
        if (model_load(&m, o.models[mi], &e)) {
            fprintf(stderr, "seam bench: %s\n", e.msg);
            rc = 1;
            continue;
        }
        // the profile first: measuring 'this' machine must not count in the tests' memory
        hw_profile hw;
        if (o.hw && (!strcmp(o.hw, "this") ? hw_measure_cpu(&hw, list_max(&o.threads), &m.cfg, &e)
                                           : hw_load(&hw, o.hw, &e))) {
            fprintf(stderr, "seam bench: %s\n", e.msg);
            model_free(&m);
            rc = 1;
            continue;
        }
        seam_memstat base;
        memstat_read(&base, NULL);
        gguf_prefetch(&m.file);
        for (int ti = 0; ti < o.threads.n; ti++)
            for (int gi = 0; gi < o.gpu_layers.n; gi++)
                for (int ei = 0; ei < o.n_cpu_moe.n; ei++)
                    for (int fi = 0; fi < o.overflow.n; fi++)
                        for (int ki = 0; ki < o.cache_k.n; ki++)
                            for (int vi = 0; vi < o.cache_v.n; vi++) {
                                const bench_config cf = {
                                    .threads = o.threads.v[ti], .ngl = o.gpu_layers.v[gi],
                                    .n_cpu_moe = o.n_cpu_moe.v[ei], .overflow = (seam_overflow)o.overflow.v[fi],
                                    .cache = {.k = (seam_kv_type)o.cache_k.v[ki], .v = (seam_kv_type)o.cache_v.v[vi]},
                                };
                                const int before = n_rows;
                                if (bench_one(&o, o.models[mi], &m, &cf, o.hw ? &hw : NULL, &base, rows, &n_rows,
                                              max_rows, &roofs, o.trace ? &trace : NULL)) {
                                    rc = 1;
                                    n_rows = before;  // no half-measured rows
                                }
                            }
        model_free(&m);
    }
    if (o.trace && timeline_trace_close(&trace, &terr)) {
        fprintf(stderr, "seam bench: %s\n", terr.msg);
        rc = 1;
    }
    if (o.format == OUT_MD) print_md(rows, n_rows, o.wide);
    else if (o.format == OUT_JSON) print_json(rows, n_rows);
    else print_csv(rows, n_rows);
    free(rows);
    free(o.model_list);
    return rc;
}
