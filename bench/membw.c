// membw.c — the memory-bandwidth limit that decode is measured against.
//
//   seam-membw [-t THREADS] [-s GIB] [-r REPS]
//
// Two probes over arrays far larger than the last-level cache, run on seam's
// own thread pool with 1 thread and then with THREADS (default: every CPU):
//   read   sum of a GIB-sized array of u64 (decode's access pattern: every
//          weight byte read once, nothing written); GB/s = bytes / time
//   read+pf  the same with software prefetch ahead, as seam's kernels do
//   triad  a[i] = b[i] + s * c[i] over three arrays of GIB/2 each, counted
//          as STREAM does (24 bytes per element, write-allocate not counted)
// Each probe runs REPS times after one warm-up; the median and the best are
// printed. Decode's target is a fraction of the read median.
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "common.h"
#include "cpu/pool.h"

typedef struct {
    const uint64_t *src;  // read: (n)
    double *a;            // triad: a, b, c (n each)
    const double *b, *c;
    size_t n;
    uint64_t sums[256];  // read: one per thread, so the loads cannot be elided
} probe;

// This thread's contiguous part [lo, hi) of n elements.
static void share(size_t n, int ith, int nth, size_t *lo, size_t *hi) {
    *lo = n * (size_t)ith / (size_t)nth;
    *hi = n * (size_t)(ith + 1) / (size_t)nth;
}

// Eight independent integer sums: the compiler vectorises them (integer
// addition reassociates freely), so the loop is bound by the loads.
static void read_share(void *ctx, int ith, int nth) {
    probe *p = ctx;
    size_t lo, hi;
    share(p->n, ith, nth, &lo, &hi);
    uint64_t acc[8] = {0};
    for (size_t i = lo; i + 8 <= hi; i += 8)
        for (int k = 0; k < 8; k++) acc[k] += p->src[i + k];
    uint64_t s = 0;
    for (int k = 0; k < 8; k++) s += acc[k];
    p->sums[ith] = s;
}

// The same sum with software prefetch 4 KiB ahead, as the dot kernels do
// (src/cpu/simd_x86.h): one core keeps more misses in flight that way, so
// this is the read bandwidth decode can actually reach.
static void read_pf_share(void *ctx, int ith, int nth) {
    probe *p = ctx;
    size_t lo, hi;
    share(p->n, ith, nth, &lo, &hi);
    uint64_t acc[8] = {0};
    for (size_t i = lo; i + 8 <= hi; i += 8) {
        __builtin_prefetch(p->src + i + 512);
        for (int k = 0; k < 8; k++) acc[k] += p->src[i + k];
    }
    uint64_t s = 0;
    for (int k = 0; k < 8; k++) s += acc[k];
    p->sums[ith] = s;
}

static void triad_share(void *ctx, int ith, int nth) {
    probe *p = ctx;
    size_t lo, hi;
    share(p->n, ith, nth, &lo, &hi);
    for (size_t i = lo; i < hi; i++) p->a[i] = p->b[i] + 3.0 * p->c[i];
}

static void fill_share(void *ctx, int ith, int nth) {
    probe *p = ctx;
    size_t lo, hi;
    share(p->n, ith, nth, &lo, &hi);
    uint64_t *src = (uint64_t *)p->src;
    for (size_t i = lo; i < hi; i++) src[i] = i;
    share(p->n / 2, ith, nth, &lo, &hi);
    for (size_t i = lo; i < hi; i++) p->a[i] = 0, ((double *)p->b)[i] = 1, ((double *)p->c)[i] = 2;
}

static int cmp_double(const void *x, const void *y) {
    const double a = *(const double *)x, b = *(const double *)y;
    return (a > b) - (a < b);
}

// Runs job reps + 1 times; prints the median and best GB/s of bytes per run.
static void measure(const char *name, seam_pool *pool, seam_pool_fn job, probe *p, double bytes, int reps) {
    double gbs[64];
    pool_run(pool, job, p);  // warm-up: page tables, frequency
    for (int r = 0; r < reps; r++) {
        const double t = seam_now();
        pool_run(pool, job, p);
        gbs[r] = bytes / (seam_now() - t) / 1e9;
    }
    qsort(gbs, (size_t)reps, sizeof gbs[0], cmp_double);
    printf("  %-7s %2d thread%s  median %6.1f GB/s  best %6.1f GB/s\n", name, pool_size(pool),
           pool_size(pool) == 1 ? " " : "s", gbs[reps / 2], gbs[reps - 1]);
}

static void *huge_alloc(size_t bytes) {
    void *p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) return NULL;
    madvise(p, bytes, MADV_HUGEPAGE);  // as large pages when the kernel allows: fewer TLB misses
    return p;
}

int main(int argc, char **argv) {
    int threads = (int)sysconf(_SC_NPROCESSORS_ONLN), reps = 9;
    double gib = 1.0;
    for (int i = 1; i < argc; i++) {
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(argv[i], "-t") && v)
            threads = atoi(v), i++;
        else if (!strcmp(argv[i], "-s") && v)
            gib = atof(v), i++;
        else if (!strcmp(argv[i], "-r") && v)
            reps = atoi(v), i++;
        else {
            fprintf(stderr, "usage: seam-membw [-t THREADS] [-s GIB] [-r REPS]\n");
            return 2;
        }
    }
    if (threads < 1 || threads > 256 || reps < 1 || reps > 64 || !(gib > 0)) {
        fprintf(stderr, "seam-membw: want 1 <= -t <= 256, 1 <= -r <= 64, -s > 0\n");
        return 2;
    }
    const size_t n = (size_t)(gib * (1 << 30)) / sizeof(uint64_t) / 8 * 8;
    probe p = {.n = n};
    p.src = huge_alloc(n * sizeof(uint64_t));
    p.a = huge_alloc(n / 2 * sizeof(double));
    p.b = huge_alloc(n / 2 * sizeof(double));
    p.c = huge_alloc(n / 2 * sizeof(double));
    if (!p.src || !p.a || !p.b || !p.c) {
        fprintf(stderr, "seam-membw: cannot map %.1f GiB (lower -s): %s\n", 2.5 * gib, strerror(errno));
        return 1;
    }
    printf("seam-membw: read %.2f GiB, triad 3 x %.2f GiB, %d reps, median and best\n", gib, gib / 2, reps);
    const int counts[2] = {1, threads};
    for (int k = 0; k < (threads > 1 ? 2 : 1); k++) {
        seam_error err = {{0}};
        seam_pool *pool = pool_create(counts[k], &err);
        if (!pool) {
            fprintf(stderr, "seam-membw: %s\n", err.msg);
            return 1;
        }
        pool_run(pool, fill_share, &p);  // first touch by the threads that will read
        measure("read", pool, read_share, &p, (double)n * sizeof(uint64_t), reps);
        measure("read+pf", pool, read_pf_share, &p, (double)n * sizeof(uint64_t), reps);
        probe t = p;
        t.n = n / 2;
        measure("triad", pool, triad_share, &t, (double)(n / 2) * 3 * sizeof(double), reps);
        pool_destroy(pool);
    }
    return 0;
}
