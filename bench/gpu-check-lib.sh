# gpu-check-lib.sh — the step runner of bench/gpu-check.sh, sourced by it
# and by tests/gpu_check_runner.sh, which drives it with fake steps.
#
#   check_begin OUT SECONDS   logs in a private folder, OUT/summary.txt, a
#                             deadline SECONDS from now
#   step NAME [--limit S] [--expect S] [--needs PATH]... [--makes PATH]... [--out FILE] [--show REGEX] -- COMMAND...
#       runs COMMAND (stdin from /dev/null) with its output in NAME.log;
#       --limit  its own time limit (default 600 s); the deadline cuts it
#                shorter, and no step starts within CHECK_MIN_LEFT of it
#       --expect the seconds it takes on the lent machine (the schedule's
#                estimate: the summary shows it beside the time taken, and
#                the fake run below advances its clock by it)
#       --needs  skips it, saying so, when PATH does not exist
#       --makes  a PATH it writes, which a later step may need
#       --out    its stdout (not stderr) also appended to OUT/FILE, under a
#                heading: the result tables
#       --show   the first log lines matching REGEX go into the summary (a
#                PASS's headline figures, a FAIL's errors); a FAIL's summary
#                also gets the end of its log
#       returns 0 for PASS, 1 for FAIL, 2 for SKIP
#   check_record STATUS NAME REASON   a line of the summary without a command
#   check_end                 the verdict line; returns 1 when anything
#                             failed or was cut off by the deadline
#
# Every step ends with OUT/gpu-check-logs.tar.gz rewritten, so a run killed
# from outside still returns every log it wrote.
#
# The fake run (CHECK_FAKE=1, tests/gpu_check_schedule.sh): no command runs;
# the clock starts at 0 and each step advances it by its --expect seconds
# (at most its limit), so the schedule is played in a moment; a --needs is
# met only by a path in the working tree that travels (git's tracked and
# untracked-not-ignored files), in CHECK_FAKE_CARRIED (the carry list) or
# named by an earlier step's --makes, so that a step reading something the
# device run does not have is a SKIP line there too. A step past its limit gets
# SIGTERM, then SIGKILL 5 s later, with every process it started (timeout
# signals its whole process group).

CHECK_MIN_LEFT=${CHECK_MIN_LEFT:-10}   # seconds: no step starts closer to the deadline
CHECK_LOG_MAX=${CHECK_LOG_MAX:-2097152} # bytes of a log kept in the archive (its head and tail)

CHECK_FAKE=${CHECK_FAKE:-0}
CHECK_FAKE_NOW=0
CHECK_MADE=()

check_now() { if ((CHECK_FAKE)); then echo "$CHECK_FAKE_NOW"; else date +%s; fi; }

# Whether PATH is there: on the machine, or in the fake run as described above.
check_have() {
    local path=$1 p
    ((CHECK_FAKE)) || { [ -e "$path" ]; return; }
    for p in "${CHECK_MADE[@]}" ${CHECK_FAKE_CARRIED:-}; do
        [ "$path" = "$p" ] || [[ "$path" == "$p"/* ]] && return 0
    done
    [ -n "$(git ls-files --cached --others --exclude-standard -- "$path" 2>/dev/null | head -n 1)" ]
}

check_begin() {
    CHECK_OUT=$1
    mkdir -p "$CHECK_OUT"
    CHECK_LOGS=$(mktemp -d "${TMPDIR:-/tmp}/gpu-check-logs.XXXXXX")
    CHECK_DEADLINE=$(($(check_now) + $2))
    CHECK_FAILED=0
    CHECK_CUT=0
    CHECK_COUNTS=(0 0 0)  # PASS FAIL SKIP
    : >"$CHECK_OUT/summary.txt"
}

# The summary line of a step (and the terminal's): status, name, seconds,
# reason; then, indented, the lines given on stdin.
check_record() {
    local status=$1 name=$2 reason=$3 secs=${4:--}
    case $status in
    PASS) CHECK_COUNTS[0]=$((CHECK_COUNTS[0] + 1)) ;;
    FAIL) CHECK_COUNTS[1]=$((CHECK_COUNTS[1] + 1)) CHECK_FAILED=1 ;;
    SKIP) CHECK_COUNTS[2]=$((CHECK_COUNTS[2] + 1)) ;;
    esac
    printf '%-4s  %-22s %5s  %s\n' "$status" "$name" "$secs" "$reason" | tee -a "$CHECK_OUT/summary.txt"
}

# Lines for under a summary line, indented.
check_detail() { sed 's/^/        | /' | tee -a "$CHECK_OUT/summary.txt"; }

# The logs and the summary so far into OUT's archive, replaced whole.
check_archive() {
    cp "$CHECK_OUT/summary.txt" "$CHECK_LOGS/summary.txt"
    tar czf "$CHECK_OUT/gpu-check-logs.tar.gz.part" -C "$CHECK_LOGS" . &&
        mv "$CHECK_OUT/gpu-check-logs.tar.gz.part" "$CHECK_OUT/gpu-check-logs.tar.gz"
}

# A log over CHECK_LOG_MAX keeps its head and tail, and says what it dropped.
check_trim() {
    local log=$1 size half
    size=$(stat -c %s "$log")
    ((size <= CHECK_LOG_MAX)) && return
    half=$((CHECK_LOG_MAX / 2))
    {
        head -c "$half" "$log"
        printf '\n[... gpu-check dropped %d bytes here ...]\n' $((size - 2 * half))
        tail -c "$half" "$log"
    } >"$log.trim" && mv "$log.trim" "$log"
}

step() {
    local name=$1 limit=600 expect="" out="" show="" need
    local -a needs=() makes=()
    shift
    while [ $# -gt 0 ] && [ "$1" != -- ]; do
        case $1 in
        --limit) limit=$2 ;;
        --expect) expect=$2 ;;
        --needs) needs+=("$2") ;;
        --makes) makes+=("$2") ;;
        --out) out=$2 ;;
        --show) show=$2 ;;
        *) echo "gpu-check: step $name: unknown option $1" >&2 && return 1 ;;
        esac
        shift 2
    done
    shift # --
    for need in "${needs[@]}"; do
        if ! check_have "$need"; then
            check_record SKIP "$name" "$need is missing"
            check_archive
            return 2
        fi
    done
    local left=$((CHECK_DEADLINE - $(check_now))) by_deadline=0
    if ((left < CHECK_MIN_LEFT)); then
        CHECK_CUT=1
        check_record SKIP "$name" "not started: the deadline was ${left} s away"
        check_archive
        return 2
    fi
    ((limit >= left)) && limit=$left by_deadline=1
    if ((CHECK_FAKE)); then  # the schedule alone: its expected seconds, cut at its limit
        local secs=${expect:-0}
        ((secs > limit)) && secs=$limit
        CHECK_FAKE_NOW=$((CHECK_FAKE_NOW + secs))
        CHECK_MADE+=("${makes[@]}")
        if ((secs >= limit)) && ((by_deadline)); then
            CHECK_CUT=1
            check_record FAIL "$name" "killed at the deadline after ${secs} s (fake run)" "${secs}s"
            return 1
        fi
        check_record PASS "$name" "fake run: expected ${expect:-?} s" "${secs}s"
        return 0
    fi
    local log="$CHECK_LOGS/$name.log" t0=$SECONDS rc
    printf '$ %s\n# limit %d s, started %s\n' "$*" "$limit" "$(date -u +%H:%M:%S)" >"$log"
    if [ -n "$out" ]; then
        printf '\n## %s: %s\n\n' "$name" "$*" >>"$CHECK_OUT/$out"
        timeout -k 5 "$limit" "$@" </dev/null 2>>"$log" | tee -a "$CHECK_OUT/$out" >>"$log"
        rc=${PIPESTATUS[0]}
    else
        timeout -k 5 "$limit" "$@" </dev/null >>"$log" 2>&1
        rc=$?
    fi
    local secs=$((SECONDS - t0)) status=PASS reason="${expect:+expected ${expect} s}"
    if ((rc != 0)); then
        status=FAIL
        if { ((rc == 124)) || ((rc == 137)); } && ((secs >= limit)); then
            if ((by_deadline)); then
                CHECK_CUT=1
                reason="killed at the deadline after ${secs} s"
            else
                reason="killed at its limit of ${limit} s"
            fi
        else
            reason="exit status $rc"
        fi
        reason="$reason; in $name.log:"
    fi
    printf '# exit status %d after %d s\n' "$rc" "$secs" >>"$log"
    check_trim "$log"
    check_record "$status" "$name" "$reason" "${secs}s"
    local shown=""
    [ -n "$show" ] && shown=$(grep -E -- "$show" "$log" | head -n 6)
    [ -n "$shown" ] && check_detail <<<"$shown"
    if [ $status = FAIL ]; then
        [ -n "$shown" ] && check_detail <<<"...   (the end of the log:)"
        tail -n 10 "$log" | check_detail
    fi
    check_archive
    [ $status = PASS ]
}

check_end() {
    local verdict="all passed"
    ((CHECK_FAILED)) && verdict="something FAILED"
    ((CHECK_CUT)) && verdict="$verdict; the deadline cut the run short"
    printf '\ngpu-check: %d passed, %d failed, %d skipped: %s. Logs: gpu-check-logs.tar.gz\n' \
        "${CHECK_COUNTS[0]}" "${CHECK_COUNTS[1]}" "${CHECK_COUNTS[2]}" "$verdict" | tee -a "$CHECK_OUT/summary.txt"
    check_archive
    rm -rf "$CHECK_LOGS"
    ((CHECK_FAILED || CHECK_CUT)) && return 1
    return 0
}
