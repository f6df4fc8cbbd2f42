#!/usr/bin/env bash
# Builds seam for the emulated CUDA device (emu/: kernels/*.cu compiled by
# the host's C++ compiler and run on this CPU) into build-emu/, and runs the
# suite there (less the tests no CUDA code runs in): every CUDA kernel,
# placement (cpu, mapped, stream), graph, crossing and the cuBLAS prefill
# runs, against the CPU path and llama.cpp's logits, under the emulator's
# checks (races, barriers, shuffles, bounds, unwritten memory, stream order,
# capture rules). A fault ends the test that caused it, naming the kernel or
# call. SEAM_EMU_DEVICE picks the card (h200, the default; rtx3060; none).
# scripts/sanitize.sh runs the same suite on the emulated device under
# AddressSanitizer and UBSan, all but the split goldens, too slow there.
#
# Then the GPU tests again in build-emu-nvcc (-DSEAM_EMU_NVCC_MATH=ON): the
# kernels compiled to fuse multiply-adds where nvcc may (its default
# -fmad=true) and CUDA's expf, tanhf, sinf and cosf moved by up to their
# documented 2 ulp, so that no tolerance or bitwise claim of the GPU path
# rests on the host compiler's rounding or libm.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ -x /usr/local/cuda/bin/nvcc ]; then export CUDAToolkit_ROOT=/usr/local/cuda; fi
# configured afresh every time, as scripts/build.sh
rm -f build-emu/CMakeCache.txt
cmake -S . -B build-emu -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DSEAM_CUDA_EMU=ON -DSEAM_TESTS=ON >/dev/null
cmake --build build-emu -j "$(nproc)"
# Tests that touch no CUDA code ran in test.sh's build, and their results do
# not depend on the device: not run again here (CI's 90 minutes): the other
# kernel orders' goldens, the CPU kernels, nvcc's resource report, the
# scripts' own checks.
CPU_ONLY='^(golden_logits_(avx2|scalar_avx512)|test_cpu_kernels|kernel_resources|gpu_check_(runner|schedule)|layers|kv_state|doc_links|report|readme_figures_self_test)$'
ctest --test-dir build-emu --output-on-failure --no-tests=error -E "$CPU_ONLY"
# what a split reports of the GPU board's energy, on the emulated board's power model
build-emu/seam run -m tests/fuzz/corpus/gguf/micro-qwen3.gguf --tokens 1,2,3 -n 16 -ngl 1 --ids 2>&1 >/dev/null |
  grep 'GPU energy'
rm -f build-emu-nvcc/CMakeCache.txt
cmake -S . -B build-emu-nvcc -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DSEAM_CUDA_EMU=ON -DSEAM_EMU_NVCC_MATH=ON \
      -DSEAM_TESTS=ON >/dev/null
cmake --build build-emu-nvcc -j "$(nproc)" --target test_cuda test_engine test_golden
ctest --test-dir build-emu-nvcc --output-on-failure --no-tests=error -R '^(test_cuda|test_engine|golden_split)$'
