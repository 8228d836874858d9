#!/usr/bin/env bash
# Session 32 run 1: the filter's reads issued at once (histogram counts, limit, first
# round's scores bounded by the scratch row: the tree, "early") and, switched at run time,
# its done counter by a release-acquire arrive without the two fences
# (STRATA_IDX_FARRIVE=1, "early+fa"), against main (build-alt/main = HEAD). --check,
# alternated rounds at the FP8 / MXFP4 batch points, timelines, then the GPU test's
# "gpu" tcase (mixed lengths: the masked score slots) with FARRIVE=1.
# Carry .deps and build-alt.
set -u
OUT=${OUT:-$PWD/gpu-out}
mkdir -p "$OUT"
export LD_LIBRARY_PATH=$PWD/.deps/usr/lib/x86_64-linux-gnu
cfg() { cmake -S "$1" -B "$2" -DCMAKE_PREFIX_PATH="$PWD/.deps/usr" -DCMAKE_CUDA_ARCHITECTURES=90 \
	-DCMAKE_BUILD_TYPE=Release $3 >/dev/null 2>&1; }
(cfg build-alt/main build-alt/bmain -DSTRATA_REV=s32-main &&
	cmake --build build-alt/bmain -j8 --target strata_cli >"$OUT/build_main.log" 2>&1) &
cfg . build-gpu "" && cmake --build build-gpu -j8 --target strata_cli kernels_gpu_indexer >"$OUT/build.log" 2>&1 ||
	{ tail -30 "$OUT/build.log"; exit 1; }
wait
[ -x build-alt/bmain/strata ] || { tail -30 "$OUT/build_main.log"; exit 1; }
echo "built $(date +%T)"
B=build-gpu/strata
M=build-alt/bmain/strata
for fa in 0 1; do
	STRATA_IDX_FARRIVE=$fa timeout 120 $B bench indexer --check --ctx 128K,512K --batch 8,32 --rows 1,2 \
		--fmt fp8,mxfp4 --q8 --wgmma >"$OUT/check_fa$fa.txt" 2>&1
	echo "check fa$fa rc=$?"
	grep -E "^(fp8|mxfp4) " "$OUT/check_fa$fa.txt" | awk -v f=$fa '{print "check fa" f, $1, $3, $4, $5, $9, $(NF-3)}'
done
pts() { # BINARY LABEL CTX BATCH ROWS FMT
	timeout 120 $1 bench indexer --ctx "$3" --batch "$4" --rows "$5" --fmt "$6" --q8 --wgmma 2>&1 |
		grep -E "^(fp8|mxfp4) " | awk -v l="$2" '{print l, $1, $3, $4, "rows", $5, "graph", $9, "eff", $14}'
}
for i in 1 2; do
	for v in main early early+fa; do
		b=$B fa=0
		[ $v = main ] && b=$M
		[ $v = early+fa ] && fa=1
		STRATA_IDX_FARRIVE=$fa pts $b "$v r$i" 512K 8 1,2 fp8
		STRATA_IDX_FARRIVE=$fa pts $b "$v r$i" 128K 8,32 1,2 fp8
		STRATA_IDX_FARRIVE=$fa pts $b "$v r$i" 1M 8 1 fp8
		STRATA_IDX_FARRIVE=$fa pts $b "$v r$i" 512K,1M 8 2 mxfp4
	done
done | tee "$OUT/ab.txt"
echo "ab done $(date +%T)"
for v in main early+fa; do
	b=$B fa=1
	[ $v = main ] && b=$M fa=0
	STRATA_IDX_FARRIVE=$fa STRATA_IDX_TRACE=1 timeout 60 $b bench indexer --ctx 512K --batch 8 \
		--rows 1 --fmt fp8 --q8 --wgmma --reps 8 2>&1 | grep -E "idx-trace" | tail -3 | sed "s/^/$v /"
done >"$OUT/traces.txt"
echo "traces done $(date +%T)"
STRATA_IDX_FARRIVE=1 CK_RUN_CASE=gpu timeout 330 build-gpu/tests/kernels_gpu_indexer >"$OUT/tcase_gpu_fa1.txt" 2>&1
echo "tcase gpu fa1 rc=$?"; tail -3 "$OUT/tcase_gpu_fa1.txt"
echo "done $(date +%T)"
