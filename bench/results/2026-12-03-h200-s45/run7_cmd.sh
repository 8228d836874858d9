#!/usr/bin/env bash
# s45 run 7: the final tree (the cluster room cache keyed by device, atomic): the room
# it reads, the points the rule decides against FCL=0, the gpu tcase.
set -u
OUT=${OUT:-$PWD/gpu-out}
mkdir -p "$OUT"
export LD_LIBRARY_PATH=$PWD/.deps/usr/lib/x86_64-linux-gnu
cmake -S . -B build-gpu -DCMAKE_PREFIX_PATH=$PWD/.deps/usr -DCMAKE_CUDA_ARCHITECTURES=90 \
	-DCMAKE_BUILD_TYPE=Release >/dev/null 2>&1 || { echo "configure failed"; exit 1; }
cmake --build build-gpu -j16 --target strata_cli kernels_gpu_indexer >/tmp/build.log 2>&1 ||
	{ grep -E "error" /tmp/build.log | head; tail -20 /tmp/build.log; exit 1; }
echo "built in $SECONDS s"
STRATA_IDX_TRACE=1 build-gpu/strata bench indexer --ctx 128K --batch 8,32,64 --rows 2 --fmt fp8 --q8 --wgmma --reps 1 2>&1 | grep idx-fcl | sort -u
for e in "" STRATA_IDX_FCL=0; do
	env $e build-gpu/strata bench indexer --ctx 128K --batch 8,32,64 --rows 2 --fmt fp8 --q8 --wgmma 2>&1 |
		grep -E "^fp8 " | awk -v l="${e:-def}" '{print l, $1, $3, $4, $5, "graph", $9, "eff", $14, $(NF-4)}'
done | tee "$OUT/ab.txt"
CK_RUN_CASE=gpu timeout 100 build-gpu/tests/kernels_gpu_indexer >"$OUT/tcase_gpu.txt" 2>&1
echo "tcase gpu rc=$? $(tail -1 "$OUT/tcase_gpu.txt")"
echo "done at $SECONDS s"
