// speed.c — the in-cache kernel speeds and the pool's job cost of speed.h.
#include "cpu/speed.h"

#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

#include "cpu/ops.h"
#include "numeric/quant.h"

enum { RUNS = 31, SPEED_MAX_THREADS = 256 };

// CPU time of the calling thread.
static double thread_seconds(void) {
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

static uint64_t splitmix(uint64_t *s) {
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static float uniform(uint64_t *s) { return (float)((int64_t)(splitmix(s) >> 40) - (1 << 23)) / (1 << 23); }

// Real-looking blocks: 16 rows quantised from random floats (x: cols
// floats of scratch), repeated; then n_act inputs quantised from random
// floats, cpu_matvec_scratch_bytes(cols) apart.
static void random_rows_inputs(uint32_t type, int64_t cols, int rows, uint8_t *w, int n_act, uint8_t *act, float *x,
                               uint64_t *s) {
    const uint64_t row_bytes = ggml_row_bytes(type, (uint64_t)cols);
    for (int r = 0; r < 16 && r < rows; r++) {
        for (int64_t i = 0; i < cols; i++) x[i] = uniform(s);
        seam_quantize_weights(type, x, w + (uint64_t)r * row_bytes, cols);
    }
    for (int r = 16; r < rows; r++) memcpy(w + (uint64_t)r * row_bytes, w + (uint64_t)(r % 16) * row_bytes, row_bytes);
    for (int j = 0; j < n_act; j++) {
        for (int64_t i = 0; i < cols; i++) x[i] = uniform(s);
        cpu_quantize_input(seam_vec_dot_type(type), x, act + (size_t)j * cpu_matvec_scratch_bytes(cols), cols);
    }
}

int cpu_speed_dot(uint32_t type, int64_t cols, int rows, const cpu_kernels *const *sets, int n_sets, double *gbs) {
    const uint64_t row_bytes = ggml_row_bytes(type, (uint64_t)cols), bytes = row_bytes * (uint64_t)rows;
    uint8_t *w = malloc(bytes);
    void *act = malloc(cpu_matvec_scratch_bytes(cols));
    float *out = malloc(sizeof(float) * (size_t)rows), *x = malloc(sizeof(float) * (size_t)cols);
    if (!w || !act || !out || !x) return free(w), free(act), free(out), free(x), -1;
    uint64_t s = 42;
    random_rows_inputs(type, cols, rows, w, 1, act, x, &s);
    // the best of RUNS short runs per set, the sets taking turns, so that the
    // quiet moments of a shared machine are found and fall on every set alike
    const int iters = bytes < (1u << 20) ? (int)((4u << 20) / bytes) + 1 : 4;  // runs of a few MiB
    for (int i = 0; i < n_sets; i++) gbs[i] = 0;
    for (int run = 0; run < RUNS; run++)
        for (int i = 0; i < n_sets; i++) {
            const double t = thread_seconds();
            for (int it = 0; it < iters; it++) sets[i]->dot[type](type, w, row_bytes, rows, act, 0, 1, cols, out, 0);
            const double g = (double)bytes * iters / (thread_seconds() - t) / 1e9;
            gbs[i] = g > gbs[i] ? g : gbs[i];
        }
    free(w), free(act), free(out), free(x);
    return 0;
}

typedef struct {
    uint32_t type;
    int64_t cols;
    int rows;
    _Atomic int next;      // the next thread's probe to take
    double gbs[SPEED_MAX_THREADS];  // each probe's median, -1 when out of memory
} dot_all_job;

// One probe of cpu_speed_dot_all: the chosen set's dot over its own matrix,
// the median of RUNS runs of a few MiB, per wall-clock second.
static double dot_median(uint32_t type, int64_t cols, int rows) {
    const uint64_t row_bytes = ggml_row_bytes(type, (uint64_t)cols), bytes = row_bytes * (uint64_t)rows;
    uint8_t *w = malloc(bytes);
    void *act = malloc(cpu_matvec_scratch_bytes(cols));
    float *out = malloc(sizeof(float) * (size_t)rows), *x = malloc(sizeof(float) * (size_t)cols);
    double g[RUNS], gbs = -1;
    if (w && act && out && x) {
        uint64_t s = 42;
        random_rows_inputs(type, cols, rows, w, 1, act, x, &s);
        const cpu_kernels *k = cpu_kernels_get();
        const int iters = bytes < (1u << 20) ? (int)((4u << 20) / bytes) + 1 : 4;
        for (int run = 0; run < RUNS; run++) {
            const double t = seam_now();
            for (int it = 0; it < iters; it++) k->dot[type](type, w, row_bytes, rows, act, 0, 1, cols, out, 0);
            g[run] = (double)bytes * iters / (seam_now() - t) / 1e9;
        }
        seam_sort_doubles(g, RUNS);
        gbs = g[RUNS / 2];
    }
    free(w), free(act), free(out), free(x);
    return gbs;
}

static void dot_all_share(void *ctx, int ith, int nth) {
    (void)ith;
    dot_all_job *j = ctx;
    for (int k; (k = atomic_fetch_add(&j->next, 1)) < nth && k < SPEED_MAX_THREADS;)
        j->gbs[k] = dot_median(j->type, j->cols, j->rows);
}

double cpu_speed_dot_all(seam_pool *pool, uint32_t type, int64_t cols, int rows) {
    dot_all_job j = {.type = type, .cols = cols, .rows = rows};
    pool_run(pool, dot_all_share, &j);
    const int n = j.next < pool_size(pool) ? j.next : pool_size(pool) < SPEED_MAX_THREADS ? pool_size(pool) : SPEED_MAX_THREADS;
    for (int i = 0; i < n; i++)
        if (j.gbs[i] < 0) return -1;
    seam_sort_doubles(j.gbs, (size_t)n);
    return j.gbs[n / 2];
}

double cpu_speed_batch(uint32_t type, int64_t cols, int rows, int n_act) {
    const uint64_t row_bytes = ggml_row_bytes(type, (uint64_t)cols), stride = cpu_matvec_scratch_bytes(cols);
    uint8_t *w = malloc(row_bytes * (uint64_t)rows), *act = malloc(stride * (uint64_t)n_act);
    float *out = malloc(sizeof(float) * (size_t)rows * (size_t)n_act), *x = malloc(sizeof(float) * (size_t)cols);
    if (!w || !act || !out || !x) return free(w), free(act), free(out), free(x), -1;
    uint64_t s = 43;
    random_rows_inputs(type, cols, rows, w, n_act, act, x, &s);
    const cpu_kernels *k = cpu_kernels_get();
    double best = 0;
    for (int run = 0; run < 15; run++) {
        const double t = thread_seconds();
        k->dot[type](type, w, row_bytes, rows, act, stride, n_act, cols, out, rows);
        const double g = (double)rows * (double)cols * n_act / (thread_seconds() - t) / 1e9;
        best = g > best ? g : best;
    }
    free(w), free(act), free(out), free(x);
    return best;
}

// rows of real-looking weights (16 quantised from random floats, repeated),
// in an anonymous mapping; data NULL when out of memory
static seam_tensor matrix(uint32_t type, int64_t rows, int64_t cols, uint64_t *rng) {
    seam_tensor t = {.name = "probe", .name_len = 5, .type = type, .rows = rows, .cols = cols};
    t.row_bytes = ggml_row_bytes(type, (uint64_t)cols);
    t.n_bytes = t.row_bytes * (uint64_t)rows;
    uint8_t *data = mmap(NULL, t.n_bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    float *x = malloc(sizeof(float) * (size_t)cols);
    if (data == MAP_FAILED || !x) {
        if (data != MAP_FAILED) munmap(data, t.n_bytes);
        free(x);
        return t;
    }
    for (int64_t r = 0; r < 16 && r < rows; r++) {
        for (int64_t i = 0; i < cols; i++) x[i] = uniform(rng);
        seam_quantize_weights(type, x, data + (uint64_t)r * t.row_bytes, cols);
    }
    for (int64_t r = 16; r < rows; r++) memcpy(data + (uint64_t)r * t.row_bytes, data + (uint64_t)(r % 16) * t.row_bytes, t.row_bytes);
    free(x);
    t.data = data;
    return t;
}

double cpu_speed_stream(seam_pool *pool, uint32_t type, uint64_t bytes) {
    enum { COLS = 1024 };
    uint64_t rng = 42;
    const seam_tensor w = matrix(type, (int64_t)(bytes / ggml_row_bytes(type, COLS)), COLS, &rng);
    // one matvec over every row, as the output head is: the kernels' rate
    // with no call's start and finish in it (predict.c adds those per job)
    float x[COLS], *out = malloc(sizeof(float) * (size_t)w.rows);
    void *act = malloc(cpu_matvec_scratch_bytes(COLS));
    enum { STREAM_RUNS = 15 };  // a run is ~20 ms: 15 span a moment of a shared machine, not an instant
    double gbs = -1, runs[STREAM_RUNS];
    if (w.data && out && act) {
        for (int i = 0; i < COLS; i++) x[i] = uniform(&rng);
        for (int r = -1; r < STREAM_RUNS; r++) {  // r = -1: the warm-up
            const double t = seam_now();
            cpu_matvec(pool, &w, x, out, act);
            if (r >= 0) runs[r] = (double)w.n_bytes / (seam_now() - t) / 1e9;
        }
        seam_sort_doubles(runs, STREAM_RUNS);
        gbs = runs[STREAM_RUNS / 2];
    }
    if (w.data) munmap((void *)w.data, w.n_bytes);
    free(out), free(act);
    return gbs;
}

// The caller's own work between two jobs (decode's norms, rope, routing):
// a worker spinning for the next job yields its core now and then.
static void caller_gap(void) {
    for (const double until = seam_now() + 2e-6; seam_now() < until;) {
    }
}

int cpu_speed_matvec_jobs(seam_pool *pool, double dot_gbs, double row_ns, double wake_us, double *call_us,
                          double *job_us) {
    enum { N = 128, ROWS = 256, COLS = 256, CYCLES = 41 };
    uint64_t rng = 9;
    const seam_tensor first = matrix(GGML_TYPE_Q4_K, (int64_t)N * ROWS, COLS, &rng);
    float x[COLS], out[ROWS], ones[COLS];
    void *act = malloc(cpu_matvec_scratch_bytes(COLS));
    if (!first.data || !act) {
        if (first.data) munmap((void *)first.data, first.n_bytes);
        return free(act), -1;
    }
    for (int i = 0; i < COLS; i++) ones[i] = 1, x[i] = uniform(&rng);
    // us a call on one thread and on the pool, cycle by cycle, the two in
    // turns (which goes first alternates): a shared machine's moments fall
    // on both, and their difference is taken within a cycle
    double one[CYCLES], diff[CYCLES];
    for (int c = -1; c < CYCLES; c++) {  // c = -1: the warm-up
        double per_call[2];
        for (int k = 0; k < 2; k++) {
            const bool on_pool = (k + c) & 1;
            double busy = 0;  // the calls and norms, the gaps left out
            for (int i = 0; i < N; i++) {
                const double t = seam_now();
                const seam_tensor w = tensor_rows(&first, (int64_t)i * ROWS, ROWS);
                cpu_matvec(on_pool ? pool : NULL, &w, x, out, act);
                cpu_rmsnorm(x, out, ones, COLS, 1e-6f);  // the next input: the rows come back to the caller
                busy += seam_now() - t;
                caller_gap();
            }
            per_call[on_pool] = 1e6 * busy / N;
        }
        if (c >= 0) one[c] = per_call[0], diff[c] = per_call[1] - per_call[0];
    }
    seam_sort_doubles(one, CYCLES);
    seam_sort_doubles(diff, CYCLES);
    const seam_tensor row0 = tensor_rows(&first, 0, ROWS), *w = &row0;
    const double row_us = 1e-3 * (first.row_bytes / dot_gbs + row_ns);
    const double alone = cpu_matmul_schedule_us(1, 0, 1, &w, &row_us),
                 shared = cpu_matmul_schedule_us(pool_size(pool), wake_us, 1, &w, &row_us);
    *call_us = one[CYCLES / 2] - alone;
    *job_us = diff[CYCLES / 2] - (shared - alone);
    munmap((void *)first.data, first.n_bytes);
    free(act);
    return 0;
}

double cpu_speed_attention(seam_pool *pool, int group, int head_dim, uint64_t min_bytes) {
    enum { POS = 1024, RUNS = 7 };
    const int nth = pool_size(pool), n_kv = 4 * nth, n_heads = n_kv * group;
    const size_t layer = (size_t)n_kv * POS * head_dim;  // f16 values of a layer's K (and of its V)
    const int layers = (int)(min_bytes / (2 * layer * sizeof(seam_f16))) + 1;
    const size_t n = (size_t)layers * layer, scratch_floats = cpu_attention_scratch_floats(POS, head_dim);
    seam_f16 *k = malloc(sizeof(seam_f16) * n), *v = malloc(sizeof(seam_f16) * n);
    float *scratch = malloc(sizeof(float) * scratch_floats * (size_t)nth);
    float *q = malloc(sizeof(float) * (size_t)n_heads * head_dim), *out = malloc(sizeof(float) * (size_t)n_heads * head_dim);
    double per[RUNS], ns = -1;
    if (k && v && scratch && q && out) {
        // a layer of random values, repeated: the bytes are what counts
        uint64_t s = 11;
        for (size_t i = 0; i < layer; i++) k[i] = seam_f32_to_f16(uniform(&s)), v[i] = seam_f32_to_f16(uniform(&s));
        for (int l = 1; l < layers; l++)
            memcpy(k + l * layer, k, layer * sizeof *k), memcpy(v + l * layer, v, layer * sizeof *v);
        for (int i = 0; i < n_heads * head_dim; i++) q[i] = uniform(&s);
        const int t0 = 0, t1 = POS;
        for (int r = -1; r < RUNS; r++) {  // r = -1: the warm-up
            const double t = seam_now();
            for (int l = 0; l < layers; l++) {
                const cpu_kv kv = {.k = (const uint8_t *)(k + l * layer), .v = (const uint8_t *)(v + l * layer),
                                   .k_row = head_dim * sizeof(seam_f16), .v_row = head_dim * sizeof(seam_f16),
                                   .k_head = (size_t)POS * head_dim * sizeof(seam_f16),
                                   .v_head = (size_t)POS * head_dim * sizeof(seam_f16),
                                   .k_type = GGML_TYPE_F16, .v_type = GGML_TYPE_F16, .ring = POS};
                cpu_attention(pool, 1, out, 0, q, 0, &kv, n_heads, n_kv, head_dim, &t0, &t1, 0.088f, scratch,
                              scratch_floats);
            }
            // every thread holds a KV head at a time: its time for one KV head's position
            if (r >= 0) per[r] = (seam_now() - t) * nth / ((double)layers * n_kv * POS) * 1e9;
        }
        seam_sort_doubles(per, RUNS);
        ns = per[RUNS / 2];
    }
    free(k), free(v), free(scratch), free(q), free(out);
    return ns;
}

// A job that holds its caller until a worker has come in (or 100 us pass),
// and notes when the first did.
typedef struct {
    double opened;
    _Atomic int arrived;
    double first;  // seam_now() of the first worker to come in
} wake_job;

static void wake_share(void *ctx, int ith, int nth) {
    (void)nth;
    wake_job *j = ctx;
    if (ith) {
        const double t = seam_now();
        if (!atomic_exchange(&j->arrived, 1)) j->first = t;
        return;
    }
    while (!atomic_load(&j->arrived) && seam_now() - j->opened < 100e-6) {
    }
}

// The mean of all but the slowest 1% of v (n), sorted: a token pays the
// sum of its jobs, and a worker the OS took away for milliseconds is rare.
static double trimmed_mean(double *v, int n) {
    seam_sort_doubles(v, (size_t)n);
    const int keep = n - n / 100;
    double sum = 0;
    for (int i = 0; i < keep; i++) sum += v[i];
    return keep ? sum / keep : 0;
}

double cpu_speed_wake(seam_pool *pool) {
    enum { JOBS = 4001 };
    static double t[JOBS];
    int n = 0;
    for (int i = 0; i < JOBS && pool_size(pool) > 1; i++) {
        caller_gap();
        wake_job j = {.opened = seam_now()};
        pool_run(pool, wake_share, &j);
        if (atomic_load(&j.arrived)) t[n++] = j.first - j.opened;
    }
    return n ? 1e6 * trimmed_mean(t, n) : 0;
}

// The probe in pieces of about half a millisecond from a shared counter:
// a worker the OS runs late takes fewer of them (pool.h).
typedef struct {
    cpu_int8_probe_fn probe;
    uint64_t rounds;
    int pieces;
    _Atomic int next;
    _Atomic uint64_t macs;
} peak_job;

static void peak_share(void *ctx, int ith, int nth) {
    (void)ith, (void)nth;
    peak_job *j = ctx;
    uint64_t macs = 0;
    while (atomic_fetch_add(&j->next, 1) < j->pieces) macs += j->probe(j->rounds);
    atomic_fetch_add(&j->macs, macs);
}

double cpu_speed_int8_peak(seam_pool *pool) {
    const cpu_int8_probe_fn probe = cpu_kernels_get()->int8_probe;
    if (!probe) return 0;
    enum { CALIBRATE = 20000 };
    double t = seam_now();
    probe(CALIBRATE);
    t = seam_now() - t;
    const double rounds = CALIBRATE * 0.5e-3 / (t > 1e-6 ? t : 1e-6);
    double best = 0;
    for (int run = 0; run < 7; run++) {
        peak_job j = {.probe = probe, .rounds = rounds > CALIBRATE ? (uint64_t)rounds : CALIBRATE,
                      .pieces = 40 * pool_size(pool)};
        const double start = seam_now();
        pool_run(pool, peak_share, &j);
        const double g = (double)atomic_load(&j.macs) / (seam_now() - start) / 1e9;
        best = g > best ? g : best;
    }
    return best;
}

double cpu_schedule_us(int threads, double wake_us, int n, const double *piece_us) {
    double at[threads];  // when each thread is free: the caller from 0, the workers from wake_us
    for (int t = 0; t < threads; t++) at[t] = t ? wake_us : 0;
    double end = 0;
    for (int i = 0; i < n; i++) {
        int first = 0;
        for (int t = 1; t < threads; t++) first = at[t] < at[first] ? t : first;
        at[first] += piece_us[i];
        end = at[first] > end ? at[first] : end;
    }
    return end;
}

double cpu_matmul_schedule_us(int threads, double wake_us, int n, const seam_tensor *const *w, const double *row_us) {
    enum { MAX_GRABS = 1024 };  // a matmul's grabs: a few dozen per thread
    int64_t rows = 0;
    for (int i = 0; i < n; i++) rows += w[i]->rows;
    double piece[MAX_GRABS];
    int k = 0;
    for (int64_t r0 = 0, first = 0, i = 0; r0 < rows && k < MAX_GRABS;) {
        const int64_t take =
            cpu_matvec_grab(rows - r0, first + w[i]->rows - r0, cpu_matvec_min_rows(w[i]->row_bytes), threads);
        piece[k++] = (double)take * row_us[i];
        r0 += take;
        if (r0 == first + w[i]->rows) first = r0, i++;
    }
    return cpu_schedule_us(threads, wake_us, k, piece);
}
