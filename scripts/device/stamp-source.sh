#!/usr/bin/env bash
# Runs HERE, right before a device call: writes the working tree's version (git describe --always
# --dirty) into .device/source-version.txt (git-ignored; pass `.device` in the run's carry). The
# GPU machine's copy may have no .git, or one of another commit; its build reads the version from
# there first (cmake/SourceVersion.cmake), so `oscar --version` and every JSON result of that build
# name the commit they ran. Delete .device when the device work is done.
set -euo pipefail
cd "$(dirname "$0")/../.."
mkdir -p .device
git describe --always --dirty --abbrev=7 >.device/source-version.txt
echo "stamped $(cat .device/source-version.txt)"
