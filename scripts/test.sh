#!/usr/bin/env bash
# Builds (incrementally) and runs the test suite: the release build with every test, then an
# AddressSanitizer + UndefinedBehaviorSanitizer build of the same tests (CPU only).
set -euo pipefail
cd "$(dirname "$0")/.."
jobs=$(nproc)

cmake -S . -B build -DCMAKE_BUILD_TYPE=Release -DOSCAR_WERROR=ON >/dev/null
cmake --build build -j"$jobs"
ctest --test-dir build --output-on-failure -j"$jobs" --timeout 600

cmake -S . -B build-sanitize -DCMAKE_BUILD_TYPE=RelWithDebInfo -DOSCAR_SANITIZE=ON -DOSCAR_CUDA=OFF \
      -DOSCAR_BENCHMARKS=OFF -DOSCAR_WERROR=ON >/dev/null
cmake --build build-sanitize -j"$jobs"
ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
  ctest --test-dir build-sanitize --output-on-failure -j"$jobs" --timeout 1200
