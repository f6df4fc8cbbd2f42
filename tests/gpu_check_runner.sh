#!/usr/bin/env bash
# gpu_check_runner.sh — bench/gpu-check-lib.sh's step runner, driven by fake
# steps in a few seconds: PASS, FAIL and SKIP lines with their reasons, a
# step killed at its own limit and one killed at the deadline (with the
# processes it started), no step started after the deadline, stdout alone
# in a result table, and the log archive rewritten after every step.
set -uo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
. "$root/bench/gpu-check-lib.sh"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
failures=0
expect() {  # DESCRIPTION COMMAND...: the check passes when COMMAND does
    local what=$1
    shift
    if ! "$@"; then
        echo "FAILED: $what" >&2
        failures=$((failures + 1))
    fi
}
summary_has() { grep -qE -- "$1" "$work/out/summary.txt"; }
# The listing is read whole before grep looks at it: under pipefail, grep -q
# leaving a pipe early would kill tar with SIGPIPE and fail the check.
archive_has() {
    local list
    list=$(tar tzf "$work/out/gpu-check-logs.tar.gz") || return 1
    grep -qx -- "./$1" <<<"$list"
}

CHECK_MIN_LEFT=2
check_begin "$work/out" 6
t0=$SECONDS

step ok --show '^answer' -- bash -c 'echo noise; echo "answer 42"'
expect "a passing step returns 0" test $? -eq 0
expect "PASS line" summary_has '^PASS  ok '
expect "its headline line" summary_has '\| answer 42$'
expect "the archive holds the first log at once" archive_has ok.log
expect "the archive holds the summary" archive_has summary.txt

step bad -- bash -c 'echo "the reason it broke" >&2; exit 3'
expect "a failing step returns 1" test $? -eq 1
expect "FAIL line with the status" summary_has '^FAIL  bad .*exit status 3'
expect "the end of its log" summary_has '\| the reason it broke$'

step missing --needs "$work/nothing-here" -- true
expect "a step whose input is missing returns 2" test $? -eq 2
expect "SKIP line naming it" summary_has "^SKIP  missing .*nothing-here is missing"

step table --out results.md -- bash -c 'echo "| a | b |"; echo "progress 50%" >&2'
expect "the table holds stdout" grep -qx '| a | b |' "$work/out/results.md"
expect "the table holds no stderr" bash -c "! grep -qx 'progress 50%' '$work/out/results.md'"
expect "the table has a heading" grep -q '^## table: ' "$work/out/results.md"
expect "the log holds both" bash -c "grep -q progress '$CHECK_LOGS/table.log' && grep -q '| a | b |' '$CHECK_LOGS/table.log'"

step slow --limit 1 -- sleep 30
expect "killed at its own limit" summary_has '^FAIL  slow .*killed at its limit of 1 s'

# a step still running at the deadline is killed with what it started
step long -- bash -c 'sleep 60 & echo $! >"$1"; wait' _ "$work/child.pid"
expect "killed at the deadline" summary_has '^FAIL  long .*killed at the deadline'
# (the step sleeps 60 s: 20 s proves it was cut, with room for a loaded
# machine's archive rewrites -- 12 s failed once beside a benchmark)
expect "the run stopped near the deadline" test $((SECONDS - t0)) -le 20
gone() {  # PIDFILE: its process has ended (a zombie waiting for a reaper has)
    local state
    state=$(awk '{print $3}' "/proc/$(cat "$1")/stat" 2>/dev/null) || return 0
    [ "$state" = Z ]
}
gone_soon() {  # PIDFILE: it ends within 5 s (a loaded machine reaps slowly; a child left alive sleeps 60)
    local i
    for i in $(seq 50); do gone "$1" && return 0; sleep 0.1; done
    return 1
}
expect "the step's own child died with it" gone_soon "$work/child.pid"

step late -- true
expect "no step starts after the deadline" summary_has '^SKIP  late .*not started'

check_end
expect "the run's status says it failed" test $? -eq 1
expect "the verdict counts" summary_has '^gpu-check: 2 passed, 3 failed, 2 skipped: something FAILED; the deadline cut'
every_log_archived() {
    local l
    for l in ok bad table slow long; do archive_has "$l.log" || return 1; done
}
expect "the archive holds every log" every_log_archived
expect "only the summary, the table and the archive in OUT" test "$(ls "$work/out" | tr '\n' ' ')" = \
    "gpu-check-logs.tar.gz results.md summary.txt "

# a run where everything passes says so and returns 0
check_begin "$work/out2" 30
step fine -- true
check_end
expect "a clean run returns 0" test $? -eq 0
expect "and says all passed" grep -q 'all passed' "$work/out2/summary.txt"

if ((failures)); then
    echo "--- summary.txt" >&2
    cat "$work/out/summary.txt" >&2
    exit 1
fi
echo "gpu-check runner: every check passed"
