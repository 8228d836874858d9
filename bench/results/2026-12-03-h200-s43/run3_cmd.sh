#!/usr/bin/env bash
# s43 run 3: two FP8 rows staged with a sampling CTA a request (SAMP 2 at two rows; run
# 2's form hung: its sampling CTA was blockIdx.x 0 while the ranges were interleaved,
# fixed: samp_block). Staged (ranges 2, the default) / staged ranges 1 / the filter path,
# alternated; one-row points once; the sampled tcase, --check, the other indexer tcases.
set -u
OUT=${OUT:-$PWD/gpu-out}
mkdir -p "$OUT"
export LD_LIBRARY_PATH=$PWD/.deps/usr/lib/x86_64-linux-gnu
cmake -S . -B build-gpu -DCMAKE_PREFIX_PATH=$PWD/.deps/usr -DCMAKE_CUDA_ARCHITECTURES=90 \
	-DCMAKE_BUILD_TYPE=Release >/dev/null 2>&1 || { echo "configure failed"; exit 1; }
cmake --build build-gpu -j16 --target strata_cli kernels_gpu_indexer >/tmp/build_new.log 2>&1 ||
	{ grep -E "error" /tmp/build_new.log | head; tail -20 /tmp/build_new.log; exit 1; }
echo "built in $SECONDS s"
pts() { # LABEL ENV CTX BATCH ROWS
	env $2 timeout 40 build-gpu/strata bench indexer --ctx $3 --batch $4 --rows $5 \
		--fmt fp8 --q8 --wgmma 2>&1 |
		grep -E "^(fp8|mxfp4) " | awk -v l="$1" '{print l, $1, $3, $4, $5, "graph", $9, "eff", $14, $(NF-5), $(NF-4)}'
}
for r in 1 2; do
	pts "filter    r$r" STRATA_IDX_SAMP_STAGED=0 512K,128K 8,32 2
	pts "staged    r$r" STRATA_IDX_SAMP_STAGED=1 512K,128K 8,32 2
	pts "staged-r1 r$r" STRATA_IDX_RANGES=1 512K,128K 8,32 2
done | tee "$OUT/ab2.txt"
echo "ab2 done at $SECONDS s"
{
	pts "one row" STRATA_IDX_SAMP_STAGED=1 512K,128K 8,32 1
	pts "b1     " STRATA_IDX_SAMP_STAGED=1 1M,128K 1 1
} | tee "$OUT/ab1.txt"
echo "ab1 done at $SECONDS s"
s=$SECONDS
CK_RUN_CASE=sampled timeout 150 build-gpu/tests/kernels_gpu_indexer >"$OUT/tcase_sampled.txt" 2>&1
echo "tcase sampled rc=$? $((SECONDS - s)) s: $(tail -1 "$OUT/tcase_sampled.txt")" | tee "$OUT/tcases_summary.txt"
grep -iE "fail|error" "$OUT/tcase_sampled.txt" | head -5
s=$SECONDS
timeout 45 build-gpu/strata bench indexer --check --ctx 512K,128K --batch 8,32 --rows 2 --fmt fp8 --q8 --wgmma >"$OUT/check.txt" 2>&1
echo "check rc=$? $((SECONDS - s)) s: $(grep -E '^(fp8|mxfp4) ' "$OUT/check.txt" | awk '{print $3, $4, $(NF-3)}' | tr '\n' ' ')"
grep "# check" "$OUT/check.txt"
for tc in gpu ranges copies; do
	s=$SECONDS
	CK_RUN_CASE=$tc timeout 100 build-gpu/tests/kernels_gpu_indexer >"$OUT/tcase_$tc.txt" 2>&1
	echo "tcase $tc rc=$? $((SECONDS - s)) s: $(tail -1 "$OUT/tcase_$tc.txt")" | tee -a "$OUT/tcases_summary.txt"
	grep -iE "fail|error" "$OUT/tcase_$tc.txt" | head -3
	[ $SECONDS -gt 470 ] && break
done
echo "done at $SECONDS s"
