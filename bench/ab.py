#!/usr/bin/env python3
"""ab.py -- two or more seam builds against each other on one `seam bench` test.

  python3 bench/ab.py [--rounds 4] BUILD_A BUILD_B [...] -- -m MODEL [seam bench flags]

e.g. the build before a change against the build after it, decode at 4K:

  /work/bin/seam-quiet python3 bench/ab.py /tmp/base/seam build/seam -- \\
      -m models/qwen3-0.6b.gguf -p 0 -n 16 -d 4096 -t 2 -r 3

Each round runs every build's `seam bench ... -o json` once (one process:
a warm-up and -r measured runs, their median) in an order reversed every round, so
that a slow spell of a shared machine and whatever the first process pays
(the model's pages, a cold cache) fall on every build alike. It prints each
build's runs (the median of each `seam bench` call) and their median, and
every build's median against the first's. The bench flags must name one
test (one -p, -n, -d, -t ...): a comparison of two builds, not a sweep.
"""
import argparse
import os
import statistics
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import seam_json  # noqa: E402


def one_test(seam, args):
    i = args.index("-m")
    rows = seam_json.bench(seam, args[i + 1], args[:i] + args[i + 2:])
    if len(rows) != 1:
        sys.exit(f"ab.py: the flags give {len(rows)} tests; name one (one value for each of -p -n -d -t)")
    return statistics.median(rows[0]["samples_ts"])


def main():
    argv = sys.argv[1:]
    if "--" not in argv:
        if "-h" in argv or "--help" in argv:
            print(__doc__)
            return
        sys.exit("usage: ab.py [--rounds N] BUILD_A BUILD_B [...] -- -m MODEL [seam bench flags] (see --help)")
    cut = argv.index("--")
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=4)
    ap.add_argument("builds", nargs="+", help="seam executables")
    a = ap.parse_args(argv[:cut])
    bench_args = argv[cut + 1:]
    if a.rounds < 1 or len(a.builds) < 2:
        sys.exit("ab.py: needs --rounds >= 1 and at least two builds")
    if "-m" not in bench_args[:-1]:
        sys.exit("ab.py: the bench flags need -m MODEL")
    for b in a.builds:
        if not os.access(b, os.X_OK):
            sys.exit(f"ab.py: {b}: not an executable")
    runs = {b: [] for b in a.builds}
    for r in range(a.rounds):
        order = a.builds if r % 2 == 0 else a.builds[::-1]
        for b in order:
            runs[b].append(one_test(b, bench_args))
        print(f"round {r + 1}: " + "  ".join(f"{b} {runs[b][-1]:.2f}" for b in order), flush=True)
    base = statistics.median(runs[a.builds[0]])
    print(f"\nseam bench {' '.join(bench_args)}; {a.rounds} rounds, order reversed each round; tok/s")
    for b in a.builds:
        m = statistics.median(runs[b])
        print(f"  {b}: median {m:.2f} ({m / base:.3f}x the first)  runs {' '.join(f'{x:.1f}' for x in runs[b])}")


if __name__ == "__main__":
    main()
