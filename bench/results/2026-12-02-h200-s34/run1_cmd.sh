#!/usr/bin/env bash
# Session 34 run 1: s33's poll-probe.cu (is a CTA of a full one-wave grid slow to read
# sample words, by its age on the SM or by its loads?), then the sampled tail with the
# sampling CTA as its row's first block (s33's sampled-tail-first.patch applied to the
# tree) against main (8448896's kernels, built in the same call) and the row barrier in
# the same binary (STRATA_IDX_SAMP=0): --check, rounds, timelines, the "sampled" and "gpu"
# tcases. Carry .deps and build-alt.
set -u
OUT=${OUT:-$PWD/gpu-out}
mkdir -p "$OUT"
"$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)" -O3 -arch=sm_90a -o /tmp/poll-probe bench/results/2026-12-02-h200-s33/poll-probe.cu &&
	timeout 60 /tmp/poll-probe >"$OUT/probe.txt" 2>&1
echo "probe rc=$?"; cat "$OUT/probe.txt"
export LD_LIBRARY_PATH=$PWD/.deps/usr/lib/x86_64-linux-gnu
(cmake -S build-alt/main -B build-alt/bmain -DCMAKE_PREFIX_PATH="$PWD/.deps/usr" \
	-DCMAKE_CUDA_ARCHITECTURES=90 -DCMAKE_BUILD_TYPE=Release -DSTRATA_REV=s34-main >/dev/null 2>&1 &&
	cmake --build build-alt/bmain -j8 --target strata_cli >"$OUT/build_main.log" 2>&1) &
cmake -S . -B build-gpu -DCMAKE_PREFIX_PATH="$PWD/.deps/usr" -DCMAKE_CUDA_ARCHITECTURES=90 \
	-DCMAKE_BUILD_TYPE=Release >/dev/null 2>&1 &&
	cmake --build build-gpu -j16 --target strata_cli kernels_gpu_indexer >"$OUT/build.log" 2>&1 ||
	{ tail -30 "$OUT/build.log"; exit 1; }
wait
[ -x build-alt/bmain/strata ] || { tail -30 "$OUT/build_main.log"; exit 1; }
echo "built $(date +%T)"
B=build-gpu/strata
timeout 100 $B bench indexer --check --ctx 32K,128K,1M --batch 1,8 --rows 1 \
	--fmt fp8,mxfp4 --q8 --wgmma >"$OUT/check.txt" 2>&1
echo "check rc=$?"
grep -E "^(fp8|mxfp4) " "$OUT/check.txt" | awk '{print "check", $1, $3, $4, $5, $9, $(NF-3)}'
pts() { # LABEL CTX BATCH ROWS FMT [BINARY]
	timeout 100 ${6:-$B} bench indexer --ctx "$2" --batch "$3" --rows "$4" --fmt "$5" --q8 --wgmma 2>&1 |
		grep -E "^(fp8|mxfp4) " | awk -v l="$1" '{print l, $1, $3, $4, "rows", $5, "graph", $9, "eff", $14, $(NF-5), $(NF-4)}'
}
for i in 1 2; do
	pts "main r$i" 1M 1 1 fp8,mxfp4 build-alt/bmain/strata
	pts "main r$i" 128K,32K 8 1 fp8 build-alt/bmain/strata
	for v in 0 1; do
		STRATA_IDX_SAMP=$v pts "samp$v r$i" 1M 1 1 fp8,mxfp4
		STRATA_IDX_SAMP=$v pts "samp$v r$i" 128K,32K 8 1 fp8
	done
done | tee "$OUT/ab.txt"
echo "ab done $(date +%T)"
for c in "1M 1 fp8" "1M 1 mxfp4" "128K 8 fp8"; do
	set -- $c
	STRATA_IDX_TRACE=1 timeout 60 $B bench indexer --ctx $1 --batch $2 --rows 1 --fmt $3 --q8 \
		--wgmma --reps 8 2>&1 | grep -E "idx-trace" | tail -2 | sed "s/^/$1 b$2 $3 /"
done >"$OUT/traces.txt"
echo "traces done $(date +%T)"
CK_RUN_CASE=sampled timeout 120 build-gpu/tests/kernels_gpu_indexer >"$OUT/tcase_sampled.txt" 2>&1
echo "tcase sampled rc=$?"; tail -2 "$OUT/tcase_sampled.txt"
CK_RUN_CASE=gpu timeout 300 build-gpu/tests/kernels_gpu_indexer >"$OUT/tcase_gpu.txt" 2>&1
echo "tcase gpu rc=$?"; tail -2 "$OUT/tcase_gpu.txt"
