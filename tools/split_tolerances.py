#!/usr/bin/env python3
"""split_tolerances.py — measures how far the GPU split lies from each golden
fixture, and writes each fixture's tolerance into it.

  python3 tools/split_tolerances.py [--build build-emu] [--order avx2|avx512] [--check]

Runs BUILD/test_golden's split test (golden/split: every split kind of every
fixture, on the emulated device of a -DSEAM_CUDA_EMU=ON build, or on a real
GPU) with the CPU kernel set of ORDER (SEAM_KERNELS; by default the
machine's), reads the worst position of each fixture over all its splits
(the test's "worst position X std" lines), and writes into each fixture of
tests/golden/ORDER/ the line

  split_tol T      T = 2.5 x that worst, rounded up to 0.01 (at least 0.05)

with a comment saying when and where it was measured. test_golden holds the
split to it. --check only compares: it exits 1 when a fixture's measured
worst passes its recorded tolerance or lies below a third of it (the
tolerance no longer fits the kernels). make_golden.py keeps a fixture's
split_tol when it rewrites the fixture.
"""
import argparse
import datetime
import math
import os
import re
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FACTOR, FLOOR = 2.5, 0.05
WORST = re.compile(r"\] ([A-Za-z0-9_.-]+), .*: worst position ([0-9.eE+-]+) std from llama\.cpp's logits")


def measure(build, order):
    env = dict(os.environ, SEAM_KERNELS=order, SEAM_EMU_RACECHECK="0", SEAM_SPLIT_MEASURE="1")
    cmd = [os.path.join(build, "test_golden"), "--verbose", "--filter", "golden/split*", "-j1"]
    print(f"split_tolerances: {' '.join(cmd)} (SEAM_KERNELS={order}); the emulated device takes minutes",
          file=sys.stderr)
    r = subprocess.run(cmd, env=env, capture_output=True, text=True)
    worst = {}
    for line in (r.stdout + r.stderr).splitlines():
        m = WORST.search(line)
        if m:
            worst[m.group(1)] = max(worst.get(m.group(1), 0.0), float(m.group(2)))
    if r.returncode != 0 or not worst:
        sys.exit(f"split_tolerances: the split test failed or reported nothing (exit {r.returncode}):\n"
                 + (r.stdout + r.stderr)[-4000:])
    return worst


def tolerance(worst):
    return max(FLOOR, math.ceil(FACTOR * worst * 100 - 1e-9) / 100)


def write(path, tol, worst, where):
    lines = [l for l in open(path) if not l.startswith("split_tol ") and not l.startswith("# split_tol:")]
    at = next(i for i, l in enumerate(lines) if l.startswith("sha256 ")) + 1
    lines[at:at] = [f"# split_tol: {FACTOR} x the split's worst position, {worst:.3g} std ({where})\n",
                    f"split_tol {tol:.2f}\n"]
    with open(path, "w") as f:
        f.writelines(lines)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--build", default=os.path.join(ROOT, "build-emu"))
    ap.add_argument("--order", choices=("avx2", "avx512"),
                    default="avx512" if "avx512f" in open("/proc/cpuinfo").read() else "avx2")
    ap.add_argument("--check", action="store_true")
    a = ap.parse_args()
    worst = measure(a.build, a.order)
    golden = os.path.join(ROOT, "tests", "golden", a.order)
    where = f"measured {datetime.date.today().isoformat()} with {os.path.basename(os.path.normpath(a.build))}"
    # a real model's fixtures the emulated device skips (it runs one prompt
    # of a real model) take the worst of that model's measured ones
    model_of = {}
    for f in sorted(os.listdir(golden)):
        if f.startswith("logits-") and f.endswith(".txt"):
            line = next((l for l in open(os.path.join(golden, f)) if l.startswith("model ")), "")
            model_of[f[len("logits-"):-len(".txt")]] = line.strip()
    for name, model in model_of.items():
        if name not in worst and model.startswith("model file "):
            same = [worst[n] for n, m in model_of.items() if m == model and n in worst]
            if same:
                worst[name] = max(same)
    bad = 0
    for name in sorted(worst):
        path = os.path.join(golden, f"logits-{name}.txt")
        if not os.path.exists(path):
            continue
        tol = tolerance(worst[name])
        old = next((float(l.split()[1]) for l in open(path) if l.startswith("split_tol ")), None)
        print(f"{name}: worst {worst[name]:.3f} std, split_tol {tol:.2f}" + (f" (recorded {old:.2f})" if old else ""))
        if a.check:
            if old is None or worst[name] > old or worst[name] < old / (FACTOR + 0.5):
                bad += 1
        else:
            write(path, tol, worst[name], where)
    if a.check and bad:
        sys.exit(f"split_tolerances: {bad} fixtures' tolerances no longer fit their measured distances")


if __name__ == "__main__":
    main()
