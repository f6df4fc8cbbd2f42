#!/usr/bin/env bash
# Builds the test suite with AddressSanitizer and UndefinedBehaviorSanitizer
# into build-asan/, for the emulated CUDA device (emu/), and runs it: any
# out-of-bounds access, leak, use after free or undefined behaviour fails the
# test that caused it (a leak through tests/helpers.c's check after each test
# body), in the CPU path and in every CUDA kernel and call. The split goldens
# are left to scripts/emulate.sh (without sanitizers: under them they take
# half an hour): their kernels are test_cuda's, which run here; so is the
# scalar reference's AVX-512-order golden run (minutes under them), whose
# scalar kernels test_cpu_kernels runs here.
set -euo pipefail
cd "$(dirname "$0")/.."
# float-cast-overflow (a float too big for, or NaN into, an integer) is part
# of clang's "undefined" but not of GCC's, so it is named.
SAN="-fsanitize=address,undefined,float-cast-overflow -fno-sanitize-recover=all -fno-omit-frame-pointer"
# Configured afresh every time, as scripts/build.sh: a cache configured
# without the sanitizers must not pass for this build.
rm -f build-asan/CMakeCache.txt
cmake -S . -B build-asan -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DSEAM_CUDA_EMU=ON \
  -DCMAKE_C_FLAGS="$SAN" -DCMAKE_CXX_FLAGS="$SAN" -DCMAKE_EXE_LINKER_FLAGS="$SAN" >/dev/null
cmake --build build-asan -j "$(nproc)"
# Criterion forks a process per test: a sanitizer report ends that test with
# a non-zero status, which Criterion counts as a failure.
export ASAN_OPTIONS=detect_leaks=1:abort_on_error=0:strict_string_checks=1:detect_stack_use_after_return=1
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
# (kernel_resources is nvcc's report on the kernels, no program of ours runs in it)
ctest --test-dir build-asan --output-on-failure --no-tests=error -E '^(golden_(split|logits_scalar_avx512)|kernel_resources)$'
