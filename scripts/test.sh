#!/usr/bin/env bash
# Builds the release and asan presets and runs the whole test suite in each.
# Usage: scripts/test.sh [preset ...]   (default: release asan)
set -euo pipefail
cd "$(dirname "$0")/.."
presets=("$@")
[ ${#presets[@]} -gt 0 ] || presets=(release asan)
jobs=$(nproc)
for p in "${presets[@]}"; do
  echo "== build $p"
  cmake --preset "$p" >/dev/null
  cmake --build --preset "$p" -j "$jobs"
  echo "== test $p"
  ctest --preset "$p" -j "$jobs"
done
