#!/usr/bin/env python3
"""check_trace.py -- a seam --trace file against the Chrome Trace Event format.

What chrome://tracing and Perfetto need of the JSON Object Format, and what
seam promises on top: a "traceEvents" list of metadata events ("M": the
process's and each lane's name and order) and complete events ("X") with a
name, a category (the slice's kind), a process (pid 1, 2, ...: a run each;
seam bench, a test each), a lane's tid, a start (ts) and a duration (dur) in
microseconds, both finite and not negative; on each lane the slices nest (a
slice that starts inside another ends inside it); every part of a token lies
within its token (or its batch) on the host lane; a crossing's args carry its
direction and bytes. Exits 1 naming each breach.

  python3 tools/check_trace.py TRACE.json [--expect-kinds layer,crossing,...] [--lanes N]
"""
import argparse
import json
import math
import sys

LANES = {1: "host thread", 2: "GPU stream", 3: "copy stream", 4: "CPU layers"}
KINDS = {"batch", "token", "other", "layer", "crossing", "weights", "stall"}
EPS = 0.01  # us: the file's three decimals, rounded on both ends


def check(trace):
    bad = []
    if not isinstance(trace, dict) or not isinstance(trace.get("traceEvents"), list):
        return ["not a JSON object with a traceEvents list"]
    if not isinstance(trace.get("otherData", {}), dict):
        bad.append("otherData is not an object")
    names = {}
    slices = []
    for i, ev in enumerate(trace["traceEvents"]):
        where = f"event {i}"
        if not isinstance(ev, dict) or ev.get("ph") not in ("M", "X") or not isinstance(ev.get("name"), str):
            bad.append(f"{where}: not an M or X event with a name: {ev}")
            continue
        if not isinstance(ev.get("pid"), int) or ev["pid"] < 1:
            bad.append(f"{where}: pid {ev.get('pid')}, want 1, 2, ...")
            continue
        if ev["ph"] == "M":
            if ev["name"] == "thread_name":
                names[ev["pid"], ev.get("tid")] = ev.get("args", {}).get("name")
            elif ev["name"] not in ("process_name", "process_sort_index", "thread_sort_index"):
                bad.append(f"{where}: unknown metadata {ev['name']}")
            continue
        tid, ts, dur = ev.get("tid"), ev.get("ts"), ev.get("dur")
        if tid not in LANES:
            bad.append(f"{where} ({ev['name']}): tid {tid} is no lane")
        for key, v in (("ts", ts), ("dur", dur)):
            if not isinstance(v, (int, float)) or not math.isfinite(v) or v < 0:
                bad.append(f"{where} ({ev['name']}): {key} {v}")
        if ev.get("cat") not in KINDS:
            bad.append(f"{where} ({ev['name']}): category {ev.get('cat')}")
        args = ev.get("args", {})
        if not isinstance(args.get("token"), int):
            bad.append(f"{where} ({ev['name']}): no token in args")
        if ev.get("cat") in ("crossing", "weights") and (args.get("direction") not in ("H2D", "D2H", "WTS")
                                                          or not isinstance(args.get("bytes"), int)):
            bad.append(f"{where} ({ev['name']}): a crossing without its direction and bytes: {args}")
        slices.append(ev)
    pids = sorted({s["pid"] for s in slices})
    for pid in pids:
        mine = [s for s in slices if s["pid"] == pid]
        for tid, name in LANES.items():
            if any(s.get("tid") == tid for s in mine) and names.get((pid, tid)) != name:
                bad.append(f"process {pid}: lane {tid} is named {names.get((pid, tid))!r}, want {name!r}")
        # nesting, lane by lane
        for tid in LANES:
            lane = sorted((s for s in mine if s.get("tid") == tid), key=lambda s: (s["ts"], -s["dur"]))
            stack = []
            for s in lane:
                while stack and s["ts"] >= stack[-1]["ts"] + stack[-1]["dur"] - EPS:
                    stack.pop()
                if stack and s["ts"] + s["dur"] > stack[-1]["ts"] + stack[-1]["dur"] + EPS:
                    top = stack[-1]
                    bad.append(f"process {pid}, {LANES[tid]}: {s['name']} [{s['ts']}, +{s['dur']}] overlaps "
                               f"{top['name']} [{top['ts']}, +{top['dur']}] without nesting in it")
                stack.append(s)
        # every part within its token's (or its batch's) span
        spans = {s["args"].get("token"): s for s in mine if s.get("cat") in ("token", "batch")}
        for s in mine:
            if s.get("cat") in ("token", "batch"):
                continue
            owner = spans.get(s["args"].get("token"))
            if owner is None:
                bad.append(f"process {pid}: {s['name']}: token {s['args'].get('token')} has no token slice")
            elif s["ts"] < owner["ts"] - EPS or s["ts"] + s["dur"] > owner["ts"] + owner["dur"] + EPS:
                bad.append(f"process {pid}: {s['name']} [{s['ts']}, +{s['dur']}] outside {owner['name']} "
                           f"[{owner['ts']}, +{owner['dur']}]")
    return bad


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("trace")
    ap.add_argument("--expect-kinds", default="", help="slice kinds the trace must hold, comma-separated")
    ap.add_argument("--lanes", type=int, default=0, help="lanes the trace must use, at least")
    a = ap.parse_args()
    try:
        trace = json.load(open(a.trace))
    except (OSError, ValueError) as e:
        sys.exit(f"check_trace: {a.trace}: {e}")
    bad = check(trace)
    slices = [e for e in trace.get("traceEvents", []) if isinstance(e, dict) and e.get("ph") == "X"]
    kinds = {s.get("cat") for s in slices}
    for k in filter(None, a.expect_kinds.split(",")):
        if k not in kinds:
            bad.append(f"no {k} slice (kinds: {sorted(kinds)})")
    used = {s.get("tid") for s in slices}
    if len(used) < a.lanes:
        bad.append(f"{len(used)} lanes used, want at least {a.lanes}")
    for b in bad[:40]:
        print(f"check_trace: {a.trace}: {b}")
    print(f"check_trace: {a.trace}: {len(slices)} slices on {len(used)} lanes, {len(bad)} problems")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
