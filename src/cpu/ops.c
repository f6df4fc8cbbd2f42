// ops.c — CPU operations: the threaded matvec and attention over the
// kernels of cpu/kernels.h (chosen here by CPU feature), and the small
// per-token ops.
#include "cpu/ops.h"

#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "numeric/exact.h"
#include "cpu/kernels.h"
#include "model/placement.h"

#if defined(__x86_64__) && defined(__GNUC__)
#include <cpuid.h>
#endif

uint64_t cpu_matvec_scratch_bytes(int64_t cols) {
    // The largest activation format per element is f32; Q8_K and Q8_0 with
    // their extras (cpu/kernels.h) take about 1.2 bytes, their alignment
    // within the 64.
    return (uint64_t)cols * sizeof(float) + 64;
}

void cpu_input_extras(uint32_t act_type, void *act, int64_t n) {
    if (act_type == GGML_TYPE_Q8_K) {
        const block_q8_K *y = act;
        int16_t *sums = (int16_t *)cpu_q8_K_sums_of(act, n);
        for (int64_t b = 0; b < n / QK_K; b++)
            for (int i = 0; i < 8; i++) sums[8 * b + i] = (int16_t)(y[b].bsums[2 * i] + y[b].bsums[2 * i + 1]);
    } else if (act_type == GGML_TYPE_Q8_0) {
        const block_q8_0 *y = act;
        float *scales = (float *)cpu_q8_0_scales_of(act, n);
        for (int64_t b = 0; b < n / QK8_0; b++) scales[b] = seam_f16_to_f32(y[b].d);
    }
}

// ---------------------------------------------------------------- kernels

static uint64_t at_least(uint64_t x, uint64_t floor) { return x > floor ? x : floor; }

uint64_t cpu_tiles_stack_bytes(int64_t n) {
    // the K types' tiles: a group of input tiles and a chunk of unpacked
    // rows, each at least one row's blocks, and the chunk rows' accumulators
    // (at most as much again)
    const uint64_t kb = (uint64_t)(n / QK_K) + 1;
    // a group holds at most a batch's tiles: short rows fill less than the group's bytes
    const uint64_t batch_tiles = (SEAM_UBATCH + CPU_TILE_INPUTS - 1) / CPU_TILE_INPUTS;
    const uint64_t group = at_least(kb * CPU_TILES_INPUT_BLOCK_BYTES, CPU_KTILES_GROUP_BYTES);
    const uint64_t k_tiles = (group < batch_tiles * kb * CPU_TILES_INPUT_BLOCK_BYTES
                                  ? group
                                  : batch_tiles * kb * CPU_TILES_INPUT_BLOCK_BYTES) +
                             2 * at_least(kb * CPU_TILES_ROW_BLOCK_BYTES, CPU_TILES_ROWS_BYTES);
    // the micro-tiles: the inputs prepared at once (at least one group of
    // them) and one row group's blocks
    const uint64_t mb = (uint64_t)(n / QK8_0) + 1;
    const uint64_t micro = at_least(mb * CPU_MICRO_INPUT_BLOCK_BYTES, CPU_TILES_GROUP_BYTES) +
                           mb * CPU_MICRO_ROWS_BLOCK_BYTES;
    return k_tiles > micro ? k_tiles : micro;
}

static void dot_rows_ref(exact_order o, uint32_t type, const void *w, size_t row_bytes, int64_t n_rows,
                         const void *act, size_t act_stride, int n_act, int64_t n, float *out, int64_t ldo) {
    for (int j = 0; j < n_act; j++)
        for (int64_t r = 0; r < n_rows; r++)
            out[j * ldo + r] = seam_vec_dot(o, type, (const uint8_t *)w + r * row_bytes,
                                            (const uint8_t *)act + j * act_stride, n);
}

// exact.c's functions of an order bound to it, for the scalar set of that
// order (the kernel slots take no order: a set has one).
#define REFERENCE_IN_ORDER(sfx, ORDER)                                                                            \
    static void dot_rows_##sfx(uint32_t type, const void *w, size_t row_bytes, int64_t n_rows, const void *act,  \
                               size_t act_stride, int n_act, int64_t n, float *out, int64_t ldo) {               \
        dot_rows_ref(ORDER, type, w, row_bytes, n_rows, act, act_stride, n_act, n, out, ldo);                     \
    }                                                                                                             \
    static void values_run_##sfx(float *acc, const float *w, const seam_f16 *v, int c0, int c1, int t0, int hd,   \
                                 int64_t stride, int ring) {                                                      \
        exact_attention_values_run(ORDER, acc, w, v, c0, c1, t0, hd, stride, ring);                               \
    }                                                                                                             \
    static void values_end_##sfx(float *out, float *acc, int hd) { exact_attention_values_end(ORDER, out, acc, hd); } \
    static void softmax_##sfx(float *x, int t0, int t1, int n) { exact_softmax(ORDER, x, t0, t1, n); }           \
    static void swiglu_##sfx(float *gate, const float *up, int n) { exact_swiglu(ORDER, gate, up, n); }
REFERENCE_IN_ORDER(avx2, EXACT_ORDER_AVX2)
REFERENCE_IN_ORDER(avx512, EXACT_ORDER_AVX512)
#undef REFERENCE_IN_ORDER

// One head's rotation: NEOX pairs (i, i + half), normal pairs (2i, 2i+1).
static void rope_ref(float *v, int rope_dim, const float *cos_t, const float *sin_t, bool neox) {
    const int half = rope_dim / 2;
    for (int i = 0; i < half; i++) {
        const int a = neox ? i : 2 * i;
        const int b = neox ? i + half : 2 * i + 1;
        const float x0 = v[a], x1 = v[b];
        // as gcc contracts ggml's rotate_pairs (C++, -ffp-contract=fast):
        // the first product of each line fused with the rest
        v[a] = fmaf(x0, cos_t[i], -(x1 * sin_t[i]));
        v[b] = fmaf(x0, sin_t[i], x1 * cos_t[i]);
    }
}

static void rmsnorm_rows_ref(float *out, const float *x, const float *weight, int rows, int n, float eps) {
    for (int r = 0; r < rows; r++) cpu_rmsnorm(out + (size_t)r * n, x + (size_t)r * n, weight, n, eps);
}

static void to_f16_ref(seam_f16 *dst, const float *src, int64_t n) {
    for (int64_t i = 0; i < n; i++) dst[i] = seam_f32_to_f16(src[i]);
}

static cpu_kernels sets[CPU_KERNEL_SETS];  // the scalar sets, then each instruction set this CPU runs
static int n_sets, chosen;
static pthread_once_t kernels_once = PTHREAD_ONCE_INIT;

static void fill_scalar(cpu_kernels *k, exact_order o) {
    const bool wide = o == EXACT_ORDER_AVX512;
    k->name = wide ? "scalar-avx512" : "scalar-avx2";
    k->order = o;
    for (int t = 0; t < GGML_TYPE_COUNT; t++) k->dot[t] = wide ? dot_rows_avx512 : dot_rows_avx2;
    k->rmsnorm_rows = rmsnorm_rows_ref;
    k->values_run = wide ? values_run_avx512 : values_run_avx2;
    k->values_end = wide ? values_end_avx512 : values_end_avx2;
    k->flash_run = exact_attention_flash_run;
    k->flash_end = exact_attention_flash_end;
    k->to_f16 = to_f16_ref;
    k->quantize_q8_K = seam_quantize_row_q8_K;
    k->quantize_q8_0 = seam_quantize_row_q8_0;
    k->softmax = wide ? softmax_avx512 : softmax_avx2;
    k->swiglu = wide ? swiglu_avx512 : swiglu_avx2;
    k->rope = rope_ref;
}

static void kernels_init(void) {
    for (int o = 0; o < EXACT_ORDERS; o++) fill_scalar(&sets[n_sets++], (exact_order)o);
#if defined(__x86_64__) && defined(__GNUC__)
    // F16C is read from cpuid: clang before 16 has no "f16c" for __builtin_cpu_supports.
    unsigned eax, ebx, ecx, edx;
    const bool f16c = __get_cpuid(1, &eax, &ebx, &ecx, &edx) && (ecx & bit_F16C);
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && f16c) {
        sets[n_sets] = sets[EXACT_ORDER_AVX2];
        cpu_kernels_fill_avx2(&sets[n_sets++], EXACT_ORDER_AVX2);
        if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
            __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512vnni")) {
            sets[n_sets] = sets[EXACT_ORDER_AVX512];
            cpu_kernels_fill_avx2(&sets[n_sets], EXACT_ORDER_AVX512);
            cpu_kernels_fill_avx512(&sets[n_sets++]);
        }
    }
#endif
    chosen = n_sets - 1;
    const char *want = getenv("SEAM_KERNELS");
    if (!want || !*want) return;
    int found = -1;
    for (int i = 0; i < n_sets; i++)
        if (!strcmp(want, sets[i].name) || (!strcmp(want, "scalar") && i == (int)sets[chosen].order)) found = i;
    if (found < 0) {
        // a test or benchmark that asks for a set must not run another unawares
        fprintf(stderr, "seam: SEAM_KERNELS=%s is not a kernel set this CPU runs (", want);
        for (int i = 0; i < n_sets; i++) fprintf(stderr, "%s%s", i ? ", " : "", sets[i].name);
        fprintf(stderr, ", or scalar)\n");
        exit(2);
    }
    chosen = found;
}

const cpu_kernels *cpu_kernels_get(void) {
    pthread_once(&kernels_once, kernels_init);
    return &sets[chosen];
}

int cpu_kernels_all(const cpu_kernels *out[CPU_KERNEL_SETS]) {
    pthread_once(&kernels_once, kernels_init);
    for (int i = 0; i < n_sets; i++) out[i] = &sets[i];
    return n_sets;
}

const cpu_kernels *cpu_kernels_reference(exact_order order) {
    pthread_once(&kernels_once, kernels_init);
    return &sets[order];  // the scalar sets come first, in the order of exact_order
}

// ---------------------------------------------------------------- matvec

// One matmul as a pool job, rows handed out by guided self-scheduling: each
// grab takes half of what is left divided among the threads, so the first
// grabs are long contiguous runs and the last are small, and all threads
// finish within a few microseconds of each other -- and a thread the OS
// delays (the cores are shared) leaves its untaken rows to the others. A
// dozen atomic grabs per thread per matmul. The rows are those of several
// matrices one after another (q, k and v; gate and up; every expert's), each
// against its own inputs, a grab never crossing from one to the next.
#define MAX_PARTS 4  // cpu_matmul_parts' matrices

typedef struct {
    cpu_dot_fn dot;
    uint32_t type;
    const uint8_t *w;  // (rows, row_bytes)
    uint64_t row_bytes;
    int64_t first, rows, min_rows, cols;  // its rows in the job's count; the smallest grab
    const uint8_t *act;                   // (n, act_stride): the inputs quantised
    uint64_t act_stride;
    int n;
    float *out;  // (n, ldo)
    int64_t ldo;
} matmul_part;

typedef struct {
    const matmul_part *part;
    int n_parts;
    int64_t n_rows;
    _Atomic int64_t next_row;
} matvec_job;

int64_t cpu_matvec_min_rows(uint64_t row_bytes) {
    // ~16 KiB, a couple of microseconds of reading
    const int64_t rows = (int64_t)((16u << 10) / (row_bytes ? row_bytes : 1));
    return rows > 1 ? rows : 1;
}

int64_t cpu_matvec_grab(int64_t left, int64_t in_part, int64_t min_rows, int nth) {
    const int64_t take = left / (2 * nth) > min_rows ? left / (2 * nth) : min_rows;
    return take > in_part ? in_part : take;
}

static void matvec_share(void *ctx, int ith, int nth) {
    matvec_job *j = ctx;
    for (;;) {
        int64_t r0 = atomic_load(&j->next_row), take;
        const matmul_part *p;
        do {
            if (r0 >= j->n_rows) return;
            p = &j->part[0];
            while (r0 >= p->first + p->rows) p++;
            take = cpu_matvec_grab(j->n_rows - r0, p->first + p->rows - r0, p->min_rows, nth);
        } while (!atomic_compare_exchange_weak(&j->next_row, &r0, r0 + take));
        // every input against this grab of rows while they are in cache
        const int64_t r = r0 - p->first;
        p->dot(p->type, p->w + (uint64_t)r * p->row_bytes, p->row_bytes, take, p->act, p->act_stride, p->n, p->cols,
               p->out + r, p->ldo);
    }
}

void cpu_matmul_items(seam_pool *pool, int n_items, const cpu_matmul_item *items) {
    if (n_items < 1) return;
    const cpu_kernels *kern = cpu_kernels_get();
    matmul_part part[n_items];
    matvec_job job = {.part = part, .n_parts = n_items};
    for (int i = 0; i < n_items; i++) {
        const seam_tensor *w = items[i].w;
        part[i] = (matmul_part){
            .dot = kern->dot[w->type], .type = w->type, .w = w->data, .row_bytes = w->row_bytes,
            .first = job.n_rows, .rows = w->rows, .min_rows = cpu_matvec_min_rows(w->row_bytes), .cols = w->cols,
            .act = items[i].act, .act_stride = items[i].act_stride, .n = items[i].n, .out = items[i].out,
            .ldo = items[i].ldo,
        };
        job.n_rows += w->rows;
    }
    pool_run(pool, matvec_share, &job);
}

void cpu_quantize_input(uint32_t act_type, const float *x, void *act, int64_t cols) {
    const cpu_kernels *kern = cpu_kernels_get();
    if (act_type == GGML_TYPE_Q8_K) kern->quantize_q8_K(x, act, cols);
    else if (act_type == GGML_TYPE_Q8_0) kern->quantize_q8_0(x, act, cols);
    else seam_quantize_activation(act_type, x, act, cols);
    cpu_input_extras(act_type, act, cols);
}

// The inputs of a matmul quantised, input b into act + b * stride; a
// batch's inputs are taken one at a time by the pool's threads.
typedef struct {
    const float *x;  // (n, ldx)
    int64_t ldx, cols;
    uint32_t act_type;
    uint8_t *act;  // (n, stride)
    uint64_t stride;
    int n;
    _Atomic int next;  // the next input to take
} quantize_job;

static void quantize_share(void *ctx, int ith, int nth) {
    (void)ith, (void)nth;
    quantize_job *j = ctx;
    for (int b; (b = atomic_fetch_add(&j->next, 1)) < j->n;)
        cpu_quantize_input(j->act_type, j->x + b * j->ldx, j->act + b * j->stride, j->cols);
}

void cpu_quantize_inputs(seam_pool *pool, uint32_t act_type, const float *x, int64_t ldx, int n, int64_t cols,
                         void *act) {
    quantize_job job = {
        .x = x, .ldx = ldx, .cols = cols, .act_type = act_type, .act = act, .stride = cpu_matvec_scratch_bytes(cols),
        .n = n,
    };
    // one input: on the caller, with no job to start and wait for
    if (n == 1) quantize_share(&job, 0, 1);
    else pool_run(pool, quantize_share, &job);
}

void cpu_matmul_parts(seam_pool *pool, int n_parts, const seam_tensor *const w[], const float *x, int64_t ldx,
                      float *const out[], const int64_t ldo[], int n, void *scratch) {
    const uint32_t act_type = seam_vec_dot_type(w[0]->type);
    const int64_t cols = w[0]->cols;
    for (int i = 1; i < n_parts; i++)
        if (n_parts > MAX_PARTS || seam_vec_dot_type(w[i]->type) != act_type || w[i]->cols != cols) {
            // inputs that cannot be shared: one matmul each
            for (int k = 0; k < n_parts; k++) cpu_matmul_parts(pool, 1, &w[k], x, ldx, &out[k], &ldo[k], n, scratch);
            return;
        }
    cpu_quantize_inputs(pool, act_type, x, ldx, n, cols, scratch);
    cpu_matmul_item items[MAX_PARTS];
    for (int i = 0; i < n_parts; i++)
        items[i] = (cpu_matmul_item){
            .w = w[i], .act = scratch, .act_stride = cpu_matvec_scratch_bytes(cols), .n = n, .out = out[i],
            .ldo = ldo[i],
        };
    cpu_matmul_items(pool, n_parts, items);
}

void cpu_matmul(seam_pool *pool, const seam_tensor *w, const float *x, int64_t ldx, float *out, int64_t ldo, int n,
                void *scratch) {
    cpu_matmul_parts(pool, 1, &w, x, ldx, &out, &ldo, n, scratch);
}

void cpu_matvec(seam_pool *pool, const seam_tensor *w, const float *x, float *out, void *scratch) {
    cpu_matmul(pool, w, x, 0, out, 0, 1, scratch);
}

void cpu_rmsnorm(float *out, const float *x, const float *weight, int n, float eps) {
    double sum = 0.0;
    for (int i = 0; i < n; i++) sum += (double)(x[i] * x[i]);
    const float mean = (float)(sum / n);
    const float scale = 1.0f / sqrtf(mean + eps);
    for (int i = 0; i < n; i++) out[i] = (x[i] * scale) * weight[i];
}

void cpu_rmsnorm_rows(float *out, const float *x, const float *weight, int rows, int n, float eps) {
    cpu_kernels_get()->rmsnorm_rows(out, x, weight, rows, n, eps);
}

void cpu_rope_angles(float *cos_t, float *sin_t, int rope_dim, int pos, float base, float freq_scale) {
    const float theta_scale = powf(base, -2.0f / (float)rope_dim);
    float theta = (float)pos;
    for (int i = 0; i < rope_dim / 2; i++) {
        cos_t[i] = cosf(freq_scale * theta);
        sin_t[i] = sinf(freq_scale * theta);
        theta *= theta_scale;
    }
}

void cpu_rope_apply(float *q, int n_heads, float *k, int n_kv_heads, int head_dim, int rope_dim, const float *cos_t,
                    const float *sin_t, bool neox) {
    const cpu_kernels *kern = cpu_kernels_get();
    for (int h = 0; h < n_heads + n_kv_heads; h++)
        kern->rope(h < n_heads ? q + (int64_t)h * head_dim : k + (int64_t)(h - n_heads) * head_dim, rope_dim, cos_t,
                   sin_t, neox);
}

void cpu_softmax(float *x, int n) { cpu_kernels_get()->softmax(x, 0, n, n); }

void cpu_moe_route(const seam_config *c, float *router, int *chosen, float *weight) {
    const int k = c->n_expert_used;
    cpu_softmax(router, c->n_expert);
    cpu_top_k(router, c->n_expert, k, chosen);
    double sum = 0.0;
    for (int j = 0; j < k; j++) sum += weight[j] = router[chosen[j]];
    const float norm = (float)(sum > EXACT_MOE_MIN_WEIGHT_SUM ? sum : EXACT_MOE_MIN_WEIGHT_SUM);
    for (int j = 0; j < k; j++) weight[j] /= norm;
}

void cpu_fwht(float *x, int64_t n, int block) {
    const float scale = 1.0f / sqrtf((float)block);
    for (int64_t b = 0; b < n; b += block) {
        float *y = x + b;
        for (int j = 0; j < block; j++) y[j] *= scale;
        for (int len = 1; len < block; len <<= 1)
            for (int i = 0; i < block; i += 2 * len)
                for (int j = i; j < i + len; j++) {
                    const float u = y[j], v = y[j + len];
                    y[j] = u + v;
                    y[j + len] = u - v;
                }
    }
}

void cpu_kv_store(uint32_t type, void *row, const float *x, int64_t n) {
    const cpu_kernels *kern = cpu_kernels_get();
    if (type == GGML_TYPE_Q8_0) kern->quantize_q8_0(x, row, n);
    else kern->to_f16(row, x, n);
}

// The attention of a group of queries that share a KV head -- the query
// heads of a GQA group, and a prompt's tokens -- taken together, so that each
// run of ATT_RUN K rows (and then V rows) serves every query of the group
// while it is in cache. Each query's arithmetic is still its own, in its own
// order (the scores are independent dots, the sums over positions run in
// order of position), so a group gives each query bitwise what it gives
// alone.
// 32 queries a group: each group turns its runs of K and V around for its
// scores' and values' kernels, so twice the queries halves that work
// (Qwen3-0.6B shape, pp2048, bench/ab.py: 1.09x of groups of 16; pp512 alike).
#define ATT_GROUP 32  // queries a group takes at most (CPU_VALUES_GROUP at most)
#define ATT_RUN 256   // positions a run of rows covers: 64 KiB of a 128-wide f16 head's keys
// Positions a run of V rows covers, query by query (values_run): 256 KiB of
// a 128-wide f16 head's values, still in L2 for every query of the group.
// Longer than ATT_RUN because each run costs every query a pass of its 64
// lanes' accumulators through memory, 64 x head_dim loads and stores: at
// 256 positions that is a store and a load for every four multiply-adds.
// A set with values_group takes runs of CPU_VALUES_RUN, the rows its tile
// turns around.
#define ATT_VALUES_RUN 1024
// When values_group's tile pays for itself: turning a run of V around costs
// about a pass over its rows, so the few queries of decode (a KV head's GQA
// group over the threads: 2 for Qwen3 and, on two threads, Gemma 3) read
// the rows themselves, query by query -- unless the heads are as narrow as
// 32, where each row's pass costs more than its share of the tile. Measured
// decode, 2 threads, tok/s of alternating runs (bench/ab.py), tile / rows:
// the Qwen3-0.6B shape (heads of 128) at 4K 14-19 / 18-26; moe-small (64)
// at 4032 798-1248 / 1122-1566; Gemma 3 270M (256) on one thread at 8K
// (groups of 4) 40-49 / 46-53; long64k (32) at 32K 867-1234 / 706-730.
// Prefill's groups of ATT_GROUP keep the tile.
#define ATT_VALUES_GROUP_MIN 5
#define ATT_VALUES_TILE_HEAD 32  // heads this narrow take the tile at any group size
_Static_assert(ATT_GROUP <= CPU_VALUES_GROUP, "values_group takes a whole group");

typedef struct {
    const float *q;  // (head_dim)
    float *out;      // (head_dim)
    int t0, t1;      // the positions it attends over
} att_query;

// One query's part of a thread's scratch: its scores, indexed by position
// (n_ctx), its lanes or flash state (64 head_dim), q in K's dot type
// (head_dim + 16: the q8_0 blocks and their scales fit).
typedef struct {
    size_t stride;     // floats a query takes
    size_t acc, qa;    // where its lanes (or state) and q start
} att_layout;

static att_layout layout_of(int n_ctx, int head_dim) {
    const size_t hd = (size_t)head_dim;
    return (att_layout){.stride = (size_t)n_ctx + 65 * hd + 16, .acc = (size_t)n_ctx, .qa = (size_t)n_ctx + 64 * hd};
}

// A thread's scratch: ATT_GROUP queries' shares, then the values' tile.
size_t cpu_attention_scratch_floats(int n_ctx, int head_dim) {
    return ATT_GROUP * layout_of(n_ctx, head_dim).stride + cpu_values_tile_floats(head_dim);
}

// The layout of a query's share of scratch_floats (cpu_attention_scratch_floats' inverse).
static att_layout layout_of_scratch(size_t scratch_floats, int head_dim) {
    const size_t shares = scratch_floats - cpu_values_tile_floats(head_dim);
    return layout_of((int)(shares / ATT_GROUP - 65 * (size_t)head_dim - 16), head_dim);
}

static void attention_group(const cpu_kernels *kern, const cpu_kv *kv, const att_query *qs, int n, int head_dim,
                            float scale, float *scratch, att_layout lay) {
    const bool flash = kv->k_type != GGML_TYPE_F16 || kv->v_type != GGML_TYPE_F16;
    int t0 = qs[0].t0, t1 = qs[0].t1;  // the union of the queries' positions
    for (int i = 0; i < n; i++) {
        t0 = qs[i].t0 < t0 ? qs[i].t0 : t0, t1 = qs[i].t1 > t1 ? qs[i].t1 : t1;
        // q in K's dot type: rounded to f16, or q8_0 blocks with the scales the tile kernels take
        float *qa = scratch + i * lay.stride + lay.qa;
        if (kv->k_type == GGML_TYPE_Q8_0) cpu_quantize_input(GGML_TYPE_Q8_0, qs[i].q, qa, head_dim);
        else kern->to_f16((seam_f16 *)qa, qs[i].q, head_dim);
    }
    // Runs of positions, each cut where the ring wraps: the scores of every
    // query (K's dot kernel, all the group's inputs against the run's rows;
    // those outside a query's range go unused), and with flash attention its
    // online softmax over the run's positions in its range
    for (int c0 = t0; c0 < t1;) {
        const int r = c0 % kv->ring, room = kv->ring - r < ATT_RUN ? kv->ring - r : ATT_RUN;
        const int c1 = t1 - c0 < room ? t1 : c0 + room;
        kern->dot[kv->k_type](kv->k_type, kv->k + (size_t)r * kv->k_row, kv->k_row, c1 - c0, scratch + lay.qa,
                              lay.stride * sizeof(float), n, head_dim, scratch + c0, (int64_t)lay.stride);
        for (int i = 0; i < n; i++) {
            float *att = scratch + i * lay.stride;
            const int a = c0 > qs[i].t0 ? c0 : qs[i].t0, b = c1 < qs[i].t1 ? c1 : qs[i].t1;
            for (int t = a; t < b; t++) att[t] *= scale;
            if (flash && a < b)
                kern->flash_run(att + lay.acc, att, kv->v, kv->v_type, kv->v_row, kv->ring, a, b, qs[i].t0, head_dim);
        }
        c0 = c1;
    }
    if (flash) {
        for (int i = 0; i < n; i++) kern->flash_end(qs[i].out, scratch + i * lay.stride + lay.acc, kv->v_type, head_dim);
        return;
    }
    // softmax of each query's scores, then the values in runs, each run's V
    // rows serving every query whose range it meets
    for (int i = 0; i < n; i++) kern->softmax(scratch + i * lay.stride, qs[i].t0, qs[i].t1, (qs[i].t1 + 15) / 16 * 16);
    const seam_f16 *v = (const seam_f16 *)kv->v;
    const int64_t v_stride = (int64_t)(kv->v_row / sizeof(seam_f16));
    cpu_values_query vq[ATT_GROUP];
    for (int i = 0; i < n; i++) {
        float *att = scratch + i * lay.stride;
        vq[i] = (cpu_values_query){.w = att, .acc = att + lay.acc, .out = qs[i].out, .t0 = qs[i].t0, .t1 = qs[i].t1};
    }
    const bool grouped = kern->values_group && (n >= ATT_VALUES_GROUP_MIN || head_dim <= ATT_VALUES_TILE_HEAD);
    const int run = grouped ? CPU_VALUES_RUN : ATT_VALUES_RUN;
    for (int c0 = t0; c0 < t1; c0 += run) {
        const int c1 = t1 - c0 < run ? t1 : c0 + run;
        if (grouped) {
            kern->values_group(vq, n, v, c0, c1, head_dim, v_stride, kv->ring, scratch + ATT_GROUP * lay.stride);
            continue;
        }
        for (int i = 0; i < n; i++) {
            const int a = c0 > qs[i].t0 ? c0 : qs[i].t0, b = c1 < qs[i].t1 ? c1 : qs[i].t1;
            if (a < b) kern->values_run(vq[i].acc, vq[i].w, v, a, b, qs[i].t0, head_dim, v_stride, kv->ring);
        }
    }
    if (!grouped)
        for (int i = 0; i < n; i++) kern->values_end(qs[i].out, vq[i].acc, head_dim);
}

void cpu_attention_head(float *out, const float *q, const cpu_kv *kv, int t0, int t1, int head_dim, float scale,
                        float *scratch, size_t scratch_floats) {
    const att_query one = {q, out, t0, t1};
    attention_group(cpu_kernels_get(), kv, &one, 1, head_dim, scale, scratch,
                    layout_of_scratch(scratch_floats, head_dim));
}

void cpu_to_f16(seam_f16 *dst, const float *src, int64_t n) {
    cpu_kernels_get()->to_f16(dst, src, n);
}

typedef struct {
    int n;             // query positions
    float *out;
    int64_t out_stride;
    const float *q;
    int64_t q_stride;
    const cpu_kv *kv;
    int n_heads, group, head_dim;
    const int *t0, *t1;
    float scale;
    float *scratch;
    size_t scratch_floats;  // per thread
    att_layout lay;
    int per_job, jobs_per_kv;  // queries of a KV head a job takes; jobs of one KV head
    _Atomic int next;          // the next job to take
} attention_job;

// Jobs are groups of queries of one KV head: its query heads for a run of
// positions (head fastest, so that a group's ranges are alike), taken one at
// a time, KV head by KV head, so that a long group (late in a prompt) does
// not hold up a thread with a fixed share.
static void attention_share(void *ctx, int ith, int nth) {
    (void)nth;
    attention_job *j = ctx;
    const cpu_kernels *kern = cpu_kernels_get();
    float *scratch = j->scratch + (size_t)ith * j->scratch_floats;
    const int n_kv = j->n_heads / j->group, per_kv = j->n * j->group;
    for (int k; (k = atomic_fetch_add(&j->next, 1)) < n_kv * j->jobs_per_kv;) {
        const int g = k / j->jobs_per_kv, first = (k % j->jobs_per_kv) * j->per_job;
        const int count = per_kv - first < j->per_job ? per_kv - first : j->per_job;
        att_query qs[ATT_GROUP];
        for (int m = 0; m < count; m++) {
            const int i = (first + m) / j->group, h = g * j->group + (first + m) % j->group;
            const int64_t hd = (int64_t)h * j->head_dim;
            qs[m] = (att_query){j->q + i * j->q_stride + hd, j->out + i * j->out_stride + hd, j->t0[i], j->t1[i]};
        }
        cpu_kv head = *j->kv;  // the KV head's keys and values
        head.k += (size_t)g * head.k_head;
        head.v += (size_t)g * head.v_head;
        attention_group(kern, &head, qs, count, j->head_dim, j->scale, scratch, j->lay);
    }
}

int cpu_attention_per_job(int n, int n_heads, int n_kv_heads, int nth) {
    // enough jobs for every thread, at most a group's worth
    const int per_kv = n * (n_heads / n_kv_heads);
    int per_job = (n * n_heads + nth - 1) / nth;
    per_job = per_job > ATT_GROUP ? ATT_GROUP : per_job;
    return per_job > per_kv ? per_kv : per_job < 1 ? 1 : per_job;
}

void cpu_attention(seam_pool *pool, int n, float *out, int64_t out_stride, const float *q, int64_t q_stride,
                   const cpu_kv *kv, int n_heads, int n_kv_heads, int head_dim, const int *t0, const int *t1,
                   float scale, float *scratch, size_t scratch_floats) {
    const int group = n_heads / n_kv_heads, per_kv = n * group;
    const int per_job = cpu_attention_per_job(n, n_heads, n_kv_heads, pool_size(pool));
    attention_job job = {
        .n = n, .out = out, .out_stride = out_stride, .q = q, .q_stride = q_stride, .kv = kv, .n_heads = n_heads, .group = group, .head_dim = head_dim, .t0 = t0, .t1 = t1, .scale = scale,
        .scratch = scratch, .scratch_floats = scratch_floats,
        .lay = layout_of_scratch(scratch_floats, head_dim),
        .per_job = per_job, .jobs_per_kv = (per_kv + per_job - 1) / per_job,
    };
    pool_run(pool, attention_share, &job);
}

void cpu_swiglu(float *gate, const float *up, int n) { cpu_kernels_get()->swiglu(gate, up, n); }

// GELU(tanh) of every f16 value, built once: ggml's table.
static seam_f16 gelu_table[1 << 16];
static pthread_once_t gelu_once = PTHREAD_ONCE_INIT;

static void gelu_table_init(void) {
    const float sqrt_2_over_pi = 0.79788456080286535587989211986876f, coef_a = 0.044715f;
    for (int i = 0; i < 1 << 16; i++) {
        const float x = seam_f16_to_f32((seam_f16)i);
        // ggml-cpu.c is compiled as gnu11, so gcc fuses 1 + a*x*x; one entry
        // (x = -1.999) rounds differently unfused
        gelu_table[i] = seam_f32_to_f16(0.5f * x * (1.0f + tanhf(sqrt_2_over_pi * x * fmaf(coef_a * x, x, 1.0f))));
    }
}

void cpu_geglu(float *gate, const float *up, int n) {
    pthread_once(&gelu_once, gelu_table_init);
    const cpu_kernels *kern = cpu_kernels_get();
    enum { CHUNK = 256 };
    seam_f16 g16[CHUNK];  // the lookups' keys, converted a chunk at a time by the fast kernel
    for (int i0 = 0; i0 < n; i0 += CHUNK) {
        const int m = n - i0 < CHUNK ? n - i0 : CHUNK;
        kern->to_f16(g16, gate + i0, m);
        for (int k = 0; k < m; k++) {
            const int i = i0 + k;
            const float g = gate[i];
            if (g <= -10.0f) gate[i] = 0.0f;
            else if (g >= 10.0f) gate[i] = g * up[i];
            else gate[i] = seam_f16_to_f32(gelu_table[g16[k]]) * up[i];
        }
    }
}

void cpu_scale(float *x, float s, int n) {
    for (int i = 0; i < n; i++) x[i] *= s;
}

void cpu_top_k(const float *x, int n, int k, int *out) {
    for (int j = 0; j < k; j++) {
        int best = -1;
        for (int i = 0; i < n; i++) {
            bool taken = false;
            for (int t = 0; t < j && !taken; t++) taken = out[t] == i;
            if (!taken && (best < 0 || x[i] > x[best])) best = i;
        }
        out[j] = best;
    }
}
