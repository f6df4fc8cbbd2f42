#!/usr/bin/env python3
"""report.py -- one self-contained HTML page that teaches a split.

For a model on a hardware profile: a slider over the GPU layer count (and,
for an MoE model, over the layers whose experts stay on the CPU) showing the
predicted tok/s curve, the token's waterfall at the chosen split on the GPU,
bus and CPU lanes, where the bytes of a token are read, and the memory per
device against the budget; with a measured --timeline, its decoded token
beside the prediction. No network: the script and the data are inline.

  seam plan -m MODEL -ngl 0-L --hw PROFILE --json layers.json
  seam plan -m MODEL -ngl L --n-cpu-moe 0-L --hw PROFILE --json experts.json   (MoE)
  python3 tools/report.py --pred layers.json [--experts experts.json] [--timeline T.json] -o page.html

Open page.html#ngl=20 to start at -ngl 20; page.html#selftest moves the
slider and writes the result into the page's title (tests/test_report.py).
"""
import argparse
import html
import json
import os
import statistics
import sys


def load(path):
    try:
        with open(path) as f:
            return json.load(f)
    except OSError as e:
        sys.exit(f"report.py: cannot read {path}: {e.strerror}")
    except ValueError as e:
        sys.exit(f"report.py: {path} is not JSON: {e}")


def measured(t):
    """The median decoded token of a timeline: its tok/s and its slices from
    its start, lanes as the prediction's (GPU, bus, CPU)."""
    tokens = [x for x in t.get("tokens", []) if not x["prefill"]]
    if not tokens or "slices" not in t:
        sys.exit("report.py: the timeline has no decoded token with slices (seam run --timeline of this seam)")
    median = statistics.median(x["token_us"] for x in tokens)
    tok = min(tokens, key=lambda x: abs(x["token_us"] - median))
    row = {"GPU stream": "GPU", "copy stream": "bus", "CPU layers": "CPU", "host thread": "CPU"}
    steps = [{"lane": "bus" if s["kind"] == "crossing" else row[s["lane"]], "what": s["what"],
              "start": s["start_us"] - tok["start_us"], "us": s["us"]}
             for s in t["slices"] if s["token"] == tok["token"] and s["kind"] not in ("token", "batch", "stall")]
    if "run" not in t:
        sys.exit("report.py: the timeline does not say its run's plan (seam run --timeline of this seam)")
    gpu_layers = t["run"]["gpu_layers"]
    return {"tok_s": 1e6 / median, "token_us": median, "steps": steps, "n_tokens": len(tokens),
            "gpu_layers": gpu_layers}


def series(pred, key):
    return [{"x": p[key], **{k: p[k] for k in ("n_gpu_layers", "n_cpu_experts", "n_layers", "head", "tok_s",
                                              "token_us", "gpu_idle_us", "memory", "steps")}}
            for p in pred["predictions"]]


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--pred", required=True, help="seam plan -ngl LIST --hw PROFILE --json output: the layer split")
    ap.add_argument("--experts", help="seam plan -ngl L --n-cpu-moe LIST --json output: the expert split (MoE)")
    ap.add_argument("--timeline", help="seam run --timeline output: a measured run, its decoded token beside")
    ap.add_argument("--points", action="append", default=[],
                    help="measured tok/s at GPU layer counts, e.g. 'seed article:48=93.9,44=46.3' (repeatable)")
    ap.add_argument("--title", help="the page's heading [the model and the profile]")
    ap.add_argument("-o", "--out", required=True, help="the HTML file to write")
    a = ap.parse_args()
    pred = load(a.pred)
    if not pred.get("predictions"):
        sys.exit(f"report.py: {a.pred} holds no prediction (seam plan ... --hw PROFILE --json)")
    data = {"model": os.path.basename(pred["model"]), "hw": pred["hw"], "fill": pred["n_ctx"],
            "series": [{"name": "layers on the GPU", "axis": "GPU layers (-ngl)",
                        "points": sorted(series(pred, "n_gpu_layers"), key=lambda p: p["x"])}]}
    if a.experts:
        e = load(a.experts)
        data["series"].append({"name": "experts kept on the CPU", "axis": "layers whose experts stay on the CPU "
                               "(--n-cpu-moe), every layer on the GPU",
                               "points": sorted(series(e, "n_cpu_experts"), key=lambda p: p["x"])})
    if a.timeline:
        data["measured"] = measured(load(a.timeline))
    data["points"] = []
    for spec in a.points:
        label, _, pts = spec.rpartition(":")
        try:
            data["points"].append({"label": label or "measured",
                                   "at": [[int(n), float(v)] for n, v in (p.split("=") for p in pts.split(","))]})
        except ValueError:
            sys.exit(f"report.py: --points {spec!r}: want LABEL:N=TOK_S,N=TOK_S,...")
    title = a.title or f"{data['model']} on {data['hw']}: where the time of a token goes"
    page = PAGE.replace("/*DATA*/", json.dumps(data).replace("</", "<\\/")).replace("TITLE", html.escape(title))
    with open(a.out, "w") as f:
        f.write(page)
    print(f"report.py: wrote {a.out}")


PAGE = r"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>TITLE</title>
<style>
body { font: 14px/1.45 system-ui, sans-serif; margin: 1.5em auto; max-width: 980px; color: #222; }
h1 { font-size: 1.3em; } h2 { font-size: 1.05em; margin: 1.2em 0 0.3em; }
.controls { display: flex; gap: 1em; align-items: center; flex-wrap: wrap; }
input[type=range] { width: 420px; }
#speed { font-size: 1.15em; font-weight: 600; }
svg text { font: 11px system-ui, sans-serif; }
.note { color: #555; font-size: 0.92em; }
</style></head><body>
<h1>TITLE</h1>
<p>A token passes every layer in order. With every layer on the GPU it never leaves the card; move even a few
layers to the CPU and each token must cross the bus twice and wait while the CPU reads those layers' weights from
system memory, several times slower than the GPU reads its own, so the first layers moved cost far more than their
share. The curve below is seam's speed model of this split; drag the slider to see one token's time at each split.</p>
<div class="controls">
 <label>split <select id="series"></select></label>
 <input type="range" id="slider" min="0" max="0" step="1" value="0">
 <span id="speed"></span>
</div>
<p class="note" id="axis"></p>
<h2>Predicted decode speed</h2><svg id="curve" width="960" height="260"></svg>
<h2>One token at this split (predicted)</h2><svg id="waterfall" width="960" height="150"></svg>
<p class="note" id="idle"></p>
<h2>Where a token's bytes are read</h2><svg id="bytes" width="960" height="90"></svg>
<h2>Memory per device</h2><svg id="memory" width="960" height="90"></svg>
<div id="measured-part"></div>
<script>
const D = /*DATA*/;
const NS = "http://www.w3.org/2000/svg";
const COLOURS = {GPU: "#4c78a8", bus: "#54a24b", CPU: "#e45756"};
const LANES = ["CPU", "bus", "GPU"];
const $ = id => document.getElementById(id);

function el(svg, name, attrs, text) {
  const e = document.createElementNS(NS, name);
  for (const k in attrs) e.setAttribute(k, attrs[k]);
  if (text !== undefined) e.textContent = text;
  svg.appendChild(e);
  return e;
}
function clear(svg) { while (svg.firstChild) svg.removeChild(svg.firstChild); }
function mib(b) {
  return b >= 1 << 30 ? (b / (1 << 30)).toFixed(2) + " GiB" : b >= 1 << 20 ? (b / (1 << 20)).toFixed(1) + " MiB"
                                                            : (b / 1024).toFixed(1) + " KiB";
}
function ms(us) { return (us / 1000).toFixed(us < 10000 ? 2 : 1) + " ms"; }

function curve(s, chosen) {
  const svg = $("curve"); clear(svg);
  const W = 960, H = 260, L = 60, R = 20, T = 15, B = 40;
  const pts = s.points, xmax = Math.max(...pts.map(p => p.x), 1);
  const others = D.points.flatMap(q => q.at.map(a => a[1]));
  const ymax = 1.1 * Math.max(...pts.map(p => p.tok_s), D.measured ? D.measured.tok_s : 0, ...others);
  const X = x => L + (W - L - R) * x / xmax, Y = y => H - B - (H - T - B) * y / ymax;
  el(svg, "line", {x1: L, y1: H - B, x2: W - R, y2: H - B, stroke: "#888"});
  el(svg, "line", {x1: L, y1: T, x2: L, y2: H - B, stroke: "#888"});
  for (let i = 0; i <= 4; i++) {
    const v = ymax * i / 4;
    el(svg, "text", {x: L - 6, y: Y(v) + 4, "text-anchor": "end"}, v.toFixed(0));
    el(svg, "line", {x1: L, y1: Y(v), x2: W - R, y2: Y(v), stroke: "#eee"});
  }
  el(svg, "text", {x: 14, y: T + (H - B - T) / 2, transform: `rotate(-90 14 ${T + (H - B - T) / 2})`,
                   "text-anchor": "middle"}, "tok/s");
  el(svg, "text", {x: (L + W - R) / 2, y: H - 6, "text-anchor": "middle"}, s.axis);
  for (const p of pts) el(svg, "text", {x: X(p.x), y: H - B + 14, "text-anchor": "middle", fill: "#888"},
                          pts.length <= 25 || p.x % 4 == 0 ? p.x : "");
  el(svg, "polyline", {points: pts.map(p => X(p.x) + "," + Y(p.tok_s)).join(" "), fill: "none",
                       stroke: COLOURS.GPU, "stroke-width": 2});
  const c = pts[chosen];
  el(svg, "circle", {id: "chosen", cx: X(c.x), cy: Y(c.tok_s), r: 6, fill: COLOURS.CPU});
  for (const q of s === D.series[0] ? D.points : [])
    q.at.forEach(([n, v], k) => {
      el(svg, "rect", {x: X(n) - 4, y: Y(v) - 4, width: 8, height: 8, fill: "#222"});
      if (k == 0) el(svg, "text", {x: X(n) - 8, y: Y(v) + 4, "text-anchor": "end"}, q.label);
    });
  if (D.measured && s === D.series[0]) {
    const m = D.measured;
    el(svg, "rect", {x: X(m.gpu_layers) - 5, y: Y(m.tok_s) - 5, width: 10, height: 10, fill: "#222"});
    el(svg, "text", {x: X(m.gpu_layers) + 8, y: Y(m.tok_s) + 4}, `measured ${m.tok_s.toFixed(1)} tok/s`);
  }
}

// steps: {lane, what, us[, start]}; without start, one after another
function waterfall(svg, steps, total) {
  clear(svg);
  const W = 960, L = 50, R = 10, row = 36;
  let t = 0;
  const bars = steps.map(s => { const b = {...s, start: s.start !== undefined ? s.start : t}; t = b.start + s.us; return b; });
  total = total || Math.max(...bars.map(b => b.start + b.us), 1);
  const X = us => L + (W - L - R) * us / total;
  LANES.forEach((lane, i) => {
    el(svg, "text", {x: L - 6, y: 10 + i * row + row / 2, "text-anchor": "end"}, lane);
  });
  for (const b of bars) {
    const y = 10 + LANES.indexOf(b.lane) * row + 6, w = Math.max(X(b.start + b.us) - X(b.start), 1);
    const r = el(svg, "rect", {x: X(b.start), y: y, width: w, height: row - 12, fill: COLOURS[b.lane],
                               stroke: "white", "stroke-width": 0.5});
    el(r, "title", {}, `${b.what}: ${b.us.toFixed(1)} us`);
    if (w > 7 * b.what.length) el(svg, "text", {x: X(b.start) + w / 2, y: y + row / 2 - 3, "text-anchor": "middle",
                                                fill: "white"}, b.what);
  }
  const axis = 10 + LANES.length * row + 12;
  for (let i = 0; i <= 5; i++) el(svg, "text", {x: X(total * i / 5), y: axis, fill: "#888",
                                                "text-anchor": i == 0 ? "start" : i == 5 ? "end" : "middle"},
                                  ms(total * i / 5));
}

function hbars(svg, rows, max) {
  clear(svg);
  const W = 960, L = 200, R = 200;
  rows.forEach((r, i) => {
    const y = 8 + i * 26, w = (W - L - R) * Math.min(r.value / max, 1.2);
    el(svg, "text", {x: L - 8, y: y + 14, "text-anchor": "end"}, r.name);
    el(svg, "rect", {x: L, y: y, width: Math.max(w, 1), height: 18, fill: r.colour});
    if (r.limit) el(svg, "line", {x1: L + (W - L - R) * r.limit / max, y1: y - 3,
                                  x2: L + (W - L - R) * r.limit / max, y2: y + 21, stroke: "#222", "stroke-width": 2});
    el(svg, "text", {x: L + Math.max(w, 1) + 6, y: y + 14}, r.label);
  });
}

function render() {
  const s = D.series[+$("series").value], i = +$("slider").value, p = s.points[i];
  const where = s === D.series[0] ? `-ngl ${p.n_gpu_layers} of ${p.n_layers}, head on the ${p.head.toUpperCase()}`
                                  : `-ngl ${p.n_gpu_layers} --n-cpu-moe ${p.n_cpu_experts}`;
  const best = Math.max(...s.points.map(q => q.tok_s));
  $("speed").textContent = `${where}: ${p.tok_s.toFixed(1)} tok/s predicted (${ms(p.token_us)} a token, ` +
                           `${(100 * p.tok_s / best).toFixed(0)}% of this split's best)`;
  $("axis").textContent = `${s.axis}; KV cache filled to ${D.fill} positions; profile ${D.hw}`;
  curve(s, i);
  waterfall($("waterfall"), p.steps, p.token_us);
  $("idle").textContent = p.gpu_idle_us > 0 ? `The GPU waits ${(100 * p.gpu_idle_us / p.token_us).toFixed(0)}% ` +
      `of this token for the bus and the CPU.` : "Every step on one device: nothing waits for another.";
  const read = lane => p.steps.filter(x => x.lane == lane).reduce((a, x) => a + x.bytes, 0);
  const rows = LANES.map(l => ({name: l == "bus" ? "crossing the bus" : `read by the ${l}`, value: read(l),
                                colour: COLOURS[l], label: mib(read(l))}));
  hbars($("bytes"), rows, Math.max(...rows.map(r => r.value), 1));
  const m = p.memory, budget = m.gpu_budget;
  hbars($("memory"), [{name: "GPU", value: m.gpu, limit: budget, colour: COLOURS.GPU,
                       label: `${mib(m.gpu)} of a ${mib(budget)} budget`},
                      {name: "CPU (host)", value: m.cpu, colour: COLOURS.CPU, label: mib(m.cpu)}],
        Math.max(m.gpu, m.cpu, budget, 1));
}

function measuredPart() {
  if (!D.measured) return;
  const m = D.measured, part = $("measured-part");
  part.innerHTML = `<h2>A measured token (seam run --timeline)</h2><p class="note">The median of its ${m.n_tokens}` +
    ` decoded tokens: ${m.tok_s.toFixed(1)} tok/s, ${m.gpu_layers} layers on the GPU.</p>`;
  const svg = document.createElementNS(NS, "svg");
  svg.setAttribute("width", 960); svg.setAttribute("height", 150); svg.id = "measured";
  part.appendChild(svg);
  waterfall(svg, m.steps, m.token_us);
}

function start() {
  D.series.forEach((s, k) => { const o = document.createElement("option"); o.value = k; o.textContent = s.name;
                                $("series").appendChild(o); });
  const choose = () => { const s = D.series[+$("series").value]; $("slider").max = s.points.length - 1; };
  $("series").addEventListener("change", () => { choose(); $("slider").value = $("slider").max; render(); });
  $("slider").addEventListener("input", render);
  choose();
  const want = /ngl=(\d+)/.exec(location.hash), pts = D.series[0].points;
  const at = want ? pts.findIndex(p => p.x == +want[1]) : -1;
  $("slider").value = at >= 0 ? at : pts.length - 1;
  render();
  measuredPart();
  if (location.hash == "#selftest") selftest();
}

// Moves the slider as a person would and checks that the page followed.
function selftest() {
  const fail = why => { document.title = "selftest: FAIL: " + why; console.error("selftest: " + why); };
  const slider = $("slider");
  const seen = () => [$("speed").textContent, $("waterfall").innerHTML, $("chosen").getAttribute("cx"),
                      $("memory").innerHTML];
  slider.value = slider.max; slider.dispatchEvent(new Event("input"));
  const a = seen();
  slider.value = 0; slider.dispatchEvent(new Event("input"));
  const b = seen();
  const names = ["the tok/s text", "the waterfall", "the curve's marker", "the memory bars"];
  const same = names.filter((n, k) => a[k] == b[k]);
  if (slider.max < 1) return fail("one split only");
  if (same.length) return fail(same.join(", ") + " did not change");
  if (!/tok\/s predicted/.test(b[0])) return fail("no tok/s text: " + b[0]);
  document.title = "selftest: pass";
}
start();
</script></body></html>
"""

if __name__ == "__main__":
    main()
