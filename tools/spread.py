#!/usr/bin/env python3
"""spread.py — how far builds of llama.cpp, and seam, are apart on every golden fixture.

  /opt/llamavenv/bin/python tools/spread.py SOURCE... [--compare A:B ...]
      [--threads 2] [--out FILE.md] [FIXTURE ...]

  SOURCE is NAME=how:
    --build NAME=PYTHON    a llama.cpp build: the Python of a venv that
                           tools/setup-reference.sh made (e.g. --flavor avx2)
    --seam NAME=KERNELS    build/seam with SEAM_KERNELS=KERNELS (avx512, avx2,
                           scalar: the CPU kernel set it runs)

Every source computes, for every fixture in tests/golden/avx512/ (or each FIXTURE
named: NAME of logits-NAME.txt), the logits after each token of the
fixture's prompt followed by its greedy continuation (the one the fixtures'
build chose), one token at a time from position 0: the builds through
tools/ref_logits.py (as make_golden.py runs llama.cpp), seam through `seam
logits`. Each source is first checked against the logits the fixtures store.
Then for each pair A:B (by default every source against
the first), per fixture:
  - the first position where the logits differ at all;
  - max |diff| and max |diff| / std, the std of A's logits at that position,
    over the prompt and over the continuation;
  - where the two greedy continuations part: the first step whose top token
    differs between A and B, A's top-1 minus top-2 margin there, and that
    margin over the std (a small margin is a near-tie). Teacher-forced logits
    along the fixture's continuation are each source's own free-running
    logits until it leaves that continuation, so this is where their own
    greedy texts part; where both leave it at once for the same token, only
    "not before" that step is known.
Run it with a reference venv's Python (it imports make_golden.py); it needs
build/seam and build/seam-synth.
"""
import argparse
import datetime
import os
import platform
import shlex
import subprocess
import sys
import tempfile

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path[:0] = [os.path.join(ROOT, "tools"), os.path.join(ROOT, "bench")]
from compare_llamacpp import machine  # noqa: E402
from make_golden import N_CTX, fixture_names, golden_dir, read_fixture, synthesise, top2  # noqa: E402

GOLDEN = golden_dir("avx512")  # the prompts and continuations every source is run along

SEAM = os.path.join(ROOT, "build", "seam")
REF_LOGITS = os.path.join(ROOT, "tools", "ref_logits.py")


class Fixture:
    """What spread.py needs of tests/golden/avx512/logits-NAME.{txt,f32}."""

    def __init__(self, name):
        f = read_fixture(os.path.join(GOLDEN, f"logits-{name}.txt"))
        ints = lambda key: [int(v) for v in f[key].split()[1:]]  # noqa: E731 ("N v0 v1 ...")
        self.name = name
        self.model = f["model"]  # "synth SHAPE" or "file PATH"
        self.n_vocab = int(f["n_vocab"])
        self.prompt = ints("tokens")
        self.greedy = ints("greedy")
        self.stored = ints("stored")
        self.logits = np.fromfile(os.path.join(GOLDEN, f"logits-{name}.f32"), dtype="<f4").reshape(
            len(self.stored), self.n_vocab)  # [stored][n_vocab]

    def tokens(self):
        """The fed tokens: the prompt, then the continuation but its last token."""
        return self.prompt + self.greedy[:-1]

    def gguf(self, tmp):
        kind, path = self.model.split(" ", 1)
        if kind == "synth":
            out = os.path.join(tmp, f"{self.name}.gguf")
            synthesise(path, out)
            return out
        return path if os.path.isabs(path) else os.path.join(ROOT, path)


def run(cmd, env=None):
    p = subprocess.run(cmd, capture_output=True, text=True, env=env)
    if p.returncode != 0:
        sys.exit(f"spread: {' '.join(cmd)} failed:\n{p.stderr}{p.stdout}")
    return p.stdout


class Source:
    """A llama.cpp build (kind "build", how = its Python) or seam (kind
    "seam", how = its kernel set)."""

    def __init__(self, kind, spec):
        self.name, sep, self.how = spec.partition("=")
        if not sep or not self.name or not self.how:
            sys.exit(f"spread: --{kind} {spec}: give NAME={'PYTHON' if kind == 'build' else 'KERNELS'}")
        self.kind = kind
        if kind == "build":
            version, info = run([self.how, REF_LOGITS, "--system-info"]).strip().split("\n")
            self.describe = f"{version}, system info `{info}`"
        else:
            self.describe = f"seam at {git_commit()}, SEAM_KERNELS={self.how}"

    def logits(self, fx, gguf, out, threads):
        """Teacher-forced logits [len(fx.tokens())][n_vocab] of fx."""
        ids = ",".join(map(str, fx.tokens()))
        if self.kind == "build":
            run([self.how, REF_LOGITS, gguf, "--tokens", ids, "--logits", out, "--ctx", str(N_CTX),
                 "--threads", str(threads), "--json", os.devnull])
        else:
            run([SEAM, "logits", "-m", gguf, "--tokens", ids, "-o", out, "-c", str(len(fx.tokens())),
                 "-t", str(threads)], env=dict(os.environ, SEAM_KERNELS=self.how))
        return np.fromfile(out, dtype="<f4").reshape(len(fx.tokens()), fx.n_vocab)


def git_commit():
    return run(["git", "-C", ROOT, "rev-parse", "--short", "HEAD"]).strip()


def compare(fx, a, b):
    """One pair's numbers on one fixture; a and b are [positions][n_vocab]."""
    n = len(fx.prompt)
    diff = np.abs(a.astype(np.float64) - b).max(axis=1)  # [positions]
    std = a.std(axis=1, dtype=np.float64)
    rel = diff / std
    differing = np.nonzero(diff)[0]
    r = {"diff": diff, "rel": rel, "n": n, "first": int(differing[0]) if len(differing) else None}
    r["prompt"] = (diff[:n].max(), rel[:n].max(), int(rel[:n].argmax()))
    r["cont"] = (diff[n:].max(), rel[n:].max(), int(rel[n:].argmax()) + n) if len(diff) > n else None
    r["part"] = None  # (step, A's token, B's token, A's margin, margin / std, whether only "not before")
    for j, path in enumerate(fx.greedy):
        p = n - 1 + j
        ta, margin = top2(a[p])
        tb = int(np.argmax(b[p]))
        if ta != tb or ta != path:
            r["part"] = (j, ta, tb, margin, margin / std[p], ta == tb)
            break
    return r


def fmt_part(r, n_greedy):
    if r["part"] is None:
        return f"same {n_greedy} tokens"
    j, ta, tb, margin, rel, both_left = r["part"]
    if both_left:
        return f"same until at least step {j} (both leave the fixture's text there)"
    return f"step {j}: {ta} vs {tb}, margin {margin:.3g} = {rel:.3g} std"


def fmt_rel(rel):
    return " ".join("0" if x == 0 else f"{x:.2g}" for x in rel)


def fmt_max(m):
    d, rel, pos = m
    return "0" if d == 0 else f"{d:.3g} = {rel:.3g} std (pos {pos})"


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("fixtures", nargs="*", help="fixture names (default: all)")
    ap.add_argument("--build", action="append", default=[], metavar="NAME=PYTHON")
    ap.add_argument("--seam", action="append", default=[], metavar="NAME=KERNELS")
    ap.add_argument("--compare", action="append", default=[], metavar="A:B",
                    help="a pair to compare (repeatable); default: every source against the first")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--out", help="also write the tables here (markdown), with the command, machine and date")
    a = ap.parse_args()
    sources = [Source("build", s) for s in a.build] + [Source("seam", s) for s in a.seam]
    by_name = {s.name: s for s in sources}
    if len(by_name) != len(sources) or len(sources) < 2:
        ap.error("give at least two sources, with different names")
    pairs = [tuple(p.split(":", 1)) for p in a.compare] or [(sources[0].name, s.name) for s in sources[1:]]
    for pair in pairs:
        if len(pair) != 2 or not all(n in by_name for n in pair):
            ap.error(f"--compare {':'.join(pair)}: name two of the sources ({', '.join(by_name)})")
    if not os.access(SEAM, os.X_OK):
        sys.exit(f"spread: {SEAM} is missing; run scripts/build.sh first")

    lines = []  # the report, for --out

    def say(text=""):
        print(text)
        lines.append(text)

    say("## Sources")
    say()
    for s in sources:
        say(f"- {s.name}: {s.describe}")
    say()
    results = {p: [] for p in pairs}  # pair -> [(fixture, numbers)]
    stored = {s.name: [] for s in sources}  # source -> fixtures, with the difference where there is one
    with tempfile.TemporaryDirectory() as tmp:
        for name in a.fixtures or fixture_names("avx512"):
            fx = Fixture(name)
            gguf = fx.gguf(tmp)
            logits = {}
            for s in sources:
                logits[s.name] = s.logits(fx, gguf, os.path.join(tmp, "logits.f32"), a.threads)
                d = np.abs(logits[s.name][fx.stored] - fx.logits).max()
                stored[s.name].append(name if d == 0 else f"{name} (max |diff| {d:.3g})")
            for pair in pairs:
                results[pair].append((fx, compare(fx, logits[pair[0]], logits[pair[1]])))
            print(f"spread: {name} done", file=sys.stderr)
    say("Against the logits the fixtures store (bit for bit, or the max |diff|):")
    say()
    for s in sources:
        say(f"- {s.name}: " + ", ".join(stored[s.name]))
    for pair in pairs:
        say()
        say(f"## {pair[0]} vs {pair[1]}")
        say()
        say("| fixture | positions (prompt + continuation) | first differing position | prompt: max abs diff | "
            "continuation: max abs diff | greedy texts part at |")
        say("|---|---|---|---|---|---|")
        for fx, r in results[pair]:
            first = "none" if r["first"] is None else str(r["first"])
            cont = fmt_max(r["cont"]) if r["cont"] else "-"
            say(f"| {fx.name} | {r['n']} + {len(r['diff']) - r['n']} | {first} | {fmt_max(r['prompt'])} | {cont} "
                f"| {fmt_part(r, len(fx.greedy))} |")
        say()
        say(f"max |diff| / std at each position, {pair[0]}'s std (prompt | continuation):")
        say()
        for fx, r in results[pair]:
            if r["first"] is None:
                continue
            say(f"    {fx.name}: {fmt_rel(r['rel'][:r['n']])} | {fmt_rel(r['rel'][r['n']:])}")
        if all(r["first"] is None for _, r in results[pair]):
            say("    (equal everywhere)")
    if a.out:
        cmd = " ".join(shlex.quote(x) for x in [sys.executable, os.path.relpath(__file__, ROOT)] + sys.argv[1:])
        header = [f"# llama.cpp's spread between its builds, and seam ({datetime.date.today()})", "",
                  f"- machine: {machine()}, {platform.platform()}", f"- command: `{cmd}`", ""]
        with open(a.out, "w") as f:
            f.write("\n".join(header + lines) + "\n")
        print(f"wrote {a.out}")


if __name__ == "__main__":
    main()
