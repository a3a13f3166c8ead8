#!/usr/bin/env bash
# Builds (incrementally) and runs the test suite: the formatting check, the release build with every
# test, then an AddressSanitizer + UndefinedBehaviorSanitizer build (CPU only) running the unit and
# server tests (ctest labels, CONTRIBUTING.md): the whole-model tests run in the release build only.
set -euo pipefail
cd "$(dirname "$0")/.."
jobs=$(nproc)

scripts/check_format.sh

cmake -S . -B build -DCMAKE_BUILD_TYPE=Release -DOSCAR_WERROR=ON >/dev/null
cmake --build build -j"$jobs"
ctest --test-dir build --output-on-failure -j"$jobs" --timeout 600

# -O1 with line tables only: the sanitizers' reports keep file and line, and the build takes half
# the time of -O2 with full debug information. Without the oscar program (src/cli): its commands'
# tests are whole-model tests, and the release stage runs its helpers' unit tests.
cmake -S . -B build-sanitize -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O1 -g1 -DNDEBUG" \
      -DOSCAR_SANITIZE=ON -DOSCAR_CUDA=OFF -DOSCAR_BENCHMARKS=OFF -DOSCAR_PROGRAM=OFF -DOSCAR_WERROR=ON >/dev/null
cmake --build build-sanitize -j"$jobs"
# The whole-model tests (label `model`: perplexities, needles, logits against transformers',
# calibration, the engine's batches over the testbed) take minutes each under the sanitizers on two
# cores; the code they run is run here by the unit tests of each piece.
ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
  ctest --test-dir build-sanitize --output-on-failure -j"$jobs" --timeout 1200 -L '^(unit|server)$'
