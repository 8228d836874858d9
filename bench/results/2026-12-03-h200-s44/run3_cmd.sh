#!/usr/bin/env bash
# s44 run 3: the landing tree (run 2's V2 filter loop alone: the ballot-a-slot loop and
# the H2OWN experiment removed): the gpu and sampled tcases, --check, the two-row points
# and 1M batch 1 in both formats.
set -u
OUT=${OUT:-$PWD/gpu-out}
mkdir -p "$OUT"
export LD_LIBRARY_PATH=$PWD/.deps/usr/lib/x86_64-linux-gnu
cmake -S . -B build-gpu -DCMAKE_PREFIX_PATH=$PWD/.deps/usr -DCMAKE_CUDA_ARCHITECTURES=90 \
	-DCMAKE_BUILD_TYPE=Release >/dev/null 2>&1 || { echo "configure failed"; exit 1; }
cmake --build build-gpu -j16 --target strata_cli kernels_gpu_indexer >/tmp/build.log 2>&1 ||
	{ grep -E "error" /tmp/build.log | head; tail -20 /tmp/build.log; exit 1; }
echo "built in $SECONDS s"
pts() { # LABEL FMT CTX BATCH ROWS
	timeout 40 build-gpu/strata bench indexer --ctx $3 --batch $4 --rows $5 \
		--fmt $2 --q8 --wgmma 2>&1 |
		grep -E "^(fp8|mxfp4) " | awk -v l="$1" '{print l, $1, $3, $4, $5, "graph", $9, "eff", $14, $(NF-5), $(NF-4)}'
}
{
	pts "2 rows" fp8 512K,128K 8,32 2
	pts "b1" fp8 1M 1 1
	pts "b1" mxfp4 1M 1 1
} | tee "$OUT/pts.txt"
for tc in gpu sampled; do
	s=$SECONDS
	CK_RUN_CASE=$tc timeout 150 build-gpu/tests/kernels_gpu_indexer >"$OUT/tcase_$tc.txt" 2>&1
	echo "tcase $tc rc=$? $((SECONDS - s)) s: $(tail -1 "$OUT/tcase_$tc.txt")"
	grep -iE "fail|error" "$OUT/tcase_$tc.txt" | head -3
done
s=$SECONDS
timeout 60 build-gpu/strata bench indexer --check --ctx 512K,128K --batch 8,32 --rows 2,1 \
	--fmt fp8 --q8 --wgmma >"$OUT/check.txt" 2>&1
echo "check rc=$? $((SECONDS - s)) s: $(grep -E '^(fp8|mxfp4) ' "$OUT/check.txt" | awk '{print $3, $4, $5, $(NF-3)}' | tr '\n' ' ')"
grep "# check" "$OUT/check.txt"
echo "done at $SECONDS s"
