#!/usr/bin/env bash
# Runs on the GPU machine: configures a release build in $1 (default build-gpu) with the
# dependencies unpacked into .deps/ by prepare-deps.sh.
set -euo pipefail
cd "$(dirname "$0")/../.."
build=${1:-build-gpu}
shift || true
export PKG_CONFIG_PATH="$PWD/.deps/usr/lib/x86_64-linux-gnu/pkgconfig${PKG_CONFIG_PATH:+:$PKG_CONFIG_PATH}"
cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Release -DOSCAR_CUDA=ON \
  -DLIBLZMA_INCLUDE_DIR="$PWD/.deps/usr/include" \
  -DLIBLZMA_LIBRARY="$PWD/.deps/usr/lib/x86_64-linux-gnu/liblzma.a" \
  -DCMAKE_CXX_FLAGS="-idirafter $PWD/.deps/usr/include/x86_64-linux-gnu" "$@"
