#!/usr/bin/env bash
# s42 run 3: the staged filing as landed (FP8 only, its own scan instances: SAMP 2; the
# one-row sampled tail's instances keep their code), validated: the sampled tcase,
# --check at the staged points, old / staged at 512K batch 8 and 128K batch 32, and the
# batch-1 points (compare with run 2's head figures). Trimmed to the device time left.
set -u
OUT=${OUT:-$PWD/gpu-out}
mkdir -p "$OUT"
export LD_LIBRARY_PATH=$PWD/.deps/usr/lib/x86_64-linux-gnu
cmake -S . -B build-gpu -DCMAKE_PREFIX_PATH=$PWD/.deps/usr -DCMAKE_CUDA_ARCHITECTURES=90 \
	-DCMAKE_BUILD_TYPE=Release >/dev/null 2>&1 || { echo "configure failed"; exit 1; }
cmake --build build-gpu -j16 --target strata_cli kernels_gpu_indexer >/tmp/build_new.log 2>&1 ||
	{ grep -E "error" /tmp/build_new.log | head; tail -20 /tmp/build_new.log; exit 1; }
echo "built in $SECONDS s"
s=$SECONDS
CK_RUN_CASE=sampled timeout 60 build-gpu/tests/kernels_gpu_indexer >/tmp/tcase_sampled.txt 2>&1
echo "tcase sampled rc=$? $((SECONDS - s)) s: $(tail -1 /tmp/tcase_sampled.txt)" | tee "$OUT/tcases_summary.txt"
grep -iE "fail|error" /tmp/tcase_sampled.txt | head -5
s=$SECONDS
timeout 40 build-gpu/strata bench indexer --check --ctx 512K --batch 8 --rows 1 --fmt fp8 --q8 --wgmma >"$OUT/check.txt" 2>&1
timeout 30 build-gpu/strata bench indexer --check --ctx 128K --batch 32 --rows 1 --fmt fp8 --q8 --wgmma >>"$OUT/check.txt" 2>&1
echo "check $((SECONDS - s)) s: $(grep -E '^(fp8|mxfp4) ' "$OUT/check.txt" | awk '{print $3, $4, $(NF-3)}' | tr '\n' ' ')"
pts() { # LABEL STAGED CTX BATCH FMT
	STRATA_IDX_SAMP_STAGED=$2 timeout 40 build-gpu/strata bench indexer --ctx $3 --batch $4 --rows 1 \
		--fmt $5 --q8 --wgmma 2>&1 |
		grep -E "^(fp8|mxfp4) " | awk -v l="$1" '{print l, $1, $3, $4, "graph", $9, "eff", $14, $(NF-5), $(NF-4)}'
}
{
	pts "old   " 0 512K 8 fp8
	pts "staged" 1 512K 8 fp8
	pts "old   " 0 128K 32 fp8
	pts "staged" 1 128K 32 fp8
	pts "b1    " 1 1M,128K 1 fp8,mxfp4
} | tee "$OUT/ab.txt"
echo "done at $SECONDS s"
