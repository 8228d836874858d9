#!/usr/bin/env bash
# Prepared in session 36: every tcase of the GPU indexer test on HEAD, timed, in a call of
# its own (carry .deps; the working tree clean). s36 ran them on 75d09b4's code (waves 18 s,
# ranges 144 s, copies 21 s, gpu 223 s, sampled ~118 s) with the single-threaded CPU twin;
# since 5bf0ffc the twin scores on up to 16 threads, so these should take far less.
# Then the other GPU tests under ctest.
set -u
OUT=${OUT:-$PWD/gpu-out}
mkdir -p "$OUT"
export LD_LIBRARY_PATH=$PWD/.deps/usr/lib/x86_64-linux-gnu
cmake -S . -B build-gpu -DCMAKE_PREFIX_PATH=$PWD/.deps/usr -DCMAKE_CUDA_ARCHITECTURES=90 \
	-DCMAKE_BUILD_TYPE=Release >/dev/null 2>&1 &&
	cmake --build build-gpu -j16 >"$OUT/build.log" 2>&1 || { tail -20 "$OUT/build.log"; exit 1; }
echo "built $(date +%T)"
for c in sampled waves ranges copies gpu; do
	s=$SECONDS
	CK_RUN_CASE=$c timeout $((560 - SECONDS)) build-gpu/tests/kernels_gpu_indexer >"$OUT/tcase_$c.txt" 2>&1
	echo "tcase $c rc=$? $((SECONDS - s)) s"; tail -1 "$OUT/tcase_$c.txt"
done
s=$SECONDS
timeout $((590 - SECONDS)) ctest --test-dir build-gpu -L gpu -E kernels_gpu_indexer >"$OUT/ctest_gpu.txt" 2>&1
echo "ctest -L gpu (the others) rc=$? $((SECONDS - s)) s"; tail -3 "$OUT/ctest_gpu.txt"
