#!/usr/bin/env bash
# Session 38, run 2: the whole-row select (select_all, select_list's fallback) against
# the old one. new = the working tree (build-gpu); base = HEAD 0848c12's code, carried
# as build-alt/base-src (git archive), built into build-alt/base. Carry .deps and
# build-alt/base-src. 1. the fallback's time (STRATA_IDX_SAMP_X=0: every sampled row's
# list falls short) at 1M / 128K, batch 1 / 8; 2. the list path's time (the default),
# which must not lose, and the limit read beside the row index (STRATA_IDX_SPEC, new
# against nospec = STRATA_IDX_SPEC=0); 3. --check of both paths; 4. the `sampled` and
# `gpu` tcases.
set -u
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
	timeout 100 "$2" bench indexer --ctx "$3" --batch "$4" --rows 1 --fmt "$5" --q8 --wgmma 2>&1 |
		grep -E "^(fp8|mxfp4) " | awk -v l="$1" '{print l, $1, $3, $4, "graph", $9, "eff", $14, $(NF-5), $(NF-4)}'
}
for r in 1 2; do
	for b in base new; do
		B=build-gpu/strata; [ $b = base ] && B=build-alt/base/strata
		STRATA_IDX_SAMP_X=0 pts "x0 $b r$r" $B 1M,128K 1,8 fp8,mxfp4
	done
done | tee "$OUT/ab_x0.txt"
echo "x0 done at $SECONDS s"
for r in 1 2; do
	for b in new base nospec; do
		B=build-gpu/strata; [ $b = base ] && B=build-alt/base/strata
		sp=1; [ $b = nospec ] && sp=0
		STRATA_IDX_SPEC=$sp pts "def $b r$r" $B 1M,256K,128K 1 fp8,mxfp4
		STRATA_IDX_SPEC=$sp pts "def $b r$r" $B 128K 8 fp8,mxfp4
	done
done | tee "$OUT/ab_def.txt"
echo "default done at $SECONDS s"
STRATA_IDX_SAMP_X=0 timeout 150 build-gpu/strata bench indexer --check --ctx 128K,1M --batch 1,8 --rows 1 \
	--fmt fp8,mxfp4 --q8 --wgmma >"$OUT/check_x0.txt" 2>&1
echo "check x0 rc=$?"; grep -E "^(fp8|mxfp4) " "$OUT/check_x0.txt" | awk '{print $(NF-3)}' | sort | uniq -c
s=$SECONDS
CK_RUN_CASE=sampled timeout $((590 - SECONDS)) build-gpu/tests/kernels_gpu_indexer >"$OUT/tcase_sampled.txt" 2>&1
echo "tcase sampled rc=$? $((SECONDS - s)) s"; tail -2 "$OUT/tcase_sampled.txt"
grep -o "s: data.*" "$OUT/tcase_sampled.txt" | head -40 | tr '\n' ';' | cut -c1-1500
s=$SECONDS
CK_RUN_CASE=gpu timeout $((595 - SECONDS)) build-gpu/tests/kernels_gpu_indexer >"$OUT/tcase_gpu.txt" 2>&1
echo "tcase gpu rc=$? $((SECONDS - s)) s"; tail -2 "$OUT/tcase_gpu.txt"
