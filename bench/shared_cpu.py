#!/usr/bin/env python3
"""shared_cpu.py — seam's speed while other processes hold the CPUs.

  python3 bench/shared_cpu.py MODEL... [--seam build/seam] [--seam OTHER=label]
      [--loads idle,pin,free,all] [--threads 1,2,default] [--tg 64] [--pp 0]
      [--rounds 5] [--quiet-wait 60] [--load-cmd 'SHELL COMMAND']
      [--out bench/results/DATE-shared-cpu.md]

Run it under /work/bin/seam-quiet (or on an otherwise idle machine): the
loads it makes are the only ones it should measure.

Loads, each started before and stopped after its measurements:
  idle  nothing
  pin   one busy loop pinned to the last CPU of this process's affinity
  free  one busy loop placed by the scheduler
  all   one busy loop per CPU, placed by the scheduler
  cmd   --load-cmd run again and again by the shell (a compile, say)
A busy loop is `bash -c 'while :; do :; done'`: all user time, no memory
traffic, so what it takes from seam is CPU time alone.

Each round goes through every load; under each, it waits (up to
--quiet-wait s) for the CPUs to be idle, starts the load, and runs `seam
bench -p PP -n TG -r 1` (one warm-up, one measured run, its own process)
for each seam binary and each thread count ("default": no -t, seam's own
choice), so a slow spell of a shared machine hits them all. The report
gives the median tok/s of the rounds and, per binary, three ratios:
  default / best(-t 1, -t 2) under the same load (issue 19's target: >= 0.8)
  default / (-t 1 idle): under `all`, the fair share (target: >= 0.4)
  last thread column / the first binary's, same load (an A/B of builds)
and how busy the CPUs were before each round's loads started.
"""
import argparse
import datetime
import os
import platform
import shlex
import signal
import statistics
import subprocess
import sys
import time

from compare_llamacpp import ROOT, machine, seam_bench, wait_quiet

BUSY = ["bash", "-c", "while :; do :; done"]


def spawn(argv, cpu=None):
    """A load process in its own process group (stop_load ends its children too), on `cpu` if given."""
    pin = (lambda: os.sched_setaffinity(0, {cpu})) if cpu is not None else None
    return subprocess.Popen(argv, preexec_fn=pin, start_new_session=True, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)


def start_load(kind, cmd):
    cpus = sorted(os.sched_getaffinity(0))
    if kind == "idle":
        return []
    if kind == "pin":
        return [spawn(BUSY, cpus[-1])]
    if kind == "free":
        return [spawn(BUSY)]
    if kind == "all":
        return [spawn(BUSY) for _ in cpus]
    if kind == "cmd" and cmd:
        return [spawn(["bash", "-c", f"while :; do {cmd}; done"])]
    sys.exit(f"shared_cpu.py: unknown load '{kind}' (idle, pin, free, all, cmd with --load-cmd)")


def stop_load(procs):
    for p in procs:
        os.killpg(p.pid, signal.SIGKILL)
        p.wait()


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("models", nargs="+")
    ap.add_argument("--seam", action="append", help="a seam binary, PATH or PATH=LABEL (repeatable) [build/seam]")
    ap.add_argument("--loads", default="idle,pin,free,all")
    ap.add_argument("--threads", default="1,2,default")
    ap.add_argument("--tg", type=int, default=64)
    ap.add_argument("--pp", type=int, default=0)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--quiet-wait", type=float, default=60, help="seconds to wait for idle CPUs before each load")
    ap.add_argument("--load-cmd", help="the `cmd` load: a shell command, run in a loop")
    ap.add_argument("--out", help="append the report to this markdown file")
    a = ap.parse_args()
    seams = []
    for s in a.seam or [os.path.join(ROOT, "build", "seam")]:
        path, _, label = s.partition("=")
        seams.append((path, label or os.path.relpath(path)))
    loads, threads = a.loads.split(","), a.threads.split(",")
    tests = (["pp"] if a.pp else []) + (["tg"] if a.tg else [])

    runs, busy = {}, []  # runs[(model, load, label, threads, test)] = [tok/s per round]
    for model in a.models:
        for r in range(a.rounds):
            for load in loads:
                busy.append(wait_quiet(a.quiet_wait))
                procs = start_load(load, a.load_cmd)
                try:
                    time.sleep(0.5)  # the loops running before seam starts
                    for path, label in seams:
                        for t in threads:
                            got = seam_bench(path, model, None if t == "default" else t, a.tg, a.pp)
                            for test in tests:
                                runs.setdefault((model, load, label, t, test), []).append(got[test])
                finally:
                    stop_load(procs)
            print(f"shared_cpu.py: {os.path.basename(model)} round {r + 1}/{a.rounds}", file=sys.stderr)

    med = {k: statistics.median(v) for k, v in runs.items()}
    test_name = {"pp": f"pp{a.pp}", "tg": f"tg{a.tg}"}
    lines = [
        f"## {datetime.date.today()}: {', '.join(os.path.basename(m) for m in a.models)}",
        "",
        f"Command: `python3 bench/shared_cpu.py {shlex.join(sys.argv[1:])}`",
        f"Machine: {machine()}, Linux {platform.release()}; \"default\" is all {os.cpu_count()} CPUs.",
        f"CPUs busy before the loads started: median {100 * statistics.median(busy):.0f}%, "
        f"most {100 * max(busy):.0f}%.",
        f"Medians of {a.rounds} alternating rounds, tok/s (every round's figure in brackets).",
        "",
        "| model | load | seam | test | " + " | ".join(f"-t {t}" if t != "default" else "default" for t in threads)
        + " | default / best | default / idle -t 1 |" + (f" / {seams[0][1]} |" if len(seams) > 1 else ""),
        "|---|---|---|---|" + "---|" * len(threads) + "---|---|" + ("---|" if len(seams) > 1 else ""),
    ]
    for model in a.models:
        for load in loads:
            for _, label in seams:
                for test in tests:
                    cells, m = [], {}
                    for t in threads:
                        key = (model, load, label, t, test)
                        m[t] = med[key]
                        cells.append(f"{m[t]:.1f} [{', '.join(f'{x:.0f}' for x in runs[key])}]")
                    best = max((m[t] for t in ("1", "2") if t in m), default=0)
                    idle1 = med.get((model, "idle", label, "1", test), 0)
                    r_best = f"{m['default'] / best:.2f}" if "default" in m and best else ""
                    r_idle = f"{m['default'] / idle1:.2f}" if "default" in m and idle1 else ""
                    r_first = f" {m[threads[-1]] / med[(model, load, seams[0][1], threads[-1], test)]:.2f} |"
                    lines.append(f"| {os.path.basename(model)} | {load} | {label} | {test_name[test]} | "
                                 + " | ".join(cells) + f" | {r_best} | {r_idle} |" + (r_first if len(seams) > 1 else ""))
    report = "\n".join(lines) + "\n"
    print(report)
    if a.out:
        with open(a.out, "a") as f:
            f.write(report + "\n")


if __name__ == "__main__":
    main()
