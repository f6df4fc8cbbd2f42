#!/usr/bin/env bash
# gpu-check.sh — everything a lent GPU machine should check, in one command.
#
#   (here)  scripts/fetch-device-debs.sh
#   (there) bash bench/gpu-check.sh        with .device-debs carried
#
# On the device machine: unpacks the carried Debian packages into a private
# prefix, builds seam with CUDA for the device's own architecture, runs the
# whole test suite (the CUDA tests run instead of skipping), runs
# compute-sanitizer's memcheck over the CUDA tests, runs the CUDA workbench
# (matvec GB/s and % of peak, attention) and the CPU bandwidth probe, and
# runs a split sweep (0, 1, L/2, L-1, L GPU layers, and L without graphs) on
# a synthetic Qwen3-0.6B with the timeline of each, the mapped and stream
# placements and an MoE model under memcheck, and the offload curve (seam
# bench over GPU layer counts and the three placements) and, last and under a
# time limit (SEED=0 skips it), the seed experiment on a synthetic
# Qwen3-30B-A3B, and writes every log to
# $OUT (or ./gpu-check-out when OUT is unset). It keeps
# going after a failure so that one run reports everything; the exit status
# says whether anything failed.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT="${OUT:-$PWD/gpu-check-out}"
mkdir -p "$OUT"
# the device tool brings back at most 8 files: logs go to LOGS, packed at the end
LOGS="$(mktemp -d)"
status=0
step() {  # step NAME COMMAND...: runs, logs to $OUT/NAME.log, remembers failure
    local name="$1"
    shift
    echo "== $name: $*" | tee -a "$OUT/summary.txt"
    if "$@" >"$LOGS/$name.log" 2>&1; then
        echo "   ok" | tee -a "$OUT/summary.txt"
    else
        echo "   FAILED ($?), see $name.log" | tee -a "$OUT/summary.txt"
        status=1
    fi
    tail -n 5 "$LOGS/$name.log" | sed 's/^/   | /' | tee -a "$OUT/summary.txt"
}

# Debian packages the machine lacks, unpacked into a prefix (never into /)
PREFIX="$PWD/.device-prefix"
if ls .device-debs/*.deb >/dev/null 2>&1; then
    for deb in .device-debs/*.deb; do dpkg -x "$deb" "$PREFIX"; done
    export CMAKE_PREFIX_PATH="$PREFIX/usr"
    export LD_LIBRARY_PATH="$PREFIX/usr/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}"
    export PKG_CONFIG_PATH="$PREFIX/usr/lib/x86_64-linux-gnu/pkgconfig:${PKG_CONFIG_PATH:-}"
    EXTRA=(-DCMAKE_C_FLAGS="-I$PREFIX/usr/include" -DCMAKE_EXE_LINKER_FLAGS="-L$PREFIX/usr/lib/x86_64-linux-gnu")
else
    EXTRA=()
fi
export PATH="/usr/local/cuda/bin:$PATH"

nvidia-smi >"$LOGS/nvidia-smi.txt" 2>&1
ARCH=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader 2>/dev/null | head -1 | tr -d '.')
step configure cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES="${ARCH:-90}" "${EXTRA[@]}"
step build cmake --build build-gpu -j "$(nproc)"
step tests ctest --test-dir build-gpu --output-on-failure
step cuda-tests-verbose build-gpu/test_cuda --verbose
step memcheck compute-sanitizer --tool memcheck --error-exitcode 1 build-gpu/test_cuda
step cuda-bench build-gpu/seam-cuda-bench
step cpu-membw build-gpu/seam-membw
# the split: compute-sanitizer over a short split run, then a sweep of the
# GPU layer count on a synthetic Qwen3-0.6B (28 layers), each run's report kept
step synth build-gpu/seam-synth models/qwen3-0.6b.shape -o build-gpu/qwen3-0.6b.gguf
step memcheck-split compute-sanitizer --tool memcheck --error-exitcode 1 \
    build-gpu/seam run -m build-gpu/test-scratch/golden-small.gguf --tokens 1,2,3 -n 4 -ngl 3 --ids
for n in 0 1 14 27 28; do
    step "split-$n" build-gpu/seam run -m build-gpu/qwen3-0.6b.gguf --tokens 1,2,3 -n 64 --ids -ngl "$n" \
        --timeline "$LOGS/timeline-$n.json"
done
step split-28-nograph build-gpu/seam run -m build-gpu/qwen3-0.6b.gguf --tokens 1,2,3 -n 64 --ids -ngl 28 --no-graph
# the other two overflow placements, and an MoE model on the GPU, under memcheck once each
for mode in mapped stream; do
    step "memcheck-$mode" compute-sanitizer --tool memcheck --error-exitcode 1 \
        build-gpu/seam run -m build-gpu/test-scratch/golden-small.gguf --tokens 1,2,3 -n 4 -ngl 2 --overflow "$mode" --ids
    for n in 0 14; do
        step "$mode-$n" build-gpu/seam run -m build-gpu/qwen3-0.6b.gguf --tokens 1,2,3 -n 64 --ids -ngl "$n" \
            --overflow "$mode" --timeline "$LOGS/timeline-$mode-$n.json"
    done
done
step memcheck-moe compute-sanitizer --tool memcheck --error-exitcode 1 \
    build-gpu/seam run -m build-gpu/test-scratch/golden-moe-small.gguf --tokens 1,2,3 -n 4 -ngl 2 --ids
# the offload curve: decode speed by GPU layer count for the three placements
step offload-curve build-gpu/seam bench -m build-gpu/qwen3-0.6b.gguf -p 0 -n 64 -t "$(nproc)" -ngl 0,7,14,21,27,28 \
    --overflow cpu,mapped,stream -r 3
cp "$LOGS/offload-curve.log" "$OUT/offload-curve.md" 2>/dev/null
# last, under a time limit: the seed experiment itself on a synthetic Qwen3-30B-A3B (48 MoE layers,
# 17.3 GiB), the last layers off the GPU in each of the three ways
if [ "${SEED:-1}" = 1 ]; then
    step synth-30b timeout 420 build-gpu/seam-synth models/qwen3-30b-a3b.shape -o build-gpu/qwen3-30b-a3b.gguf
    step seed-curve timeout 420 build-gpu/seam bench -m build-gpu/qwen3-30b-a3b.gguf -p 0 -n 32 -t "$(nproc)" \
        -ngl 48,47,44,40,24 --overflow cpu,mapped,stream -r 2
    cp "$LOGS/seed-curve.log" "$OUT/seed-curve.md" 2>/dev/null
    rm -f build-gpu/qwen3-30b-a3b.gguf
fi
tar czf "$OUT/gpu-check-logs.tar.gz" -C "$LOGS" .
echo "gpu-check: $( ((status)) && echo 'something FAILED' || echo 'all ok' ); logs in $OUT" | tee -a "$OUT/summary.txt"
exit $status
