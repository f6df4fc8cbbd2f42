#!/usr/bin/env bash
# The main job: install what seam needs, build it, install the default model
# (Gemma 3 270M Q4_K_M), and generate with a chosen GPU layer count; then
# draw one token of the run (GPU, bus and CPU lanes against time) into
# run-out/token.svg and .png beside its timeline.
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
mkdir -p run-out
./build/seam run -m models/gemma-3-270m-q4_k_m.gguf -p "$PROMPT" -n "${N:-64}" -ngl "$NGL" \
  --timeline run-out/timeline.json
/usr/bin/python3 tools/plot.py waterfall --timeline run-out/timeline.json --token 1 -o run-out/token >&2
echo "run.sh: this run's token drawn in run-out/token.svg (and .png), from run-out/timeline.json" >&2
