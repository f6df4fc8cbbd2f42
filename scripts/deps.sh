#!/usr/bin/env bash
# Installs what seam needs to build and test, on a fresh Debian machine.
# Re-running is cheap: packages already present are skipped.
set -euo pipefail
PACKAGES=(build-essential cmake ninja-build pkg-config libcriterion-dev libopenblas-dev libutf8proc-dev python3 python3-venv)
missing=()
for p in "${PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "seam: installing ${missing[*]}" >&2
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO=sudo
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${missing[@]}" >/dev/null
fi
