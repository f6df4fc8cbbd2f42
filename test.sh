#!/usr/bin/env bash
# Installs the dependencies, the default model and the real vocabularies the
# tokenizer fixtures use, builds seam and runs the
# whole test suite (the golden tests compare with llama.cpp on that model).
set -euo pipefail
cd "$(dirname "$0")"
scripts/deps.sh
models/get-default-model.sh
models/get-vocabs.sh
scripts/build.sh
# What this script installs must be there, and the SIMD kernels this CPU
# runs must be compared: a test that would skip for want of them fails.
export SEAM_REQUIRE_INPUTS=1 SEAM_REQUIRE_SIMD=1
ctest --test-dir build --output-on-failure --no-tests=error
