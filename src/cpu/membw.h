// membw.h — the memory-bandwidth limit that decode is measured against.
//
// Probes over arrays far larger than the last-level cache, on a pool's
// threads (each thread its own contiguous part, first touched by the thread
// that reads it):
//   read     the sum of an array of u64: decode's access pattern, every byte
//            read once and nothing written; GB/s = bytes / time
//   read+pf  the same with software prefetch 4 KiB ahead: more misses in
//            flight per core, on machines where the hardware streamer alone
//            keeps too few
//   triad    a[i] = b[i] + s * c[i] over three arrays, counted as STREAM does
//            (24 bytes per element, write-allocate not counted)
#ifndef SEAM_CPU_MEMBW_H
#define SEAM_CPU_MEMBW_H

#include <stddef.h>

#include "base/common.h"
#include "cpu/pool.h"

typedef enum { MEMBW_READ, MEMBW_READ_PF, MEMBW_TRIAD, MEMBW_PROBES } membw_probe;

typedef struct {
    double median[MEMBW_PROBES], best[MEMBW_PROBES];  // GB/s over the repetitions
} membw_result;

extern const char *const membw_probe_name[MEMBW_PROBES];

// Each probe once to warm up (page tables, clocks), then reps times (1..64)
// over `bytes` of reading (the triad's arrays are half that each).
int membw_measure(seam_pool *pool, size_t bytes, int reps, membw_result *out, seam_error *e);

// The better of the read medians: the bandwidth decode is held to.
double membw_read_limit(const membw_result *r);

#endif
