#!/usr/bin/env bash
# Builds (incrementally) and runs the test suite: the release build with every test, then an
# AddressSanitizer + UndefinedBehaviorSanitizer build of the same tests (CPU only) but the slowest
# accuracy checks.
set -euo pipefail
cd "$(dirname "$0")/.."
jobs=$(nproc)

cmake -S . -B build -DCMAKE_BUILD_TYPE=Release -DOSCAR_WERROR=ON >/dev/null
cmake --build build -j"$jobs"
ctest --test-dir build --output-on-failure -j"$jobs" --timeout 600

# -O1 with line tables only: the sanitizers' reports keep file and line, and the build takes half
# the time of -O2 with full debug information.
cmake -S . -B build-sanitize -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O1 -g1 -DNDEBUG" \
      -DOSCAR_SANITIZE=ON -DOSCAR_CUDA=OFF -DOSCAR_BENCHMARKS=OFF -DOSCAR_WERROR=ON >/dev/null
cmake --build build-sanitize -j"$jobs"
# The whole-run accuracy checks (perplexities and needles through the CLI, the logits against
# transformers', calibration against Hadamard) run in the release stage only: under the sanitizers
# they took half of this stage's time; the model, caches and calibration code they run is run here
# by smaller tests.
accuracy_only='^(EvalCommand\.|KvDtypes/CpuReferenceLogits\.|Calibrate\.(IsDeterministicAndOrthogonal|BeatsHadamardOnHeldOutLogits)$)'
ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
  ctest --test-dir build-sanitize --output-on-failure -j"$jobs" --timeout 1200 -E "$accuracy_only"
