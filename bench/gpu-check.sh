#!/usr/bin/env bash
# gpu-check.sh — everything a lent GPU machine should check, in one command
# that leaves room in the lease to run it again:
#
#   (here)  scripts/fetch-device-debs.sh     Criterion and utf8proc as .deb files in .device-debs/
#   (there) bash bench/gpu-check.sh          the device run: carry [".device-debs"], timeout_s 370
#           SEED=1 bash bench/gpu-check.sh   the seed experiment instead, for another call
#
# The lease is 15 minutes of device time with the machine's start (1-2
# minutes) in it. A first run always finds something, so a run must fit
# twice: no step starts after DEADLINE seconds (320) and the one running
# then is killed, so a call ends by about 330 s, inside a timeout_s of 370:
# two calls and a start, 860 s. tests/gpu_check_schedule.sh plays the
# schedule with each step's expected seconds (--expect, from the sizes of
# the work) and fails when the sanitizers would start after the deadline or
# a step needs a file that no call carries and no step makes.
#
# The order is by value: the build; compute-sanitizer's four tools over the
# kernels' tests and short split runs, at once (bench/gpu-sanitize.sh);
# the split against llama.cpp's logits (golden::split) and the GPU tests of
# the engine, the plan's memory and the CLI; then the speed steps: the split
# on a synthetic Qwen3-0.6B with its timelines, what timing the layers
# costs, its prefill through both paths (where cuBLAS starts to win), the
# workbench, the offload curve. The CPU-only tests are not run: CI runs them.
# The steps go on after a failure; the exit status is 1 when anything failed
# or the deadline cut the run short. Every GPU test runs under
# SEAM_REQUIRE_GPU=1: one that finds no device fails instead of skipping.
#
# What comes back, in $OUT (./gpu-check-out when OUT is unset): summary.txt,
# one line per check (PASS, FAIL or SKIP, seconds, the reason; a passed
# step's headline figures, a failed one's errors and the end of its log);
# results.md, the result tables; gpu-check-logs.tar.gz, every step's whole
# log, the timelines as JSON and the summary, rewritten after every step so
# that a run killed from outside still brings back what it did.
#
# The build: the carried packages are unpacked into .device-prefix (never
# into /), CMake is pointed there and the binaries find those libraries by
# their rpath -- no LD_LIBRARY_PATH, which would put Debian 12's libraries
# before the device image's own for every other program. utf8proc, which
# seam links, comes only with them: without .device-debs nothing is built.
# When the test suite does not configure, seam, seam-synth and
# seam-cuda-bench are built alone (-DSEAM_TESTS=OFF) and the speed steps
# run. The CUDA code carries -lineinfo for compute-sanitizer's reports.
set -uo pipefail
cd "$(dirname "$0")/.."
. bench/gpu-check-lib.sh

OUT=${OUT:-$PWD/gpu-check-out}
check_begin "$OUT" "${DEADLINE:-320}"
export PATH="/usr/local/cuda/bin:$PATH"
export SEAM_REQUIRE_GPU=1
J=$(nproc)
B=build-gpu
M=$B/models
PREFIX=$PWD/.device-prefix

# ---------------------------------------------------------------- the machine
step machine --limit 30 --expect 3 -- bash -c 'uname -a; grep PRETTY /etc/os-release; echo "cores: $(nproc)"
    free -g; df -h .; nvidia-smi; nvcc --version; compute-sanitizer --version; cmake --version; ninja --version
    gcc --version | head -1; ldd --version | head -1; true'

if ! check_have .device-debs; then
    check_record FAIL debs "no .device-debs/ carried (scripts/fetch-device-debs.sh): no utf8proc, so nothing builds"
    check_end
    exit 1
fi
rm -rf "$PREFIX"
step debs --limit 60 --expect 3 --makes "$PREFIX" --show '^unpacked|^FAILED|^no ' -- bash -c 'ok=0 bad=0
    for deb in .device-debs/*.deb; do
        if dpkg -x "$deb" "$1"; then ok=$((ok + 1)); else echo "FAILED to unpack $deb"; bad=$((bad + 1)); fi
    done
    echo "unpacked $ok packages into $1 ($(du -sh "$1" | cut -f1)), $bad failed"
    [ -e "$1/usr/include/criterion/criterion.h" ] || { echo "no criterion.h in $1"; bad=1; }
    exit $((bad > 0))' _ "$PREFIX"
libs="$PREFIX/usr/lib/x86_64-linux-gnu:$PREFIX/lib/x86_64-linux-gnu"
deps=(-DCMAKE_PREFIX_PATH="$PREFIX/usr" -DCMAKE_C_FLAGS="-I$PREFIX/usr/include"
      -DCMAKE_EXE_LINKER_FLAGS="-Wl,-rpath,$libs -Wl,-rpath-link,$libs")

if ((CHECK_FAKE)); then
    gpu="NVIDIA H200 (the fake run), 9.0, 143771 MiB, -"
else
    gpu=$(nvidia-smi --query-gpu=name,compute_cap,memory.total,driver_version --format=csv,noheader 2>/dev/null | head -1)
fi
if [ -z "$gpu" ]; then
    check_record FAIL device "no CUDA device: nvidia-smi is absent or lists no GPU, so nothing was built or run"
    check_end
    exit 1
fi
check_record PASS device "$gpu"
arch=$(cut -d, -f2 <<<"$gpu" | tr -d ' .')

# ---------------------------------------------------------------- the build
configure=(cmake -S . -B $B -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES="$arch"
           -DCMAKE_CUDA_FLAGS=-lineinfo "${deps[@]}")
tests=ON
[ "${SEED:-0}" = 1 ] && tests=OFF  # the seed run builds what it runs, no more
((CHECK_FAKE)) || rm -rf $B
if [ $tests = ON ] && ! step configure --limit 60 --expect 10 --needs "$PREFIX" -- "${configure[@]}"; then
    tests=OFF
    rm -rf $B
fi
[ $tests = OFF ] && step configure-no-tests --limit 60 --expect 10 --needs "$PREFIX" -- "${configure[@]}" -DSEAM_TESTS=OFF
bins=(seam seam-synth seam-cuda-bench)
[ $tests = ON ] && bins+=(test_cuda test_golden test_engine test_plan test_cli)
makes=()
for b in "${bins[@]}"; do makes+=(--makes "$B/$b"); done
if [ "${SEED:-0}" = 1 ]; then
    step build --limit 200 --expect 45 --show 'error|FAILED:' "${makes[@]}" -- \
        cmake --build $B -j "$J" --target seam seam-synth -- -k 0
else
    step build --limit 200 --expect 60 --show 'error|FAILED:' "${makes[@]}" -- \
        cmake --build $B -j "$J" --target "${bins[@]}" -- -k 0
fi

# ---------------------------------------------------------------- the seed experiment (SEED=1)
# A synthetic Qwen3-30B-A3B (48 MoE layers, 17.3 GiB), the last layers off
# the GPU in each of the three ways at 48, 44 and 24 GPU layers (the
# seed's three points); a table per placement, so that one cut off by the
# deadline leaves the others.
if [ "${SEED:-0}" = 1 ]; then
    Q30=$M/qwen3-30b-a3b.gguf
    step synth-30b --limit 200 --expect 120 --needs $B/seam-synth --makes $Q30 -- \
        bash -c 'mkdir -p "$(dirname "$2")" && "$1" models/qwen3-30b-a3b.shape -o "$2"' _ $B/seam-synth $Q30
    for mode in cpu mapped stream; do
        step "seed-$mode" --limit 60 --expect 30 --needs $B/seam --needs $Q30 --out results.md -- \
            $B/seam bench -m $Q30 -p 0 -n 16 -t "$J" -ngl 48,44,24 --overflow $mode -r 1
    done
    ((CHECK_FAKE)) || rm -f $Q30
    check_end
    exit
fi

# Synthetic models: a small dense one, two small MoE ones (moe-mixed's up
# experts are of another type than its gate experts) and Qwen3-0.6B's shape.
models=()
for s in small moe-small moe-mixed qwen3-0.6b; do models+=(--makes "$M/$s.gguf"); done
step models --limit 60 --expect 12 --needs $B/seam-synth "${models[@]}" -- bash -c 'mkdir -p "$2"
    for s in small moe-small moe-mixed qwen3-0.6b; do "$1/seam-synth" "models/$s.shape" -o "$2/$s.gguf" || exit 1; done' \
    _ $B $M
Q=$M/qwen3-0.6b.gguf

# ---------------------------------------------------------------- the sanitizers
step sanitizers --limit 150 --expect 80 --needs $B/test_cuda --needs $B/seam --needs $M/small.gguf \
    --needs $M/moe-mixed.gguf --show '^FAIL|^PASS memcheck-test_cuda' -- \
    bash bench/gpu-sanitize.sh $B $M "$CHECK_LOGS"

# ---------------------------------------------------------------- against llama.cpp, and the GPU tests
# the split's logits against llama.cpp's at every split kind, and the GPU
# prefill through cuBLAS against token by token. The real model's fixtures
# need its 250 MB file, which no call carries (64 MiB): they skip there, and
# the summary says so.
step golden-split --limit 90 --expect 25 --needs $B/test_golden --show '^\[FAIL\]|Synthesis' -- \
    $B/test_golden --verbose --filter 'golden/split' -j1
check_have models/gemma-3-270m-q4_k_m.gguf ||
    check_record SKIP golden-split-real "Gemma 3 270M is not carried (250 MB, a call carries 64 MiB): its fixtures did not run"
step gpu-tests --limit 90 --expect 20 --needs $B/test_cuda --needs $B/test_engine --needs $B/test_plan \
    --needs $B/test_cli --show '^\[FAIL\]|Synthesis' -- bash -c '"$1/test_cuda" -j1 &&
    "$1/test_engine" -j1 --filter "engine/*gpu*" && "$1/test_engine" -j1 --filter "engine/experts*" &&
    "$1/test_plan" -j1 --filter "plan/memory*" && "$1/test_cli" -j1 --filter "cli/bench_repetitions*"' _ $B

# ---------------------------------------------------------------- the split
split_run() {  # NAME SEAM-RUN-FLAGS...: 64 tokens on Qwen3-0.6B, its timeline kept
    local name=$1
    shift
    step "$name" --limit 30 --expect 4 --needs $B/seam --needs $Q \
        --show '^timeline:|^  (GPU layers|CPU layers|crossings) |NOT within|J/token' -- \
        $B/seam run -m $Q --tokens 1,2,3 -n 64 --ids --timeline "$CHECK_LOGS/timeline-$name.json" "$@"
}
for n in 0 14 28; do split_run "split-$n" -ngl $n; done
split_run split-28-no-graph -ngl 28 --no-graph
for mode in mapped stream; do split_run "$mode-14" -ngl 14 --overflow $mode; done
split_run layers-stream-14 -ngl 14 --overflow stream --layers
# what timing the layers costs the GPU's decode: the same test without and with it
for flag in "" --layers; do
    step "layers-cost${flag:+-on}" --limit 40 --expect 6 --needs $B/seam --needs $Q --out results.md -- \
        $B/seam bench -m $Q -p 0 -n 64 -t "$J" -ngl 28 -r 3 $flag
done

# ---------------------------------------------------------------- the GPU prefill: where cuBLAS wins
for mode in tokens gemm; do
    step "prefill-$mode" --limit 60 --expect 10 --needs $B/seam --needs $Q --out results.md \
        --makes "$CHECK_LOGS/prefill-$mode.log" -- \
        $B/seam bench -m $Q -p 32,64,128,512 -n 0 -t "$J" -ngl 28 --gpu-prefill $mode -r 2 -o csv
done
step prefill-crossover --limit 10 --expect 1 --needs "$CHECK_LOGS/prefill-tokens.log" \
    --needs "$CHECK_LOGS/prefill-gemm.log" --out results.md --show '^cuBLAS wins' -- \
    bash bench/prefill-crossover.sh "$CHECK_LOGS/prefill-tokens.log" "$CHECK_LOGS/prefill-gemm.log"

# ---------------------------------------------------------------- the workbench, the offload curve
step cuda-bench --limit 60 --expect 20 --needs $B/seam-cuda-bench --out results.md -- $B/seam-cuda-bench
# the curve by layer count (the mapped and streamed placements are in the split runs above)
step offload-cpu --limit 60 --expect 10 --needs $B/seam --needs $Q --out results.md -- \
    $B/seam bench -m $Q -p 0 -n 64 -t "$J" -ngl 0,14,27,28 -r 2

check_end
