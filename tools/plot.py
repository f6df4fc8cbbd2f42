#!/usr/bin/python3
"""plot.py -- seam's numbers as figures (matplotlib), each written as SVG and PNG.

The data is what seam writes:
  seam plan ... --hw PROFILE --json P.json       predicted tok/s and the parts of a token, per -ngl
  seam bench ... -o json > B.json                measured tok/s, per -ngl, placement, threads
  seam run ... --timeline T.json                 every token's segments and crossings, measured
  seam run ... --layers [--hw PROFILE] --timeline T.json
                                                 and every layer's time and bytes (and its predicted time)

  tools/plot.py curve -o OUT --pred P.json [--pred ...] [--bench B.json ...] [--points 'label:48=93.9,44=46.3']
      the offload curve: tok/s against GPU layers, one line per placement,
      predicted dashed beside measured (solid), published points as markers
  tools/plot.py splits -o OUT --layers L.json --experts E.json [--points 'label:48=93.9,44=46.3']
      a MoE's two splits side by side, sharing the tok/s axis: L from seam plan -ngl LIST (the
      layer split), E from seam plan -ngl ALL --n-cpu-moe LIST (the expert split); left against
      the layers' worth of weights moved to the CPU, right against the bytes the CPU reads per
      token; --points are measured on the layer split, by -ngl
  tools/plot.py parts -o OUT --pred P.json
      where a token's time goes at each -ngl: stacked bars of the predicted parts
  tools/plot.py waterfall -o OUT (--pred P.json --ngl N | --timeline T.json [--token K]) [--zoom FROM:TO]
      one token on its lanes (GPU, bus, CPU) against time: the GPU idle while the CPU works;
      from a timeline with layer records, a bar per layer (and per streamed layer's weights);
      --zoom adds a panel enlarging FROM..TO ms, for the bars too thin to see in the whole token
  tools/plot.py layers -o OUT --timeline T.json
      each layer (and the head) of a decoded token, the mean over the decoded tokens: its time,
      coloured by device, beside the speed model's where the run had --hw; below, the bytes it read

OUT is a path without extension: OUT.svg and OUT.png are written. It runs
under Debian's python3 (/usr/bin/python3), whose python3-matplotlib
scripts/deps.sh installs.
"""
import argparse
import collections
import json
import statistics
import sys

try:
    import matplotlib
    import numpy
except ImportError as missing:  # a python without them: say which to use, not a traceback
    sys.exit(f"plot.py needs matplotlib and numpy ({missing}): run it with Debian's /usr/bin/python3 after "
             f"apt-get install python3-matplotlib (scripts/deps.sh does), not {sys.executable}")

matplotlib.use("Agg")  # files only, no display
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.patches import Patch  # noqa: E402

PART_COLOURS = {
    "GPU layers": "#4c78a8",
    "CPU layers": "#e45756",
    "head": "#f58518",
    "crossings": "#54a24b",
    "launch": "#b279a2",
    "embedding": "#9d755d",
}
LANES = ["GPU", "bus", "CPU"]
LANE_COLOURS = {"GPU": PART_COLOURS["GPU layers"], "bus": PART_COLOURS["crossings"], "CPU": PART_COLOURS["CPU layers"]}
BYTES_COLOURS = {"weights": "#9d755d", "KV cache": "#b279a2"}


def load(path):
    try:
        with open(path) as f:
            return json.load(f)
    except OSError as err:
        sys.exit(f"plot.py: cannot read {path}: {err.strerror}")
    except json.JSONDecodeError as err:
        sys.exit(f"plot.py: {path} is not JSON ({err.msg} at line {err.lineno}): give seam's --timeline or --json output")


def save(fig, out):
    fig.tight_layout()
    for ext in ("svg", "png"):
        fig.savefig(f"{out}.{ext}", dpi=120)
    plt.close(fig)
    print(f"plot.py: wrote {out}.svg and {out}.png")


def placement(overflow, head):
    where = "with the last layer" if head in ("auto", None) else f"on the {head.upper()}"
    return f"overflow {overflow}, head {where}"


def parse_points(spec):
    """--points 'label:N=tok/s,N=tok/s': the label and the (N, tok/s) pairs, by N."""
    label, _, pairs = spec.partition(":")
    return label, sorted((int(a), float(b)) for a, b in (kv.split("=") for kv in pairs.split(",")))


def draw_points(ax, label, pts, gids=()):
    """Measured points as black squares, each with its value; gids: an id
    for each square, for tests/test_plot.py."""
    for i, ((x, y), gid) in enumerate(zip(pts, gids or [None] * len(pts))):
        ax.plot(x, y, "s", markersize=8, color="black", label=None if i else f"{label}: measured", gid=gid)
        ax.annotate(f"{y:g}", (x, y), textcoords="offset points", xytext=(6, -12), fontsize=8)


def curve(args):
    fig, ax = plt.subplots(figsize=(7.5, 4.6))
    colours = iter(plt.rcParams["axes.prop_cycle"].by_key()["color"])
    models = []
    for path in args.pred or []:
        p = load(path)
        models.append(p["model"].split("/")[-1])
        lines = {}
        for q in p["predictions"]:
            lines.setdefault(placement(q["overflow"], p.get("head")), []).append((q["n_gpu_layers"], q["tok_s"]))
        for name, pts in lines.items():
            pts.sort()
            ax.plot(*zip(*pts), "--", marker=".", color=next(colours), label=f"{name}: predicted ({p['hw']})")
    for path in args.bench or []:
        rows = [r for r in load(path) if r["n_gen"] > 0]
        models += [r["model"].split("/")[-1] for r in rows[:1]]
        lines = {}
        for r in rows:
            lines.setdefault((r["overflow"], r["n_threads"]), []).append((r["n_gpu_layers"],
                                                                          statistics.median(r["samples_ts"])))
        for (overflow, threads), pts in lines.items():
            pts.sort()
            ax.plot(*zip(*pts), "-", marker="o", color=next(colours),
                    label=f"{overflow}, {threads} threads: measured (seam bench)")
    for spec in args.points or []:
        draw_points(ax, *parse_points(spec))
    ax.set_xlabel("layers on the GPU (-ngl)")
    ax.set_ylabel("decode tok/s")
    ax.set_title(args.title or f"{', '.join(dict.fromkeys(models))}: decode speed against the split")
    ax.set_ylim(bottom=0)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    save(fig, args.out)


def cpu_gb(q):
    """GB the CPU reads for one token of a prediction: the bytes of its CPU steps."""
    return sum(s["bytes"] for s in q["steps"] if s["lane"] == "CPU") / 1e9


def note(ax, lines, panel):
    """Lines of what a panel teaches, boxed in its upper right corner."""
    ax.text(0.98, 0.97, "\n".join(lines), transform=ax.transAxes, ha="right", va="top", fontsize=8,
            gid=svg_id(panel, "note", "label"),
            bbox=dict(boxstyle="round,pad=0.3", facecolor="white", edgecolor="grey", alpha=0.9))


def splits(args):
    """The two ways to split a MoE between a GPU and the CPU, predicted for one
    machine. The layer split (-ngl N) moves whole layers past N to the CPU, and
    the head with them unless every layer is on the GPU; the expert split
    (-ngl all --n-cpu-moe K) moves only the experts of layers 0..K-1. Each
    prediction's marker has the id panel/layer/N or panel/expert/K. A
    layer's experts are nearly all of its weights, so 48-N and K are nearly
    the same weights moved (the same GPU memory freed): the left panel's x.
    But a token reads only the few experts it routes to, beside all of the
    attention and KV cache, so the right panel's x, the bytes the CPU reads
    per token, is what differs between them."""
    lp, ep = load(args.layers), load(args.experts)
    n = lp["predictions"][0]["n_layers"]
    split = {  # name: [(layers' worth moved, prediction)]
        "layer split (-ngl N)": sorted(((n - q["n_gpu_layers"], q) for q in lp["predictions"]
                                        if not q.get("n_cpu_experts")), key=lambda p: p[0]),
        "expert split (-ngl all --n-cpu-moe K)": sorted(((q.get("n_cpu_experts", 0), q) for q in ep["predictions"]
                                                         if q["n_gpu_layers"] == n), key=lambda p: p[0]),
    }
    for (name, pts), path in zip(split.items(), (args.layers, args.experts)):
        if not any(x > 0 for x, _ in pts):  # one with some weights on the CPU
            sys.exit(f"plot.py: no prediction of the {name} in {path}")
    fig, (ax_moved, ax_read) = plt.subplots(1, 2, sharey=True, figsize=(12, 5.2))
    colours = iter(plt.rcParams["axes.prop_cycle"].by_key()["color"])
    for name, pts in split.items():
        colour, key = next(colours), name.split()[0]
        param = "n_gpu_layers" if key == "layer" else "n_cpu_experts"
        for ax, panel, x_of in ((ax_moved, "moved", lambda x, q: x), (ax_read, "read", lambda x, q: cpu_gb(q))):
            xs, ys = [x_of(x, q) for x, q in pts], [q["tok_s"] for _, q in pts]
            ax.plot(xs, ys, "-", color=colour, label=f"{name}: predicted ({lp['hw']})")
            for (x, q), px, y in zip(pts, xs, ys):
                ax.plot(px, y, "o", markersize=4, color=colour, gid=svg_id(panel, key, str(q[param])))
    by_ngl = {q["n_gpu_layers"]: q for _, q in split["layer split (-ngl N)"]}
    for spec in args.points or []:
        label, pts = parse_points(spec)
        draw_points(ax_moved, label, [(n - ngl, y) for ngl, y in pts],
                    [svg_id("moved", "measured", str(ngl)) for ngl, _ in pts])
        pts = [(ngl, y) for ngl, y in pts if ngl in by_ngl]  # drawn at the prediction's bytes
        if pts:
            draw_points(ax_read, label, [(cpu_gb(by_ngl[ngl]), y) for ngl, y in pts],
                        [svg_id("read", "measured", str(ngl)) for ngl, _ in pts])

    def per_layer_mb(pts):  # the CPU's bytes per layer's worth moved, past the first (the head's) step
        (x0, q0), (x1, q1) = pts[1 if len(pts) > 2 else 0], pts[-1]
        return 1e3 * (cpu_gb(q1) - cpu_gb(q0)) / (x1 - x0) if x1 > x0 else float("nan")

    layer_pts, expert_pts = split.values()
    at = dict(expert_pts)
    same = [(x, q["tok_s"], at[x]["tok_s"]) for x, q in layer_pts if x in at and x > 0]
    lines = [f"{x} layers' worth moved: layer split {a:.1f} tok/s, expert split {b:.1f}"
             for x, a, b in (same[:1] + same[-1:] if len(same) > 1 else same)]
    head = [q for _, q in layer_pts if q["head"] == "cpu"]
    if head and layer_pts[0][1]["head"] == "gpu":
        lines.append(f"the layer split's first step takes the head to the CPU "
                     f"({head[0]['parts_us']['head'] / 1e3:.1f} ms a token there);")
    note(ax_moved, lines + [
        "the expert split keeps attention, KV cache and head on the GPU:",
        f"per layer moved, the CPU reads {per_layer_mb(layer_pts):.0f} MB (a whole layer) "
        f"or {per_layer_mb(expert_pts):.0f} MB (its experts)"], "moved")
    first = next(((x, q) for x, q in layer_pts if x > 0), None)  # the layer split's least bytes on the CPU
    ex, ey = zip(*sorted((cpu_gb(q), q["tok_s"]) for _, q in expert_pts))
    if first and ex[0] <= cpu_gb(first[1]) <= ex[-1]:
        gb = cpu_gb(first[1])
        note(ax_read, [f"at {gb:.2f} GB (-ngl {n - first[0]}): layer split {first[1]['tok_s']:.1f} tok/s,",
                       f"expert split {numpy.interp(gb, ex, ey):.1f} (interpolated):",
                       "the speed follows the bytes the CPU reads, and the",
                       "expert split moves the weights a token reads least"], "read")
    ax_moved.set_xlabel(f"layers' worth moved to the CPU: {n} - N whole layers, or K layers' experts",
                        gid="moved/xlabel/label")
    ax_moved.set_ylabel("decode tok/s", gid="moved/ylabel/label")
    ax_moved.set_title("against the weights moved to the CPU (the GPU memory freed)", fontsize=9)
    ax_read.set_title("against the bytes the CPU reads for a token", fontsize=9)
    ax_moved.set_xlim(-1, n + 1)  # room for the squares at the edges
    ax_read.set_xlabel("GB the CPU reads per token (predicted)", gid="read/xlabel/label")
    ax_moved.set_ylim(0, 1.1 * ax_moved.get_ylim()[1])
    for ax in (ax_moved, ax_read):
        ax.grid(alpha=0.3)
    ax_moved.legend(fontsize=8, loc="lower left")
    fig.suptitle(args.title or f"{lp['model'].split('/')[-1]} on {lp['hw']}: the layer split against the "
                 "expert split, predicted (seam plan --hw)", fontsize=10)
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


Bar = collections.namedtuple("Bar", "lane what start us")  # us from the token's start


def one_after_another(steps):
    """Steps (lane, what, us) as bars, each starting where the one before ends."""
    bars, t = [], 0.0
    for lane, what, us in steps:
        bars.append(Bar(lane, what, t, us))
        t += us
    return bars


def run_name(t):
    """The model, the split and the machine a timeline's run was of (its "run")."""
    r = t.get("run")
    if r is None:
        sys.exit("plot.py: the timeline does not say its run (written by an older seam: run it again with this one)")
    gpu = (f"{r['gpu_layers']} of {r['n_layers']} layers on the GPU ({r['gpu']}), head on the {r['head'].upper()}"
           if r["gpu_layers"] or r["head"] == "gpu" else f"{r['n_layers']} layers on the CPU")
    return f"{r['model'].split('/')[-1]}: {gpu}; CPU {r['cpu_kernels']}, {r['threads']} threads"


def decoded_tokens(t):
    tokens = [x for x in t["tokens"] if not x["prefill"]]
    if not tokens:
        sys.exit("plot.py: the timeline has no decoded token")
    return tokens


def layer_name(layer, head):
    return "head" if layer == head else str(layer)


# where seam's slices (timeline.h's lanes) are drawn: the crossings and the
# streamed copies on the bus, the host thread's own time with the CPU's
SLICE_ROW = {"GPU stream": "GPU", "copy stream": "bus", "CPU layers": "CPU", "host thread": "CPU"}


def bars_of_timeline(t, k):
    """One decoded token of a timeline as bars: the slices seam laid out
    (timeline.h's timeline_slices, the layout --trace writes), from the
    token's start. A layer is named by its number; the token's own slice and
    the GPU's stalls (inside the layer that waited) are not drawn."""
    if "slices" not in t:
        sys.exit("plot.py: the timeline has no slices: it was written by an older seam; run it again with this one")
    tokens = decoded_tokens(t)
    if not 0 <= k < len(tokens):
        sys.exit(f"plot.py: --token {k}: the timeline has decoded tokens 0..{len(tokens) - 1}")
    tok = tokens[k]
    bars = []
    for x in t["slices"]:
        if x["token"] != tok["token"] or x["kind"] in ("token", "batch", "stall"):
            continue
        lane = "bus" if x["kind"] == "crossing" else SLICE_ROW[x["lane"]]
        what = x["what"]
        if x["kind"] == "layer" and x["what"].startswith("layer "):
            what = x["what"][len("layer "):]  # "3", "3 experts"
        bars.append(Bar(lane, what, x["start_us"] - tok["start_us"], x["us"]))
    return bars, f"{run_name(t)}\ndecoded token {k} of {len(tokens)} (measured, seam run --timeline)"


def svg_id(*parts):
    """An id for a drawn element in the SVG: what tests/test_plot.py finds bars and labels by."""
    return "/".join(parts).replace(" ", "_")


def draw_lanes(ax, bars, lanes, window, panel):
    """The bars on their lanes over window (ms, ms), each with its name
    inside; the (text, x0, x1) of the names, for drop_crowded_labels."""
    labels = []
    for b in bars:
        y = lanes.index(b.lane)
        left, right = b.start / 1e3, (b.start + b.us) / 1e3
        ax.barh(y, right - left, left=left, color=LANE_COLOURS[b.lane], edgecolor="white", height=0.6,
                gid=svg_id(panel, b.lane, b.what))
        x0, x1 = max(left, window[0]), min(right, window[1])  # the part in view
        if x1 > x0:
            labels.append((ax.text((x0 + x1) / 2, y, b.what, ha="center", va="center", fontsize=7, color="white",
                                   gid=svg_id(panel, b.lane, b.what, "label"), clip_on=True), x0, x1))
    ax.set_xlim(*window)
    ax.set_ylim(-0.5, len(lanes) - 0.3)
    ax.set_yticks(range(len(lanes)), lanes)
    ax.grid(axis="x", alpha=0.3)
    return labels


def drop_crowded_labels(fig, labels):
    """Removes each name wider than its bar: a layer of a few percent of the
    token has room for its number, and a crossing of microseconds for none."""
    fig.tight_layout()
    renderer = fig.canvas.get_renderer()
    for text, x0, x1 in labels:
        left, right = text.axes.transData.transform([(x0, 0), (x1, 0)])[:, 0]
        if text.get_window_extent(renderer).width > 0.9 * (right - left):
            text.remove()


def waterfall(args):
    if args.timeline:
        bars, title = bars_of_timeline(load(args.timeline), args.token)
    else:
        p = load(args.pred[0])
        preds = {q["n_gpu_layers"]: q for q in p["predictions"]}
        if args.ngl not in preds:
            sys.exit(f"plot.py: no prediction for -ngl {args.ngl} in {args.pred[0]} (have {sorted(preds)})")
        q = preds[args.ngl]
        bars = one_after_another((s["lane"], s["what"], s["us"]) for s in q["steps"])
        title = (f"{p['model'].split('/')[-1]}: one token, -ngl {args.ngl} of {q['n_layers']} (predicted, "
                 f"{p['hw']}): {q['tok_s']:.1f} tok/s")
    lanes = [lane for lane in LANES if any(b.lane == lane for b in bars)]  # a CPU-only token has one
    total = max(b.start + b.us for b in bars)
    windows = [(0, total / 1e3)] + ([args.zoom] if args.zoom else [])
    fig, axes = plt.subplots(len(windows), 1, figsize=(9, len(windows) * (1.3 + 0.6 * len(lanes))), squeeze=False)
    labels = []
    for ax, window, panel in zip(axes[:, 0], windows, ("token", "zoom")):
        labels += draw_lanes(ax, bars, lanes, window, panel)
    ax = axes[0, 0]
    if args.zoom:
        ax.axvspan(*args.zoom, color="grey", alpha=0.2, zorder=0)
        axes[1, 0].set_title(f"{args.zoom[0]:g} to {args.zoom[1]:g} ms, enlarged", fontsize=8)
    crossings = [b.us for b in bars if b.lane == "bus"]
    if crossings:  # crossings of a few KiB take microseconds: often too thin to see, so say them
        ax.text(0.01, lanes.index("bus") + 0.32, f"{len(crossings)} crossings, {sum(crossings):.0f} µs in all",
                transform=ax.get_yaxis_transform(), fontsize=8, color=LANE_COLOURS["bus"])
    gpu_busy = sum(b.us for b in bars if b.lane == "GPU")
    if gpu_busy:
        ax.text(0.99, lanes.index("GPU") + 0.32, f"GPU idle {100 * (1 - gpu_busy / total):.0f}% of the token",
                transform=ax.get_yaxis_transform(), ha="right", fontsize=8, color=LANE_COLOURS["CPU"])
    axes[-1, 0].set_xlabel("ms since the token started")
    ax.set_title(args.title or title, fontsize=9, loc="left")
    drop_crowded_labels(fig, labels)
    save(fig, args.out)


def cut_tall_bars(ax, tops, unit):
    """Scales ax to the bars of ordinary height, with room above them for a
    legend, and writes its value across each bar the scale cuts: a head 25
    times a layer's time would flatten the layers the chart is about. tops:
    (x, height, svg id) of each bar."""
    median = statistics.median(h for _, h, _ in tops)
    ymax = 1.4 * max(h for _, h, _ in tops if h <= 4 * median)
    ax.set_ylim(0, ymax)
    for x, h, gid in tops:
        if h > ymax:
            ax.text(x, 0.4 * ymax, unit(h), rotation=90, ha="center", va="center", fontsize=7, gid=svg_id(gid, "value"),
                    bbox=dict(boxstyle="round,pad=0.2", facecolor="white", edgecolor="none"))


def time_unit(us):
    return f"{us / 1e3:.2f} ms" if us >= 1e3 else f"{us:.0f} µs"


def layers(args):
    t = load(args.timeline)
    decoded = {x["token"] for x in decoded_tokens(t)}
    per_layer = {}
    for r in t.get("layers", []):
        if r["token"] in decoded:
            per_layer.setdefault(r["layer"], []).append(r)
    if not per_layer:
        sys.exit(f"plot.py: {args.timeline} has no layer records of a decoded token (run seam run with --layers)")
    xs = sorted(per_layer)
    names = [layer_name(x, xs[-1]) for x in xs]
    devices = [per_layer[x][0]["device"] for x in xs]
    colours = [LANE_COLOURS[d] for d in devices]
    measured = [statistics.mean(r["us"] for r in per_layer[x]) for x in xs]
    predicted = {p["layer"]: p["us"] for p in t.get("layer_predictions", [])}
    fig, (ax, ax_bytes) = plt.subplots(2, 1, sharex=True, figsize=(9, 5.8), gridspec_kw={"height_ratios": [3, 2]})
    width = 0.4 if predicted else 0.8
    shift = width / 2 if predicted else 0
    tops = []
    for x, name, device, colour, us in zip(xs, names, devices, colours, measured):
        gid = svg_id("measured", device, name)
        ax.bar(x - shift, us, width, color=colour, gid=gid)
        tops.append((x - shift, us, gid))
        if x in predicted:
            gid = svg_id("predicted", device, name)
            ax.bar(x + shift, predicted[x], width, facecolor="white", edgecolor=colour, hatch="////", gid=gid)
            tops.append((x + shift, predicted[x], gid))
    cut_tall_bars(ax, tops, time_unit)
    handles = [Patch(color=LANE_COLOURS[d], label=f"measured on the {d}") for d in LANES if d in devices]
    summary = f"layers and head: {sum(measured) / 1e3:.2f} ms measured"
    if predicted:
        handles.append(Patch(facecolor="white", edgecolor="grey", hatch="////", label="predicted (seam run --hw)"))
        summary += f", {sum(predicted.get(x, 0) for x in xs) / 1e3:.2f} ms predicted"
    ax.legend(handles=handles, fontsize=8, loc="best", ncol=len(handles), title=summary, title_fontsize=8)
    ax.set_ylabel("µs per token")
    ax.grid(axis="y", alpha=0.3)
    ax.set_title(args.title or f"{run_name(t)}\neach layer of a decoded token: the mean of {len(decoded)} "
                 "tokens (measured, seam run --layers)", fontsize=9)
    weights = [statistics.mean(r["weight_bytes"] for r in per_layer[x]) / 1e6 for x in xs]
    kv = [statistics.mean(r["kv_bytes"] for r in per_layer[x]) / 1e6 for x in xs]
    for x, name, w, k in zip(xs, names, weights, kv):
        ax_bytes.bar(x, w, 0.8, color=BYTES_COLOURS["weights"], gid=svg_id("bytes", "weights", name))
        ax_bytes.bar(x, k, 0.8, bottom=w, color=BYTES_COLOURS["KV cache"], gid=svg_id("bytes", "KV", name))
    cut_tall_bars(ax_bytes, [(x, w + k, svg_id("bytes", name)) for x, name, w, k in zip(xs, names, weights, kv)],
                  lambda mb: f"{mb:.1f} MB")
    # a legend of what can be seen: no KV entry where every layer's KV is under a pixel or two
    top = ax_bytes.get_ylim()[1]
    tallest = {"weights": max(weights), "KV cache": max(kv)}
    shown = [Patch(color=c, label=what) for what, c in BYTES_COLOURS.items() if tallest[what] >= 0.01 * top]
    if shown:
        ax_bytes.legend(handles=shown, fontsize=8, loc="best", ncol=len(shown))
    ax_bytes.set_ylabel("MB read per token")
    ax_bytes.grid(axis="y", alpha=0.3)
    ax_bytes.set_xticks(xs, names)
    ax_bytes.set_xlabel("layer")
    save(fig, args.out)


def window(spec):
    """--zoom FROM:TO, in ms."""
    try:
        a, b = (float(v) for v in spec.split(":"))
    except ValueError:
        raise argparse.ArgumentTypeError(f"'{spec}' is not FROM:TO in ms (e.g. 144:147)")
    if not a < b:
        raise argparse.ArgumentTypeError(f"'{spec}': FROM must be below TO")
    return a, b


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("kind", choices=["curve", "splits", "parts", "waterfall", "layers"])
    ap.add_argument("-o", "--out", required=True, help="output path without extension (.svg and .png are written)")
    ap.add_argument("--pred", action="append", help="seam plan --json output (repeatable)")
    ap.add_argument("--bench", action="append", help="seam bench -o json output (repeatable)")
    ap.add_argument("--points", action="append", help="'label:N=tok/s,N=tok/s' published measurements")
    ap.add_argument("--layers", help="seam plan -ngl LIST --json output: the layer split (splits)")
    ap.add_argument("--experts", help="seam plan -ngl ALL --n-cpu-moe LIST --json output: the expert split (splits)")
    ap.add_argument("--timeline", help="seam run --timeline output (waterfall, layers)")
    ap.add_argument("--token", type=int, default=0, help="which decoded token of the timeline [0]")
    ap.add_argument("--ngl", type=int, help="which prediction (waterfall)")
    ap.add_argument("--zoom", type=window, help="FROM:TO ms of the token to draw again, enlarged (waterfall)")
    ap.add_argument("--title")
    args = ap.parse_args()
    if args.kind in ("parts",) and not args.pred:
        ap.error("parts needs --pred")
    if args.kind == "waterfall" and not (args.timeline or (args.pred and args.ngl is not None)):
        ap.error("waterfall needs --timeline, or --pred and --ngl")
    if args.kind == "curve" and not (args.pred or args.bench or args.points):
        ap.error("curve needs --pred, --bench or --points")
    if args.kind == "splits" and not (args.layers and args.experts):
        ap.error("splits needs --layers and --experts")
    if args.kind == "layers" and not args.timeline:
        ap.error("layers needs --timeline")
    {"curve": curve, "splits": splits, "parts": parts, "waterfall": waterfall, "layers": layers}[args.kind](args)


if __name__ == "__main__":
    main()
