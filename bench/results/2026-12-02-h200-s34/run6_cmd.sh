#!/usr/bin/env bash
# Session 34 run 6: the sampled tail with a sample histogram, as it would land
# (sampled-tail-hist.patch as committed: STRATA_IDX_SAMP_X 3, 500 ns polls, the sampled
# tail for rows of 65,536 entries and more, else the row barrier), against main (8448896's
# kernels, built in the same call): rounds, --check at 128K - 1M, the GPU test's
# "sampled" tcase, timelines (the "gpu" tcase and the 32K points left out: refused
# starts left too little device time). Carry .deps and build-alt.
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
wait
[ -x build-alt/bmain/strata ] || { tail -30 "$OUT/build_main.log"; exit 1; }
pts() { # LABEL CTX BATCH ROWS FMT [BINARY]
	timeout 100 ${6:-$B} bench indexer --ctx "$2" --batch "$3" --rows "$4" --fmt "$5" --q8 --wgmma 2>&1 |
		grep -E "^(fp8|mxfp4) " | awk -v l="$1" '{print l, $1, $3, $4, "rows", $5, "graph", $9, "eff", $14, $(NF-5), $(NF-4)}'
}
for i in 1 2; do
	pts "main r$i" 1M 1 1 fp8,mxfp4 build-alt/bmain/strata
	pts "main r$i" 512K,128K 8 1 fp8 build-alt/bmain/strata
	pts "tree r$i" 1M 1 1 fp8,mxfp4
	pts "tree r$i" 512K,128K 8 1 fp8
	STRATA_IDX_SAMP_X=2 pts "tree x2 r$i" 1M 1 1 fp8,mxfp4
done | tee "$OUT/ab.txt"
echo "ab done $(date +%T)"
timeout 100 $B bench indexer --check --ctx 128K,512K,1M --batch 1,8 --rows 1 \
	--fmt fp8,mxfp4 --q8 --wgmma >"$OUT/check.txt" 2>&1
echo "check rc=$?"
grep -E "^(fp8|mxfp4) " "$OUT/check.txt" | awk '{print "check", $1, $3, $4, $5, $(NF-3)}' | tr '\n' ';'; echo
CK_RUN_CASE=sampled timeout 150 build-gpu/tests/kernels_gpu_indexer >"$OUT/tcase_sampled.txt" 2>&1
echo "tcase sampled rc=$?"; tail -2 "$OUT/tcase_sampled.txt"
for c in "1M 1 fp8" "1M 1 mxfp4" "512K 8 fp8"; do
	set -- $c
	STRATA_IDX_TRACE=1 timeout 60 $B bench indexer --ctx $1 --batch $2 --rows 1 \
		--fmt $3 --q8 --wgmma --reps 8 2>&1 | grep -E "idx-trace" | tail -1 | sed "s/^/$1 b$2 $3 /"
done >"$OUT/traces.txt"
grep -o -E "^[0-9]+[KM] b[0-9]+ [a-z0-9]+|(agg[0-2]|#list|sampw|scan1|fcut|fh2|sel0|selld|sort0|end) [0-9./]+" "$OUT/traces.txt" |
	tr '\n' ' ' | sed -E 's/ ([0-9]+[KM] b)/\n\1/g'; echo
