#!/usr/bin/env bash
# Session 30 run 4: run 3's A/B again with the one-row TMA issue after the MMA (and its
# page index fixed), every line straight into OUT; then kernels_gpu_indexer with the TMA
# form everywhere (STRATA_IDX_SS_TMA=1).
set -u
OUT=${OUT:-$PWD/gpu-out}
mkdir -p "$OUT"
export LD_LIBRARY_PATH=$PWD/.deps/usr/lib/x86_64-linux-gnu
cmake -B build-gpu -DCMAKE_PREFIX_PATH="$PWD/.deps/usr" -DCMAKE_CUDA_ARCHITECTURES=90 \
	-DCMAKE_BUILD_TYPE=Release >/dev/null 2>&1 &&
	cmake --build build-gpu -j16 --target strata_cli kernels_gpu_indexer >"$OUT/build.log" 2>&1 ||
	{ tail -30 "$OUT/build.log"; exit 1; }
echo "built $(date +%T)"
B=build-gpu/strata
for t in 1 ""; do
	STRATA_IDX_SS_TMA=$t timeout 100 $B bench indexer --check --ctx 128K,1M --batch 1,8 --rows 1,2 \
		--fmt fp8 --q8 --wgmma >>"$OUT/check.txt" 2>&1
	echo "check tma '$t' rc=$?" | tee -a "$OUT/check.txt"
done
grep -E "^fp8 " "$OUT/check.txt" | awk '{print "check", $3, $4, $5, $(NF-3)}' | sort | uniq -c
pts() { # LABEL CTX BATCH ROWS
	timeout 150 $B bench indexer --ctx "$2" --batch "$3" --rows "$4" --fmt fp8 --q8 --wgmma 2>&1 |
		grep -E "^fp8 " | awk -v l="$1" '{print l, $3, $4, "rows", $5, "graph", $9, "eff", $14}'
}
for i in 1 2; do
	for t in 0 1; do
		export STRATA_IDX_SS_TMA=$t
		pts "tma$t r$i" 1M 1,8,32 1,2,4
		pts "tma$t r$i" 512K 8 1,2
		pts "tma$t r$i" 128K 1,8,32 1,2
	done
done >"$OUT/ab.txt"
unset STRATA_IDX_SS_TMA
for t in 0 1; do
	STRATA_IDX_TRACE=1 STRATA_IDX_SS_TMA=$t timeout 60 $B bench indexer --ctx 1M --batch 1 \
		--rows 1 --fmt fp8 --q8 --wgmma --reps 8 2>&1 | grep -E "idx-(trace|cta)" | tail -6 |
		sed "s/^/tma$t /"
done >"$OUT/traces.txt"
echo "ab done $(date +%T)"
STRATA_IDX_SS_TMA=1 ctest --test-dir build-gpu -R kernels_gpu_indexer --output-on-failure \
	--timeout 420 >"$OUT/ctest.txt" 2>&1
grep -E "tests passed|Failed|\*\*\*|Passed|sec" "$OUT/ctest.txt" | tail -5
echo "done $(date +%T)"
