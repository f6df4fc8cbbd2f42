#!/usr/bin/env bash
# prefill-crossover.sh TOKENS GEMM — where the GPU prefill's cuBLAS path
# starts to win. TOKENS and GEMM hold the CSV rows of `seam bench -o csv`
# runs of the same prompt lengths with --gpu-prefill tokens and gemm (other
# lines, such as a log's stderr, are ignored). Prints a Markdown table of
# both speeds and their ratio by prompt length, then one line:
#   "cuBLAS wins from pp N" (N the shortest prompt from which every longer
#   one measured is faster through the GEMM), or "cuBLAS wins at no measured
#   length". gpu_segment.h's GPU_GEMM_MIN_BATCH is the figure to set from it
#   (a batch holds at most SEAM_UBATCH tokens: past it, longer prompts add
#   whole batches, so the crossover below it is what the threshold needs).
set -euo pipefail
[ $# -eq 2 ] || { echo "usage: $0 TOKENS.csv GEMM.csv" >&2; exit 2; }
awk -F, '
    # a CSV row of seam bench: column 11 n_prompt, 14 avg_ts, the last the path
    FNR == 1 { file++ }
    /^"/ && $11 > 0 { ts[file, $11 + 0] = $14; lengths[$11 + 0] = 1 }
    END {
        n = 0
        for (p in lengths) if ((1, p) in ts && (2, p) in ts) sorted[++n] = p + 0
        if (n == 0) { print "no prompt length measured through both paths"; exit 1 }
        for (i = 2; i <= n; i++)  # insertion sort, ascending
            for (j = i; j > 1 && sorted[j - 1] > sorted[j]; j--) { t = sorted[j]; sorted[j] = sorted[j - 1]; sorted[j - 1] = t }
        print "| prompt | tokens t/s | gemm t/s | gemm / tokens |"
        print "| ---: | ---: | ---: | ---: |"
        from = 0
        for (i = 1; i <= n; i++) {
            p = sorted[i]; r = ts[2, p] / ts[1, p]
            printf "| pp%d | %.2f | %.2f | %.2fx |\n", p, ts[1, p], ts[2, p], r
            if (r > 1 && !from) from = p
            if (r <= 1) from = 0
        }
        if (from) printf "cuBLAS wins from pp%d\n", from
        else print "cuBLAS wins at no measured length"
    }' "$1" "$2"
