// pool.h — a persistent pthreads thread pool for the CPU backend.
//
// Decode calls the pool about 200 times per token (every matvec), each job a
// few tens of microseconds, so a job must start and finish in well under a
// microsecond: workers spin briefly on a shared generation counter, with a
// pause instruction, and only then sleep on a futex; the caller runs share 0
// of every job itself instead of idling.
#ifndef SEAM_CPU_POOL_H
#define SEAM_CPU_POOL_H

#include "common.h"

typedef struct seam_pool seam_pool;

// A job: called once on each of the pool's nth threads with ith = 0..nth-1;
// ith 0 is the thread that called pool_run.
typedef void (*seam_pool_fn)(void *ctx, int ith, int nth);

// Starts n_threads - 1 workers (n_threads >= 1), pinned one per CPU of the
// caller's affinity mask when there are enough CPUs, the caller to the first
// (failures to pin are ignored). NULL with a message in e when threads
// cannot be created.
seam_pool *pool_create(int n_threads, seam_error *e);
// Stops the workers; called from the thread that created the pool, it gives
// that thread back the CPUs it had before (so that a later pool can pin).
void pool_destroy(seam_pool *p);
int pool_size(const seam_pool *p);

// Runs fn(ctx, ith, nth) on every thread of the pool and returns when all have
// returned. Not reentrant: one caller, one job at a time. A NULL pool runs
// fn(ctx, 0, 1) on the calling thread.
void pool_run(seam_pool *p, seam_pool_fn fn, void *ctx);

#endif
