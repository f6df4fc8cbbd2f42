#!/usr/bin/env python3
"""test_report.py -- tools/report.py's page in a real browser.

Writes the page of the seed's model (its shape, on rtx3060-seed: the layer
split and the expert split, the article's points) and the page of the
synthetic tiny model with a run measured now (seam run --timeline), opens
each in Debian's Chromium, headless, at page.html#selftest: the page moves
its slider as a person would and titles itself "selftest: pass" only when
the tok/s text, the waterfall, the curve's marker and the memory bars all
followed. The console must stay silent (no error, no message at all). A
page whose text does not follow the slider must fail the same check.
Screenshots of the seed's page at two splits are left in OUT_DIR.

Without Chromium the test says "skipped: no chromium" and passes, unless
SEAM_REQUIRE_INPUTS=1 (test.sh, CI), where scripts/deps.sh installs it.

  python3 tests/test_report.py BUILD_DIR OUT_DIR
"""
import os
import re
import shutil
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
REPORT = os.path.join(ROOT, "tools", "report.py")


def run(argv, **kw):
    r = subprocess.run(argv, capture_output=True, text=True, errors="replace", timeout=300, **kw)
    if r.returncode != 0:
        sys.exit(f"FAIL {' '.join(argv)}:\n{r.stderr}")
    return r


def chromium_args(chromium, out_dir):
    # a profile of its own, no sandbox (CI runs as root), no GPU process
    return [chromium, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars", "--no-first-run",
            f"--user-data-dir={os.path.join(out_dir, 'chromium-profile')}", "--enable-logging=stderr", "--v=0"]


def selftest(chromium, out_dir, page):
    """The page's title after #selftest, and the console's messages."""
    r = subprocess.run(chromium_args(chromium, out_dir) + ["--dump-dom", f"file://{page}#selftest"],
                       capture_output=True, text=True, errors="replace", timeout=120)
    title = re.search(r"<title>([^<]*)</title>", r.stdout)
    console = [line for line in r.stderr.splitlines() if ":CONSOLE" in line]
    return (title.group(1) if title else f"(no page: status {r.returncode})"), console


def main():
    build, out_dir = sys.argv[1], os.path.abspath(sys.argv[2])
    os.makedirs(out_dir, exist_ok=True)
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    if not chromium:
        if os.environ.get("SEAM_REQUIRE_INPUTS") == "1":
            sys.exit("FAIL: no chromium, which SEAM_REQUIRE_INPUTS=1 requires (scripts/deps.sh installs it)")
        print("test_report: skipped: no chromium (apt-get install chromium)")
        return 0
    seam = os.path.join(build, "seam")
    shape = os.path.join(ROOT, "models", "qwen3-30b-a3b.shape")
    layers, experts = os.path.join(out_dir, "seed-layers.json"), os.path.join(out_dir, "seed-experts.json")
    run([seam, "plan", "--shape", shape, "-ngl", "0-48", "--hw", "rtx3060-seed", "-c", "128", "--json", layers])
    run([seam, "plan", "--shape", shape, "-ngl", "48", "--n-cpu-moe", "0-48", "--hw", "rtx3060-seed", "-c", "128",
         "--json", experts])
    seed = os.path.join(out_dir, "seed.html")
    run([sys.executable, REPORT, "--pred", layers, "--experts", experts, "--points",
         "seed article:48=93.9,44=46.3,20=24.2", "-o", seed])
    # the tiny model measured now beside its prediction on this machine's CPU
    tiny, timeline = os.path.join(out_dir, "tiny.gguf"), os.path.join(out_dir, "tiny-timeline.json")
    tiny_pred = os.path.join(out_dir, "tiny-layers.json")
    run([os.path.join(build, "seam-synth"), os.path.join(ROOT, "models", "tiny.shape"), "-o", tiny])
    run([seam, "run", "-m", tiny, "--tokens", "1,2,3", "-n", "8", "-t", "1", "--timeline", timeline, "-q"])
    run([seam, "plan", "-m", tiny, "-ngl", "0-4", "--hw", "rtx4090", "--json", tiny_pred])
    measured = os.path.join(out_dir, "tiny.html")
    run([sys.executable, REPORT, "--pred", tiny_pred, "--timeline", timeline, "-o", measured])

    failed = 0
    for page in (seed, measured):
        title, console = selftest(chromium, out_dir, page)
        ok = title == "selftest: pass" and not console
        failed += not ok
        print(f"{'ok  ' if ok else 'FAIL'} {os.path.basename(page)}: {title}" +
              "".join(f"\n  console: {line}" for line in console))
    # a page whose tok/s text stays put must not pass
    with open(seed) as f:
        page = f.read()
    stuck = os.path.join(out_dir, "stuck.html")
    with open(stuck, "w") as f:
        f.write(page.replace('$("speed").textContent =', '$("speed").textContent = "? tok/s predicted" ||', 1))
    title, _ = selftest(chromium, out_dir, stuck)
    bad = not title.startswith("selftest: FAIL") or "tok/s text" not in title
    failed += bad
    print(f"{'FAIL' if bad else 'ok  '} a page whose text does not follow the slider: {title}")
    for ngl in (48, 44):
        shot = os.path.join(out_dir, f"report-seed-{ngl}.png")
        subprocess.run(chromium_args(chromium, out_dir) + [f"--screenshot={shot}", "--window-size=1000,1250",
                                                           f"file://{seed}#ngl={ngl}"],
                       capture_output=True, timeout=120)
        if not os.path.exists(shot) or open(shot, "rb").read(8) != b"\x89PNG\r\n\x1a\n":
            print(f"FAIL no screenshot at -ngl {ngl}")
            failed += 1
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
