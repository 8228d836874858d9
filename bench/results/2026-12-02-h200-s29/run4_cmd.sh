#!/usr/bin/env bash
# Session 29 run 4: the one-set MXFP4 loop's tiles in chunks taken at run time
# (STRATA_IDX_DYN 0 / 1, one binary): the ranges and waves tcases and --check with it
# on, then the modes alternated over MXFP4 points.
set -u
OUT=${OUT:-$PWD/gpu-out}
mkdir -p "$OUT"
export LD_LIBRARY_PATH=$PWD/.deps/usr/lib/x86_64-linux-gnu
cmake -B build-gpu -DCMAKE_PREFIX_PATH="$PWD/.deps/usr" -DCMAKE_CUDA_ARCHITECTURES=90 \
	-DCMAKE_BUILD_TYPE=Release >/dev/null 2>&1 &&
	cmake --build build-gpu -j16 --target strata_cli kernels_gpu_indexer >"$OUT/build.log" 2>&1 ||
	{ tail -30 "$OUT/build.log"; exit 1; }
B=build-gpu/strata
for c in ${CASES-ranges waves}; do
	STRATA_IDX_DYN=1 CK_RUN_CASE=$c timeout 250 build-gpu/tests/kernels_gpu_indexer >"$OUT/ctest_$c.txt" 2>&1
	echo "tcase $c rc=$?"
	tail -3 "$OUT/ctest_$c.txt"
done
if [ -n "${CHECK-}" ]; then
	STRATA_IDX_DYN=1 timeout 150 $B bench indexer --check --ctx 128K,1M --batch 8,32 --rows 1,2 \
		--fmt mxfp4 --q8 --wgmma >"$OUT/check.txt" 2>&1
	echo "check rc=$?" | tee -a "$OUT/check.txt"
	grep -E "^# check" "$OUT/check.txt"
fi
pts() { # LABEL: CTX batch BATCH rows ROWS, MXFP4
	timeout 100 $B bench indexer --ctx "${CTX:-1M}" --batch "${BATCH:-8,32}" --rows "${ROWS:-1,2}" \
		--fmt mxfp4 --q8 --wgmma 2>&1 | grep -E "^mxfp4 " |
		awk -v l="$1" '{print l, $3, $4, "rows", $5, "graph", $9, "eff", $14}'
}
for i in $(seq "${ROUNDS:-2}"); do
	for v in ${MODES:-0 1}; do
		STRATA_IDX_DYN=$v pts "d$v $i"
		STRATA_IDX_DYN=$v CTX=128K BATCH=32 pts "d$v $i"
	done
done | tee "$OUT/ab.txt"
