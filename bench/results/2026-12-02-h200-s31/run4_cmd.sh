#!/usr/bin/env bash
# Session 31 run 4: the one-row FP8 TMA refill issued by the last warp past the slot
# (build-alt/last = 424a360 + s30's tma-one-row-early.patch with its empty mbarrier
# replaced by a shared counter a slot: the fourth warp to count itself past tile i's
# reads refills the slot with tile i + S; no warp waits for another). --check and the
# `copies` tcase with TMA at one row, then rounds against main, then batch-1 timelines.
# Carry .deps and build-alt.
set -u
OUT=${OUT:-$PWD/gpu-out}
mkdir -p "$OUT"
export LD_LIBRARY_PATH=$PWD/.deps/usr/lib/x86_64-linux-gnu
cfg() { cmake -S "$1" -B "$2" -DCMAKE_PREFIX_PATH="$PWD/.deps/usr" -DCMAKE_CUDA_ARCHITECTURES=90 \
	-DCMAKE_BUILD_TYPE=Release $3 >/dev/null 2>&1; }
(cfg build-alt/last build-alt/blast -DSTRATA_REV=s31-last &&
	cmake --build build-alt/blast -j8 --target strata_cli kernels_gpu_indexer >"$OUT/build_last.log" 2>&1) &
cfg . build-gpu "" && cmake --build build-gpu -j8 --target strata_cli >"$OUT/build.log" 2>&1 ||
	{ tail -30 "$OUT/build.log"; exit 1; }
wait
[ -x build-alt/blast/strata ] || { tail -30 "$OUT/build_last.log"; exit 1; }
echo "built $(date +%T)"
B=build-gpu/strata
E=build-alt/blast/strata
STRATA_IDX_SS_TMA=1 timeout 100 $E bench indexer --check --ctx 128K,1M --batch 1,8 --rows 1,2 \
	--fmt fp8 --q8 --wgmma >"$OUT/check_last.txt" 2>&1
echo "check last rc=$?"
grep -E "^fp8 " "$OUT/check_last.txt" | awk '{print "check last", $3, $4, $5, $9, $(NF-3)}'
STRATA_IDX_SS_TMA=1 CK_RUN_CASE=copies ctest --test-dir build-alt/blast -R kernels_gpu_indexer \
	--output-on-failure -V --timeout 200 >"$OUT/copies_last.txt" 2>&1
echo "copies last rc=$?"; grep -E "copies:|Passed|Failed|[0-9]+%:" "$OUT/copies_last.txt" | tail -7
pts() { # BINARY LABEL CTX BATCH ROWS
	timeout 120 $1 bench indexer --ctx "$3" --batch "$4" --rows "$5" --fmt fp8 --q8 --wgmma 2>&1 |
		grep -E "^fp8 " | awk -v l="$2" '{print l, $3, $4, "rows", $5, "graph", $9, "eff", $14}'
}
for i in 1 2; do
	pts $B "main r$i" 1M 1,8,32 1
	STRATA_IDX_SS_TMA=1 pts $E "last-tma1 r$i" 1M 1,8,32 1
	pts $B "main r$i" 512K,128K 1,8 1
	STRATA_IDX_SS_TMA=1 pts $E "last-tma1 r$i" 512K,128K 1,8 1
done | tee "$OUT/ab.txt"
for v in main last; do
	b=$B t=
	[ $v = last ] && b=$E t=1
	STRATA_IDX_TRACE=1 STRATA_IDX_SS_TMA=$t timeout 60 $b bench indexer --ctx 1M --batch 1 \
		--rows 1 --fmt fp8 --q8 --wgmma --reps 8 2>&1 | grep -E "idx-(trace|cta)" | tail -6 |
		sed "s/^/$v /"
done >"$OUT/traces.txt"
echo "done $(date +%T)"
