#!/usr/bin/env bash
# Runs HERE (a Debian 12 machine with network), not on the GPU machine: unpacks the two build
# dependencies the GPU machine lacks (cpp-httplib's header, liblzma's headers and static library)
# into .deps/ (git-ignored, searched by CMake through CMAKE_PREFIX_PATH), to travel with
# `carry: [".deps"]`. On the GPU machine, configure with
#   -DLIBLZMA_INCLUDE_DIR=$PWD/.deps/usr/include
#   -DLIBLZMA_LIBRARY=$PWD/.deps/usr/lib/x86_64-linux-gnu/liblzma.a
# (scripts/device/gpu_check.sh does).
set -euo pipefail
cd "$(dirname "$0")/../.."
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
(cd "$work" && apt-get download libcpp-httplib-dev liblzma-dev >/dev/null)
rm -rf .deps
mkdir -p .deps
for package in "$work"/*.deb; do dpkg -x "$package" .deps; done
# Keep what the build reads; the shared-library symlinks would dangle there (only liblzma.so.5
# exists at run time), so the static library is linked instead.
rm -rf .deps/usr/share .deps/usr/lib/x86_64-linux-gnu/pkgconfig
find .deps -name '*.so' -delete
du -sh .deps
