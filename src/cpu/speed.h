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

// A matrix of `rows` rows of `cols` weights of `type` (small enough to stay
// in a cache): GB/s of weight bytes one thread's dot kernel of each of the n_sets
// sets reaches (gbs[n_sets]), the sets taking turns. -1 when out of memory.
int cpu_speed_dot(uint32_t type, int64_t cols, int rows, const cpu_kernels *const *sets, int n_sets, double *gbs);

// The same matrix against a prefill batch of n_act inputs through the
// chosen set's dot (its tiles): G multiply-adds per second, the best of 15
// runs; -1 when out of memory.
double cpu_speed_batch(uint32_t type, int64_t cols, int rows, int n_act);

// cpu_matvec over `bytes` of rows of 1024 weights of `type` (far larger than
// the caches), one call per MiB of rows, on the pool's threads: GB/s of
// weight bytes streamed from memory through the kernels, the median of 5
// after a warm-up; -1 when out of memory. What decode's matrices reach: the
// read bandwidth, less what the kernels' own work and each call's start and
// finish keep the threads from reading.
double cpu_speed_stream(seam_pool *pool, uint32_t type, uint64_t bytes);

// One thread's attention of one query head over 512 cached positions of
// head_dim (f16 K and V), as decode runs it (cpu_attention_head), cycled
// over 32 layers' caches (past the L2, as a model's are): GB/s of K and V
// bytes, the best of 9 cycles.
double cpu_speed_attention(int head_dim);

// What one matvec call costs beyond its blocks and rows: cpu_matvec cycled
// over 128 distinct matrices of 256 rows of 256 Q4_K weights (4.5 MiB, a
// small model's layers) on the pool, the time per call less the dot kernels'
// time for its bytes and rows (dot_gbs, row_ns: cpu_speed_dot's figures)
// shared among the threads; microseconds, the median of 15 cycles. The
// input's quantisation, the job's start and join, the caches warming to a
// matrix not read since the last token.
double cpu_speed_matvec_call(seam_pool *pool, double dot_gbs, double row_ns);

#endif
