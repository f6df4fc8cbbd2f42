#!/usr/bin/env bash
# gpu-sanitize.sh — compute-sanitizer's four tools over the GPU tests and
# short split runs, all at once (they are light on the GPU and heavy on the
# host, which the lent machine has 16 cores of): bench/gpu-check.sh's
# sanitizer step.
#
#   bench/gpu-sanitize.sh BUILD MODELS LOGDIR
#
# Each (tool, target) pair runs as its own process, its log in LOGDIR as
# sanitize-TOOL-TARGET.log; a line per pair on stdout, PASS or FAIL with the
# tool's summary line; the status is 1 when any failed. The kernels' tests
# fail API calls on purpose (an allocation of 2^60 bytes, a second
# registration of one range), which compute-sanitizer counts as errors by
# default: they run with --report-api-errors no, where only device errors
# count; seam's own runs make no call that fails on purpose, so there a
# failed call is an error too.
set -uo pipefail
B=$1 M=$2 LOGS=$3
san=(compute-sanitizer --target-processes all --error-exitcode 1 --print-limit 20)
tests_only=(--report-api-errors no)
run=("$B/seam" run --tokens 1,2,3 -n 4 --ids -t 4)

# NAME TOOL COMMAND...: one pair, in the background
pair() {
    local name=$1 tool=$2
    shift 2
    ("${san[@]}" --tool "$tool" "$@" </dev/null >"$LOGS/sanitize-$name.log" 2>&1; echo $? >"$LOGS/sanitize-$name.rc") &
}

for tool in memcheck racecheck synccheck initcheck; do
    pair "$tool-test_cuda" "$tool" "${tests_only[@]}" "$B/test_cuda" -j1
    pair "$tool-split" "$tool" "${run[@]}" -m "$M/small.gguf" -ngl 3
done
# memcheck alone over the other placements: the bus-mapped and streamed
# overflows, an MoE model with mixed expert types, the GEMM prefill
pair memcheck-mapped memcheck "${run[@]}" -m "$M/small.gguf" -ngl 2 --overflow mapped
pair memcheck-stream memcheck "${run[@]}" -m "$M/small.gguf" -ngl 2 --overflow stream
pair memcheck-moe-mixed memcheck "${run[@]}" -m "$M/moe-mixed.gguf" -ngl 4
pair memcheck-prefill-gemm memcheck "$B/seam" bench -m "$M/small.gguf" -p 100 -n 0 -r 1 -ngl 6 --gpu-prefill gemm
wait

failed=0
for rc in "$LOGS"/sanitize-*.rc; do
    name=$(basename "$rc" .rc)
    said=$(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY|hazards displayed' "$LOGS/$name.log" | tail -n 1)
    if [ "$(cat "$rc")" = 0 ]; then
        echo "PASS ${name#sanitize-}: ${said:-no summary line}"
    else
        echo "FAIL ${name#sanitize-}: exit $(cat "$rc"); ${said:-see $name.log}"
        failed=1
    fi
    rm -f "$rc"
done
exit $failed
