#!/usr/bin/env bash
# Session 33 run 1: the sampled tail (fused one-row scans file every score at or above a
# bound taken from a sample of the CTAs' first tiles; no histogram, no row barrier) against
# the row barrier (STRATA_IDX_SAMP=0, the same binary): --check at the fused points,
# alternated rounds, timelines, the GPU test's "sampled" tcase. Carry .deps.
set -u
OUT=${OUT:-$PWD/gpu-out}
mkdir -p "$OUT"
export LD_LIBRARY_PATH=$PWD/.deps/usr/lib/x86_64-linux-gnu
cmake -S . -B build-gpu -DCMAKE_PREFIX_PATH="$PWD/.deps/usr" -DCMAKE_CUDA_ARCHITECTURES=90 \
	-DCMAKE_BUILD_TYPE=Release >/dev/null 2>&1 &&
	cmake --build build-gpu -j16 --target strata_cli kernels_gpu_indexer >"$OUT/build.log" 2>&1 ||
	{ tail -30 "$OUT/build.log"; exit 1; }
echo "built $(date +%T)"
B=build-gpu/strata
timeout 150 $B bench indexer --check --ctx 32K,128K,512K,1M --batch 1,8 --rows 1 \
	--fmt fp8,mxfp4 --q8 --wgmma >"$OUT/check.txt" 2>&1
echo "check rc=$?"
grep -E "^(fp8|mxfp4) " "$OUT/check.txt" | awk '{print "check", $1, $3, $4, $5, $9, $(NF-3)}'
pts() { # LABEL CTX BATCH ROWS FMT
	timeout 100 $B bench indexer --ctx "$2" --batch "$3" --rows "$4" --fmt "$5" --q8 --wgmma 2>&1 |
		grep -E "^(fp8|mxfp4) " | awk -v l="$1" '{print l, $1, $3, $4, "rows", $5, "graph", $9, "eff", $14, $(NF-5), $(NF-4)}'
}
for i in 1 2; do
	for v in 0 1; do
		STRATA_IDX_SAMP=$v pts "samp$v r$i" 1M,512K,128K 1 1 fp8,mxfp4
		STRATA_IDX_SAMP=$v pts "samp$v r$i" 128K,32K 8 1 fp8,mxfp4
		STRATA_IDX_SAMP=$v pts "samp$v r$i" 32K 32 1 fp8
	done
done | tee "$OUT/ab.txt"
echo "ab done $(date +%T)"
for v in 0 1; do
	for f in fp8 mxfp4; do
		STRATA_IDX_SAMP=$v STRATA_IDX_TRACE=1 timeout 60 $B bench indexer --ctx 1M --batch 1 \
			--rows 1 --fmt $f --q8 --wgmma --reps 8 2>&1 | grep -E "idx-trace" | tail -2 |
			sed "s/^/samp$v 1M b1 $f /"
	done
	STRATA_IDX_SAMP=$v STRATA_IDX_TRACE=1 timeout 60 $B bench indexer --ctx 128K --batch 8 \
		--rows 1 --fmt fp8 --q8 --wgmma --reps 8 2>&1 | grep -E "idx-trace" | tail -2 |
		sed "s/^/samp$v 128K b8 fp8 /"
done >"$OUT/traces.txt"
echo "traces done $(date +%T)"
CK_RUN_CASE=sampled timeout 200 build-gpu/tests/kernels_gpu_indexer >"$OUT/tcase_sampled.txt" 2>&1
echo "tcase sampled rc=$?"; tail -3 "$OUT/tcase_sampled.txt"
