#!/usr/bin/env python3
"""check_links.py -- the README and docs/ stand alone in a clone.

Every relative link ([text](path) or [text](path#anchor)) and every
backquoted path that names a file of this repository (`docs/x.md`,
`models/hw/h200.hw`, `bench/seed_check.py`) must exist in the tree, and no
text may point outside it (`../`): a clone has nothing there.

  python3 tools/check_links.py [ROOT]
"""
import os
import re
import sys

ROOT = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), ".."))
LINK = re.compile(r"\]\(([^)\s]+)\)")
# a backquoted word that looks like a path into one of the tree's folders
CODE_PATH = re.compile(r"`((?:docs|models|bench|tools|tests|scripts|src|kernels)/[A-Za-z0-9_./-]+)`")


def problems(path):
    text = open(path, encoding="utf-8").read()
    here = os.path.dirname(path)
    for n, line in enumerate(text.splitlines(), 1):
        where = f"{os.path.relpath(path, ROOT)}:{n}"
        for target in re.findall(r"`(\.\./[^`\s]*)`", line) + [t for t in LINK.findall(line) if t.startswith("../")]:
            if not os.path.normpath(os.path.join(here, target)).startswith(ROOT + os.sep):
                yield f"{where}: points outside the repository, which a clone does not have: {target}"
        for target in LINK.findall(line):
            if re.match(r"[a-z]+:", target) or target.startswith("#"):
                continue  # a web address or an anchor of this page
            file = target.split("#")[0]
            if not os.path.exists(os.path.normpath(os.path.join(here, file))):
                yield f"{where}: link to a missing file: {target}"
        for target in CODE_PATH.findall(line):
            if any(c in target for c in "*?") or target.endswith("/"):
                continue
            if not os.path.exists(os.path.join(ROOT, target)):
                yield f"{where}: names a missing file: {target}"


def main():
    pages = [os.path.join(ROOT, "README.md")] + sorted(
        os.path.join(ROOT, "docs", f) for f in os.listdir(os.path.join(ROOT, "docs")) if f.endswith(".md"))
    found = [p for page in pages for p in problems(page)]
    for p in found:
        print(p)
    print(f"check_links: {len(pages)} pages, {len(found)} problems")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
