#!/usr/bin/env bash
# gpu-check.sh — everything a lent GPU machine should check, in one command
# that ends, with its logs, well inside the device tool's 600 s:
#
#   (here)  scripts/fetch-device-debs.sh     Criterion and utf8proc as .deb files in .device-debs/
#   (there) bash bench/gpu-check.sh          the device run: carry [".device-debs"], timeout_s 600
#           SEED=1 bash bench/gpu-check.sh   the seed experiment instead, for another call
#
# What comes back, in $OUT (./gpu-check-out when OUT is unset): summary.txt,
# one line per check (PASS, FAIL or SKIP, seconds, the reason; a passed
# step's headline figures, a failed one's errors and the end of its log);
# results.md, the result tables (the CUDA workbench, the offload curve, the
# seed curve); gpu-check-logs.tar.gz, every step's whole log, the timelines
# as JSON and the summary, rewritten after every step so that a run killed
# from outside still brings back what it did.
#
# Limits it keeps: no step starts after DEADLINE seconds (480), and the one
# running then is killed; each step has its own limit too. The order is by
# value: the build, the CUDA kernels against the C reference, the golden
# split with the GPU prefill's GEMM path against its token path, the split
# on a synthetic Qwen3-0.6B with its timelines, its prefill through both
# paths by prompt length (where cuBLAS starts to win), the workbench, the
# whole test suite, memcheck over short runs, the offload curve, memcheck
# over the kernels' tests. The steps go on after a failure; the exit status is 1 when
# anything failed or the deadline cut the run short. On a machine without a
# CUDA device it stops after describing the machine, says so, and exits 1.
#
# The build: the carried packages are unpacked into .device-prefix (never
# into /) and CMake pointed there; when .device-debs is absent, a package
# fails to unpack or configuring with the tests fails, the build goes on with
# -DSEAM_TESTS=OFF, which needs only utf8proc (carried too) and still builds
# seam, seam-synth and seam-cuda-bench. ninja -k 0 builds every target it
# can; the CUDA code carries -lineinfo for compute-sanitizer's reports.
set -uo pipefail
cd "$(dirname "$0")/.."
. bench/gpu-check-lib.sh

OUT=${OUT:-$PWD/gpu-check-out}
check_begin "$OUT" "${DEADLINE:-480}"
export PATH="/usr/local/cuda/bin:$PATH"
J=$(nproc)
B=build-gpu
M=$B/models
PREFIX=$PWD/.device-prefix

# ---------------------------------------------------------------- the machine
step machine --limit 60 -- bash -c 'uname -a; grep PRETTY /etc/os-release; echo "cores: $(nproc)"; free -g
    df -h .; nvidia-smi; nvcc --version; compute-sanitizer --version; cmake --version; ninja --version
    gcc --version | head -1; ldd --version | head -1; true'

# the carried packages, each unpacked on its own (one that fails is named)
tests=OFF
if ls .device-debs/*.deb >/dev/null 2>&1; then
    rm -rf "$PREFIX"
    step debs --limit 60 --show '^unpacked|^FAILED|^no ' -- bash -c 'ok=0 bad=0
        for deb in .device-debs/*.deb; do
            if dpkg -x "$deb" "$1"; then ok=$((ok + 1)); else echo "FAILED to unpack $deb"; bad=$((bad + 1)); fi
        done
        echo "unpacked $ok packages into $1 ($(du -sh "$1" | cut -f1)), $bad failed"
        [ -e "$1/usr/include/criterion/criterion.h" ] || { echo "no criterion.h in $1"; bad=1; }
        exit $((bad > 0))' _ "$PREFIX" && tests=ON
    # what did unpack is used either way (utf8proc, when the machine lacks it)
    libs="$PREFIX/usr/lib/x86_64-linux-gnu:$PREFIX/lib/x86_64-linux-gnu"
    export CMAKE_PREFIX_PATH="$PREFIX/usr"
    export LD_LIBRARY_PATH="$libs${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
    deps=(-DCMAKE_C_FLAGS="-I$PREFIX/usr/include" -DCMAKE_EXE_LINKER_FLAGS="-Wl,-rpath-link,$libs")
else
    check_record SKIP debs "no .device-debs/ carried (scripts/fetch-device-debs.sh): no Criterion, no test suite"
    deps=()
fi

gpu=$(nvidia-smi --query-gpu=name,compute_cap,memory.total,driver_version --format=csv,noheader 2>/dev/null | head -1)
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
[ "${SEED:-0}" = 1 ] && tests=OFF  # the seed run builds what it runs, no more
rm -rf $B
if [ $tests = ON ] && ! step configure --limit 120 -- "${configure[@]}"; then
    tests=OFF
    rm -rf $B
fi
[ $tests = OFF ] && step configure-no-tests --limit 120 -- "${configure[@]}" -DSEAM_TESTS=OFF
step cuda-compiler --limit 10 -- grep -E '^CMAKE_CUDA_COMPILER:[A-Z]+=.*nvcc' $B/CMakeCache.txt
if [ "${SEED:-0}" = 1 ]; then
    step build --limit 300 --show 'error|FAILED:' -- cmake --build $B -j "$J" --target seam seam-synth -- -k 0
else
    step build --limit 300 --show 'error|FAILED:' -- cmake --build $B -j "$J" -- -k 0
fi
mkdir -p $M

# ---------------------------------------------------------------- the seed experiment (SEED=1)
# A synthetic Qwen3-30B-A3B (48 MoE layers, 17.3 GiB), the last layers off
# the GPU in each of the three ways; a table per placement, so that one cut
# off by the deadline leaves the others.
if [ "${SEED:-0}" = 1 ]; then
    Q30=$M/qwen3-30b-a3b.gguf
    step synth-30b --limit 300 --needs $B/seam-synth -- $B/seam-synth models/qwen3-30b-a3b.shape -o $Q30
    for mode in cpu mapped stream; do
        step "seed-$mode" --limit 150 --needs $B/seam --needs $Q30 --out results.md -- \
            $B/seam bench -m $Q30 -p 0 -n 32 -t "$J" -ngl 48,47,44,40,24 --overflow $mode -r 2
    done
    rm -f $Q30
    check_end
    exit
fi

# ---------------------------------------------------------------- the kernels against the C reference
step cuda-tests --limit 120 --needs $B/test_cuda --show '^\[FAIL\]|Synthesis' -- $B/test_cuda --verbose -j1
# the split against llama.cpp's logits, and the GPU prefill through cuBLAS
# against token by token at each split (the GEMM's kernels are in cuda-tests)
step golden-split --limit 120 --needs $B/test_golden --show '^\[FAIL\]|GEMM prefill|Synthesis' -- \
    $B/test_golden --verbose --filter 'golden/split' -j1

# ---------------------------------------------------------------- the split
# Synthetic models: a small dense one, two small MoE ones (moe-mixed's up
# experts are of another type than its gate experts) and Qwen3-0.6B's shape.
step models --limit 120 --needs $B/seam-synth -- bash -c 'for s in small moe-small moe-mixed qwen3-0.6b; do
    "$1/seam-synth" "models/$s.shape" -o "$2/$s.gguf" || exit 1; done' _ $B $M
Q=$M/qwen3-0.6b.gguf
split_run() {  # NAME SEAM-RUN-FLAGS...: 64 tokens on Qwen3-0.6B, its timeline kept
    local name=$1
    shift
    step "$name" --limit 60 --needs $B/seam --needs $Q --show '^timeline:|^  (GPU layers|CPU layers|crossings) |NOT within' -- \
        $B/seam run -m $Q --tokens 1,2,3 -n 64 --ids --timeline "$CHECK_LOGS/timeline-$name.json" "$@"
}
for n in 0 1 14 27 28; do split_run "split-$n" -ngl $n; done
split_run split-28-no-graph -ngl 28 --no-graph
split_run split-28-head-cpu -ngl 28 --head cpu
for mode in mapped stream; do
    for n in 0 14; do split_run "$mode-$n" -ngl $n --overflow $mode; done
done
# each layer's time (--layers: CUDA events inside the graph) at a split and streamed
split_run layers-14 -ngl 14 --layers
split_run layers-stream-14 -ngl 14 --overflow stream --layers
# what timing the layers costs the GPU's decode: the same test without and with it
for flag in "" --layers; do
    step "layers-cost${flag:+-on}" --limit 60 --needs $B/seam --needs $Q --out results.md -- \
        $B/seam bench -m $Q -p 0 -n 64 -t "$J" -ngl 28 -r 5 $flag
done

# ---------------------------------------------------------------- the GPU prefill: where cuBLAS wins
# Every layer on the GPU, prompts of 32..512 tokens through each path; the
# crossover is what gpu_segment.h's provisional GPU_GEMM_MIN_BATCH should be.
for mode in tokens gemm; do
    step "prefill-$mode" --limit 90 --needs $B/seam --needs $Q --out results.md -- \
        $B/seam bench -m $Q -p 32,48,64,96,128,256,512 -n 0 -t "$J" -ngl 28 --gpu-prefill $mode -r 3 -o csv
done
step prefill-crossover --limit 10 --needs "$CHECK_LOGS/prefill-tokens.log" --needs "$CHECK_LOGS/prefill-gemm.log" \
    --out results.md --show '^cuBLAS wins' -- \
    bash bench/prefill-crossover.sh "$CHECK_LOGS/prefill-tokens.log" "$CHECK_LOGS/prefill-gemm.log"

# ---------------------------------------------------------------- the workbench, the test suite
step cuda-bench --limit 120 --needs $B/seam-cuda-bench --out results.md -- $B/seam-cuda-bench
if [ $tests = ON ]; then
    step tests --limit 240 --needs $B/test_golden --show 'tests passed|\((Failed|Timeout|SEGFAULT|Subprocess)' -- \
        ctest --test-dir $B -j "$J" --output-on-failure
else
    check_record SKIP tests "built without the test suite (see debs, configure)"
fi

# ---------------------------------------------------------------- memcheck
# Short runs: every placement, and both MoE models (the mixed one with every
# layer and the head on the GPU); the kernels' own tests come last.
memcheck=(compute-sanitizer --tool memcheck --target-processes all --error-exitcode 1 --print-limit 20)
mc() {  # NAME MODEL SEAM-RUN-FLAGS...
    local name=$1 model=$2
    shift 2
    step "memcheck-$name" --limit 120 --needs $B/seam --needs "$model" --show 'ERROR SUMMARY' -- \
        "${memcheck[@]}" $B/seam run -m "$model" --tokens 1,2,3 -n 4 --ids "$@"
}
mc split $M/small.gguf -ngl 3
mc mapped $M/small.gguf -ngl 2 --overflow mapped
mc stream $M/small.gguf -ngl 2 --overflow stream
mc moe $M/moe-small.gguf -ngl 2
mc moe-mixed $M/moe-mixed.gguf -ngl 4
# a prompt long enough for the GEMM path (auto from GPU_GEMM_MIN_BATCH tokens), every layer and the head on the GPU
step memcheck-prefill-gemm --limit 120 --needs $B/seam --needs $M/small.gguf --show 'ERROR SUMMARY' -- \
    "${memcheck[@]}" $B/seam bench -m $M/small.gguf -p 100 -n 0 -r 1 -ngl 6 --gpu-prefill gemm

# ---------------------------------------------------------------- the offload curve
# Decode speed by GPU layer count, a table per placement.
for mode in cpu mapped stream; do
    step "offload-$mode" --limit 90 --needs $B/seam --needs $Q --out results.md -- \
        $B/seam bench -m $Q -p 0 -n 64 -t "$J" -ngl 0,7,14,21,27,28 --overflow $mode -r 3
done

# last, as the longest: the kernels' own tests under memcheck
step memcheck-cuda-tests --limit 180 --needs $B/test_cuda --show 'ERROR SUMMARY' -- "${memcheck[@]}" $B/test_cuda -j1

check_end
