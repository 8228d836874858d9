#!/usr/bin/env bash
# Session 30 run 3: the FP8 scan's tiles by TMA (STRATA_IDX_SS_TMA=1: one tensor copy of
# the keys and one bulk copy of the scales a tile, by one thread, completing on the
# slot's mbarrier) against the per-thread cp.async form (0), one binary: --check of the
# TMA form, the forms alternated, batch-1 timelines. CTEST=1: kernels_gpu_indexer with
# the TMA form instead of the rest.
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
if [ -n "${CTEST-}" ]; then
	STRATA_IDX_SS_TMA=1 ctest --test-dir build-gpu -R kernels_gpu_indexer --output-on-failure \
		--timeout 500 >"$OUT/ctest.txt" 2>&1
	grep -E "tests passed|Failed|\*\*\*|Passed|sec" "$OUT/ctest.txt" | tail -5
	exit 0
fi
STRATA_IDX_SS_TMA=1 timeout 200 $B bench indexer --check --ctx 128K,1M --batch 1,8 --rows 1,2,4 \
	--fmt fp8 --q8 --wgmma >"$OUT/check.txt" 2>&1
echo "check rc=$?" | tee -a "$OUT/check.txt"
STRATA_IDX_SS_TMA=1 timeout 100 $B bench indexer --check --pages shuffled --ctx 1M --batch 8 \
	--rows 1,2 --fmt fp8 --q8 --wgmma >>"$OUT/check.txt" 2>&1
echo "check shuffled rc=$?" | tee -a "$OUT/check.txt"
grep -E "^fp8 " "$OUT/check.txt" | awk '{print "check", $3, $4, $5, $(NF-3)}'
pts() { # LABEL CTX BATCH ROWS
	timeout 150 $B bench indexer --ctx "$2" --batch "$3" --rows "$4" --fmt fp8 --q8 --wgmma 2>&1 |
		grep -E "^fp8 " | awk -v l="$1" '{print l, $3, $4, "rows", $5, "graph", $9, "eff", $14}'
}
for i in 1 2; do
	for t in 0 1; do
		export STRATA_IDX_SS_TMA=$t
		pts "tma$t r$i" 1M 1,8,32 1,2,4
		pts "tma$t r$i" 512K 8 1,2
		pts "tma$t r$i" 128K 8,32 1,2
	done
done | tee "$OUT/ab.txt"
for t in 0 1; do
	STRATA_IDX_TRACE=1 STRATA_IDX_SS_TMA=$t timeout 60 $B bench indexer --ctx 1M --batch 1 \
		--rows 1 --fmt fp8 --q8 --wgmma --reps 8 2>&1 | grep -E "idx-(trace|cta)" | tail -6 |
		sed "s/^/tma$t /"
done >"$OUT/traces.txt"
echo "done $(date +%T)"
