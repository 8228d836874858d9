#!/usr/bin/env bash
# Session 38, run 1 (HEAD, carry .deps): 1. Nsight Compute on the one-row MXFP4 scan at
# 1M keys (batch 1, the sampled tail's instance) and batch 8 (the one-set loop), with
# per-instruction stall samples, to see why it scores a tile per ~600 SM cycles when
# its instruction count and the tensor pipe suggest ~250; its SASS; 2. s37's
# next_cmd.sh (--check of the landed default, 32K batch 2 - 16 A/B, the whole-row
# fallback, the `gpu` tcase) in the time left (DL).
set -u
DL=${DL:-560}
OUT=${OUT:-$PWD/gpu-out}
mkdir -p "$OUT"
export LD_LIBRARY_PATH=$PWD/.deps/usr/lib/x86_64-linux-gnu
cmake -S . -B build-gpu -DCMAKE_PREFIX_PATH=$PWD/.deps/usr -DCMAKE_CUDA_ARCHITECTURES=90 \
	-DCMAKE_BUILD_TYPE=Release >/dev/null 2>&1 &&
	cmake --build build-gpu -j16 >"$OUT/build.log" 2>&1 || { tail -20 "$OUT/build.log"; exit 1; }
echo "built in $SECONDS s"
B=build-gpu/strata
o=$(find build-gpu -name 'indexer_wgmma.cu.o' | head -1)
cuobjdump --dump-sass "$o" 2>/dev/null | gzip >"$OUT/wgmma_sass.txt.gz"
echo "sass: $(zcat "$OUT/wgmma_sass.txt.gz" | wc -l) lines"
NCU=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
echo "ncu: $NCU"
prof() { # NAME BATCH REGEX
	timeout 120 "$NCU" --clock-control none -k "regex:$3" --launch-skip 4 -c 1 --set full \
		--import-source no -f -o "$OUT/$1" $B bench indexer --ctx 1M --batch "$2" --rows 1 \
		--fmt mxfp4 --q8 --wgmma --reps 3 >"$OUT/$1.log" 2>&1
	echo "ncu $1 rc=$? at $SECONDS s"; tail -3 "$OUT/$1.log"
	if [ -f "$OUT/$1.ncu-rep" ]; then
		"$NCU" -i "$OUT/$1.ncu-rep" --page details >"$OUT/$1_details.txt" 2>&1
		"$NCU" -i "$OUT/$1.ncu-rep" --page source --csv --print-source sass >"$OUT/$1_source.csv" 2>&1
		gzip -f "$OUT/$1_source.csv"
		"$NCU" -i "$OUT/$1.ncu-rep" --page raw --csv >"$OUT/$1_raw.csv" 2>&1
		gzip -f "$OUT/$1_raw.csv"
		rm -f "$OUT/$1.ncu-rep"
	fi
}
[ -n "$NCU" ] && prof mx_b1 1 scan_rs && prof mx_b8 8 scan_rs
echo "profiles done at $SECONDS s"
DL=$((DL - SECONDS)) OUT=$OUT bash bench/results/2026-12-02-h200-s37/next_cmd.sh
