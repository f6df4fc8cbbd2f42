#!/usr/bin/env bash
# setup-reference.sh — builds the reference: llama.cpp, through the pinned
# llama-cpp-python package, compiled from source by pip into a venv of its own.
#
#   tools/setup-reference.sh                      # native build into /opt/llamavenv (what the fixtures use)
#   tools/setup-reference.sh --flavor avx2 [DIR]  # AVX2-only build into /opt/llamavenv-avx2 (tools/spread.py)
#
# Flavors (the flags are written here, and nowhere else):
#   native  pip's default: no CMAKE_ARGS, so ggml builds with -march=native
#           (on an AVX-512 machine: AVX-512, VNNI, BF16, repack, llamafile;
#           on a Zen 3: AVX2, FMA, F16C). This is the build a user gets.
#   avx2    GGML_NATIVE off, AVX2/FMA/F16C/BMI2 on, AVX-512 off: the kernels
#           the native build of a machine without AVX-512 (Zen 2/3, most
#           Intel desktops) compiles, on any x86 machine with AVX2.
# seam follows both orders (src/numeric/exact.h): its AVX-512 set the
# AVX-512 build's, fixtures in tests/golden/avx512/; its AVX2 set the AVX2
# build's, fixtures in tests/golden/avx2/. Either flavor's build writes the
# fixtures of its order (tools/make_golden.py).
#
# pip caches the wheel it builds from the sdist and would reuse it whatever
# CMAKE_ARGS say, so the build runs with --no-cache-dir (and --no-binary, so
# no prebuilt wheel is taken either). numpy and gguf are pinned too: the
# fixtures' standard deviations are numpy's sums. The script ends by printing
# the version, llama.cpp's system info line (the build that ran, in its own
# words) and the compiler, which that line does not name; then which
# fixtures this build can regenerate: those of its order, where it is the
# build they record (tools/make_golden.py --check-build; only that build
# reproduces them byte for byte).
set -euo pipefail

VERSION=0.3.36
FLAVOR=native
while [ $# -gt 0 ]; do
  case "$1" in
    --flavor) FLAVOR="${2:?--flavor needs native or avx2}"; shift 2 ;;
    -h|--help) awk 'NR > 1 && !/^#/ { exit } NR > 1 { sub(/^# ?/, ""); print }' "$0"; exit 0 ;;
    -*) echo "setup-reference: unknown option $1 (see --help)" >&2; exit 2 ;;
    *) break ;;
  esac
done
case "$FLAVOR" in
  native) DEFAULT_DIR=/opt/llamavenv; CMAKE_FLAGS="" ;;
  avx2) DEFAULT_DIR=/opt/llamavenv-avx2
        CMAKE_FLAGS="-DGGML_NATIVE=OFF -DGGML_SSE42=ON -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON -DGGML_BMI2=ON -DGGML_AVX512=OFF -DGGML_AVX512_VBMI=OFF -DGGML_AVX512_VNNI=OFF -DGGML_AVX512_BF16=OFF -DGGML_AVX_VNNI=OFF" ;;
  *) echo "setup-reference: unknown flavor '$FLAVOR' (native or avx2)" >&2; exit 2 ;;
esac
VENV="${1:-$DEFAULT_DIR}"

cd "$(dirname "$0")/.."
scripts/deps.sh  # compilers, cmake, python3-venv

if [ ! -x "$VENV/bin/python" ]; then
  echo "setup-reference: creating the venv $VENV" >&2
  python3 -m venv "$VENV"
fi
echo "setup-reference: building llama-cpp-python $VERSION ($FLAVOR: CMAKE_ARGS='$CMAKE_FLAGS') from source;" \
     "this takes about 10 minutes on 2 cores" >&2
"$VENV/bin/pip" install -q --no-cache-dir numpy==2.4.6 gguf==0.19.0
CMAKE_ARGS="$CMAKE_FLAGS" CMAKE_BUILD_PARALLEL_LEVEL="$(nproc)" \
  "$VENV/bin/pip" install --no-cache-dir --no-binary llama-cpp-python --force-reinstall --no-deps \
  "llama-cpp-python==$VERSION"
"$VENV/bin/pip" install -q --no-cache-dir "llama-cpp-python==$VERSION"  # its own dependencies, if missing
"$VENV/bin/python" tools/ref_logits.py --system-info
echo "compiler: $(cc --version | head -1)"
if "$VENV/bin/python" tools/make_golden.py --check-build; then
  echo "setup-reference: $VENV/bin/python tools/make_golden.py regenerates those fixtures" >&2
else
  echo "setup-reference: the reference is built, but it is not the build the fixtures of its order record:" \
       "it cannot regenerate them byte for byte (see above)" >&2
fi
