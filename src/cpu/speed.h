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

// Rows of 1024 weights of `type`, 256 rows (in L2): GB/s of weight bytes one
// thread's dot kernel of each of the n_sets sets reaches (gbs[n_sets]),
// the sets taking turns. 0 for a type no set can take; -1 when out of memory.
int cpu_speed_dot(uint32_t type, const cpu_kernels *const *sets, int n_sets, double *gbs);

// One thread's attention of one query head over 512 cached positions of
// head_dim 128 (f16 K and V, in cache), as decode runs it
// (cpu_attention_head): GB/s of K and V bytes.
double cpu_speed_attention(void);

// Microseconds to start and join one empty job on the pool (median of many).
double cpu_speed_pool_job(seam_pool *pool);

#endif
