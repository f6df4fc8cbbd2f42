#!/usr/bin/env bash
# Builds seam for the emulated CUDA device (emu/: kernels/*.cu compiled by
# the host's C++ compiler and run on this CPU) with AddressSanitizer and
# UBSan into build-emu/, and runs the whole suite there: every CUDA kernel,
# placement (cpu, mapped, stream), graph, crossing and the cuBLAS prefill
# runs, against the CPU path and llama.cpp's logits, under the emulator's
# checks (races, barriers, shuffles, bounds, unwritten memory, stream order,
# capture rules). A fault ends the test that caused it, naming the kernel or
# call. SEAM_EMU_DEVICE picks the card (h200, the default; rtx3060; none).
set -euo pipefail
cd "$(dirname "$0")/.."
if [ -x /usr/local/cuda/bin/nvcc ]; then export CUDAToolkit_ROOT=/usr/local/cuda; fi
SAN="-fsanitize=address,undefined,float-cast-overflow -fno-sanitize-recover=all -fno-omit-frame-pointer"
# configured every time: a tree configured once with other flags is not reused as it is
cmake -S . -B build-emu -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DSEAM_CUDA_EMU=ON -DSEAM_TESTS=ON \
  -DCMAKE_C_FLAGS="$SAN" -DCMAKE_CXX_FLAGS="$SAN" -DCMAKE_EXE_LINKER_FLAGS="$SAN" >/dev/null
cmake --build build-emu -j "$(nproc)"
export ASAN_OPTIONS=detect_leaks=1:abort_on_error=0:strict_string_checks=1:detect_stack_use_after_return=1
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
ctest --test-dir build-emu --output-on-failure --no-tests=error
