"""seam_json.py -- seam's JSON outputs read from Python, for the bench scripts:
`seam bench -o json` rows and `seam plan --hw --json -` predictions."""
import json
import subprocess


def _run(cmd, what, timeout):
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    if p.returncode:
        raise RuntimeError(f"{what} failed ({p.returncode}): {' '.join(cmd)}\n{(p.stdout + p.stderr)[-2000:]}")
    return p.stdout


def bench(seam, model, args, timeout=1800):
    """The rows of `seam bench -m MODEL ARGS -o json` (one per test: n_gen, n_depth, avg_ts, samples_ts, ...)."""
    out = _run([seam, "bench", "-m", model, *args, "-o", "json"], "seam bench", timeout)
    return json.loads(out[out.index("["):out.rindex("]") + 1])


def plan(seam, model, args, timeout=600):
    """`seam plan -m MODEL ARGS --json -`: {model, hw, profile (the profile's values), n_ctx, predictions}."""
    return json.loads(_run([seam, "plan", "-m", model, *args, "--json", "-"], "seam plan", timeout))
