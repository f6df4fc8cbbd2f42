#!/usr/bin/env bash
# Installs the dependencies and the default model, builds seam and runs the
# whole test suite (the golden tests compare with llama.cpp on that model).
set -euo pipefail
cd "$(dirname "$0")"
scripts/deps.sh
models/get-default-model.sh
scripts/build.sh
ctest --test-dir build --output-on-failure
