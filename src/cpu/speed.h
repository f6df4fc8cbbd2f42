// speed.h — the CPU's own speeds, beside the memory bandwidth of membw.h:
// how fast the kernels turn bytes into results when the bytes are already
// in cache, and what the thread pool costs per job. These are the compute
// roofs of decode's CPU side; the predictor (predict.c) reads them from a
// hardware profile, and `seam plan --hw this` measures them (hw.c).
//
// Each figure is per second of the measuring thread's own CPU time, the best
// of many short runs: on a machine shared with other work, that is the
// kernel's speed, not the neighbours'.
#ifndef SEAM_CPU_SPEED_H
#define SEAM_CPU_SPEED_H

#include <stdint.h>

#include "cpu/kernels.h"
#include "cpu/pool.h"
#include "model/model.h"

// A matrix of `rows` rows of `cols` weights of `type` (small enough to stay
// in a cache): GB/s of weight bytes one thread's dot kernel of each of the n_sets
// sets reaches (gbs[n_sets]), the sets taking turns. -1 when out of memory.
int cpu_speed_dot(uint32_t type, int64_t cols, int rows, const cpu_kernels *const *sets, int n_sets, double *gbs);

// Such a matrix on every thread of the pool at once, each thread its own,
// through the chosen set's dot: GB/s of weight bytes a thread reaches while
// all of them compute (cores that share their resources reach less than one
// alone), per wall-clock second, the median of 31 runs, the median of the
// threads. Decode's speed on weights in cache. -1 when out of memory.
double cpu_speed_dot_all(seam_pool *pool, uint32_t type, int64_t cols, int rows);

// The same matrix against a prefill batch of n_act inputs through the
// chosen set's dot (its tiles): G multiply-adds per second, the best of 15
// runs; -1 when out of memory.
double cpu_speed_batch(uint32_t type, int64_t cols, int rows, int n_act);

// cpu_matvec over `bytes` of rows of 1024 weights of `type` (far larger than
// the caches), one call on the pool's threads as the output head is: GB/s
// of weight bytes streamed from memory through the kernels, the median of 15
// after a warm-up; -1 when out of memory. The read bandwidth less what the
// kernels' own work keeps the threads from reading; a call's start and
// finish are apart (cpu_speed_matvec_jobs).
double cpu_speed_stream(seam_pool *pool, uint32_t type, uint64_t bytes);

// Decode's attention (cpu_attention, one query position) on every thread
// of the pool at once, over f16 caches of 1024 positions of head_dim in
// layers of 4 KV heads per thread, cycled over at least min_bytes (make it
// larger than the last-level cache: a model's cache was last read a token
// ago), each KV head shared by `group` query heads (GQA): nanoseconds a
// thread takes for one KV head's position (its group's queries together),
// the median of 7 cycles after a warm-up; -1 when out of memory.
double cpu_speed_attention(seam_pool *pool, int group, int head_dim, uint64_t min_bytes);

// What a matvec costs beyond its rows' dots, in decode's rhythm: 128
// distinct matrices of 256 rows of 256 Q4_K weights (4.5 MiB, a small
// model's layers) multiplied in a chain, each output RMS-normed on the
// calling thread into the next input (as decode's next step reads it: the
// rows a worker computed come back to the caller) and 2 us of the caller's
// own work before the next (decode's norms, rope, routing: the workers spin
// and yield meanwhile), 41 cycles of the chain
// on one thread and on the pool in turns. *call_us: a call on one thread
// (the input's quantisation, the caches warming to a matrix not read
// since the last token, the norm), the median cycle less its rows' time
// (cpu_matmul_schedule_us, a row taking row_ns + bytes / dot_gbs:
// cpu_speed_dot_all's figures). *job_us: what the pool adds to a call
// beyond its rows' grabs over the threads (the workers wake_us late) -- the
// job's start and join, the input and the output crossing between cores --
// the median of the cycles' differences of the two. Either may come out
// negative (noise). -1 when out of memory.
int cpu_speed_matvec_jobs(seam_pool *pool, double dot_gbs, double row_ns, double wake_us, double *call_us,
                          double *job_us);

// The chosen set's int8 roof (its int8_probe, kernels.h) on every thread
// of the pool at once: G byte multiply-adds per wall-clock second, the
// best of 7 runs of about 20 ms each (the roof is what the cores give when
// nothing else takes them); 0 where the set has no probe (scalar). The
// share of it prefill reaches is `seam bench`'s measure of its tiles.
double cpu_speed_int8_peak(seam_pool *pool);

// How long after a job opens the first worker comes in (the caller has
// the job to itself until then), the workers kept awake as decode keeps
// them (jobs 2 us of the caller's own work apart): microseconds, the mean
// of 4001 jobs less their slowest 1%; 0 on a pool of one thread.
double cpu_speed_wake(seam_pool *pool);

// When a pool job's work ends: n pieces taken in order, each by the thread
// free first (the threads take work from one counter), piece i taking
// piece_us[i]; the caller starts at 0, each of the other threads wake_us
// later. Microseconds.
double cpu_schedule_us(int threads, double wake_us, int n, const double *piece_us);

// The same for a matmul job over the rows of w[0..n) as cpu_matmul_items
// shares them (grabs of cpu_matvec_grab rows), a row of w[i] taking row_us[i].
double cpu_matmul_schedule_us(int threads, double wake_us, int n, const seam_tensor *const *w, const double *row_us);

#endif
