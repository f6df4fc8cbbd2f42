// membw.c — the read and triad probes of membw.h.
#include "cpu/membw.h"

#include <errno.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

const char *const membw_probe_name[MEMBW_PROBES] = {"read", "read+pf", "triad"};

typedef struct {
    const uint64_t *src;  // read: (n)
    double *a;            // triad: a, b, c (n / 2 each)
    const double *b, *c;
    size_t n;
    _Atomic size_t next;  // the first element of the next chunk to take; 0 before each pass
    uint64_t sums[256];   // read: one per thread, so the loads cannot be elided
} probe;

enum { CHUNK = 1 << 16 };  // elements taken at a time: 512 KiB of src

// The next chunk [lo, hi) of the n elements of src; false when none is left.
// (triad's arrays, n / 2 long, go by the halves of the same chunks.)
static bool take(probe *p, size_t *lo, size_t *hi) {
    *lo = atomic_fetch_add(&p->next, CHUNK);
    *hi = *lo + CHUNK < p->n ? *lo + CHUNK : p->n;
    return *lo < p->n;
}

// Eight independent integer sums: the compiler vectorises them (integer
// addition reassociates freely), so the loop is bound by the loads.
static inline __attribute__((always_inline)) void read_sum(probe *p, int ith, bool prefetch) {
    uint64_t acc[8] = {0};
    for (size_t lo, hi; take(p, &lo, &hi);)
        for (size_t i = lo; i + 8 <= hi; i += 8) {
            if (prefetch) __builtin_prefetch(p->src + i + 512);
            for (int k = 0; k < 8; k++) acc[k] += p->src[i + k];
        }
    uint64_t s = 0;
    for (int k = 0; k < 8; k++) s += acc[k];
    p->sums[ith] += s;
}

static void read_share(void *ctx, int ith, int nth) { (void)nth, read_sum(ctx, ith, false); }
static void read_pf_share(void *ctx, int ith, int nth) { (void)nth, read_sum(ctx, ith, true); }

static void triad_share(void *ctx, int ith, int nth) {
    (void)ith, (void)nth;
    probe *p = ctx;
    for (size_t lo, hi; take(p, &lo, &hi);)
        for (size_t i = lo / 2; i < hi / 2; i++) p->a[i] = p->b[i] + 3.0 * p->c[i];
}

static void fill_share(void *ctx, int ith, int nth) {
    (void)ith, (void)nth;
    probe *p = ctx;
    uint64_t *src = (uint64_t *)p->src;
    for (size_t lo, hi; take(p, &lo, &hi);) {
        for (size_t i = lo; i < hi; i++) src[i] = i;
        for (size_t i = lo / 2; i < hi / 2; i++) p->a[i] = 0, ((double *)p->b)[i] = 1, ((double *)p->c)[i] = 2;
    }
}

// One pass of a probe over the pool.
static void pass(seam_pool *pool, seam_pool_fn fn, probe *p) {
    atomic_store(&p->next, 0);
    pool_run(pool, fn, p);
}

static void *huge_alloc(size_t bytes) {
    void *p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) return NULL;
    madvise(p, bytes, MADV_HUGEPAGE);  // as large pages when the kernel allows: fewer TLB misses
    return p;
}

int membw_measure(seam_pool *pool, size_t bytes, int reps, membw_result *out, seam_error *e) {
    if (reps < 1 || reps > 64) return seam_fail(e, "memory probe: repetitions must be 1..64 (got %d)", reps);
    const size_t n = bytes / sizeof(uint64_t) / 8 * 8;
    if (n < 8) return seam_fail(e, "memory probe: %zu bytes is too small to measure", bytes);
    probe p = {.n = n};
    p.src = huge_alloc(n * sizeof(uint64_t));
    p.a = huge_alloc(n / 2 * sizeof(double));
    p.b = huge_alloc(n / 2 * sizeof(double));
    p.c = huge_alloc(n / 2 * sizeof(double));
    int rc = 0;
    if (!p.src || !p.a || !p.b || !p.c) {
        rc = seam_fail(e, "memory probe: cannot map %.1f GiB: %s", 2.5 * (double)bytes / (1 << 30), strerror(errno));
        goto done;
    }
    pass(pool, fill_share, &p);  // first touch by the threads that will read
    static const seam_pool_fn jobs[MEMBW_PROBES] = {read_share, read_pf_share, triad_share};
    const double moved[MEMBW_PROBES] = {(double)n * 8, (double)n * 8, (double)(n / 2) * 3 * sizeof(double)};
    for (int k = 0; k < MEMBW_PROBES; k++) {
        double gbs[64];
        pass(pool, jobs[k], &p);  // warm-up
        for (int r = 0; r < reps; r++) {
            const double t = seam_now();
            pass(pool, jobs[k], &p);
            gbs[r] = moved[k] / (seam_now() - t) / 1e9;
        }
        seam_sort_doubles(gbs, (size_t)reps);
        out->median[k] = gbs[reps / 2];
        out->best[k] = gbs[reps - 1];
    }
done:
    if (p.src) munmap((void *)p.src, n * sizeof(uint64_t));
    if (p.a) munmap(p.a, n / 2 * sizeof(double));
    if (p.b) munmap((void *)p.b, n / 2 * sizeof(double));
    if (p.c) munmap((void *)p.c, n / 2 * sizeof(double));
    return rc;
}

double membw_read_limit(const membw_result *r) {
    return r->median[MEMBW_READ] > r->median[MEMBW_READ_PF] ? r->median[MEMBW_READ] : r->median[MEMBW_READ_PF];
}
