#!/usr/bin/env bash
# The main job: install what seam needs, build it, install the default model
# (Gemma 3 270M Q4_K_M), and generate with a chosen GPU layer count, every
# layer timed; then, in run-out/: one token of the run drawn (GPU, bus and
# CPU lanes against time: token.svg and .png), the run as a trace for a
# timeline viewer (trace.json: Perfetto, chrome://tracing), and a page
# (report.html) with the model's split on a GPU profile predicted at every
# layer count beside this run, measured -- on any machine, a GPU or none.
#
#   ./run.sh                     # -ngl auto: as many layers as fit (0 without a GPU)
#   NGL=9 PROMPT="..." ./run.sh  # a chosen split and prompt
#   HW=rtx4090 ./run.sh          # the GPU profile the page predicts on (models/hw) [rtx3060-seed]
set -euo pipefail
cd "$(dirname "$0")"
scripts/deps.sh
scripts/build.sh
models/get-default-model.sh
NGL="${NGL:-auto}"
PROMPT="${PROMPT:-The three most important ideas in computer science are}"
mkdir -p run-out
MODEL=models/gemma-3-270m-q4_k_m.gguf
./build/seam run -m "$MODEL" -p "$PROMPT" -n "${N:-64}" -ngl "$NGL" --layers \
  --timeline run-out/timeline.json --trace run-out/trace.json
/usr/bin/python3 tools/plot.py waterfall --timeline run-out/timeline.json --token 1 -o run-out/token >&2
./build/seam plan -m "$MODEL" -ngl 0-18 --hw "${HW:-rtx3060-seed}" --json run-out/layers.json 2>/dev/null >&2
/usr/bin/python3 tools/report.py --pred run-out/layers.json --timeline run-out/timeline.json \
  -o run-out/report.html >&2
echo "run.sh: in run-out/: token.svg (and .png), this run's token drawn; trace.json, the run for Perfetto or" \
     "chrome://tracing; report.html, the split on ${HW:-rtx3060-seed} predicted beside this run (open it in a browser)" >&2
