#!/usr/bin/env bash
# Prepared in session 35: the GPU indexer test alone, every tcase, timed (s35 ran its
# "gpu" tcase and five "waves" cases on the landed tail in 420 s and did not reach
# "ranges", "copies"; ctest's limit for it is now 1,500 s). Needs a build-gpu with
# kernels_gpu_indexer (next_cmd.sh builds it); a call of its own (the 600 s limit).
set -u
OUT=${OUT:-$PWD/gpu-out}
mkdir -p "$OUT"
export LD_LIBRARY_PATH=$PWD/.deps/usr/lib/x86_64-linux-gnu
cmake --build build-gpu -j16 --target kernels_gpu_indexer >"$OUT/build.log" 2>&1 || { tail -20 "$OUT/build.log"; exit 1; }
for c in waves ranges copies; do
	s=$SECONDS
	CK_RUN_CASE=$c timeout $((570 - SECONDS)) build-gpu/tests/kernels_gpu_indexer >"$OUT/tcase_$c.txt" 2>&1
	echo "tcase $c rc=$? $((SECONDS - s)) s"; tail -1 "$OUT/tcase_$c.txt"
done
s=$SECONDS
CK_RUN_CASE=gpu timeout $((585 - SECONDS)) build-gpu/tests/kernels_gpu_indexer >"$OUT/tcase_gpu.txt" 2>&1
echo "tcase gpu rc=$? $((SECONDS - s)) s"; tail -1 "$OUT/tcase_gpu.txt"
