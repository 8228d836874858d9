#!/usr/bin/env bash
# Builds strata and runs every test: once as configured by default (CUDA kernels
# compiled when nvcc is found; GPU tests skip with exit 77 where no GPU is usable),
# then once without CUDA under AddressSanitizer and UBSan.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/deps.sh
jobs=$(nproc)
cmake -S . -B build -DCMAKE_BUILD_TYPE=RelWithDebInfo
cmake --build build -j"$jobs"
ctest --test-dir build --output-on-failure -j"$jobs"
cmake -S . -B build-asan -DCMAKE_BUILD_TYPE=Debug -DSTRATA_WITH_CUDA=OFF \
      -DSTRATA_SANITIZE=address,undefined
cmake --build build-asan -j"$jobs"
# The sanitized Debug build runs several times slower than the first: the tests' own
# (Check) timeouts, sized for that one, are stretched 4x here (ctest's stay as set).
ASAN_OPTIONS=detect_leaks=1 CK_TIMEOUT_MULTIPLIER=4 \
	ctest --test-dir build-asan --output-on-failure -j"$jobs"
