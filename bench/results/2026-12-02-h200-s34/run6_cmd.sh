#!/usr/bin/env bash
# Session 34 run 6: the sampled tail with a sample histogram, as it would land
# (sampled-tail-hist.patch as committed: STRATA_IDX_SAMP_X 3, 500 ns polls, the sampled
# tail for rows of 65,536 entries and more, else the row barrier), against main (8448896's
# kernels, built in the same call): the GPU test's "sampled" tcase, --check at 32K - 1M,
# rounds and timelines (the "gpu" tcase left out: two refused starts left too little
# device time). Carry .deps and build-alt.
set -u
OUT=${OUT:-$PWD/gpu-out}
mkdir -p "$OUT"
export LD_LIBRARY_PATH=$PWD/.deps/usr/lib/x86_64-linux-gnu
(cmake -S build-alt/main -B build-alt/bmain -DCMAKE_PREFIX_PATH="$PWD/.deps/usr" \
	-DCMAKE_CUDA_ARCHITECTURES=90 -DCMAKE_BUILD_TYPE=Release -DSTRATA_REV=s34-main >/dev/null 2>&1 &&
	cmake --build build-alt/bmain -j6 --target strata_cli >"$OUT/build_main.log" 2>&1) &
cmake -S . -B build-gpu -DCMAKE_PREFIX_PATH="$PWD/.deps/usr" -DCMAKE_CUDA_ARCHITECTURES=90 \
	-DCMAKE_BUILD_TYPE=Release >/dev/null 2>&1 &&
	cmake --build build-gpu -j12 --target strata_cli kernels_gpu_indexer >"$OUT/build.log" 2>&1 ||
	{ tail -30 "$OUT/build.log"; exit 1; }
echo "built $(date +%T)"
B=build-gpu/strata
CK_RUN_CASE=sampled timeout 150 build-gpu/tests/kernels_gpu_indexer >"$OUT/tcase_sampled.txt" 2>&1
echo "tcase sampled rc=$?"; tail -2 "$OUT/tcase_sampled.txt"
timeout 120 $B bench indexer --check --ctx 32K,128K,512K,1M --batch 1,8 --rows 1 \
	--fmt fp8,mxfp4 --q8 --wgmma >"$OUT/check.txt" 2>&1
echo "check rc=$?"
grep -E "^(fp8|mxfp4) " "$OUT/check.txt" | awk '{print "check", $1, $3, $4, $5, $(NF-3)}' | tr '\n' ';'; echo
wait
[ -x build-alt/bmain/strata ] || { tail -30 "$OUT/build_main.log"; exit 1; }
pts() { # LABEL CTX BATCH ROWS FMT [BINARY]
	timeout 100 ${6:-$B} bench indexer --ctx "$2" --batch "$3" --rows "$4" --fmt "$5" --q8 --wgmma 2>&1 |
		grep -E "^(fp8|mxfp4) " | awk -v l="$1" '{print l, $1, $3, $4, "rows", $5, "graph", $9, "eff", $14, $(NF-5), $(NF-4)}'
}
for i in 1 2; do
	pts "main r$i" 1M 1 1 fp8,mxfp4 build-alt/bmain/strata
	pts "main r$i" 512K 1,8 1 fp8 build-alt/bmain/strata
	pts "main r$i" 128K,32K 8 1 fp8 build-alt/bmain/strata
	pts "tree r$i" 1M 1 1 fp8,mxfp4
	pts "tree r$i" 512K 1,8 1 fp8
	pts "tree r$i" 128K,32K 8 1 fp8
	STRATA_IDX_SAMP_X=2 pts "tree x2 r$i" 1M 1 1 fp8,mxfp4
	STRATA_IDX_SAMP_X=2 pts "tree x2 r$i" 512K 8 1 fp8
	STRATA_IDX_SAMP_MIN=0 pts "tree min0 r$i" 128K 8 1 fp8
	STRATA_IDX_SAMP=0 pts "tree barrier r$i" 1M 1 1 fp8
	STRATA_IDX_SAMP=0 pts "tree barrier r$i" 512K 8 1 fp8
done | tee "$OUT/ab.txt"
echo "ab done $(date +%T)"
for c in "1M 1 fp8" "1M 1 mxfp4" "512K 8 fp8"; do
	set -- $c
	STRATA_IDX_TRACE=1 timeout 60 $B bench indexer --ctx $1 --batch $2 --rows 1 \
		--fmt $3 --q8 --wgmma --reps 8 2>&1 | grep -E "idx-trace" | tail -1 | sed "s/^/$1 b$2 $3 /"
done >"$OUT/traces.txt"
grep -o -E "^[0-9]+[KM] b[0-9]+ [a-z0-9]+|(agg[0-2]|#list|sampw|scan1|fcut|fh2|sel0|selld|sort0|end) [0-9./]+" "$OUT/traces.txt" |
	tr '\n' ' ' | sed -E 's/ ([0-9]+[KM] b)/\n\1/g'; echo
