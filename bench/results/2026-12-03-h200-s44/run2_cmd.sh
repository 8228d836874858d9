#!/usr/bin/env bash
# s44 run 2: the filter kernel's loop with each thread classing its scores (2 bits a
# slot) and its places from one warp scan (V2, the default in this tree) against the
# ballot-a-slot loop (STRATA_IDX_FILTER_V1=1, head's), one binary, alternated; and V2
# with the select counting the second level from the candidate list (STRATA_IDX_H2OWN=1:
# no bin-2 counting or flush in the filter). Then the indexer tcases and --check (V2;
# gpu and --check also with H2OWN), traces (fp1: a filter CTA's first round classed,
# fat: its places taken), one-row points on the filter path. Ordered by need: what a
# landing needs first (the device time left was short).
set -u
OUT=${OUT:-$PWD/gpu-out}
mkdir -p "$OUT"
export LD_LIBRARY_PATH=$PWD/.deps/usr/lib/x86_64-linux-gnu
cmake -S . -B build-gpu -DCMAKE_PREFIX_PATH=$PWD/.deps/usr -DCMAKE_CUDA_ARCHITECTURES=90 \
	-DCMAKE_BUILD_TYPE=Release >/dev/null 2>&1 || { echo "configure failed"; exit 1; }
cmake --build build-gpu -j16 --target strata_cli kernels_gpu_indexer >/tmp/build.log 2>&1 ||
	{ grep -E "error" /tmp/build.log | head; tail -20 /tmp/build.log; exit 1; }
echo "built in $SECONDS s"
pts() { # LABEL ENV CTX BATCH ROWS
	env $2 timeout 40 build-gpu/strata bench indexer --ctx $3 --batch $4 --rows $5 \
		--fmt fp8 --q8 --wgmma 2>&1 |
		grep -E "^(fp8|mxfp4) " | awk -v l="$1" '{print l, $1, $3, $4, $5, "graph", $9, "eff", $14, $(NF-5), $(NF-4)}'
}
tcase() { # NAME TAG ENV
	local s=$SECONDS
	env $3 CK_RUN_CASE=$1 timeout 150 build-gpu/tests/kernels_gpu_indexer >"$OUT/tcase_$1_$2.txt" 2>&1
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
for r in 1 2; do
	pts "v2 r$r" "" 512K,128K 8,32 2
	pts "v1 r$r" STRATA_IDX_FILTER_V1=1 512K,128K 8,32 2
	pts "h2 r$r" STRATA_IDX_H2OWN=1 512K,128K 8,32 2
done | tee "$OUT/ab2.txt"
echo "ab2 done at $SECONDS s"
tcase gpu v2 ""
check v2 ""
tcase sampled v2 ""
check h2 STRATA_IDX_H2OWN=1
tcase gpu h2 STRATA_IDX_H2OWN=1
trc() { # LABEL ENV CTX BATCH ROWS
	echo "== $1"
	env $2 STRATA_IDX_TRACE=1 timeout 40 build-gpu/strata bench indexer \
		--ctx $3 --batch $4 --rows $5 --fmt fp8 --q8 --wgmma --reps 3 2>&1 | grep -E "idx-trace" | tail -2 | cut -c1-900
}
{
	trc "512K b8 2 rows v2" "" 512K 8 2
	trc "128K b32 2 rows v2" "" 128K 32 2
	trc "512K b8 2 rows h2" STRATA_IDX_H2OWN=1 512K 8 2
	trc "128K b32 2 rows h2" STRATA_IDX_H2OWN=1 128K 32 2
} >"$OUT/traces.txt" 2>&1
cut -c1-700 "$OUT/traces.txt"
{
	for v in "v2 " "v1 STRATA_IDX_FILTER_V1=1" "h2 STRATA_IDX_H2OWN=1"; do
		set -- $v
		pts "$1 1row" "${2:-}" 1M 8 1
		pts "$1 1row" "${2:-}" 512K 32 1
	done
} | tee "$OUT/ab1.txt"
echo "ab1 done at $SECONDS s"
tcase ranges v2 ""
tcase copies v2 ""
echo "done at $SECONDS s"
