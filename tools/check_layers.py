#!/usr/bin/env python3
"""The layering rule of src/: a folder includes only itself and the folders
below it, and no two files (a .c with its .h) include each other, directly
or round a longer loop. Prints each breach; exits 1 if there is one.

    tools/check_layers.py [ROOT]
"""
import os
import re
import sys

# Bottom to top: each folder may include the ones before it.
FLOORS = ["base", "format", "numeric", "text", "model", "cpu", "kernels", "gpu", "engine", "plan", "cli"]


def folder(path):
    parts = path.split("/")
    return parts[1] if parts[0] == "src" else parts[0]


def main():
    root = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "..")
    os.chdir(root)
    files = []
    for top in ("src", "kernels"):
        for dirpath, _, names in os.walk(top):
            files += [os.path.join(dirpath, n) for n in names if n.endswith((".c", ".h", ".cu", ".cuh"))]
    breaches = []
    # A header without a .c that declares no functions (types, constants,
    # static inline helpers) is part of whoever includes it, not a module.
    transparent = {os.path.splitext(f)[0] for f in files if f.endswith((".h", ".cuh"))
                   and not os.path.exists(os.path.splitext(f)[0] + ".c")
                   and not re.search(r"^(?!static|#|\s)[A-Za-z_][\w \*]*\([^;{]*\);", open(f).read(), re.M)}
    edges = {}  # module (path without extension) -> modules it includes
    for f in sorted(files):
        me = folder(f)
        if me not in FLOORS:
            breaches.append(f"{f}: folder {me} is not on a floor (tools/check_layers.py FLOORS)")
            continue
        module = os.path.splitext(f)[0]
        for inc in re.findall(r'^#include "([^"]+)"', open(f).read(), re.M):
            target = inc if inc.startswith(("src/", "kernels/")) else ("src/" + inc if "/" in inc else None)
            if target is None:  # a bare name: the kernels' own headers, or the emulator's
                local = os.path.join(os.path.dirname(f), inc)
                if not os.path.exists(local):
                    continue
                target = local
            theirs = folder(target)
            if theirs in FLOORS and FLOORS.index(theirs) > FLOORS.index(me):
                breaches.append(f"{f}: includes {inc}, a floor above ({theirs} over {me})")
            other = os.path.splitext(target)[0]
            if other != module and other not in transparent and module not in transparent:
                edges.setdefault(module, set()).add(other)
    # loops between modules: a depth-first search for a back edge
    state, stack = {}, []

    def visit(m):
        state[m] = 1
        stack.append(m)
        for n in sorted(edges.get(m, ())):
            if state.get(n) == 1:
                breaches.append("a loop: " + " -> ".join(stack[stack.index(n):] + [n]))
            elif n not in state:
                visit(n)
        stack.pop()
        state[m] = 2

    for m in sorted(edges):
        if m not in state:
            visit(m)
    for b in breaches:
        print(b)
    print(f"check_layers: {len(files)} files, {sum(map(len, edges.values()))} includes between modules, "
          f"{len(breaches)} breaches")
    return 1 if breaches else 0


if __name__ == "__main__":
    sys.exit(main())
