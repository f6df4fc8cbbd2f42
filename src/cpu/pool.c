// pool.c — the thread pool: a generation counter to start jobs, a countdown
// to finish them, both waited on by spinning and then by Linux futexes.
//
// Start: pool_run publishes (fn, ctx), sets `pending` to the number of
// workers and bumps `gen`; each worker waits for `gen` to move past the last
// generation it ran. Finish: each worker decrements `pending`; the caller,
// after its own share, waits for zero. A futex_wake is a system call (~1 us),
// so it is made only when someone has said it is asleep (`n_sleeping`,
// `caller_sleeping`): the store-then-check on both sides is sequentially
// consistent, so a sleeper either sees the new value before it sleeps or is
// seen and woken (futex_wait also rechecks the word atomically).
#include "cpu/pool.h"

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

// How long to spin before sleeping. A decode token's gaps between jobs
// (norms, rope, softmax on the caller) are microseconds; the gap between
// tokens is the sampler's. 2^14 pauses is ~1 ms on recent Xeons (a pause is
// ~140 cycles there) and less elsewhere: long enough to bridge a token's
// gaps, short enough not to hold a shared core for long once work stops.
#define SPIN_LIMIT (1 << 14)
#define YIELD_EVERY 64

struct seam_pool {
    int n_threads;
    pthread_t *workers;  // [n_threads - 1]; worker i runs share ith = i + 1
    seam_pool_fn fn;     // the current job
    void *ctx;
    _Atomic uint32_t gen;         // bumped once per job; futex word for workers
    _Atomic uint32_t pending;     // workers still running the current job; futex word for the caller
    _Atomic int n_sleeping;       // workers in (or entering) futex_wait on gen
    _Atomic int caller_sleeping;  // the caller is in (or entering) futex_wait on pending
    _Atomic bool quit;
    bool caller_pinned;      // pool_create pinned its caller: pool_destroy gives it back caller_mask
    cpu_set_t caller_mask;   // the caller's affinity before
};

typedef struct {
    seam_pool *pool;
    int ith;
    bool pin;
    cpu_set_t allowed;  // the CPUs the pool was made with: worker ith takes the ith
} worker_arg;

// One step of a spin-wait. Mostly a pause; every YIELD_EVERY steps a
// sched_yield, which returns at once on an idle core but hands the core
// over when the thread being waited for is runnable on it (more threads than
// cores, or cores shared with other processes): without it, a spinner holds
// the core for its whole time slice while the job waits on the thread it
// displaced.
static inline void relax(int spin) {
    if (spin % YIELD_EVERY == YIELD_EVERY - 1)
        sched_yield();
    else
        cpu_relax();
}

static void futex_wait(_Atomic uint32_t *word, uint32_t expected) {
    syscall(SYS_futex, (uint32_t *)word, FUTEX_WAIT_PRIVATE, expected, NULL, NULL, 0);
}

static void futex_wake_all(_Atomic uint32_t *word) {
    syscall(SYS_futex, (uint32_t *)word, FUTEX_WAKE_PRIVATE, 0x7fffffff, NULL, NULL, 0);
}

// Pins the calling thread to the ith CPU of `allowed` (the creator's
// affinity mask), so that the kernel does not migrate a thread (and its warm
// L2) mid-token.
static void pin_to(const cpu_set_t *allowed, int ith) {
    cpu_set_t one;
    for (int cpu = 0, seen = 0; cpu < CPU_SETSIZE; cpu++) {
        if (!CPU_ISSET(cpu, allowed) || seen++ != ith) continue;
        CPU_ZERO(&one);
        CPU_SET(cpu, &one);
        pthread_setaffinity_np(pthread_self(), sizeof one, &one);
        return;
    }
}

static void *worker_main(void *argp) {
    const worker_arg arg = *(worker_arg *)argp;
    free(argp);
    seam_pool *p = arg.pool;
    if (arg.pin) pin_to(&arg.allowed, arg.ith);
    uint32_t seen = 0;
    for (;;) {
        uint32_t g;
        for (int spin = 0; (g = atomic_load(&p->gen)) == seen; spin++) {
            if (spin < SPIN_LIMIT) {
                relax(spin);
                continue;
            }
            atomic_fetch_add(&p->n_sleeping, 1);
            if (atomic_load(&p->gen) == seen) futex_wait(&p->gen, seen);
            atomic_fetch_sub(&p->n_sleeping, 1);
        }
        seen = g;
        if (atomic_load(&p->quit)) return NULL;
        p->fn(p->ctx, arg.ith, p->n_threads);
        if (atomic_fetch_sub(&p->pending, 1) == 1 && atomic_load(&p->caller_sleeping)) futex_wake_all(&p->pending);
    }
}

seam_pool *pool_create(int n_threads, seam_error *e) {
    if (n_threads < 1) return seam_fail(e, "thread count must be at least 1 (got %d)", n_threads), NULL;
    seam_pool *p = calloc(1, sizeof *p);
    if (p) p->workers = calloc((size_t)n_threads, sizeof *p->workers);
    if (!p || !p->workers) {
        free(p);
        return seam_fail(e, "out of memory for a pool of %d threads", n_threads), NULL;
    }
    // Pin only when every thread can have a CPU of its own; otherwise the
    // scheduler must be free to share them out.
    cpu_set_t allowed;
    CPU_ZERO(&allowed);
    const bool pin =
        n_threads > 1 && !sched_getaffinity(0, sizeof allowed, &allowed) && CPU_COUNT(&allowed) >= n_threads;
    p->n_threads = n_threads;
    for (int i = 1; i < n_threads; i++) {
        worker_arg *arg = malloc(sizeof *arg);
        if (arg) *arg = (worker_arg){p, i, pin, allowed};
        if (!arg || pthread_create(&p->workers[i - 1], NULL, worker_main, arg)) {
            free(arg);
            p->n_threads = i;  // the workers started so far
            pool_destroy(p);
            return seam_fail(e, "cannot start thread %d of %d for the CPU pool (lower -t)", i + 1, n_threads), NULL;
        }
    }
    if (pin) {
        p->caller_pinned = true;
        p->caller_mask = allowed;
        pin_to(&allowed, 0);
    }
    return p;
}

void pool_destroy(seam_pool *p) {
    if (!p) return;
    atomic_store(&p->quit, true);
    atomic_fetch_add(&p->gen, 1);
    futex_wake_all(&p->gen);
    for (int i = 0; i + 1 < p->n_threads; i++) pthread_join(p->workers[i], NULL);
    // the caller's CPUs back, or the next pool it makes would see only one
    if (p->caller_pinned) pthread_setaffinity_np(pthread_self(), sizeof p->caller_mask, &p->caller_mask);
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
    atomic_store(&p->pending, (uint32_t)(p->n_threads - 1));
    atomic_fetch_add(&p->gen, 1);  // publishes fn, ctx and pending
    if (atomic_load(&p->n_sleeping)) futex_wake_all(&p->gen);

    fn(ctx, 0, p->n_threads);

    uint32_t left;
    for (int spin = 0; (left = atomic_load(&p->pending)) != 0; spin++) {
        if (spin < SPIN_LIMIT) {
            relax(spin);
            continue;
        }
        atomic_store(&p->caller_sleeping, 1);
        if ((left = atomic_load(&p->pending)) != 0) futex_wait(&p->pending, left);
        atomic_store(&p->caller_sleeping, 0);
    }
}
