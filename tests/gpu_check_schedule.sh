#!/usr/bin/env bash
# gpu_check_schedule.sh — bench/gpu-check.sh's schedule, played with each
# step's expected seconds (the step runner's fake run: no command runs):
# every step is reached, the sanitizers before the deadline; no step needs
# a file that the device call does not carry (.device-debs) and no earlier
# step makes; the deadline plus the longest step's limit fits in the device
# call's timeout_s; and two such calls with a machine's start fit in the
# lease.
set -uo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
failures=0
fail() { echo "FAILED: $*" >&2; failures=$((failures + 1)); }

LEASE=900 START=120 TIMEOUT_S=370  # device seconds a session has; a machine's start; the call's timeout_s
for seed in 0 1; do
    out="$work/out-$seed"
    OUT=$out SEED=$seed CHECK_FAKE=1 CHECK_FAKE_CARRIED=".device-debs" bash bench/gpu-check.sh >"$work/log-$seed" 2>&1
    summary="$out/summary.txt"
    [ -s "$summary" ] || { fail "SEED=$seed: no summary"; cat "$work/log-$seed" >&2; continue; }
    if grep -qE ' is missing$' "$summary"; then
        fail "SEED=$seed: a step needs what no call carries and no step makes:"
        grep -E ' is missing$' "$summary" >&2
    fi
    if grep -qE 'not started|killed at the deadline' "$summary"; then
        fail "SEED=$seed: the deadline cuts the schedule:"
        grep -E 'not started|killed at the deadline' "$summary" >&2
    fi
    grep -qE '^FAIL' "$summary" && { fail "SEED=$seed: a step fails in the fake run:"; grep '^FAIL' "$summary" >&2; }
    if [ $seed = 0 ]; then
        grep -qE '^PASS  sanitizers ' "$summary" || fail "the sanitizers did not run in the schedule"
    fi
    # the seconds the schedule takes, from the summary's column
    total=$(awk '$1 == "PASS" && $3 ~ /s$/ { sub(/s$/, "", $3); t += $3 } END { print t + 0 }' "$summary")
    echo "SEED=$seed: the schedule takes $total s of expected work"
done
deadline=$(sed -n 's/.*DEADLINE:-\([0-9]*\).*/\1/p' bench/gpu-check.sh | head -n 1)
longest=$(grep -o -- '--limit [0-9]*' bench/gpu-check.sh | awk '{ if ($2 > m) m = $2 } END { print m }')
[ -n "$deadline" ] || fail "no DEADLINE default in bench/gpu-check.sh"
# a step started just before the deadline is killed at it: the call ends by the deadline plus a margin
((deadline + 15 <= TIMEOUT_S)) || fail "DEADLINE $deadline s leaves no margin inside timeout_s $TIMEOUT_S"
((START + 2 * TIMEOUT_S <= LEASE)) || fail "two calls of $TIMEOUT_S s and a start of $START s pass the lease of $LEASE s"
((longest <= deadline)) || fail "a step's limit ($longest s) passes the deadline ($deadline s)"
grep -q "timeout_s $TIMEOUT_S" bench/gpu-check.sh || fail "bench/gpu-check.sh does not say timeout_s $TIMEOUT_S"
if ((failures)); then
    echo "gpu_check_schedule: $failures checks failed" >&2
    exit 1
fi
echo "gpu_check_schedule: the schedule fits (deadline $deadline s, timeout_s $TIMEOUT_S, lease $LEASE s)"
