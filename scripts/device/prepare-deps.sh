#!/usr/bin/env bash
# Runs HERE (a Debian 12 machine with network), not on the GPU machine: unpacks the build
# dependencies the GPU machine lacks into .deps/ (git-ignored, searched by CMake through
# CMAKE_PREFIX_PATH and pkg-config), to travel with `carry: [".deps"]`:
#   cpp-httplib (Debian builds it as a shared library) with the headers its pkg-config module
#   requires (OpenSSL, zlib, Brotli), liblzma's headers and static library, and libzip (headers,
#   its .so symlink and the run-time libzip.so.4 it points at, which the GPU machine lacks).
# The GPU machine has the run-time libraries (libssl.so.3, libz.so.1, libbrotli*.so.1,
# liblzma.so.5); libcpp-httplib.so.0.11 and libzip.so.4 come from here.
# On the GPU machine, configure with scripts/device/configure.sh.
set -euo pipefail
cd "$(dirname "$0")/../.."
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
(cd "$work" && apt-get download libcpp-httplib-dev libcpp-httplib0.11 liblzma-dev libssl-dev \
   zlib1g-dev libbrotli-dev libzip-dev libzip4 2>/dev/null)
rm -rf .deps
mkdir -p .deps
for package in "$work"/*.deb; do dpkg -x "$package" .deps; done
lib=.deps/usr/lib/x86_64-linux-gnu
# pkg-config modules relative to where they lie.
sed -i 's|^prefix=/usr$|prefix=${pcfiledir}/../../..|' "$lib"/pkgconfig/*.pc
# Development symlinks that would point at Debian's run-time files, and static libraries not
# linked, go; liblzma is linked statically (its .so symlink would dangle there); libzip.so stays, as
# its target libzip.so.4 is unpacked here too.
find "$lib" -name '*.so' ! -name 'libcpp-httplib.so' ! -name 'libzip.so' -delete
find "$lib" -name '*.a' ! -name 'liblzma.a' -delete
rm -rf .deps/usr/share
du -sh .deps
