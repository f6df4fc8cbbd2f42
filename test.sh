#!/usr/bin/env bash
# Installs the dependencies, builds seam and runs the whole test suite.
set -euo pipefail
cd "$(dirname "$0")"
scripts/deps.sh
scripts/build.sh
ctest --test-dir build --output-on-failure
