// bench.c — `seam bench`: llama-bench's tests on seam's engine.
//
//   seam bench -m FILE[,FILE..] [-p 512] [-n 128] [-t N,..] [-ngl N,..] [--overflow cpu,mapped,stream]
//              [-r 5] [-o md|json|csv]
//
// For every model and every combination of the swept values (comma lists,
// or ranges first-last[+step]), one engine runs:
//   ppP  a P-token prompt through engine_prefill: P / seconds
//   tgN  N tokens decoded one at a time from position 0: N / seconds, and
//        the weight bytes those tokens read per second, against the read
//        bandwidth the memory probe measures on the same threads
// each test once to warm up and then -r times; the table gives the mean
// and standard deviation of the repetitions' tokens per second. Token ids
// are fixed pseudo-random ones (the speed does not depend on them). The
// results go to stdout; progress to stderr.
#include "bench.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cpu/kernels.h"
#include "cpu/membw.h"
#include "engine.h"
#include "gpu_segment.h"
#include "model.h"
#include "plan.h"

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
    int_list prompt, gen, threads, gpu_layers, overflow;
    int reps;
    out_format format;
    bool no_graph;
} bench_options;

// One line of the report: a test of one model under one configuration.
typedef struct {
    const char *model;
    uint64_t size, params;
    const char *kernels;
    int threads, gpu_layers;
    seam_overflow overflow;
    int n_prompt, n_gen;  // one of them is 0
    double ts[MAX_REPS];  // tokens per second of each repetition
    int reps;
    double mean, sd;      // of ts
    double gbs;           // tg: weight bytes read per second (mean)
    double read_limit;    // tg: the memory probe's read GB/s on these threads (0: not measured)
} bench_row;

static void usage(FILE *f) {
    fprintf(f,
            "usage: seam bench -m FILE[,FILE...] [options]\n"
            "\n"
            "  -m, --model FILES        GGUF models, comma-separated (required)\n"
            "  -p, --n-prompt LIST      prompt lengths to test, 0 = none [512]\n"
            "  -n, --n-gen LIST         generation lengths to test, 0 = none [128]\n"
            "  -t, --threads LIST       CPU threads [all cores]\n"
            "  -ngl, --gpu-layers LIST  layers on the GPU [0]\n"
            "      --overflow MODES     how the rest run: cpu, mapped, stream, comma-separated [cpu]\n"
            "  -r, --repetitions N      measured runs of each test, after one warm-up [5]\n"
            "  -o, --output FORMAT      md, json or csv [md]\n"
            "      --no-graph           launch the GPU layers op by op [one CUDA graph]\n"
            "  -h, --help               this help\n"
            "\n"
            "LIST: values separated by commas, or a range first-last or first-last+step\n"
            "(e.g. -t 1,2  -p 128,512  -ngl 0-28+4). Every combination is run.\n");
}

static int parse_list(const char *flag, const char *s, int lo, int hi, int_list *out) {
    seam_error e;
    if (seam_parse_int_list(flag, s, lo, hi, out->v, MAX_LIST, &out->n, &e))
        return fprintf(stderr, "seam bench: %s\n", e.msg), -1;
    return 0;
}

static int parse_bench_options(int argc, char **argv, bench_options *o) {
    const long cores = sysconf(_SC_NPROCESSORS_ONLN);
    *o = (bench_options){.reps = 5};
    o->prompt = (int_list){{512}, 1};
    o->gen = (int_list){{128}, 1};
    o->threads = (int_list){{cores > 0 ? (int)cores : 1}, 1};
    o->gpu_layers = (int_list){{0}, 1};
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
        } else if (IS("-t") || IS("--threads")) {
            if (parse_list(a, v, 1, 256, &o->threads)) return -1;
            i++;
        } else if (IS("-ngl") || IS("--gpu-layers")) {
            if (parse_list(a, v, 0, SEAM_MAX_LAYERS, &o->gpu_layers)) return -1;
            i++;
        } else if (IS("--overflow")) {
            o->overflow.n = 0;
            for (const char *m = v ? v : "";; m++) {  // m: a name, up to the next comma
                const size_t len = strcspn(m, ",");
                const int k = plan_overflow_find(m, len);
                if (k < 0 || o->overflow.n == MAX_LIST)
                    return fprintf(stderr, "seam bench: --overflow wants cpu, mapped, stream (got '%s')\n", v ? v : ""),
                           -1;
                o->overflow.v[o->overflow.n++] = k;
                m += len;
                if (!*m) break;
            }
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

// Seconds for one run of the test: the prompt's prefill, or n_gen decodes.
static int run_once(seam_engine *eng, const bench_row *row, const int *ids, double *seconds, seam_error *e) {
    float *logits;
    const double t0 = seam_now();
    if (row->n_prompt) {
        if (engine_prefill(eng, ids, row->n_prompt, 0, &logits, e)) return -1;
    } else {
        for (int i = 0; i < row->n_gen; i++)
            if (engine_forward(eng, ids[i], i, &logits, e)) return -1;
    }
    *seconds = seam_now() - t0;
    return 0;
}

static void finish_row(bench_row *row, uint64_t bytes_per_token) {
    double sum = 0, sq = 0;
    for (int r = 0; r < row->reps; r++) sum += row->ts[r];
    row->mean = sum / row->reps;
    for (int r = 0; r < row->reps; r++) sq += (row->ts[r] - row->mean) * (row->ts[r] - row->mean);
    row->sd = row->reps > 1 ? sqrt(sq / (row->reps - 1)) : 0.0;
    row->gbs = row->n_gen ? row->mean * (double)bytes_per_token / 1e9 : 0.0;
}

static void test_name(const bench_row *r, char *buf, size_t len) {
    if (r->n_prompt) snprintf(buf, len, "pp%d", r->n_prompt);
    else snprintf(buf, len, "tg%d", r->n_gen);
}

static void print_md(const bench_row *rows, int n) {
    printf("| model | size | params | backend | threads | ngl | test | t/s | GB/s | %% of read bw |\n");
    printf("| --- | ---: | ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: |\n");
    for (int i = 0; i < n; i++) {
        const bench_row *r = &rows[i];
        char test[32], gbs[32] = "", pct[32] = "";
        test_name(r, test, sizeof test);
        if (r->n_gen) snprintf(gbs, sizeof gbs, "%.2f", r->gbs);
        if (r->n_gen && r->read_limit > 0) snprintf(pct, sizeof pct, "%.0f%%", 100 * r->gbs / r->read_limit);
        char backend[64];
        if (r->overflow != OVERFLOW_CPU) snprintf(backend, sizeof backend, "CUDA, rest %s", plan_overflow_name[r->overflow]);
        else snprintf(backend, sizeof backend, "%sCPU %s", r->gpu_layers ? "CUDA + " : "", r->kernels);
        printf("| %s | %.2f MiB | %.2f B | %s | %d | %d | %s | %.2f ± %.2f | %s | %s |\n", r->model,
               r->size / 1048576.0, r->params / 1e9, backend, r->threads, r->gpu_layers, test, r->mean, r->sd, gbs, pct);
    }
}

static void print_json(const bench_row *rows, int n) {
    printf("[\n");
    for (int i = 0; i < n; i++) {
        const bench_row *r = &rows[i];
        char test[32];
        test_name(r, test, sizeof test);
        printf("  {\"model\": \"");
        for (const char *c = r->model; *c; c++) printf(*c == '"' || *c == '\\' ? "\\%c" : "%c", *c);
        printf("\", \"model_size\": %llu, \"model_params\": %llu, \"kernels\": \"%s\", \"n_threads\": %d, "
               "\"n_gpu_layers\": %d, \"overflow\": \"%s\", \"test\": \"%s\", \"n_prompt\": %d, \"n_gen\": %d, "
               "\"avg_ts\": %.4f, \"stddev_ts\": %.4f, \"samples_ts\": [",
               (unsigned long long)r->size, (unsigned long long)r->params, r->kernels, r->threads, r->gpu_layers,
               plan_overflow_name[r->overflow], test, r->n_prompt, r->n_gen, r->mean, r->sd);
        for (int k = 0; k < r->reps; k++) printf(k ? ", %.4f" : "%.4f", r->ts[k]);
        printf("], \"gbps\": %.4f, \"read_gbps\": %.4f}%s\n", r->gbs, r->read_limit, i + 1 < n ? "," : "");
    }
    printf("]\n");
}

static void print_csv(const bench_row *rows, int n) {
    printf("model,model_size,model_params,kernels,n_threads,n_gpu_layers,overflow,test,n_prompt,n_gen,avg_ts,stddev_ts,"
           "gbps,read_gbps\n");
    for (int i = 0; i < n; i++) {
        const bench_row *r = &rows[i];
        char test[32];
        test_name(r, test, sizeof test);
        printf("\"%s\",%llu,%llu,%s,%d,%d,%s,%s,%d,%d,%.4f,%.4f,%.4f,%.4f\n", r->model, (unsigned long long)r->size,
               (unsigned long long)r->params, r->kernels, r->threads, r->gpu_layers, plan_overflow_name[r->overflow],
               test, r->n_prompt, r->n_gen, r->mean, r->sd, r->gbs, r->read_limit);
    }
}

// The read bandwidth on t threads (0 when it cannot be measured), once per
// thread count: 256 MiB (8 times the largest last-level caches seam meets), the median of 3.
static double read_limit_for(int threads, double cache[257]) {
    if (cache[threads] != 0) return cache[threads] > 0 ? cache[threads] : 0;
    seam_error e = {{0}};
    seam_pool *pool = threads > 1 ? pool_create(threads, &e) : NULL;
    membw_result r;
    cache[threads] = -1;
    if ((threads == 1 || pool) && membw_measure(pool, 256u << 20, 3, &r, &e) == 0) cache[threads] = membw_read_limit(&r);
    else fprintf(stderr, "seam bench: no bandwidth figure for %d threads: %s\n", threads, e.msg);
    pool_destroy(pool);
    return cache[threads] > 0 ? cache[threads] : 0;
}

// Every test of one model under one configuration, appended to rows.
static int bench_config(const bench_options *o, const char *path, const seam_model *m, int threads, int ngl,
                        seam_overflow overflow, bench_row *rows, int *n_rows, int max_rows, double bw_cache[257]) {
    seam_error e = {{0}};
    seam_plan plan;
    seam_plan_request req = {.gpu_layers = ngl, .head = -1, .overflow = overflow, .n_ctx = 0,
                             .gpu_budget = gpu_free_bytes()};
    const int n_ctx = list_max(&o->prompt) > list_max(&o->gen) ? list_max(&o->prompt) : list_max(&o->gen);
    req.n_ctx = n_ctx > 0 ? n_ctx : 1;
    seam_engine eng;
    if (plan_make(&plan, m, &req, &e)) return fprintf(stderr, "seam bench: %s, -ngl %d: %s\n", path, ngl, e.msg), -1;
    const bool gpu = plan_gpu_computed_layers(&plan) > 0 || plan.head == DEV_GPU;
    if (engine_init(&eng, m, req.n_ctx, &e) || engine_set_threads(&eng, threads, &e) ||
        engine_place(&eng, &plan, !o->no_graph, &e)) {
        fprintf(stderr, "seam bench: %s: %s\n", path, e.msg);
        engine_free(&eng);
        return -1;
    }
    int *ids = malloc(sizeof(int) * (size_t)req.n_ctx);
    if (!ids) {
        engine_free(&eng);
        return fprintf(stderr, "seam bench: out of memory\n"), -1;
    }
    uint64_t params = 0;
    for (uint64_t i = 0; i < m->file.n_tensors; i++) params += m->file.tensors[i].n_elems;
    const bool progress = isatty(STDERR_FILENO);  // a line rewritten per run on a terminal only
    int rc = 0;
    for (int kind = 0; kind < 2 && rc == 0; kind++) {
        const int_list *sizes = kind == 0 ? &o->prompt : &o->gen;
        for (int s = 0; s < sizes->n && rc == 0; s++) {
            if (sizes->v[s] == 0) continue;
            if (*n_rows == max_rows) return free(ids), engine_free(&eng), fprintf(stderr, "seam bench: too many tests\n"), -1;
            bench_row *row = &rows[(*n_rows)++];
            *row = (bench_row){.model = path, .size = m->file.size, .params = params,
                               .kernels = cpu_kernels_get()->name, .threads = threads, .gpu_layers = ngl, .overflow = overflow,
                               .n_prompt = kind == 0 ? sizes->v[s] : 0, .n_gen = kind == 1 ? sizes->v[s] : 0};
            test_tokens(ids, sizes->v[s], m->cfg.n_vocab, (uint64_t)sizes->v[s] * 2 + (uint64_t)kind);
            char test[32];
            test_name(row, test, sizeof test);
            for (int r = -1; r < o->reps && rc == 0; r++) {  // r = -1: the warm-up
                double sec;
                if (run_once(&eng, row, ids, &sec, &e)) {
                    fprintf(stderr, "seam bench: %s: %s\n", path, e.msg);
                    rc = -1;
                    break;
                }
                if (r >= 0) row->ts[row->reps++] = (row->n_prompt + row->n_gen) / sec;
                if (progress)
                    fprintf(stderr, "\rseam bench: %s t=%d ngl=%d %s: %s %d/%d  ", path, threads, ngl, test,
                            r < 0 ? "warm-up" : "run", r + 1, o->reps);
            }
            if (rc) break;
            finish_row(row, model_bytes_per_token(m));
            if (row->n_gen) row->read_limit = gpu ? 0 : read_limit_for(threads, bw_cache);
            fprintf(stderr, "%sseam bench: %s t=%d ngl=%d %s: %.2f ± %.2f tok/s\n", progress ? "\r" : "", path, threads,
                    ngl, test, row->mean, row->sd);
        }
    }
    free(ids);
    engine_free(&eng);
    return rc;
}

int cmd_bench(int argc, char **argv) {
    bench_options o;
    if (parse_bench_options(argc, argv, &o)) return free(o.model_list), 2;
    const int max_rows = o.n_models * o.threads.n * o.gpu_layers.n * o.overflow.n * (o.prompt.n + o.gen.n);
    bench_row *rows = calloc((size_t)max_rows, sizeof *rows);
    if (!rows) return free(o.model_list), fprintf(stderr, "seam bench: out of memory for %d results\n", max_rows), 1;
    double bw_cache[257] = {0};
    int n_rows = 0, rc = 0;
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
        for (int ti = 0; ti < o.threads.n; ti++)
            for (int gi = 0; gi < o.gpu_layers.n; gi++)
                for (int fi = 0; fi < o.overflow.n; fi++) {
                    const int before = n_rows;
                    if (bench_config(&o, o.models[mi], &m, o.threads.v[ti], o.gpu_layers.v[gi],
                                     (seam_overflow)o.overflow.v[fi], rows, &n_rows, max_rows, bw_cache)) {
                        rc = 1;
                        n_rows = before;  // no half-measured rows
                    }
                }
        model_free(&m);
    }
    if (o.format == OUT_MD) print_md(rows, n_rows);
    else if (o.format == OUT_JSON) print_json(rows, n_rows);
    else print_csv(rows, n_rows);
    free(rows);
    free(o.model_list);
    return rc;
}
