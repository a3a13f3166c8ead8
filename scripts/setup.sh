#!/usr/bin/env bash
# First-time setup on Debian 12: installs the packages oscar builds with (through sudo unless run
# as root, as in a container or a CI image where sudo is absent), then builds the release tree in
# build/ with the flags scripts/test.sh uses, so that the test command only builds what changed.
set -euo pipefail
cd "$(dirname "$0")/.."

packages=(build-essential cmake libeigen3-dev nlohmann-json3-dev libcli11-dev libfmt-dev
          libcpp-httplib-dev libgtest-dev libgmock-dev libbenchmark-dev liblzma-dev libzip-dev clang-format)
as_root=()
if [[ $(id -u) -ne 0 ]]; then
  if ! command -v sudo >/dev/null; then
    echo "scripts/setup.sh: installing packages needs root: run it as root, or install sudo" >&2
    exit 1
  fi
  as_root=(sudo)
fi
# A fresh image has no package lists until the first update.
"${as_root[@]}" apt-get update
"${as_root[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y "${packages[@]}"

cmake -S . -B build -DCMAKE_BUILD_TYPE=Release -DOSCAR_WERROR=ON
cmake --build build -j"$(nproc)"
