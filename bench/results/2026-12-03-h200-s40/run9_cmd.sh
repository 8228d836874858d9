#!/usr/bin/env bash
# s40 run 9: which part of run 8's select set-up cost 128K / 256K one row 0.1 - 0.2 us in
# the graph: new = the working tree (2faadae: run 8's new, select-prep2.patch, landed); lo =
# select-lonly.patch on 2f4448b (select_list_kernel reads only the row limit before its
# wait); base = 2f4448b (kernels as 2eaff57). 2 rounds. Carry .deps, build-alt/base-src.
set -u
OUT=${OUT:-$PWD/gpu-out}
mkdir -p "$OUT"
export LD_LIBRARY_PATH=$PWD/.deps/usr/lib/x86_64-linux-gnu
cfg() { cmake -S "$1" -B "$2" -DCMAKE_PREFIX_PATH=$PWD/.deps/usr -DCMAKE_CUDA_ARCHITECTURES=90 \
	-DCMAKE_BUILD_TYPE=Release >/dev/null 2>&1; }
rm -rf build-alt/lo-src && cp -r build-alt/base-src build-alt/lo-src &&
	patch -d build-alt/lo-src -p1 -s <bench/results/2026-12-03-h200-s40/select-lonly.patch || { echo "patch failed"; exit 1; }
cfg . build-gpu && cfg build-alt/base-src build-alt/base && cfg build-alt/lo-src build-alt/lo || { echo "configure failed"; exit 1; }
cmake --build build-gpu -j12 --target strata_cli kernels_gpu_indexer >/tmp/build_new.log 2>&1 &
nw=$!
cmake --build build-alt/lo -j4 --target strata_cli >/tmp/build_lo.log 2>&1 &
lo=$!
cmake --build build-alt/base -j4 --target strata_cli >/tmp/build_base.log 2>&1 || { tail -20 /tmp/build_base.log; exit 1; }
wait $lo || { tail -20 /tmp/build_lo.log; exit 1; }
wait $nw || { grep -E "error" /tmp/build_new.log | head; tail -20 /tmp/build_new.log; exit 1; }
echo "built in $SECONDS s"
s=$SECONDS
CK_RUN_CASE=sampled timeout 90 build-gpu/tests/kernels_gpu_indexer >/tmp/tcase_sampled.txt 2>&1
echo "tcase sampled rc=$? $((SECONDS - s)) s: $(tail -1 /tmp/tcase_sampled.txt)" | tee -a "$OUT/tcases_summary.txt"
cp /tmp/tcase_sampled.txt "$OUT/tcase_sampled.txt"
timeout 40 build-gpu/strata bench indexer --check --ctx 32K,128K,1M --batch 1,8 --rows 1 \
	--fmt fp8,mxfp4 --q8 --wgmma >"$OUT/check.txt" 2>&1
echo "check rc=$?: $(grep -E '^(fp8|mxfp4) ' "$OUT/check.txt" | awk '{print $(NF-3)}' | sort | uniq -c | tr '\n' ' ')"
pts() { # LABEL BIN CTX BATCH FMT
	timeout 60 "$2" bench indexer --ctx "$3" --batch "$4" --rows 1 --fmt "$5" --q8 --wgmma 2>&1 |
		grep -E "^(fp8|mxfp4) " | awk -v l="$1" '{print l, $1, $3, $4, "graph", $9, "eff", $14, $(NF-5), $(NF-4)}'
}
for r in 1 2; do
	pts "new r$r" build-gpu/strata 1M,256K,128K 1 mxfp4,fp8
	pts "base r$r" build-alt/base/strata 1M,256K,128K 1 mxfp4,fp8
	pts "lo r$r" build-alt/lo/strata 1M,256K,128K 1 mxfp4,fp8
	pts "new r$r" build-gpu/strata 128K 8 mxfp4,fp8
	pts "base r$r" build-alt/base/strata 128K 8 mxfp4,fp8
	pts "lo r$r" build-alt/lo/strata 128K 8 mxfp4,fp8
	done | tee "$OUT/ab.txt"
echo "a/b done at $SECONDS s"
s=$SECONDS
CK_RUN_CASE=gpu timeout 120 build-gpu/tests/kernels_gpu_indexer >/tmp/tcase_gpu.txt 2>&1
echo "tcase gpu rc=$? $((SECONDS - s)) s: $(tail -1 /tmp/tcase_gpu.txt)" | tee -a "$OUT/tcases_summary.txt"
grep -v "^ok\|passed" /tmp/tcase_gpu.txt | tail -30 > "$OUT/tcase_gpu_tail.txt"
echo "done at $SECONDS s"
