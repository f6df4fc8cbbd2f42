#!/usr/bin/env python3
"""make_golden.py — regenerates the golden-logit fixtures of tests/test_golden.c.

  /opt/llamavenv/bin/python tools/make_golden.py [MODEL.gguf ...]

Run it with the Python that has llama-cpp-python (the reference, see
tools/ref_logits.py), after scripts/build.sh (it needs build/seam-synth).

Models, each giving fixtures named after it:
  - the synthetic models of SHAPES, synthesised by build/seam-synth into a
    temporary folder; the prompt is a fixed list of 32 token ids;
  - the default real model, models/gemma-3-270m-q4_k_m.gguf, when it is
    installed (models/get-default-model.sh); if it is not, its old fixtures
    are left as they are;
  - every GGUF named on the command line.
  A real model gets one fixture per text of PROMPTS (NAME-1, NAME-2, ...),
  tokenised by llama.cpp (with BOS as the file says).

llama.cpp runs on its plain CPU path (no repacking, no AMX, no flash
attention, f16 KV cache), one token at a time, as seam does. Its greedy
continuation of GREEDY tokens is recorded; the logits along it are the
teacher-forced logits of prompt + continuation, so each step's margin is
known too.

Fixture format: two files per model in tests/golden/.

logits-NAME.txt, text; '#' lines are comments; every other line is a key and
its values, separated by single spaces; a list starts with its length:
  model synth models/tiny.shape   how to get the model: "synth SHAPE" (made by
                                  seam-synth from the shape file) or
                                  "file PATH"; paths relative to the source
                                  root unless absolute
  sha256 HEX                      SHA-256 of the GGUF file
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
from ref_logits import Reference, sha256  # noqa: E402

GOLDEN = os.path.join(ROOT, "tests", "golden")
SYNTH = os.path.join(ROOT, "build", "seam-synth")
SHAPES = ["models/tiny.shape", "models/small.shape", "models/moe-small.shape"]
DEFAULT_MODEL = "models/gemma-3-270m-q4_k_m.gguf"
N_SYNTH_TOKENS = 32
SYNTH_SEED = 20240601  # the synthetic prompt: N_SYNTH_TOKENS ids drawn by random.Random(SYNTH_SEED)
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


def write_fixture(name, model_line, gguf, text, threads):
    """Writes logits-NAME.{txt,f32}; the prompt is `text`, or SYNTH_SEED's tokens when None."""
    ref = Reference(gguf, N_CTX, threads)
    if text is None:
        r = random.Random(SYNTH_SEED)
        tokens = [r.randrange(ref.n_vocab) for _ in range(N_SYNTH_TOKENS)]
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

    base = os.path.join(GOLDEN, f"logits-{name}")
    logits[stored].astype("<f4").tofile(base + ".f32")
    g = "{:.9g}"
    with open(base + ".txt", "w") as f:
        f.write(f"# golden logits of llama.cpp for {name}; written by tools/make_golden.py (format in its header)\n")
        if len(stored) < n:
            f.write(f"# full logits at {len(stored)} of the {n} prompt positions only (MAX_STORED_BYTES)\n")
        f.write(f"model {model_line}\n")
        f.write(f"sha256 {sha256(gguf)}\n")
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


def relative(path):
    """PATH relative to the source root when inside it, else absolute."""
    path = os.path.abspath(path)
    rel = os.path.relpath(path, ROOT)
    return path if rel.startswith("..") else rel


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("models", nargs="*", help="more GGUF files to make fixtures for")
    ap.add_argument("--threads", type=int, default=2)
    a = ap.parse_args()
    if not os.access(SYNTH, os.X_OK):
        sys.exit(f"make_golden: {SYNTH} is missing; run scripts/build.sh first")
    os.makedirs(GOLDEN, exist_ok=True)

    with tempfile.TemporaryDirectory() as tmp:
        for shape in SHAPES:
            name = os.path.splitext(os.path.basename(shape))[0]
            gguf = os.path.join(tmp, name + ".gguf")
            subprocess.run([SYNTH, os.path.join(ROOT, shape), "-o", gguf], check=True, stderr=subprocess.DEVNULL)
            write_fixture(name, f"synth {shape}", gguf, None, a.threads)

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


if __name__ == "__main__":
    main()
