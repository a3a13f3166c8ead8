#!/usr/bin/env bash
# Runs HERE: stages commit BASE (default HEAD) for a before/after on the GPU machine, where the
# working tree arrives without .git. Writes .device/base/ (git-ignored; pass `.device` in the run's
# carry): files/ holds BASE's version of every file that differs between BASE and the working tree,
# removed.txt the files BASE does not have, source-version.txt BASE's short hash (the base build's
# version, cmake/SourceVersion.cmake). There, bench/cuda_suite.sh builds BASE as this tree with
# those files put back (stage base-prefill).
# Usage: scripts/device/stage-base.sh [BASE]
set -euo pipefail
cd "$(dirname "$0")/../.."
base=$(git rev-parse --verify "${1:-HEAD}^{commit}")
rm -rf .device/base
mkdir -p .device/base/files
: >.device/base/removed.txt
# Changed or deleted since BASE (tracked), then files BASE lacks (added or untracked).
git diff --name-only --no-renames "$base" -- | while IFS= read -r path; do
  if git cat-file -e "$base:$path" 2>/dev/null; then
    mkdir -p ".device/base/files/$(dirname "$path")"
    git show "$base:$path" >".device/base/files/$path"
  else
    echo "$path" >>.device/base/removed.txt
  fi
done
git ls-files --others --exclude-standard >>.device/base/removed.txt
git rev-parse --short=7 "$base" >.device/base/source-version.txt
echo "staged $(git rev-parse --short "$base"): $(find .device/base/files -type f | wc -l) files put back," \
  "$(wc -l <.device/base/removed.txt) removed"
