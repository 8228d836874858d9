#!/usr/bin/env bash
# Session 38, run 3: the whole-row select's histogram passes four keys a lane at a time
# (row_hist; select_all out of line, so the list path's kernel keeps its registers and
# spills nothing) against run 2's form. new = the working tree (build-gpu); base = 05c6c83
# (run 2's select_all), carried as build-alt/base-src. Carry .deps and build-alt/base-src.
# 1. the fallback (STRATA_IDX_SAMP_X=0); 2. the list path (the default); 3. --check of
# the fallback; 4. the `sampled` tcase, in the time left (DL).
set -u
DL=${DL:-400}
OUT=${OUT:-$PWD/gpu-out}
mkdir -p "$OUT"
export LD_LIBRARY_PATH=$PWD/.deps/usr/lib/x86_64-linux-gnu
cfg() { cmake -S "$1" -B "$2" -DCMAKE_PREFIX_PATH=$PWD/.deps/usr -DCMAKE_CUDA_ARCHITECTURES=90 \
	-DCMAKE_BUILD_TYPE=Release >/dev/null 2>&1; }
cfg . build-gpu && cfg build-alt/base-src build-alt/base || { echo "configure failed"; exit 1; }
cmake --build build-gpu -j10 >"$OUT/build_new.log" 2>&1 &
cmake --build build-alt/base -j6 --target strata_cli >"$OUT/build_base.log" 2>&1 || { tail -20 "$OUT/build_base.log"; exit 1; }
wait $! || { tail -20 "$OUT/build_new.log"; exit 1; }
echo "built in $SECONDS s"
pts() { # LABEL BIN CTX BATCH FMT
	timeout 60 "$2" bench indexer --ctx "$3" --batch "$4" --rows 1 --fmt "$5" --q8 --wgmma 2>&1 |
		grep -E "^(fp8|mxfp4) " | awk -v l="$1" '{print l, $1, $3, $4, "graph", $9, "eff", $14, $(NF-5), $(NF-4)}'
}
for r in 1 2; do
	for b in new base; do
		B=build-gpu/strata; [ $b = base ] && B=build-alt/base/strata
		STRATA_IDX_SAMP_X=0 pts "x0 $b r$r" $B 1M,128K 1 fp8,mxfp4
		STRATA_IDX_SAMP_X=0 pts "x0 $b r$r" $B 128K 8 fp8,mxfp4
		pts "def $b r$r" $B 1M,256K 1 fp8,mxfp4
		pts "def $b r$r" $B 128K 8 fp8,mxfp4
	done
done | tee "$OUT/ab.txt"
echo "a/b done at $SECONDS s"
STRATA_IDX_SAMP_X=0 timeout 60 build-gpu/strata bench indexer --check --ctx 128K,1M --batch 1 --rows 1 \
	--fmt fp8,mxfp4 --q8 --wgmma >"$OUT/check_x0.txt" 2>&1
echo "check x0 rc=$?"; grep -E "^(fp8|mxfp4) " "$OUT/check_x0.txt" | awk '{print $(NF-3)}' | sort | uniq -c
s=$SECONDS
CK_RUN_CASE=sampled timeout $((DL - SECONDS)) build-gpu/tests/kernels_gpu_indexer >"$OUT/tcase_sampled.txt" 2>&1
echo "tcase sampled rc=$? $((SECONDS - s)) s"; tail -2 "$OUT/tcase_sampled.txt"
