// matvec.c — the workbench of the CPU dot kernels: how fast each one turns
// weight bytes into dot products, against the bandwidth they must keep up with.
//
//   seam-matvec [-t THREADS] [-s GIB]
//
// Per weight type (random blocks, 1024-wide rows):
//   cache  one thread, a 256-row matrix that stays in L2 (cpu_speed_dot): the
//          kernel's own speed (scalar reference and the chosen fast set), per
//          second of the thread's CPU time
//   memory cpu_matvec over GIB of rows on THREADS threads: the speed decode
//          sees, to be compared with seam-membw's read bandwidth
// GB/s are weight bytes per second; each figure is the best of several runs
// (the cache figure, per CPU second) or the median (the memory figure).
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "common.h"
#include "cpu/kernels.h"
#include "cpu/ops.h"
#include "cpu/pool.h"
#include "cpu/speed.h"

enum { COLS = 1024 };

static uint64_t rng_state = 42;
static uint64_t rng_next(void) {  // splitmix64
    uint64_t z = (rng_state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

// rows of real-looking weights: one row quantised from random floats, copied.
static seam_tensor make_matrix(uint32_t type, int64_t rows) {
    seam_tensor t = {.name = "bench", .name_len = 5, .type = type, .rows = rows, .cols = COLS};
    t.row_bytes = ggml_row_bytes(type, COLS);
    t.n_bytes = t.row_bytes * (uint64_t)rows;
    uint8_t *data = mmap(NULL, t.n_bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (data == MAP_FAILED) return t;
    float x[COLS];
    for (int r = 0; r < 64 && r < rows; r++) {
        for (int i = 0; i < COLS; i++) x[i] = (float)((int64_t)(rng_next() >> 40) - (1 << 23)) / (1 << 23);
        seam_quantize_weights(type, x, data + (uint64_t)r * t.row_bytes, COLS);
    }
    for (int64_t r = 64; r < rows; r++)
        memcpy(data + (uint64_t)r * t.row_bytes, data + (uint64_t)(r % 64) * t.row_bytes, t.row_bytes);
    t.data = data;
    return t;
}

static int cmp_double(const void *x, const void *y) {
    const double a = *(const double *)x, b = *(const double *)y;
    return (a > b) - (a < b);
}

int main(int argc, char **argv) {
    int threads = (int)sysconf(_SC_NPROCESSORS_ONLN);
    double gib = 1.0;
    for (int i = 1; i < argc; i++) {
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(argv[i], "-t") && v)
            threads = atoi(v), i++;
        else if (!strcmp(argv[i], "-s") && v)
            gib = atof(v), i++;
        else
            return fprintf(stderr, "usage: seam-matvec [-t THREADS] [-s GIB]\n"), 2;
    }
    seam_error err = {{0}};
    seam_pool *pool = pool_create(threads, &err);
    if (!pool) return fprintf(stderr, "seam-matvec: %s\n", err.msg), 1;
    const cpu_kernels *sets[CPU_KERNEL_SETS];
    const int n_sets = cpu_kernels_all(sets);
    const cpu_kernels *fast = cpu_kernels_get();
    printf(
        "seam-matvec: %d-wide rows; cache = 1 thread in L2, best of 31 (per CPU second); memory = %.2f GiB on %d "
        "threads with the %s set, median of 5\n  %-5s",
        COLS, gib, threads, fast->name, "type");
    for (int i = 0; i < n_sets; i++) printf(" %9s cache", sets[i]->name);
    printf(" %16s\n", "memory");
    static const uint32_t types[] = {GGML_TYPE_Q4_K, GGML_TYPE_Q6_K, GGML_TYPE_Q8_0, GGML_TYPE_Q5_0,
                                     GGML_TYPE_Q4_0, GGML_TYPE_F16,  GGML_TYPE_F32};
    for (size_t k = 0; k < sizeof types / sizeof types[0]; k++) {
        const uint32_t type = types[k];
        float x[COLS];
        for (int i = 0; i < COLS; i++) x[i] = (float)((int64_t)(rng_next() >> 40) - (1 << 23)) / (1 << 23);
        void *act = malloc(cpu_matvec_scratch_bytes(COLS));
        cpu_quantize_input(seam_vec_dot_type(type), x, act, COLS);

        const int64_t big_rows = (int64_t)(gib * (1 << 30) / (double)ggml_row_bytes(type, COLS));
        seam_tensor big = make_matrix(type, big_rows);
        float *out = malloc(sizeof(float) * (size_t)big_rows);
        double gbs[CPU_KERNEL_SETS];
        if (!big.data || !out || !act || cpu_speed_dot(type, sets, n_sets, gbs))
            return fprintf(stderr, "seam-matvec: out of memory\n"), 1;
        printf("  %-5s", ggml_type_name(type));
        for (int i = 0; i < n_sets; i++) printf(" %9.1f GB/s", gbs[i]);
        double mem[5];
        cpu_matvec(pool, &big, x, out, act);  // warm-up
        for (int rep = 0; rep < 5; rep++) {
            const double t = seam_now();
            cpu_matvec(pool, &big, x, out, act);
            mem[rep] = (double)big.n_bytes / (seam_now() - t) / 1e9;
        }
        qsort(mem, 5, sizeof mem[0], cmp_double);
        printf(" %11.1f GB/s\n", mem[2]);
        munmap((void *)big.data, big.n_bytes);
        free(out), free(act);
    }
    pool_destroy(pool);
    return 0;
}
