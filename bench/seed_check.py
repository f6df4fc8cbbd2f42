#!/usr/bin/env python3
"""seed_check.py -- the seed article's offload curve against seam's speed model.

The article (docs/sources.md) measured Qwen3-Coder 30B-A3B Q4_K_M on
two RTX 3060 with Ollama: 93.9 tok/s with all 48 layers on the GPUs, 46.3 with
44, 24.2 with 20. Its CPU is not named, so the profile's one unknown, the CPU's
read bandwidth, is fitted on ONE point (20 layers, the point the CPU weighs
most in) and the other two check the model.

  python3 bench/seed_check.py [--seam build/seam] [--fit]

Without --fit: the predictions of models/hw/rtx3060-seed.hw as it is, their
errors, the parts of the first step (48 -> 44 layers), and the placements
that fit ONE of the two 12 GB cards (seam plan --fit --gpu-mem 12G): the
fullest layer split, the fullest expert split, llama.cpp's --fit and the
fastest, which seam's --fit chooses. With --fit: the bandwidth that meets the
20-layer point exactly (the token's CPU part is bytes / bandwidth, so one
solve), to write into the profile.
"""
import argparse
import json
import subprocess

SEED = {48: 93.9, 44: 46.3, 20: 24.2}
FIT_AT = 20
SHAPE = "models/qwen3-30b-a3b.shape"
PROFILE = "models/hw/rtx3060-seed.hw"
FILL = 128  # positions in the cache: a short prompt and half of num_predict = 200


def predict(seam, head, ngl="48,44,20", profile=PROFILE):
    cmd = [seam, "plan", "--shape", SHAPE, "-ngl", ngl, "--hw", profile, "-c", str(FILL), "--json", "-"]
    if head:
        cmd += ["--head", head]
    doc = json.loads(subprocess.run(cmd, capture_output=True, text=True, check=True).stdout)
    return {q["n_gpu_layers"]: q for q in doc["predictions"]}


def cpu_bound_us(q):
    """The part of a token that scales with 1 / (the CPU's read bandwidth)."""
    p = q["parts_us"]
    return p["CPU layers"] + p["embedding"] + (p["head"] if q["head"] == "cpu" else 0)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seam", default="build/seam")
    ap.add_argument("--fit", action="store_true")
    args = ap.parse_args()
    preds = predict(args.seam, None)
    bw = float(next(line.split("=")[1].split("#")[0] for line in open(PROFILE) if line.startswith("cpu_read_gbs")))
    q = preds[FIT_AT]
    target = 1e6 / SEED[FIT_AT]
    fitted = bw * cpu_bound_us(q) / (target - (q["token_us"] - cpu_bound_us(q)))
    if args.fit:
        print(f"cpu_read_gbs = {fitted:.2f}  # fitted: to {SEED[FIT_AT]} tok/s at {FIT_AT} GPU layers")
        return
    print(f"profile {PROFILE}: cpu_read_gbs = {bw:g} GB/s (the fit at {FIT_AT} layers gives {fitted:.2f})\n")
    print("| GPU layers | seed measured | predicted, llama.cpp's placement | error | predicted, head on the GPU |")
    print("|---:|---:|---:|---:|---:|")
    on_gpu = predict(args.seam, "gpu")
    for n in sorted(SEED, reverse=True):
        p, g = preds[n]["tok_s"], on_gpu[n]["tok_s"]
        note = " (fitted here)" if n == FIT_AT else ""
        print(f"| {n} | {SEED[n]} | {p:.1f} | {100 * (p / SEED[n] - 1):+.1f}%{note} | {g:.1f} |")
    a, b = preds[48], preds[44]
    print(f"\nThe first step, 48 -> 44 layers: {a['token_us'] / 1e3:.2f} -> {b['token_us'] / 1e3:.2f} ms a token "
          f"(+{(b['token_us'] - a['token_us']) / 1e3:.2f} ms), by part:\n")
    print("| part | 48 layers, ms | 44 layers, ms | change, ms | share of the change |")
    print("|---|---:|---:|---:|---:|")
    delta = b["token_us"] - a["token_us"]
    for part in ["GPU layers", "CPU layers", "head", "crossings", "launch", "embedding"]:
        x, y = a["parts_us"][part], b["parts_us"][part]
        print(f"| {part} | {x / 1e3:.3f} | {y / 1e3:.3f} | {(y - x) / 1e3:+.3f} | {100 * (y - x) / delta:+.0f}% |")
    print(f"\nGPU idle at 44 layers: {b['gpu_idle_us'] / 1e3:.2f} ms of {b['token_us'] / 1e3:.2f} "
          f"({100 * b['gpu_idle_us'] / b['token_us']:.0f}%): the GPU waits while the CPU runs its 4 layers and the head.")
    one_card(args.seam)


def flags(c):
    moe = f" --n-cpu-moe {c['n_cpu_moe']}" if c["n_cpu_moe"] else ""
    over = f" --overflow {c['overflow']}" if c["overflow"] != "cpu" else ""
    return f"-ngl {c['gpu_layers']}{moe} --head {c['head']}{over}"


def one_card(seam, card="12G"):
    """The placements that fit one card, as seam plan --fit ranks them."""
    cmd = [seam, "plan", "--shape", SHAPE, "--fit", "--gpu-mem", card, "--hw", PROFILE, "-c", str(FILL), "--json", "-"]
    doc = json.loads(subprocess.run(cmd, capture_output=True, text=True, check=True).stdout)
    cands = doc["candidates"]
    layers = max(c["gpu_layers"] for c in cands)
    expert = min((c for c in cands if c["gpu_layers"] == layers and c["head"] == "gpu" and c["overflow"] == "cpu"),
                 key=lambda c: c["n_cpu_moe"])
    rows = [("the fullest layer split", cands[doc["fullest"]]), ("the fullest expert split", expert),
            ("llama.cpp's --fit (1 GiB margin)", cands[doc["llamacpp"]]), ("seam's --fit: the fastest", cands[0])]
    print(f"\nOne {card} card of the two ({' '.join(cmd[1:-2])}): {len(cands)} placements fit\n")
    print("| placement | flags | GPU MiB | predicted tok/s |")
    print("|---|---|---:|---:|")
    for what, c in rows:
        print(f"| {what} | `{flags(c)}` | {c['gpu_bytes'] / 2**20:.1f} | {c['tok_s']:.2f} |")


if __name__ == "__main__":
    main()
