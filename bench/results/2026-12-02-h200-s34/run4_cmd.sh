#!/usr/bin/env bash
# Session 34 run 4: the sampled tail with a sample histogram (sampled-tail-hist.patch):
# each scan CTA's four sampled keys are counted by bucket in a row histogram in global
# memory (one atomic add a sampled key, not waited for); the sampling CTA (its row's
# first block) polls that histogram until its counts are complete and takes the lower
# edge of the r-th largest sample's bucket as the bound. --check, rounds against the row
# barrier in the same binary (STRATA_IDX_SAMP=0) at STRATA_IDX_SAMP_X 4 / 3 / 2,
# timelines, the "sampled" tcase. Carry .deps.
set -u
OUT=${OUT:-$PWD/gpu-out}
mkdir -p "$OUT"
export LD_LIBRARY_PATH=$PWD/.deps/usr/lib/x86_64-linux-gnu
cmake -S . -B build-gpu -DCMAKE_PREFIX_PATH="$PWD/.deps/usr" -DCMAKE_CUDA_ARCHITECTURES=90 \
	-DCMAKE_BUILD_TYPE=Release >/dev/null 2>&1 &&
	cmake --build build-gpu -j16 --target strata_cli kernels_gpu_indexer >"$OUT/build.log" 2>&1 ||
	{ tail -30 "$OUT/build.log"; exit 1; }
echo "built $(date +%T)"
B=build-gpu/strata
timeout 100 $B bench indexer --check --ctx 32K,128K,1M --batch 1,8 --rows 1 \
	--fmt fp8,mxfp4 --q8 --wgmma >"$OUT/check.txt" 2>&1
echo "check rc=$?"
grep -E "^(fp8|mxfp4) " "$OUT/check.txt" | awk '{print "check", $1, $3, $4, $5, $9, $(NF-3)}'
pts() { # LABEL CTX BATCH ROWS FMT
	timeout 100 $B bench indexer --ctx "$2" --batch "$3" --rows "$4" --fmt "$5" --q8 --wgmma 2>&1 |
		grep -E "^(fp8|mxfp4) " | awk -v l="$1" '{print l, $1, $3, $4, "rows", $5, "graph", $9, "eff", $14, $(NF-5), $(NF-4)}'
}
for i in 1 2; do
	STRATA_IDX_SAMP=0 pts "samp0 r$i" 1M 1 1 fp8,mxfp4
	STRATA_IDX_SAMP=0 pts "samp0 r$i" 128K,32K 8 1 fp8
	for x in 4 3 2; do
		STRATA_IDX_SAMP_X=$x pts "hist x$x r$i" 1M 1 1 fp8,mxfp4
		STRATA_IDX_SAMP_X=$x pts "hist x$x r$i" 128K,32K 8 1 fp8
	done
done | tee "$OUT/ab.txt"
echo "ab done $(date +%T)"
for c in "1M 1 fp8" "1M 1 mxfp4" "128K 8 fp8" "32K 8 fp8"; do
	set -- $c
	STRATA_IDX_TRACE=1 timeout 60 $B bench indexer --ctx $1 --batch $2 --rows 1 --fmt $3 --q8 \
		--wgmma --reps 8 2>&1 | grep -E "idx-trace" | tail -1 | sed "s/^/$1 b$2 $3 /"
done >"$OUT/traces.txt"
grep -o -E "^[0-9]+[KM] b[0-9]+ [a-z0-9]+|(agg[0-3]|#list|sampw|scan1|fcut|fh2|sel0|selld|sort0|end) [0-9./]+" "$OUT/traces.txt" |
	tr '\n' ' ' | sed -E 's/ ([0-9]+[KM] b)/\n\1/g'; echo
CK_RUN_CASE=sampled timeout 150 build-gpu/tests/kernels_gpu_indexer >"$OUT/tcase_sampled.txt" 2>&1
echo "tcase sampled rc=$?"; tail -3 "$OUT/tcase_sampled.txt"
