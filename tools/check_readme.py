#!/usr/bin/env python3
"""Checks that the figures the documentation quotes come out of the commands
it shows.

A Markdown file tags a figure's command with an HTML comment, which renders
as nothing:

    <!-- check: plan --shape models/qwen3-30b-a3b.shape --fit --hw rtx3060-seed | 31.62 | 1.31x -->

The words before the first '|' are seam's arguments, run from the
repository's root; each field after it is a figure. A figure passes when the
command's output (stdout and stderr) holds a number that rounds to it at the
figure's precision ('28.6' takes 28.59; a trailing 'x' or '%' is dropped),
and when the text the tag closes -- from the heading above it to the tag --
quotes it as written. So a change to the speed model or a profile that moves
a figure fails here until the text says the new figure, and a figure edited
in the text alone fails too.

    check_readme.py --seam build/seam README.md docs/planning.md
    check_readme.py --seam build/seam --self-test README.md
"""
import argparse
import os
import re
import shlex
import subprocess
import sys
import tempfile

TAG = re.compile(r"<!-- check: (.*?) -->")
NUMBER = re.compile(r"-?\d+(?:\.\d+)?")
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def tags(text):
    """Each tag as (line number, arguments, figures, the text it closes)."""
    out, section = [], []
    for no, line in enumerate(text.splitlines(), 1):
        m = TAG.search(line)
        if m:
            args, *figures = [f.strip() for f in m.group(1).split("|")]
            out.append((no, args, figures, "\n".join(section)))
            continue
        if line.startswith("#"):
            section = []
        section.append(line)
    return out


def in_output(figure, output):
    value = figure.rstrip("x%")
    decimals = len(value.split(".")[1]) if "." in value else 0
    want = float(value)
    return any(round(float(n), decimals) == want for n in NUMBER.findall(output))


def check_file(path, seam, cache):
    """The failures of one file's tags, as messages."""
    with open(path, encoding="utf-8") as f:
        text = f.read()
    failures = []
    found = tags(text)
    for no, args, figures, section in found:
        if args not in cache:
            run = subprocess.run([seam] + shlex.split(args), cwd=ROOT, capture_output=True, text=True, timeout=300)
            cache[args] = (run.returncode, run.stdout + run.stderr)
        rc, output = cache[args]
        where = f"{path}:{no}: seam {args}"
        if rc != 0:
            failures.append(f"{where}: exited {rc}:\n{output}")
            continue
        if not figures:
            failures.append(f"{where}: the tag names no figure")
        for fig in figures:
            if not NUMBER.fullmatch(fig.rstrip("x%")):
                failures.append(f"{where}: '{fig}' is not a figure")
            elif not in_output(fig, output):
                failures.append(f"{where}: the output has no {fig}:\n{output}")
            elif not re.search(r"(?<![\d.])" + re.escape(fig) + r"(?![\d])", section):
                failures.append(f"{where}: the text above the tag does not quote {fig}")
    return found, failures


def self_test(path, seam):
    """The checker fails when a quoted figure changes in the text alone, and
    when a tag asks for a figure the command does not print."""
    with open(path, encoding="utf-8") as f:
        text = f.read()
    found = tags(text)
    assert found, f"{path} has no check tags"
    no, args, figures, section = found[0]
    fig = next(f for f in figures if "." in f)
    lines = text.splitlines()
    # the figure edited where the text quotes it, above the first tag
    quoted = max(i for i in range(no - 1) if fig in lines[i])
    bumped = fig[:-1] + str((int(fig[-2] if fig[-1] in "x%" else fig[-1]) + 1) % 10)
    cases = {
        "the text's figure changed": lines[:quoted] + [lines[quoted].replace(fig, "9" + fig)] + lines[quoted + 1:],
        "the tag's figure changed": lines[:no - 1] + [lines[no - 1].replace(f"| {fig}", f"| {bumped}", 1)] + lines[no:],
    }
    for what, changed in cases.items():
        with tempfile.NamedTemporaryFile("w", suffix=".md", delete=False) as tmp:
            tmp.write("\n".join(changed) + "\n")
        try:
            _, failures = check_file(tmp.name, seam, {})
        finally:
            os.unlink(tmp.name)
        if not failures:
            print(f"self-test: {what} ({fig}) was not caught", file=sys.stderr)
            return 1
        print(f"self-test: {what} ({fig}) caught: {failures[0].splitlines()[0]}")
    return 0


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seam", required=True, help="the seam executable")
    ap.add_argument("--self-test", action="store_true", help="check that changed figures fail")
    ap.add_argument("files", nargs="+")
    a = ap.parse_args()
    seam = os.path.abspath(a.seam)
    if a.self_test:
        return self_test(a.files[0], seam)
    cache, failures, count = {}, [], 0
    for path in a.files:
        found, fails = check_file(path, seam, cache)
        count += sum(len(f[2]) for f in found)
        failures += fails
    for f in failures:
        print(f, file=sys.stderr)
    print(f"check_readme: {count} figures in {len(a.files)} files, {len(failures)} failures")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
