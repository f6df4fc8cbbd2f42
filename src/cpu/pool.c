// pool.c — the thread pool: a generation counter that opens and closes
// jobs, a count of the workers inside the open one, both waited on by
// spinning and then by Linux futexes.
//
// A job is open while `gen` is odd. pool_run publishes (fn, ctx) and makes
// `gen` odd; a worker that sees a new odd generation counts itself `inside`
// and then checks that the job is still open before it runs fn. The caller
// runs fn itself -- which returns only when the job's work is all taken --
// then closes the job (`gen` even) and waits until nobody is inside. A
// worker that was not running when the job opened (the OS gave its core to
// another process) finds the job closed and skips it: the caller never
// waits for a thread that has not started, only for one in the middle of a
// piece of work. Both checks are sequentially consistent stores followed by
// loads (the worker: inside++, then gen; the caller: gen++, then inside), so
// a worker either is seen inside or sees the job closed.
//
// A futex_wake is a system call (~1 us), so it is made only when someone has
// said it is asleep (`n_sleeping`, `caller_sleeping`), by the same
// store-then-check on both sides (futex_wait also rechecks the word).
#include "cpu/pool.h"

#include <link.h>
#include <linux/futex.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <unistd.h>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define cpu_relax() _mm_pause()
#else
#define cpu_relax() ((void)0)
#endif

// How long to spin before sleeping. A worker waits for the next job: a
// decode token's gaps between jobs (norms, rope, softmax on the caller) are
// microseconds and the gap between tokens is the sampler's, so half a
// millisecond bridges them without holding a shared core for long once work
// stops. The caller waits at the end of a job for workers that are still
// in it: a worker that runs finishes its last piece within a few
// microseconds (tens in prefill), so a longer wait means the OS has taken
// its core -- and then the caller sleeps, which frees its own core for that
// worker (the threads are not pinned, so the scheduler can move it there)
// or for the other process, instead of spinning through a time slice.
#define WORKER_SPIN 500e-6  // seconds
#define CALLER_SPIN 50e-6
#define YIELD_EVERY 64

struct seam_pool {
    int n_threads;
    pthread_t *workers;  // [n_threads - 1]; worker i runs with ith = i + 1
    seam_pool_fn fn;     // the current job
    void *ctx;
    _Atomic uint32_t gen;         // odd while a job is open, bumped to open and to close; futex word for workers
    _Atomic uint32_t inside;      // workers inside the current job; futex word for the caller
    _Atomic int n_sleeping;       // workers in (or entering) futex_wait on gen
    _Atomic int caller_sleeping;  // the caller is in (or entering) futex_wait on inside
    _Atomic bool quit;
};

typedef struct {
    seam_pool *pool;
    int ith;
} worker_arg;

// A spin-wait's clock: mostly pause instructions; every YIELD_EVERY steps a
// sched_yield, which returns at once on an idle core but hands the core
// over when the thread being waited for is runnable on it (more threads than
// cores, or cores shared with other processes): without it, a spinner holds
// the core for its whole time slice while the job waits on the thread it
// displaced.
typedef struct {
    double until;  // seam_now() at which to stop spinning and sleep
    int steps;
    bool over;
} spin_wait;

static spin_wait spin_for(double seconds) {
    return (spin_wait){.until = seam_now() + seconds};
}

// One step of the spin; false once its time is up (then sleep).
static bool spinning(spin_wait *s) {
    if (s->over) return false;
    if (++s->steps % YIELD_EVERY) {
        cpu_relax();
    } else {
        sched_yield();
        s->over = seam_now() >= s->until;
    }
    return true;
}

static void futex_wait(_Atomic uint32_t *word, uint32_t expected) {
    syscall(SYS_futex, (uint32_t *)word, FUTEX_WAIT_PRIVATE, expected, NULL, NULL, 0);
}

static void futex_wake_all(_Atomic uint32_t *word) {
    syscall(SYS_futex, (uint32_t *)word, FUTEX_WAKE_PRIVATE, 0x7fffffff, NULL, NULL, 0);
}

// Waits for a job newer than `seen` to open; returns its generation.
static uint32_t next_job(seam_pool *p, uint32_t seen) {
    uint32_t g;
    for (spin_wait s = spin_for(WORKER_SPIN); !((g = atomic_load(&p->gen)) & 1) || g == seen;) {
        if (spinning(&s)) continue;
        atomic_fetch_add(&p->n_sleeping, 1);
        if (atomic_load(&p->gen) == g) futex_wait(&p->gen, g);
        atomic_fetch_sub(&p->n_sleeping, 1);
    }
    return g;
}

static void *worker_main(void *argp) {
    const worker_arg arg = *(worker_arg *)argp;
    free(argp);
    seam_pool *p = arg.pool;
    for (uint32_t g = 0;;) {
        g = next_job(p, g);
        if (atomic_load(&p->quit)) return NULL;
        atomic_fetch_add(&p->inside, 1);
        if (atomic_load(&p->gen) == g) p->fn(p->ctx, arg.ith, p->n_threads);  // still open: take part
        if (atomic_fetch_sub(&p->inside, 1) == 1 && atomic_load(&p->caller_sleeping)) futex_wake_all(&p->inside);
    }
}

static int add_tls(struct dl_phdr_info *info, size_t size, void *sum) {
    (void)size;
    for (int i = 0; i < info->dlpi_phnum; i++)
        if (info->dlpi_phdr[i].p_type == PT_TLS) {
            const uint64_t align = info->dlpi_phdr[i].p_align ? info->dlpi_phdr[i].p_align : 1;
            *(uint64_t *)sum += (info->dlpi_phdr[i].p_memsz + align - 1) / align * align;
        }
    return 0;
}

uint64_t pool_worker_bytes(void) {
    uint64_t tls = 0;
    dl_iterate_phdr(add_tls, &tls);
    return tls + POOL_WORKER_STACK_BYTES;
}

seam_pool *pool_create(int n_threads, seam_error *e) {
    if (n_threads < 1) return seam_fail(e, "thread count must be at least 1 (got %d)", n_threads), NULL;
    seam_pool *p = calloc(1, sizeof *p);
    if (p) p->workers = calloc((size_t)n_threads, sizeof *p->workers);
    if (!p || !p->workers) {
        free(p);
        return seam_fail(e, "out of memory for a pool of %d threads", n_threads), NULL;
    }
    p->n_threads = n_threads;
    for (int i = 1; i < n_threads; i++) {
        worker_arg *arg = malloc(sizeof *arg);
        if (arg) *arg = (worker_arg){p, i};
        if (!arg || pthread_create(&p->workers[i - 1], NULL, worker_main, arg)) {
            free(arg);
            p->n_threads = i;  // the workers started so far
            pool_destroy(p);
            return seam_fail(e, "cannot start thread %d of %d for the CPU pool (lower -t)", i + 1, n_threads), NULL;
        }
    }
    return p;
}

void pool_destroy(seam_pool *p) {
    if (!p) return;
    atomic_store(&p->quit, true);
    atomic_fetch_add(&p->gen, 1);  // odd: every worker wakes, sees quit and returns
    futex_wake_all(&p->gen);
    for (int i = 0; i + 1 < p->n_threads; i++) pthread_join(p->workers[i], NULL);
    free(p->workers);
    free(p);
}

int pool_size(const seam_pool *p) {
    return p ? p->n_threads : 1;
}

void pool_run(seam_pool *p, seam_pool_fn fn, void *ctx) {
    if (!p || p->n_threads == 1) {
        fn(ctx, 0, 1);
        return;
    }
    p->fn = fn;
    p->ctx = ctx;
    atomic_fetch_add(&p->gen, 1);  // odd: open; publishes fn and ctx
    if (atomic_load(&p->n_sleeping)) futex_wake_all(&p->gen);

    fn(ctx, 0, p->n_threads);  // returns when every piece of the job is taken

    atomic_fetch_add(&p->gen, 1);  // even: closed to workers that have not come in
    uint32_t in;
    for (spin_wait s = spin_for(CALLER_SPIN); (in = atomic_load(&p->inside)) != 0;) {
        if (spinning(&s)) continue;
        atomic_store(&p->caller_sleeping, 1);
        if ((in = atomic_load(&p->inside)) != 0) futex_wait(&p->inside, in);
        atomic_store(&p->caller_sleeping, 0);
    }
}
