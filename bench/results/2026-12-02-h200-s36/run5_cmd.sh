#!/usr/bin/env bash
# Session 36, run 5: samp_tail holding up to 8 scores a thread (kHoldS; 16 tiles a CTA),
# so the sampled tail's scan can run 3 or 2 CTAs an SM at 1M; main = HEAD 75d09b4 (cap 4,
# 8 tiles a CTA at most) in build-alt/main. 3 rounds at 256K / 512K / 1M batch 1, both
# formats: main, tree (cap 4), cap 3, cap 2; --check and the sampled tcase at caps 3 / 2.
set -u
OUT=${OUT:-$PWD/gpu-out}
mkdir -p "$OUT"
export LD_LIBRARY_PATH=$PWD/.deps/usr/lib/x86_64-linux-gnu
CM="-DCMAKE_PREFIX_PATH=$PWD/.deps/usr -DCMAKE_CUDA_ARCHITECTURES=90 -DCMAKE_BUILD_TYPE=Release"
(cmake -S build-alt/main -B build-alt/bmain $CM >/dev/null 2>&1 &&
	cmake --build build-alt/bmain -j6 --target strata_cli >"$OUT/build_main.log" 2>&1) &
cmake -S . -B build-gpu $CM >/dev/null 2>&1 &&
	cmake --build build-gpu -j10 --target strata_cli kernels_gpu_indexer >"$OUT/build.log" 2>&1 ||
	{ tail -30 "$OUT/build.log"; exit 1; }
wait
[ -x build-alt/bmain/strata ] || { tail -30 "$OUT/build_main.log"; exit 1; }
echo "built $(date +%T)"
B=build-gpu/strata
pts() { # LABEL CTX BATCH ROWS FMT [BINARY]
	timeout 100 ${6:-$B} bench indexer --ctx "$2" --batch "$3" --rows "$4" --fmt "$5" --q8 --wgmma 2>&1 |
		grep -E "^(fp8|mxfp4) " | awk -v l="$1" '{print l, $1, $3, $4, "rows", $5, "graph", $9, "eff", $14, $(NF-5), $(NF-4)}'
}
for i in 1 2 3; do
	pts "main r$i" 256K,512K,1M 1 1 fp8,mxfp4 build-alt/bmain/strata
	pts "tree r$i" 256K,512K,1M 1 1 fp8,mxfp4
	STRATA_IDX_SAMP_PER_SM=3 pts "ps3 r$i" 256K,512K,1M 1 1 fp8,mxfp4
	STRATA_IDX_SAMP_PER_SM=2 pts "ps2 r$i" 256K,512K,1M 1 1 fp8,mxfp4
done | tee "$OUT/ab.txt"
for c in 3 2; do
	STRATA_IDX_SAMP_PER_SM=$c STRATA_IDX_TRACE=1 timeout 30 $B bench indexer --ctx 1M --batch 1 --rows 1 \
		--fmt fp8,mxfp4 --q8 --wgmma --reps 4 >>"$OUT/traces.txt" 2>&1
	STRATA_IDX_SAMP_PER_SM=$c timeout 100 $B bench indexer --check --ctx 256K,512K,1M --batch 1 --rows 1 \
		--fmt fp8,mxfp4 --q8 --wgmma >>"$OUT/check.txt" 2>&1
	echo "check cap $c rc=$?"
	STRATA_IDX_SAMP_PER_SM=$c CK_RUN_CASE=sampled timeout 150 build-gpu/tests/kernels_gpu_indexer >>"$OUT/tcase_sampled.txt" 2>&1
	echo "tcase sampled cap $c rc=$?"
done
grep -E "^(fp8|mxfp4) |idx-cta: [0-9]+ CTAs" "$OUT/traces.txt" | tail -8
grep -E "^(fp8|mxfp4) " "$OUT/check.txt" | awk '{print "check", $1, $3, $4, $5, $(NF-3)}' | tr '\n' ';'; echo
