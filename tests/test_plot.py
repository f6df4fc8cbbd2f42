#!/usr/bin/env python3
"""test_plot.py -- tools/plot.py on recorded seam output (tests/data/plot/)
and on a timeline seam writes now (seam run --timeline on the synthetic tiny
model, which the build's seam-synth makes): each figure is written, its SVG
parses as XML with an <svg> root holding drawn paths and text, and its PNG
has the PNG signature; the fresh timeline holds a record per token fed.

  python3 tests/test_plot.py OUT_DIR BUILD_DIR
"""
import json
import os
import subprocess
import sys
import xml.etree.ElementTree as ET

HERE = os.path.dirname(os.path.abspath(__file__))
PLOT = os.path.join(HERE, "..", "tools", "plot.py")
DATA = os.path.join(HERE, "data", "plot")
SVG = "{http://www.w3.org/2000/svg}"

CASES = {
    "curve": ["--pred", "pred-seed-auto.json", "--pred", "pred-seed-gpu-head.json", "--bench", "bench-tiny.json",
              "--points", "seed article:48=93.9,44=46.3,20=24.2"],
    "parts": ["--pred", "pred-seed-auto.json"],
    "waterfall-pred": ["--pred", "pred-seed-auto.json", "--ngl", "44"],
    "waterfall-timeline": ["--timeline", "timeline-tiny.json"],
}


def check(name, args, out_dir):
    kind = name.split("-")[0]
    out = os.path.join(out_dir, name)
    argv = [sys.executable, PLOT, kind, "-o", out] + [os.path.join(DATA, a) if a.endswith(".json") else a
                                                       for a in args]
    r = subprocess.run(argv, capture_output=True, text=True)
    if r.returncode != 0:
        return f"plot.py {kind} failed: {r.stderr.strip()}"
    root = ET.parse(out + ".svg").getroot()
    if root.tag != SVG + "svg":
        return f"{out}.svg: root is <{root.tag}>, not <svg>"
    paths = root.findall(".//" + SVG + "path")
    if len(paths) < 10:
        return f"{out}.svg: only {len(paths)} paths drawn"
    with open(out + ".png", "rb") as f:
        if f.read(8) != b"\x89PNG\r\n\x1a\n":
            return f"{out}.png is not a PNG"
    return None


def fresh_timeline(build_dir, out_dir):
    """seam run --timeline of 4 prompt tokens and 6 generated: the JSON's path,
    or a message saying what is wrong with the run or its records."""
    gguf, path = os.path.join(out_dir, "tiny.gguf"), os.path.join(out_dir, "timeline-fresh.json")
    for argv in ([os.path.join(build_dir, "seam-synth"), os.path.join(HERE, "..", "models", "tiny.shape"), "-o", gguf],
                 [os.path.join(build_dir, "seam"), "run", "-m", gguf, "--tokens", "1,2,3,4", "-n", "6", "-t", "1",
                  "--timeline", path]):
        r = subprocess.run(argv, capture_output=True, text=True)
        if r.returncode != 0:
            return None, f"{' '.join(argv)} failed: {r.stderr.strip()}"
    with open(path) as f:
        tokens = json.load(f)["tokens"]
    # the prompt's 4 tokens and the 5 generated ones fed back (the 6th is not)
    if [t["pos"] for t in tokens] != list(range(9)) or [t["prefill"] for t in tokens] != [True] * 4 + [False] * 5:
        return None, f"{path}: records of positions {[t['pos'] for t in tokens]}, want the prompt's 0-3 and 4-8"
    if any(t["token_us"] <= 0 or t["cpu_us"] + t["head_us"] > t["token_us"] * 1.01 for t in tokens):
        return None, f"{path}: a token's parts exceed its time"
    return path, None


def main():
    out_dir = sys.argv[1] if len(sys.argv) > 1 else "plot-test"
    build_dir = sys.argv[2] if len(sys.argv) > 2 else os.path.join(HERE, "..", "build")
    os.makedirs(out_dir, exist_ok=True)
    failed = 0
    fresh, err = fresh_timeline(build_dir, out_dir)
    if fresh:
        CASES["waterfall-fresh"] = ["--timeline", fresh, "--token", "2"]
    else:
        print(f"FAIL seam run --timeline: {err}")
        failed += 1
    for name, args in CASES.items():
        err = check(name, args, out_dir)
        print(f"{'FAIL' if err else 'ok  '} {name}{': ' + err if err else ''}")
        failed += err is not None
    # bad input is refused with a message, not a traceback
    r = subprocess.run([sys.executable, PLOT, "waterfall", "-o", os.path.join(out_dir, "x"), "--pred",
                        os.path.join(DATA, "pred-seed-auto.json"), "--ngl", "7"], capture_output=True, text=True)
    bad_ok = r.returncode != 0 and "no prediction for -ngl 7" in r.stderr and "Traceback" not in r.stderr
    print(f"{'ok  ' if bad_ok else 'FAIL'} waterfall of a missing -ngl is refused")
    failed += not bad_ok
    total = len(CASES) + 1 + (fresh is None)
    print(f"{total - failed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
