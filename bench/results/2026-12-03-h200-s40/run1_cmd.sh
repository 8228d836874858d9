#!/usr/bin/env bash
# Prepared in session 39, not run (its device time ran out). First, here:
#   git apply bench/results/2026-12-02-h200-s39/last-tile-sleep.patch
#   rm -rf build-alt/base-src && mkdir -p build-alt/base-src && git archive HEAD | tar -x -C build-alt/base-src
# The patch: the two-set loop's last tile converts nothing again (s39 run 6: MXFP4 32K,
# one tile a CTA, 11.8 us against 11.6 before the split conversion), and the sampler's
# poll sleep 100 ns by default (run 6: MXFP4 128K / 256K 0.3 - 0.4 us faster at 0 or 100
# ns; 1M not measured). new = the patched tree; s500: the same with
# STRATA_IDX_SAMP_SLEEP=500 (HEAD's default); base = HEAD. 2 rounds; the `sampled` and
# `gpu` tcases; --check at 8 points. ~150 s after the start. Carry .deps,
# build-alt/base-src. Land the patch only where new beats base at 32K and is no slower
# at 1M.
set -u
OUT=${OUT:-$PWD/gpu-out}
mkdir -p "$OUT"
export LD_LIBRARY_PATH=$PWD/.deps/usr/lib/x86_64-linux-gnu
cfg() { cmake -S "$1" -B "$2" -DCMAKE_PREFIX_PATH=$PWD/.deps/usr -DCMAKE_CUDA_ARCHITECTURES=90 \
	-DCMAKE_BUILD_TYPE=Release >/dev/null 2>&1; }
cfg . build-gpu && cfg build-alt/base-src build-alt/base || { echo "configure failed"; exit 1; }
cmake --build build-gpu -j12 --target strata_cli kernels_gpu_indexer >/tmp/build_new.log 2>&1 &
cmake --build build-alt/base -j4 --target strata_cli >/tmp/build_base.log 2>&1 || { tail -20 /tmp/build_base.log; exit 1; }
wait $! || { tail -20 /tmp/build_new.log; exit 1; }
echo "built in $SECONDS s"
pts() { # LABEL BIN CTX BATCH FMT
	timeout 60 "$2" bench indexer --ctx "$3" --batch "$4" --rows 1 --fmt "$5" --q8 --wgmma 2>&1 |
		grep -E "^(fp8|mxfp4) " | awk -v l="$1" '{print l, $1, $3, $4, "graph", $9, "eff", $14, $(NF-5), $(NF-4)}'
}
for r in 1 2; do
	pts "new r$r" build-gpu/strata 1M,256K,128K,32K 1 mxfp4,fp8
	pts "base r$r" build-alt/base/strata 1M,256K,128K,32K 1 mxfp4,fp8
	STRATA_IDX_SAMP_SLEEP=500 pts "s500 r$r" build-gpu/strata 1M,256K,128K 1 mxfp4,fp8
done | tee "$OUT/ab.txt"
echo "a/b done at $SECONDS s"
for c in sampled gpu; do
	s=$SECONDS
	CK_RUN_CASE=$c timeout 70 build-gpu/tests/kernels_gpu_indexer >"/tmp/tcase_$c.txt" 2>&1
	echo "tcase $c rc=$? $((SECONDS - s)) s: $(tail -1 /tmp/tcase_$c.txt)" | tee -a "$OUT/tcases_summary.txt"
	(echo "== tcase $c"; cat "/tmp/tcase_$c.txt") >>"$OUT/tcases.txt"
done
timeout 30 build-gpu/strata bench indexer --check --ctx 32K,1M --batch 1,8 --rows 1 \
	--fmt fp8,mxfp4 --q8 --wgmma >"$OUT/check.txt" 2>&1
echo "check rc=$?: $(grep -E '^(fp8|mxfp4) ' "$OUT/check.txt" | awk '{print $(NF-3)}' | sort | uniq -c | tr '\n' ' ')"
echo "done at $SECONDS s"
# s40: the SASS stall samples of the select and of the sampled MXFP4 scan (1M, batch 1).
for k in select_list scan_rs; do
	s=$SECONDS
	timeout 100 ncu --clock-control none -k "regex:$k" --launch-skip 4 -c 1 --section SourceCounters \
		--section WarpStateStats --import-source no -f -o /tmp/p_$k build-gpu/strata bench indexer \
		--ctx 1M --batch 1 --rows 1 --fmt mxfp4 --q8 --wgmma --reps 3 >/tmp/ncu_$k.log 2>&1
	echo "ncu $k rc=$? $((SECONDS - s)) s"
	[ -f /tmp/p_$k.ncu-rep ] && ncu -i /tmp/p_$k.ncu-rep --page source --csv --print-source sass 2>&1 |
		gzip >"$OUT/src_$k.csv.gz"
done
echo "all done at $SECONDS s"
