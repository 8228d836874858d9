#!/usr/bin/env bash
# Session 37, run 3 (HEAD de17255, clean tree; carry .deps): does the sampled one-row tail
# now win below 65,536 entries a row (STRATA_IDX_SAMP_MIN)? Run 2 found it faster at 128K
# batch 8. A/B at 32K and 128K, batch 1 - 64, 2 rounds; rows 2 and 4 at 128K batch 8 (1 round); then
# --check with STRATA_IDX_SAMP_MIN=0 at those points; then the GPU tests run 1 did not
# finish: the `gpu` tcase beside the other GPU tests (ctest -j3).
set -u
DL=${DL:-590} # the seconds this call may take
OUT=${OUT:-$PWD/gpu-out}
mkdir -p "$OUT"
export LD_LIBRARY_PATH=$PWD/.deps/usr/lib/x86_64-linux-gnu
cmake -S . -B build-gpu -DCMAKE_PREFIX_PATH=$PWD/.deps/usr -DCMAKE_CUDA_ARCHITECTURES=90 \
	-DCMAKE_BUILD_TYPE=Release >/dev/null 2>&1 &&
	cmake --build build-gpu -j16 >"$OUT/build.log" 2>&1 || { tail -20 "$OUT/build.log"; exit 1; }
echo "built $(date +%T) in $SECONDS s"
B=build-gpu/strata
pts() { # LABEL CTX BATCH ROWS FMT
	timeout 100 $B bench indexer --ctx "$2" --batch "$3" --rows "$4" --fmt "$5" --q8 --wgmma 2>&1 |
		grep -E "^(fp8|mxfp4) " | awk -v l="$1" '{print l, $1, $3, $4, "rows", $5, "graph", $9, "eff", $14, $(NF-5), $(NF-4)}'
}
for i in 1 2; do
	pts "main r$i" 32K,128K 1,8,32,64 1 fp8,mxfp4
	STRATA_IDX_SAMP_MIN=0 pts "samp r$i" 32K,128K 1,8,32,64 1 fp8,mxfp4
done | tee "$OUT/ab.txt"
pts "main r1" 128K 8 2,4 fp8,mxfp4 | tee -a "$OUT/ab.txt"
STRATA_IDX_SAMP_MIN=0 pts "samp r1" 128K 8 2,4 fp8,mxfp4 | tee -a "$OUT/ab.txt"
echo "a/b done $SECONDS s"
STRATA_IDX_SAMP_MIN=0 timeout 120 $B bench indexer --check --ctx 32K,128K --batch 1,8,32 --rows 1,4 \
	--fmt fp8,mxfp4 --q8 --wgmma >"$OUT/check.txt" 2>&1
echo "check SAMP_MIN 0 rc=$? $SECONDS s"
grep -E "^(fp8|mxfp4) " "$OUT/check.txt" | awk '{print $(NF-3)}' | sort | uniq -c
s=$SECONDS
(CK_RUN_CASE=gpu timeout $((DL - SECONDS)) build-gpu/tests/kernels_gpu_indexer >"$OUT/tcase_gpu.txt" 2>&1
	echo "tcase gpu rc=$? $((SECONDS - s)) s") &
timeout $((DL - 5 - SECONDS)) ctest --test-dir build-gpu -j3 -L gpu -E kernels_gpu_indexer >"$OUT/ctest_gpu.txt" 2>&1
echo "ctest -L gpu (the others) rc=$? $((SECONDS - s)) s"; grep -E "tests passed|Failed|Timeout" "$OUT/ctest_gpu.txt"
wait
tail -2 "$OUT/tcase_gpu.txt"
