#!/usr/bin/env bash
# s41 run 3: is the staged scan's slower loop (run 2: every CTA, both formats, ~30 %)
# its sample (16 tiles a CTA, two global atomics a warp and tile, one of them on the
# row's count word)? t16: 16 tiles, the count added once a warp (samp_cnt, new here);
# a0: 16 tiles, one count add a key (runs 1 - 2); t1: one tile; old: the filter path.
# samp_staged now out of line with its fields by value (run 2's by-reference call put the
# kernel's parameters on the stack). 1M and 512K batch 8, 2 rounds; traces; --check and
# the sampled tcase.
set -u
OUT=${OUT:-$PWD/gpu-out}
mkdir -p "$OUT"
export LD_LIBRARY_PATH=$PWD/.deps/usr/lib/x86_64-linux-gnu
cmake -S . -B build-gpu -DCMAKE_PREFIX_PATH=$PWD/.deps/usr -DCMAKE_CUDA_ARCHITECTURES=90 \
	-DCMAKE_BUILD_TYPE=Release >/dev/null 2>&1 || { echo "configure failed"; exit 1; }
cmake --build build-gpu -j16 --target strata_cli kernels_gpu_indexer >/tmp/build_new.log 2>&1 ||
	{ grep -E "error" /tmp/build_new.log | head; tail -20 /tmp/build_new.log; exit 1; }
echo "built in $SECONDS s"
s=$SECONDS
timeout 120 build-gpu/strata bench indexer --check --ctx 128K,512K,1M --batch 8,32 --rows 1 \
	--fmt fp8,mxfp4 --q8 --wgmma >"$OUT/check.txt" 2>&1
echo "check rc=$? $((SECONDS - s)) s: $(grep -E '^(fp8|mxfp4) ' "$OUT/check.txt" | awk '{print $(NF-3)}' | sort | uniq -c | tr '\n' ' ')"
pts() { # LABEL STAGED TILES AGG
	STRATA_IDX_SAMP_STAGED=$2 STRATA_IDX_SAMP_TILES=$3 STRATA_IDX_SAMP_AGG=$4 timeout 90 build-gpu/strata \
		bench indexer --ctx 1M,512K --batch 8 --rows 1 --fmt mxfp4,fp8 --q8 --wgmma 2>&1 |
		grep -E "^(fp8|mxfp4) " | awk -v l="$1" '{print l, $1, $3, $4, "graph", $9, "eff", $14, $(NF-5), $(NF-4)}'
}
for r in 1 2; do
	pts "old r$r" 0 16 1
	pts "t16 r$r" 1 16 1
	pts "a0  r$r" 1 16 0
	pts "t1  r$r" 1 1 1
done | tee "$OUT/ab.txt"
for f in mxfp4 fp8; do
	echo "== 1M batch 8 $f staged (t16)"
	STRATA_IDX_SAMP_STAGED=1 STRATA_IDX_TRACE=1 timeout 60 build-gpu/strata bench indexer \
		--ctx 1M --batch 8 --rows 1 --fmt $f --q8 --wgmma --reps 3 2>&1 | grep -E "idx-" | tail -8 | cut -c1-700
	echo "== 1M batch 8 $f old"
	STRATA_IDX_SAMP_STAGED=0 STRATA_IDX_TRACE=1 timeout 60 build-gpu/strata bench indexer \
		--ctx 1M --batch 8 --rows 1 --fmt $f --q8 --wgmma --reps 3 2>&1 | grep -E "idx-" | tail -8 | cut -c1-700
done >"$OUT/traces.txt" 2>&1
s=$SECONDS
CK_RUN_CASE=sampled timeout 150 build-gpu/tests/kernels_gpu_indexer >/tmp/tcase_sampled.txt 2>&1
echo "tcase sampled rc=$? $((SECONDS - s)) s: $(tail -1 /tmp/tcase_sampled.txt)" | tee -a "$OUT/tcases_summary.txt"
echo "done at $SECONDS s"
