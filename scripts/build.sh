#!/usr/bin/env bash
# Configures and builds seam into build/ (CUDA backend when nvcc is found).
set -euo pipefail
cd "$(dirname "$0")/.."
if ! command -v nvcc >/dev/null && [ -x /usr/local/cuda/bin/nvcc ]; then
  export PATH="/usr/local/cuda/bin:$PATH"
fi
# Configured afresh every time (a few seconds; ninja then rebuilds only what
# changed): a cache left by another configuration (tests off, a sanitizer,
# other flags) must not be built as if it were this one.
rm -f build/CMakeCache.txt
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release "$@" >/dev/null
cmake --build build -j "$(nproc)"
