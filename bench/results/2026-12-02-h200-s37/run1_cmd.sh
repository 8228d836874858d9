#!/usr/bin/env bash
# Session 37, run 1: s36's next_tests.sh on HEAD de17255 (the landed cap 2), built from
# build-alt/main (git archive HEAD; the tree carries select-rehearsal.patch for run 2) into
# build-alt/bmain, which run 2 then uses as its main. Carry .deps and build-alt.
set -u
OUT=${OUT:-$PWD/gpu-out}
mkdir -p "$OUT"
export LD_LIBRARY_PATH=$PWD/.deps/usr/lib/x86_64-linux-gnu
cmake -S build-alt/main -B build-alt/bmain -DCMAKE_PREFIX_PATH=$PWD/.deps/usr -DCMAKE_CUDA_ARCHITECTURES=90 \
	-DCMAKE_BUILD_TYPE=Release >/dev/null 2>&1 &&
	cmake --build build-alt/bmain -j16 >"$OUT/build.log" 2>&1 || { tail -20 "$OUT/build.log"; exit 1; }
echo "built $(date +%T) in $SECONDS s"
nproc
for c in sampled waves ranges copies gpu; do
	s=$SECONDS
	CK_RUN_CASE=$c timeout $((560 - SECONDS)) build-alt/bmain/tests/kernels_gpu_indexer >"$OUT/tcase_$c.txt" 2>&1
	echo "tcase $c rc=$? $((SECONDS - s)) s"; tail -1 "$OUT/tcase_$c.txt"
done
s=$SECONDS
timeout $((590 - SECONDS)) ctest --test-dir build-alt/bmain -L gpu -E kernels_gpu_indexer >"$OUT/ctest_gpu.txt" 2>&1
echo "ctest -L gpu (the others) rc=$? $((SECONDS - s)) s"; tail -3 "$OUT/ctest_gpu.txt"
