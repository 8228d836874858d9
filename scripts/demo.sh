#!/usr/bin/env bash
# Builds strata and runs its main job.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/deps.sh
cmake -S . -B build -DCMAKE_BUILD_TYPE=RelWithDebInfo
cmake --build build -j"$(nproc)"
if ./build/strata demo --help >/dev/null 2>&1; then
  ./build/strata demo "$@"
else
  ./build/strata sizes --model flash --context 1M
fi
