#!/usr/bin/env bash
# Session 32 run 2: the tree = run 1's "early+fa" made the default (the filter's done
# counter by a release-acquire arrive, no fences) plus the scored-keys wait: every scan
# CTA release-adds the keys it scored to its row's word once flushed (fused: filed), and
# the filter (no staging) / the select after a fused scan wait for the word to reach the
# row's limit instead of griddepcontrol.wait (STRATA_IDX_WAIT=0 restores the grid wait).
# --check (wgmma and the bf16-query scan), alternated rounds main / wait0 / wait1,
# timelines, then the GPU test's "gpu" tcase with the wait. Carry .deps and build-alt.
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
timeout 150 $B bench indexer --check --ctx 128K,512K,1M --batch 1,8 --rows 1,2 \
	--fmt fp8,mxfp4 --q8 --wgmma >"$OUT/check_wait.txt" 2>&1
echo "check wgmma rc=$?"
grep -E "^(fp8|mxfp4) " "$OUT/check_wait.txt" | awk '{print "check", $1, $3, $4, $5, $9, $(NF-3)}'
timeout 120 $B bench indexer --check --ctx 32K,128K --batch 1,8 --rows 1,2 --fmt fp8,mxfp4 \
	>"$OUT/check_bf16.txt" 2>&1
echo "check bf16-query scan rc=$?"
grep -E "^(fp8|mxfp4) " "$OUT/check_bf16.txt" | awk '{print "check bf16", $1, $3, $4, $5, $9, $(NF-3)}'
pts() { # BINARY LABEL CTX BATCH ROWS FMT
	timeout 120 $1 bench indexer --ctx "$3" --batch "$4" --rows "$5" --fmt "$6" --q8 --wgmma 2>&1 |
		grep -E "^(fp8|mxfp4) " | awk -v l="$2" '{print l, $1, $3, $4, "rows", $5, "graph", $9, "eff", $14}'
}
for i in 1 2; do
	for v in main wait0 wait1; do
		b=$B w=1
		[ $v = main ] && b=$M
		[ $v = wait0 ] && w=0
		STRATA_IDX_WAIT=$w pts $b "$v r$i" 1M 1 1 fp8,mxfp4
		STRATA_IDX_WAIT=$w pts $b "$v r$i" 512K 8 1,2 fp8
		STRATA_IDX_WAIT=$w pts $b "$v r$i" 128K 8,32 1 fp8
		STRATA_IDX_WAIT=$w pts $b "$v r$i" 1M 8 1 fp8
		STRATA_IDX_WAIT=$w pts $b "$v r$i" 1M 8 2 mxfp4
	done
done | tee "$OUT/ab.txt"
echo "ab done $(date +%T)"
for v in wait0 wait1; do
	w=${v#wait}
	for c in "1M 1" "512K 8"; do
		set -- $c
		STRATA_IDX_WAIT=$w STRATA_IDX_TRACE=1 timeout 60 $B bench indexer --ctx $1 --batch $2 \
			--rows 1 --fmt fp8 --q8 --wgmma --reps 8 2>&1 | grep -E "idx-trace" | tail -2 |
			sed "s/^/$v $1 b$2 /"
	done
done >"$OUT/traces.txt"
echo "traces done $(date +%T)"
STRATA_IDX_WAIT=1 CK_RUN_CASE=gpu timeout 300 build-gpu/tests/kernels_gpu_indexer >"$OUT/tcase_gpu_wait.txt" 2>&1
echo "tcase gpu wait rc=$?"; tail -2 "$OUT/tcase_gpu_wait.txt"
echo "done $(date +%T)"
