#!/usr/bin/env python3
"""test_plot.py -- tools/plot.py on recorded seam output (tests/data/plot/):
each figure is written, its SVG parses as XML with an <svg> root holding
drawn paths and text, and its PNG has the PNG signature.

  python3 tests/test_plot.py OUT_DIR
"""
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
    argv = [sys.executable, PLOT, kind, "-o", out] + [os.path.join(DATA, a) if a.endswith(".json") else a for a in args]
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


def main():
    out_dir = sys.argv[1] if len(sys.argv) > 1 else "plot-test"
    os.makedirs(out_dir, exist_ok=True)
    failed = 0
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
    total = len(CASES) + 1
    print(f"{total - failed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
