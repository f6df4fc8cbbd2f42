#!/usr/bin/env python3
"""compare_llamacpp.py — seam against llama.cpp on the CPU, same GGUF, same threads.

  /opt/llamavenv/bin/python bench/compare_llamacpp.py MODEL [--threads 2]
      [--reps 5] [--tg 128] [--pp 512] [--engines seam,llama:plain,...]
      [--out bench/results/DATE-cpu-decode.md]

Measures, in alternating order within each repetition (so that a slow spell
of a shared machine hits every contender alike):
  tg  decode: TG tokens one at a time after a 3-token prompt, tokens/s
  pp  prompt: PP tokens, tokens/s (llama.cpp: one batch, in micro-batches of
      its default 512; seam: its prefill)
for seam (`seam bench`, one warm-up and one measured run of each test) and
for llama.cpp through llama-cpp-python's low-level API (the reference venv
that tools/setup-reference.sh builds: run this script with its Python) in
four configurations: weight repacking off (use_extra_bufts=False: llama.cpp's
plain path, the arithmetic seam mirrors) or on (True: repacked weights, AMX
where present), each with flash attention off or on (flash_attn_type): the
engines llama:plain, llama:plain+fa, llama:repack and llama:repack+fa. Each
llama.cpp run is its own process, so a crash (the repacking path has died
with SIGILL on some VMs) is recorded, not fatal. The ratios at the end are
against the best configuration of each test: what a user who tried all four
would run.

It also runs seam-membw for the read bandwidth and reads `seam inspect` for
the bytes one token reads, to put seam's decode speed as a % of bandwidth.
Before each measurement it waits (up to --quiet-wait s) for the CPUs to be
idle, and it reports how busy they were. Medians and ratios go to stdout and,
with --out, to a markdown file with the machine, the date and the commands.

Depth sweeps (llama-bench's -d: decode after DEPTH tokens are in the KV
cache), for each cache type:

  compare_llamacpp.py MODEL --depths 0,4096,8192 --cache-types f16,q8_0
      [--engines seam,llama:repack+fa,...] [--tg 32] [--reps 3] --raw RAW.jsonl
  compare_llamacpp.py --report RAW.jsonl [--out RESULTS.md]

Each engine runs in one process per cache type that fills its cache in
ascending order of the depths (each fill continuing the last, untimed) and
at each depth measures tg (TG tokens, once to warm up, then REPS times):
seam through `seam bench -d`, whose repetitions decode the same positions
again; llama.cpp through llama-cpp-python, whose repetitions follow each
other (depth + k TG positions: a few tokens deeper), its cache cut back to
the depth afterwards. llama.cpp's configurations are repacked weights on or
off and flash attention on or off; a quantised V cache needs flash
attention, so q8_0 runs only with it. Every process appends its records to
RAW (one JSON object a line: engine, cache, depth, tok/s samples, the KV
bytes one token reads, the resident set), so a long sweep runs as several
short calls; --report turns the records into tables (medians, seam against
llama.cpp's best configuration at each depth).
"""
import argparse
import datetime
import json
import os
import re
import shlex
import statistics
import subprocess
import sys
import time

import seam_json

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)

# llama.cpp's configurations, for pp/tg and depth sweeps alike: (repacked
# weights, flash attention).
LLAMA_CONFIGS = {"llama:plain": (False, False), "llama:plain+fa": (False, True), "llama:repack": (True, False),
                 "llama:repack+fa": (True, True)}

# What both llama.cpp runners share: the model loaded and a context made in one
# configuration (tools/ref_logits.py's load), and decode(tokens, pos0) of one
# batch. Run as `python -c LLAMA_SETUP + BODY MODEL THREADS REPACK FA CACHE
# ...`; the body sets n_ctx, n_batch and n_ubatch, then calls setup().
LLAMA_SETUP = f"import sys\nsys.path.insert(0, {os.path.join(ROOT, 'tools')!r})\n" + r"""
import time
import llama_cpp as L
from ref_logits import load
path, threads, repack, fa, cache = sys.argv[1], int(sys.argv[2]), sys.argv[3] == "1", sys.argv[4] == "1", sys.argv[5]
def setup(n_ctx, n_batch, n_ubatch):
    global model, ctx, batch, mem
    model, ctx = load(path, n_ctx, threads, cache, cache, n_batch, n_ubatch, repack=repack, flash=fa)
    batch = L.llama_batch_init(n_batch, 0, 1)
    mem = L.llama_get_memory(ctx)
def decode(tokens, pos0):
    batch.n_tokens = len(tokens)
    for i, t in enumerate(tokens):
        batch.token[i] = t
        batch.pos[i] = pos0 + i
        batch.n_seq_id[i] = 1
        batch.seq_id[i][0] = 0
        batch.logits[i] = i == len(tokens) - 1
    if L.llama_decode(ctx, batch) != 0:
        sys.exit("llama_decode failed")
"""

# pp/tg: `python -c LLAMA_RUNNER MODEL THREADS REPACK FA f16 TG PP` prints
# "tg <tok/s>" and "pp <tok/s>". The prompt is one batch, in micro-batches of
# llama.cpp's default 512 (llama-bench's -ub) when longer.
LLAMA_RUNNER = LLAMA_SETUP + r"""
tg, pp = int(sys.argv[6]), int(sys.argv[7])
n_batch = max(pp, 8)
setup(max(1024, pp + 16, tg + 16), n_batch, min(n_batch, 512))
if tg:
    decode([1, 2, 3], 0)
    decode([4], 3)  # warm-up
    t = time.perf_counter()
    for i in range(tg):
        decode([100 + i], 4 + i)
    print(f"tg {tg / (time.perf_counter() - t):.3f}", flush=True)
if pp:
    L.llama_memory_clear(mem, True)
    decode([1 + i % 1000 for i in range(pp)], 0)  # warm-up
    L.llama_memory_clear(mem, True)
    t = time.perf_counter()
    decode([1 + i % 1000 for i in range(pp)], 0)
    print(f"pp {pp / (time.perf_counter() - t):.3f}", flush=True)
"""

# A depth sweep: `python -c LLAMA_DEPTH_RUNNER MODEL THREADS REPACK FA CACHE
# TG REPS DEPTHS` prints "tg DEPTH tok/s" per repetition and "rss DEPTH bytes"
# (the resident set's growth since before the model was loaded) after each
# depth.
LLAMA_DEPTH_RUNNER = LLAMA_SETUP + r"""
tg, reps, depths = int(sys.argv[6]), int(sys.argv[7]), sorted(int(d) for d in sys.argv[8].split(","))
def rss():
    with open("/proc/self/status") as f:
        return next(int(l.split()[1]) * 1024 for l in f if l.startswith("VmRSS:"))
base = rss()
n_batch = 512
setup(depths[-1] + (reps + 1) * tg + 16, n_batch, n_batch)
n_vocab = L.llama_vocab_n_tokens(L.llama_model_get_vocab(model))
filled = 0
for depth in depths:
    while filled < depth:
        n = min(n_batch, depth - filled)
        decode([(1 + filled + i) % n_vocab for i in range(n)], filled)
        filled += n
    pos = depth
    for r in range(reps + 1):  # r = 0: the warm-up
        t = time.perf_counter()
        for i in range(tg):
            decode([(100 + i) % n_vocab], pos + i)
        if r:
            print(f"tg {depth} {tg / (time.perf_counter() - t):.4f}", flush=True)
        pos += tg
    print(f"rss {depth} {rss() - base}", flush=True)
    L.llama_memory_seq_rm(mem, 0, depth, -1)
"""


def llama_process(runner, engine, model, threads, cache, args, timeout=1800):
    """One llama.cpp run in its own process (runner: LLAMA_RUNNER or LLAMA_DEPTH_RUNNER; engine: a LLAMA_CONFIGS
    name; args: the runner's own) -> (exit status, output)."""
    repack, fa = LLAMA_CONFIGS[engine]
    return run([sys.executable, "-c", runner, model, str(threads), str(int(repack)), str(int(fa)), cache]
               + [str(x) for x in args], timeout=timeout)


def cpu_times():
    with open("/proc/stat") as f:
        v = [int(x) for x in f.readline().split()[1:]]
    idle = v[3] + v[4]
    return sum(v) - idle, sum(v)


def busy_fraction(seconds=0.5):
    b0, t0 = cpu_times()
    time.sleep(seconds)
    b1, t1 = cpu_times()
    return (b1 - b0) / max(1, t1 - t0)


def wait_quiet(limit_s, threshold=0.15):
    """Waits until the CPUs are at most `threshold` busy; returns the last reading."""
    deadline = time.time() + limit_s
    busy = busy_fraction()
    while busy > threshold and time.time() < deadline:
        time.sleep(1.0)
        busy = busy_fraction()
    return busy


def run(cmd, timeout=1800):
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    return p.returncode, p.stdout + p.stderr


def seam_bench(seam, model, threads, tg, pp):
    """{'tg': tok/s, 'pp': tok/s} from one `seam bench` run: each test warmed up once, then measured once, as
    the llama.cpp runner does. threads None: seam's default."""
    rows = seam_json.bench(seam, model, ["-n", str(tg), "-p", str(pp), "-r", "1"]
                           + ([] if threads is None else ["-t", str(threads)]))
    return {("tg" if r["n_gen"] else "pp"): r["avg_ts"] for r in rows}


def llama(model, threads, engine, tg, pp):
    """{'tg': tok/s, 'pp': tok/s} or {'error': text}; engine: a LLAMA_CONFIGS name."""
    rc, out = llama_process(LLAMA_RUNNER, engine, model, threads, "f16", [tg, pp])
    if rc:
        sig = f"signal {-rc}" if rc < 0 else f"exit {rc}"
        if rc == -4:
            sig = "SIGILL (illegal instruction)"
        return {"error": sig}
    return {k: float(v) for k, v in re.findall(r"^(tg|pp) ([\d.]+)$", out, re.M)}


def read_per_token(seam, model):
    rc, out = run([seam, "inspect", model])
    m = re.search(r"read per token\s+([\d.]+) (GiB|MiB|KiB)", out)
    if rc or not m:
        raise RuntimeError(f"seam inspect failed:\n{out[-1000:]}")
    return float(m.group(1)) * {"GiB": 2**30, "MiB": 2**20, "KiB": 2**10}[m.group(2)]


def membw(threads):
    exe = os.path.join(ROOT, "build", "seam-membw")
    rc, out = run([exe, "-t", str(threads), "-r", "9"])
    rows = {}
    for line in out.splitlines():
        m = re.match(r"\s+(\S+)\s+(\d+) threads?\s+median\s+([\d.]+) GB/s\s+best\s+([\d.]+) GB/s", line)
        if m:
            rows[(m.group(1), int(m.group(2)))] = (float(m.group(3)), float(m.group(4)))
    return rows, out


def machine():
    model = "?"
    try:
        out = subprocess.run(["lscpu"], capture_output=True, text=True).stdout
        model = re.search(r"Model name:\s+(.*)", out).group(1).strip()
    except Exception:
        pass
    return f"{model}, {os.cpu_count()} CPUs"


def med(xs):
    return statistics.median(xs) if xs else float("nan")


def engines_for(cache, wanted):
    """The engines to run for a cache type: wanted ones, or seam and every llama.cpp configuration it allows
    (a quantised V cache only with flash attention)."""
    names = wanted or ["seam"] + list(LLAMA_CONFIGS)
    unknown = [n for n in names if n != "seam" and n not in LLAMA_CONFIGS]
    if unknown:
        sys.exit(f"unknown engine {', '.join(unknown)}: give seam and/or {', '.join(LLAMA_CONFIGS)}")
    return [n for n in names if n == "seam" or cache == "f16" or LLAMA_CONFIGS[n][1]]


def depth_sweep(a):
    """One process per (cache type, engine), each filling to every depth in turn; records appended to a.raw."""
    depths = ",".join(str(d) for d in sorted(int(x) for x in a.depths.split(",")))
    for cache in a.cache_types.split(","):
        for engine in engines_for(cache, a.engines.split(",") if a.engines else None):
            started = time.time()
            busy = wait_quiet(a.quiet_wait)
            records = []
            if engine == "seam":
                for r in seam_json.bench(a.seam, a.model, ["-t", str(a.threads), "-p", "0", "-n", str(a.tg), "-d",
                                                           depths, "-r", str(a.reps), "-ctk", cache, "-ctv", cache],
                                         timeout=6 * 3600):
                    records.append({"depth": r["n_depth"], "samples": r["samples_ts"], "kv_bytes": r["kv_bytes"],
                                    "weight_bytes": r["weight_bytes"], "rss": r["host_bytes"],
                                    "rss_predicted": r["host_predicted"]})
            else:
                rc, out = llama_process(LLAMA_DEPTH_RUNNER, engine, a.model, a.threads, cache, [a.tg, a.reps, depths],
                                        timeout=6 * 3600)
                if rc:
                    raise RuntimeError(f"{engine} failed ({rc}):\n{out[-2000:]}")
                by_depth = {}
                for kind, depth, value in re.findall(r"^(tg|rss) (\d+) ([\d.]+)$", out, re.M):
                    rec = by_depth.setdefault(int(depth), {"depth": int(depth), "samples": []})
                    if kind == "tg":
                        rec["samples"].append(float(value))
                    else:
                        rec["rss"] = int(value)
                records = list(by_depth.values())
            with open(a.raw, "a") as f:
                for rec in records:
                    rec.update({"model": a.model, "engine": engine, "cache": cache, "tg": a.tg, "threads": a.threads,
                                "date": datetime.date.today().isoformat(), "busy_before": round(busy, 3)})
                    f.write(json.dumps(rec) + "\n")
            for rec in records:
                print(f"{os.path.basename(a.model)} {cache} {engine:17s} d{rec['depth']:<6d} tg{a.tg} "
                      + " ".join(f"{x:.2f}" for x in rec["samples"]) + " tok/s", flush=True)
            print(f"({engine}, {cache}: {time.time() - started:.0f} s)", flush=True)


def depth_report(raw_paths):
    """Markdown tables from the records of depth sweeps: per model and cache type, a row per depth."""
    recs = []
    for path in raw_paths:
        with open(path) as f:
            recs += [json.loads(line) for line in f if line.strip()]
    lines = []
    for model in sorted({r["model"] for r in recs}):
        for cache in ("f16", "q8_0"):
            rows = [r for r in recs if r["model"] == model and r["cache"] == cache]
            if not rows:
                continue
            engines = sorted({r["engine"] for r in rows}, key=lambda e: (e != "seam", e))
            llamas = [e for e in engines if e != "seam"]
            lines.append(f"### {os.path.basename(model)}, KV cache {cache} (K and V)")
            lines.append("")
            lines.append("| depth | weights MiB/t | KV MiB/t | " + " | ".join(f"{e} tok/s" for e in engines)
                         + " | seam / best llama.cpp | seam GB/s | seam memory MiB (predicted, error) "
                         + "| llama.cpp memory MiB (best) |")
            lines.append("|---:" * (3 + len(engines)) + "|---:|---:|---:|---:|")
            for depth in sorted({r["depth"] for r in rows}):
                at = {r["engine"]: r for r in rows if r["depth"] == depth}
                medians = {e: med(at[e]["samples"]) if e in at else float("nan") for e in engines}
                seam = at.get("seam", {})
                here = [e for e in llamas if e in at]  # the configurations measured at this depth
                best = max(here, key=lambda e: medians[e]) if here else None
                ratio = medians.get("seam", float("nan")) / medians[best] if best else float("nan")
                w, kv = seam.get("weight_bytes", float("nan")), seam.get("kv_bytes", float("nan"))
                gbs = medians.get("seam", float("nan")) * (w + kv) / 1e9
                mem = (f"{seam['rss'] / 2**20:.0f} ({seam['rss_predicted'] / 2**20:.0f}, "
                       f"{100 * (seam['rss'] - seam['rss_predicted']) / seam['rss_predicted']:+.1f}%)"
                       if "rss" in seam else "-")
                lmem = f"{at[best]['rss'] / 2**20:.0f}" if best and "rss" in at.get(best, {}) else "-"
                runs = " | ".join(f"{medians[e]:.2f} ({' '.join(f'{x:.1f}' for x in at[e]['samples'])})"
                                  if e in at else "-" for e in engines)
                vs = f"{ratio:.2f}x ({best.split(':')[1]})" if best else "-"
                lines.append(f"| {depth} | {w / 2**20:.1f} | {kv / 2**20:.1f} | {runs} | {vs} | {gbs:.1f} | {mem} | {lmem} |")
            lines.append("")
    return "\n".join(lines)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("model", nargs="?")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--tg", type=int, default=128)
    ap.add_argument("--pp", type=int, default=512, help="0 skips the prompt measurement")
    ap.add_argument("--seam", default=os.path.join(ROOT, "build", "seam"))
    ap.add_argument("--quiet-wait", type=float, default=60, help="seconds to wait for idle CPUs per measurement")
    ap.add_argument("--out", help="write the results as markdown here")
    ap.add_argument("--depths", help="a depth sweep at these depths (comma-separated) instead of pp/tg")
    ap.add_argument("--cache-types", default="f16", help="depth sweep: KV cache types, comma-separated")
    ap.add_argument("--engines", help="seam and/or " + ", ".join(LLAMA_CONFIGS) + " [all]")
    ap.add_argument("--raw", help="depth sweep: append the records here (JSON lines)")
    ap.add_argument("--report", nargs="+", help="tables from the records of depth sweeps (RAW files)")
    a = ap.parse_args()
    if a.report:
        report = depth_report(a.report)
        print(report)
        if a.out:
            with open(a.out, "a") as f:
                f.write(report + "\n")
        return
    if not a.model:
        ap.error("give a MODEL (or --report RAW)")
    if a.depths:
        if not a.raw:
            ap.error("--depths needs --raw FILE for the records")
        depth_sweep(a)
        return

    variants = engines_for("f16", a.engines.split(",") if a.engines else None)
    res = {name: {"tg": [], "pp": [], "busy": [], "error": None} for name in variants}
    tests = [t for t, n in (("tg", a.tg), ("pp", a.pp)) if n]
    for rep in range(a.reps):
        order = variants if rep % 2 == 0 else variants[::-1]
        for name in order:
            r = res[name]
            if r["error"]:
                continue
            r["busy"].append(wait_quiet(a.quiet_wait))
            if name == "seam":
                out = seam_bench(a.seam, a.model, a.threads, a.tg, a.pp)
            else:
                out = llama(a.model, a.threads, name, a.tg, a.pp)
                if "error" in out:
                    r["error"] = out["error"]
                    continue
            for test in tests:
                r[test].append(out[test])
            print(f"rep {rep + 1}/{a.reps} {name:22s}" + "".join(f" {t} {r[t][-1]:7.2f} tok/s" for t in tests)
                  + f"  (CPUs {100 * r['busy'][-1]:.0f}% busy before)", flush=True)

    wait_quiet(a.quiet_wait)
    bw_rows, bw_text = membw(a.threads)
    per_token = read_per_token(a.seam, a.model)
    read_bw = bw_rows.get(("read", a.threads), (float("nan"),) * 2)
    read_pf = bw_rows.get(("read+pf", a.threads), read_bw)
    best_read = max(read_bw[0], read_pf[0])

    seam_tg_med = med(res["seam"]["tg"])
    lines = []
    lines.append(f"model: {a.model} ({per_token / 2**20:.1f} MiB read per token)")
    what = {"tg": f"tg{a.tg} = {a.tg} single-token decodes after a 3-token prompt",
            "pp": f"pp{a.pp} = a {a.pp}-token prompt"}
    lines.append(f"threads: {a.threads}; " + "; ".join(what[t] for t in tests)
                 + f"; {a.reps} repetitions, alternating order, medians")
    lines.append("")
    # a column group per test that ran (tg: its runs, decode GB/s and ratio; pp: its runs and ratio)
    head, rule = ["engine"], ["---"]
    if "tg" in tests:
        head += ["tg tok/s (median)", "tg runs", "decode GB/s", "seam / this (tg)"]
    if "pp" in tests:
        head += ["pp tok/s (median)", "pp runs", "seam / this (pp)"]
    lines.append("| " + " | ".join(head) + " |")
    lines.append("|" + "---|" * len(head))
    for name in variants:
        r = res[name]
        if r["error"]:
            lines.append(f"| {name} | failed: {r['error']} |" + " |" * (len(head) - 2))
            continue
        cells = [name]
        if "tg" in tests:
            tg_med = med(r["tg"])
            cells += [f"{tg_med:.2f}", " ".join(f"{x:.1f}" for x in r["tg"]), f"{tg_med * per_token / 1e9:.2f}",
                      f"{seam_tg_med / tg_med if tg_med else float('nan'):.3f}"]
        if "pp" in tests:
            pp_med = med(r["pp"])
            cells += [f"{pp_med:.1f}", " ".join(f"{x:.0f}" for x in r["pp"]),
                      f"{med(res['seam']['pp']) / pp_med if pp_med else float('nan'):.3f}"]
        lines.append("| " + " | ".join(cells) + " |")
    lines.append("")
    for test, n in (("tg", a.tg), ("pp", a.pp)):
        meds = {name: med(res[name][test]) for name in variants if name != "seam" and res[name][test]}
        if test in tests and meds:
            best = max(meds, key=meds.get)
            lines.append(f"{test}{n}: seam {med(res['seam'][test]):.1f} tok/s, best llama.cpp {best} {meds[best]:.1f} "
                         f"tok/s: seam / best = {med(res['seam'][test]) / meds[best]:.3f}")
    lines.append("")
    lines.append(f"read bandwidth ({a.threads} threads, seam-membw, median of 9): {read_bw[0]:.1f} GB/s plain loop"
                 + (f", {read_pf[0]:.1f} GB/s with software prefetch" if ("read+pf", a.threads) in bw_rows else ""))
    if "tg" in tests:
        lines.append(f"seam decode: {seam_tg_med * per_token / 1e9:.2f} GB/s = "
                     f"{100 * seam_tg_med * per_token / 1e9 / best_read:.0f}% of the better read bandwidth")
    busy = [b for r in res.values() for b in r["busy"]]
    if busy:
        lines.append(f"CPUs busy before each measurement (other work on the machine): median {100 * med(busy):.0f}%, "
                     f"max {100 * max(busy):.0f}%")
    report = "\n".join(lines)
    print()
    print(report)
    print()
    print(bw_text)

    if a.out:
        cmd = " ".join(shlex.quote(x) for x in [sys.executable, os.path.relpath(__file__, ROOT)] + sys.argv[1:])
        with open(a.out, "w") as f:
            what = " and ".join({"tg": "decode", "pp": "prompts"}[t] for t in tests)
            f.write(f"# CPU {what}: seam vs llama.cpp ({datetime.date.today().isoformat()})\n\n")
            f.write(f"- machine: {machine()}\n- command: `{cmd}`\n")
            try:
                import llama_cpp
                f.write(f"- llama.cpp: llama-cpp-python {llama_cpp.__version__}\n")
            except Exception:
                pass
            f.write("\n" + report + "\n\n```\n" + bw_text.strip() + "\n```\n")
        print(f"wrote {a.out}")


if __name__ == "__main__":
    main()
