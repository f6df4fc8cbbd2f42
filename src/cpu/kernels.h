// kernels.h — the CPU backend's inner loops, chosen once by CPU feature.
//
// Each kernel computes exactly what its scalar reference computes (the
// reference is named beside it); tests/test_cpu_kernels.c holds them to it.
#ifndef SEAM_CPU_KERNELS_H
#define SEAM_CPU_KERNELS_H

#include <stdint.h>

#include "quant.h"

// One row of n weights of `type` . n activations already quantised to
// seam_vec_dot_type(type): the contract (and signature) of seam_vec_dot, so
// that the reference itself is the scalar kernel of every type.
typedef float (*cpu_dot_fn)(uint32_t type, const void *w, const void *act, int64_t n);

// acc[i] += (double)(a * x[i]) for i < n: one position's value row folded
// into an attention head's output (reference: cpu_axpy_f16_ref in ops.c).
typedef void (*cpu_axpy_f16_fn)(double *acc, float a, const seam_f16 *x, int n);

typedef struct {
    const char *name;                 // "avx2", "scalar": which set was chosen
    cpu_dot_fn dot[GGML_TYPE_COUNT];  // per weight type; every supported type is set
    cpu_axpy_f16_fn axpy_f16;
} cpu_kernels;

// The fastest kernels this CPU runs, with the scalar reference filling every
// gap; decided on the first call (thread-safe), then a constant.
const cpu_kernels *cpu_kernels_get(void);

// The scalar set: seam_vec_dot for every type. Tests compare against it.
const cpu_kernels *cpu_kernels_scalar(void);

// The AVX2 + FMA + F16C kernels (matvec_avx2.c): fills dot[] for the types
// it covers and axpy_f16. Call only when the CPU has those features.
void cpu_kernels_fill_avx2(cpu_kernels *k);

#endif
