#!/usr/bin/env bash
# Session 29 run 2: the FP8 scans' slot freed by the MMA (STRATA_IDX_SS_EARLY 0 / 1), one
# binary: the ranges tcase and --check with it on, then the modes alternated.
set -u
OUT=${OUT:-$PWD/gpu-out}
mkdir -p "$OUT"
export LD_LIBRARY_PATH=$PWD/.deps/usr/lib/x86_64-linux-gnu
cmake -B build-gpu -DCMAKE_PREFIX_PATH="$PWD/.deps/usr" -DCMAKE_CUDA_ARCHITECTURES=90 \
	-DCMAKE_BUILD_TYPE=Release >/dev/null 2>&1 &&
	cmake --build build-gpu -j16 --target strata_cli kernels_gpu_indexer >"$OUT/build.log" 2>&1 ||
	{ tail -30 "$OUT/build.log"; exit 1; }
B=build-gpu/strata
if [ -n "${CASE-}" ]; then
	STRATA_IDX_SS_EARLY=1 CK_RUN_CASE=$CASE ctest --test-dir build-gpu -R kernels_gpu_indexer \
		--output-on-failure --timeout 400 >"$OUT/ctest.txt" 2>&1
	grep -E "tests passed|Failed|\*\*\*" "$OUT/ctest.txt" | head -20
fi
if [ -n "${CHECK-}" ]; then
	STRATA_IDX_SS_EARLY=1 timeout 200 $B bench indexer --check --ctx 128K,1M --batch 1,8 \
		--rows 1,2,4 --fmt fp8 --q8 --wgmma >"$OUT/check.txt" 2>&1
	echo "check rc=$?" | tee -a "$OUT/check.txt"
	grep -E "^fp8 " "$OUT/check.txt" | awk '{print "check", $3, $4, $5, $19}'
fi
pts() { # LABEL: CTX (1M) batch BATCH rows ROWS, FP8
	timeout 150 $B bench indexer --ctx "${CTX:-1M}" --batch "${BATCH:-1,8,32}" --rows "${ROWS:-1,2,4}" \
		--fmt fp8 --q8 --wgmma 2>&1 | grep -E "^fp8 " |
		awk -v l="$1" '{print l, $3, $4, "rows", $5, "graph", $9, "eff", $14}'
}
for i in $(seq "${ROUNDS:-2}"); do
	for v in ${MODES:-0 1}; do
		STRATA_IDX_SS_EARLY=$v pts "e$v $i"
		STRATA_IDX_SS_EARLY=$v CTX=128K BATCH=8,32 ROWS=1,2 pts "e$v $i"
	done
done | tee "$OUT/ab.txt"
