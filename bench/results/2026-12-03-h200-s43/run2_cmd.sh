#!/usr/bin/env bash
# s43 run 2: two FP8 rows staged with a sampling CTA a request (SAMP 2 at two rows, the
# default now) against the filter path and the elected bound (run 1's, slower); traces of
# both staged forms at one and two rows, to see where the elected bound lost.
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
	env $2 timeout 50 build-gpu/strata bench indexer --ctx $3 --batch $4 --rows $5 \
		--fmt fp8 --q8 --wgmma 2>&1 |
		grep -E "^(fp8|mxfp4) " | awk -v l="$1" '{print l, $1, $3, $4, $5, "graph", $9, "eff", $14, $(NF-5), $(NF-4)}'
}
for r in 1 2; do
	pts "filter  r$r" STRATA_IDX_SAMP_STAGED=0 512K,128K 8,32 2
	pts "sampler r$r" STRATA_IDX_SAMP_ELECT=0 512K,128K 8,32 2
	pts "elect   r$r" STRATA_IDX_SAMP_ELECT=1 512K,128K 8,32 2
done | tee "$OUT/ab2.txt"
echo "ab2 done at $SECONDS s"
trc() { # LABEL ENV CTX BATCH ROWS
	echo "== $1"
	env $2 STRATA_IDX_TRACE=1 timeout 60 build-gpu/strata bench indexer \
		--ctx $3 --batch $4 --rows $5 --fmt fp8 --q8 --wgmma --reps 3 2>&1 | grep -E "idx-" | tail -8 | cut -c1-900
}
{
	trc "512K b8 2 rows sampler" STRATA_IDX_SAMP_ELECT=0 512K 8 2
	trc "512K b8 2 rows elect" STRATA_IDX_SAMP_ELECT=1 512K 8 2
	trc "128K b32 1 row sampler" STRATA_IDX_SAMP_ELECT=0 128K 32 1
	trc "128K b32 1 row elect" STRATA_IDX_SAMP_ELECT=1 128K 32 1
} >"$OUT/traces.txt" 2>&1
grep -E "^==|loop end|idx-trace" "$OUT/traces.txt" | cut -c1-600
echo "traces done at $SECONDS s"
s=$SECONDS
CK_RUN_CASE=sampled timeout 150 build-gpu/tests/kernels_gpu_indexer >"$OUT/tcase_sampled.txt" 2>&1
echo "tcase sampled rc=$? $((SECONDS - s)) s: $(tail -1 "$OUT/tcase_sampled.txt")" | tee "$OUT/tcases_summary.txt"
grep -iE "fail|error" "$OUT/tcase_sampled.txt" | head -5
s=$SECONDS
timeout 45 build-gpu/strata bench indexer --check --ctx 512K,128K --batch 8,32 --rows 2 --fmt fp8 --q8 --wgmma >"$OUT/check.txt" 2>&1
echo "check rc=$? $((SECONDS - s)) s: $(grep -E '^(fp8|mxfp4) ' "$OUT/check.txt" | awk '{print $3, $4, $(NF-3)}' | tr '\n' ' ')"
grep "# check" "$OUT/check.txt"
echo "done at $SECONDS s"
