#!/usr/bin/env python3
"""make_golden.py — regenerates the golden-logit fixtures of tests/test_golden.c.

  /opt/llamavenv/bin/python tools/make_golden.py [MODEL.gguf ...] [--force]
  /opt/llamavenv-avx2/bin/python tools/make_golden.py [MODEL.gguf ...] [--force]
  PYTHON tools/make_golden.py --check-build

Run it with the Python of a reference, a venv that tools/setup-reference.sh
builds (llama-cpp-python compiled from source: pip's default flags, or its
AVX2-only flavor), after scripts/build.sh (it needs build/seam-synth).

There are two sets of fixtures, one per float order of llama.cpp's x86
builds (src/numeric/exact.h): tests/golden/avx512/, from a build with
AVX-512 (pip's default on a Zen 4), and tests/golden/avx2/, from one without
(pip's default on a Zen 3, or --flavor avx2 on any x86 machine). The running
build's system info line says which it writes: AVX512 = 1 or not.

The fixtures record the build that wrote them: the package version and
llama.cpp's system info line (its instruction sets, repack, llamafile).
llama.cpp's builds do not compute the same logits (an AVX2-only build differs
from the native AVX-512 one by up to a fifth of the logits' standard
deviation: README, Correctness), so fixtures from another build would not be
the committed ones. make_golden.py therefore refuses to write when the running
build's version or line differs from the one the committed fixtures of its
order record, unless --force is given. --check-build only compares, and exits
1 on a difference.

Models, each giving fixtures named after it:
  - the synthetic models of SHAPES, synthesised by build/seam-synth into a
    temporary folder; the prompt is a fixed list of token ids, 32 of them,
    or as many as SHAPES gives (tiny-gemma3: 160, past its sliding window of
    8 and the ring of 104 positions a sliding layer keeps);
  - the default real model, models/gemma-3-270m-q4_k_m.gguf, when it is
    installed (models/get-default-model.sh); if it is not, its old fixtures
    are left as they are;
  - every GGUF named on the command line.
  A real model gets one fixture per text of PROMPTS (NAME-1, NAME-2, ...),
  tokenised by llama.cpp (with BOS as the file says).
Each synthetic model, and the default real model on its first prompt, also
gets a fixture with a q8_0 KV cache (NAME-q8_0, NAME-1-q8_0): llama.cpp with
-ctk q8_0 -ctv q8_0, which runs its flash attention (ref_logits.py).

llama.cpp runs on its plain CPU path (no repacking, no AMX; no flash
attention over an f16 KV cache), one token at a time, as seam does. Its greedy
continuation of GREEDY tokens is recorded; the logits along it are the
teacher-forced logits of prompt + continuation, so each step's margin is
known too.

Fixture format: two files per model in tests/golden/ORDER/.

logits-NAME.txt, text; '#' lines are comments; every other line is a key and
its values, separated by single spaces; a list starts with its length:
  reference llama-cpp-python V    the package (and so llama.cpp) version
  system_info CPU : SSE3 = 1 | ... llama.cpp's system info line: the build
  model synth models/tiny.shape   how to get the model: "synth SHAPE" (made by
                                  seam-synth from the shape file) or
                                  "file PATH"; paths relative to the source
                                  root unless absolute
  cache K V                       the KV cache's types (f16 or q8_0); absent:
                                  f16 f16
  sha256 HEX                      SHA-256 of the GGUF file
  split_tol T                     the GPU split's tolerance, std (seam's own measurement:
                                  tools/split_tolerances.py writes it, this script keeps it)
  n_vocab N
  tokens N t0 t1 ...              the prompt's token ids
  top1 N ...                      llama.cpp's top token after each prompt token
  margin N ...                    its top-1 minus top-2 logit there
  std N ...                       the standard deviation of its logits there
  stored K p0 p1 ...              prompt positions whose logits are in the .f32
  greedy G g0 g1 ...              llama.cpp's greedy continuation
  greedy_margin G ...             top-1 minus top-2 logit of the logits that
                                  chose g_j (those after token n-1+j)
  greedy_std G ...                their standard deviation
Floats are written with 9 significant digits, so they read back exactly.

logits-NAME.f32: float32 little-endian [K][n_vocab], llama.cpp's logits after
prompt token p_k (teacher forcing), in the order of `stored`. All positions
are stored unless that would pass MAX_STORED_BYTES per fixture (real
vocabularies: 262144 floats = 1 MiB a position); then K evenly spaced
positions, the first and the last among them.

The tokenizer fixtures (tests/golden/tokenize-*) are another script's.
"""
import argparse
import os
import random
import subprocess
import sys
import tempfile

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tools"))
from ref_logits import Reference, sha256, system_info  # noqa: E402

GOLDEN_ROOT = os.path.join(ROOT, "tests", "golden")
ORDERS = ("avx2", "avx512")  # exact.h's exact_order_names
SYNTH = os.path.join(ROOT, "build", "seam-synth")
SHAPES = {"models/tiny.shape": 32, "models/small.shape": 32, "models/moe-small.shape": 32,
          "models/tiny-llama.shape": 32, "models/tiny-qwen2.shape": 32, "models/tiny-gemma3.shape": 160}
DEFAULT_MODEL = "models/gemma-3-270m-q4_k_m.gguf"
SYNTH_SEED = 20240601  # the synthetic prompt: SHAPES' count of ids drawn by random.Random(SYNTH_SEED)
PROMPTS = [
    "The capital of France is Paris. The capital of Germany is",
    "def fibonacci(n):\n    if n < 2:\n        return n\n",
    "<start_of_turn>user\nWrite a haiku about memory bandwidth.<end_of_turn>\n<start_of_turn>model\n",
]
GREEDY = 64
MAX_STORED_BYTES = 3 << 20
N_CTX = 256


def top2(row):
    """Top token, and its lead over the runner-up."""
    i = int(np.argmax(row))
    rest = np.delete(row, i)
    return i, float(row[i] - rest.max())


def stored_positions(n, n_vocab):
    k = max(1, min(n, MAX_STORED_BYTES // (4 * n_vocab)))
    if k == n:
        return list(range(n))
    return sorted({int(round(x)) for x in np.linspace(0, n - 1, k)})


def fmt_list(key, values, fmt="{}"):
    return f"{key} {len(values)} " + " ".join(fmt.format(v) for v in values) + "\n"


def read_fixture(path):
    """A fixture's .txt as {key: the rest of its line}, comments left out."""
    fields = {}
    with open(path) as f:
        for line in f:
            if not line.startswith("#"):
                key, _, rest = line.rstrip("\n").partition(" ")
                fields[key] = rest
    return fields


def golden_dir(order):
    """tests/golden/ORDER: the fixtures of one order."""
    return os.path.join(GOLDEN_ROOT, order)


def order_of(info):
    """The float order of the build whose system info line is `info`."""
    return "avx512" if "AVX512 = 1" in info else "avx2"


def fixture_names(order):
    """NAME of every tests/golden/ORDER/logits-NAME.txt, sorted."""
    d = golden_dir(order)
    return sorted(f[len("logits-"):-len(".txt")] for f in os.listdir(d)
                  if f.startswith("logits-") and f.endswith(".txt")) if os.path.isdir(d) else []


def build_mismatch():
    """None when the running build is the one every committed fixture of its
    order records (see the header); else what differs, as a message."""
    build = system_info()
    order = order_of(build[1])
    diffs = []
    for name in fixture_names(order):
        f = read_fixture(os.path.join(golden_dir(order), f"logits-{name}.txt"))
        if (f.get("reference"), f.get("system_info")) != build:
            diffs.append((name, f.get("reference"), f.get("system_info")))
    if not diffs:
        return None
    name, reference, info = diffs[0]
    return (f"make_golden: this build is {build[0]}, system info:\n  {build[1]}\n"
            f"but {len(diffs)} of the committed {order} fixtures, logits-{name} first, were written by "
            + (f"{reference}, system info:\n  {info}\n" if reference else "a build they do not record\n")
            + "llama.cpp's builds differ in their logits (README, Correctness), so this one would not reproduce "
            "them. Build the reference with tools/setup-reference.sh on a machine whose native build gives "
            "the recorded line")


def write_fixture(name, model_line, gguf, text, threads, cache="f16"):
    """Writes logits-NAME.{txt,f32}; the prompt is `text`, or, given a count of
    tokens, that many of SYNTH_SEED's; the KV cache's keys and values are of type `cache`."""
    ref = Reference(gguf, N_CTX, threads, cache, cache)
    if isinstance(text, int):
        r = random.Random(SYNTH_SEED)
        tokens = [r.randrange(ref.n_vocab) for _ in range(text)]
    else:
        tokens = ref.tokenize(text)
    n = len(tokens)
    if n + GREEDY > N_CTX:
        sys.exit(f"make_golden: {name}: {n} prompt tokens + {GREEDY} more pass the context of {N_CTX}")
    greedy = ref.greedy(tokens, GREEDY)
    # Teacher forcing over prompt + continuation gives, at position n-1+j, the
    # logits that chose greedy[j]; the continuation's last token is never fed.
    logits = ref.teacher_forced(tokens + greedy[:-1], batch=False)
    tops = [top2(row) for row in logits]
    stds = [float(np.std(row, dtype=np.float64)) for row in logits]
    for j, g in enumerate(greedy):
        if tops[n - 1 + j][0] != g:
            sys.exit(f"make_golden: {name}: llama.cpp's greedy run and its teacher-forced run disagree at step {j}")
    stored = stored_positions(n, ref.n_vocab)

    base = os.path.join(golden_dir(order_of(system_info()[1])), f"logits-{name}")
    # the GPU split's tolerance is seam's measurement, not llama.cpp's: kept
    # as tools/split_tolerances.py wrote it
    kept = [l for l in open(base + ".txt") if l.startswith(("split_tol ", "# split_tol:"))] \
        if os.path.exists(base + ".txt") else []
    logits[stored].astype("<f4").tofile(base + ".f32")
    g = "{:.9g}"
    with open(base + ".txt", "w") as f:
        f.write(f"# golden logits of llama.cpp for {name}; written by tools/make_golden.py (format in its header)\n")
        if len(stored) < n:
            f.write(f"# full logits at {len(stored)} of the {n} prompt positions only (MAX_STORED_BYTES)\n")
        reference, info = system_info()
        f.write(f"reference {reference}\n")
        f.write(f"system_info {info}\n")
        f.write(f"model {model_line}\n")
        f.write(f"sha256 {sha256(gguf)}\n")
        f.writelines(kept)
        if cache != "f16":
            f.write(f"cache {cache} {cache}\n")
        f.write(f"n_vocab {ref.n_vocab}\n")
        f.write(fmt_list("tokens", tokens))
        f.write(fmt_list("top1", [t for t, _ in tops[:n]]))
        f.write(fmt_list("margin", [m for _, m in tops[:n]], g))
        f.write(fmt_list("std", stds[:n], g))
        f.write(fmt_list("stored", stored))
        f.write(fmt_list("greedy", greedy))
        f.write(fmt_list("greedy_margin", [m for _, m in tops[n - 1:]], g))
        f.write(fmt_list("greedy_std", stds[n - 1:], g))
    size = os.path.getsize(base + ".f32") + os.path.getsize(base + ".txt")
    print(f"make_golden: {name}: {n} tokens, {len(stored)} positions of {ref.n_vocab} logits stored, "
          f"{size / 1024:.0f} KiB")


def synthesise(shape, out):
    """build/seam-synth SHAPE -o OUT, SHAPE relative to the source root."""
    subprocess.run([SYNTH, os.path.join(ROOT, shape), "-o", out], check=True, stderr=subprocess.DEVNULL)


def relative(path):
    """PATH relative to the source root when inside it, else absolute."""
    path = os.path.abspath(path)
    rel = os.path.relpath(path, ROOT)
    return path if rel.startswith("..") else rel


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("models", nargs="*", help="more GGUF files to make fixtures for")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--force", action="store_true",
                    help="write fixtures even when this build differs from the one the fixtures record")
    ap.add_argument("--check-build", action="store_true",
                    help="only compare this build with the fixtures' (exit 1 when they differ)")
    a = ap.parse_args()
    mismatch = build_mismatch()
    if a.check_build:
        if mismatch:
            sys.exit(mismatch + ".")
        print(f"make_golden: this build ({system_info()[0]}) is the one the {order_of(system_info()[1])} "
              "fixtures record")
        return
    if mismatch and not a.force:
        sys.exit(mismatch + ", or pass --force to write fixtures from this build anyway.")
    if mismatch:
        print(mismatch + "; --force: writing fixtures from this build anyway.", file=sys.stderr)
    if not os.access(SYNTH, os.X_OK):
        sys.exit(f"make_golden: {SYNTH} is missing; run scripts/build.sh first")
    os.makedirs(golden_dir(order_of(system_info()[1])), exist_ok=True)

    with tempfile.TemporaryDirectory() as tmp:
        for shape, n_tokens in SHAPES.items():
            name = os.path.splitext(os.path.basename(shape))[0]
            gguf = os.path.join(tmp, name + ".gguf")
            synthesise(shape, gguf)
            write_fixture(name, f"synth {shape}", gguf, n_tokens, a.threads)
            write_fixture(f"{name}-q8_0", f"synth {shape}", gguf, n_tokens, a.threads, "q8_0")

    real = [os.path.join(ROOT, DEFAULT_MODEL)] if os.path.exists(os.path.join(ROOT, DEFAULT_MODEL)) else []
    if not real:
        print(f"make_golden: {DEFAULT_MODEL} is not installed (models/get-default-model.sh); its fixture is kept")
    for path in real + a.models:
        if not os.path.exists(path):
            sys.exit(f"make_golden: {path}: no such file")
        name = os.path.basename(path)
        name = name[:-5] if name.endswith(".gguf") else name
        for k, text in enumerate(PROMPTS, 1):
            write_fixture(f"{name}-{k}", f"file {relative(path)}", path, text, a.threads)
        write_fixture(f"{name}-1-q8_0", f"file {relative(path)}", path, PROMPTS[0], a.threads, "q8_0")


if __name__ == "__main__":
    main()
