// emu_hooks.h — what a test may ask of the emulated device (SEAM_CUDA_EMU
// builds only), beside the CUDA calls themselves. SEAM_EMU_FAIL_CAPTURE=1
// in the environment, before the first CUDA call, makes every stream
// capture end invalidated, as CUDA ends one that an unsafe call broke.
#ifndef SEAM_EMU_HOOKS_H
#define SEAM_EMU_HOOKS_H

#ifdef __cplusplus
extern "C" {
#endif

// Stream captures begun so far in this process.
int seam_emu_captures_begun(void);

#ifdef __cplusplus
}
#endif
#endif
