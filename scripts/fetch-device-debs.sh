#!/usr/bin/env bash
# fetch-device-debs.sh — downloads (here, where the registries are) the Debian
# packages the lent GPU machine lacks and cannot fetch: Criterion, to build
# and run the test suite, and utf8proc, which seam itself links. They land in
# .device-debs/ (ignored by git); name it in the device run's `carry`, and
# bench/gpu-check.sh unpacks them into a private prefix there.
#
# What is carried: libcriterion-dev (the header and libcriterion.so) and
# every shared library libcriterion.so.3 loads, to the bottom (ldd on
# Debian 12: libffi, libgit2 with its TLS -- mbedtls -- ssh2, http-parser,
# pcre2, zlib and Kerberos -- gssapi, krb5, k5crypto, krb5support, com_err,
# keyutils -- libraries, nanomsg, and OpenSSL's libcrypto under ssh2), but
# not glibc. Measured on 2026-12-01 (Debian 12, amd64): these 21 packages
# are 4.7 MB (4.48 MiB), and the working tree 13.0 MB, together 17.7 MB of
# the device tool's 64 MiB. apt's whole Depends closure of libcriterion-dev
# is 50 packages, 19.2 MB (18.3 MiB): the -dev packages of every library
# above, libc6-dev, linux-libc-dev and pkgconf, which linking against
# libcriterion.so and running the tests do not use. The carried libraries
# need glibc 2.34 or newer. The script checks that the list is closed: a
# library one of them needs that is neither carried nor glibc's fails it.
set -euo pipefail
cd "$(dirname "$0")/.."
PACKAGES=(libcriterion-dev libcriterion3 libffi8 libnanomsg5
          libgit2-1.5 libhttp-parser2.9 libmbedcrypto7 libmbedtls14 libmbedx509-1 libpcre2-8-0 libssh2-1
          libssl3 zlib1g libgssapi-krb5-2 libkrb5-3 libk5crypto3 libkrb5support0 libcom-err2 libkeyutils1
          libutf8proc2 libutf8proc-dev)
GLIBC=(libc.so.6 libm.so.6 libdl.so.2 libpthread.so.0 libresolv.so.2 librt.so.1 ld-linux-x86-64.so.2)
rm -rf .device-debs
mkdir -p .device-debs
(cd .device-debs && apt-get download "${PACKAGES[@]}" >/dev/null)

# closed: every DT_NEEDED of a carried library is carried or glibc's
unpacked=$(mktemp -d)
trap 'rm -rf "$unpacked"' EXIT
for deb in .device-debs/*.deb; do dpkg -x "$deb" "$unpacked"; done
have=$( (find "$unpacked" -name '*.so*' -printf '%f\n'; printf '%s\n' "${GLIBC[@]}") | sort -u)
needed=$(find "$unpacked" -name '*.so*' -type f -exec readelf -d {} + 2>/dev/null |
         sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p' | sort -u)
missing=$(comm -23 <(echo "$needed") <(echo "$have"))
if [ -n "$missing" ]; then
    echo "fetch-device-debs: the carried libraries also need: $(echo $missing); add their packages" >&2
    exit 1
fi
ls -1 .device-debs
echo "$(ls .device-debs | wc -l) packages, $(du -cb .device-debs/*.deb | tail -1 | cut -f1) bytes in .device-debs/"
