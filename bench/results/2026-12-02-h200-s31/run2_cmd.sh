#!/usr/bin/env bash
# Session 31 run 2: the issue's whole sweep on main (424a360's kernels: FP8 tiles by TMA
# for two and four rows a CTA), a context per invocation, CSV and table into OUT; then
# every GPU test but kernels_gpu_indexer (run 3 runs that one alone).
set -u
OUT=${OUT:-$PWD/gpu-out}
mkdir -p "$OUT"
export LD_LIBRARY_PATH=$PWD/.deps/usr/lib/x86_64-linux-gnu
cmake -B build-gpu -DCMAKE_PREFIX_PATH="$PWD/.deps/usr" -DCMAKE_CUDA_ARCHITECTURES=90 \
	-DCMAKE_BUILD_TYPE=Release >/dev/null 2>&1 &&
	cmake --build build-gpu -j16 >"$OUT/build.log" 2>&1 ||
	{ tail -30 "$OUT/build.log"; exit 1; }
echo "built $(date +%T)"
for c in 1M 512K 128K 32K; do
	timeout 130 build-gpu/strata bench indexer --ctx "$c" --batch 1,8,32,64 --rows 1,2,4 \
		--fmt fp8,mxfp4 --q8 --wgmma --reps 10 --csv "$OUT/sweep_$c.csv" \
		>"$OUT/sweep_$c.txt" 2>&1
	echo "$c rc=$?"
	grep -E "^(fp8|mxfp4) " "$OUT/sweep_$c.txt" | awk '{print $1, $3, $4, "rows", $5, "graph", $9, "eff", $14, $17, $18}'
done
grep -ic "tensor map" "$OUT"/sweep_*.txt
echo "sweep done $(date +%T)"
ctest --test-dir build-gpu -L gpu -E kernels_gpu_indexer -j4 --output-on-failure --timeout 200 \
	>"$OUT/ctest.txt" 2>&1
grep -E "Test *#|tests passed|Total" "$OUT/ctest.txt"
echo "done $(date +%T)"
