#!/usr/bin/env bash
# Session 31 run 1: (a) the things session 30 left unrun on a GPU: the tcase `copies` of
# kernels_gpu_indexer and the tensor-map encoder in the device runtime (no warning; TMA
# and cp.async differ at 1M batch 8 four rows); (b) s30's tma-one-row-early.patch
# (build-alt/early = HEAD + the patch): --check and copies with TMA at one row, then
# rounds alternating main's rule against the patched TMA one-row form.
# Carry .deps and build-alt.
set -u
OUT=${OUT:-$PWD/gpu-out}
mkdir -p "$OUT"
export LD_LIBRARY_PATH=$PWD/.deps/usr/lib/x86_64-linux-gnu
cfg() { cmake -S "$1" -B "$2" -DCMAKE_PREFIX_PATH="$PWD/.deps/usr" -DCMAKE_CUDA_ARCHITECTURES=90 \
	-DCMAKE_BUILD_TYPE=Release >/dev/null 2>&1; }
(cfg build-alt/early build-alt/bearly &&
	cmake --build build-alt/bearly -j8 --target strata_cli kernels_gpu_indexer >"$OUT/build_early.log" 2>&1) &
cfg . build-gpu && cmake --build build-gpu -j8 --target strata_cli kernels_gpu_indexer \
	>"$OUT/build.log" 2>&1 || { tail -30 "$OUT/build.log"; exit 1; }
wait
[ -x build-alt/bearly/strata ] || { tail -30 "$OUT/build_early.log"; exit 1; }
echo "built $(date +%T)"
B=build-gpu/strata
E=build-alt/bearly/strata
CK_RUN_CASE=copies ctest --test-dir build-gpu -R kernels_gpu_indexer --output-on-failure -V \
	--timeout 200 >"$OUT/copies_main.txt" 2>&1
echo "copies main rc=$?"; grep -E "copies:|Passed|Failed|[0-9]+%:" "$OUT/copies_main.txt" | tail -8
timeout 100 $B bench indexer --check --ctx 128K,1M --batch 1,8 --rows 1,2,4 --fmt fp8 --q8 \
	--wgmma >"$OUT/check_main.txt" 2>&1
echo "check main rc=$?"; grep -ic "tensor map" "$OUT/check_main.txt"
grep -E "^fp8 " "$OUT/check_main.txt" | awk '{print "check main", $3, $4, $5, $9, $(NF-3)}'
STRATA_IDX_SS_TMA=1 timeout 100 $E bench indexer --check --ctx 128K,1M --batch 1,8 --rows 1,2 \
	--fmt fp8 --q8 --wgmma >"$OUT/check_early.txt" 2>&1
echo "check early rc=$?"
grep -E "^fp8 " "$OUT/check_early.txt" | awk '{print "check early", $3, $4, $5, $9, $(NF-3)}'
pts() { # BINARY LABEL CTX BATCH ROWS
	timeout 120 $1 bench indexer --ctx "$3" --batch "$4" --rows "$5" --fmt fp8 --q8 --wgmma 2>&1 |
		grep -E "^fp8 " | awk -v l="$2" '{print l, $3, $4, "rows", $5, "graph", $9, "eff", $14}'
}
for i in 1 2; do
	for t in 0 1; do STRATA_IDX_SS_TMA=$t pts $B "main-tma$t r$i" 1M 8 4; done
	pts $B "main r$i" 1M 1,8,32 1
	STRATA_IDX_SS_TMA=1 pts $E "early-tma1 r$i" 1M 1,8,32 1
	pts $B "main r$i" 512K,128K 1,8 1
	STRATA_IDX_SS_TMA=1 pts $E "early-tma1 r$i" 512K,128K 1,8 1
done | tee "$OUT/ab.txt"
echo "ab done $(date +%T)"
STRATA_IDX_SS_TMA=1 CK_RUN_CASE=copies ctest --test-dir build-alt/bearly -R kernels_gpu_indexer \
	--output-on-failure -V --timeout 200 >"$OUT/copies_early.txt" 2>&1
echo "copies early rc=$?"; grep -E "copies:|Passed|Failed|[0-9]+%:" "$OUT/copies_early.txt" | tail -8
echo "done $(date +%T)"
