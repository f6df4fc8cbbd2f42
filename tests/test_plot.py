#!/usr/bin/env python3
"""test_plot.py -- tools/plot.py on recorded seam output (tests/data/plot/)
and on a timeline seam writes now (seam run --layers --timeline on the
synthetic tiny model, which the build's seam-synth makes): each figure is
written, its SVG parses as XML with an <svg> root holding drawn paths and
text, and its PNG has the PNG signature; where a case names them, the SVG
holds exactly the bars it names (plot.py gives each bar an id, lane or
series / what) and the labels it names inside them, and the texts it names
(matplotlib writes each text into the SVG as a comment before its glyphs);
the fresh timeline holds
a record per token fed.

The recorded timelines (seam 0.4.0, with the slices --trace lays out; the
tiny and moe-small models of seam-synth): timeline-tiny.json (`run --tokens
1,2,3 -n 4 -t 1`: segments only, no layer records); timeline-gemma-layers.json
(Gemma 3 270M on this machine's CPU, `run --tokens` of 10 ids `-n 7 --layers
--hw this`); timeline-emu-split.json (moe-small, `-ngl 2 --layers` on the
emulated GPU, 2-3 and the head on the CPU) and timeline-emu-stream.json
(tiny, `-ngl 1 --overflow stream --head gpu --layers` on the emulated GPU:
layers 1-3 streamed in), each of 3 prompt tokens and `-n 8`. splits-seed-layers.json and
splits-seed-experts.json: seam plan --shape models/qwen3-30b-a3b.shape --hw
rtx3060-seed --json, of -ngl 0-48+4 and of -ngl 48 --n-cpu-moe 0-48+8, cut to
four predictions each.

  python3 tests/test_plot.py OUT_DIR BUILD_DIR
"""
import collections
import json
import os
import subprocess
import sys
import xml.etree.ElementTree as ET

HERE = os.path.dirname(os.path.abspath(__file__))
PLOT = os.path.join(HERE, "..", "tools", "plot.py")
DATA = os.path.join(HERE, "data", "plot")
SVG = "{http://www.w3.org/2000/svg}"

# bars: the ids of every bar drawn (None: not checked); labels: ids of names
# or values that must be written, no_labels: ones that must not (no room);
# texts: strings the SVG must hold.
Case = collections.namedtuple("Case", "args bars labels no_labels texts", defaults=(None, (), (), ()))


def ids(panel, lane, names):
    return {f"{panel}/{lane}/{n}" for n in names}


GEMMA_LAYERS = [str(i) for i in range(18)] + ["head"]
OTHER = "embedding,_launch,_other"  # the token's time outside its segments, first on the CPU lane
SPLIT_BARS = ids("token", "GPU", ["0", "1"]) | ids("token", "bus", ["H2D_1024_B", "D2H_1024_B"]) \
    | ids("token", "CPU", [OTHER, "2", "3", "head"])

CASES = {
    "curve": Case(["--pred", "pred-seed-auto.json", "--pred", "pred-seed-gpu-head.json", "--bench", "bench-tiny.json",
                   "--points", "seed article:48=93.9,44=46.3,20=24.2"]),
    # a marker per prediction of each split on each panel, the measured points on both
    # (placed by -ngl), the axes' labels and what the figure teaches
    "splits": Case(["--layers", "splits-seed-layers.json", "--experts", "splits-seed-experts.json",
                    "--points", "seed article:48=93.9,44=46.3,20=24.2"],
                   {f"{panel}/{what}" for panel in ("moved", "read")
                    for what in ["layer/0", "layer/20", "layer/44", "layer/48", "expert/0", "expert/8", "expert/24",
                                 "expert/48", "measured/48", "measured/44", "measured/20"]},
                   {"moved/xlabel/label", "moved/ylabel/label", "read/xlabel/label", "moved/note/label",
                    "read/note/label"},
                   texts=["<!-- layers' worth moved to the CPU: 48 - N whole layers, or K layers' experts -->",
                          "<!-- GB the CPU reads per token (predicted) -->", "<!-- decode tok/s -->",
                          "<!-- 48 layers' worth moved: layer split 17.5 tok/s, expert split 23.1 -->",
                          "the layer split's first step takes the head to the CPU (7.4 ms a token there)",
                          "<!-- at 0.41 GB (-ngl 44): layer split 41.5 tok/s, -->"]),
    "parts": Case(["--pred", "pred-seed-auto.json"]),
    "waterfall-pred": Case(["--pred", "pred-seed-auto.json", "--ngl", "44"]),
    # no layer records: a bar per segment
    "waterfall-timeline": Case(["--timeline", "timeline-tiny.json"], ids("token", "CPU", [OTHER, "CPU_layers", "head"]),
                               ids("token", "CPU", ["CPU_layers/label", "head/label"])),
    # a bar per layer, each numbered: 18 layers of 0.25 ms beside a 6 ms head
    "waterfall-gemma-layers": Case(["--timeline", "timeline-gemma-layers.json", "--token", "2"],
                                   ids("token", "CPU", GEMMA_LAYERS + [OTHER]),
                                   ids("token", "CPU", [f"{n}/label" for n in GEMMA_LAYERS])),
    # GPU, bus and CPU lanes; the CPU's 0.3 ms named only in the enlarged panel
    "waterfall-emu-split": Case(["--timeline", "timeline-emu-split.json", "--token", "1", "--zoom", "197.5:199.3"],
                                SPLIT_BARS | {b.replace("token/", "zoom/", 1) for b in SPLIT_BARS},
                                ids("token", "GPU", ["0/label", "1/label"])
                                | ids("zoom", "CPU", ["2/label", "3/label"]) | ids("zoom", "bus", ["D2H_1024_B/label"]),
                                ids("token", "CPU", ["2/label", "3/label"])),
    # the streamed layers' weights on the bus under the GPU's compute; the head on the GPU
    "waterfall-emu-stream": Case(["--timeline", "timeline-emu-stream.json", "--token", "1"],
                                 ids("token", "GPU", ["0", "1", "2", "3", "head"]) | ids("token", "CPU", [OTHER])
                                 | ids("token", "bus", ["H2D_512_B", "D2H_2048_B", "layer_1_weights",
                                                        "layer_2_weights", "layer_3_weights"]),
                                 ids("token", "GPU", ["0/label", "head/label"])),
    # measured and predicted per layer; the head's 6 ms cut by the scale, its value written
    "layers-gemma": Case(["--timeline", "timeline-gemma-layers.json"],
                         ids("measured", "CPU", GEMMA_LAYERS) | ids("predicted", "CPU", GEMMA_LAYERS)
                         | ids("bytes", "weights", GEMMA_LAYERS) | ids("bytes", "KV", GEMMA_LAYERS),
                         {"measured/CPU/head/value", "predicted/CPU/head/value", "bytes/head/value"},
                         {"measured/CPU/0/value"}),
    # no predictions: measured bars alone, coloured by their device
    "layers-emu-split": Case(["--timeline", "timeline-emu-split.json", "--title", "emulated"],
                             ids("measured", "GPU", ["0", "1"]) | ids("measured", "CPU", ["2", "3", "head"])
                             | ids("bytes", "weights", ["0", "1", "2", "3", "head"])
                             | ids("bytes", "KV", ["0", "1", "2", "3", "head"])),
}


def check(name, case, out_dir):
    kind = name.split("-")[0]
    out = os.path.join(out_dir, name)
    argv = [sys.executable, PLOT, kind, "-o", out] + [os.path.join(DATA, a) if a.endswith(".json") else a
                                                       for a in case.args]
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
    named = {e.get("id") for e in root.iter() if "/" in e.get("id", "")}  # matplotlib's own ids have no '/'
    bars = {i for i in named if not i.endswith(("/label", "/value"))}
    if case.bars is not None and bars != case.bars:
        return f"{out}.svg: bars {sorted(bars - case.bars)} not wanted, {sorted(case.bars - bars)} missing"
    if set(case.labels) - named:
        return f"{out}.svg: no {sorted(set(case.labels) - named)}"
    if set(case.no_labels) & named:
        return f"{out}.svg: {sorted(set(case.no_labels) & named)}, where there is no room"
    with open(out + ".svg") as f:
        svg = f.read()
    missing = [t for t in case.texts if t not in svg]
    if missing:
        return f"{out}.svg: no text {missing}"
    return None


def fresh_timeline(build_dir, out_dir):
    """seam run --layers --timeline of 4 prompt tokens and 6 generated: the
    JSON's path, or a message saying what is wrong with the run or its
    records."""
    gguf, path = os.path.join(out_dir, "tiny.gguf"), os.path.join(out_dir, "timeline-fresh.json")
    for argv in ([os.path.join(build_dir, "seam-synth"), os.path.join(HERE, "..", "models", "tiny.shape"), "-o", gguf],
                 [os.path.join(build_dir, "seam"), "run", "-m", gguf, "--tokens", "1,2,3,4", "-n", "6", "-t", "1",
                  "--layers", "--timeline", path]):
        r = subprocess.run(argv, capture_output=True, text=True)
        if r.returncode != 0:
            return None, f"{' '.join(argv)} failed: {r.stderr.strip()}"
    with open(path) as f:
        t = json.load(f)
    tokens = t["tokens"]
    # the prompt's 4 tokens and the 5 generated ones fed back (the 6th is not)
    if [x["pos"] for x in tokens] != list(range(9)) or [x["prefill"] for x in tokens] != [True] * 4 + [False] * 5:
        return None, f"{path}: records of positions {[x['pos'] for x in tokens]}, want the prompt's 0-3 and 4-8"
    if any(x["token_us"] <= 0 or x["cpu_us"] + x["head_us"] > x["token_us"] * 1.01 for x in tokens):
        return None, f"{path}: a token's parts exceed its time"
    # each decoded token: its 4 layers and the head (layer 4), in order
    for x in tokens[4:]:
        layers = [r["layer"] for r in t["layers"] if r["token"] == x["token"]]
        if layers != list(range(5)):
            return None, f"{path}: token {x['token']} has records of layers {layers}, want 0-3 and the head (4)"
    return path, None


REFUSED = {  # bad input is refused with a message, not a traceback
    "waterfall of a missing -ngl": (["waterfall", "--pred", "pred-seed-auto.json", "--ngl", "7"],
                                    "no prediction for -ngl 7"),
    "layers of a timeline without layer records": (["layers", "--timeline", "timeline-tiny.json"],
                                                   "no layer records of a decoded token"),
    "splits without the expert split": (["splits", "--layers", "splits-seed-layers.json"],
                                        "splits needs --layers and --experts"),
    "splits of a plan without --n-cpu-moe": (["splits", "--layers", "splits-seed-layers.json", "--experts",
                                              "pred-seed-auto.json"], "no prediction of the expert split"),
    "a zoom that ends before it starts": (["waterfall", "--timeline", "timeline-tiny.json", "--zoom", "5:1"],
                                          "FROM must be below TO"),
    "a timeline that is not there": (["waterfall", "--timeline", "no-such-timeline.json"],
                                     "cannot read"),
    "a timeline that is not JSON": (["waterfall", "--timeline", PLOT], "is not JSON"),
    "a token past the decoded ones": (["waterfall", "--timeline", "timeline-tiny.json", "--token", "99"],
                                      "--token 99: the timeline has decoded tokens 0.."),
}


def main():
    out_dir = sys.argv[1] if len(sys.argv) > 1 else "plot-test"
    build_dir = sys.argv[2] if len(sys.argv) > 2 else os.path.join(HERE, "..", "build")
    os.makedirs(out_dir, exist_ok=True)
    failed = 0
    fresh, err = fresh_timeline(build_dir, out_dir)
    if fresh:
        CASES["waterfall-fresh"] = Case(["--timeline", fresh, "--token", "2"], labels={"token/CPU/0/label"})
        CASES["layers-fresh"] = Case(["--timeline", fresh], ids("measured", "CPU", ["0", "1", "2", "3", "head"])
                                     | ids("bytes", "weights", ["0", "1", "2", "3", "head"])
                                     | ids("bytes", "KV", ["0", "1", "2", "3", "head"]))
    else:
        print(f"FAIL seam run --timeline: {err}")
        failed += 1
    for name, case in CASES.items():
        err = check(name, case, out_dir)
        print(f"{'FAIL' if err else 'ok  '} {name}{': ' + err if err else ''}")
        failed += err is not None
    for name, (args, message) in REFUSED.items():
        argv = [sys.executable, PLOT, args[0], "-o", os.path.join(out_dir, "refused")] + \
            [os.path.join(DATA, a) if a.endswith(".json") else a for a in args[1:]]
        r = subprocess.run(argv, capture_output=True, text=True)
        ok = r.returncode != 0 and message in r.stderr and "Traceback" not in r.stderr
        print(f"{'ok  ' if ok else 'FAIL'} {name} is refused{'' if ok else ': ' + r.stderr.strip()}")
        failed += not ok
    # a python without matplotlib (site-packages off: -S) is told which to use
    r = subprocess.run([sys.executable, "-S", PLOT, "curve", "-o", os.path.join(out_dir, "refused")],
                       capture_output=True, text=True)
    ok = r.returncode != 0 and "plot.py needs matplotlib" in r.stderr and "Traceback" not in r.stderr
    print(f"{'ok  ' if ok else 'FAIL'} a python without matplotlib is told which to use"
          f"{'' if ok else ': ' + r.stderr.strip()}")
    failed += not ok
    total = len(CASES) + len(REFUSED) + 1 + (fresh is None)
    print(f"{total - failed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
