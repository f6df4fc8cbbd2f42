#!/usr/bin/env bash
# Builds the libFuzzer targets into build-fuzz/ and runs each for SECONDS.
#
#   tests/fuzz/run.sh [SECONDS]        (default 60; 0 builds and runs nothing)
#
# The engine is built by CMake with clang and -fsanitize=fuzzer-no-link,
# address,undefined (CUDA off, tests off), and each target links it with
# -fsanitize=fuzzer. The targets run side by side, one per core, each on a
# working copy of its committed seed corpus (tests/fuzz/corpus/TARGET), so
# that what they discover stays in build-fuzz/corpus/ and out of git. Crashes,
# leaks, timeouts and sanitizer reports are written to build-fuzz/findings/
# TARGET/; the script prints each target's executions and findings and fails
# when there is any finding. Reproduce one with: build-fuzz/TARGET FILE.
#
# The seed corpus was made by tests/fuzz/make_seeds.c (built here too):
#   build-fuzz/make_seeds tests/fuzz/corpus
set -euo pipefail
cd "$(dirname "$0")/../.."
SECONDS_EACH=${1:-60}
[[ "$SECONDS_EACH" =~ ^[0-9]+$ ]] || { echo "usage: tests/fuzz/run.sh [SECONDS]" >&2; exit 2; }
OUT=build-fuzz
SAN="-fsanitize=address,undefined -fno-sanitize-recover=all"
TARGETS=(fuzz_gguf fuzz_tokenizer)

command -v clang >/dev/null || { echo "tests/fuzz/run.sh: clang is required" >&2; exit 2; }
[ -f "$OUT/CMakeCache.txt" ] ||
  cmake -S . -B "$OUT" -G Ninja -DCMAKE_C_COMPILER=clang -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DSEAM_CUDA=OFF -DSEAM_TESTS=OFF -DCMAKE_C_FLAGS="-fsanitize=fuzzer-no-link -fsanitize-coverage-ignorelist=$PWD/tests/fuzz/coverage-ignore.txt $SAN" >/dev/null
# quiet unless it fails
if ! log=$(cmake --build "$OUT" --target seam_core 2>&1); then echo "$log" >&2; exit 1; fi

# The link line of seam_core's dependencies, as CMake found them.
LIBS=("$OUT/libseam_core.a" "$OUT/libseam_common.a" -lutf8proc -lpthread -lm)
if grep -q '^OPENBLAS_FOUND:INTERNAL=1' "$OUT/CMakeCache.txt"; then
  read -r -a BLAS <<<"$(pkg-config --libs openblas)"
  LIBS+=("${BLAS[@]}")
fi
CFLAGS=(-std=c11 -D_GNU_SOURCE -g -O1 -Isrc -Ikernels "-DSEAM_SOURCE_DIR=\"$PWD\"" $SAN)
for t in "${TARGETS[@]}"; do
  clang "${CFLAGS[@]}" -fsanitize=fuzzer "tests/fuzz/$t.c" "${LIBS[@]}" -o "$OUT/$t"
done
clang "${CFLAGS[@]}" -fsanitize=fuzzer-no-link tests/fuzz/make_seeds.c "${LIBS[@]}" -o "$OUT/make_seeds"

[ "$SECONDS_EACH" -gt 0 ] || exit 0

# Inputs: GGUF seeds are micro models of at most 64 KiB; texts a few KiB.
declare -A MAX_LEN=([fuzz_gguf]=65536 [fuzz_tokenizer]=4096)
rm -rf "$OUT/findings"
pids=()
for t in "${TARGETS[@]}"; do
  mkdir -p "$OUT/corpus/$t" "$OUT/findings/$t"
  cp -n "tests/fuzz/corpus/${t#fuzz_}"/* "$OUT/corpus/$t/"
  "$OUT/$t" "$OUT/corpus/$t" -max_total_time="$SECONDS_EACH" -max_len="${MAX_LEN[$t]}" -timeout=10 \
    -rss_limit_mb=2048 -print_final_stats=1 -artifact_prefix="$OUT/findings/$t/" >"$OUT/$t.log" 2>&1 &
  pids+=($!)
done
for p in "${pids[@]}"; do wait "$p" || true; done

status=0
for t in "${TARGETS[@]}"; do
  execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$OUT/$t.log" | tail -1)
  findings=$(find "$OUT/findings/$t" -type f | wc -l)
  reports=$(grep -c -E '^(==[0-9]+==ERROR|SUMMARY: |.*runtime error:)' "$OUT/$t.log" || true)
  echo "$t: ${execs:-?} executions in ${SECONDS_EACH} s, $findings finding(s), $reports sanitizer report line(s) (log: $OUT/$t.log)"
  if [ "$findings" -gt 0 ] || [ "$reports" -gt 0 ] || [ -z "$execs" ]; then
    status=1
    find "$OUT/findings/$t" -type f | sed 's/^/  /'
  fi
done
exit $status
