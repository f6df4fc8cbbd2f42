// pool.h — a persistent pthreads thread pool for the CPU backend.
//
// Decode calls the pool about 200 times per token (every matvec), each job a
// few tens of microseconds, so a job must start and finish in well under a
// microsecond: workers spin briefly on a shared generation counter, with a
// pause instruction, and only then sleep on a futex; the caller works on
// every job itself instead of idling. On a machine whose cores other
// processes also want, a worker may not run for milliseconds: the pool never
// waits for one that has not started a job (see seam_pool_fn), and its
// threads are not pinned, so the scheduler can move them to whichever core
// is free.
#ifndef SEAM_CPU_POOL_H
#define SEAM_CPU_POOL_H

#include "base/common.h"

typedef struct seam_pool seam_pool;

// A job: called on the thread that called pool_run (ith 0) and on each
// worker (ith 1..nth-1) that the OS runs before the job's work is all
// taken; a worker that is late (its core given to another process) skips
// the job rather than hold the others up. So a job takes its work in
// pieces from a counter it shares (atomic_fetch_add on a field of ctx),
// never as a fixed share by ith, and returns when none is left; ith names
// per-thread scratch only.
typedef void (*seam_pool_fn)(void *ctx, int ith, int nth);

// Starts n_threads - 1 workers (n_threads >= 1). NULL with a message in e
// when threads cannot be created.
seam_pool *pool_create(int n_threads, seam_error *e);
// Stops the workers.
void pool_destroy(seam_pool *p);
int pool_size(const seam_pool *p);

// The host bytes a worker holds of its own, whatever its jobs: its copy of
// every loaded library's thread-local storage (glibc writes each thread's
// whole static TLS block when it starts it: cuBLASLt's alone is 92 KiB) and
// the stack its frames touch (POOL_WORKER_STACK_BYTES). The memory plan
// counts it for each of the n_threads - 1 workers.
uint64_t pool_worker_bytes(void);

// A worker's deepest frames: the jobs' own (the kernels' register tiles,
// the attention's chunk of weights) and the pool's, 26 KiB measured on the
// long64k shape's prefill (/proc/self/smaps: the worker's stack mapping
// less its TLS), rounded up. The AVX-512 tiles' buffers are counted apart
// (cpu_kernels.tiles_stack_bytes).
#define POOL_WORKER_STACK_BYTES (32u << 10)

// Runs fn(ctx, ith, nth) on the pool's threads as above and returns when
// every call has returned. Not reentrant: one caller, one job at a time. A
// NULL pool runs fn(ctx, 0, 1) on the calling thread.
void pool_run(seam_pool *p, seam_pool_fn fn, void *ctx);

#endif
