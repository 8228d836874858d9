#!/usr/bin/env bash
# Session 28: contiguous tile ranges (STRATA_IDX_RANGES 0 / 1 / 2) on the GPU, one binary.
set -u
OUT=${OUT:-$PWD/gpu-out}
mkdir -p "$OUT"
export LD_LIBRARY_PATH=$PWD/.deps/usr/lib/x86_64-linux-gnu
cmake -B build-gpu -DCMAKE_PREFIX_PATH="$PWD/.deps/usr" -DCMAKE_CUDA_ARCHITECTURES=90 \
	-DCMAKE_BUILD_TYPE=Release >/dev/null 2>&1 &&
	cmake --build build-gpu -j16 >"$OUT/build.log" 2>&1 || { tail -30 "$OUT/build.log"; exit 1; }
B=build-gpu/strata
if [ -n "${CASE-}" ]; then
	CK_RUN_CASE=$CASE ctest --test-dir build-gpu -R kernels_gpu_indexer --output-on-failure \
		--timeout 400 >"$OUT/ctest.txt" 2>&1
	grep -E "tests passed|Failed|\*\*\*" "$OUT/ctest.txt" | head -20
fi
pts() { # LABEL [FMTS]: CTX (1M) batch BATCH (8,32) rows ROWS (1,2)
	timeout 100 $B bench indexer --ctx "${CTX:-1M}" --batch "${BATCH:-8,32}" --rows "${ROWS:-1,2}" \
		--fmt "${2:-fp8,mxfp4}" --q8 --wgmma 2>&1 | grep -E "^(fp8|mxfp4) " |
		awk -v l="$1" '{print l, $1, $2, $3, $4, "rows", $5, "graph", $9, "eff", $14}'
}
for i in $(seq "${ROUNDS:-3}"); do
	for v in ${MODES:-0 1 2}; do
		STRATA_IDX_RANGES=$v pts "r$v $i"
	done
done | tee "$OUT/ab.txt"
for i in 1 2; do
	for v in 0 2; do
		STRATA_IDX_RANGES=$v CTX=128K,512K ROWS=2 pts "r$v $i" fp8
		STRATA_IDX_RANGES=$v BATCH=64 ROWS=2 pts "r$v $i" fp8
	done
done | tee "$OUT/ab2.txt"
if [ -n "${CHECK-}" ]; then
	timeout 200 $B bench indexer --check --ctx 1M --batch 8 --rows 2 --fmt fp8,mxfp4 --q8 \
		--wgmma >"$OUT/check.txt" 2>&1
	echo "check rc=$?" | tee -a "$OUT/check.txt"
fi
