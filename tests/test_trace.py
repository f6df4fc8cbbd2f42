#!/usr/bin/env python3
"""test_trace.py -- seam run, chat and bench --trace write Chrome Trace
Event files that tools/check_trace.py passes: on the CPU, and where there is
a CUDA device (the emulated one in an emulated build) at the splits that use
every lane: GPU and CPU layers with their crossings, streamed weights and the
GPU's stalls, experts kept on the CPU. The checker itself fails on broken
traces (overlapping slices on a lane, a slice outside its token, a bad lane).

  python3 tests/test_trace.py BUILD_DIR SCRATCH_DIR
"""
import json
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tools"))
import check_trace  # noqa: E402


def seam(build, *args, stdin=None):
    return subprocess.run([os.path.join(build, "seam"), *args], input=stdin, capture_output=True, text=True, errors="replace",
                          timeout=300)


def traced(build, scratch, name, args, kinds, lanes, stdin=None):
    path = os.path.join(scratch, f"trace-{name}.json")
    r = seam(build, *args, "--trace", path, "-t", "2", stdin=stdin)
    assert r.returncode == 0, f"{name}: seam {' '.join(args)} failed:\n{r.stderr}"
    trace = json.load(open(path))
    bad = check_trace.check(trace)
    assert not bad, f"{name}: " + "\n".join(bad[:20])
    slices = [e for e in trace["traceEvents"] if e["ph"] == "X"]
    got = {e["cat"] for e in slices}
    assert set(kinds) <= got, f"{name}: kinds {sorted(got)}, want {kinds}"
    used = {e["tid"] for e in slices}
    assert len(used) >= lanes, f"{name}: {len(used)} lanes, want {lanes}"
    meta = trace["otherData"]
    assert meta["seam"] and (args[0] == "bench" or meta["n_layers"] > 0 and "gpu_layers" in meta), \
        f"{name}: metadata {meta}"
    print(f"test_trace: {name}: {len(slices)} slices on {len(used)} lanes, kinds {sorted(got)}")
    return trace


def broken_traces_fail(trace):
    def with_slice(**over):
        t = json.loads(json.dumps(trace))
        x = next(e for e in t["traceEvents"] if e["ph"] == "X" and e["cat"] == "layer")
        x.update(over)
        return t
    layer = next(e for e in trace["traceEvents"] if e["ph"] == "X" and e["cat"] == "layer")
    cases = {"a lane that is none": with_slice(tid=9),
             "a negative duration": with_slice(dur=-1),
             "a slice past its token": with_slice(dur=layer["dur"] + 1e9),
             "not a trace": {"events": []}}
    for what, t in cases.items():
        assert check_trace.check(t), f"check_trace passed {what}"
    print(f"test_trace: the checker fails {len(cases)} broken traces")


def main():
    build, scratch = sys.argv[1], sys.argv[2]
    os.makedirs(scratch, exist_ok=True)
    tiny = os.path.join(scratch, "trace-tiny.gguf")
    moe = os.path.join(scratch, "trace-moe.gguf")
    for shape, out in (("tiny", tiny), ("moe-small", moe)):
        subprocess.run([os.path.join(build, "seam-synth"), os.path.join(ROOT, "models", f"{shape}.shape"), "-o", out],
                       check=True, capture_output=True)
    prompt = ["--tokens", "1,2,3,4,5", "-n", "4", "-q"]
    cpu = traced(build, scratch, "cpu", ["run", "-m", tiny, *prompt, "--layers"], ["batch", "token", "layer"], 2)
    traced(build, scratch, "cpu-segments", ["run", "-m", tiny, *prompt], ["token", "layer"], 2)
    traced(build, scratch, "chat", ["chat", "-m", tiny, "-n", "3", "-q"], ["token", "layer"], 2, stdin="hi\nmore\n")
    # seam bench: a process a test, its last repetition
    bench = traced(build, scratch, "bench", ["bench", "-m", tiny, "-p", "8", "-n", "4", "-r", "2", "-o", "json"],
                   ["token", "layer"], 2)
    processes = {e["pid"] for e in bench["traceEvents"]}
    assert processes == {1, 2}, f"bench: processes {processes}, want one a test (pp8, tg4)"
    broken_traces_fail(cpu)
    if seam(build, "run", "-m", tiny, "--tokens", "1", "-n", "1", "-ngl", "1", "-q").returncode != 0:
        print("test_trace: the GPU splits skipped: no CUDA device")
        return 0
    traced(build, scratch, "split", ["run", "-m", tiny, *prompt, "--layers", "-ngl", "2"],
           ["layer", "crossing", "token"], 3)
    traced(build, scratch, "stream", ["run", "-m", tiny, *prompt, "--layers", "-ngl", "1", "--overflow", "stream",
                                      "--head", "cpu"], ["weights", "crossing", "layer"], 4)
    traced(build, scratch, "bench-split", ["bench", "-m", tiny, "-p", "8", "-n", "4", "-r", "1", "-ngl", "2",
                                           "-o", "json"], ["crossing", "layer"], 3)
    traced(build, scratch, "experts", ["run", "-m", moe, *prompt, "--layers", "-ngl", "99", "--n-cpu-moe", "2"],
           ["crossing", "layer"], 3)
    return 0


if __name__ == "__main__":
    sys.exit(main())
