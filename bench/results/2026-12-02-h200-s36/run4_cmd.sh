#!/usr/bin/env bash
# Session 36, run 4 (run 3: the same without a configured build-gpu; the fresh machine had none):
# every tcase of the GPU indexer test on the tree of run 2 (carry .deps).
export LD_LIBRARY_PATH=$PWD/.deps/usr/lib/x86_64-linux-gnu && cmake -S . -B build-gpu -DCMAKE_PREFIX_PATH=$PWD/.deps/usr -DCMAKE_CUDA_ARCHITECTURES=90 -DCMAKE_BUILD_TYPE=Release >/dev/null 2>&1 && date +%T && bash bench/results/2026-12-02-h200-s35/next_tests.sh 2>&1 | tail -30; date +%T
