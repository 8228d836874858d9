#!/usr/bin/env bash
# Session 31 run 5: main's run-time knobs at the FP8 batch points closest to the 0.7 line
# (512K batch 8 one / two rows, 0.69; 128K batch 32 one / two rows, 0.65 - 0.66): tile
# ranges STRATA_IDX_RANGES 0 / 1 / 2 (default: 2 for two rows, 0 for one) and, at two
# rows, STRATA_IDX_SS_TMA 0 (default TMA), three rounds alternated.
set -u
OUT=${OUT:-$PWD/gpu-out}
mkdir -p "$OUT"
export LD_LIBRARY_PATH=$PWD/.deps/usr/lib/x86_64-linux-gnu
cmake -B build-gpu -DCMAKE_PREFIX_PATH="$PWD/.deps/usr" -DCMAKE_CUDA_ARCHITECTURES=90 \
	-DCMAKE_BUILD_TYPE=Release >/dev/null 2>&1 &&
	cmake --build build-gpu -j16 --target strata_cli >"$OUT/build.log" 2>&1 ||
	{ tail -30 "$OUT/build.log"; exit 1; }
echo "built $(date +%T)"
B=build-gpu/strata
pts() { # LABEL CTX BATCH ROWS
	timeout 120 $B bench indexer --ctx "$2" --batch "$3" --rows "$4" --fmt fp8 --q8 --wgmma 2>&1 |
		grep -E "^fp8 " | awk -v l="$1" '{print l, $3, $4, "rows", $5, "graph", $9, "eff", $14}'
}
for i in 1 2 3; do
	for m in def 0 1 2; do
		r=; [ $m = def ] || r=$m
		STRATA_IDX_RANGES=$r pts "ranges-$m r$i" 512K 8 1,2
		STRATA_IDX_RANGES=$r pts "ranges-$m r$i" 128K 32 1,2
	done
	STRATA_IDX_SS_TMA=0 pts "tma0 r$i" 512K 8 2
	STRATA_IDX_SS_TMA=0 pts "tma0 r$i" 128K 32 2
done | tee "$OUT/knobs.txt"
echo "done $(date +%T)"
