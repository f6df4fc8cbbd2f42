#!/usr/bin/env bash
# Builds seam for the emulated CUDA device (emu/: kernels/*.cu compiled by
# the host's C++ compiler and run on this CPU) into build-emu/, and runs the
# whole suite there: every CUDA kernel,
# placement (cpu, mapped, stream), graph, crossing and the cuBLAS prefill
# runs, against the CPU path and llama.cpp's logits, under the emulator's
# checks (races, barriers, shuffles, bounds, unwritten memory, stream order,
# capture rules). A fault ends the test that caused it, naming the kernel or
# call. SEAM_EMU_DEVICE picks the card (h200, the default; rtx3060; none).
# scripts/sanitize.sh runs the same suite on the emulated device under
# AddressSanitizer and UBSan, all but the split goldens, too slow there.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ -x /usr/local/cuda/bin/nvcc ]; then export CUDAToolkit_ROOT=/usr/local/cuda; fi
# configured afresh every time, as scripts/build.sh
rm -f build-emu/CMakeCache.txt
cmake -S . -B build-emu -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DSEAM_CUDA_EMU=ON -DSEAM_TESTS=ON >/dev/null
cmake --build build-emu -j "$(nproc)"
ctest --test-dir build-emu --output-on-failure --no-tests=error
