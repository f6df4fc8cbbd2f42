#!/usr/bin/env python3
"""predict_check.py -- seam plan's predicted decode speed against seam bench on
this machine (CPU only): each configuration predicted (`seam plan --hw this`,
which measures the machine first) and then measured (`seam bench`), the two
back to back so that they see the same machine, over several rounds.

  python3 bench/predict_check.py run -m MODEL -t 1,2 --fill 512 --rounds 1 --out R.json   (appends)
  python3 bench/predict_check.py report R.json

A tgN run decodes positions 0..N-1, so its tokens attend over (N+1)/2
positions on average, and the prediction is linear in the fill: --fill F
measures tg(2F-1) against the prediction at fill F. Run each round under
/work/bin/seam-quiet.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import time


def run(args):
    rows = json.load(open(args.out)) if os.path.exists(args.out) else []
    n_gen = 2 * args.fill - 1
    for _ in range(args.rounds):
        for model in args.model:
            for t in args.threads.split(","):
                plan = subprocess.run([args.seam, "plan", "-m", model, "-ngl", "0", "--hw", "this", "-t", t, "-c",
                                       str(args.fill), "--json", "-"], capture_output=True, text=True, check=True)
                pred = json.loads(plan.stdout)["predictions"][0]
                profile = [line for line in plan.stderr.splitlines() if line.startswith("cpu_read_gbs")]
                bench = subprocess.run([args.seam, "bench", "-m", model, "-p", "0", "-n", str(n_gen), "-t", t, "-r",
                                        str(args.reps), "-o", "json"], capture_output=True, text=True, check=True)
                meas = json.loads(bench.stdout)[0]
                row = {"model": os.path.basename(model), "threads": int(t), "fill": args.fill, "n_gen": n_gen,
                       "predicted": pred["tok_s"], "measured": statistics.median(meas["samples_ts"]),
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
    r.add_argument("--rounds", type=int, default=1)
    r.add_argument("--reps", type=int, default=2)
    r.add_argument("--seam", default="build/seam")
    r.add_argument("--out", required=True)
    p = sub.add_parser("report")
    p.add_argument("file")
    args = ap.parse_args()
    (run if args.cmd == "run" else report)(args)


if __name__ == "__main__":
    sys.exit(main())
