#!/usr/bin/env bash
# Fails, naming each file and line, where a C++ or CUDA source of the repository differs from what
# Debian 12's clang-format (14) makes of it with the repository's .clang-format.
set -euo pipefail
cd "$(dirname "$0")/.."
mapfile -t sources < <(git ls-files '*.h' '*.cpp' '*.cu' '*.cuh')
clang-format --dry-run --Werror "${sources[@]}"
