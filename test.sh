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
ctest --test-dir build --output-on-failure
