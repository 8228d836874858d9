#!/usr/bin/env bash
# s45 run 1: the filter and select as one thread-block cluster a row (filter_cl_kernel;
# by default where a row's filter CTAs fit a cluster of 8). Correctness first (the new
# cluster tcase, every shape through clusters of 8 / 16 / 2), then one binary A/B,
# alternated: default (STRATA_IDX_FCL=8), FCL=0 (filter_kernel, head's path), FCL=16
# (the 16-row shapes as clusters of 16), FCL_ALL=1 (those as clusters of 8, two rounds a
# CTA); traces; --check; the gpu and sampled tcases.
set -u
OUT=${OUT:-$PWD/gpu-out}
mkdir -p "$OUT"
export LD_LIBRARY_PATH=$PWD/.deps/usr/lib/x86_64-linux-gnu
cmake -S . -B build-gpu -DCMAKE_PREFIX_PATH=$PWD/.deps/usr -DCMAKE_CUDA_ARCHITECTURES=90 \
	-DCMAKE_BUILD_TYPE=Release >/dev/null 2>&1 || { echo "configure failed"; exit 1; }
cmake --build build-gpu -j16 --target strata_cli kernels_gpu_indexer >/tmp/build.log 2>&1 ||
	{ grep -E "error" /tmp/build.log | head; tail -20 /tmp/build.log; exit 1; }
echo "built in $SECONDS s"
pts() { # LABEL ENV CTX BATCH ROWS [FMT]
	env $2 timeout 40 build-gpu/strata bench indexer --ctx $3 --batch $4 --rows $5 \
		--fmt ${6:-fp8} --q8 --wgmma 2>&1 |
		grep -E "^(fp8|mxfp4) " | awk -v l="$1" '{print l, $1, $3, $4, $5, "graph", $9, "eff", $14, $(NF-5), $(NF-4)}'
}
tcase() { # NAME TAG ENV TIMEOUT
	local s=$SECONDS
	env $3 CK_RUN_CASE=$1 timeout ${4:-150} build-gpu/tests/kernels_gpu_indexer >"$OUT/tcase_$1_$2.txt" 2>&1
	echo "tcase $1 ($2) rc=$? $((SECONDS - s)) s: $(tail -1 "$OUT/tcase_$1_$2.txt")" | tee -a "$OUT/tcases_summary.txt"
	grep -iE "fail|error" "$OUT/tcase_$1_$2.txt" | head -3
}
check() { # TAG ENV
	local s=$SECONDS
	env $2 timeout 60 build-gpu/strata bench indexer --check --ctx 512K,128K --batch 8,32 --rows 2,1 \
		--fmt fp8 --q8 --wgmma >"$OUT/check_$1.txt" 2>&1
	echo "check $1 rc=$? $((SECONDS - s)) s: $(grep -E '^(fp8|mxfp4) ' "$OUT/check_$1.txt" | awk '{print $3, $4, $5, $(NF-3)}' | tr '\n' ' ')"
	grep "# check" "$OUT/check_$1.txt"
}
tcase cluster cl "" 240
for r in 1 2; do
	pts "def r$r" "" 512K,128K 8,32 2
	pts "fcl0 r$r" STRATA_IDX_FCL=0 512K,128K 8,32 2
	pts "fcl16 r$r" STRATA_IDX_FCL=16 512K,128K 8 2
	pts "all8 r$r" "STRATA_IDX_FCL_ALL=1" 512K,128K 8 2
done | tee "$OUT/ab2.txt"
echo "ab2 done at $SECONDS s"
trc() { # LABEL ENV CTX BATCH ROWS
	echo "== $1"
	env $2 STRATA_IDX_TRACE=1 timeout 40 build-gpu/strata bench indexer \
		--ctx $3 --batch $4 --rows $5 --fmt fp8 --q8 --wgmma --reps 3 2>&1 | grep -E "idx-trace" | tail -2 | cut -c1-900
}
{
	trc "128K b32 2 rows cluster" "" 128K 32 2
	trc "512K b8 2 rows cluster16" STRATA_IDX_FCL=16 512K 8 2
} >"$OUT/traces.txt" 2>&1
cut -c1-700 "$OUT/traces.txt"
check def ""
{
	for r in 1 2; do
		pts "def r$r" "" 128K,512K 32 1 mxfp4
		pts "fcl0 r$r" STRATA_IDX_FCL=0 128K,512K 32 1 mxfp4
		pts "def r$r" "" 128K 64 2
		pts "fcl0 r$r" STRATA_IDX_FCL=0 128K 64 2
	done
} | tee "$OUT/ab1.txt"
echo "ab1 done at $SECONDS s"
tcase gpu def ""
tcase sampled def ""
echo "done at $SECONDS s"
