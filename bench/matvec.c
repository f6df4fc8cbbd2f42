// matvec.c — the workbench of the CPU dot kernels: how fast each one turns
// weight bytes into dot products, against the bandwidth they must keep up with.
//
//   seam-matvec [-t THREADS] [-s GIB]
//
// Per weight type (random blocks, 1024-wide rows):
//   cache  one thread, a 256-row matrix that stays in L2 (cpu_speed_dot): the
//          kernel's own speed (scalar reference and the chosen fast set), per
//          second of the thread's CPU time
//   batch  the same matrix against a prefill batch of 96 inputs with the
//          fast set (cpu_speed_batch): G multiply-adds per CPU second
//   memory cpu_matvec over GIB of rows on THREADS threads: the speed decode
//          sees, to be compared with seam-membw's read bandwidth
// GB/s are weight bytes per second; each figure is the best of several runs
// (the cache figure, per CPU second) or the median (the memory figure).
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/common.h"
#include "cpu/kernels.h"
#include "cpu/ops.h"
#include "cpu/pool.h"
#include "cpu/speed.h"

enum { COLS = 1024, BATCH = 96 };

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
        "seam-matvec: %d-wide rows; cache = 1 thread in L2, best of 31 (per CPU second); batch = the same against "
        "%d inputs; memory = %.2f GiB on %d threads with the %s set, median of 5\n  %-5s",
        COLS, BATCH, gib, threads, fast->name, "type");
    for (int i = 0; i < n_sets; i++) printf(" %9s cache", sets[i]->name);
    printf(" %11s %16s\n", "batch", "memory");
    static const uint32_t types[] = {GGML_TYPE_Q4_K, GGML_TYPE_Q6_K, GGML_TYPE_Q8_0, GGML_TYPE_Q5_0,
                                     GGML_TYPE_Q4_0, GGML_TYPE_F16,  GGML_TYPE_F32};
    for (size_t k = 0; k < sizeof types / sizeof types[0]; k++) {
        const uint32_t type = types[k];
        double gbs[CPU_KERNEL_SETS];
        const double mem = cpu_speed_stream(pool, type, (uint64_t)(gib * (1 << 30)));
        const double batch = cpu_speed_batch(type, COLS, 256, BATCH);
        if (mem < 0 || batch < 0 || cpu_speed_dot(type, COLS, 256, sets, n_sets, gbs))
            return fprintf(stderr, "seam-matvec: out of memory\n"), 1;
        printf("  %-5s", ggml_type_name(type));
        for (int i = 0; i < n_sets; i++) printf(" %9.1f GB/s", gbs[i]);
        printf(" %6.1f GMAC/s", batch);
        printf(" %11.1f GB/s\n", mem);
    }
    pool_destroy(pool);
    return 0;
}
