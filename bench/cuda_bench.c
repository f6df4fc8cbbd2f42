// cuda_bench.c — the CUDA workbench: how close the matvec comes to memory
// bandwidth, and what one token's attention costs, on Qwen3-0.6B's shapes.
//
//   seam-cuda-bench [-r REPS] [-l LAYERS] [-v VOCAB]
//
// matvec   the seven matrices of a layer (n_embd 1024, 16 q heads and 8 KV
//          heads of 128, n_ff 3072) as Q4_K, LAYERS (28) distinct copies of
//          each so that L2 (50 MB) cannot serve them, run as one CUDA graph
//          per shape, then all of them as one graph (the matvecs of a token);
//          and the output head (VOCAB = 151936 x 1024) as Q6_K (what a
//          Q4_K_M file holds), Q4_K and Q8_0. The activation is quantised
//          once per row length, outside the timing: these are the
//          weight-streaming kernels alone. Before it is timed, every graph's
//          output is checked against the C reference (seam_vec_dot) on a
//          few rows: a wrong result is an error, not a figure.
// attention one token over positions 0..pos of a 4096-position cache, 16
//          heads on 8 KV heads of 128, LAYERS layers as one graph.
// Figures: the median of REPS graph replays (after warm-up), timed by CUDA
// events; GB/s are weight (or K and V) bytes per second, % against the peak
// seam_cuda_device_info derives from the memory clock and bus width (an
// H200: 4.8 TB/s; a device-to-device copy reaches about 4.3 TB/s there).
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "numeric/quant.h"
#include "seam_cuda.h"

#define CHECK(call)                                                       \
    do {                                                                  \
        if ((call) != 0) {                                                \
            fprintf(stderr, "seam-cuda-bench: %s\n  (%s)\n", err.msg, #call); \
            exit(1);                                                      \
        }                                                                 \
    } while (0)

static seam_error err;
static seam_cuda_stream *stream;
static double peak_gbs;
static int reps = 50, n_layers = 28, vocab = 151936;

static uint64_t rng_state = 42;
static uint64_t rng_next(void) {  // splitmix64
    uint64_t z = (rng_state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

// A matrix of random blocks whose f16 scales are small and finite, on the
// device; *host keeps its first CHECKED rows for the check.
enum { CHECKED = 8 };

static void *device_matrix(uint32_t type, int64_t rows, int64_t cols, uint8_t **host) {
    const uint64_t row_bytes = ggml_row_bytes(type, (uint64_t)cols), bytes = row_bytes * (uint64_t)rows;
    uint8_t *w = malloc(bytes);
    for (uint64_t i = 0; i < bytes; i++) w[i] = (uint8_t)rng_next();
    uint32_t be, bb;
    ggml_type_layout(type, &be, &bb);
    const seam_f16 d = seam_f32_to_f16(0.01f);
    for (uint64_t b = 0; b < bytes / bb; b++) {
        memcpy(w + b * bb + (type == GGML_TYPE_Q6_K ? 208 : 0), &d, sizeof d);
        if (type == GGML_TYPE_Q4_K || type == GGML_TYPE_Q5_K) memcpy(w + b * bb + 2, &d, sizeof d);
    }
    void *dw;
    CHECK(seam_cuda_malloc(&dw, bytes, &err));
    CHECK(seam_cuda_upload(dw, w, bytes, &err));
    const int64_t kept = rows < CHECKED ? rows : CHECKED;
    *host = malloc(row_bytes * (uint64_t)kept);
    memcpy(*host, w, row_bytes * (uint64_t)kept);
    free(w);
    return dw;
}

// An activation of cols random values: x on the host, and act, x quantised
// for `type` on the device, which only a matrix of cols columns may read
// (its layout -- quants, then scales -- depends on cols).
typedef struct {
    int64_t cols;
    float *x;
    void *act;
} activation;

static activation device_act(uint32_t type, int64_t cols) {
    activation a = {cols, malloc(sizeof(float) * (size_t)cols), NULL};
    float *dx;
    for (int64_t i = 0; i < cols; i++) a.x[i] = (float)((int64_t)(rng_next() >> 40) - (1 << 23)) / (1 << 23);
    CHECK(seam_cuda_malloc((void **)&dx, sizeof(float) * (size_t)cols, &err));
    CHECK(seam_cuda_malloc(&a.act, seam_cuda_matvec_scratch_bytes(cols), &err));
    CHECK(seam_cuda_upload(dx, a.x, sizeof(float) * (size_t)cols, &err));
    CHECK(seam_cuda_quantize(stream, type, dx, a.act, cols, &err));
    CHECK(seam_cuda_stream_synchronize(stream, &err));
    seam_cuda_free(dx);
    return a;
}

static void free_act(activation *a) {
    seam_cuda_free(a->act);
    free(a->x);
}

// The first rows (at most CHECKED) of out (on the device), W's rows times a,
// against seam_vec_dot: the integer sums are exact, so they agree to the
// order of the float sums (test_cuda.c's matvec tolerance). Exits on a
// mismatch.
static void check_rows(const char *what, uint32_t type, const uint8_t *w, int64_t rows, const activation *a,
                       const float *out) {
    const int64_t n = rows < CHECKED ? rows : CHECKED, rb = (int64_t)ggml_row_bytes(type, (uint64_t)a->cols);
    float got[CHECKED], *wf = malloc(sizeof(float) * (size_t)a->cols), *af = malloc(sizeof(float) * (size_t)a->cols);
    void *act = malloc(ggml_row_bytes(seam_vec_dot_type(type), (uint64_t)a->cols));
    CHECK(seam_cuda_download(got, out, sizeof(float) * (size_t)n, &err));
    if (seam_quantize_activation(seam_vec_dot_type(type), a->x, act, a->cols) ||
        seam_dequantize_row(seam_vec_dot_type(type), act, af, a->cols)) {
        fprintf(stderr, "seam-cuda-bench: %s: no C reference for %s\n", what, ggml_type_name(type));
        exit(1);
    }
    for (int64_t r = 0; r < n; r++) {
        seam_dequantize_row(type, w + r * rb, wf, a->cols);
        double magnitude = 0;
        for (int64_t i = 0; i < a->cols; i++) magnitude += fabs((double)wf[i] * af[i]);
        const float want = seam_vec_dot(EXACT_ORDER_AVX2, type, w + r * rb, act, a->cols);  // to a tolerance: either order
        if (!(fabs(got[r] - want) <= 1e-5 * magnitude + 1e-6)) {
            fprintf(stderr, "seam-cuda-bench: %s: row %lld is %g, the C reference %g\n", what, (long long)r, got[r],
                    want);
            exit(1);
        }
    }
    free(wf), free(af), free(act);
}

static int cmp_float(const void *a, const void *b) {
    const float x = *(const float *)a, y = *(const float *)b;
    return (x > y) - (x < y);
}

// Median milliseconds of one replay of g.
static float time_graph(seam_cuda_graph *g) {
    seam_cuda_event *e0, *e1;
    CHECK(seam_cuda_event_create(&e0, &err));
    CHECK(seam_cuda_event_create(&e1, &err));
    for (int i = 0; i < 3; i++) CHECK(seam_cuda_graph_launch(g, stream, &err));  // warm-up
    float *ms = malloc(sizeof(float) * (size_t)reps);
    for (int r = 0; r < reps; r++) {
        CHECK(seam_cuda_event_record(e0, stream, &err));
        CHECK(seam_cuda_graph_launch(g, stream, &err));
        CHECK(seam_cuda_event_record(e1, stream, &err));
        CHECK(seam_cuda_event_elapsed_ms(e0, e1, &ms[r], &err));
    }
    qsort(ms, (size_t)reps, sizeof *ms, cmp_float);
    const float median = ms[reps / 2];
    free(ms);
    seam_cuda_event_destroy(e0), seam_cuda_event_destroy(e1);
    return median;
}

static void report(const char *what, double bytes, int launches, float ms) {
    const double gbs = bytes / (ms * 1e-3) / 1e9;
    char share[16] = "    -  ";  // the device reported no peak
    if (peak_gbs > 0) snprintf(share, sizeof share, "%5.1f %%", 100 * gbs / peak_gbs);
    printf("%-34s %9.1f MB %5d %10.1f us %8.1f GB/s %s\n", what, bytes / 1e6, launches, ms * 1e3, gbs, share);
}

typedef struct {
    const char *name;
    uint32_t type;
    int64_t rows, cols;
} shape;

// Captures `copies` matvecs of one shape (distinct weights, one activation).
static void bench_matvec(const shape *s, int copies) {
    void **w = malloc(sizeof(void *) * (size_t)copies);
    uint8_t **host = malloc(sizeof(uint8_t *) * (size_t)copies);
    for (int l = 0; l < copies; l++) w[l] = device_matrix(s->type, s->rows, s->cols, &host[l]);
    activation act = device_act(s->type, s->cols);
    float *out;
    CHECK(seam_cuda_malloc((void **)&out, sizeof(float) * (size_t)s->rows, &err));
    // once outside the capture: a kernel's first launch loads its module
    CHECK(seam_cuda_matvec_quantized(stream, s->type, w[0], s->rows, s->cols, act.act, out, &err));
    seam_cuda_graph *g;
    CHECK(seam_cuda_graph_begin(stream, &err));
    for (int l = 0; l < copies; l++)
        CHECK(seam_cuda_matvec_quantized(stream, s->type, w[l], s->rows, s->cols, act.act, out, &err));
    CHECK(seam_cuda_graph_end(stream, &g, &err));
    char what[64];
    snprintf(what, sizeof what, "%s %s %lldx%lld", s->name, ggml_type_name(s->type), (long long)s->rows, (long long)s->cols);
    CHECK(seam_cuda_graph_launch(g, stream, &err));
    check_rows(what, s->type, host[copies - 1], s->rows, &act, out);  // out holds the last copy's product
    report(what, (double)ggml_row_bytes(s->type, (uint64_t)s->cols) * (double)s->rows * copies, copies, time_graph(g));
    seam_cuda_graph_destroy(g);
    for (int l = 0; l < copies; l++) seam_cuda_free(w[l]), free(host[l]);
    free_act(&act);
    seam_cuda_free(out);
    free(w), free(host);
}

// All the matvecs of a token's layers, as one graph: each matrix reads the
// activation quantised for its own row length, and writes its own output.
static void bench_layers(const shape *layer, int n_shapes) {
    const int n = n_layers * n_shapes;
    void **w = malloc(sizeof(void *) * (size_t)n);
    uint8_t **host = malloc(sizeof(uint8_t *) * (size_t)n);
    activation *act = malloc(sizeof(activation) * (size_t)n_shapes);
    float **out = malloc(sizeof(float *) * (size_t)n_shapes);
    int *act_of = malloc(sizeof(int) * (size_t)n_shapes);  // the shape whose activation shape i reads
    double bytes = 0;
    for (int i = 0; i < n_shapes; i++) {
        act_of[i] = i;
        for (int j = 0; j < i; j++)
            if (layer[j].cols == layer[i].cols && layer[j].type == layer[i].type) act_of[i] = act_of[j];
        if (act_of[i] == i) act[i] = device_act(layer[i].type, layer[i].cols);
        CHECK(seam_cuda_malloc((void **)&out[i], sizeof(float) * (size_t)layer[i].rows, &err));
    }
    for (int i = 0; i < n; i++) {
        const shape *s = &layer[i % n_shapes];
        w[i] = device_matrix(s->type, s->rows, s->cols, &host[i]);
        bytes += (double)ggml_row_bytes(s->type, (uint64_t)s->cols) * (double)s->rows;
    }
    seam_cuda_graph *g;
    CHECK(seam_cuda_graph_begin(stream, &err));
    for (int i = 0; i < n; i++) {
        const int k = i % n_shapes;
        CHECK(seam_cuda_matvec_quantized(stream, layer[k].type, w[i], layer[k].rows, layer[k].cols,
                                         act[act_of[k]].act, out[k], &err));
    }
    CHECK(seam_cuda_graph_end(stream, &g, &err));
    char what[64];
    snprintf(what, sizeof what, "all %d layers' matvecs", n_layers);
    CHECK(seam_cuda_graph_launch(g, stream, &err));
    for (int k = 0; k < n_shapes; k++)  // each output holds the last layer's product
        check_rows(what, layer[k].type, host[n - n_shapes + k], layer[k].rows, &act[act_of[k]], out[k]);
    report(what, bytes, n, time_graph(g));
    seam_cuda_graph_destroy(g);
    for (int i = 0; i < n; i++) seam_cuda_free(w[i]), free(host[i]);
    for (int i = 0; i < n_shapes; i++) {
        if (act_of[i] == i) free_act(&act[i]);
        seam_cuda_free(out[i]);
    }
    free(w), free(host), free(act), free(out), free(act_of);
}

// One token's attention at position pos over n_layers layers' caches.
static void bench_attention(int pos) {
    enum { N_HEADS = 16, N_KV = 8, HEAD_DIM = 128, N_CTX = 4096 };
    const size_t cache_n = (size_t)N_CTX * N_KV * HEAD_DIM;
    uint16_t *host = malloc(sizeof(uint16_t) * cache_n);
    for (size_t i = 0; i < cache_n; i++) host[i] = seam_f32_to_f16((float)((int64_t)(rng_next() >> 40) - (1 << 23)) / (1 << 23));
    uint16_t **kv = malloc(sizeof(uint16_t *) * 2 * (size_t)n_layers);
    for (int i = 0; i < 2 * n_layers; i++) {
        CHECK(seam_cuda_malloc((void **)&kv[i], sizeof(uint16_t) * cache_n, &err));
        CHECK(seam_cuda_upload(kv[i], host, sizeof(uint16_t) * cache_n, &err));
    }
    float hq[N_HEADS * HEAD_DIM], *q, *out;
    for (int i = 0; i < N_HEADS * HEAD_DIM; i++) hq[i] = seam_f16_to_f32(host[i]);
    seam_cuda_step *step;
    const seam_cuda_step st = {0, pos};
    CHECK(seam_cuda_malloc((void **)&q, sizeof hq, &err));
    CHECK(seam_cuda_malloc((void **)&out, sizeof hq, &err));
    CHECK(seam_cuda_malloc((void **)&step, sizeof st, &err));
    CHECK(seam_cuda_upload(q, hq, sizeof hq, &err));
    CHECK(seam_cuda_upload(step, &st, sizeof st, &err));
    const seam_cuda_kv first = {kv[0], kv[1], GGML_TYPE_F16, GGML_TYPE_F16, N_CTX};  // once outside the capture
    CHECK(seam_cuda_attention(stream, out, q, &first, N_HEADS, N_KV, HEAD_DIM, N_CTX, 0, 0.088f, NULL, step, &err));
    seam_cuda_graph *g;
    CHECK(seam_cuda_graph_begin(stream, &err));
    for (int l = 0; l < n_layers; l++) {
        const seam_cuda_kv cache = {kv[2 * l], kv[2 * l + 1], GGML_TYPE_F16, GGML_TYPE_F16, N_CTX};
        CHECK(seam_cuda_attention(stream, out, q, &cache, N_HEADS, N_KV, HEAD_DIM, N_CTX, 0, 0.088f, NULL, step, &err));
    }
    CHECK(seam_cuda_graph_end(stream, &g, &err));
    char what[64];
    snprintf(what, sizeof what, "attention, %d positions", pos + 1);
    report(what, 2.0 * (pos + 1) * N_KV * HEAD_DIM * sizeof(uint16_t) * n_layers, n_layers, time_graph(g));
    seam_cuda_graph_destroy(g);
    for (int i = 0; i < 2 * n_layers; i++) seam_cuda_free(kv[i]);
    seam_cuda_free(q), seam_cuda_free(out), seam_cuda_free(step);
    free(kv), free(host);
}

// The bare crossing: cudaMemcpyAsync of pinned memory and a synchronise,
// host wall time, nothing else. The timeline's crossings (gpu_segment.c's
// crossing(): a drain, events around the copy, a synchronise, a record)
// are measured against this: the target is at most 1.2x.
static void bench_bare_copy(size_t bytes) {
    void *host, *dev;
    CHECK(seam_cuda_host_alloc(&host, bytes, &err));
    CHECK(seam_cuda_malloc(&dev, bytes, &err));
    memset(host, 0, bytes);
    float h2d[1000], d2h[1000];
    const int n = reps * 4 < 1000 ? reps * 4 : 1000;
    for (int r = 0; r < n; r++) {
        double t0 = seam_now();
        CHECK(seam_cuda_copy_h2d(stream, dev, host, bytes, &err));
        CHECK(seam_cuda_stream_synchronize(stream, &err));
        double t1 = seam_now();
        CHECK(seam_cuda_copy_d2h(stream, host, dev, bytes, &err));
        CHECK(seam_cuda_stream_synchronize(stream, &err));
        h2d[r] = (float)(1e6 * (t1 - t0));
        d2h[r] = (float)(1e6 * (seam_now() - t1));
    }
    qsort(h2d, (size_t)n, sizeof *h2d, cmp_float);
    qsort(d2h, (size_t)n, sizeof *d2h, cmp_float);
    printf("bare copy %8zu B: H2D median %7.1f us, D2H median %7.1f us (%d each)\n", bytes, h2d[n / 2], d2h[n / 2], n);
    seam_cuda_free(dev);
    seam_cuda_host_free(host);
}

int main(int argc, char **argv) {
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "-r")) reps = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "-l")) n_layers = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "-v")) vocab = atoi(argv[i + 1]);
        else reps = 0;
    }
    if (reps < 1 || n_layers < 1 || vocab < 1 || argc % 2 == 0) {
        fprintf(stderr, "usage: seam-cuda-bench [-r REPS] [-l LAYERS] [-v VOCAB]\n");
        return 2;
    }
    if (seam_cuda_device_count() == 0) {
        fprintf(stderr, "seam-cuda-bench: no CUDA device\n");
        return 1;
    }
    seam_cuda_info info;
    CHECK(seam_cuda_device_info(0, &info, &err));
    CHECK(seam_cuda_init(0, &err));
    CHECK(seam_cuda_stream_create(&stream, &err));
    peak_gbs = info.mem_bandwidth_gbs;
    printf("%s, sm_%d%d, %d SMs, peak %.0f GB/s; median of %d replays\n", info.name, info.major, info.minor,
           info.sm_count, peak_gbs, reps);
    if (info.emulated) printf("(the emulated device: these are CPU times, not GPU times)\n");
    printf("\n");
    printf("%-34s %12s %5s %13s %13s %7s\n", "", "bytes", "calls", "time", "rate", "peak");

    const shape layer[] = {
        {"attn_q", GGML_TYPE_Q4_K, 2048, 1024},     {"attn_k", GGML_TYPE_Q4_K, 1024, 1024},
        {"attn_v", GGML_TYPE_Q4_K, 1024, 1024},     {"attn_output", GGML_TYPE_Q4_K, 1024, 2048},
        {"ffn_gate", GGML_TYPE_Q4_K, 3072, 1024},   {"ffn_up", GGML_TYPE_Q4_K, 3072, 1024},
        {"ffn_down", GGML_TYPE_Q4_K, 1024, 3072},
    };
    const int n_shapes = (int)(sizeof layer / sizeof *layer);
    for (int i = 0; i < n_shapes; i++) bench_matvec(&layer[i], n_layers);
    bench_layers(layer, n_shapes);
    const shape heads[] = {
        {"output", GGML_TYPE_Q6_K, vocab, 1024},
        {"output", GGML_TYPE_Q4_K, vocab, 1024},
        {"output", GGML_TYPE_Q8_0, vocab, 1024},
    };
    for (int i = 0; i < 3; i++) bench_matvec(&heads[i], 1);
    printf("\n");
    const int positions[] = {127, 1023, 4095};
    for (int i = 0; i < 3; i++) bench_attention(positions[i]);
    printf("\n");
    // hidden states of 640, 1024 and 2048 floats; logits of 151936 and 262144
    const size_t copies[] = {640 * 4, 1024 * 4, 2048 * 4, 151936 * 4, 262144 * 4};
    for (int i = 0; i < 5; i++) bench_bare_copy(copies[i]);
    seam_cuda_stream_destroy(stream);
    return 0;
}
