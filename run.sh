#!/usr/bin/env bash
# The main job: install what seam needs, build it, install the default model
# (Gemma 3 270M Q4_K_M), and generate with a chosen GPU layer count.
#
#   ./run.sh                     # -ngl auto: as many layers as fit (0 without a GPU)
#   NGL=9 PROMPT="..." ./run.sh  # a chosen split and prompt
set -euo pipefail
cd "$(dirname "$0")"
scripts/deps.sh
scripts/build.sh
models/get-default-model.sh
NGL="${NGL:-auto}"
PROMPT="${PROMPT:-The three most important ideas in computer science are}"
exec ./build/seam run -m models/gemma-3-270m-q4_k_m.gguf -p "$PROMPT" -n "${N:-64}" -ngl "$NGL"
