#!/usr/bin/python3
"""plot.py -- seam's numbers as figures (matplotlib), each written as SVG and PNG.

The data is what seam writes:
  seam plan ... --hw PROFILE --json P.json       predicted tok/s and the parts of a token, per -ngl
  seam bench ... -o json > B.json                measured tok/s, per -ngl, placement, threads
  seam run ... --timeline T.json                 every token's segments and crossings, measured

  tools/plot.py curve -o OUT --pred P.json [--pred ...] [--bench B.json ...] [--points 'label:48=93.9,44=46.3']
      the offload curve: tok/s against GPU layers, one line per placement,
      predicted dashed beside measured (solid), published points as markers
  tools/plot.py parts -o OUT --pred P.json
      where a token's time goes at each -ngl: stacked bars of the predicted parts
  tools/plot.py waterfall -o OUT (--pred P.json --ngl N | --timeline T.json [--token K])
      one token on three lanes (GPU, bus, CPU) against time: the GPU idle while the CPU works

OUT is a path without extension: OUT.svg and OUT.png are written. It runs
under Debian's python3 (/usr/bin/python3), whose python3-matplotlib
scripts/deps.sh installs.
"""
import argparse
import json
import statistics
import sys

import matplotlib

matplotlib.use("Agg")  # files only, no display
import matplotlib.pyplot as plt  # noqa: E402

PART_COLOURS = {
    "GPU layers": "#4c78a8",
    "CPU layers": "#e45756",
    "head": "#f58518",
    "crossings": "#54a24b",
    "launch": "#b279a2",
    "embedding": "#9d755d",
}
LANES = ["GPU", "bus", "CPU"]


def load(path):
    with open(path) as f:
        return json.load(f)


def save(fig, out):
    fig.tight_layout()
    for ext in ("svg", "png"):
        fig.savefig(f"{out}.{ext}", dpi=120)
    plt.close(fig)
    print(f"plot.py: wrote {out}.svg and {out}.png")


def placement(overflow, head):
    where = "with the last layer" if head in ("auto", None) else f"on the {head.upper()}"
    return f"overflow {overflow}, head {where}"


def curve(args):
    fig, ax = plt.subplots(figsize=(7.5, 4.6))
    colours = iter(plt.rcParams["axes.prop_cycle"].by_key()["color"])
    for path in args.pred or []:
        p = load(path)
        lines = {}
        for q in p["predictions"]:
            lines.setdefault(placement(q["overflow"], p.get("head")), []).append((q["n_gpu_layers"], q["tok_s"]))
        for name, pts in lines.items():
            pts.sort()
            ax.plot(*zip(*pts), "--", marker=".", color=next(colours), label=f"{name}: predicted ({p['hw']})")
    for path in args.bench or []:
        rows = [r for r in load(path) if r["n_gen"] > 0]
        lines = {}
        for r in rows:
            lines.setdefault((r["overflow"], r["n_threads"]), []).append((r["n_gpu_layers"],
                                                                          statistics.median(r["samples_ts"])))
        for (overflow, threads), pts in lines.items():
            pts.sort()
            ax.plot(*zip(*pts), "-", marker="o", color=next(colours),
                    label=f"{overflow}, {threads} threads: measured (seam bench)")
    for spec in args.points or []:
        label, _, pairs = spec.partition(":")
        pts = sorted((int(a), float(b)) for a, b in (kv.split("=") for kv in pairs.split(",")))
        ax.plot(*zip(*pts), "s", markersize=8, color="black", label=f"{label}: measured")
        for x, y in pts:
            ax.annotate(f"{y:g}", (x, y), textcoords="offset points", xytext=(6, -12), fontsize=8)
    ax.set_xlabel("layers on the GPU (-ngl)")
    ax.set_ylabel("decode tok/s")
    ax.set_title(args.title or "Decode speed against the split")
    ax.set_ylim(bottom=0)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    save(fig, args.out)


def parts(args):
    p = load(args.pred[0])
    preds = sorted({q["n_gpu_layers"]: q for q in p["predictions"]}.values(), key=lambda q: q["n_gpu_layers"])
    xs = [q["n_gpu_layers"] for q in preds]
    fig, ax = plt.subplots(figsize=(7.5, 4.6))
    bottom = [0.0] * len(preds)
    width = 0.8 * (min(b - a for a, b in zip(xs, xs[1:])) if len(xs) > 1 else 1)
    for part, colour in PART_COLOURS.items():
        ms = [q["parts_us"].get(part, 0) / 1e3 for q in preds]
        if not any(ms):
            continue
        ax.bar(xs, ms, width, bottom=bottom, color=colour, label=part)
        bottom = [b + m for b, m in zip(bottom, ms)]
    for x, q, top in zip(xs, preds, bottom):
        ax.annotate(f"{q['tok_s']:.1f} tok/s", (x, top), textcoords="offset points", xytext=(0, 3), ha="center",
                    fontsize=7)
    ax.set_xlabel("layers on the GPU (-ngl)")
    ax.set_ylabel("ms per token (predicted)")
    ax.set_title(args.title or f"Where a token's time goes: {p['model'].split('/')[-1]} on {p['hw']}")
    ax.grid(axis="y", alpha=0.3)
    ax.legend(fontsize=8)
    save(fig, args.out)


def steps_of_timeline(t, k):
    """One decoded token of a timeline as steps in the data flow's order."""
    tokens = [x for x in t["tokens"] if not x["prefill"]]
    if not tokens:
        sys.exit("plot.py: the timeline has no decoded token")
    tok = tokens[min(k, len(tokens) - 1)]
    cross = [c for c in t["crossings"] if c["token"] == tok["token"] and c["dir"] != "WTS"]
    steps = []
    h2d = [c for c in cross if c["dir"] == "H2D"]
    d2h = [c for c in cross if c["dir"] == "D2H"]
    for c in h2d:
        steps.append(("bus", f"H2D {c['bytes']} B", c["total_us"]))
    if tok["gpu_us"]:
        steps.append(("GPU", "GPU layers", tok["gpu_us"]))
    for c in d2h:
        steps.append(("bus", f"D2H {c['bytes']} B", c["total_us"]))
    if tok["cpu_us"]:
        steps.append(("CPU", "CPU layers", tok["cpu_us"]))
    if tok["head_us"]:
        steps.append(("CPU", "head", tok["head_us"]))
    rest = tok["token_us"] - sum(s[2] for s in steps)
    if rest > 0:
        steps.insert(0, ("CPU", "embedding, launch, other", rest))
    return steps, f"token {tok['token']} (measured, seam run --timeline)"


def waterfall(args):
    if args.timeline:
        steps, title = steps_of_timeline(load(args.timeline), args.token)
    else:
        p = load(args.pred[0])
        preds = {q["n_gpu_layers"]: q for q in p["predictions"]}
        if args.ngl not in preds:
            sys.exit(f"plot.py: no prediction for -ngl {args.ngl} in {args.pred[0]} (have {sorted(preds)})")
        q = preds[args.ngl]
        steps = [(s["lane"], s["what"], s["us"]) for s in q["steps"]]
        title = f"one token, -ngl {args.ngl} of {q['n_layers']} (predicted, {p['hw']}): {q['tok_s']:.1f} tok/s"
    fig, ax = plt.subplots(figsize=(8, 3.2))
    t = 0.0
    colours = {"GPU": PART_COLOURS["GPU layers"], "bus": PART_COLOURS["crossings"], "CPU": PART_COLOURS["CPU layers"]}
    total = sum(s[2] for s in steps)
    for lane, what, us in steps:
        y = LANES.index(lane)
        ax.barh(y, us / 1e3, left=t / 1e3, color=colours[lane], edgecolor="white", height=0.6)
        if us > 0.06 * total:
            ax.text((t + us / 2) / 1e3, y, what, ha="center", va="center", fontsize=7, color="white")
        t += us
    bus = [s[2] for s in steps if s[0] == "bus"]
    if bus:  # crossings of a few KiB take microseconds: too thin to see at this scale, so say them
        ax.text(0.01, LANES.index("bus") / (len(LANES) - 1) * 0.78 + 0.11, f"{len(bus)} crossings, {sum(bus):.0f} us in all",
                transform=ax.transAxes, fontsize=8, color=PART_COLOURS["crossings"], va="center")
    gpu_busy = sum(s[2] for s in steps if s[0] == "GPU")
    if gpu_busy:
        ax.text(1.0, 1.02, f"GPU idle {100 * (1 - gpu_busy / total):.0f}% of the token", transform=ax.transAxes,
                ha="right", fontsize=8, color=PART_COLOURS["CPU layers"])
    ax.set_yticks(range(len(LANES)), LANES)
    ax.set_xlabel("ms since the token started")
    ax.set_title(args.title or title, fontsize=9)
    ax.grid(axis="x", alpha=0.3)
    save(fig, args.out)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("kind", choices=["curve", "parts", "waterfall"])
    ap.add_argument("-o", "--out", required=True, help="output path without extension (.svg and .png are written)")
    ap.add_argument("--pred", action="append", help="seam plan --json output (repeatable)")
    ap.add_argument("--bench", action="append", help="seam bench -o json output (repeatable)")
    ap.add_argument("--points", action="append", help="'label:N=tok/s,N=tok/s' published measurements")
    ap.add_argument("--timeline", help="seam run --timeline output (waterfall)")
    ap.add_argument("--token", type=int, default=0, help="which decoded token of the timeline [0]")
    ap.add_argument("--ngl", type=int, help="which prediction (waterfall)")
    ap.add_argument("--title")
    args = ap.parse_args()
    if args.kind in ("parts",) and not args.pred:
        ap.error("parts needs --pred")
    if args.kind == "waterfall" and not (args.timeline or (args.pred and args.ngl is not None)):
        ap.error("waterfall needs --timeline, or --pred and --ngl")
    if args.kind == "curve" and not (args.pred or args.bench or args.points):
        ap.error("curve needs --pred, --bench or --points")
    {"curve": curve, "parts": parts, "waterfall": waterfall}[args.kind](args)


if __name__ == "__main__":
    main()
