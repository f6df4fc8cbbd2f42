#!/usr/bin/env python3
"""predict_check.py -- seam plan's predicted decode speed against seam bench on
this machine (CPU only): each configuration predicted (`seam plan --hw this`,
which measures the machine) and then measured (`seam bench`), close together
so that they see the same machine, over several rounds. A round measures the
profile first, --profile-runs times per thread count, and predicts every
model from each key's median (one probe run moves with the machine as much
as the tolerance).

  python3 bench/predict_check.py run -m MODEL -t 1,2 --fill 512 --rounds 1 --out R.json   (appends)
  python3 bench/predict_check.py report R.json

Each measurement decodes --gen tokens after the cache already holds
FILL - GEN/2 positions (`seam bench -d`), so its tokens attend over FILL
positions on average, and the prediction (linear in the fill) is made at
FILL. Run each round under /work/bin/seam-quiet.
"""
import argparse
import json
import os
import statistics
import sys
import tempfile
import time

import seam_json


def measure_profile(seam, model, threads, times, path):
    """`seam plan --hw this` measured `times` times on `threads` threads, each
    value's median written to `path` as a hardware profile: one probe run is as
    noisy as the machine, and every prediction of a round uses this one."""
    runs = [seam_json.plan(seam, model, ["-ngl", "0", "--hw", "this", "-t", threads, "-c", "1"])["profile"]
            for _ in range(times)]
    profile = {key: statistics.median(r[key] for r in runs) for key in runs[0]}
    when = time.strftime("%Y-%m-%d %H:%M")
    with open(path, "w") as f:
        f.write("name = this-median\n")
        for key, value in profile.items():
            f.write(f"{key} = {value:.6g}  # measured: {when}, median of {times} runs of seam plan --hw this -t {threads}\n")
    return profile


def run(args):
    rows = json.load(open(args.out)) if os.path.exists(args.out) else []
    depth = args.fill - args.gen // 2
    if depth < 0:
        sys.exit("predict_check: --fill must be at least half of --gen")
    for _ in range(args.rounds):
        for t in args.threads.split(","):
            hw = os.path.join(tempfile.gettempdir(), f"predict-this-t{t}.hw")  # the round's profile, for seam plan
            profile = measure_profile(args.seam, args.model[0], t, args.profile_runs, hw)
            for model in args.model:
                pred = seam_json.plan(args.seam, model, ["-ngl", "0", "--hw", hw, "-t", t, "-c", str(args.fill)])
                pred = pred["predictions"][0]
                meas = seam_json.bench(args.seam, model, ["-p", "0", "-n", str(args.gen), "-d", str(depth), "-t", t,
                                                          "-r", str(args.reps)])[0]
                row = {"model": os.path.basename(model), "threads": int(t), "fill": args.fill, "n_gen": args.gen,
                       "depth": depth, "predicted": pred["tok_s"], "measured": statistics.median(meas["samples_ts"]),
                       "samples": meas["samples_ts"], "profile": profile, "when": time.strftime("%Y-%m-%d %H:%M")}
                rows.append(row)
                print(f"{row['model']} t={t} fill={args.fill}: predicted {row['predicted']:.1f}, measured "
                      f"{row['measured']:.1f} ({100 * (row['predicted'] / row['measured'] - 1):+.1f}%)", flush=True)
                json.dump(rows, open(args.out, "w"), indent=1)


def report(args):
    rows = json.load(open(args.file))
    groups = {}
    for r in rows:
        groups.setdefault((r["model"], r["threads"], r["fill"]), []).append(r)
    print("| model | threads | fill | runs | predicted tok/s (median) | measured tok/s (median) | error |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    for (model, t, fill), rs in sorted(groups.items()):
        p = statistics.median(r["predicted"] for r in rs)
        m = statistics.median(r["measured"] for r in rs)
        print(f"| {model} | {t} | {fill} | {len(rs)} | {p:.1f} | {m:.1f} | {100 * (p / m - 1):+.1f}% |")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("run")
    r.add_argument("-m", "--model", action="append", required=True)
    r.add_argument("-t", "--threads", default="1,2")
    r.add_argument("--fill", type=int, default=512)
    r.add_argument("--gen", type=int, default=64, help="tokens decoded per measured run")
    r.add_argument("--rounds", type=int, default=1)
    r.add_argument("--profile-runs", type=int, default=3, help="probe runs whose medians make a round's profile")
    r.add_argument("--reps", type=int, default=3)
    r.add_argument("--seam", default="build/seam")
    r.add_argument("--out", required=True)
    p = sub.add_parser("report")
    p.add_argument("file")
    args = ap.parse_args()
    (run if args.cmd == "run" else report)(args)


if __name__ == "__main__":
    sys.exit(main())
