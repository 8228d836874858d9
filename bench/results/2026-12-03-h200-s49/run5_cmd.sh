#!/usr/bin/env bash
# s49 run 5: the session's landed head (s48's tree with rs-one5 and cluster-red), every
# target built, every GPU test (ctest -L gpu, all tcases of kernels_gpu_indexer), timed.
set -u
OUT=${OUT:-$PWD/gpu-out}
mkdir -p "$OUT"
export LD_LIBRARY_PATH=$PWD/.deps/usr/lib/x86_64-linux-gnu
cmake -S . -B build-gpu -DCMAKE_PREFIX_PATH=$PWD/.deps/usr -DCMAKE_CUDA_ARCHITECTURES=90 \
	-DCMAKE_BUILD_TYPE=Release >/dev/null 2>&1 || { echo "configure failed"; exit 1; }
cmake --build build-gpu -j16 >/tmp/b0.log 2>&1 || { grep -E "error" /tmp/b0.log | head; exit 1; }
echo "built in $SECONDS s"
s=$SECONDS
timeout $((540 - SECONDS)) ctest --test-dir build-gpu -L gpu -j2 --output-on-failure >"$OUT/ctest_gpu.txt" 2>&1
echo "ctest -L gpu rc=$? $((SECONDS - s)) s"; grep -E "tests passed|Passed|Failed|\*\*\*" "$OUT/ctest_gpu.txt" | tail -14
echo "done at $SECONDS s"
