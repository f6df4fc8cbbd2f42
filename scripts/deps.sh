#!/usr/bin/env bash
# Installs what seam needs to build and test, on a fresh Debian machine.
# Re-running is cheap: packages already present are skipped. tools/plot.py
# draws with Debian's python3-matplotlib: the same apt step as the rest, no
# virtual environment to keep (the plot test runs in CI; so does the KV
# state test, on the numpy it brings, named here too). No BLAS: seam's
# own tiles beat OpenBLAS's sgemm on its prefill (bench/results/
# 2026-12-01-prefill.md); `apt-get install libopenblas-dev` only to
# re-measure that with seam-blas-probe, which the build then adds.
# libboost-context-dev: the fibers of the emulated CUDA device
# (scripts/emulate.sh), one per thread of a kernel's block. chromium: the
# browser the report page (tools/report.py) is tested in, headless.
#
# SEAM_APT_WAIT=SECONDS (default 300): how long to wait while another
# package manager (an unattended upgrade, on a fresh machine) holds apt's locks.
set -euo pipefail
PACKAGES=(build-essential cmake ninja-build pkg-config libcriterion-dev libutf8proc-dev libboost-context-dev python3 python3-venv python3-matplotlib python3-numpy chromium)
WAIT="${SEAM_APT_WAIT:-300}"
SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO=sudo

# apt-get "$@", quietly, retried every 5 s for up to $WAIT s while another
# process holds apt's lock. apt's own DPkg::Lock::Timeout would not do: it
# covers the dpkg lock of `install`, but `apt-get update` fails at once on
# the package lists' lock (apt 2.6), so one loop waits for either.
apt_get() {
  local deadline=$((SECONDS + WAIT)) err said=""
  while ! err=$($SUDO env DEBIAN_FRONTEND=noninteractive apt-get -qq "$@" 2>&1 >/dev/null); do
    local holder
    holder=$(grep -m1 -o "Could not get lock.*" <<<"$err") || { printf '%s\n' "$err" >&2; return 1; }
    if [ "$SECONDS" -ge "$deadline" ]; then
      echo "seam: apt-get $1: still locked after ${WAIT}s: $holder" >&2
      echo "seam: let that process finish (or stop it) and run this again; SEAM_APT_WAIT=SECONDS waits longer" >&2
      return 1
    fi
    [ -n "$said" ] || echo "seam: apt-get $1 waits (up to ${WAIT}s) for another package manager: $holder" >&2
    said=1
    sleep 5
  done
  [ -z "$err" ] || printf '%s\n' "$err" >&2  # warnings
}

missing=()
for p in "${PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "seam: installing ${missing[*]}" >&2
  apt_get update
  apt_get install -y "${missing[@]}"
fi
