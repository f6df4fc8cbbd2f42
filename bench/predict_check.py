#!/usr/bin/env python3
"""predict_check.py -- seam plan's predicted decode speed against seam bench on
this machine (CPU only).

This machine is shared, and its speed moves by more than the tolerance
within minutes, so every measurement is predicted from a profile measured
right before it: each configuration (model, threads) is one pair

  seam plan -m MODEL -ngl 0 --hw this -t T -c FILL --json -   (probes the machine, then predicts)
  seam bench -m MODEL -p 0 -n GEN -d FILL-GEN/2 -t T -r REPS   (measures: median of its runs)
  seam plan ... again                                          (probes the machine after it)

and a round runs every configuration's triple in turn, the order reversed
from one round to the next (so no configuration always follows the same
neighbour). The prediction a bench is checked against is the mean of the
two probes' (per part, in microseconds a token): the probes bracket the
bench, so the machine's drift while it ran cancels to first order. Nothing
is fitted to the benchmarks: every profile value is the probe's
measurement of that moment. The report gives, per configuration, the
median of the rounds' errors (each prediction against its own bench) and
their spread, and the same for the token's two parts on the CPU, the
layers and the output head (`seam bench`'s segments_us: each decoded
token's time in each, from the engine's timeline).

  python3 bench/predict_check.py run -m MODEL... -t 1,2 --fill 512 --rounds 1 --out R.json   (appends)
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
import time

import seam_json


def configurations(models, threads, round_no):
    """Every (model, threads) pair, in an order that alternates with the round."""
    pairs = [(m, t) for t in threads for m in models]
    return pairs if round_no % 2 == 0 else pairs[::-1]


def run(args):
    rows = json.load(open(args.out)) if os.path.exists(args.out) else []
    depth = args.fill - args.gen // 2
    if depth < 0:
        sys.exit("predict_check: --fill must be at least half of --gen")
    threads = args.threads.split(",")
    # rounds already recorded at this fill carry on the alternation
    first = len({r["round"] for r in rows if r["fill"] == args.fill and "round" in r})
    for round_no in range(first, first + args.rounds):
        for model, t in configurations(args.model, threads, round_no):
            def probe():
                plan = seam_json.plan(args.seam, model, ["-ngl", "0", "--hw", "this", "-t", t, "-c", str(args.fill)])
                pred = plan["predictions"][0]
                return {"at": time.strftime("%Y-%m-%d %H:%M:%S"), "tok_s": pred["tok_s"], "parts_us": pred["parts_us"],
                        "cpu_attention_us": pred["cpu_attention_us"], "profile": plan["profile"]}
            before = probe()
            meas = seam_json.bench(args.seam, model, ["-p", "0", "-n", str(args.gen), "-d", str(depth), "-t", t,
                                                      "-r", str(args.reps)])[0]
            measured_at = time.strftime("%Y-%m-%d %H:%M:%S")
            after = probe()
            parts = {k: (before["parts_us"][k] + after["parts_us"][k]) / 2 for k in before["parts_us"]}
            row = {"model": os.path.basename(model), "threads": int(t), "fill": args.fill, "n_gen": args.gen,
                   "depth": depth, "round": round_no, "predicted": 1e6 / sum(parts.values()), "parts_us": parts,
                   "cpu_attention_us": (before["cpu_attention_us"] + after["cpu_attention_us"]) / 2,
                   "measured": statistics.median(meas["samples_ts"]), "samples": meas["samples_ts"],
                   "segments_us": meas["segments_us"], "probes": [before, after], "measured_at": measured_at}
            rows.append(row)
            print(f"round {round_no} {row['model']} t={t} fill={args.fill}: predicted {row['predicted']:.1f}, "
                  f"measured {row['measured']:.1f} ({error(row):+.1f}%)", flush=True)
            json.dump(rows, open(args.out, "w"), indent=1)


def error(row):
    return 100 * (row["predicted"] / row["measured"] - 1)


# a token's parts on the CPU, predicted (seam plan's parts_us and cpu_attention_us) and measured (seam
# bench's segments_us); the matrices are the CPU layers' time less their attention's
PARTS = {
    "CPU matrices": (lambda r: r["parts_us"]["CPU layers"] - r["cpu_attention_us"],
                     lambda s: s["cpu"] - s["cpu_attention"]),
    "CPU attention": (lambda r: r["cpu_attention_us"], lambda s: s["cpu_attention"]),
    "head": (lambda r: r["parts_us"]["head"], lambda s: s["head"]),
}


def part_error(row, part):
    """The predicted time of one part against its measured one, % (None where the run recorded none)."""
    predicted, measured = PARTS[part]
    if "cpu_attention_us" not in row or "segments_us" not in row:
        return None
    m = measured(row["segments_us"])
    return 100 * (predicted(row) / m - 1) if m > 0 else None


def report(args):
    rows = [r for f in args.files for r in json.load(open(f))]
    groups = {}
    for r in rows:
        groups.setdefault((r["model"], r["threads"], r["fill"]), []).append(r)
    print("| model | threads | fill | rounds | predicted tok/s (median) | measured tok/s (median) "
          "| error (median of rounds) | errors, lowest..highest | " + " | ".join(f"{p} error" for p in PARTS) + " |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|" + "---:|" * len(PARTS))
    within = 0
    for (model, t, fill), rs in sorted(groups.items()):
        p = statistics.median(r["predicted"] for r in rs)
        m = statistics.median(r["measured"] for r in rs)
        errs = sorted(error(r) for r in rs)
        med = statistics.median(errs)
        within += abs(med) <= 10
        cols = []
        for part in PARTS:
            e = [x for x in (part_error(r, part) for r in rs) if x is not None]
            cols.append(f"{statistics.median(e):+.1f}%" if e else "-")
        print(f"| {model} | {t} | {fill} | {len(rs)} | {p:.1f} | {m:.1f} | {med:+.1f}% "
              f"| {errs[0]:+.1f}%..{errs[-1]:+.1f}% | " + " | ".join(cols) + " |")
    print(f"\nwithin 10% (median of rounds): {within} of {len(groups)}")
    print("\n(a part's error, the median of the rounds': its predicted time against its measured time, "
          "+ = predicted slower, the opposite sign of the tok/s error)")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("run")
    r.add_argument("-m", "--model", action="append", required=True)
    r.add_argument("-t", "--threads", default="1,2")
    r.add_argument("--fill", type=int, default=512)
    r.add_argument("--gen", type=int, default=64, help="tokens decoded per measured run")
    r.add_argument("--rounds", type=int, default=1)
    r.add_argument("--reps", type=int, default=3)
    r.add_argument("--seam", default="build/seam")
    r.add_argument("--out", required=True)
    p = sub.add_parser("report")
    p.add_argument("files", nargs="+")
    args = ap.parse_args()
    (run if args.cmd == "run" else report)(args)


if __name__ == "__main__":
    sys.exit(main())
