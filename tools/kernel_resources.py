#!/usr/bin/env python3
"""kernel_resources.py — what each CUDA kernel of kernels/ takes of a GPU, as
nvcc compiles it, and whether that fits.

  python3 tools/kernel_resources.py [--nvcc PATH] [--arch sm_86,sm_90] [--emit FILE.inc] [--quiet]

For each architecture, each kernels/*.cu is compiled by nvcc with ptxas's
report (-Xptxas -v: registers, static shared memory, stack frame, spill
stores and loads of every entry) and to PTX (each entry's .maxntid, its
__launch_bounds__). A kernel fails when it spills or keeps a stack frame
(local memory: a slow kernel, usually by accident; STACK_ALLOWED names the
frames that are CUDA's own, on a path seam does not take), when its registers
times its largest block (its launch bound, or 1024 without one) pass the
65536 registers a multiprocessor has (a launch of that block would fail
with cudaErrorLaunchOutOfResources), or when its static shared memory
passes 48 KiB (what a block has without opting in). The exit status is 1
then. The table goes to stdout.

--emit writes, for the emulated device (the SEAM_CUDA_EMU build), a C++
table of each entry's mangled name, launch bound, registers and static
shared memory at the first architecture: the emulator faults on a launch
past a kernel's bound or its registers, and reports its real static shared
size (emu/device.cpp).
"""
import argparse
import glob
import os
import re
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
REGISTERS_PER_SM = 65536
STATIC_SHARED = 48 << 10
# Stack frames that are CUDA's own and taken only on a path seam does not
# reach: kernel (demangled, without its arguments) -> why.
STACK_ALLOWED = {
    "rope_kernel": "sincosf's slow argument reduction (|x| > 105615, a 32-byte local array; nvcc for sm_86 keeps "
                   "its frame): a RoPE angle passes it only past 100K positions",
}

ENTRY = re.compile(r"Compiling entry function '([^']+)' for '(sm_\d+)'")
FRAME = re.compile(r"(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads")
USED = re.compile(r"Used (\d+) registers(?:, used \d+ barriers)?(?:, (\d+) bytes smem)?")
PTX_ENTRY = re.compile(r"^\.visible \.entry (\S+)\(", re.M)
MAXNTID = re.compile(r"\.maxntid (\d+), (\d+), (\d+)")


def nvcc_of(given):
    for p in [given, os.environ.get("NVCC"), "/usr/local/cuda/bin/nvcc", "nvcc"]:
        if p and (os.path.isabs(p) and os.access(p, os.X_OK) or not os.path.isabs(p) and
                  subprocess.run(["which", p], capture_output=True).returncode == 0):
            return p
    sys.exit("kernel_resources: no nvcc (install the CUDA toolkit, or --nvcc PATH)")


def compile_one(nvcc, arch, src):
    flags = ["-arch=" + arch, "-I" + os.path.join(ROOT, "kernels"), "-I" + os.path.join(ROOT, "src"), "-std=c++17"]
    rep = subprocess.run([nvcc, *flags, "-Xptxas", "-v", "-c", src, "-o", os.devnull], capture_output=True, text=True)
    if rep.returncode:
        sys.exit(f"kernel_resources: nvcc failed on {src}:\n{rep.stderr[-3000:]}")
    ptx = subprocess.run([nvcc, *flags, "-ptx", src, "-o", "-"], capture_output=True, text=True)
    if ptx.returncode:
        sys.exit(f"kernel_resources: nvcc -ptx failed on {src}:\n{ptx.stderr[-3000:]}")
    # each entry's launch bound: the .maxntid directive between its .entry and its body
    bounds = {}
    text = ptx.stdout
    starts = [(m.start(), m.group(1)) for m in PTX_ENTRY.finditer(text)]
    for i, (at, name) in enumerate(starts):
        head = text[at:text.find("{", at)]
        m = MAXNTID.search(head)
        bounds[name] = int(m.group(1)) * int(m.group(2)) * int(m.group(3)) if m else 0
    entries, cur = {}, None
    for line in rep.stderr.splitlines():
        m = ENTRY.search(line)
        if m:
            cur = m.group(1)
            entries[cur] = {"file": os.path.basename(src), "bound": bounds.get(cur, 0)}
            continue
        m = FRAME.search(line)
        if m and cur:
            entries[cur].update(stack=int(m.group(1)), spill=int(m.group(2)) + int(m.group(3)))
        m = USED.search(line)
        if m and cur:
            entries[cur].update(regs=int(m.group(1)), smem=int(m.group(2) or 0))
    return entries


def demangle(names):
    r = subprocess.run(["c++filt"], input="\n".join(names), capture_output=True, text=True)
    return r.stdout.splitlines() if r.returncode == 0 else names


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--nvcc")
    ap.add_argument("--arch", default="sm_86,sm_90")
    ap.add_argument("--emit")
    ap.add_argument("--quiet", action="store_true")
    a = ap.parse_args()
    nvcc = nvcc_of(a.nvcc)
    sources = sorted(glob.glob(os.path.join(ROOT, "kernels", "*.cu")))
    failures, first = [], None
    for arch in a.arch.split(","):
        entries = {}
        for src in sources:
            entries.update(compile_one(nvcc, arch, src))
        first = first or entries
        names = sorted(entries)
        pretty = dict(zip(names, demangle(names)))
        if not a.quiet:
            print(f"\n{arch}: {len(entries)} kernels\n")
            print("| kernel | file | launch bound | registers | registers x block | static shared | stack | spill |")
            print("|---|---|---:|---:|---:|---:|---:|---:|")
        for n in names:
            e = entries[n]
            block = e["bound"] or 1024
            regs_block = e.get("regs", 0) * block
            bad = []
            if e.get("spill", 0):
                bad.append(f"spills {e['spill']} bytes")
            base = re.sub(r"^void ", "", pretty[n]).split("(")[0].split("<")[0]
            if e.get("stack", 0) and base not in STACK_ALLOWED:
                bad.append(f"keeps a {e['stack']}-byte stack frame")
            if regs_block > REGISTERS_PER_SM:
                bad.append(f"{e.get('regs')} registers x {block} threads = {regs_block} > {REGISTERS_PER_SM}")
            if e.get("smem", 0) > STATIC_SHARED:
                bad.append(f"{e['smem']} bytes of static shared memory > {STATIC_SHARED}")
            failures += [f"{arch} {pretty[n]} ({e['file']}): {b}" for b in bad]
            if not a.quiet:
                print(f"| {pretty[n].split('(')[0]} | {e['file']} | {e['bound'] or '-'} | {e.get('regs', '?')} | "
                      f"{regs_block} | {e.get('smem', 0)} | {e.get('stack', 0)} | {e.get('spill', 0)} |")
    if a.emit:
        with open(a.emit, "w") as f:
            f.write(f"// written by tools/kernel_resources.py from nvcc -arch={a.arch.split(',')[0]}: "
                    "mangled name, launch bound (0: none), registers, static shared bytes\n")
            for n in sorted(first):
                e = first[n]
                f.write(f'{{"{n}", {e["bound"]}, {e.get("regs", 0)}, {e.get("smem", 0)}}},\n')
    for fl in failures:
        print("FAIL " + fl, file=sys.stderr)
    if failures:
        sys.exit(1)
    print(f"\nkernel_resources: every kernel fits (no spill, no stack, registers x block <= {REGISTERS_PER_SM}, "
          f"static shared <= {STATIC_SHARED} bytes)")


if __name__ == "__main__":
    main()
