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

llama.cpp's fill with flash attention is its slow path (hours to 32K on the
Qwen3-0.6B shape with a q8_0 cache), so its side of a sweep can fill once
instead (--llama-fill snapshot):

  compare_llamacpp.py MODEL --depths D,... --snapshot-fill DIR
  compare_llamacpp.py MODEL --depths D --snapshot-check DIR [--cache-types ...]
  compare_llamacpp.py MODEL --depths D,... --llama-fill snapshot --snapshot-dir DIR
      --engines llama:repack,llama:repack+fa --cache-types f16,q8_0 --raw RAW.jsonl

--snapshot-fill fills one cache in llama.cpp's fast configuration (repacked
weights, f16, flash attention off, 512-token batches of the prompt tokens the
sweep uses) and writes the sequence's state at each depth to
DIR/depth-D.kvstate (llama_state_seq_get_data); when the first depth's state
is already in DIR it is loaded and the fill goes on from it (--depths
16384,32768 extends a fill to 16K). With --llama-fill snapshot
each llama.cpp configuration then makes a fresh context per depth, loads that
state converted to its own layout (kv_state.py: flash attention keeps V
untransposed, and a q8_0 cache quantises each row by ggml's q8_0 rule) and
decodes as above. --snapshot-check D measures what the conversion changes:
each configuration fills D tokens itself, decodes one more and compares the
logits with those after loading DIR's converted depth-D state.
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
def rss():
    with open("/proc/self/status") as f:
        return next(int(l.split()[1]) * 1024 for l in f if l.startswith("VmRSS:"))
base = rss()
# the depth runners' parts (they set n_vocab, tg and reps): the prompt filling positions start..depth-1 in 512-token
# batches, and tg decodes at depth, once to warm up and then reps times, printing "tg DEPTH tok/s" per measured run
# and "rss DEPTH bytes" (the resident set's growth since before the model was loaded)
def fill(start, depth):
    for p in range(start, depth, 512):
        n = min(512, depth - p)
        decode([(1 + p + i) % n_vocab for i in range(n)], p)
def measure(depth):
    pos = depth
    for r in range(reps + 1):
        t = time.perf_counter()
        for i in range(tg):
            decode([(100 + i) % n_vocab], pos + i)
        if r:
            print(f"tg {depth} {tg / (time.perf_counter() - t):.4f}", flush=True)
        pos += tg
    print(f"rss {depth} {rss() - base}", flush=True)
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
setup(depths[-1] + (reps + 1) * tg + 16, 512, 512)
n_vocab = L.llama_vocab_n_tokens(L.llama_model_get_vocab(model))
filled = 0
for depth in depths:
    fill(filled, depth)
    filled = depth
    measure(depth)
    L.llama_memory_seq_rm(mem, 0, depth, -1)
"""

# One llama.cpp process on snapshots: `python -c LLAMA_SNAPSHOT_RUNNER MODEL THREADS REPACK FA CACHE MODE DIR
# DEPTHS [TG REPS]`. MODE fill: fills to each depth as LLAMA_DEPTH_RUNNER does and writes DIR/depth-D.kvstate;
# run: per depth, a cleared cache loads the converted state and decodes as LLAMA_DEPTH_RUNNER does ("tg D tok/s",
# "rss D bytes"); check: per depth, fills it and decodes one token, then loads the converted state and decodes the
# same token, writing both logits to DIR/check-D-FA-CACHE-{own,loaded}.f32.
LLAMA_SNAPSHOT_RUNNER = LLAMA_SETUP + f"sys.path.insert(0, {HERE!r})\n" + r"""
import ctypes, mmap, os
import numpy as np
from kv_state import convert_kv_state, kv_rotation
mode, snap_dir, depths = sys.argv[6], sys.argv[7], sorted(int(d) for d in sys.argv[8].split(","))
tg, reps = (int(sys.argv[9]), int(sys.argv[10])) if mode == "run" else (1, 0)
setup(depths[-1] + (reps + 1) * tg + 16, 512, 512)
n_vocab = L.llama_vocab_n_tokens(L.llama_model_get_vocab(model))
path = lambda depth: os.path.join(snap_dir, f"depth-{depth}.kvstate")
def meta(key):
    buf = ctypes.create_string_buffer(64)
    arch = ctypes.create_string_buffer(64)
    L.llama_model_meta_val_str(model, b"general.architecture", arch, 64)
    n = L.llama_model_meta_val_str(model, arch.value + b".attention." + key, buf, 64)
    return int(buf.value) if n > 0 else L.llama_model_n_embd(model) // L.llama_model_n_head(model)
rot = kv_rotation(meta(b"key_length"), meta(b"value_length")) if cache != "f16" else (0, 0)
def load(depth):
    # the state as saved (the fill's layout: f16, V transposed) without flash attention, else converted to its layout
    L.llama_memory_clear(mem, True)
    with open(path(depth), "rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as saved:
        state = convert_kv_state(saved, cache, rot) if fa else bytearray(saved)
    if L.llama_state_seq_set_data(ctx, (ctypes.c_uint8 * len(state)).from_buffer(state), len(state), 0) != len(state):
        sys.exit(f"llama_state_seq_set_data refused {path(depth)}")
def logits():
    return np.ctypeslib.as_array(L.llama_get_logits_ith(ctx, -1), shape=(n_vocab,)).copy()
filled = 0
for depth in depths:
    if mode == "fill":
        if depth == 0:
            continue
        if filled == 0 and os.path.exists(path(depth)):
            # a deeper fill resumes from the shallowest state a previous fill left (its tokens are the same)
            load(depth)
            filled = depth
            print(f"state {depth} loaded", flush=True)
            continue
        fill(filled, depth)
        filled = depth
        n = L.llama_state_seq_get_size(ctx, 0)
        buf = (ctypes.c_uint8 * n)()
        if L.llama_state_seq_get_data(ctx, buf, n, 0) != n:
            sys.exit("llama_state_seq_get_data failed")
        with open(path(depth), "wb") as f:
            f.write(buf)
        del buf
        print(f"state {depth} {n}", flush=True)
    elif mode == "check":
        L.llama_memory_clear(mem, True)
        fill(0, depth)
        decode([100], depth)
        own = logits()
        load(depth)
        decode([100], depth)
        for name, x in (("own", own), ("loaded", logits())):
            x.astype(np.float32).tofile(os.path.join(snap_dir, f"check-{depth}-{int(fa)}-{cache}-{name}.f32"))
    else:
        if depth:
            load(depth)
        measure(depth)
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
    the llama.cpp runner does; with pp, 'macs' (a prompt token's multiply-adds, counted from the model) and
    'peak' (the int8 probe's G multiply-adds/s on these threads). threads None: seam's default."""
    rows = seam_json.bench(seam, model, ["-n", str(tg), "-p", str(pp), "-r", "1"]
                           + ([] if threads is None else ["-t", str(threads)]))
    out = {("tg" if r["n_gen"] else "pp"): r["avg_ts"] for r in rows}
    for r in rows:
        if r["n_prompt"]:
            out["macs"], out["peak"] = r["macs_per_token"], r["int8_peak_gmacs"]
    return out


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


# The CPU features that decide which llama.cpp build and which seam kernel
# set run (lscpu's flags).
KERNEL_FLAGS = ("avx2", "fma", "f16c", "avx_vnni", "avx512f", "avx512bw", "avx512vl", "avx512_vnni", "avx512_bf16",
                "avx512_fp16", "amx_int8")


def machine():
    model, flags = "?", ""
    try:
        out = subprocess.run(["lscpu"], capture_output=True, text=True).stdout
        model = re.search(r"Model name:\s+(.*)", out).group(1).strip()
        have = set(re.search(r"Flags:\s+(.*)", out).group(1).split())
        flags = "; lscpu flags: " + " ".join(f for f in KERNEL_FLAGS if f in have)
    except Exception:
        pass
    return f"{model}, {os.cpu_count()} CPUs{flags}"


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
                if a.llama_fill == "snapshot":
                    rc, out = llama_process(LLAMA_SNAPSHOT_RUNNER, engine, a.model, a.threads, cache,
                                            ["run", a.snapshot_dir, depths, a.tg, a.reps], timeout=6 * 3600)
                else:
                    rc, out = llama_process(LLAMA_DEPTH_RUNNER, engine, a.model, a.threads, cache,
                                            [a.tg, a.reps, depths], timeout=6 * 3600)
                if rc:
                    raise RuntimeError(f"{engine} failed ({rc}):\n{out[-2000:]}")
                by_depth = {}
                for kind, depth, value in re.findall(r"^(tg|rss) (\d+) ([\d.]+)$", out, re.M):
                    rec = by_depth.setdefault(int(depth), {"depth": int(depth), "samples": [], "fill": a.llama_fill})
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


def snapshots(a):
    """--snapshot-fill: llama.cpp's states at the depths, from one fill in its fast configuration; --snapshot-check:
    what loading them converted changes in the next token's logits, per cache type and configuration, beside how
    far that configuration's own fill already is from the fill configuration's (its attention's arithmetic)."""
    import numpy as np  # the check's logits (only here: the rest of this script runs without numpy)
    depths = ",".join(str(d) for d in sorted(int(x) for x in a.depths.split(",")))
    if a.snapshot_fill:
        os.makedirs(a.snapshot_fill, exist_ok=True)
        jobs = [("llama:repack", "f16", ["fill", a.snapshot_fill, depths])]
    else:
        jobs = [(e, cache, ["check", a.snapshot_check, depths]) for cache in a.cache_types.split(",")
                for e in engines_for(cache, a.engines.split(",") if a.engines else None) if e != "seam"]
    for engine, cache, args in jobs:
        started = time.time()
        rc, out = llama_process(LLAMA_SNAPSHOT_RUNNER, engine, a.model, a.threads, cache, args, timeout=6 * 3600)
        if rc:
            raise RuntimeError(f"{engine} {args[0]} failed ({rc}):\n{out[-2000:]}")
        for depth, n in re.findall(r"^state (\d+) (\d+)$", out, re.M):
            print(f"{engine} {cache}: state at depth {depth}: {int(n) / 2**20:.1f} MiB", flush=True)
        print(f"({engine}, {cache}, {args[0]}: {time.time() - started:.0f} s)", flush=True)
    if a.snapshot_check:
        def logits(depth, fa, cache, name):
            return np.fromfile(os.path.join(a.snapshot_check, f"check-{depth}-{fa}-{cache}-{name}.f32"), np.float32)
        for depth in depths.split(","):
            ref = logits(depth, 0, "f16", "own")  # the fill configuration's own logits
            for engine, cache, _ in jobs:
                fa = int(LLAMA_CONFIGS[engine][1])
                own, got = logits(depth, fa, cache, "own"), logits(depth, fa, cache, "loaded")
                print(f"check depth {depth}, {engine} {cache}: next token's logits, loaded state against own fill: "
                      f"max |diff| {np.abs(got - own).max():.4g}, rms {np.sqrt(np.mean((got - own) ** 2)):.4g}, "
                      f"same argmax {got.argmax() == own.argmax()}; own fill against llama:repack f16's: max |diff| "
                      f"{np.abs(own - ref).max():.4g}, rms {np.sqrt(np.mean((own - ref) ** 2)):.4g} "
                      f"(max |logit| {np.abs(own).max():.4g})", flush=True)


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
                vs = (f"{ratio:.2f}x ({best.split(':')[1]}"
                      + (", from a snapshot" if depth and at[best].get("fill") == "snapshot" else "") + ")") \
                    if best and "seam" in at else "-"
                num = lambda v, f: "-" if v != v else format(v, f)  # nan (no seam run at this depth): "-"
                lines.append(f"| {depth} | {num(w / 2**20, '.1f')} | {num(kv / 2**20, '.1f')} | {runs} | {vs} | "
                             f"{num(gbs, '.1f')} | {mem} | {lmem} |")
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
    ap.add_argument("--llama-fill", choices=("fill", "snapshot"), default="fill",
                    help="depth sweep: llama.cpp fills its own cache, or loads --snapshot-dir's states")
    ap.add_argument("--snapshot-dir", help="depth sweep with --llama-fill snapshot: the states (DIR/depth-D.kvstate)")
    ap.add_argument("--snapshot-fill", metavar="DIR", help="write llama.cpp's states at --depths to DIR")
    ap.add_argument("--snapshot-check", metavar="DIR", help="compare logits after DIR's converted states (--depths)")
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
    if a.depths and (a.snapshot_fill or a.snapshot_check):
        snapshots(a)
        return
    if a.depths:
        if a.llama_fill == "snapshot" and not a.snapshot_dir:
            ap.error("--llama-fill snapshot needs --snapshot-dir DIR")
        if not a.raw:
            ap.error("--depths needs --raw FILE for the records")
        depth_sweep(a)
        return

    variants = engines_for("f16", a.engines.split(",") if a.engines else None)
    res = {name: {"tg": [], "pp": [], "busy": [], "error": None} for name in variants}
    roof = {"macs": 0.0, "peak": []}  # seam bench's count of a prompt token's multiply-adds and its int8 probe
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
                if "peak" in out:
                    roof["macs"] = out["macs"]
                    roof["peak"].append(out["peak"])
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
            if test == "pp" and roof["peak"] and max(roof["peak"]) > 0:
                peak = max(roof["peak"])
                share = lambda ts: 100 * ts * roof["macs"] / 1e9 / peak  # noqa: E731
                lines.append(f"share of the int8 peak ({peak:.1f} G multiply-adds/s on {a.threads} threads, seam's "
                             f"probe, best of the runs; {roof['macs'] / 1e9:.3f} G multiply-adds a prompt token): "
                             f"seam {share(med(res['seam'][test])):.1f}%, {best} {share(meds[best]):.1f}%")
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
            f.write(f"- seam's kernels: {os.environ.get('SEAM_KERNELS') or 'the default (fastest) set'}\n")
            try:
                import llama_cpp
                f.write(f"- llama.cpp: llama-cpp-python {llama_cpp.__version__}\n")
            except Exception:
                pass
            f.write("\n" + report + "\n\n```\n" + bw_text.strip() + "\n```\n")
        print(f"wrote {a.out}")


if __name__ == "__main__":
    main()
