#!/usr/bin/env python3
"""compare_llamacpp.py — seam against llama.cpp on the CPU, same GGUF, same threads.

  /opt/llamavenv/bin/python bench/compare_llamacpp.py MODEL [--threads 2]
      [--reps 5] [--tg 128] [--pp 512] [--out bench/results/DATE-cpu-decode.md]

Measures, in alternating order within each repetition (so that a slow spell
of a shared machine hits every contender alike):
  tg  decode: TG tokens one at a time after a 3-token prompt, tokens/s
  pp  prompt: PP tokens, tokens/s (llama.cpp: one batch; seam: its prefill)
for seam (`seam bench`, one warm-up and one measured run of each test) and
for llama.cpp through llama-cpp-python's low-level API (the reference venv
that tools/setup-reference.sh builds: run this script with its Python),
with weight repacking off (use_extra_bufts=False: llama.cpp's plain
path, the arithmetic seam mirrors) and on (True: repacked weights, AMX where
present). Each llama.cpp run is its own process, so a crash (the repacking
path has died with SIGILL on some VMs) is recorded, not fatal.

It also runs seam-membw for the read bandwidth and reads `seam inspect` for
the bytes one token reads, to put seam's decode speed as a % of bandwidth.
Before each measurement it waits (up to --quiet-wait s) for the CPUs to be
idle, and it reports how busy they were. Medians and ratios go to stdout and,
with --out, to a markdown file with the machine, the date and the commands.
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

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)

# The llama.cpp side, run as `python -c LLAMA_RUNNER MODEL THREADS EXTRA TG PP`:
# prints "tg <tok/s>" and "pp <tok/s>".
LLAMA_RUNNER = r'''
import sys, time
import llama_cpp as L
path, threads, extra, tg, pp = sys.argv[1], int(sys.argv[2]), sys.argv[3] == "1", int(sys.argv[4]), int(sys.argv[5])
@L.llama_log_callback
def quiet(level, text, user_data):
    pass
L.llama_backend_init()
L.llama_log_set(quiet, None)
mp = L.llama_model_default_params()
mp.n_gpu_layers = 0
mp.use_extra_bufts = extra
mp.use_mmap = True
model = L.llama_model_load_from_file(path.encode(), mp)
n_batch = max(pp, 8)
cp = L.llama_context_default_params()
cp.n_ctx = max(1024, pp + 16, tg + 16)
cp.n_batch = n_batch
cp.n_ubatch = n_batch
cp.n_threads = threads
cp.n_threads_batch = threads
cp.flash_attn_type = L.LLAMA_FLASH_ATTN_TYPE_DISABLED
cp.type_k = 1
cp.type_v = 1
ctx = L.llama_init_from_model(model, cp)
batch = L.llama_batch_init(n_batch, 0, 1)
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
mem = L.llama_get_memory(ctx)
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
'''


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
    rc, out = run([seam, "bench", "-m", model, "-n", str(tg), "-p", str(pp), "-r", "1", "-o", "json"]
                  + ([] if threads is None else ["-t", str(threads)]))
    if rc:
        raise RuntimeError(f"seam bench failed ({rc}):\n{out[-2000:]}")
    rows = json.loads(out[out.index("["):out.rindex("]") + 1])
    return {("tg" if r["n_gen"] else "pp"): r["avg_ts"] for r in rows}


def llama(model, threads, extra, tg, pp):
    """{'tg': tok/s, 'pp': tok/s} or {'error': text}."""
    rc, out = run([sys.executable, "-c", LLAMA_RUNNER, model, str(threads), "1" if extra else "0", str(tg), str(pp)])
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


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("model")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--tg", type=int, default=128)
    ap.add_argument("--pp", type=int, default=512, help="0 skips the prompt measurement")
    ap.add_argument("--seam", default=os.path.join(ROOT, "build", "seam"))
    ap.add_argument("--no-extra", action="store_true", help="skip llama.cpp with repacked weights")
    ap.add_argument("--quiet-wait", type=float, default=60, help="seconds to wait for idle CPUs per measurement")
    ap.add_argument("--out", help="write the results as markdown here")
    a = ap.parse_args()

    variants = [("seam", None), ("llama.cpp", False)] + ([] if a.no_extra else [("llama.cpp repack", True)])
    res = {name: {"tg": [], "pp": [], "busy": [], "error": None} for name, _ in variants}
    for rep in range(a.reps):
        order = variants if rep % 2 == 0 else variants[::-1]
        for name, extra in order:
            r = res[name]
            if r["error"]:
                continue
            r["busy"].append(wait_quiet(a.quiet_wait))
            if extra is None:
                out = seam_bench(a.seam, a.model, a.threads, a.tg, a.pp)
                r["tg"].append(out["tg"])
                if a.pp:
                    r["pp"].append(out["pp"])
            else:
                out = llama(a.model, a.threads, extra, a.tg, a.pp)
                if "error" in out:
                    r["error"] = out["error"]
                    continue
                r["tg"].append(out["tg"])
                if a.pp:
                    r["pp"].append(out["pp"])
            print(f"rep {rep + 1}/{a.reps} {name:17s} tg {r['tg'][-1]:7.2f} tok/s"
                  + (f"  pp {r['pp'][-1]:7.2f} tok/s" if a.pp else "") + f"  (CPUs {100 * r['busy'][-1]:.0f}% busy before)",
                  flush=True)

    wait_quiet(a.quiet_wait)
    bw_rows, bw_text = membw(a.threads)
    per_token = read_per_token(a.seam, a.model)
    read_bw = bw_rows.get(("read", a.threads), (float("nan"),) * 2)
    read_pf = bw_rows.get(("read+pf", a.threads), read_bw)
    best_read = max(read_bw[0], read_pf[0])

    seam_tg_med = med(res["seam"]["tg"])
    lines = []
    lines.append(f"model: {a.model} ({per_token / 2**20:.1f} MiB read per token)")
    lines.append(f"threads: {a.threads}; tg{a.tg} = {a.tg} single-token decodes after a 3-token prompt; "
                 f"pp{a.pp} = a {a.pp}-token prompt; {a.reps} repetitions, alternating order, medians")
    lines.append("")
    lines.append("| engine | tg tok/s (median) | tg runs | pp tok/s (median) | pp runs | decode GB/s | seam / this (tg) "
                 "| seam / this (pp) |")
    lines.append("|---|---|---|---|---|---|---|---|")
    for name, _ in variants:
        r = res[name]
        if r["error"]:
            lines.append(f"| {name} | failed: {r['error']} | | | | | | |")
            continue
        tg_med, pp_med = med(r["tg"]), med(r["pp"])
        runs = " ".join(f"{x:.1f}" for x in r["tg"])
        pp_runs = " ".join(f"{x:.0f}" for x in r["pp"])
        ratio = seam_tg_med / tg_med if tg_med else float("nan")
        pp_ratio = med(res["seam"]["pp"]) / pp_med if a.pp and pp_med else float("nan")
        pp_txt = f"{pp_med:.1f}" if a.pp else "-"
        lines.append(f"| {name} | {tg_med:.2f} | {runs} | {pp_txt} | {pp_runs} | {tg_med * per_token / 1e9:.2f} "
                     f"| {ratio:.3f} | {pp_ratio:.3f} |")
    lines.append("")
    lines.append(f"read bandwidth ({a.threads} threads, seam-membw, median of 9): {read_bw[0]:.1f} GB/s plain loop"
                 + (f", {read_pf[0]:.1f} GB/s with software prefetch" if ("read+pf", a.threads) in bw_rows else ""))
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
            f.write(f"# CPU decode: seam vs llama.cpp ({datetime.date.today().isoformat()})\n\n")
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
