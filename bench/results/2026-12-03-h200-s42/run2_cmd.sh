#!/usr/bin/env bash
# s42 run 2: run 1's stored sample with its bug fixed (samp_store only where a CTA samples
# more than one tile: run 1's one-tile FP8 sampled tails stored too and their sampler
# waited forever, so its --check and tcase timed out), each CTA sampling the fewest tiles
# the one-in-64 rule allows (nmin: 1M b8 11, 512K b8 6, 128K b32 6, b64 12; was 16), the
# traced sample timestamp only at a CTA's first and last sampled tile, and MXFP4 staged
# only with STRATA_IDX_SAMP_STAGED_MX=1. old = filter path; s16 = stored, 16 tiles; smin
# = stored, nmin (the default); batch 1 against the head's build. Trimmed to FP8
# (device time).
set -u
OUT=${OUT:-$PWD/gpu-out}
mkdir -p "$OUT"
export LD_LIBRARY_PATH=$PWD/.deps/usr/lib/x86_64-linux-gnu
cmake -S . -B build-gpu -DCMAKE_PREFIX_PATH=$PWD/.deps/usr -DCMAKE_CUDA_ARCHITECTURES=90 \
	-DCMAKE_BUILD_TYPE=Release >/dev/null 2>&1 || { echo "configure failed"; exit 1; }
# the head's kernels (build-alt/head-src: git archive of HEAD, carried), for the one-row
# batch-1 points, built beside the new tree
(cmake -S build-alt/head-src -B build-alt/head -DCMAKE_PREFIX_PATH=$PWD/.deps/usr -DCMAKE_CUDA_ARCHITECTURES=90 \
	-DCMAKE_BUILD_TYPE=Release >/dev/null 2>&1 && cmake --build build-alt/head -j8 --target strata_cli \
	>/tmp/build_head.log 2>&1) &
cmake --build build-gpu -j16 --target strata_cli kernels_gpu_indexer >/tmp/build_new.log 2>&1 ||
	{ grep -E "error" /tmp/build_new.log | head; tail -20 /tmp/build_new.log; exit 1; }
echo "built in $SECONDS s"
s=$SECONDS
timeout 120 build-gpu/strata bench indexer --check --ctx 128K,512K,1M --batch 8,32 --rows 1 \
	--fmt fp8 --q8 --wgmma >"$OUT/check.txt" 2>&1
echo "check rc=$? $((SECONDS - s)) s: $(grep -E '^(fp8|mxfp4) ' "$OUT/check.txt" | awk '{print $(NF-3)}' | sort | uniq -c | tr '\n' ' ')"
pts() { # LABEL STAGED TILES MX CTX BATCH FMT
	STRATA_IDX_SAMP_STAGED=$2 STRATA_IDX_SAMP_TILES=$3 STRATA_IDX_SAMP_STAGED_MX=$4 timeout 90 build-gpu/strata \
		bench indexer --ctx $5 --batch $6 --rows 1 --fmt $7 --q8 --wgmma 2>&1 |
		grep -E "^(fp8|mxfp4) " | awk -v l="$1" '{print l, $1, $3, $4, "graph", $9, "eff", $14, $(NF-5), $(NF-4)}'
}
for r in 1 2; do
	pts "old  r$r" 0 0 0 1M,512K 8 fp8
	pts "s16  r$r" 1 16 0 1M,512K 8 fp8
	pts "smin r$r" 1 0 0 1M,512K 8 fp8
done | tee "$OUT/ab.txt"
pts "old  r1" 0 0 0 128K 32,64 fp8 | tee -a "$OUT/ab.txt"
pts "smin r1" 1 0 0 128K 32,64 fp8 | tee -a "$OUT/ab.txt"
wait
b1() { # LABEL BIN
	timeout 90 $2 bench indexer --ctx 1M,128K --batch 1 --rows 1 --fmt mxfp4,fp8 --q8 --wgmma 2>&1 |
		grep -E "^(fp8|mxfp4) " | awk -v l="$1" '{print l, $1, $3, $4, "graph", $9, $(NF-5), $(NF-4)}'
}
for r in 1 2; do
	b1 "head r$r" build-alt/head/strata
	b1 "new  r$r" build-gpu/strata
done | tee "$OUT/b1.txt"
s=$SECONDS
CK_RUN_CASE=sampled timeout 90 build-gpu/tests/kernels_gpu_indexer >/tmp/tcase_sampled.txt 2>&1
echo "tcase sampled rc=$? $((SECONDS - s)) s: $(tail -1 /tmp/tcase_sampled.txt)" | tee -a "$OUT/tcases_summary.txt"
grep -iE "fail|error" /tmp/tcase_sampled.txt | head -5
echo "done at $SECONDS s"
