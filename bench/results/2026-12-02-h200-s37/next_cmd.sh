#!/usr/bin/env bash
# Prepared in session 37 (not run: no device time left). On HEAD (carry .deps, a clean
# tree): 1. the `gpu` tcase of kernels_gpu_indexer alone (its wgmma half has not run on
# s36's cap 2 nor on s37's sampled tail from 32,768 entries; each check now prints its
# seconds: data / GPU / twin / reference, line-buffered, so a cut run shows how far it
# got); 2. --check of the landed default at 128K (the sampled tail now) and 1M;
# 3. the sampled tail at 32K batch 2 - 16 (STRATA_IDX_SAMP_MIN=0 against the default):
# s37 found it 1.5 - 4 us faster at batch 8 and slower at 1 and 32, so a rule on n_rows
# needs these points; 4. the whole-row fallback's time (STRATA_IDX_SAMP_X=0).
set -u
DL=${DL:-590}
OUT=${OUT:-$PWD/gpu-out}
mkdir -p "$OUT"
export LD_LIBRARY_PATH=$PWD/.deps/usr/lib/x86_64-linux-gnu
cmake -S . -B build-gpu -DCMAKE_PREFIX_PATH=$PWD/.deps/usr -DCMAKE_CUDA_ARCHITECTURES=90 \
	-DCMAKE_BUILD_TYPE=Release >/dev/null 2>&1 &&
	cmake --build build-gpu -j16 >"$OUT/build.log" 2>&1 || { tail -20 "$OUT/build.log"; exit 1; }
echo "built in $SECONDS s"
B=build-gpu/strata
pts() { # LABEL CTX BATCH ROWS FMT
	timeout 100 $B bench indexer --ctx "$2" --batch "$3" --rows "$4" --fmt "$5" --q8 --wgmma 2>&1 |
		grep -E "^(fp8|mxfp4) " | awk -v l="$1" '{print l, $1, $3, $4, "rows", $5, "graph", $9, "eff", $14, $(NF-5), $(NF-4)}'
}
timeout 100 $B bench indexer --check --ctx 128K,1M --batch 1,8 --rows 1 --fmt fp8,mxfp4 --q8 --wgmma \
	>"$OUT/check.txt" 2>&1
echo "check rc=$?"; grep -E "^(fp8|mxfp4) " "$OUT/check.txt" | awk '{print $(NF-3)}' | sort | uniq -c
for i in 1 2; do
	pts "main r$i" 32K,128K,1M 1 1 fp8,mxfp4
	pts "main r$i" 32K 2,4,8,16 1 fp8,mxfp4
	STRATA_IDX_SAMP_MIN=0 pts "samp r$i" 32K 2,4,8,16 1 fp8,mxfp4
done | tee "$OUT/ab.txt"
# the whole-row fallback's cost (STRATA_IDX_SAMP_X=0: every sampled row's list falls short)
STRATA_IDX_SAMP_X=0 pts "x0" 128K,1M 1,8 1 fp8,mxfp4 | tee -a "$OUT/ab.txt"
s=$SECONDS
CK_RUN_CASE=gpu timeout $((DL - SECONDS)) build-gpu/tests/kernels_gpu_indexer >"$OUT/tcase_gpu.txt" 2>&1
echo "tcase gpu rc=$? $((SECONDS - s)) s"; tail -2 "$OUT/tcase_gpu.txt"
awk -F'[(),]' '/s: data/ {for (i = 1; i <= NF; i++) if ($i ~ /s: data/) print $i, $(i+1), $(i+2), $(i+3)}' \
	"$OUT/tcase_gpu.txt" | awk '{d += $3; g += $5; t += $7; r += $9} END {print "sum s: data", d, "GPU", g, "twin", t, "reference", r}'
