#!/usr/bin/env bash
# s41 run 2: why run 1's staged filing lost: its scan loops ended ~17 - 21 us later than
# the filter path's. One binary, alternated, 2 rounds: old (STRATA_IDX_SAMP_STAGED=0: the
# filter, strided tiles), oR1 (the same in contiguous ranges, STRATA_IDX_RANGES=1), new
# (staged, contiguous ranges: run 1's form), nS (staged on strided tiles,
# STRATA_IDX_SAMP_STRIDED=1: each CTA samples its first 16 tiles, the row's first ~38 %).
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
STRATA_IDX_SAMP_STRIDED=1 CK_RUN_CASE=sampled timeout 150 build-gpu/tests/kernels_gpu_indexer >/tmp/tcase_sampled.txt 2>&1
echo "tcase sampled (strided) rc=$? $((SECONDS - s)) s: $(tail -1 /tmp/tcase_sampled.txt)" | tee -a "$OUT/tcases_summary.txt"
cp /tmp/tcase_sampled.txt "$OUT/tcase_sampled.txt"
s=$SECONDS
STRATA_IDX_SAMP_STRIDED=1 timeout 120 build-gpu/strata bench indexer --check --ctx 128K,512K,1M --batch 8,32 --rows 1 \
	--fmt fp8,mxfp4 --q8 --wgmma >"$OUT/check.txt" 2>&1
echo "check (strided) rc=$? $((SECONDS - s)) s: $(grep -E '^(fp8|mxfp4) ' "$OUT/check.txt" | awk '{print $(NF-3)}' | sort | uniq -c | tr '\n' ' ')"
pts() { # LABEL STAGED RANGES STRIDED CTX BATCH
	STRATA_IDX_SAMP_STAGED=$2 STRATA_IDX_RANGES=$3 STRATA_IDX_SAMP_STRIDED=$4 timeout 90 build-gpu/strata \
		bench indexer --ctx "$5" --batch "$6" --rows 1 --fmt mxfp4,fp8 --q8 --wgmma 2>&1 |
		grep -E "^(fp8|mxfp4) " | awk -v l="$1" '{print l, $1, $3, $4, "graph", $9, "eff", $14, $(NF-5), $(NF-4)}'
}
for r in 1 2; do
	for b in 8; do
		pts "old r$r" 0 "" 0 1M,512K $b
		pts "oR1 r$r" 0 1 0 1M,512K $b
		pts "new r$r" 1 "" 0 1M,512K $b
		pts "nS  r$r" 1 "" 1 1M,512K $b
	done
	pts "old r$r" 0 "" 0 128K 32
	pts "nS  r$r" 1 "" 1 128K 32
done | tee "$OUT/ab.txt"
echo "a/b done at $SECONDS s"
for cfg in "1 0" "1 1"; do
	set -- $cfg
	for f in mxfp4 fp8; do
		echo "== 1M batch 8 $f staged=$1 strided=$2"
		STRATA_IDX_SAMP_STAGED=$1 STRATA_IDX_SAMP_STRIDED=$2 STRATA_IDX_TRACE=1 timeout 60 build-gpu/strata bench indexer \
			--ctx 1M --batch 8 --rows 1 --fmt $f --q8 --wgmma --reps 3 2>&1 | grep -E "idx-" | tail -8
	done
done >"$OUT/traces.txt" 2>&1
echo "done at $SECONDS s"
