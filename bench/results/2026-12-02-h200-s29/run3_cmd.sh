#!/usr/bin/env bash
# Session 29 run 3: the whole sweep on main's kernels (FP8 queries, scan_wgmma),
# a context per invocation, CSV and table into OUT.
set -u
OUT=${OUT:-$PWD/gpu-out}
mkdir -p "$OUT"
export LD_LIBRARY_PATH=$PWD/.deps/usr/lib/x86_64-linux-gnu
cmake -B build-gpu -DCMAKE_PREFIX_PATH="$PWD/.deps/usr" -DCMAKE_CUDA_ARCHITECTURES=90 \
	-DCMAKE_BUILD_TYPE=Release >/dev/null 2>&1 &&
	cmake --build build-gpu -j16 --target strata_cli >"$OUT/build.log" 2>&1 ||
	{ tail -30 "$OUT/build.log"; exit 1; }
for c in ${CTXS:-1M 512K 128K 32K}; do
	timeout "${TO:-130}" build-gpu/strata bench indexer --ctx "$c" --batch 1,8,32,64 --rows 1,2,4 \
		--fmt fp8,mxfp4 --q8 --wgmma --reps "${REPS:-10}" --csv "$OUT/sweep_$c.csv" \
		>"$OUT/sweep_$c.txt" 2>&1
	echo "$c rc=$?"
	grep -E "^(fp8|mxfp4) " "$OUT/sweep_$c.txt" | awk '{print $1, $3, $4, "rows", $5, "graph", $9, "eff", $14, $17, $18}'
done
