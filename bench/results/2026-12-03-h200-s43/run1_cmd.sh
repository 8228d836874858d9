#!/usr/bin/env bash
# s43 run 1: the staged filing for two FP8 rows a request, its bound taken by the last
# scan CTA of the request to sample (samp_elect, scan_ss_kernel SAMP 3: no sampling CTA).
# (1) the sampled tcase (new two-row and elected one-row cases), (2) --check at the
# two-row staged points, (3) two rows: staged (default) against the filter path
# (STRATA_IDX_SAMP_STAGED=0), same binary, alternated, (4) one row: the sampling CTA
# (default) against the elected bound (STRATA_IDX_SAMP_ELECT=1).
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
CK_RUN_CASE=sampled timeout 150 build-gpu/tests/kernels_gpu_indexer >"$OUT/tcase_sampled.txt" 2>&1
echo "tcase sampled rc=$? $((SECONDS - s)) s: $(tail -1 "$OUT/tcase_sampled.txt")" | tee "$OUT/tcases_summary.txt"
grep -iE "fail|error" "$OUT/tcase_sampled.txt" | head -5
s=$SECONDS
timeout 45 build-gpu/strata bench indexer --check --ctx 512K,128K,32K --batch 8,32 --rows 2 --fmt fp8 --q8 --wgmma >"$OUT/check.txt" 2>&1
echo "check rc=$? $((SECONDS - s)) s: $(grep -E '^(fp8|mxfp4) ' "$OUT/check.txt" | awk '{print $3, $4, $(NF-3)}' | tr '\n' ' ')"
grep "# check" "$OUT/check.txt"
pts() { # LABEL ENV CTX BATCH ROWS
	env $2 timeout 50 build-gpu/strata bench indexer --ctx $3 --batch $4 --rows $5 \
		--fmt fp8 --q8 --wgmma 2>&1 |
		grep -E "^(fp8|mxfp4) " | awk -v l="$1" '{print l, $1, $3, $4, $5, "graph", $9, "eff", $14, $(NF-5), $(NF-4)}'
}
for r in 1 2; do
	pts "filter r$r" STRATA_IDX_SAMP_STAGED=0 512K,128K,32K 8,32 2
	pts "staged r$r" STRATA_IDX_SAMP_STAGED=1 512K,128K,32K 8,32 2
done | tee "$OUT/ab2.txt"
echo "ab2 done at $SECONDS s"
{
	pts "sampler" STRATA_IDX_SAMP_ELECT=0 1M,512K,128K 8,32 1
	pts "elect  " STRATA_IDX_SAMP_ELECT=1 1M,512K,128K 8,32 1
} | tee "$OUT/ab1.txt"
echo "done at $SECONDS s"
