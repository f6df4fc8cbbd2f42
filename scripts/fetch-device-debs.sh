#!/usr/bin/env bash
# fetch-device-debs.sh — downloads (here, where the registries are) the Debian
# packages the test suite needs on the lent GPU machine, which has no registry:
# Criterion and its runtime libraries, and utf8proc. They land in .device-debs/
# (ignored by git); name it in the device run's `carry`, and
# bench/gpu-check.sh unpacks them into a private prefix there.
set -euo pipefail
cd "$(dirname "$0")/.."
mkdir -p .device-debs
cd .device-debs
PACKAGES=(libcriterion3 libcriterion-dev libboxfort-dev libnanomsg5 libgit2-1.5 libhttp-parser2.9
          libmbedcrypto7 libmbedtls14 libmbedx509-1 libssh2-1 libutf8proc2 libutf8proc-dev)
apt-get download "${PACKAGES[@]}" >/dev/null
ls -1 *.deb
